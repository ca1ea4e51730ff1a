"""Torch-language ops: attention (scaled_dot_product_attention, with causal and boolean or additive masks, dropout and grouped-query heads)."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .helpers import broadcast_to, check, computation_dtype, is_tensor, to_dtype
from .matmul import matmul
from ..proxies import TensorProxy

__all__ = [
    "scaled_dot_product_attention",
]


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


def repeat_heads(t: TensorProxy, repeats: int) -> TensorProxy:
    """repeat_interleave(t, repeats, dim=-3): each key/value head serves `repeats` query heads
    (grouped-query attention)."""
    if repeats == 1:
        return t
    shape = list(t.shape)
    h = t.ndim - 3
    expanded = shape[: h + 1] + [repeats] + shape[h + 1 :]
    t = prims.broadcast_in_dim(t, tuple(expanded), tuple(d for d in range(len(expanded)) if d != h + 1))
    return prims.reshape(t, tuple(shape[:h] + [shape[h] * repeats] + shape[h + 1 :]))


def sum_repeated_heads(g: TensorProxy, repeats: int) -> TensorProxy:
    """The gradient of `repeat_heads`: each group of `repeats` heads of `g` summed into one."""
    if repeats == 1:
        return g
    shape = list(g.shape)
    h = g.ndim - 3
    return prims.sum(prims.reshape(g, tuple(shape[:h] + [shape[h] // repeats, repeats] + shape[h + 1 :])), (h + 1,))


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
        key, value = repeat_heads(key, hq // hk), repeat_heads(value, hq // hv)

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
