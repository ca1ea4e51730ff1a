"""Gather, scatter and indexing prims.

Index tensors are int64, dims are explicit and canonical-checked, and every shape rule
is strict: no broadcasting of indices or sources. Argument order is always
(tensor, index, [source,] dim, ...): `take(a, index, dim)`, `index_add(a, index,
source, dim, alpha)`, `scatter(a, index, src, dim)`. Out-of-range index *values* are
not known while tracing; the implementations raise for them at run time.
"""
from __future__ import annotations

import torch

from .base import PrimIDs, canonical_dim, check, is_number, make_prim
from ..proxies import TensorProxy


def _check_tensor(name: str, what: str, x) -> None:
    check(isinstance(x, TensorProxy), lambda: f"{name} expects {what} to be a tensor, got {type(x).__name__}", TypeError)


def _check_index(name: str, index, *, ndim: int | None = None) -> None:
    _check_tensor(name, "the index", index)
    check(index.dtype == torch.int64, lambda: f"{name} expects an int64 index, got {index.dtype}", TypeError)
    if ndim is not None:
        check(index.ndim == ndim, lambda: f"{name} expects a {ndim}-D index, got shape {list(index.shape)}", ValueError)


def _check_same_dtype(name: str, a: TensorProxy, other: TensorProxy, what: str) -> None:
    check(a.dtype == other.dtype, lambda: f"{name} expects {what} of dtype {a.dtype} (the input's), got {other.dtype}", TypeError)


def _take_meta(a, index, dim):
    _check_tensor("take", "the input", a)
    _check_index("take", index, ndim=1)
    check(a.ndim >= 1, lambda: "take expects an input of at least one dimension, got a 0-d tensor", ValueError)
    dim = canonical_dim(a.ndim, dim)
    shape = list(a.shape)
    shape[dim] = index.shape[0]
    return TensorProxy(like=a, shape=shape)


take = make_prim(PrimIDs.TAKE, "take", meta=_take_meta)


def _check_along_axis(name: str, a: TensorProxy, index: TensorProxy, dim: int, src: TensorProxy | None = None) -> int:
    """The checks torch.gather/scatter make: same rank, index no larger than a (and src) off `dim`."""
    check(index.ndim == a.ndim, lambda: f"{name} expects an index of the input's rank {a.ndim}, got shape {list(index.shape)}", ValueError)
    dim = canonical_dim(a.ndim, dim)
    for d, n in enumerate(index.shape):
        check(
            d == dim or n <= a.shape[d],
            lambda: f"{name}: index of shape {list(index.shape)} is larger than the input {list(a.shape)} at dimension {d} (only dimension {dim} may differ)",
            ValueError,
        )
        if src is not None:
            check(n <= src.shape[d], lambda: f"{name}: index of shape {list(index.shape)} is larger than the source {list(src.shape)} at dimension {d}", ValueError)
    return dim


def _take_along_axis_meta(a, index, dim):
    _check_tensor("take_along_axis", "the input", a)
    _check_index("take_along_axis", index)
    _check_along_axis("take_along_axis", a, index, dim)
    return TensorProxy(like=a, shape=index.shape)


take_along_axis = make_prim(PrimIDs.TAKE_ALONG_AXIS, "take_along_axis", meta=_take_along_axis_meta)


def _indexed_shape(name: str, a, indices) -> tuple[int, ...]:
    """The shape aten.index gives: advanced dims in place when adjacent, else first."""
    _check_tensor(name, "the input", a)
    check(isinstance(indices, (tuple, list)), lambda: f"{name} expects a tuple of indices, got {type(indices).__name__}", TypeError)
    check(len(indices) <= a.ndim, lambda: f"{name}: too many indices ({len(indices)}) for a tensor of {a.ndim} dimension(s)", IndexError)
    positions = [i for i, t in enumerate(indices) if t is not None]
    check(bool(positions), lambda: f"{name} expects at least one index tensor (None takes a dimension whole)", ValueError)
    for t in indices:
        if t is not None:
            _check_index(name, t)
    idx_shape = indices[positions[0]].shape
    for p in positions:
        check(
            indices[p].shape == idx_shape,
            lambda: f"{name} expects index tensors of one shape, got {list(idx_shape)} and {list(indices[p].shape)} (broadcast them first)",
            ValueError,
        )
    rest = [a.shape[d] for d in range(a.ndim) if d not in positions]
    if positions[-1] - positions[0] + 1 == len(positions):
        before = [a.shape[d] for d in range(positions[0])]
        return (*before, *idx_shape, *rest[len(before):])
    return (*idx_shape, *rest)


