"""Torch-language ops: padding (torch.nn.functional.pad: constant, reflect, replicate, circular)."""
from __future__ import annotations

import torch

from .. import prims
from .base import torchsymbol
from .unmodelled import NotModelled
from .helpers import check
from .shape import _sizes, _slice_dim
from ..proxies import TensorProxy

__all__ = [
    "pad",
]


def _edge_pad(a: TensorProxy, d: int, lo: int, hi: int, mode: str) -> TensorProxy:
    n = a.shape[d]
    if mode == "replicate":
        check(n > 0 or lo + hi == 0, lambda: f"padding size should be less than the corresponding input dimension, but got: padding ({lo}, {hi}) at dimension {d} of input {list(a.shape)}")
        left = [_edge_repeated(a, d, 0, lo)] if lo else []
        right = [_edge_repeated(a, d, n - 1, hi)] if hi else []
    elif mode == "reflect":
        check(lo < n and hi < n, lambda: f"Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({lo}, {hi}) at dimension {d} of input {list(a.shape)}")
        left = [prims.flip(_slice_dim(a, d, 1, lo + 1), (d,))] if lo else []
        right = [prims.flip(_slice_dim(a, d, n - 1 - hi, n - 1), (d,))] if hi else []
    else:  # circular
        check(lo <= n and hi <= n, lambda: "Padding value causes wrapping around more than once.")
        left = [_slice_dim(a, d, n - lo, n)] if lo else []
        right = [_slice_dim(a, d, 0, hi)] if hi else []
    return prims.cat([*left, a, *right], d) if left or right else a


def _edge_repeated(a: TensorProxy, d: int, at: int, count: int) -> TensorProxy:
    """The slice of `a` at `at` along `d`, `count` times over: a broadcast, so a symbolic count
    stays a size (a list of `count` slices read its value)."""
    edge = _slice_dim(a, d, at, at + 1)
    return prims.broadcast_in_dim(edge, tuple(count if i == d else n for i, n in enumerate(edge.shape)), tuple(range(edge.ndim)))


@torchsymbol(torch.nn.functional.pad)
def pad(input, pad, mode="constant", value=None):
    pad = _sizes("pad", (pad,))
    check(len(pad) % 2 == 0, lambda: "Padding length must be divisible by 2")
    check(
        len(pad) // 2 <= input.ndim,
        lambda: f"Padding length should be less than or equal to two times the input dimension but got padding length {len(pad)} and input of dimension {input.ndim}",
    )
    # pad lists (low, high) pairs from the last dimension backwards
    pairs = {input.ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)}
    if mode == "constant":
        fill = 0 if value is None else value
        fill = bool(fill) if input.dtype == torch.bool else (fill if input.dtype.is_floating_point or input.dtype.is_complex else int(fill))
        return prims.pad(input, fill, [(*pairs.get(d, (0, 0)), 0) for d in range(input.ndim)])
    check(mode in ("reflect", "replicate", "circular"), lambda: f"Unrecognised padding mode {mode}", NotImplementedError)
    check(value is None or value == 0, lambda: f"Padding mode \"{mode}\" doesn't take in value argument", ValueError)
    n_pad = len(pairs)
    check(
        n_pad in (1, 2, 3) and input.ndim in (n_pad + 1, n_pad + 2),
        lambda: f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.",
        NotImplementedError,
    )
    check(all(v >= 0 for v in pad), lambda: f"squall: negative padding in mode {mode!r} is not supported", NotModelled)
    out = input
    for d, (lo, hi) in sorted(pairs.items()):
        out = _edge_pad(out, d, lo, hi, mode)
    return out if out is not input else prims.reshape(input, input.shape)
