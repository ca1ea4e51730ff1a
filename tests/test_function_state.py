"""A function's own state while traced: its closure variables and its attributes, read as eager
reads them and guarded; a program that assigns either runs eagerly, counted once, as in eager."""
from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall


def _counting_closure():
    count = 0

    def step(x):
        nonlocal count
        count += 1
        return x * count

    return step, lambda: count


def test_a_nonlocal_counter_counts_once_a_call_as_in_eager():
    """`nonlocal count; count += 1` ran on the caller's variable while traced, and then again in
    the eager call that followed: twice a call (results 2, 4, 6 where eager's are 1, 2, 3)."""
    step, count = _counting_closure()
    twin, twin_count = _counting_closure()
    jitted = squall.jit(step)
    with pytest.warns(squall.SquallWarning, match=r"assigns the closure variable 'count'"):
        for _ in range(3):
            assert_close(jitted(torch.ones(2)), twin(torch.ones(2)))
            assert count() == twin_count()


def test_a_call_counter_on_the_function_counts_as_in_eager():
    """`f.calls = getattr(f, "calls", 0) + 1` set the attribute on squall's copy of the function:
    the count stayed 1, silently."""

    def counted(x):
        counted.calls = getattr(counted, "calls", 0) + 1
        return x * counted.calls

    jitted = squall.jit(counted)
    with pytest.warns(squall.SquallWarning, match=r"sets or deletes 'calls' on the function"):
        for calls in (1, 2, 3):
            assert_close(jitted(torch.ones(1)), torch.full((1,), float(calls)))
    assert counted.calls == 3


def test_a_functions_attribute_read_by_the_program_is_guarded():
    def scaled(x):
        return x * scaled.scale

    scaled.scale = 2.0
    jitted = squall.jit(scaled)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # read in the trace: before, it ran eagerly
        assert_close(jitted(torch.ones(1)), torch.full((1,), 2.0))
        scaled.scale = 3.0
        assert_close(jitted(torch.ones(1)), torch.full((1,), 3.0))
    assert jitted.cache_info().misses == 2


def test_an_attribute_set_later_on_a_function_that_had_none_is_seen():
    """The function's attributes were guarded only where it had some when traced: `f.mode = "x"`
    set after the first call was not seen."""

    def moded(x):
        return x * (3 if getattr(moded, "mode", None) == "x" else 2)

    jitted = squall.jit(moded)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        assert_close(jitted(torch.ones(1)), torch.full((1,), 2.0))
        moded.mode = "x"
        assert_close(jitted(torch.ones(1)), torch.full((1,), 3.0))
        del moded.mode
        assert_close(jitted(torch.ones(1)), torch.full((1,), 2.0))


@functools.lru_cache(maxsize=8)
def _even_positions(n):
    return torch.arange(n) * 2


def _through_a_wrapper(cached):
    """transformers' compile_compatible_method_lru_cache: a wrapper whose closure holds the cache."""

    def wrapper(*args):
        return cached(*args)

    return wrapper


class _CachedIndexModule(torch.nn.Module):
    # a staticmethod around the wrapper, as BEiT's relative position index is kept
    positions = staticmethod(_through_a_wrapper(functools.lru_cache(maxsize=8)(lambda n: torch.arange(n) * 2)))

    @functools.lru_cache(maxsize=8)  # noqa: B019 - a method under the cache, as libraries write it
    def odd_positions(self, n):
        return torch.arange(n) * 2 + 1

    def forward(self, x):
        n = x.shape[-1] // 2
        return x[:, self.positions(n)] - x[:, self.odd_positions(n)]


def _gathers_even_positions(x):
    return x[:, _even_positions(x.shape[-1] // 2)]


@pytest.mark.parametrize("program", [_gathers_even_positions, _CachedIndexModule()], ids=["global", "wrapper_and_method"])
@pytest.mark.parametrize("eager_first", [False, True], ids=["compiled_first", "eager_first"])
def test_a_function_under_lru_cache_runs_uncached_while_traced(program, eager_first):
    """The cache kept the traced tensor a trace's call returned: a later trace given it read a
    name no line of its program assigns (squall's internal error), and eager, given it, raised
    'a TensorProxy was used outside of tracing' (BEiT's relative position index at a new image size)."""
    sizes = (4, 4, 6, 5, 4, 6)
    if eager_first:
        for n in sizes:
            program(torch.randn(2, 2 * n))
    jitted = squall.jit(program)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for n in sizes:
            x = torch.randn(2, 2 * n)
            assert_close(jitted(x), program(x))
    assert jitted.cache_info().misses == 2  # the size changes once, and is symbolic from then on
