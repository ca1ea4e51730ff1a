"""What the grad rules share: per-argument rules, zeros, complex conjugation, broadcasting back,
dtype conversion, summing a broadcast gradient back, the last two dimensions swapped.

Prims are strict (operands share shape and dtype, nothing broadcasts), so the rules
build every intermediate with explicit shapes, through these helpers.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ... import prims
from ...proxies import TensorProxy
from ...symbolic import same_shape, same_size
from ..gradients import GradCall, NoGradRule

__all__ = ["per_argument", "real_only", "zeros", "conj", "expand", "moved_last", "restored", "to_dtype", "sum_to", "last_two_swapped", "scaled"]


def per_argument(rule: Callable[[GradCall], tuple]) -> Callable[[GradCall], tuple]:
    """Adapt a rule that returns one gradient per positional argument to one per tensor input."""

    def backward(call: GradCall) -> tuple:
        grads = rule(call)
        return tuple(g for a, g in zip(call.args, grads) if isinstance(a, TensorProxy))

    backward.__name__ = getattr(rule, "__name__", "backward")
    return backward


def real_only(op: str, rule: Callable[[GradCall], tuple]) -> Callable[[GradCall], tuple]:
    """`rule`, refusing complex operands: its formula ignores the conjugate convention, and a
    refusal (`NoGradRule`: squall then falls back to PyTorch autograd, saying so) is better
    than a wrong gradient."""

    def backward(call: GradCall) -> tuple:
        if any(p.dtype.is_complex for p in call.inputs):
            raise NoGradRule(f"{op} on complex tensors")
        return rule(call)

    backward.__name__ = getattr(rule, "__name__", "backward")
    return backward


def zeros(like: TensorProxy, shape: Sequence[int] | None = None) -> TensorProxy:
    """Zeros of `like`'s dtype and device (and shape, unless given)."""
    return prims.full(tuple(like.shape if shape is None else shape), 0, device=like.device, dtype=like.dtype)


def conj(x: TensorProxy) -> TensorProxy:
    """The complex conjugate; the identity on real tensors (there is no conj prim)."""
    if not x.dtype.is_complex:
        return x
    re = prims.convert_element_type(prims.real(x), x.dtype)
    im = prims.convert_element_type(prims.imag(x), x.dtype)
    return prims.sub(re, prims.mul(im, 1j))


def expand(x: TensorProxy, shape: Sequence[int], reduced: Sequence[int]) -> TensorProxy:
    """`x`, the result of reducing dims `reduced` of a tensor of `shape`, broadcast back to `shape`."""
    kept = tuple(d for d in range(len(shape)) if d not in reduced)
    return prims.broadcast_in_dim(x, tuple(shape), kept)


def moved_last(a: TensorProxy, dims: Sequence[int]) -> tuple[TensorProxy, tuple[int, ...]]:
    """`a` with `dims` moved last and flattened into one: (rest..., n), and the permutation used."""
    kept = [d for d in range(a.ndim) if d not in dims]
    perm = (*kept, *dims)
    t = prims.transpose(a, perm) if perm != tuple(range(a.ndim)) else a
    n = 1
    for d in dims:
        n *= a.shape[d]
    return prims.reshape(t, (*(a.shape[d] for d in kept), n)), perm


def restored(x: TensorProxy, like: TensorProxy, perm: tuple[int, ...]) -> TensorProxy:
    """The inverse of `moved_last`: (rest..., n) back to `like`'s shape and dimension order."""
    x = prims.reshape(x, tuple(like.shape[p] for p in perm))
    if perm == tuple(range(like.ndim)):
        return x
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return prims.transpose(x, tuple(inverse))


def to_dtype(x, dtype: torch.dtype):
    """`x` converted to `dtype` (None and a tensor of that dtype as they are)."""
    return x if x is None or x.dtype == dtype else prims.convert_element_type(x, dtype)


def sum_to(g: TensorProxy, shape) -> TensorProxy:
    """`g` summed over the dimensions broadcasting added or expanded, to `shape`."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    # (as broadcast_in_dim's rule: an equal size asks nothing, a constant 1 is summed over)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if not same_size(n, g.shape[lead + i])
                                      and (type(n) is int and n == 1 or n == 1 and g.shape[lead + i] != 1))
    if dims:
        g = prims.sum(g, dims)
    return g if same_shape(g.shape, shape) else prims.reshape(g, shape)


def last_two_swapped(x: TensorProxy) -> TensorProxy:
    """The last two dimensions swapped (a view in torch: `x.mT`)."""
    return prims.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def scaled(g: TensorProxy, factor) -> TensorProxy:
    """`g` times `factor` (`g` itself for 1)."""
    return g if factor == 1 else prims.mul(g, factor)
