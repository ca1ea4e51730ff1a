"""Torch-language ops: flips, rolls and rotations, and the triangles of a matrix (tril, triu)."""
from __future__ import annotations

import torch

from .. import prims
from .base import torchsymbol
from .helpers import canonical_dim, check
from .shape import _dims, _sizes, _slice_dim, flatten, transpose
from ..proxies import TensorProxy

__all__ = [
    "flip", "fliplr", "flipud", "roll", "rot90", "tril", "triu",
]


@torchsymbol(torch.Tensor.flip, torch.flip)
def flip(input, *dims_args, dims=None):
    dims = _sizes("flip", dims_args, dims)
    canon = [canonical_dim(input.ndim, d) for d in dims]
    for c in canon:
        check(canon.count(c) == 1, lambda: f"dim {c} appears multiple times in the list of dims")
    return prims.flip(input, tuple(c for c in canon if input.ndim))


@torchsymbol(torch.fliplr)
def fliplr(input):
    check(input.ndim >= 2, lambda: "Input must be >= 2-d.")
    return prims.flip(input, (1,))


@torchsymbol(torch.flipud)
def flipud(input):
    check(input.ndim >= 1, lambda: "Input must be >= 1-d.")
    return prims.flip(input, (0,))


def _roll_dim(a: TensorProxy, shift: int, d: int) -> TensorProxy:
    n = a.shape[d]
    if n == 0 or shift % n == 0:
        return a
    s = shift % n
    return prims.cat([_slice_dim(a, d, n - s, n), _slice_dim(a, d, 0, n - s)], d)


@torchsymbol(torch.roll, torch.Tensor.roll)
def roll(input, shifts, dims=None):
    shifts, dims = _dims(shifts), (() if dims is None else _dims(dims))
    if not dims:
        check(len(shifts) == 1, lambda: f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return prims.reshape(_roll_dim(flatten(input), shifts[0], 0), input.shape)
    check(len(shifts) == len(dims), lambda: f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = input
    for s, d in zip(shifts, dims):
        out = _roll_dim(out, s, canonical_dim(input.ndim, d))
    return out if out is not input else prims.reshape(input, input.shape)


@torchsymbol(torch.rot90, torch.Tensor.rot90)
def rot90(input, k=1, dims=(0, 1)):
    dims = tuple(dims)
    check(len(dims) == 2, lambda: f"expected total rotation dims == 2, but got dims = {len(dims)}")
    check(input.ndim >= 2, lambda: f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = canonical_dim(input.ndim, dims[0]), canonical_dim(input.ndim, dims[1])
    check(d0 != d1, lambda: f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(prims.flip(input, (d1,)), d0, d1)
    if k == 2:
        return prims.flip(input, (d0, d1))
    if k == 3:
        return transpose(prims.flip(input, (d0,)), d0, d1)
    return prims.reshape(input, input.shape)


def _triangle(name: str, a: TensorProxy, diagonal: int, lower: bool) -> TensorProxy:
    check(a.ndim >= 2, lambda: f"{name}: input tensor must have at least 2 dimensions")
    rows, cols = a.shape[-2], a.shape[-1]
    r = prims.iota(rows, start=0, step=1, device=a.device, dtype=torch.int64)
    c = prims.iota(cols, start=0, step=1, device=a.device, dtype=torch.int64)
    offset = prims.sub(prims.broadcast_in_dim(c, (rows, cols), (1,)), prims.broadcast_in_dim(r, (rows, cols), (0,)))
    # an element (i, j) is on or below the diagonal-th diagonal when j - i <= diagonal
    keep = prims.le(offset, diagonal) if lower else prims.ge(offset, diagonal)
    keep = prims.broadcast_in_dim(keep, a.shape, (a.ndim - 2, a.ndim - 1))
    return prims.where(keep, a, False if a.dtype == torch.bool else 0)


@torchsymbol(torch.tril, torch.Tensor.tril)
def tril(input, diagonal=0):
    return _triangle("tril", input, diagonal, lower=True)


@torchsymbol(torch.triu, torch.Tensor.triu)
def triu(input, diagonal=0):
    return _triangle("triu", input, diagonal, lower=False)
