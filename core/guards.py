"""The guard: a call in a trace that checks, at run time, a value tracing speculated on.

When a program branches on a tensor's value (`if mask.all():`, `n = t.item()`) or calls an
op whose output shape depends on data (`x[mask]`), tracing reads the value from the real
inputs of the call being compiled (`squall.frontend.speculation`) and records a guard after the
call that produced it: `squall.guard("bool", (t16,), {}, True, "masking_utils.py:307")`.
The generated code computes the same value again and raises `GuardFailed` when it differs,
before anything that depended on it runs; the jitted function catches it and runs (or
compiles) a variant traced for the other value.

A guard is tagged SIDE_EFFECT, so dead-code removal keeps it, and BARRIER, so fusion never
moves a later call before it; no fusion executor implements it, so it is never fused; the
torch executor runs it.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from .proxies import ABSENT, NumberProxy, real_tensor
from .symbol import Symbol, Tags

__all__ = ["ABSENT", "GUARD", "READ", "GuardFailed", "READERS", "guard_impl", "has_contiguous_strides", "read_impl", "same_value"]


class GuardFailed(Exception):
    """A guard saw a value other than the one its trace was specialised on (internal: the
    jitted function catches it and picks or compiles another variant)."""

    def __init__(self, how: str, site: str, expected: Any, got: Any, on_number: bool = False):
        super().__init__(f"squall guard at {site}: {how} was {got!r}, the trace assumed {expected!r}")
        self.on_number = on_number  # read from a run-time number (squall.ltorch.numbers), not a tensor
        self.how = how
        self.site = site
        self.expected = expected
        self.got = got


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def has_contiguous_strides(t: torch.Tensor) -> bool:
    """Whether `t`'s strides are exactly a new contiguous tensor's (`torch.empty(t.shape)`'s),
    those of its dimensions of size 1 included, which `is_contiguous()` ignores."""
    expected = 1
    for n, stride in zip(reversed(t.shape), reversed(t.stride())):
        if stride != expected:
            return False
        expected *= max(n, 1)
    return True


# how a guard reads its value: the name printed in the trace -> the Python or torch call
def _instance_attribute(t: torch.Tensor, name: str) -> Any:
    return t.__dict__.get(name, ABSENT)


READERS: dict[str, Callable[..., Any]] = {
    "bool": bool,
    "int": int,
    "float": float,
    "index": operator.index,
    "item": torch.Tensor.item,
    "tolist": torch.Tensor.tolist,
    "shape": _shape,
    "torch.allclose": torch.allclose,
    "torch.equal": torch.equal,
    "torch.is_nonzero": torch.is_nonzero,
    "number": lambda x: x,  # a run-time number itself (squall.ltorch.numbers): its value is the read
    # an input's layout, which a read of strides relied on (squall.frontend.layouts)
    "contiguous": torch.Tensor.is_contiguous,
    "contiguous_strides": has_contiguous_strides,
    "strides": lambda t: tuple(t.stride()),
    "storage_offset": torch.Tensor.storage_offset,
    # a Python attribute the user set on an input tensor (`x.scale = 2.0`), or its absence
    "attribute": _instance_attribute,
}


def same_value(a: Any, b: Any) -> bool:
    """Whether two read values are the same: by type and value, NaN equal to NaN, -0.0 not 0.0."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if type(a) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is complex:
        return same_value(a.real, b.real) and same_value(a.imag, b.imag)
    return a == b


def _guard_meta(how: str, args: tuple, kwargs: dict, expected: Any, site: str) -> None:
    if how not in READERS:
        raise ValueError(f"squall.guard: unknown reader {how!r}; known: {sorted(READERS)}")
    return None


def guard_impl(how: str, args: tuple, kwargs: dict, expected: Any, site: str) -> None:
    """Read the value again, from this call's tensors; raise GuardFailed where it differs."""
    got = READERS[how](*args, **kwargs)
    if not same_value(got, expected):
        raise GuardFailed(how, site, expected, got, on_number=not any(real_tensor(a) for a in args))


# a barrier: what follows was traced for the value it checks (a shape, a branch), so nothing
# after it may run before it, fused or not
GUARD = Symbol("squall.guard", "guard", _guard_meta, is_prim=True, tags=(Tags.SIDE_EFFECT, Tags.BARRIER))


# --- a value read at run time ----------------------------------------------------------------
# Where a tensor value read (`t.item()`) changed at every call, it is no longer speculated: the
# read runs at run time and its result is a NumberProxy the rest of the program computes with
# (squall.ltorch.numbers). A barrier: fusion regions form on either side of it, never across.


def _read_meta(how: str, args: tuple, kwargs: dict, python_type: str) -> NumberProxy:
    if how != "item":
        raise ValueError(f"squall.read: {how!r} cannot be read at run time; known: item")
    return NumberProxy(None, {"bool": bool, "int": int, "float": float}[python_type], None)


def read_impl(how: str, args: tuple, kwargs: dict, python_type: str) -> Any:
    """The read, on this call's tensors."""
    return READERS[how](*args, **kwargs)


READ = Symbol("squall.read", "read", _read_meta, is_prim=True, tags=(Tags.BARRIER,))
