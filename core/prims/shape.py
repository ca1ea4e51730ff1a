"""Shape prims: no broadcasting or defaults; every dimension is explicit."""
from __future__ import annotations

from squall.prims.base import PrimIDs, check, make_prim
from squall.proxies import TensorProxy
from squall.symbol import Tags


def _broadcast_in_dim_meta(a, shape, broadcast_dimensions):
    check(isinstance(a, TensorProxy), lambda: f"broadcast_in_dim expects a tensor, got {type(a).__name__}", TypeError)
    shape = tuple(shape)
    dims = tuple(broadcast_dimensions)
    check(len(dims) == a.ndim, lambda: f"broadcast_in_dim expects one broadcast dimension per input dimension ({a.ndim}), got {dims}", ValueError)
    check(all(isinstance(s, int) and s >= 0 for s in shape), lambda: f"broadcast_in_dim expects non-negative int sizes, got {shape}", ValueError)
    check(list(dims) == sorted(set(dims)), lambda: f"broadcast_in_dim expects strictly increasing broadcast dimensions, got {dims}", ValueError)
    for d, n in zip(dims, a.shape):
        check(0 <= d < len(shape), lambda: f"broadcast_in_dim: dimension {d} is out of range for shape {list(shape)}", IndexError)
        check(n == 1 or n == shape[d], lambda: f"broadcast_in_dim cannot broadcast size {n} to {shape[d]} (dimension {d} of {list(shape)})", ValueError)
    return TensorProxy(like=a, shape=shape)


broadcast_in_dim = make_prim(PrimIDs.BROADCAST_IN_DIM, "broadcast_in_dim", meta=_broadcast_in_dim_meta, tags=(Tags.SHAPE_ONLY,))


def _reshape_meta(a, shape):
    check(isinstance(a, TensorProxy), lambda: f"reshape expects a tensor, got {type(a).__name__}", TypeError)
    shape = tuple(shape)
    check(all(isinstance(s, int) and s >= 0 for s in shape), lambda: f"reshape expects non-negative int sizes (no -1 at this level), got {shape}", ValueError)
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

__all__ = ["broadcast_in_dim", "reshape", "transpose"]