def _index_meta(a, indices):
    return TensorProxy(like=a, shape=_indexed_shape("index", a, indices))


index = make_prim(PrimIDs.INDEX, "index", meta=_index_meta)


def _index_put_meta(a, indices, values, accumulate):
    shape = _indexed_shape("index_put", a, indices)
    _check_tensor("index_put", "the values", values)
    check(tuple(values.shape) == shape, lambda: f"index_put expects values of the indexed shape {list(shape)}, got {list(values.shape)}", ValueError)
    _check_same_dtype("index_put", a, values, "values")
    check(isinstance(accumulate, bool), lambda: f"index_put expects accumulate to be a bool, got {accumulate!r}", TypeError)
    return TensorProxy(like=a)


index_put = make_prim(PrimIDs.INDEX_PUT, "index_put", meta=_index_put_meta)


def _check_index_source(name: str, a, index, source, dim) -> int:
    """index_add / index_copy: a 1-D index, and a source shaped like `a` but with len(index) at `dim`."""
    _check_tensor(name, "the input", a)
    _check_index(name, index, ndim=1)
    _check_tensor(name, "the source", source)
    check(a.ndim >= 1, lambda: f"{name} expects an input of at least one dimension, got a 0-d tensor", ValueError)
    dim = canonical_dim(a.ndim, dim)
    expected = list(a.shape)
    expected[dim] = index.shape[0]
    check(list(source.shape) == expected, lambda: f"{name} expects a source of shape {expected}, got {list(source.shape)}", ValueError)
    _check_same_dtype(name, a, source, "a source")
    return dim


def _index_add_meta(a, index, source, dim, alpha=1):
    _check_index_source("index_add", a, index, source, dim)
    check(is_number(alpha), lambda: f"index_add expects a number alpha, got {type(alpha).__name__}", TypeError)
    return TensorProxy(like=a)


# index_add(a, index, source, dim, alpha): a[..., index[i], ...] += alpha * source[..., i, ...] along dim
index_add = make_prim(PrimIDs.INDEX_ADD, "index_add", meta=_index_add_meta)


def _index_copy_meta(a, index, source, dim):
    _check_index_source("index_copy", a, index, source, dim)
    return TensorProxy(like=a)


# index_copy(a, index, source, dim): a[..., index[i], ...] = source[..., i, ...] along dim
index_copy = make_prim(PrimIDs.INDEX_COPY, "index_copy", meta=_index_copy_meta)


def _scatter_like_meta(name: str):
    def meta(a, index, src, dim):
        _check_tensor(name, "the input", a)
        _check_index(name, index)
        _check_tensor(name, "the source", src)
        check(src.ndim == a.ndim, lambda: f"{name} expects a source of the input's rank {a.ndim}, got shape {list(src.shape)}", ValueError)
        _check_along_axis(name, a, index, dim, src)
        _check_same_dtype(name, a, src, "a source")
        return TensorProxy(like=a)

    meta.__name__ = f"_{name}_meta"
    return meta


# scatter(a, index, src, dim): a[index[i][j]][j] = src[i][j] for dim 0 (torch.scatter with src)
scatter = make_prim(PrimIDs.SCATTER, "scatter", meta=_scatter_like_meta("scatter"))
scatter_add = make_prim(PrimIDs.SCATTER_ADD, "scatter_add", meta=_scatter_like_meta("scatter_add"))

_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_meta(a, index, src, dim, reduce, include_self):
    out = _scatter_like_meta("scatter_reduce")(a, index, src, dim)
    check(reduce in _SCATTER_REDUCTIONS, lambda: f"scatter_reduce expects reduce to be one of {_SCATTER_REDUCTIONS}, got {reduce!r}", ValueError)
    check(isinstance(include_self, bool), lambda: f"scatter_reduce expects include_self to be a bool, got {include_self!r}", TypeError)
    return out


# scatter_reduce(a, index, src, dim, reduce, include_self): torch.scatter_reduce, every argument explicit
scatter_reduce = make_prim(PrimIDs.SCATTER_REDUCE, "scatter_reduce", meta=_scatter_reduce_meta)

__all__ = ["take", "take_along_axis", "index", "index_put", "index_add", "index_copy", "scatter", "scatter_add", "scatter_reduce"]
