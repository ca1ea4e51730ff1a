"""Torch-language ops: resizing images and feature maps (interpolate, pixel_shuffle, pixel_unshuffle)."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import NotInLanguage, torchsymbol
from .unmodelled import NotModelled
from .helpers import check, computation_dtype, is_tensor, to_dtype
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from ..proxies import TensorProxy
from ..symbolic import SymInt

__all__ = [
    "pixel_shuffle", "pixel_unshuffle", "interpolate",
]


# --- attention ---------------------------------------------------------------------------


# --- adaptive pooling --------------------------------------------------------------------
# Output cell i of a dimension of size L pools input [floor(i*L/out), ceil((i+1)*L/out)).


# --- distances ---------------------------------------------------------------------------


# --- pixel shuffle -----------------------------------------------------------------------


def _check_shuffle(name: str, input, factor, what: str) -> None:
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(input.ndim >= 3, lambda: f"{name} expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)", RuntimeError)
    check(isinstance(factor, int) and not isinstance(factor, bool), lambda: f"{name}(): argument '{what}' must be int, not {type(factor).__name__}", TypeError)
    check(factor > 0, lambda: f"{name} expects a positive {what}, but got {factor}", RuntimeError)


@torchsymbol(torch.nn.functional.pixel_shuffle)
def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    _check_shuffle("pixel_shuffle", input, upscale_factor, "upscale_factor")
    r = upscale_factor
    *batch, c, h, w = input.shape
    check(
        c % (r * r) == 0,
        lambda: f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}",
        RuntimeError,
    )
    b = len(batch)
    x = prims.reshape(input, (*batch, c // (r * r), r, r, h, w))
    x = prims.transpose(x, [*range(b), b, b + 3, b + 1, b + 4, b + 2])
    return prims.reshape(x, (*batch, c // (r * r), h * r, w * r))


@torchsymbol(torch.nn.functional.pixel_unshuffle)
def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    _check_shuffle("pixel_unshuffle", input, downscale_factor, "downscale_factor")
    r = downscale_factor
    *batch, c, h, w = input.shape
    check(h % r == 0, lambda: f"pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)={h} is not divisible by {r}", RuntimeError)
    check(w % r == 0, lambda: f"pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)={w} is not divisible by {r}", RuntimeError)
    if input.numel() == 0:
        return input  # torch returns an empty input unchanged, shape included
    b = len(batch)
    x = prims.reshape(input, (*batch, c, h // r, r, w // r, r))
    x = prims.transpose(x, [*range(b), b, b + 2, b + 4, b + 1, b + 3])
    return prims.reshape(x, (*batch, c * r * r, h // r, w // r))


# --- interpolate -------------------------------------------------------------------------

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}  # (with the spatial dimensions each takes)


def _output_sizes(input: TensorProxy, n: int, size, scale_factor, recompute_scale_factor) -> tuple[list[int], list[float | None]]:
    """Output sizes and the scale factors torch's kernels use (None: derive from the sizes)."""
    check(size is None or scale_factor is None, lambda: "only one of size or scale_factor should be defined", ValueError)
    check(size is not None or scale_factor is not None, lambda: "either size or scale_factor should be defined", ValueError)
    spatial = list(input.shape[2:])
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * n
        check(
            len(sizes) == n,
            lambda: f"Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of {spatial} and output size of {sizes}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.",
            ValueError,
        )
        return [s if type(s) is SymInt else int(s) for s in sizes], [None] * n
    scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * n
    check(
        len(scales) == n,
        lambda: f"Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of {spatial} and scale_factor of shape {scales}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.",
        ValueError,
    )
    sizes = [_scaled_size(L, float(s)) for L, s in zip(spatial, scales)]
    return sizes, ([None] * n if recompute_scale_factor else [float(s) for s in scales])


def _scaled_size(L: int | SymInt, scale: float) -> int | SymInt:
    """floor(L * scale), as torch computes it in double. A symbolic L stays a size expression
    (`2*s0`, `(3*s0) // 2`) where the scale is a ratio p / 2**k with a small p (any double is one
    with a power of two below): L * p / 2**k is then exact in double, so the floor is eager's, for
    every L the guard below admits. Else the value of L is read (guarded)."""
    num, den = scale.as_integer_ratio() if math.isfinite(scale) else (0, 0)
    if type(L) is SymInt and 0 < num <= _EXACT_NUMERATOR and L < 2**53 // _EXACT_NUMERATOR:  # (a shape guard)
        return L * num if den == 1 else (L * num) // den
    return math.floor(float(L) * scale)


