"""Reduction prims: sum, prod, amax/amin, argmax/argmin, var, scans, topk and sort.

Dimensions arrive canonical (non-negative, each in range, no repeats); reduced
dimensions are removed from the shape (keepdim is the torch language's business).
"""
from __future__ import annotations

import torch

from .base import PrimIDs, check, dtype_category, make_prim
from ..proxies import TensorProxy
from ..symbol import Tags


def _check_tensor(name: str, a) -> None:
    check(isinstance(a, TensorProxy), lambda: f"{name} expects a tensor, got {type(a).__name__}", TypeError)


def _check_dim(name: str, a: TensorProxy, dim) -> None:
    check(isinstance(dim, int) and not isinstance(dim, bool), lambda: f"{name} expects an int dim, got {dim!r}", TypeError)
    check(0 <= dim < a.ndim, lambda: f"{name}: dim {dim} is not a canonical dimension of a tensor of shape {list(a.shape)}", IndexError)


def _check_dims(name: str, a: TensorProxy, dims) -> tuple[int, ...]:
    check(isinstance(dims, (tuple, list)), lambda: f"{name} expects a tuple of dims, got {dims!r}", TypeError)
    dims = tuple(dims)
    for d in dims:
        _check_dim(name, a, d)
    check(len(set(dims)) == len(dims), lambda: f"{name}: dims {dims} repeat a dimension", ValueError)
    return dims


def _reduced_shape(a: TensorProxy, dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for i, n in enumerate(a.shape) if i not in dims)


def _check_nonempty(name: str, a: TensorProxy, dims: tuple[int, ...]) -> None:
    # amax, argmax and friends have no identity: an empty reduction has no answer
    for d in dims:
        check(a.shape[d] != 0, lambda: f"{name}(): Expected reduction dim {d} to have non-zero size (shape {list(a.shape)})", IndexError)


def _sum_like(id: str, name: str, *, nonempty: bool = False, allow_complex: bool = True):
    def meta(a, dims):
        _check_tensor(name, a)
        dims = _check_dims(name, a, dims)
        check(allow_complex or not a.dtype.is_complex, lambda: f"{name} does not support complex tensors, got {a.dtype}", TypeError)
        if nonempty:
            _check_nonempty(name, a, dims)
        return TensorProxy(like=a, shape=_reduced_shape(a, dims))

    meta.__name__ = f"_{name}_meta"
    return make_prim(id, name, meta=meta, tags=(Tags.REDUCTION,))


sum = _sum_like(PrimIDs.SUM, "sum")
prod = _sum_like(PrimIDs.PROD, "prod")
amax = _sum_like(PrimIDs.AMAX, "amax", nonempty=True, allow_complex=False)
amin = _sum_like(PrimIDs.AMIN, "amin", nonempty=True, allow_complex=False)


def _arg_reduction(id: str, name: str):
    def meta(a, dim):
        _check_tensor(name, a)
        _check_dim(name, a, dim)
        check(not a.dtype.is_complex, lambda: f"{name} does not support complex tensors, got {a.dtype}", TypeError)
        _check_nonempty(name, a, (dim,))
        return TensorProxy(like=a, shape=_reduced_shape(a, (dim,)), dtype=torch.int64, requires_grad=False)

    meta.__name__ = f"_{name}_meta"
    return make_prim(id, name, meta=meta, tags=(Tags.REDUCTION,))


argmax = _arg_reduction(PrimIDs.ARGMAX, "argmax")
argmin = _arg_reduction(PrimIDs.ARGMIN, "argmin")


def _var_meta(a, dims, *, correction):
    _check_tensor("var", a)
    dims = _check_dims("var", a, dims)
    check(dtype_category(a.dtype) >= 2, lambda: f"var expects a floating point or complex tensor, got {a.dtype}", TypeError)
    check(isinstance(correction, (int, float)) and not isinstance(correction, bool), lambda: f"var expects a number correction, got {correction!r}", TypeError)
    return TensorProxy(like=a, shape=_reduced_shape(a, dims), dtype=a.dtype.to_real() if a.dtype.is_complex else a.dtype)


var = make_prim(PrimIDs.VAR, "var", meta=_var_meta, tags=(Tags.REDUCTION,))


def _scan(id: str, name: str):
    def meta(a, dim):
        _check_tensor(name, a)
        _check_dim(name, a, dim)
        check(a.dtype != torch.bool, lambda: f"{name} does not accumulate bool tensors (convert to an integer dtype first)", TypeError)
        return TensorProxy(like=a)

    meta.__name__ = f"_{name}_meta"
    return make_prim(id, name, meta=meta)


cumsum = _scan(PrimIDs.CUMSUM, "cumsum")
cumprod = _scan(PrimIDs.CUMPROD, "cumprod")


def _topk_meta(a, k, dim, largest, sorted):
    _check_tensor("topk", a)
    _check_dim("topk", a, dim)
    check(isinstance(k, int) and not isinstance(k, bool), lambda: f"topk expects an int k, got {k!r}", TypeError)
    check(0 <= k <= a.shape[dim], lambda: f"topk: selected index k out of range: k={k} for dimension {dim} of size {a.shape[dim]}", RuntimeError)
    check(isinstance(largest, bool) and isinstance(sorted, bool), lambda: "topk expects bool largest and sorted", TypeError)
    check(not a.dtype.is_complex, lambda: f"topk does not support complex tensors, got {a.dtype}", TypeError)
    shape = list(a.shape)
    shape[dim] = k
    return TensorProxy(like=a, shape=shape), TensorProxy(like=a, shape=shape, dtype=torch.int64, requires_grad=False)


topk = make_prim(PrimIDs.TOPK, "topk", meta=_topk_meta)


def _sort_meta(a, dim, descending, stable):
    _check_tensor("sort", a)
    _check_dim("sort", a, dim)
    check(isinstance(descending, bool) and isinstance(stable, bool), lambda: "sort expects bool descending and stable", TypeError)
    check(not a.dtype.is_complex, lambda: f"sort does not support complex tensors, got {a.dtype}", TypeError)
    return TensorProxy(like=a), TensorProxy(like=a, dtype=torch.int64, requires_grad=False)


sort = make_prim(PrimIDs.SORT, "sort", meta=_sort_meta)

__all__ = ["sum", "prod", "amax", "amin", "argmax", "argmin", "var", "cumsum", "cumprod", "topk", "sort"]
