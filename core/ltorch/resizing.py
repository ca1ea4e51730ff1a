"""Torch-language ops for attention, distances and resizing: scaled_dot_product_attention,
adaptive pooling (any output size), cdist, pixel_shuffle / pixel_unshuffle, interpolate."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .helpers import broadcast_shapes, broadcast_to, check, computation_dtype, is_tensor, to_dtype
from .matmul import matmul
from ..proxies import TensorProxy

__all__: list[str] = []


# --- attention ---------------------------------------------------------------------------


def _safe_softmax(scores: TensorProxy) -> TensorProxy:
    """softmax over the last dim where a row with every score -inf (fully masked) gives zeros, as torch does."""
    last = scores.ndim - 1
    if scores.shape[last] == 0:
        return scores
    row_max = prims.amax(scores, [last])
    masked_row = prims.eq(row_max, -math.inf)
    # a fully masked row subtracts 0, not -inf: exp(-inf - 0) = 0 rather than NaN
    shift = prims.broadcast_in_dim(prims.where(masked_row, 0.0, row_max), scores.shape, list(range(last)))
    e = prims.exp(prims.sub(scores, shift))
    total = prims.broadcast_in_dim(prims.sum(e, [last]), scores.shape, list(range(last)))
    probs = prims.div(e, total)
    return prims.where(prims.broadcast_in_dim(masked_row, scores.shape, list(range(last))), 0.0, probs)


def _repeat_heads(t: TensorProxy, repeats: int) -> TensorProxy:
    """repeat_interleave(t, repeats, dim=-3): each key/value head serves `repeats` query heads."""
    if repeats == 1:
        return t
    shape = list(t.shape)
    h = t.ndim - 3
    expanded = shape[: h + 1] + [repeats] + shape[h + 1 :]
    t = prims.broadcast_in_dim(t, expanded, [d for d in range(len(expanded)) if d != h + 1])
    return prims.reshape(t, shape[:h] + [shape[h] * repeats] + shape[h + 1 :])


@torchsymbol(torch.nn.functional.scaled_dot_product_attention)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, computed in float32 for low precision inputs."""
    for arg, t in (("query", query), ("key", key), ("value", value)):
        check(is_tensor(t), lambda: f"scaled_dot_product_attention(): argument '{arg}' must be Tensor, not {type(t).__name__}", TypeError)
    check(
        query.dtype == key.dtype == value.dtype,
        lambda: f"Expected query, key, and value to have the same dtype, but got query.dtype: {query.dtype} key.dtype: {key.dtype} and value.dtype: {value.dtype} instead.",
        RuntimeError,
    )
    check(query.dtype.is_floating_point, lambda: f"scaled_dot_product_attention(): expected floating point query, key and value, got {query.dtype}", RuntimeError)
    check(
        min(query.ndim, key.ndim, value.ndim) >= 2,
        lambda: f"Expected query, key, and value to all be at least 2 dimensional, but got query.dim: {query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.",
        RuntimeError,
    )
    check(
        attn_mask is None or not is_causal,
        lambda: "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True",
        RuntimeError,
    )
    check(dropout_p <= 1, lambda: f"dropout probability has to be between 0 and 1, but got {dropout_p}", RuntimeError)
    if attn_mask is not None:
        check(is_tensor(attn_mask), lambda: f"scaled_dot_product_attention(): attn_mask must be a Tensor or None, not {type(attn_mask).__name__}", TypeError)
        check(
            attn_mask.dtype in (torch.bool, torch.float32, query.dtype),
            lambda: f"Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {attn_mask.dtype} and query.dtype: {query.dtype} instead.",
            RuntimeError,
        )
    check(key.shape[-1] == query.shape[-1], lambda: f"scaled_dot_product_attention(): query and key must have the same embedding size, got {list(query.shape)} and {list(key.shape)}", RuntimeError)
    check(key.shape[-2] == value.shape[-2], lambda: f"scaled_dot_product_attention(): key and value must have the same sequence length, got {list(key.shape)} and {list(value.shape)}", RuntimeError)
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        check(
            hk > 0 and hv > 0 and hq % hk == 0 and hq % hv == 0,
            lambda: f"Number of heads in key and value must divide the number of heads in query, got {hq} query heads, {hk} key heads and {hv} value heads",
            RuntimeError,
        )
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hv)

    dtype = query.dtype
    compute = computation_dtype(dtype)
    q, k, v = (to_dtype(t, compute) for t in (query, key, value))
    L, S = query.shape[-2], key.shape[-2]
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    k_t = prims.transpose(k, [*range(k.ndim - 2), k.ndim - 1, k.ndim - 2])
    scores = matmul(q, k_t)
    scores = prims.mul(scores, float(scale))
    if is_causal:
        # row i attends to columns j <= i (top-left aligned, as torch's tril)
        rows = prims.broadcast_in_dim(prims.iota(L, start=0, step=1, device=q.device, dtype=torch.int64), (L, S), [0])
        cols = prims.broadcast_in_dim(prims.iota(S, start=0, step=1, device=q.device, dtype=torch.int64), (L, S), [1])
        attn_mask = prims.ge(rows, cols)
    if attn_mask is not None:
        mask = broadcast_to(attn_mask, scores.shape)
        if mask.dtype == torch.bool:
            scores = prims.where(mask, scores, -math.inf)
        else:
            scores = prims.add(scores, to_dtype(mask, compute))
    probs = _safe_softmax(scores)
    if dropout_p > 0:
        u = prims.uniform(probs.shape, 0.0, 1.0, device=probs.device, dtype=compute)
        kept = prims.ge(u, float(dropout_p))
        scaled = prims.mul(probs, 1.0 / (1.0 - dropout_p)) if dropout_p < 1 else probs
        probs = prims.where(kept, scaled, 0.0)
    return to_dtype(matmul(probs, v), dtype)


