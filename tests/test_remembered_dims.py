"""$SQUALL_REMEMBER_DYNAMIC: a new jit of a program starts with the dimensions its earlier jits made
symbolic (squall.runtime.dims_profile)."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.proxies import type_string
from squall.runtime import dims_profile


@pytest.fixture
def remembering(monkeypatch):
    monkeypatch.setenv(dims_profile.REMEMBER_ENV, "1")
    dims_profile.forget()
    yield
    dims_profile.forget()


def _scaled_sums(x):
    return (x * 2).sum(-1) + 1


def _run(jf, fn, shapes):
    for shape in shapes:
        x = torch.randn(shape)
        assert_close(jf(x), fn(x))
    return jf.cache_info().misses


def test_a_new_jit_of_the_same_function_compiles_the_learned_dimensions_symbolic_at_once(remembering):
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)]) == 2  # static, then symbolic
    assert dims_profile.learned(dims_profile.program_code(_scaled_sums)) == {("args", 0): frozenset({0, 1})}
    again = squall.jit(_scaled_sums)
    assert _run(again, _scaled_sums, [(3, 10), (5, 11), (6, 12)]) == 1
    assert type_string(squall.last_traces(again).traced.inputs[0]) == 'cpu f32[s0, s1]'


def test_off_by_default_a_new_jit_starts_static(monkeypatch):
    monkeypatch.delenv(dims_profile.REMEMBER_ENV, raising=False)
    dims_profile.forget()
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)]) == 2
    assert dims_profile.learned(dims_profile.program_code(_scaled_sums)) == {}
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(3, 10), (5, 11)]) == 2


def test_dynamic_false_and_true_are_not_changed_by_what_was_learned(remembering):
    _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)])
    assert _run(squall.jit(_scaled_sums, dynamic=False), _scaled_sums, [(3, 10), (5, 11)]) == 2
    assert _run(squall.jit(_scaled_sums, dynamic=True), _scaled_sums, [(3, 10), (5, 11)]) == 1


class _Projection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x)).mean(1)


def test_another_instance_of_a_module_class_starts_with_what_the_first_learned(remembering):
    first, second = _Projection(), _Projection()
    with torch.no_grad():
        assert _run(squall.jit(first), first, [(2, 5, 8), (2, 7, 8)]) == 2
        assert _run(squall.jit(second), second, [(3, 6, 8), (4, 9, 8)]) == 1


def test_forget_clears_what_was_learned(remembering):
    _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)])
    dims_profile.forget()
    assert dims_profile.learned(dims_profile.program_code(_scaled_sums)) == {}
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(3, 10), (5, 11)]) == 2


def _halved_width(x):
    return x.sum(0) * (x.shape[1] * 0.5)  # a float product of a size: its exact value, guarded


def test_a_dimension_that_had_to_be_keyed_by_value_is_unlearned(remembering):
    jf = squall.jit(_halved_width)
    _run(jf, _halved_width, [(4, 8), (5, 9)])
    assert dims_profile.learned(dims_profile.program_code(_halved_width)) == {("args", 0): frozenset({0})}
    _run(squall.jit(_halved_width), _halved_width, [(3, 10), (6, 10)])


def test_a_bad_setting_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv(dims_profile.REMEMBER_ENV, "sometimes")
    with pytest.raises(ValueError, match=r"\$SQUALL_REMEMBER_DYNAMIC must be 1/true/yes/on or 0/false/no/off, got 'sometimes'"):
        squall.jit(_scaled_sums)(torch.randn(2, 3))


def test_equal_code_from_another_file_learns_apart(remembering):
    source = "def g(x):\n    return x.sum(-1) * 3\n"
    here, there = {}, {}
    exec(compile(source, "<one file>", "exec"), here)
    exec(compile(source, "<another file>", "exec"), there)
    g, h = here["g"], there["g"]
    assert g.__code__ == h.__code__  # code objects compare by contents
    assert _run(squall.jit(g), g, [(4, 8), (4, 9)]) == 2
    assert _run(squall.jit(h), h, [(3, 10), (5, 11)]) == 2  # not g's: started static
    assert _run(squall.jit(g), g, [(3, 10), (5, 11)]) == 1
