"""Grad rule for scaled dot product attention: the forward records the aten kernel that returns
the logsumexp its backward needs, and the backward kernel eager runs computes the gradients.

Part of the ltorch grad rules (`squall.compiler.grad_rules.ltorch`, whose table files them).
"""
from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ... import ltorch, prims
from ...ltorch import attention_kernels
from ...ltorch.attention_kernels import HEADS_SECOND
from ...ltorch import kernels as k
from ...ltorch.attention import repeat_heads, sum_repeated_heads
from ...ltorch.base import SquallWarning
from ...proxies import TensorProxy
from ..gradients import GradCall
from .support import last_two_swapped, per_argument, scaled, sum_to, to_dtype

__all__ = ["attention_rules"]


# --- scaled dot product attention -----------------------------------------------------------


def _flash_for_cpu(query, key, value, attn_mask, dropout_p, enable_gqa) -> bool:
    """Whether eager runs this call on the CPU flash kernel (else: the math path, saved probabilities)."""
    q, kk, v = query, key, value
    return (
        q.device.type == "cpu"
        and q.ndim == kk.ndim == v.ndim == 4
        and dropout_p == 0
        and q.shape[0] == kk.shape[0] == v.shape[0]
        and (q.shape[1] == kk.shape[1] == v.shape[1] or _flash_groups_heads(q, kk, v, enable_gqa))
        and q.shape[-1] == kk.shape[-1] == v.shape[-1]
        and (attn_mask is None or (not attn_mask.requires_grad and attn_mask.dtype in (torch.bool, q.dtype)))
    )


@functools.cache
def _cpu_flash_takes_grouped_heads() -> bool:
    """Whether this PyTorch runs grouped-query attention (`enable_gqa=True`, fewer key and value
    heads) on its CPU flash kernel; older versions took the math path. Asked of PyTorch itself."""
    q, kv = torch.zeros(1, 2, 1, 8), torch.zeros(1, 1, 1, 8)
    return torch._fused_sdp_choice(q, kv, kv, None, 0.0, False, scale=None, enable_gqa=True) == int(SDPBackend.FLASH_ATTENTION)


def _flash_groups_heads(query, key, value, enable_gqa, asked: bool = True) -> bool:
    # key and value share a head count that divides the query's, as eager's flash kernels group
    # them (`asked`: and this PyTorch's CPU kernel does)
    hq, hk = query.shape[1], key.shape[1]
    return bool(enable_gqa) and hk == value.shape[1] and 0 < hk < hq and hq % hk == 0 and (not asked or _cpu_flash_takes_grouped_heads())


