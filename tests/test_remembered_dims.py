"""$SQUALL_REMEMBER_DYNAMIC: a new jit of a program starts with the dimensions its earlier jits made
symbolic, in this process or an earlier one (squall.runtime.dims_profile)."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.proxies import type_string
from squall.runtime import dims_profile


@pytest.fixture
def remembering(monkeypatch, tmp_path):
    monkeypatch.setenv(dims_profile.REMEMBER_ENV, "1")
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))
    dims_profile.forget()
    yield tmp_path
    dims_profile.forget()


def _as_in_a_new_process():
    # what this process learned and read from disk is gone; the file stays
    dims_profile._learned.clear()
    dims_profile._stores.clear()


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


def test_on_by_default_and_off_when_set_so(monkeypatch, tmp_path):
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(dims_profile.REMEMBER_ENV, raising=False)
    assert dims_profile.remember_enabled()
    monkeypatch.setenv(dims_profile.REMEMBER_ENV, "0")
    dims_profile.forget()
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)]) == 2
    assert dims_profile.learned(dims_profile.program_code(_scaled_sums)) == {}
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(3, 10), (5, 11)]) == 2
    assert not (tmp_path / "dynamic_dims.json").exists()


def test_what_was_learned_is_read_back_from_disk(remembering):
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)]) == 2
    kept = json.loads((remembering / "dynamic_dims.json").read_text())
    assert list(kept.values()) == [{"dims": {"('args', 0)": [0, 1]}}]
    _as_in_a_new_process()
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(3, 10), (5, 11), (6, 12)]) == 1


def test_a_damaged_file_costs_only_learning_again(remembering):
    (remembering / "dynamic_dims.json").write_text('{"x": {"dims": {"not a path(": [0], "(1,)": "no"}}, "y": 3')
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)]) == 2
    _as_in_a_new_process()
    assert _run(squall.jit(_scaled_sums), _scaled_sums, [(3, 10), (5, 11)]) == 1


def test_an_unwritable_cache_folder_still_remembers_for_the_process(monkeypatch, tmp_path):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setenv(dims_profile.REMEMBER_ENV, "1")
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(blocked / "cache"))
    dims_profile.forget()
    try:
        assert _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)]) == 2
        assert _run(squall.jit(_scaled_sums), _scaled_sums, [(3, 10), (5, 11)]) == 1
    finally:
        dims_profile.forget()


_STREAM = textwrap.dedent("""
    import torch, squall

    def scaled_sums(x):
        return (x * 2).sum(-1) + 1

    jf = squall.jit(scaled_sums)
    for n in (8, 9, 10, 11):
        jf(torch.randn(4, n))
    print(jf.cache_info().misses)
""")


def test_a_later_process_running_the_same_code_compiles_once(tmp_path):
    script = tmp_path / "stream.py"
    script.write_text(_STREAM)
    env = {**os.environ, "SQUALL_CACHE_DIR": str(tmp_path / "cache"), "SQUALL_REMEMBER_DYNAMIC": ""}  # the default
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    assert [r.stdout.split()[-1] for r in runs] == ["2", "1"]  # static then symbolic; then symbolic at once
    script.write_text(_STREAM.replace("* 2", "* 3"))  # edited code: learned afresh
    again = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert again.stdout.split()[-1] == "2", again.stderr[-2000:]


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


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # one code object for every function it decorates
        return fn(*args, **kwargs)

    return wrapper


@_logged
def _decorated_sums(x):
    return x.sum(-1) * 3


@_logged
def _decorated_means(x):
    return x.mean(-1) * 3


def test_decorated_functions_learn_apart_by_the_code_they_wrap(remembering):
    assert dims_profile.program_code(_decorated_sums) != dims_profile.program_code(_decorated_means)
    assert _run(squall.jit(_decorated_sums), _decorated_sums.__wrapped__, [(4, 8), (4, 9)]) == 2
    assert _run(squall.jit(_decorated_means), _decorated_means.__wrapped__, [(3, 10), (5, 11)]) == 2  # not the sums': started static
    assert _run(squall.jit(_decorated_sums), _decorated_sums.__wrapped__, [(3, 10), (5, 11)]) == 1


def test_explain_says_which_dimensions_were_symbolic_from_the_first_call_and_why(remembering):
    _run(squall.jit(_scaled_sums), _scaled_sums, [(4, 8), (4, 9)])
    again = squall.jit(_scaled_sums)
    x = torch.randn(3, 10)
    again(x)
    report = squall.explain(again, x)
    assert report.remembered == ["argument 'x' dimensions 0, 1"]
    assert "symbolic from the first call, as earlier jits of this code learned" in str(report)
    assert "$SQUALL_REMEMBER_DYNAMIC=0 starts static): argument 'x' dimensions 0, 1" in str(report)
    assert squall.explain(squall.jit(_decorated_means), x).remembered == []
