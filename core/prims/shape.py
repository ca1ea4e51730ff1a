"""Shape prims: no broadcasting or defaults; every dimension is explicit."""
from __future__ import annotations

from .base import PrimIDs, check, is_number, make_prim
from ..proxies import TensorProxy
from ..symbolic import same_size
from ..symbol import Tags
from .base import is_size


def _broadcast_in_dim_meta(a, shape, broadcast_dimensions):
    check(isinstance(a, TensorProxy), lambda: f"broadcast_in_dim expects a tensor, got {type(a).__name__}", TypeError)
    shape = tuple(shape)
    dims = tuple(broadcast_dimensions)
    check(len(dims) == a.ndim, lambda: f"broadcast_in_dim expects one broadcast dimension per input dimension ({a.ndim}), got {dims}", ValueError)
    check(all(is_size(s) and s >= 0 for s in shape), lambda: f"broadcast_in_dim expects non-negative int sizes, got {shape}", ValueError)
    check(list(dims) == sorted(set(dims)), lambda: f"broadcast_in_dim expects strictly increasing broadcast dimensions, got {dims}", ValueError)
    for d, n in zip(dims, a.shape):
        check(0 <= d < len(shape), lambda: f"broadcast_in_dim: dimension {d} is out of range for shape {list(shape)}", IndexError)
        check(same_size(n, shape[d]) or n == 1 or n == shape[d], lambda: f"broadcast_in_dim cannot broadcast size {n} to {shape[d]} (dimension {d} of {list(shape)})", ValueError)
    return TensorProxy(like=a, shape=shape)


broadcast_in_dim = make_prim(PrimIDs.BROADCAST_IN_DIM, "broadcast_in_dim", meta=_broadcast_in_dim_meta, tags=(Tags.SHAPE_ONLY,))


def _reshape_meta(a, shape):
    check(isinstance(a, TensorProxy), lambda: f"reshape expects a tensor, got {type(a).__name__}", TypeError)
    shape = tuple(shape)
    check(all(is_size(s) and s >= 0 for s in shape), lambda: f"reshape expects non-negative int sizes (no -1 at this level), got {shape}", ValueError)
    n = 1
    for s in shape:
        n *= s
    check(n == a.numel(), lambda: f"shape '{list(shape)}' is invalid for input of size {a.numel()}", RuntimeError)
    return TensorProxy(like=a, shape=shape)


reshape = make_prim(PrimIDs.RESHAPE, "reshape", meta=_reshape_meta, tags=(Tags.SHAPE_ONLY,))


def _transpose_meta(a, permutation):
    check(isinstance(a, TensorProxy), lambda: f"transpose expects a tensor, got {type(a).__name__}", TypeError)
    perm = tuple(permutation)
    check(sorted(perm) == list(range(a.ndim)), lambda: f"transpose expects a permutation of range({a.ndim}), got {perm}", ValueError)
    return TensorProxy(like=a, shape=tuple(a.shape[p] for p in perm))


transpose = make_prim(PrimIDs.TRANSPOSE, "transpose", meta=_transpose_meta, tags=(Tags.SHAPE_ONLY,))



def _check_per_dim(name: str, a: TensorProxy, what: str, values) -> tuple:
    values = tuple(values)
    check(len(values) == a.ndim, lambda: f"{name} expects one {what} per dimension of the {a.ndim}-d input, got {values}", ValueError)
    check(all(map(is_size, values)), lambda: f"{name} expects int {what}s, got {values}", TypeError)
    return values