_EXACT_NUMERATOR = 2**20  # (2, 0.5, 1.5, 2.25, 0.3125, ...)


def _source_positions(L: int, out: int, scale: float | None, align_corners: bool, *, nearest: str | None, device, dtype) -> TensorProxy:
    """For each output position, the (fractional) input position it samples, as torch computes it."""
    i = prims.iota(out, start=0, step=1, device=device, dtype=dtype)
    if nearest is not None:
        ratio = 1.0 / scale if scale is not None and scale > 0 else _size_ratio(L, out, device, dtype)
        offset = 0.5 if nearest == "nearest-exact" else 0.0
        return prims.mul(prims.add(i, offset), ratio) if offset else prims.mul(i, ratio)
    if align_corners:
        return prims.mul(i, _corner_ratio(L, out, device, dtype))
    ratio = 1.0 / scale if scale is not None and scale > 0 else _size_ratio(L, out, device, dtype)
    src = prims.sub(prims.mul(prims.add(i, 0.5), ratio), 0.5)
    return prims.maximum(src, 0.0)  # linear modes clamp negative positions to 0


def _size_ratio(L: int | SymInt, out: int | SymInt, device, dtype) -> float | TensorProxy:
    """L / out, by which an output position scales to an input one where no scale factor is
    given: a number where both are constants; where a size is symbolic, computed by the program
    as the kernel does, `(float) L / out` in `dtype`, broadcast over the `out` positions (its
    value read would compile once per size)."""
    if type(L) is not SymInt and type(out) is not SymInt:
        return L / out
    ratio = prims.div(prims.full((), L, device=device, dtype=dtype), out)
    return prims.broadcast_in_dim(ratio, (out,), ())


def _corner_ratio(L: int | SymInt, out: int | SymInt, device, dtype) -> float | TensorProxy:
    """(L - 1) / (out - 1), align_corners' scale (0 for a single output): as `_size_ratio`, a
    number where both sizes are constants, else computed by the program in `dtype` as the kernel
    computes it, broadcast over the `out` positions."""
    if not out > 1:  # (a shape guard where out is symbolic)
        return 0.0
    if type(L) is not SymInt and type(out) is not SymInt:
        return (L - 1) / (out - 1)
    ratio = prims.div(prims.full((), L - 1, device=device, dtype=dtype), out - 1)
    return prims.broadcast_in_dim(ratio, (out,), ())


