"""Torch-language ops: reductions (sum, mean, max, any, var, logsumexp, ...) and scans (cumsum, cumprod).

Each op reduces with the strict prims, then restores kept dimensions with a reshape.
Low-precision floats accumulate in float32, as PyTorch's kernels do.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .. import prims
from .base import torchsymbol
from .helpers import broadcast, check, computation_dtype, count_operand, is_tensor, promote, to_dtype
from ..prims.base import canonical_dim, dtype_category
from ..proxies import TensorProxy
from ..symbol import Tags
from ..symbolic import SymInt, same_shape

__all__ = [
    "sum", "nansum", "prod", "mean", "nanmean", "amax", "amin", "argmax", "argmin", "max", "min",
    "aminmax", "any", "all", "count_nonzero", "var", "std", "var_mean", "std_mean", "logsumexp",
    "cumsum", "cumprod",
]

_REDUCTION = (Tags.REDUCTION,)


# --- dimension handling -----------------------------------------------------------------


def _check_input(name: str, a) -> None:
    check(is_tensor(a), lambda: f"{name}(): argument 'input' must be Tensor, not {type(a).__name__}", TypeError)


def reduction_dims(a: TensorProxy, dim, *, empty_means_all: bool = True) -> tuple[int, ...]:
    """Canonical, sorted dims a reduction over `dim` (None, an int, or a sequence) removes.

    A 0-d tensor accepts dims 0 and -1 and reduces over nothing. torch reads an empty
    sequence as "every dimension" for most reductions (`empty_means_all`).
    """
    if dim is None:
        return tuple(range(a.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims and empty_means_all:
        return tuple(range(a.ndim))
    out = tuple(canonical_dim(a.ndim, d) for d in dims)
    for d in out:
        check(out.count(d) == 1, lambda: f"dim {d} appears multiple times in the list of dims", RuntimeError)
    if a.ndim == 0:
        return ()
    return tuple(sorted(out))


def keep_dims(out: TensorProxy, a: TensorProxy, dims: Sequence[int], keepdim: bool) -> TensorProxy:
    """`out`, reduced over `dims` of `a`, with those dimensions kept as size 1 when `keepdim`."""
    if not keepdim:
        return out
    shape = tuple(1 if i in dims else n for i, n in enumerate(a.shape))
    return out if same_shape(out.shape, shape) else prims.reshape(out, shape)


def _count(a: TensorProxy, dims: Sequence[int]) -> int | SymInt:
    return math.prod(a.shape[d] for d in dims)


def _sum_dtype(a: TensorProxy, dtype: torch.dtype | None) -> torch.dtype:
    # sum and prod of bools and integers accumulate in int64
    if dtype is not None:
        return dtype
    return torch.int64 if dtype_category(a.dtype) < 2 else a.dtype


def _accumulate(prim, a: TensorProxy, dims: tuple[int, ...], result: torch.dtype) -> TensorProxy:
    # the input is cast to the result dtype first, then accumulated in its computation dtype
    compute = computation_dtype(result)
    return to_dtype(prim(to_dtype(to_dtype(a, result), compute), dims), result)


def _where_zero(pred: TensorProxy, a: TensorProxy) -> TensorProxy:
    zero = False if a.dtype == torch.bool else (0 if dtype_category(a.dtype) == 1 else 0.0)
    return prims.where(pred, zero, a)


# --- sums and means ---------------------------------------------------------------------


@torchsymbol(torch.sum, torch.Tensor.sum, tags=_REDUCTION)
def sum(a, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim` (every dimension when None); bool and integer sums are int64."""
    _check_input("sum", a)
    dims = reduction_dims(a, dim)
    return keep_dims(_accumulate(prims.sum, a, dims, _sum_dtype(a, dtype)), a, dims, keepdim)


