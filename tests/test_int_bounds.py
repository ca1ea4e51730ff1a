"""An int argument that changes from call to call used as a size (a slice bound, `narrow`'s
length, `arange(n)`, `torch.tensor([pos])`): after one trace as a run-time number that had to
read it, it is a size symbol (`DynamicDims.number_size`), so its values of 2 or more share one
program, answering as eager at every value (negative, zero, past the end, equal to the size).
Its values of -2 or less share another (the negation of a size symbol, keyed apart)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import squall

# negative, 0, 1, inside, equal to the size (8), past it, and back
VALUES = [1, 2, 3, 4, 5, 6, 7, 0, -1, -3, 8, 9, 2, 20, 5]


def _misses(fn, calls):
    jf = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # the recompiles before it is a size
        for args in calls:
            assert_close(jf(*args), fn(*args))
    return jf.cache_info().misses


@pytest.mark.parametrize("name, fn, most", [
    # compiles: 1 and 2 by value, the trace as a number, the size, then 0, -1, -3, and past the end
    ("x[:, :n]", lambda x, n: x[:, :n] * 2, 8),
    ("x[n:]", lambda x, n: x[n:] * 2, 8),
    ("x[n:n+2]", lambda x, n: x[n : n + 2] + 1, 8),
])
def test_a_changing_int_as_a_slice_bound_compiles_once_for_its_sizes(name, fn, most):
    calls = [(torch.randn(8, 8), n) for n in VALUES]
    assert _misses(fn, calls) <= most  # 15 calls: one compile per value before


def test_narrow_and_arange_with_a_changing_length():
    calls = [(torch.randn(12, 3), n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 3)]
    assert _misses(lambda x, n: x.narrow(0, 1, n) * 2, calls) <= 5
    assert _misses(lambda x, n: x.sum() + torch.arange(n), calls) <= 5
    assert _misses(lambda x, n: x * torch.tensor(n), calls) <= 5


def test_a_slice_bound_under_gradients():
    def fn(x, n):
        return (x[:, :n] * x[:, :n]).sum()

    assert _gradients_as_eagers(fn, VALUES, (4, 8)).cache_info().misses <= 8


@pytest.mark.parametrize("how", ["slice", "index_copy_"])
def test_a_static_cache_written_at_pos_compiles_once_for_its_positions(how):
    def step(cache, kv, pos):
        if how == "slice":
            cache[:, pos : pos + 1] = kv
        else:
            cache.index_copy_(1, torch.tensor([pos]), kv)
        return cache[:, : pos + 1].sum(1)

    jf = squall.jit(step)
    eager_cache, jit_cache = torch.zeros(2, 20, 4), torch.zeros(2, 20, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for pos in range(20):
            kv = torch.randn(2, 1, 4)
            assert_close(jf(jit_cache, kv, pos), step(eager_cache, kv, pos))
            assert torch.equal(jit_cache, eager_cache)
    assert jf.cache_info().misses <= 4  # 0, 1, the trace as a number, the size (21 before)


def test_a_float_read_of_an_int_stays_keyed_by_value_without_a_size_detour():
    calls = [(torch.randn(3), n) for n in range(1, 9)]
    assert _misses(lambda x, n: x * float(n), calls) == 9  # float(n) needs the value: 1, the trace as a number, then by value: as before, no size detour


def test_a_bool_slice_bound_is_read_as_its_int_as_eager():
    def f(x, flag):
        return x[:flag], x[flag:3], x[::True]

    jf, x = squall.jit(f), torch.arange(5.0)
    for flag in (True, False, True):
        for got, want in zip(jf(x, flag), f(x, flag)):
            torch.testing.assert_close(got, want)


NEGATIVE = (-1, -2, -3, -4, -5, -6, -7, -8, -9, -20, -3)


@pytest.mark.parametrize("name, fn, values, most", [
    # compiles: -1 and -2 by value, the trace as a number, the size, then past the start
    ("x[:, :n]", lambda x, n: x[:, :n] * 2, NEGATIVE, 5),
    ("x[n:]", lambda x, n: x[n:] * 2, NEGATIVE, 5),
    ("x[:, n:-1]", lambda x, n: x[:, n:-1] * 2, NEGATIVE, 5),
    ("x.narrow(0, n, 2)", lambda x, n: x.narrow(0, n, 2) * 2, NEGATIVE[1:8], 3),
])
def test_a_negative_int_as_a_slice_bound_compiles_once_for_its_values(name, fn, values, most):
    # a value of -2 or less is the negation of a size symbol (`x[:, :-s0]`), keyed apart from the
    # positive ones: one program for -2 .. -8; -1 by value, as 1 is
    calls = [(torch.randn(8, 8), n) for n in values]
    assert _misses(fn, calls) <= most  # one compile per value before


def test_a_negative_slice_bound_under_gradients():
    def fn(x, n):
        return (x[n:] * x[n:]).sum()

    assert _gradients_as_eagers(fn, (-2, -3, -4, -5, -7, 3, -6, 4), (8, 4)).cache_info().misses <= 5  # 8 before: -2 by value, the number trace, the size, the positive ones


@pytest.mark.parametrize("mode", ["constant", "replicate", "reflect", "circular"])
def test_a_changing_int_as_a_pad_trains_as_eager(mode):
    # the backward computes only with 8 + s0 (a slice of the cotangent), never s0 alone: its
    # generated code had no input to read s0 from, and raised NotImplementedError at the third call
    def fn(x, n):
        return F.pad(x[None], (0, n), mode=mode)[0] * 2

    jf = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for n in (2, 3, 4, 5, 6, 7, 3):
            x = torch.randn(4, 8, requires_grad=True)
            xj = x.detach().clone().requires_grad_()
            assert_close(jf(xj, n), fn(x, n))
            fn(x, n).sum().backward()
            jf(xj, n).sum().backward()
            assert_close(xj.grad, x.grad)
    assert jf.cache_info().misses <= 3  # 2 by value, the trace as a number, the size


def _gradients_as_eagers(fn, values, shape):
    """squall.jit(fn) called with x of `shape` and each int of `values`: its answers and x's
    gradients asserted equal to eager's; the jitted function."""
    jf = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for n in values:
            x = torch.randn(*shape, requires_grad=True)
            xj = x.detach().clone().requires_grad_()
            assert_close(jf(xj, n), fn(x, n))
            fn(x, n).backward()
            jf(xj, n).backward()
            assert_close(xj.grad, x.grad)
    return jf