def _cuda_kernel(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> SDPBackend | None:
    """The fused CUDA kernel eager runs this call on, where squall records it too: flash (which
    eager picks for bfloat16 and float16 without a mask) or memory-efficient (float32, and any
    call with a mask: an additive bias), here without dropout; None for the math path. Asked of
    PyTorch itself, on tensors of the same sizes (on an H100 the math path took 2.5x the
    memory-efficient kernels' time in a LLaMA training step)."""
    q, kk, v = query, key, value
    if not (q.device.type == "cuda" and torch.cuda.is_available() and dropout_p == 0
            and q.ndim == kk.ndim == v.ndim == 4):
        return None
    mask = None
    if attn_mask is not None:
        # a mask given as data (no gradient wanted of it), boolean or of the query's dtype, as
        # eager's kernels take it
        if not (isinstance(attn_mask, TensorProxy) and not attn_mask.requires_grad and attn_mask.dtype in (torch.bool, q.dtype)
                and attn_mask.ndim <= 4 and attn_mask.device == q.device):
            return None
        mask = (tuple(attn_mask.shape), attn_mask.dtype)
    if not all(type(n) is int for t in (q, kk, v) for n in t.shape) or (mask and not all(type(n) is int for n in mask[0])):
        return None  # symbolic sizes: the choice depends on them
    same_heads = q.shape[1] == kk.shape[1] == v.shape[1]
    if not (same_heads or _flash_groups_heads(q, kk, v, enable_gqa, asked=False)):
        return None
    shapes = tuple(tuple(t.shape) for t in (q, kk, v))
    backend = _fused_choice(shapes, q.dtype, q.device, bool(is_causal), scale, bool(enable_gqa), mask)
    if backend == SDPBackend.FLASH_ATTENTION and (q.shape[-1] % 8 != 0 or mask is not None):
        return None  # eager pads other head sizes to a multiple of 8 for the kernel
    if backend == SDPBackend.EFFICIENT_ATTENTION and not same_heads:
        return None  # (grouped heads go to the flash kernel or the math path)
    if backend not in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        return None
    return backend if _kernels_agree_with_math(backend, q.dtype, q.device, masked=mask is not None) else None


@functools.lru_cache(maxsize=256)
def _fused_choice(shapes, dtype, device, is_causal, scale, enable_gqa, mask=None) -> SDPBackend:
    q, kk, v = (torch.empty(shape, dtype=dtype, device=device, requires_grad=True) for shape in shapes)
    m = torch.zeros(mask[0], dtype=mask[1], device=device) if mask is not None else None
    choice = SDPBackend(torch._fused_sdp_choice(q, kk, v, m, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa))
    if choice == SDPBackend.CUDNN_ATTENTION:
        # recent PyTorch prefers cuDNN's attention on an H100, whose kernels squall does not
        # record: the one eager runs with cuDNN's turned off (its flags are back on after)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            choice = SDPBackend(torch._fused_sdp_choice(q, kk, v, m, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa))
    return choice


# how far a kernel's output and gradients may be from float32 math's on the check's small problem
_CHECK_TOLERANCE = {torch.float32: 5e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}  # (float32 math may run in TF32)


@functools.lru_cache(maxsize=None)
def _kernels_agree_with_math(backend: SDPBackend, dtype: torch.dtype, device: torch.device, masked: bool = False) -> bool:
    """Whether the torch executor's calls of `backend`'s CUDA kernels, made as the rule records
    them, give float32 math's output and gradients on a small causal problem (`masked`: with a
    padding mask instead, whose 13 keys are not a multiple of the kernel's alignment). Checked
    once per process, dtype and kind before a trace records the kernels, so that a PyTorch whose
    kernels take their arguments otherwise keeps the math path, with a warning, instead of failing
    a call."""
    from ...market.torch_executor import make_executor  # (the market's executor runs what grad rules record)

    executor = make_executor()
    run = lambda kernel, *args, **kwargs: executor.implementation_for(kernel).impl(*args, **kwargs)
    generator = torch.Generator(device=device).manual_seed(0)
    keys = 13 if masked else 16
    q, g = (torch.randn(1, 2, 16, 64, device=device, dtype=dtype, generator=generator) for _ in range(2))
    kk, v = (torch.randn(1, 2, keys, 64, device=device, dtype=dtype, generator=generator) for _ in range(2))
    mask = (torch.arange(keys, device=device) < keys - 3).expand(1, 1, 1, keys) if masked else None
    causal = not masked
    try:
        with torch._C._DisableAutocast():  # (a trace under torch.autocast asks too: the check is as traced, without it)
            bias = None if mask is None else torch.zeros((), dtype=dtype, device=device).masked_fill(~mask, -math.inf).expand(1, 2, 16, keys)
            out, saved = _cuda_attention(backend, run, torch.permute, q, kk, v, causal, None, bias)
            grads = _cuda_attention_grads(backend, run, torch.permute, g, q, kk, v, out, saved, causal, None)
    except Exception as e:  # noqa: BLE001 - any failure: the math path, which computes the same
        why = f"{type(e).__name__}: {e}"
    else:
        with torch._C._DisableAutocast(), torch.enable_grad(), sdpa_kernel([SDPBackend.MATH]):
            inputs = [x.float().requires_grad_() for x in (q, kk, v)]
            expected = F.scaled_dot_product_attention(*inputs, attn_mask=mask, is_causal=causal)
            expected_grads = torch.autograd.grad(expected, inputs, g.float())
        tolerance = _CHECK_TOLERANCE.get(dtype, 5e-3)
        far = [name for name, a, b in zip(("output", "query's gradient", "key's gradient", "value's gradient"), (out, *grads), (expected, *expected_grads))
               if not torch.allclose(a.float(), b, rtol=tolerance, atol=tolerance)]
        if not far:
            return True
        why = f"its {', '.join(far)} differed from float32 math's by more than {tolerance}"
    name = "flash" if backend == SDPBackend.FLASH_ATTENTION else "memory-efficient"
    what = "masked attention" if masked else "attention"
    warnings.warn(f"squall: CUDA's {name} attention kernels, called as squall records them, failed a check "
                  f"({why[:300]}); {what} in {dtype} trains on the math path instead", SquallWarning, stacklevel=2)
    return False


def _cuda_attention(backend: SDPBackend, call: Callable, permute: Callable, query, key, value, is_causal, scale, bias=None) -> tuple:
    """(output, what the backward reads) of `backend`'s CUDA kernel: the rule records it with
    `call(kernel, *args, **kwargs)` on proxies, the check runs it on tensors. The flash kernel takes
    (B, L, H, E): eager's CUDA path hands it the transposed views (`permute`). `bias`: the
    memory-efficient kernel's additive mask, (B, H, L, S) (`_cuda_bias`)."""
    if backend == SDPBackend.EFFICIENT_ATTENTION:
        out, lse, seed, offset = call(k.efficient_attention, query, key, value, bias, True, 0.0, bool(is_causal), scale=scale)
        return out, (lse, seed, offset, bias)
    q, kk, v = (permute(t, HEADS_SECOND) for t in (query, key, value))
    out, lse, state, offset, _ = call(k.flash_attention, q, kk, v, None, None, q.shape[1], kk.shape[1], 0.0, bool(is_causal), False, scale=scale)
    return permute(out, HEADS_SECOND), (lse, state, offset)


def _cuda_attention_grads(backend: SDPBackend, call: Callable, permute: Callable, g, query, key, value, out, saved, is_causal, scale) -> tuple:
    """The (query, key, value) gradients of `_cuda_attention`'s kernel from what it saved; both
    backward kernels take (B, L, H, E), as eager's CUDA backward hands them the transposed views."""
    g_t, q_t, k_t, v_t, o_t = (permute(t, HEADS_SECOND) for t in (g, query, key, value, out))
    L, S = query.shape[2], key.shape[2]
    if backend == SDPBackend.EFFICIENT_ATTENTION:
        lse, seed, offset, bias = saved  # (the bias as the forward took it: (B, H, L, S), not transposed)
        gq, gk, gv, _ = call(
            k.efficient_attention_backward, g_t, q_t, k_t, v_t, bias, o_t, None, None, L, S, lse, 0.0, seed, offset,
            1 if is_causal else 0, False, scale=scale, num_splits_key=None, window_size=None, shared_storage_dqdkdv=False,
        )
    else:
        lse, state, offset = saved
        gq, gk, gv = call(k.flash_attention_backward, g_t, q_t, k_t, v_t, o_t, lse, None, None, L, S, 0.0, bool(is_causal), state, offset, scale=scale)
    return tuple(permute(t, HEADS_SECOND) for t in (gq, gk, gv))


def _record(kernel, *args, **kwargs):
    return kernel(*args, **kwargs)


def _cuda_bias(attn_mask, query, key):
    """The memory-efficient kernel's bias for `attn_mask`, as eager hands it over: additive, of the
    query's dtype, expanded to (B, H, L, S) (the torch executor aligns its rows for the kernel)."""
    if attn_mask is None:
        return None
    return ltorch.expand(_float_mask(attn_mask, query), (*query.shape[:3], key.shape[2]))


def _float_mask(attn_mask, like: TensorProxy):
    # the flash kernel takes an additive mask of the query's dtype; eager converts a boolean one so
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return prims.where(attn_mask, prims.full(tuple(attn_mask.shape), 0.0, device=like.device, dtype=like.dtype), -math.inf)


def _gqa_repeats(query, key, value, enable_gqa) -> tuple[int, int]:
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        return query.shape[-3] // key.shape[-3], query.shape[-3] // value.shape[-3]
    return 1, 1


def _sdpa_forward(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    cuda_kernel = _cuda_kernel(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if cuda_kernel is not None:
        return _cuda_attention(cuda_kernel, _record, ltorch.permute, query, key, value, is_causal, scale, _cuda_bias(attn_mask, query, key))
    if _flash_for_cpu(query, key, value, attn_mask, dropout_p, enable_gqa):
        out, lse = k.flash_attention_for_cpu(query, key, value, 0.0, is_causal, attn_mask=_float_mask(attn_mask, query), scale=scale)
        return out, (lse,)
    # the math path, as eager's: the (dropped-out) probabilities are what the backward reads
    rk, rv = _gqa_repeats(query, key, value, enable_gqa)
    key, value = repeat_heads(key, rk), repeat_heads(value, rv)
    scores, _ = attention_kernels._attention_scores(query, key, is_causal, attn_mask, scale)
    probs = k.softmax_forward(scores, -1, False)
    if attn_mask is not None:  # a fully masked row attends to nothing (eager's safe softmax)
        probs = prims.where(prims.isnan(probs), 0.0, probs)
    keep = None
    dropped = probs
    if 0 < dropout_p < 1:
        # eager's math path calls dropout: its kernel's draw, so a seeded step keeps eager's mask
        # (a uniform draw compared with p kept other elements: GPT-2's training loss differed)
        dropped, keep = k.native_dropout(probs, float(dropout_p), True)
    elif dropout_p >= 1:
        keep = prims.full(tuple(probs.shape), False, device=probs.device, dtype=torch.bool)
        dropped = prims.where(keep, probs, 0.0)
    out = to_dtype(ltorch.matmul(dropped, k._up(value)), query.dtype)
    return out, (probs, dropped, keep)


@per_argument
def _sdpa(call: GradCall) -> tuple:
    query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa = call.args
    g = call.g
    cuda_kernel = _cuda_kernel(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if cuda_kernel is not None:
        gq, gk, gv = _cuda_attention_grads(cuda_kernel, _record, ltorch.permute, g, query, key, value, call.output, call.residuals, is_causal, scale)
        return gq, gk, gv, None, None, None, None, None
    if _flash_for_cpu(query, key, value, attn_mask, dropout_p, enable_gqa):
        (lse,) = call.residuals
        gq, gk, gv = k.flash_attention_for_cpu_backward(
            g, query, key, value, call.output, lse, 0.0, is_causal, attn_mask=_float_mask(attn_mask, query), scale=scale
        )
        return gq, gk, gv, None, None, None, None, None
    probs, dropped, keep = call.residuals
    rk, rv = _gqa_repeats(query, key, value, enable_gqa)
    q, kk, v = (k._up(t) for t in (query, repeat_heads(key, rk), repeat_heads(value, rv)))
    gu = k._up(g)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    gv = sum_repeated_heads(sum_to(ltorch.matmul(last_two_swapped(dropped), gu), v.shape), rv)
    gp = ltorch.matmul(gu, last_two_swapped(v))
    if keep is not None:
        gp = prims.where(keep, prims.mul(gp, 1.0 / (1.0 - dropout_p)) if dropout_p < 1 else gp, 0.0)
    gs = k.softmax_backward_data(gp, probs, -1, probs.dtype)
    gq = sum_to(ltorch.matmul(scaled(gs, scale), kk), query.shape)
    gk = sum_repeated_heads(sum_to(ltorch.matmul(last_two_swapped(scaled(gs, scale)), q), kk.shape), rk)
    gm = None
    if call.wants(attn_mask) and attn_mask.dtype != torch.bool:
        gm = to_dtype(sum_to(gs, attn_mask.shape), attn_mask.dtype)
    return to_dtype(gq, query.dtype), to_dtype(gk, key.dtype), to_dtype(gv, value.dtype), gm, None, None, None, None


def attention_rules() -> dict[str, tuple[Callable, Callable | None]]:
    """The rules of this module by ltorch op id: (backward, forward or None)."""
    return {
        "torch.nn.functional.scaled_dot_product_attention": (_sdpa, _sdpa_forward),
    }