# --- adaptive pooling --------------------------------------------------------------------
# Output cell i of a dimension of size L pools input [floor(i*L/out), ceil((i+1)*L/out)).


def _adaptive_setup(name: str, n: int, input, output_size):
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(input.ndim in (n + 1, n + 2), lambda: f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got {list(input.shape)}", RuntimeError)
    for d in range(input.ndim - n, input.ndim):
        check(
            input.shape[d] > 0,
            lambda: f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {list(input.shape)} with dimension {d} being empty",
            RuntimeError,
        )
    if isinstance(output_size, int) or output_size is None:
        output_size = (output_size,) * n
    check(isinstance(output_size, (tuple, list)) and len(output_size) == n, lambda: f"{name}: output_size must be {n}", RuntimeError)
    spatial = input.shape[input.ndim - n :]
    sizes = tuple(L if o is None else o for o, L in zip(output_size, spatial))
    check(all(isinstance(o, int) and o >= 0 for o in sizes), lambda: f"{name}: elements of output_size must be greater than or equal to 0 but received {list(output_size)}", RuntimeError)
    return sizes


def _bounds(L: int, out: int, device) -> tuple[TensorProxy, TensorProxy]:
    """(start, end) of every output cell, as int64 tensors of length `out`."""
    i = prims.iota(out, start=0, step=1, device=device, dtype=torch.int64)
    start = prims.div(prims.mul(i, L), out, rounding_mode="floor")
    end = prims.div(prims.add(prims.mul(i, L), L + out - 1), out, rounding_mode="floor")
    return start, end


def _cell_positions(L: int, out: int, device) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """(out, widest) input positions of every cell, padded to the widest cell by repeating its last
    position; with the (out, widest) mask of real positions and the cell sizes."""
    widest = max(-(-((i + 1) * L) // out) - (i * L) // out for i in range(out)) if out else 1
    start, end = _bounds(L, out, device)
    k = prims.broadcast_in_dim(prims.iota(widest, start=0, step=1, device=device, dtype=torch.int64), (out, widest), [1])
    first = prims.add(prims.broadcast_in_dim(start, (out, widest), [0]), k)
    last = prims.broadcast_in_dim(prims.sub(end, 1), (out, widest), [0])
    return prims.minimum(first, last), prims.le(first, last), prims.sub(end, start)


def _cells(x: TensorProxy, dim: int, out: int, positions: TensorProxy | None = None) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """Every cell of `dim` gathered into a new dim after it (see _cell_positions), the mask, the sizes."""
    real = counts = None
    if positions is None:
        positions, real, counts = _cell_positions(x.shape[dim], out, x.device)
    widest = positions.shape[1]
    gathered = prims.take(x, prims.reshape(positions, (out * widest,)), dim)
    shape = list(x.shape)
    shape[dim : dim + 1] = [out, widest]
    return prims.reshape(gathered, shape), real, counts


def _adaptive_avg_dim(x: TensorProxy, dim: int, out: int) -> TensorProxy:
    """Average `dim` of `x` (in its computation dtype) down to `out` cells."""
    L = x.shape[dim]
    if out == L:
        return x
    if out > 0 and L % out == 0:
        # equal cells: a reshape and a sum
        shape = list(x.shape)
        shape[dim : dim + 1] = [out, L // out]
        return prims.div(prims.sum(prims.reshape(x, shape), [dim + 1]), float(L // out))
    cells, real, counts = _cells(x, dim, out)
    # a select, not a multiply by the mask: a NaN must stay inside its own cells
    dims = [dim, dim + 1]
    real = prims.broadcast_in_dim(real, cells.shape, dims)
    total = prims.sum(prims.where(real, cells, 0.0), [dim + 1])
    counts = prims.broadcast_in_dim(prims.convert_element_type(counts, x.dtype), total.shape, [dim])
    return prims.div(total, counts)


def _adaptive_max_dim(x: TensorProxy, dim: int, out: int) -> TensorProxy:
    """The max over each of `out` cells of `dim` (repeated elements do not change a max)."""
    if out == x.shape[dim]:
        return x
    return prims.amax(_cells(x, dim, out)[0], [dim + 1])


def _adaptive_avg_pool(name: str, n: int, input, output_size) -> TensorProxy:
    sizes = _adaptive_setup(name, n, input, output_size)
    check(input.dtype.is_floating_point, lambda: f"{name}(): not implemented for '{input.dtype}'", NotImplementedError)
    x = to_dtype(input, computation_dtype(input.dtype))
    for i, out in enumerate(sizes):
        x = _adaptive_avg_dim(x, input.ndim - n + i, out)
    return to_dtype(x, input.dtype)


@torchsymbol(torch.nn.functional.adaptive_avg_pool1d)
def adaptive_avg_pool1d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool1d."""
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


@torchsymbol(torch.nn.functional.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool2d (None in output_size keeps that input size)."""
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)


@torchsymbol(torch.nn.functional.adaptive_avg_pool3d)
def adaptive_avg_pool3d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool3d (None in output_size keeps that input size)."""
    return _adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_max_with_indices(x: TensorProxy, n: int, sizes) -> tuple[TensorProxy, TensorProxy]:
    """Values and flat spatial positions of each cell's maximum (the first maximum, or a NaN, wins)."""
    lead = x.ndim - n
    spatial = x.shape[lead:]
    positions = [_cell_positions(L, out, x.device)[0] for L, out in zip(spatial, sizes)]
    widths = [p.shape[1] for p in positions]
    cells = x
    for i, p in enumerate(positions):
        cells = _cells(cells, lead + 2 * i, sizes[i], p)[0]
    # (*lead, o0, w0, o1, w1, ...) -> (*lead, o0, o1, ..., w0 * w1 * ...)
    order = [*range(lead), *(lead + 2 * i for i in range(n)), *(lead + 2 * i + 1 for i in range(n))]
    k = math.prod(widths)
    cells = prims.reshape(prims.transpose(cells, order), (*x.shape[:lead], *sizes, k))
    # the flat position of every cell element, laid out the same way: sum of position * stride
    grid = (*sizes, *widths)
    flat, stride = None, 1
    for i in reversed(range(n)):
        term = prims.broadcast_in_dim(prims.mul(positions[i], stride), grid, [i, n + i])
        flat = term if flat is None else prims.add(flat, term)
        stride *= spatial[i]
    flat = prims.broadcast_in_dim(prims.reshape(flat, (*sizes, k)), cells.shape, list(range(lead, cells.ndim)))
    best = prims.reshape(prims.argmax(cells, cells.ndim - 1), (*cells.shape[:-1], 1))
    out_shape = cells.shape[:-1]
    values = prims.reshape(prims.take_along_axis(cells, best, cells.ndim - 1), out_shape)
    return values, prims.reshape(prims.take_along_axis(flat, best, cells.ndim - 1), out_shape)


def _adaptive_max_pool(name: str, n: int, input, output_size, return_indices):
    sizes = _adaptive_setup(name, n, input, output_size)
    check(input.dtype.is_floating_point, lambda: f"{name}(): not implemented for '{input.dtype}'", NotImplementedError)
    if return_indices:
        return _adaptive_max_with_indices(input, n, sizes)
    x = input
    for i, out in enumerate(sizes):
        x = _adaptive_max_dim(x, input.ndim - n + i, out)
    return x


@torchsymbol(torch.nn.functional.adaptive_max_pool1d)
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool1d."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, return_indices)


@torchsymbol(torch.nn.functional.adaptive_max_pool2d)
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool2d."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, return_indices)


@torchsymbol(torch.nn.functional.adaptive_max_pool1d_with_indices)
def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool1d(..., return_indices=True): values and flat positions of the maxima."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, True)


@torchsymbol(torch.nn.functional.adaptive_max_pool2d_with_indices)
def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool2d(..., return_indices=True): values and flat positions of the maxima."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, True)


# --- distances ---------------------------------------------------------------------------

_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@torchsymbol(torch.cdist)
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """torch.cdist: p-norm distances between the rows of x1 and x2, batch dimensions broadcast."""
    for arg, t in (("x1", x1), ("x2", x2)):
        check(is_tensor(t), lambda: f"cdist(): argument '{arg}' must be Tensor, not {type(t).__name__}", TypeError)
    check(compute_mode in _CDIST_MODES, lambda: f"{compute_mode} is not a valid value for compute_mode", ValueError)
    check(x1.ndim >= 2, lambda: f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D", RuntimeError)
    check(x2.ndim >= 2, lambda: f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D", RuntimeError)
    check(x1.shape[-1] == x2.shape[-1], lambda: f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}", RuntimeError)
    check(x1.dtype.is_floating_point, lambda: f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}", RuntimeError)
    check(x1.dtype == x2.dtype, lambda: f"cdist(): expected X1 and X2 of one dtype, got {x1.dtype} and {x2.dtype}", RuntimeError)
    check(p >= 0, lambda: "cdist only supports non-negative p values", RuntimeError)
    batch = broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    (P, M), R = x1.shape[-2:], x2.shape[-2]
    compute = computation_dtype(x1.dtype)
    a = to_dtype(broadcast_to(x1, (*batch, P, M)), compute)
    b = to_dtype(broadcast_to(x2, (*batch, R, M)), compute)
    nb = len(batch)
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (compute_mode == _CDIST_MODES[0] and (P > 25 or R > 25))):
        # |a|^2 + |b|^2 - 2 a.b with one matmul, clamped at 0 against rounding, as torch does
        sq_a = prims.broadcast_in_dim(prims.sum(prims.mul(a, a), [nb + 1]), (*batch, P, R), list(range(nb + 1)))
        sq_b = prims.broadcast_in_dim(prims.sum(prims.mul(b, b), [nb + 1]), (*batch, P, R), [*range(nb), nb + 1])
        cross = prims.matmul(a, prims.transpose(b, [*range(nb), nb + 1, nb]))
        dist2 = prims.add(prims.add(prims.mul(cross, -2.0), sq_a), sq_b)
        return to_dtype(prims.sqrt(prims.maximum(dist2, 0.0)), x1.dtype)
    shape = (*batch, P, R, M)
    diff = prims.sub(prims.broadcast_in_dim(a, shape, [*range(nb), nb, nb + 2]), prims.broadcast_in_dim(b, shape, [*range(nb), nb + 1, nb + 2]))
    last = [nb + 2]
    if p == 0:
        out = prims.sum(prims.convert_element_type(prims.ne(diff, 0.0), compute), last)
    elif p == math.inf:
        out = prims.amax(prims.abs(diff), last) if M else prims.sum(diff, last)
    elif p == 1:
        out = prims.sum(prims.abs(diff), last)
    elif p == 2:
        out = prims.sqrt(prims.sum(prims.mul(diff, diff), last))
    else:
        out = prims.pow(prims.sum(prims.pow(prims.abs(diff), float(p)), last), 1.0 / p)
    return to_dtype(out, x1.dtype)


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

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}


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
        return [int(s) for s in sizes], [None] * n
    scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * n
    check(
        len(scales) == n,
        lambda: f"Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of {spatial} and scale_factor of shape {scales}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.",
        ValueError,
    )
    sizes = [math.floor(float(L) * float(s)) for L, s in zip(spatial, scales)]
    return sizes, ([None] * n if recompute_scale_factor else [float(s) for s in scales])


def _source_positions(L: int, out: int, scale: float | None, align_corners: bool, *, nearest: str | None, device, dtype) -> TensorProxy:
    """For each output position, the (fractional) input position it samples, as torch computes it."""
    i = prims.iota(out, start=0, step=1, device=device, dtype=dtype)
    if nearest is not None:
        ratio = 1.0 / scale if scale is not None and scale > 0 else L / out
        offset = 0.5 if nearest == "nearest-exact" else 0.0
        return prims.mul(prims.add(i, offset), ratio) if offset else prims.mul(i, ratio)
    if align_corners:
        ratio = (L - 1) / (out - 1) if out > 1 else 0.0
        return prims.mul(i, ratio)
    ratio = 1.0 / scale if scale is not None and scale > 0 else L / out
    src = prims.sub(prims.mul(prims.add(i, 0.5), ratio), 0.5)
    return prims.maximum(src, 0.0)  # linear modes clamp negative positions to 0


def _gather(x: TensorProxy, dim: int, index: TensorProxy) -> TensorProxy:
    return prims.take(x, index, dim)


def _resize_dim(x: TensorProxy, dim: int, out: int, scale, mode: str, align_corners: bool) -> TensorProxy:
    L = x.shape[dim]
    # index arithmetic in float32, or float64 for float64 inputs, like torch's kernels
    pos_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if mode in ("nearest", "nearest-exact"):
        src = _source_positions(L, out, scale, False, nearest=mode, device=x.device, dtype=torch.float32)
        idx = prims.minimum(prims.convert_element_type(prims.floor(src), torch.int64), L - 1)
        return _gather(x, dim, idx)
    src = _source_positions(L, out, scale, align_corners, nearest=None, device=x.device, dtype=pos_dtype)
    lo = prims.minimum(prims.convert_element_type(prims.floor(src), torch.int64), L - 1)
    hi = prims.minimum(prims.add(lo, 1), L - 1)
    frac = to_dtype(prims.sub(src, prims.convert_element_type(lo, pos_dtype)), x.dtype)
    w1 = prims.broadcast_in_dim(frac, [out if d == dim else n for d, n in enumerate(x.shape)], [dim])
    a, b = _gather(x, dim, lo), _gather(x, dim, hi)
    return prims.add(prims.mul(a, prims.sub(1.0, w1)), prims.mul(b, w1))


@torchsymbol(torch.nn.functional.interpolate)
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate: nearest, nearest-exact, (bi/tri)linear and area modes."""
    check(is_tensor(input), lambda: f"interpolate(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    n = input.ndim - 2
    if mode in ("nearest", "nearest-exact", "area"):
        check(
            align_corners is None,
            lambda: "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear",
            ValueError,
        )
    check(not antialias, lambda: "interpolate(): antialias=True is not supported by squall", NotImplementedError)
    check(mode != "bicubic", lambda: "interpolate(): mode='bicubic' is not supported by squall", NotImplementedError)
    known = ("nearest", "nearest-exact", "area", "linear", "bilinear", "trilinear")
    check(mode in known, lambda: f"interpolate(): unknown mode {mode!r}; squall supports {', '.join(known)}", NotImplementedError)
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
    check(not linear or input.dtype.is_floating_point, lambda: f"interpolate(): {mode} interpolation is not implemented for {input.dtype}", NotImplementedError)
    if linear:
        x = to_dtype(x, computation_dtype(x.dtype))
    for i, (out, scale) in enumerate(zip(sizes, scales)):
        x = _resize_dim(x, 2 + i, out, scale, mode, bool(align_corners))
    return to_dtype(x, input.dtype)


__all__ += [
    "scaled_dot_product_attention",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "cdist", "pixel_shuffle", "pixel_unshuffle", "interpolate",
]  # fmt: skip