def _gather(x: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    return prims.take(x, index, dim)


# torch's cubic convolution kernel (Keys, a = -0.75; aten/src/ATen/native/UpSample.h), over the
# four taps floor(src) - 1 .. floor(src) + 2 at distances t + 1, t, 1 - t, 2 - t
_CUBIC_A = -0.75


def _cubic_near(x: TensorProxy) -> TensorProxy:  # |x| <= 1
    a = _CUBIC_A
    return prims.add(prims.mul(prims.mul(prims.sub(prims.mul(x, a + 2), a + 3), x), x), 1.0)


def _cubic_far(x: TensorProxy) -> TensorProxy:  # 1 < |x| < 2
    a = _CUBIC_A
    return prims.sub(prims.mul(prims.add(prims.mul(prims.sub(prims.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)


def _resize_dim_cubic(x: TensorProxy, dim: int, out: int, scale, align_corners: bool, pos_dtype: torch.dtype) -> TensorProxy:
    L = x.shape[dim]
    i = prims.iota(out, start=0, step=1, device=x.device, dtype=pos_dtype)
    if align_corners:
        src = prims.mul(i, _corner_ratio(L, out, x.device, pos_dtype))
    else:  # (unlike the linear modes', a negative position is not clamped)
        ratio = 1.0 / scale if scale is not None and scale > 0 else _size_ratio(L, out, x.device, pos_dtype)
        src = prims.sub(prims.mul(prims.add(i, 0.5), ratio), 0.5)
    floor = prims.floor(src)
    t = prims.sub(src, floor)
    s = prims.sub(1.0, t)
    weights = (_cubic_far(prims.add(t, 1.0)), _cubic_near(t), _cubic_near(s), _cubic_far(prims.add(s, 1.0)))
    base = prims.convert_element_type(floor, torch.int64)
    shape = [out if d == dim else n for d, n in enumerate(x.shape)]
    result = None
    for k, w in enumerate(weights):
        idx = prims.minimum(prims.maximum(prims.add(base, k - 1), 0), L - 1)  # taps past an edge read the edge
        term = prims.mul(_gather(x, dim, idx), prims.broadcast_in_dim(to_dtype(w, x.dtype), shape, [dim]))
        result = term if result is None else prims.add(result, term)
    return result


def _resize_dim(x: TensorProxy, dim: int, out: int, scale, mode: str, align_corners: bool) -> TensorProxy:
    L = x.shape[dim]
    # index arithmetic in float32, or float64 for float64 inputs, like torch's kernels
    pos_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if mode == "bicubic":
        return _resize_dim_cubic(x, dim, out, scale, align_corners, pos_dtype)
    if mode in ("nearest", "nearest-exact"):
        src = _source_positions(L, out, scale, False, nearest=mode, device=x.device, dtype=torch.float32)
        idx = prims.minimum(prims.convert_element_type(prims.floor(src), torch.int64), L - 1)
        return _gather(x, dim, idx)
    if out == L:
        # eager's kernel samples input i for output i whatever the scale factor (1.1 on 5 elements
        # gives 5), with weights 1 and 0 on the same element: x * 1 + x * 0, NaN at an infinity as there
        return prims.add(prims.mul(x, 1.0), prims.mul(x, 0.0))
    src = _source_positions(L, out, scale, align_corners, nearest=None, device=x.device, dtype=pos_dtype)
    lo = prims.minimum(prims.convert_element_type(prims.floor(src), torch.int64), L - 1)
    hi = prims.minimum(prims.add(lo, 1), L - 1)
    frac = to_dtype(prims.sub(src, prims.convert_element_type(lo, pos_dtype)), x.dtype)
    w1 = prims.broadcast_in_dim(frac, [out if d == dim else n for d, n in enumerate(x.shape)], [dim])
    a, b = _gather(x, dim, lo), _gather(x, dim, hi)
    return prims.add(prims.mul(a, prims.sub(1.0, w1)), prims.mul(b, w1))


@torchsymbol(torch.nn.functional.interpolate)
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate: nearest, nearest-exact, (bi/tri)linear, bicubic and area modes."""
    check(is_tensor(input), lambda: f"interpolate(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    n = input.ndim - 2
    if mode in ("nearest", "nearest-exact", "area"):
        check(
            align_corners is None,
            lambda: "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear",
            ValueError,
        )
    check(not antialias, lambda: "interpolate(): antialias=True is not supported by squall", NotInLanguage)
    known = ("nearest", "nearest-exact", "area", "linear", "bilinear", "bicubic", "trilinear")
    check(mode in known, lambda: f"interpolate(): unknown mode {mode!r}; squall supports {', '.join(known)}", NotModelled)
    check(
        1 <= n <= 3 and (mode not in _LINEAR_MODES or _LINEAR_MODES[mode] == n),
        lambda: f"Got {input.ndim}D input, but {mode} mode needs {(_LINEAR_MODES.get(mode, 1) + 2)}D input" if mode in _LINEAR_MODES else f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})",
        NotImplementedError,
    )
    sizes, scales = _output_sizes(input, n, size, scale_factor, recompute_scale_factor)
    check(all(s > 0 for s in sizes), lambda: f"interpolate(): output sizes should be greater than 0, but got {sizes}", RuntimeError)
    check(all(L > 0 for L in input.shape[2:]), lambda: f"interpolate(): input sizes should be greater than 0, but got input of size {list(input.shape)}", RuntimeError)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](input, sizes)
    x = input
    linear = mode in _LINEAR_MODES
    # (eager resizes uint8 images in the linear and bicubic modes, and refuses other integers: its call answers)
    check(not linear or input.dtype.is_floating_point, lambda: f"interpolate(): {mode} interpolation of {input.dtype} is not supported by squall", NotInLanguage)
    if linear:
        x = to_dtype(x, computation_dtype(x.dtype))
    if mode == "bicubic" and sizes == list(input.shape[2:]):
        return prims.mul(input, 1)  # eager's kernel copies an input of the output's size
    # (bicubic resizes the width first: eager's kernel sums each row's four taps, then the rows')
    order = reversed(list(enumerate(zip(sizes, scales)))) if mode == "bicubic" else enumerate(zip(sizes, scales))
    for i, (out, scale) in order:
        x = _resize_dim(x, 2 + i, out, scale, mode, bool(align_corners))
    return to_dtype(x, input.dtype)
