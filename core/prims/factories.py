"""Factory and random prims: tensors made from Python numbers, a device and a dtype.

Every argument is explicit (no default dtype or device) and every size, fill value or
distribution parameter is a Python number, never a tensor. `uniform` and `normal` draw
from torch's global generator, so `torch.manual_seed` makes runs reproducible;
`uniform_philox` draws from an explicit (seed, offset) and is reproducible on its own.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import PrimIDs, check, dtype_category, is_number, make_prim, number_category
from ..proxies import TensorProxy
from ..symbol import Tags
from .base import is_size


def _check_shape(name: str, shape) -> tuple[int, ...]:
    check(isinstance(shape, Sequence), lambda: f"{name} expects a shape (a sequence of ints), got {type(shape).__name__}", TypeError)
    shape = tuple(shape)
    check(
        all(is_size(s) and s >= 0 for s in shape),
        lambda: f"{name} expects non-negative int sizes, got {list(shape)}",
        ValueError,
    )
    return shape


def _check_device_dtype(name: str, device, dtype) -> None:
    check(isinstance(device, torch.device), lambda: f"{name} expects a torch.device, got {device!r}", TypeError)
    check(isinstance(dtype, torch.dtype), lambda: f"{name} expects a torch.dtype, got {dtype!r}", TypeError)


def _check_number(name: str, what: str, x, dtype: torch.dtype | None = None) -> None:
    check(is_number(x), lambda: f"{name} expects {what} to be a Python number, got {type(x).__name__}", TypeError)
    if dtype is not None:
        check(
            number_category(x) <= dtype_category(dtype),
            lambda: f"{name} cannot make a {dtype} tensor from the {type(x).__name__} {what} {x!r} without conversion",
            TypeError,
        )


def _full_meta(shape, fill_value, *, device, dtype):
    shape = _check_shape("full", shape)
    _check_device_dtype("full", device, dtype)
    _check_number("full", "fill_value", fill_value, dtype)
    return TensorProxy(shape=shape, dtype=dtype, device=device, requires_grad=False)


full = make_prim(PrimIDs.FULL, "full", meta=_full_meta)


def _iota_meta(length, *, start, step, device, dtype):
    check(is_size(length) and length >= 0, lambda: f"iota expects a non-negative int length, got {length!r}", ValueError)
    _check_device_dtype("iota", device, dtype)
    check(dtype_category(dtype) in (1, 2), lambda: f"iota expects an integer or floating point dtype, got {dtype}", TypeError)
    _check_number("iota", "start", start, dtype)
    _check_number("iota", "step", step, dtype)
    return TensorProxy(shape=(length,), dtype=dtype, device=device, requires_grad=False)


# iota(length, start=s, step=d) = [s, s + d, ..., s + (length - 1) * d]
iota = make_prim(PrimIDs.IOTA, "iota", meta=_iota_meta)


def _check_random(name: str, shape, low, high, device, dtype, what=("minval", "maxval")) -> tuple[int, ...]:
    shape = _check_shape(name, shape)
    _check_device_dtype(name, device, dtype)
    check(dtype.is_floating_point, lambda: f"{name} expects a floating point dtype, got {dtype}", TypeError)
    _check_number(name, what[0], low)
    _check_number(name, what[1], high)
    return shape


def _uniform_meta(shape, minval, maxval, *, device, dtype):
    shape = _check_random("uniform", shape, minval, maxval, device, dtype)
    return TensorProxy(shape=shape, dtype=dtype, device=device, requires_grad=False)


# uniform(shape, minval, maxval): samples in [minval, maxval) from torch's global generator
uniform = make_prim(PrimIDs.UNIFORM, "uniform", meta=_uniform_meta, tags=(Tags.RANDOM,))


def _uniform_philox_meta(shape, minval, maxval, *, device, dtype, seed, offset):
    shape = _check_random("uniform_philox", shape, minval, maxval, device, dtype)
    for what, v in (("seed", seed), ("offset", offset)):
        check(isinstance(v, int) and not isinstance(v, bool) and v >= 0, lambda: f"uniform_philox expects a non-negative int {what}, got {v!r}", ValueError)
    return TensorProxy(shape=shape, dtype=dtype, device=device, requires_grad=False)


# the same numbers for the same (seed, offset), whatever the global generator's state
uniform_philox = make_prim(PrimIDs.UNIFORM_PHILOX, "uniform_philox", meta=_uniform_philox_meta, tags=(Tags.RANDOM,))


def _normal_meta(shape, mean, std, *, device, dtype):
    shape = _check_random("normal", shape, mean, std, device, dtype, ("mean", "std"))
    check(std >= 0, lambda: f"normal expects a non-negative std, got {std}", ValueError)
    return TensorProxy(shape=shape, dtype=dtype, device=device, requires_grad=False)


normal = make_prim(PrimIDs.NORMAL, "normal", meta=_normal_meta, tags=(Tags.RANDOM,))

__all__ = ["full", "iota", "uniform", "uniform_philox", "normal"]
