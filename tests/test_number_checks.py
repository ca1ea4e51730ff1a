"""A run-time number (NumberProxy) answers `isinstance(s, float)` / `isinstance(n, int)` as the
number it stands for, in any code, squall's own included: where squall's code meets one beside
a symbolic size or in an executor's checker, it must compute with it or read it guarded, never
take it for a constant of the trace."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.compiler.pipeline import compile_program
from squall.market.config import resolve_executors
from squall.proxies import NumberProxy


def _no_eager_fallback(jf, fn, calls):
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # "tracing raised ..., runs eagerly"
        for args in calls:
            assert_close(jf(*args), fn(*args))


@pytest.mark.parametrize(
    "program",
    [
        lambda x, n: x.new_zeros(x.shape[0] + n) + n,
        lambda x, n: x.new_zeros(n + x.shape[0]) - n,
        lambda x, n: x * (x.shape[0] == n),
        lambda x, n: x * 2 if x.shape[0] < n else x,
        lambda x, n: x.new_ones(x.shape[0] * n) * n,
    ],
    ids=["size_plus_number", "number_plus_size", "size_equals_number", "size_below_number", "size_times_number"],
)
def test_an_int_number_beside_a_symbolic_size_is_read_guarded(program):
    # a symbolic size once took a run-time int for an IntEnum (isinstance(n, int)) and called
    # int.__int__ on it: a TypeError, and the program ran eagerly
    jf = squall.jit(program, dynamic=True)
    _no_eager_fallback(jf, program, [(torch.randn(length, 3), n) for length, n in [(3, 2), (3, 4), (5, 4), (5, 7), (6, 5)]])
    assert jf.cache_info().size >= 1


def test_a_float_number_times_a_symbolic_size_is_not_truncated():
    # `s * n` with s a run-time float and n a symbolic size: computed with the size's value,
    # guarded; not int(s) * n, whose guard (int(s) == 1) let s = 1.25 run with 1.5's result
    torch_ex = resolve_executors(["torch"])[0]

    def program(x, s):
        return x * (s * x.shape[0]) + (x.shape[0] < s) - x.shape[1] / s

    compiled = compile_program(program, (torch.ones(3, 2), 1.5), {}, executors=[torch_ex],
                               dynamic=frozenset({("args", 1)}), dims={("args", 0): frozenset({0, 1})})
    assert any(type(p) is NumberProxy for p in compiled.traced.inputs)
    for s in (1.5, 1.25, 0.5, 7.0):
        x = torch.randn(3, 2)
        assert_close(compiled.fn(x, s), program(x, s))


@pytest.mark.parametrize(
    "program",
    [
        lambda x, s: x.abs().add(1) ** (-s),  # pow's "integer tensor, negative int exponent" check
        lambda x, s: torch.zeros(4, 5, dtype=torch.bool).masked_fill(x > 0, s > 0).float(),  # a bool number
        lambda x, s: torch.where(x > 0, s > 0, False).float() * s,
        lambda x, s: torch.full((2, 3), s) + torch.full_like(x, s).sum(),
        lambda x, s: (torch.arange(20).reshape(4, 5) - 7) // (s + 1.5),
    ],
    ids=["pow", "bool_fill", "bool_where", "full", "int_floordiv"],
)
def test_numbers_reaching_squalls_own_type_checks_match_eager(program):
    x = torch.randn(4, 5)
    jf = squall.jit(program)
    for s in (0.5, -1.25, 2.0, 3, -2):
        assert_close(jf(x, s), program(x, s), equal_nan=True)
    assert any(type(p) is NumberProxy for p in squall.last_traces(jf).traced.inputs)
