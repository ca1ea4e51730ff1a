"""Grad rules for shape, gather, scatter and indexing prims.

A shape prim's gradient is the inverse rearrangement of the cotangent (padding undoes
slicing, slicing undoes padding); a gather's is the matching scatter-add into zeros,
and a scatter's is a gather. Index tensors are integers and get no gradient.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ... import prims
from ...prims.base import PrimIDs
from ...proxies import TensorProxy
from ...symbolic import same_shape, same_size
from ..gradients import GradCall, NoGradRule
from .support import per_argument, zeros

__all__ = ["shape_rules"]


@per_argument
def _broadcast_in_dim(call: GradCall) -> tuple:
    a, shape, broadcast_dimensions = call.args
    # sum over the new dimensions and over the kept ones a had as size 1
    new = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    # (a size equal to its target's expanded nothing; a constant 1 is summed over whatever its
    # target's size, a no-op where that is 1 too: neither asks a symbolic size whether it is 1)
    expanded = tuple(d for i, d in enumerate(broadcast_dimensions)
                     if not same_size(a.shape[i], shape[d]) and (type(a.shape[i]) is int and a.shape[i] == 1 or a.shape[i] == 1 and shape[d] != 1))
    g = call.g
    if new or expanded:
        g = prims.sum(g, tuple(sorted(new + expanded)))
    if not same_shape(g.shape, a.shape):
        g = prims.reshape(g, tuple(a.shape))
    return g, None, None


@per_argument
def _reshape(call: GradCall) -> tuple:
    a = call.args[0]
    return prims.reshape(call.g, tuple(a.shape)), None


@per_argument
def _transpose(call: GradCall) -> tuple:
    a, permutation = call.args
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return prims.transpose(call.g, tuple(inverse)), None


@per_argument
def _slice(call: GradCall) -> tuple:
    a, starts, ends, strides = call.args
    # zeros around the slice and between its strided elements: a pad of the cotangent
    config = []
    for lo, st, n, m in zip(starts, strides, a.shape, call.g.shape):
        if m == 0:
            config.append((n, 0, 0))
        else:
            last = lo + (m - 1) * st
            config.append((lo, n - last - 1, st - 1))
    return _padded(call.g, tuple(config)), None, None, None


def _padded(g: TensorProxy, config: tuple) -> TensorProxy:
    """`g` padded with zeros by `config`; `g` itself where that pads nothing (a slice of the whole
    tensor: `logits[:, -0:]`), not a copy into a new tensor of zeros."""
    if all(type(n) is int and n == 0 for entry in config for n in entry):
        return g
    return prims.pad(g, 0, config)


@per_argument
def _pad(call: GradCall) -> tuple:
    a, value, config = call.args
    # undo the low/high padding (a negative pad restores cropped elements as zeros: they
    # reached no output), then step over the interior padding
    inner = _padded(call.g, tuple((-lo, -hi, 0) for lo, hi, _ in config))
    if all(interior == 0 for _, _, interior in config):
        return inner, None, None
    g = prims.slice(inner, (0,) * a.ndim, tuple(inner.shape), tuple(interior + 1 for _, _, interior in config))
    return g, None, None


@per_argument
def _squeeze(call: GradCall) -> tuple:
    return prims.reshape(call.g, tuple(call.args[0].shape)), None


@per_argument
def _flip(call: GradCall) -> tuple:
    a, dims = call.args
    return prims.flip(call.g, tuple(dims)), None


def _cat(call: GradCall) -> tuple:
    tensors, dim = call.args
    g = call.g
    grads, offset = [], 0
    for t in tensors:
        starts = [0] * g.ndim
        ends = list(g.shape)
        starts[dim], ends[dim] = offset, offset + t.shape[dim]
        grads.append(prims.slice(g, tuple(starts), tuple(ends), (1,) * g.ndim))
        offset += t.shape[dim]
    return tuple(grads)


@per_argument
def _unfold(call: GradCall) -> tuple:
    a, dim, size, step = call.args
    g = call.g  # a.shape with dim -> windows, then the window's size last
    windows = g.shape[dim]
    # window w, element k came from position w * step + k: move k beside w, flatten, index_add
    perm = (*range(dim + 1), g.ndim - 1, *range(dim + 1, g.ndim - 1))
    src_shape = (*a.shape[:dim], windows * size, *a.shape[dim + 1:])
    src = prims.reshape(prims.transpose(g, perm), src_shape)
    starts = prims.iota(windows, start=0, step=step, device=a.device, dtype=torch.int64)
    offsets = prims.iota(size, start=0, step=1, device=a.device, dtype=torch.int64)
    index = prims.add(prims.broadcast_in_dim(starts, (windows, size), (0,)), prims.broadcast_in_dim(offsets, (windows, size), (1,)))
    index = prims.reshape(index, (windows * size,))
    return prims.index_add(zeros(a), index, src, dim, 1), None, None, None


def _padded_to(x: TensorProxy, like: TensorProxy) -> TensorProxy:
    """`x` (an index-shaped gather) padded with zeros at the end of each dim to `like`'s shape:
    the source elements no index reaches get no gradient."""
    if tuple(x.shape) == tuple(like.shape):
        return x
    return prims.pad(x, 0, tuple((0, n - m, 0) for n, m in zip(like.shape, x.shape)))


@per_argument
def _take(call: GradCall) -> tuple:
    a, index, dim = call.args
    return prims.index_add(zeros(a), index, call.g, dim, 1), None, None


@per_argument
def _take_along_axis(call: GradCall) -> tuple:
    a, index, dim = call.args
    return prims.scatter_add(zeros(a), index, call.g, dim), None, None


def _index(call: GradCall) -> tuple:
    a, indices = call.args
    n_index = sum(isinstance(i, TensorProxy) for i in indices)
    return (prims.index_put(zeros(a), tuple(indices), call.g, True), *(None,) * n_index)


def _index_put(call: GradCall) -> tuple:
    a, indices, values, accumulate = call.args
    n_index = sum(isinstance(i, TensorProxy) for i in indices)
    # overwritten positions hide a's value: their gradient goes to the values instead
    ga = call.g if accumulate else prims.index_put(call.g, tuple(indices), zeros(values), False)
    return (ga, *(None,) * n_index, prims.index(call.g, tuple(indices)))


@per_argument
def _index_add(call: GradCall) -> tuple:
    a, index, source, dim, alpha = call.args
    gs = prims.take(call.g, index, dim)
    return call.g, None, gs if alpha == 1 else prims.mul(gs, alpha), None, None


@per_argument
def _index_copy(call: GradCall) -> tuple:
    a, index, source, dim = call.args
    return prims.index_copy(call.g, index, zeros(source), dim), None, prims.take(call.g, index, dim), None


@per_argument
def _scatter(call: GradCall) -> tuple:
    a, index, src, dim = call.args
    ga = prims.scatter(call.g, index, zeros(src), dim)
    return ga, None, _padded_to(prims.take_along_axis(call.g, index, dim), src), None


@per_argument
def _scatter_add(call: GradCall) -> tuple:
    a, index, src, dim = call.args
    return call.g, None, _padded_to(prims.take_along_axis(call.g, index, dim), src), None


def _as(mask: TensorProxy, like: TensorProxy) -> TensorProxy:
    return prims.convert_element_type(mask, like.dtype)


@per_argument
def _scatter_reduce(call: GradCall) -> tuple:
    """PyTorch's scatter_reduce_backward for sum, mean, amax and amin."""
    a, index, src, dim, reduce, include_self = call.args
    if reduce == "prod":
        # PyTorch's rule special-cases zeros per scattered group, and refuses some cases by
        # looking at the data; no rule beats a wrong one: PyTorch autograd differentiates it
        raise NoGradRule("prims.scatter_reduce with reduce='prod'")
    g, out = call.g, call.output
    index_src = prims.slice(src, (0,) * src.ndim, tuple(index.shape), (1,) * src.ndim) if tuple(src.shape) != tuple(index.shape) else src
    if reduce == "sum":
        ga, gs = g, prims.take_along_axis(g, index, dim)
    elif reduce == "mean":
        count = prims.full(tuple(a.shape), 1 if include_self else 0, device=a.device, dtype=a.dtype)
        count = prims.scatter_add(count, index, prims.full(tuple(index.shape), 1, device=a.device, dtype=a.dtype), dim)
        count = prims.where(prims.eq(count, 0), 1.0, count)
        ga = prims.div(g, count)
        gs = prims.div(prims.take_along_axis(g, index, dim), prims.take_along_axis(count, index, dim))
    else:  # amax / amin: split evenly among every element equal to the result, a's counted
        # even when include_self is False, as PyTorch does
        value = prims.take_along_axis(out, index, dim)
        a_is = _as(prims.eq(a, out), a)
        src_is = _as(prims.eq(index_src, value), a)
        share = prims.div(g, prims.scatter_add(a_is, index, src_is, dim))
        ga = prims.mul(a_is, share)
        gs = prims.mul(src_is, prims.take_along_axis(share, index, dim))
    if not include_self:  # a's values at scattered positions took no part
        ga = prims.scatter(ga, index, zeros(index_src), dim)
    return ga, None, _padded_to(gs, src), None, None, None


def shape_rules() -> dict[str, Callable[[GradCall], tuple]]:
    """The rules of this module by prim id."""
    return {
        PrimIDs.BROADCAST_IN_DIM: _broadcast_in_dim,
        PrimIDs.RESHAPE: _reshape,
        PrimIDs.TRANSPOSE: _transpose,
        PrimIDs.SLICE: _slice,
        PrimIDs.PAD: _pad,
        PrimIDs.SQUEEZE: _squeeze,
        PrimIDs.FLIP: _flip,
        PrimIDs.CAT: _cat,
        PrimIDs.UNFOLD: _unfold,
        PrimIDs.TAKE: _take,
        PrimIDs.TAKE_ALONG_AXIS: _take_along_axis,
        PrimIDs.INDEX: _index,
        PrimIDs.INDEX_PUT: _index_put,
        PrimIDs.INDEX_ADD: _index_add,
        PrimIDs.INDEX_COPY: _index_copy,
        PrimIDs.SCATTER: _scatter,
        PrimIDs.SCATTER_ADD: _scatter_add,
        PrimIDs.SCATTER_REDUCE: _scatter_reduce,
    }