@torchsymbol(torch.nansum, torch.Tensor.nansum, tags=_REDUCTION)
def nansum(a, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero."""
    _check_input("nansum", a)
    if dtype_category(a.dtype) >= 2:
        a = _where_zero(prims.isnan(a), a)
    return sum(a, dim, keepdim, dtype=dtype)


@torchsymbol(torch.prod, torch.Tensor.prod, tags=_REDUCTION)
def prod(a, dim=None, keepdim=False, *, dtype=None):
    """Product over one dim (every element when None)."""
    _check_input("prod", a)
    check(dim is None or isinstance(dim, int), lambda: f"prod(): argument 'dim' must be int, not {type(dim).__name__}", TypeError)
    dims = reduction_dims(a, dim)
    return keep_dims(_accumulate(prims.prod, a, dims, _sum_dtype(a, dtype)), a, dims, keepdim)


def _mean_dtype(a: TensorProxy, dtype: torch.dtype | None) -> torch.dtype:
    if dtype is None:
        check(
            dtype_category(a.dtype) >= 2,
            lambda: f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {a.dtype}",
            RuntimeError,
        )
        return a.dtype
    check(
        dtype_category(dtype) >= 2,
        lambda: f"mean(): could not infer output dtype. Optional dtype must be either a floating point or complex dtype. Got: {dtype}",
        RuntimeError,
    )
    return dtype


def _mean(a: TensorProxy, dims: tuple[int, ...], result: torch.dtype) -> TensorProxy:
    # an empty reduction divides 0 by 0: NaN, as torch gives
    compute = computation_dtype(result)
    total = prims.sum(to_dtype(to_dtype(a, result), compute), dims)
    return to_dtype(prims.div(total, count_operand(_count(a, dims))), result)


@torchsymbol(torch.mean, torch.Tensor.mean, tags=_REDUCTION)
def mean(a, dim=None, keepdim=False, *, dtype=None):
    """Arithmetic mean over `dim`; floating and complex dtypes only."""
    _check_input("mean", a)
    result = _mean_dtype(a, dtype)
    dims = reduction_dims(a, dim)
    return keep_dims(_mean(a, dims, result), a, dims, keepdim)


@torchsymbol(torch.nanmean, torch.Tensor.nanmean, tags=_REDUCTION)
def nanmean(a, dim=None, keepdim=False, *, dtype=None):
    """Mean over the elements that are not NaN."""
    _check_input("nanmean", a)
    result = _mean_dtype(a, dtype)
    dims = reduction_dims(a, dim)
    compute = computation_dtype(result)
    x = to_dtype(to_dtype(a, result), compute)
    isnan = prims.isnan(x)
    total = prims.sum(_where_zero(isnan, x), dims)
    count = prims.sum(to_dtype(prims.logical_not(isnan), compute), dims)
    return keep_dims(to_dtype(prims.div(total, count), result), a, dims, keepdim)


# --- extrema ----------------------------------------------------------------------------


def _check_full_nonempty(name: str, a: TensorProxy, dims: tuple[int, ...]) -> None:
    check(
        a.numel() != 0 or dims != tuple(range(a.ndim)) or a.ndim == 0,
        lambda: f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
        RuntimeError,
    )


def _extremum(name: str, prim, a, dim, keepdim) -> TensorProxy:
    _check_input(name, a)
    check(not a.dtype.is_complex, lambda: f"{name}(): does not support complex input", RuntimeError)
    dims = reduction_dims(a, dim)
    if dim is None or dim == () or dim == []:
        _check_full_nonempty(name, a, dims)
    return keep_dims(prim(a, dims), a, dims, keepdim)


@torchsymbol(torch.amax, torch.Tensor.amax, tags=_REDUCTION)
def amax(a, dim=(), keepdim=False):
    """The largest value over `dim` (every dimension when empty)."""
    return _extremum("amax", prims.amax, a, dim, keepdim)


@torchsymbol(torch.amin, torch.Tensor.amin, tags=_REDUCTION)
def amin(a, dim=(), keepdim=False):
    """The smallest value over `dim` (every dimension when empty)."""
    return _extremum("amin", prims.amin, a, dim, keepdim)


def _arg_extremum(name: str, prim, a, dim, keepdim) -> TensorProxy:
    _check_input(name, a)
    if dim is None:
        check(
            a.numel() != 0,
            lambda: f"{name}(): Expected reduction dim to be specified for input.numel() == 0.",
            IndexError if name.startswith("arg") else RuntimeError,
        )
        flat = prims.reshape(a, (a.numel(),))
        out = prim(flat, 0)
        return prims.reshape(out, (1,) * a.ndim) if keepdim else out
    check(isinstance(dim, int), lambda: f"{name}(): argument 'dim' must be int, not {type(dim).__name__}", TypeError)
    d = canonical_dim(a.ndim, dim)
    if a.ndim == 0:
        return prims.reshape(prim(prims.reshape(a, (1,)), 0), ())
    return keep_dims(prim(a, d), a, (d,), keepdim)


@torchsymbol(torch.argmax, torch.Tensor.argmax, tags=_REDUCTION)
def argmax(a, dim=None, keepdim=False):
    """The index of the largest value over `dim` (of the flattened tensor when None)."""
    return _arg_extremum("argmax", prims.argmax, a, dim, keepdim)


@torchsymbol(torch.argmin, torch.Tensor.argmin, tags=_REDUCTION)
def argmin(a, dim=None, keepdim=False):
    """The index of the smallest value over `dim` (of the flattened tensor when None)."""
    return _arg_extremum("argmin", prims.argmin, a, dim, keepdim)


def _binary_extremum(name: str, prim, a: TensorProxy, b: TensorProxy) -> TensorProxy:
    # max(a, b) is torch.maximum: tensors only, promoted and broadcast
    check(is_tensor(b), lambda: f"{name}(): argument 'other' must be Tensor, not {type(b).__name__}", TypeError)
    dtype, _ = promote(a, b)
    a, b = broadcast(a, b)
    return prim(to_dtype(a, dtype), to_dtype(b, dtype))


def _max_or_min(name: str, a, dim, keepdim, other):
    value_prim, index_prim, binary_prim, result_type = (
        (prims.amax, prims.argmax, prims.maximum, torch.return_types.max)
        if name == "max"
        else (prims.amin, prims.argmin, prims.minimum, torch.return_types.min)
    )
    _check_input(name, a)
    if other is not None or is_tensor(dim):
        return _binary_extremum(name, binary_prim, a, other if other is not None else dim)
    if dim is None:
        return _extremum(name, value_prim, a, None, False)
    values = _extremum(name, value_prim, a, (dim,), keepdim)
    indices = _arg_extremum(name, index_prim, a, dim, keepdim)
    if a.ndim > 0 and a.numel() > 0:
        # the values read at the indices: their gradient reaches the selected element only, as
        # eager's (an amax splits it among ties: a row of zeros after a relu)
        d = canonical_dim(a.ndim, dim)
        at = indices if keepdim else prims.reshape(indices, tuple(1 if i == d else n for i, n in enumerate(a.shape)))
        values = prims.take_along_axis(a, at, d)
        values = values if keepdim else prims.reshape(values, tuple(indices.shape))
    return result_type((values, indices))


@torchsymbol(torch.max, torch.Tensor.max, tags=_REDUCTION)
def max(a, dim=None, keepdim=False, *, other=None):
    """The largest element; with `dim`, (values, indices) along it; with a tensor, torch.maximum."""
    return _max_or_min("max", a, dim, keepdim, other)


@torchsymbol(torch.min, torch.Tensor.min, tags=_REDUCTION)
def min(a, dim=None, keepdim=False, *, other=None):
    """The smallest element; with `dim`, (values, indices) along it; with a tensor, torch.minimum."""
    return _max_or_min("min", a, dim, keepdim, other)


@torchsymbol(torch.aminmax, torch.Tensor.aminmax, tags=_REDUCTION)
def aminmax(a, *, dim=None, keepdim=False):
    """(min, max) over one dim, or over every element when None."""
    _check_input("aminmax", a)
    check(dim is None or isinstance(dim, int), lambda: f"aminmax(): argument 'dim' must be int, not {type(dim).__name__}", TypeError)
    lo = _extremum("aminmax", prims.amin, a, dim, keepdim)
    hi = _extremum("aminmax", prims.amax, a, dim, keepdim)
    return torch.return_types.aminmax((lo, hi))


# --- logical reductions and counts -----------------------------------------------------


def _nonzero(a: TensorProxy) -> TensorProxy:
    return prims.ne(a, False if a.dtype == torch.bool else 0)


def _count_true(pred: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    return prims.sum(prims.convert_element_type(pred, torch.int64), dims)


@torchsymbol(torch.any, torch.Tensor.any, tags=_REDUCTION)
def any(a, dim=None, keepdim=False):
    """Whether any element over `dim` is nonzero (NaN counts as nonzero)."""
    _check_input("any", a)
    dims = reduction_dims(a, dim, empty_means_all=False)
    return keep_dims(prims.gt(_count_true(_nonzero(a), dims), 0), a, dims, keepdim)


@torchsymbol(torch.all, torch.Tensor.all, tags=_REDUCTION)
def all(a, dim=None, keepdim=False):
    """Whether every element over `dim` is nonzero (true for an empty reduction)."""
    _check_input("all", a)
    dims = reduction_dims(a, dim, empty_means_all=False)
    return keep_dims(prims.eq(_count_true(prims.logical_not(_nonzero(a)), dims), 0), a, dims, keepdim)


@torchsymbol(torch.count_nonzero, torch.Tensor.count_nonzero, tags=_REDUCTION)
def count_nonzero(a, dim=None):
    """The number of nonzero elements over `dim`, as int64."""
    _check_input("count_nonzero", a)
    return _count_true(_nonzero(a), reduction_dims(a, dim))


# --- variance ---------------------------------------------------------------------------


def _var_args(name: str, a, dim, unbiased, correction):
    """(dims, correction) from torch's three call forms: (dim, unbiased), (unbiased), (dim, correction=)."""
    _check_input(name, a)
    if isinstance(dim, bool):  # var(x, True): the second positional argument is `unbiased`
        dim, unbiased = None, dim
    check(
        unbiased is None or correction is None,
        lambda: f"{name}(): received both unbiased={unbiased} and correction={correction}; give one",
        TypeError,
    )
    if correction is None:
        correction = 0 if unbiased is False else 1
    check(dtype_category(a.dtype) >= 2, lambda: f"{name}(): std and var only support floating point and complex dtypes, got {a.dtype}", RuntimeError)
    return reduction_dims(a, dim), correction


def _var(a: TensorProxy, dims, correction) -> TensorProxy:
    # low precision is computed in float32, then rounded once
    result = a.dtype.to_real() if a.dtype.is_complex else a.dtype
    return to_dtype(prims.var(to_dtype(a, computation_dtype(a.dtype)), dims, correction=correction), result)


def root_of_sum(total: TensorProxy, ord: float = 2) -> TensorProxy:
    """total ** (1 / ord) (its square root for 2), passing no gradient where `total` is 0.

    The root's derivative at 0 is infinite, and the 0 that the sum's own derivative gives there
    would make it NaN (0 * inf); eager's std and norm backwards mask a zero result instead (a zero
    row normalized, two equal points' distance). The root of the masked places is taken of 1,
    so its gradient there is finite before the select discards it.
    """
    if ord < 0:  # the root of 0 is infinite: no zero result to mask
        return prims.pow(total, 1.0 / ord)
    zero = prims.eq(total, 0.0)
    safe = prims.where(zero, 1.0, total)
    root = prims.sqrt(safe) if ord == 2 else prims.pow(safe, 1.0 / ord)
    return prims.where(zero, 0.0, root)


def _sqrt(x: TensorProxy) -> TensorProxy:
    return to_dtype(root_of_sum(to_dtype(x, computation_dtype(x.dtype))), x.dtype)


@torchsymbol(torch.var, torch.Tensor.var, tags=_REDUCTION)
def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` with Bessel's correction unless `unbiased=False` or `correction=` says otherwise."""
    dims, correction = _var_args("var", a, dim, unbiased, correction)
    return keep_dims(_var(a, dims, correction), a, dims, keepdim)


@torchsymbol(torch.std, torch.Tensor.std, tags=_REDUCTION)
def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation: the square root of var."""
    dims, correction = _var_args("std", a, dim, unbiased, correction)
    return keep_dims(_sqrt(_var(a, dims, correction)), a, dims, keepdim)


@torchsymbol(torch.var_mean, tags=_REDUCTION)
def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over `dim`."""
    dims, correction = _var_args("var_mean", a, dim, unbiased, correction)
    return keep_dims(_var(a, dims, correction), a, dims, keepdim), keep_dims(_mean(a, dims, a.dtype), a, dims, keepdim)


@torchsymbol(torch.std_mean, tags=_REDUCTION)
def std_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over `dim`."""
    dims, correction = _var_args("std_mean", a, dim, unbiased, correction)
    return keep_dims(_sqrt(_var(a, dims, correction)), a, dims, keepdim), keep_dims(_mean(a, dims, a.dtype), a, dims, keepdim)


# --- logsumexp and scans ----------------------------------------------------------------


def _unreduce(x: TensorProxy, a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    """`x`, reduced over `dims` of `a`, broadcast back to `a`'s shape."""
    kept = tuple(i for i in range(a.ndim) if i not in dims)
    return prims.broadcast_in_dim(x, a.shape, kept)


@torchsymbol(torch.logsumexp, torch.Tensor.logsumexp, tags=_REDUCTION)
def logsumexp(a, dim, keepdim=False):
    """log(sum(exp(a))) over `dim`, computed stably by subtracting the maximum first."""
    _check_input("logsumexp", a)
    result = a.dtype if dtype_category(a.dtype) >= 2 else torch.get_default_dtype()
    x = to_dtype(a, computation_dtype(result))
    dims = reduction_dims(a, dim)
    if _count(a, dims) == 0:
        # nothing to subtract: the sum is empty, and log(0) is -inf
        out = prims.log(prims.sum(prims.exp(x), dims))
    else:
        m = prims.amax(x, dims)
        # an all -inf (or +inf) slice would give inf - inf: shift those by 0 instead
        m = prims.where(prims.isinf(m), 0.0, m)
        shifted = prims.exp(prims.sub(x, _unreduce(m, a, dims)))
        out = prims.add(prims.log(prims.sum(shifted, dims)), m)
    return keep_dims(to_dtype(out, result), a, dims, keepdim)


def _scan(name: str, prim, a, dim, dtype) -> TensorProxy:
    _check_input(name, a)
    check(isinstance(dim, int), lambda: f"{name}(): argument 'dim' must be int, not {type(dim).__name__}", TypeError)
    d = canonical_dim(a.ndim, dim)
    result = _sum_dtype(a, dtype)
    x = to_dtype(to_dtype(a, result), computation_dtype(result))
    if a.ndim == 0:
        return to_dtype(prims.reshape(prim(prims.reshape(x, (1,)), 0), ()), result)
    return to_dtype(prim(x, d), result)


@torchsymbol(torch.cumsum, torch.Tensor.cumsum)
def cumsum(a, dim, *, dtype=None):
    """Running sums along `dim`; bool and integer inputs accumulate in int64."""
    return _scan("cumsum", prims.cumsum, a, dim, dtype)


@torchsymbol(torch.cumprod, torch.Tensor.cumprod)
def cumprod(a, dim, *, dtype=None):
    """Running products along `dim`; bool and integer inputs accumulate in int64."""
    return _scan("cumprod", prims.cumprod, a, dim, dtype)


# --- selection: topk and sort -----------------------------------------------------------


# --- norms ------------------------------------------------------------------------------
