"""A function's own state while traced: its closure variables and its attributes, read as eager
reads them and guarded; a program that assigns either runs eagerly, counted once, as in eager."""
from __future__ import annotations

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
