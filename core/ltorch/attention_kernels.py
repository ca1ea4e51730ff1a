"""Attention's kernel operations: PyTorch's fused attention kernels, declared as `kernels`
declares the others (an aten op the torch executor runs whole, a decomposition over prims for
the other executors). The CPU flash kernel, and CUDA's flash and memory-efficient kernels,
which take (B, L, H, E) tensors: the attention's (B, H, L, E) inputs transposed."""
from __future__ import annotations

import math

import torch

from .. import ltorch, prims
from . import torchsymbol
from .attention import repeat_heads, sum_repeated_heads
from .kernel_support import _keep, _swap_last, _to, _up

aten = torch.ops.aten


def _attention_scores(query, key, is_causal, attn_mask, scale):
    """query @ key^T * scale with the causal or additive mask applied, in the computation dtype."""
    q, k = _up(query), _up(key)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores = prims.mul(ltorch.matmul(q, _swap_last(k)), scale)  # batch dims may broadcast
    L, S = scores.shape[-2], scores.shape[-1]
    if is_causal:
        rows = prims.broadcast_in_dim(prims.iota(L, start=0, step=1, device=q.device, dtype=torch.int64), scores.shape, (scores.ndim - 2,))
        cols = prims.broadcast_in_dim(prims.iota(S, start=0, step=1, device=q.device, dtype=torch.int64), scores.shape, (scores.ndim - 1,))
        scores = prims.where(prims.ge(rows, cols), scores, -math.inf)
    if attn_mask is not None:
        mask = prims.broadcast_in_dim(attn_mask, scores.shape, tuple(range(scores.ndim - attn_mask.ndim, scores.ndim)))
        # an additive mask may be float32 beside a float64 query (eager accepts that): it joins the scores' dtype
        scores = prims.where(mask, scores, -math.inf) if mask.dtype == torch.bool else prims.add(scores, _to(mask, scores.dtype))
    return scores, scale


@torchsymbol(aten._scaled_dot_product_flash_attention_for_cpu.default, id="aten._scaled_dot_product_flash_attention_for_cpu")
def flash_attention_for_cpu(query, key, value, dropout_p, is_causal, *, attn_mask, scale):
    """(B, H, L, E) attention without dropout; also the rows' logsumexp (B, H, L), which the backward reads.
    Key and value may have fewer heads than the query, each serving a group of its heads."""
    return _attention_with_logsumexp(query, key, value, is_causal, attn_mask, scale)


# the memory-efficient CUDA kernel keeps the logsumexp of a multiple of this many query rows
_EFFICIENT_LSE_ROWS = 32
HEADS_SECOND = (0, 2, 1, 3)  # (B, H, L, E) <-> (B, L, H, E), the layout CUDA's kernels take


