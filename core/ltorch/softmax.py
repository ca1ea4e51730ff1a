"""Torch-language ops: softmax and its relatives (log_softmax, softmin), over torch, Tensor and nn.functional names."""
from __future__ import annotations

import warnings

import torch

from .. import prims
from .base import torchsymbol
from .helpers import canonical_dim, check, check_input, expand_reduced, to_dtype, upcast
from ..proxies import TensorProxy

F = torch.nn.functional

__all__ = [
    "softmax", "log_softmax", "softmax_functional", "log_softmax_functional", "softmin",
]


def _check_floating(name: str, a: TensorProxy) -> None:
    # torch's kernels are only instantiated for floating types and say so with NotImplementedError
    check_input(name, a)
    check(
        a.dtype.is_floating_point,
        lambda: f"{name}: not implemented for {a.dtype} tensors (floating point tensors only)",
        NotImplementedError,
    )


def _softmax_dim(name: str, ndim: int) -> int:
    # torch.nn.functional's legacy rule for dim=None, with its deprecation warning
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        UserWarning,
        stacklevel=4,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_core(name: str, a, dim, dtype, *, log: bool) -> TensorProxy:
    check_input(name, a)
    check(dtype is None or isinstance(dtype, torch.dtype), lambda: f"{name}(): dtype must be a torch.dtype, got {dtype!r}", TypeError)
    if dtype is not None:
        a = to_dtype(a, dtype)
    _check_floating(name, a)
    d = canonical_dim(a.ndim, dim)
    out_dtype = a.dtype
    if a.ndim == 0:
        # softmax over a 0-d tensor is softmax over one element
        return prims.reshape(_softmax_core(name, prims.reshape(a, (1,)), 0, None, log=log), ())
    x = upcast(a)
    if x.shape[d] > 0:
        # subtracting the maximum keeps exp from overflowing; it cancels in the ratio
        x = prims.sub(x, expand_reduced(prims.amax(x, (d,)), x.shape, (d,)))
    e = prims.exp(x)
    total = expand_reduced(prims.sum(e, (d,)), x.shape, (d,))
    out = prims.sub(x, prims.log(total)) if log else prims.div(e, total)
    return to_dtype(out, out_dtype)


@torchsymbol(torch.softmax, torch.Tensor.softmax, torch.special.softmax)
def softmax(input, dim, dtype=None):
    """Softmax over `dim`, computed as exp(x - max) / sum."""
    return _softmax_core("softmax", input, dim, dtype, log=False)


@torchsymbol(torch.log_softmax, torch.Tensor.log_softmax, torch.special.log_softmax)
def log_softmax(input, dim, dtype=None):
    """Log-softmax over `dim`, computed as (x - max) - log(sum(exp(x - max)))."""
    return _softmax_core("log_softmax", input, dim, dtype, log=True)


@torchsymbol(F.softmax)
def softmax_functional(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.softmax: as torch.softmax, with the legacy dim=None rule."""
    check_input("softmax", input)
    dim = _softmax_dim("softmax", input.ndim) if dim is None else dim
    return _softmax_core("softmax", input, dim, dtype, log=False)


@torchsymbol(F.log_softmax)
def log_softmax_functional(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.log_softmax: as torch.log_softmax, with the legacy dim=None rule."""
    check_input("log_softmax", input)
    dim = _softmax_dim("log_softmax", input.ndim) if dim is None else dim
    return _softmax_core("log_softmax", input, dim, dtype, log=True)


@torchsymbol(F.softmin)
def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """Softmin: softmax of -input (negated after the dtype= cast, as torch does)."""
    check_input("softmin", input)
    dim = _softmax_dim("softmin", input.ndim) if dim is None else dim
    if dtype is not None:
        input = to_dtype(input, dtype)
    check(input.dtype != torch.bool, lambda: "Negation, the `-` operator, on a bool tensor is not supported.", RuntimeError)
    _check_floating("softmin", input)
    return _softmax_core("softmin", prims.neg(input), dim, None, log=False)