def _slice_meta(a, start_indices, end_indices, strides):
    check(isinstance(a, TensorProxy), lambda: f"slice expects a tensor, got {type(a).__name__}", TypeError)
    starts = _check_per_dim("slice", a, "start index", start_indices)
    ends = _check_per_dim("slice", a, "end index", end_indices)
    steps = _check_per_dim("slice", a, "stride", strides)
    shape = []
    for d, (lo, hi, st, n) in enumerate(zip(starts, ends, steps, a.shape)):
        check(0 <= lo <= hi <= n, lambda: f"slice expects 0 <= start <= end <= size in every dimension, got start {lo}, end {hi} for size {n} (dimension {d} of {list(a.shape)})", IndexError)
        check(st >= 1, lambda: f"slice expects strides >= 1, got {st} in dimension {d}", ValueError)
        shape.append((hi - lo + st - 1) // st)
    return TensorProxy(like=a, shape=shape)


slice = make_prim(PrimIDs.SLICE, "slice", meta=_slice_meta, tags=(Tags.SHAPE_ONLY,))


def _squeeze_meta(a, dims):
    check(isinstance(a, TensorProxy), lambda: f"squeeze expects a tensor, got {type(a).__name__}", TypeError)
    dims = tuple(dims)
    check(all(isinstance(d, int) and 0 <= d < a.ndim for d in dims), lambda: f"squeeze expects dims in [0, {a.ndim}) (canonical, no negatives), got {dims}", IndexError)
    check(len(set(dims)) == len(dims), lambda: f"squeeze expects distinct dims, got {dims}", ValueError)
    for d in dims:
        check(a.shape[d] == 1, lambda: f"squeeze expects dimension {d} to have size 1, but {list(a.shape)} has {a.shape[d]}", ValueError)
    return TensorProxy(like=a, shape=[n for i, n in enumerate(a.shape) if i not in dims])


squeeze = make_prim(PrimIDs.SQUEEZE, "squeeze", meta=_squeeze_meta, tags=(Tags.SHAPE_ONLY,))


def _cat_meta(tensors, dim):
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else tensors
    check(isinstance(tensors, list) and len(tensors) > 0, lambda: "cat expects a non-empty sequence of tensors", ValueError)
    check(all(isinstance(t, TensorProxy) for t in tensors), lambda: f"cat expects tensors, got {[type(t).__name__ for t in tensors]}", TypeError)
    first = tensors[0]
    check(first.ndim > 0, lambda: "cat expects tensors of at least one dimension, got a 0-d tensor", ValueError)
    check(isinstance(dim, int) and 0 <= dim < first.ndim, lambda: f"cat expects a canonical dim in [0, {first.ndim}), got {dim}", IndexError)
    size = 0
    for i, t in enumerate(tensors):
        check(t.dtype == first.dtype, lambda: f"cat expects tensors of one dtype, got {first.dtype} and {t.dtype} (tensor {i})", TypeError)
        check(t.device == first.device, lambda: f"cat expects tensors on one device, got {first.device} and {t.device} (tensor {i})", RuntimeError)
        check(t.ndim == first.ndim, lambda: f"cat expects tensors of one rank, got shapes {list(first.shape)} and {list(t.shape)} (tensor {i})", ValueError)
        for d in range(first.ndim):
            check(d == dim or t.shape[d] == first.shape[d], lambda: f"cat expects sizes to match except in dimension {dim}, got shapes {list(first.shape)} and {list(t.shape)} (tensor {i})", ValueError)
        size += t.shape[dim]
    shape = list(first.shape)
    shape[dim] = size
    return TensorProxy(like=first, shape=shape, requires_grad=any(t.requires_grad for t in tensors))


cat = make_prim(PrimIDs.CAT, "cat", meta=_cat_meta)


def _pad_meta(a, padding_value, padding_config):
    check(isinstance(a, TensorProxy), lambda: f"pad expects a tensor, got {type(a).__name__}", TypeError)
    check(is_number(padding_value), lambda: f"pad expects a number as padding value, got {type(padding_value).__name__}", TypeError)
    config = tuple(tuple(c) for c in padding_config)
    check(len(config) == a.ndim and all(len(c) == 3 for c in config), lambda: f"pad expects one (low, high, interior) triple per dimension of the {a.ndim}-d input, got {config}", ValueError)
    shape = []
    for d, ((lo, hi, interior), n) in enumerate(zip(config, a.shape)):
        check(all(map(is_size, (lo, hi, interior))), lambda: f"pad expects int padding, got {config[d]} in dimension {d}", TypeError)
        check(interior >= 0, lambda: f"pad expects interior padding >= 0, got {interior} in dimension {d}", ValueError)
        size = lo + hi + (n + (n - 1) * interior if n > 0 else 0)
        check(size >= 0, lambda: f"pad: padding {config[d]} leaves a negative size ({size}) in dimension {d} of {list(a.shape)}", ValueError)
        shape.append(size)
    return TensorProxy(like=a, shape=shape)


pad = make_prim(PrimIDs.PAD, "pad", meta=_pad_meta)


def _flip_meta(a, dims):
    check(isinstance(a, TensorProxy), lambda: f"flip expects a tensor, got {type(a).__name__}", TypeError)
    dims = tuple(dims)
    check(all(isinstance(d, int) and 0 <= d < a.ndim for d in dims), lambda: f"flip expects dims in [0, {a.ndim}) (canonical, no negatives), got {dims}", IndexError)
    check(len(set(dims)) == len(dims), lambda: f"flip expects distinct dims, got {dims}", ValueError)
    return TensorProxy(like=a)


flip = make_prim(PrimIDs.FLIP, "flip", meta=_flip_meta)


def _unfold_meta(a, dim, size, step):
    check(isinstance(a, TensorProxy), lambda: f"unfold expects a tensor, got {type(a).__name__}", TypeError)
    check(a.ndim > 0, lambda: "unfold expects a tensor of at least one dimension (reshape a 0-d tensor first)", ValueError)
    check(isinstance(dim, int) and 0 <= dim < a.ndim, lambda: f"unfold expects a canonical dim in [0, {a.ndim}), got {dim}", IndexError)
    check(isinstance(step, int) and step > 0, lambda: f"unfold expects a step > 0, got {step}", ValueError)
    check(isinstance(size, int) and 0 <= size <= a.shape[dim], lambda: f"unfold expects 0 <= size <= {a.shape[dim]} (the size of dimension {dim}), got {size}", ValueError)
    shape = list(a.shape)
    shape[dim] = (a.shape[dim] - size) // step + 1
    return TensorProxy(like=a, shape=(*shape, size))


unfold = make_prim(PrimIDs.UNFOLD, "unfold", meta=_unfold_meta, tags=(Tags.SHAPE_ONLY,))

__all__ = ["broadcast_in_dim", "reshape", "transpose", "slice", "squeeze", "cat", "pad", "flip", "unfold"]