@torchsymbol(aten._scaled_dot_product_efficient_attention.default, id="aten._scaled_dot_product_efficient_attention")
def efficient_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, *, scale):
    """(B, H, L, E) attention on CUDA's memory-efficient kernel, with an additive bias (B, H, L, S)
    or none, here without dropout: the output, the rows' logsumexp padded to a multiple of 32 rows
    (B, H, 32 * ceil(L / 32)), and the dropout's seed and offset (CPU scalars, unused without
    dropout), which its backward reads."""
    out, lse = _attention_with_logsumexp(query, key, value, is_causal, attn_bias, scale)
    rows = lse.shape[-1]
    padded = -(-rows // _EFFICIENT_LSE_ROWS) * _EFFICIENT_LSE_ROWS if compute_log_sumexp else 0
    lse = prims.pad(lse, 0.0, ((0, 0, 0), (0, 0, 0), (0, padded - rows, 0))) if padded else prims.full((*lse.shape[:-1], 0), 0.0, device=lse.device, dtype=lse.dtype)
    seed, offset = (prims.full((), 0, device=torch.device("cpu"), dtype=torch.int64) for _ in range(2))
    return out, lse, seed, offset


@torchsymbol(aten._efficient_attention_backward.default, id="aten._efficient_attention_backward")
def efficient_attention_backward(grad_out, query, key, value, bias, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                 logsumexp, dropout_p, philox_seed, philox_offset, custom_mask_type, bias_requires_grad,
                                 *, scale, num_splits_key, window_size, shared_storage_dqdkdv):
    """Gradients of `efficient_attention` for (query, key, value), here without dropout, packed
    sequences or a gradient of the bias. The kernel takes and gives (B, L, H, E) tensors: the
    attention's inputs transposed; the bias is the forward's, (B, H, L, S)."""
    g, q, k, v, o = (prims.transpose(t, HEADS_SECOND) for t in (grad_out, query, key, value, out))
    lse = prims.slice(logsumexp, (0, 0, 0), (*logsumexp.shape[:2], q.shape[2]), (1, 1, 1))
    gq, gk, gv = _attention_grads(g, q, k, v, o, lse, custom_mask_type == 1, bias, scale)
    return *(prims.transpose(t, HEADS_SECOND) for t in (gq, gk, gv)), None


@torchsymbol(aten._flash_attention_forward.default, id="aten._flash_attention_forward")
def flash_attention(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask, *, scale):
    """(B, L, H, E) attention on CUDA's flash kernel, here without dropout or packed sequences:
    the output, the rows' logsumexp (B, H, L), the dropout's generator state and offset (unused
    without dropout) and an empty debug mask."""
    q, k, v = (prims.transpose(t, HEADS_SECOND) for t in (query, key, value))
    out, lse = _attention_with_logsumexp(q, k, v, is_causal, None, scale)
    state = prims.full((2,), 0, device=query.device, dtype=torch.uint64)
    offset = prims.full((), 0, device=query.device, dtype=torch.uint64)
    debug_mask = prims.full((0,), 0, device=query.device, dtype=query.dtype)
    return prims.transpose(out, HEADS_SECOND), lse, state, offset, debug_mask


@torchsymbol(aten._flash_attention_backward.default, id="aten._flash_attention_backward")
def flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                             rng_state, unused, *, scale):
    """Gradients of `flash_attention` for (query, key, value), (B, L, H, E) as its inputs."""
    g, q, k, v, o = (prims.transpose(t, HEADS_SECOND) for t in (grad_out, query, key, value, out))
    return tuple(prims.transpose(t, HEADS_SECOND) for t in _attention_grads(g, q, k, v, o, logsumexp, is_causal, None, scale))


def _attention_with_logsumexp(query, key, value, is_causal, attn_mask, scale):
    heads = query.shape[-3]
    key, value = repeat_heads(key, heads // key.shape[-3]), repeat_heads(value, heads // value.shape[-3])
    scores, _ = _attention_scores(query, key, is_causal, attn_mask, scale)
    last = (scores.ndim - 1,)
    peak = prims.amax(scores, last)
    peak = prims.where(prims.isinf(peak), 0.0, peak)  # a fully masked row: exp(-inf) = 0, not NaN
    total = prims.sum(prims.exp(prims.sub(scores, _keep(peak, scores.shape, last))), last)
    lse = prims.add(prims.log(total), peak)
    probs = prims.exp(prims.sub(scores, _keep(lse, scores.shape, last)))
    probs = prims.where(prims.isnan(probs), 0.0, probs)
    out = prims.matmul(probs, _up(value))
    return _to(out, query.dtype), lse


@torchsymbol(aten._scaled_dot_product_flash_attention_for_cpu_backward.default, id="aten._scaled_dot_product_flash_attention_for_cpu_backward")
def flash_attention_for_cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask, scale):
    """Gradients of flash attention for (query, key, value), from the saved output and logsumexp."""
    return _attention_grads(grad_out, query, key, value, out, logsumexp, is_causal, attn_mask, scale)


def _attention_grads(grad_out, query, key, value, out, logsumexp, is_causal, attn_mask, scale):
    key_repeats, value_repeats = query.shape[-3] // key.shape[-3], query.shape[-3] // value.shape[-3]
    key, value = repeat_heads(key, key_repeats), repeat_heads(value, value_repeats)
    scores, scale = _attention_scores(query, key, is_causal, attn_mask, scale)
    last = (scores.ndim - 1,)
    probs = prims.exp(prims.sub(scores, _keep(logsumexp, scores.shape, last)))
    probs = prims.where(prims.isnan(probs), 0.0, probs)
    g, o, q, k, v = _up(grad_out), _up(out), _up(query), _up(key), _up(value)
    gv = prims.matmul(_swap_last(probs), g)
    gp = prims.matmul(g, _swap_last(v))
    delta = _keep(prims.sum(prims.mul(g, o), last), scores.shape, last)
    gs = prims.mul(prims.mul(probs, prims.sub(gp, delta)), scale)
    gq = prims.matmul(gs, k)
    gk = prims.matmul(_swap_last(gs), q)
    return _to(gq, query.dtype), _to(sum_repeated_heads(gk, key_repeats), key.dtype), _to(sum_repeated_heads(gv, value_repeats), value.dtype)
