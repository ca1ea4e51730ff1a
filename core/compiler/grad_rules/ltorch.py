"""Grad rules for ltorch ops whose PyTorch backward beats differentiating their decomposition.

A rule here calls the backward-kernel operations of `kernels.py` (the aten kernels eager
runs in training; decompositions elsewhere) or, for the matmul family, matmuls on the
saved inputs. Where a backward needs statistics the op does not return (layer norm's
mean and rstd, attention's logsumexp), the rule's `forward` records the aten forward
kernel that returns them, so nothing is recomputed.

A rule that cannot reproduce eager's gradient for some call form (embedding with
sparse=True) raises `NoGradRule`: the program then falls back to PyTorch's autograd with
a warning naming the op, rather than return a different gradient.

Which gradients a kernel computes (`output_mask`) follows `call.wants(input)`.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch.nn import _reduction as reduction_enum

from ... import ltorch, prims
from ...ltorch import kernels as k
from ...prims.base import canonical_dim
from ...proxies import TensorProxy
from ..gradients import GradCall, GradRules, NeedsAutograd, NoGradRule
from .prims import per_argument

__all__ = ["register_ltorch_rules"]


@functools.cache
def _ltorch_op(op_id: str):
    return ltorch.all_symbols()[op_id]


def _to(x, dtype: torch.dtype):
    return x if x is None or x.dtype == dtype else prims.convert_element_type(x, dtype)


def _sum_to(g: TensorProxy, shape) -> TensorProxy:
    """`g` summed over the dimensions broadcasting added or expanded, to `shape`."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if dims:
        g = prims.sum(g, dims)
    return g if tuple(g.shape) == shape else prims.reshape(g, shape)


def _t(x: TensorProxy) -> TensorProxy:
    """The last two dimensions swapped (a view in torch)."""
    return prims.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _scaled(g: TensorProxy, factor) -> TensorProxy:
    return g if factor == 1 else prims.mul(g, factor)


# --- softmax --------------------------------------------------------------------------------


def _softmax_rule(kernel: Callable) -> Callable[[GradCall], tuple]:
    def backward(call: GradCall) -> tuple:
        a, dim = call.args[0], call.args[1]
        if dim is None:  # F.softmax's legacy rule for an unspecified dim
            dim = 0 if a.ndim in (0, 1, 3) else 1
        out = call.output
        return (_to(kernel(call.g, out, dim, out.dtype), a.dtype),)

    return backward


# --- layer and RMS norm ---------------------------------------------------------------------


def _layer_norm_forward(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    out, mean, rstd = k.native_layer_norm(input, list(normalized_shape), weight, bias, float(eps))
    return out, (mean, rstd)


@per_argument
def _layer_norm(call: GradCall) -> tuple:
    input, normalized_shape, weight, bias, _ = call.args
    mean, rstd = call.residuals
    mask = [call.wants(input), call.wants(weight), call.wants(bias)]
    gx, gw, gb = k.native_layer_norm_backward(call.g, input, list(normalized_shape), mean, rstd, weight, bias, mask)
    return gx, None, gw, gb, None


def _rms_eps(input: TensorProxy, eps) -> float:
    # eps=None is the machine epsilon of the computation dtype, as the op defines it
    return torch.finfo(k._compute_dtype(input.dtype)).eps if eps is None else float(eps)


def _rms_norm_forward(input, normalized_shape, weight=None, eps=None):
    out, rstd = k.fused_rms_norm(input, list(normalized_shape), weight, _rms_eps(input, eps))
    return out, (rstd,)


@per_argument
def _rms_norm(call: GradCall) -> tuple:
    input, normalized_shape, weight, _ = call.args
    (rstd,) = call.residuals
    # PyTorch has the fused backward only on some devices (not on CPU); elsewhere its decomposition
    backward = k.fused_rms_norm_backward if k.has_kernel(k.fused_rms_norm_backward, input.device) else k.rms_norm_backward_decomposition
    gx, gw = backward(call.g, input, list(normalized_shape), rstd, weight, [call.wants(input), call.wants(weight)])
    return gx, None, gw, None


# --- activations ----------------------------------------------------------------------------


@per_argument
def _gelu(call: GradCall) -> tuple:
    input, approximate = call.args
    return k.gelu_backward(call.g, input, approximate=approximate), None


def _relu(call: GradCall) -> tuple:
    # eager's backward: one threshold_backward on the saved output (no comparison tensor kept)
    return (k.threshold_backward(call.g, call.output, 0),)


@per_argument
def _silu(call: GradCall) -> tuple:
    (input,) = call.args
    return (k.silu_backward(call.g, input),)


# --- embedding ------------------------------------------------------------------------------


@per_argument
def _embedding(call: GradCall) -> tuple:
    input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse = call.args
    if sparse:
        # eager's gradient is a sparse tensor (for SparseAdam and friends); a dense one is not the same
        raise NeedsAutograd("torch.nn.functional.embedding(sparse=True)")
    n = weight.shape[0]
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += n
    gw = k.embedding_dense_backward(call.g, input, n, padding_idx, bool(scale_grad_by_freq))
    return None, _to(gw, weight.dtype)


# --- matrix products: matmuls on the saved operands -----------------------------------------


@per_argument
def _matmul(call: GradCall) -> tuple:
    a, b = call.args[0], call.args[1]
    g = call.g
    if a.ndim == 1 and b.ndim == 1:  # a dot product: g is a scalar
        return (ltorch.mul(b, g) if call.wants(a) else None), (ltorch.mul(a, g) if call.wants(b) else None)
    # vectors as matrices, so every case is a (batched) matrix product
    a2 = prims.reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = prims.reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = ltorch.unsqueeze(g2, -2 if b.ndim > 1 else 0)
    if b.ndim == 1:
        g2 = ltorch.unsqueeze(g2, -1)
    ga = gb = None
    if call.wants(a):
        ga = prims.reshape(_sum_to(ltorch.matmul(g2, _t(b2)), a2.shape), tuple(a.shape))
    if call.wants(b):
        if b2.ndim == 2 and a2.ndim > 2:
            # (..., n, k) @ (k, p): one (k, M) @ (M, p) product over the folded batch
            m = math.prod(a2.shape[:-1])
            flat_a = ltorch.reshape(a2, (m, a2.shape[-1]))
            gb = ltorch.mm(_t(flat_a), ltorch.reshape(g2, (m, g2.shape[-1])))
        else:
            gb = _sum_to(ltorch.matmul(_t(a2), g2), b2.shape)
        gb = prims.reshape(gb, tuple(b.shape))
    return ga, gb


@per_argument
def _mm(call: GradCall) -> tuple:
    a, b = call.args[0], call.args[1]
    return (ltorch.mm(call.g, _t(b)) if call.wants(a) else None), (ltorch.mm(_t(a), call.g) if call.wants(b) else None)


@per_argument
def _bmm(call: GradCall) -> tuple:
    a, b = call.args[0], call.args[1]
    return (ltorch.bmm(call.g, _t(b)) if call.wants(a) else None), (ltorch.bmm(_t(a), call.g) if call.wants(b) else None)


def _add_product(product: Callable) -> Callable[[GradCall], tuple]:
    """addmm / baddbmm: beta * input + alpha * product(m1, m2)."""

    @per_argument
    def backward(call: GradCall) -> tuple:
        input, m1, m2 = call.args
        beta, alpha = call.kwargs["beta"], call.kwargs["alpha"]
        g = call.g
        gi = _sum_to(_scaled(g, beta), input.shape) if call.wants(input) else None
        gm = _scaled(g, alpha)
        g1 = product(gm, _t(m2)) if call.wants(m1) else None
        g2 = product(_t(m1), gm) if call.wants(m2) else None
        return gi, g1, g2

    return backward


@per_argument
def _linear(call: GradCall) -> tuple:
    x, w, b = call.args
    g = call.g
    gx = gw = gb = None
    if w.ndim == 1:  # x @ w: the output drops x's last dimension
        ge = ltorch.unsqueeze(g, -1)
        if call.wants(x):
            gx = _sum_to(ltorch.mul(ge, w), x.shape)
        if call.wants(w):
            gw = _sum_to(ltorch.mul(ge, x), w.shape)
    else:
        if call.wants(x):
            gx = ltorch.matmul(g, w)
        if call.wants(w):
            m = math.prod(x.shape[:-1])
            g2 = ltorch.reshape(g, (m, w.shape[0]))
            gw = ltorch.mm(_t(g2), ltorch.reshape(x, (m, w.shape[1])))
    if call.wants(b):
        gb = _sum_to(g, b.shape)
    return gx, gw, gb


# --- splits ---------------------------------------------------------------------------------


def _pieces_rule(squeezed: bool) -> Callable[[GradCall], tuple]:
    """split, chunk and unbind: the outputs are consecutive pieces of the input along `dim` (of size
    one and squeezed away, for unbind), so the input's gradient is their cotangents joined there:
    one cat, as eager's split backward, where differentiating the slices would pad each piece to
    the input's size and add them up."""

    def backward(call: GradCall) -> tuple:
        input, dim = call.args[0], call.args[-1]
        d = canonical_dim(input.ndim, dim)
        pieces = [prims.reshape(g, (*g.shape[:d], 1, *g.shape[d:])) if squeezed else g for g in call.cotangents]
        return (pieces[0] if len(pieces) == 1 else prims.cat(pieces, d),)

    return backward


# --- classification losses ------------------------------------------------------------------


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        return reduction_enum.legacy_get_string(size_average, reduce, emit_warning=False)
    return reduction


def _nll_nd_forward(logp, target, weight, reduction: str, ignore_index: int):
    """nll_loss over (C,), (N, C) or (N, C, d1, ...) log-probabilities, as eager's nll_loss_nd calls the kernels."""
    r = k._REDUCTIONS[reduction]
    if logp.ndim <= 2:
        return k.nll_loss_forward(logp, target, weight, r, ignore_index)
    if logp.ndim == 4:
        return k.nll_loss2d_forward(logp, target, weight, r, ignore_index)
    n, c = logp.shape[0], logp.shape[1]
    rest = math.prod(logp.shape[2:])
    out, total = k.nll_loss2d_forward(prims.reshape(logp, (n, c, 1, rest)), prims.reshape(target, (n, 1, rest)), weight, r, ignore_index)
    return (prims.reshape(out, tuple(target.shape)) if reduction == "none" else out), total


def _nll_nd_backward(g, logp, target, weight, reduction: str, ignore_index: int, total_weight):
    r = k._REDUCTIONS[reduction]
    if logp.ndim <= 2:
        return k.nll_loss_backward(g, logp, target, weight, r, ignore_index, total_weight)
    if logp.ndim == 4:
        return k.nll_loss2d_backward(g, logp, target, weight, r, ignore_index, total_weight)
    n, c = logp.shape[0], logp.shape[1]
    rest = math.prod(logp.shape[2:])
    if reduction == "none":
        g = prims.reshape(g, (n, 1, rest))
    gx = k.nll_loss2d_backward(g, prims.reshape(logp, (n, c, 1, rest)), prims.reshape(target, (n, 1, rest)), weight, r, ignore_index, total_weight)
    return prims.reshape(gx, tuple(logp.shape))


def _nll_loss_forward(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    out, total_weight = _nll_nd_forward(input, target, weight, _reduction(size_average, reduce, reduction), ignore_index)
    return out, (total_weight,)


@per_argument
def _nll_loss(call: GradCall) -> tuple:
    input, target, weight, size_average, ignore_index, reduce, reduction = call.args
    if call.wants(weight):  # aten's kernel gives no gradient for class weights: the decomposition does
        raise NoGradRule("torch.nn.functional.nll_loss with a weight that requires grad")
    (total_weight,) = call.residuals
    reduction = _reduction(size_average, reduce, reduction)
    gx = _nll_nd_backward(call.g, input, target, weight, reduction, ignore_index, total_weight)
    return gx, None, None, None, None, None, None


def _class_dim(input: TensorProxy) -> int:
    return 0 if input.ndim == 1 else 1


def _class_vector(weight, like: TensorProxy, dtype: torch.dtype):
    """A (C,) class weight broadcast along the class dimension of `like`, or None."""
    if weight is None:
        return None
    return prims.broadcast_in_dim(_to(weight, dtype), tuple(like.shape), (_class_dim(like),))


def _cross_entropy_forward(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0):
    # the same kernels eager runs: log_softmax over the classes, then nll_loss (or, for
    # probability targets and label smoothing, the few elementwise terms torch adds)
    reduction = _reduction(size_average, reduce, reduction)
    cdim = _class_dim(input)
    n_classes = input.shape[cdim]
    eps = float(label_smoothing)
    logp = k.log_softmax_forward(input, cdim, False)
    compute = k._compute_dtype(input.dtype)
    if tuple(target.shape) == tuple(input.shape):  # class probabilities
        t = _to(target, compute)
        if eps > 0:
            t = prims.add(prims.mul(t, 1.0 - eps), eps / n_classes)
        terms = prims.mul(_to(logp, compute), t)
        w = _class_vector(weight, logp, compute)
        if w is not None:
            terms = prims.mul(terms, w)
        if reduction == "none":
            out = prims.neg(prims.sum(terms, (cdim,)))
        else:
            out = prims.neg(prims.sum(terms, tuple(range(terms.ndim))))
            if reduction == "mean":
                out = prims.div(out, float(logp.numel() // n_classes) if n_classes else 0.0)
        return _to(out, input.dtype), (logp,)
    nll, total_weight = _nll_nd_forward(logp, target, weight, reduction, ignore_index)
    if eps == 0:
        return nll, (logp, total_weight)
    # label smoothing mixes in the uniform distribution's loss, zero for ignored targets
    lp = _to(logp, compute)
    w = _class_vector(weight, lp, compute)
    smooth = prims.neg(prims.sum(lp if w is None else prims.mul(lp, w), (cdim,)))
    smooth = prims.where(prims.eq(target, ignore_index), 0.0, smooth)
    if reduction != "none":
        smooth = prims.sum(smooth, tuple(range(smooth.ndim)))
        if reduction == "mean":
            smooth = prims.div(smooth, _to(total_weight, compute))
    out = prims.add(prims.mul(_to(nll, compute), 1.0 - eps), prims.mul(smooth, eps / n_classes))
    return _to(out, input.dtype), (logp, total_weight)


def _broadcast_cotangent(g: TensorProxy, like: TensorProxy, cdim: int) -> TensorProxy:
    """A loss's cotangent (a scalar, or one per target) broadcast along the class dimension of `like`."""
    if g.ndim == 0:
        return prims.broadcast_in_dim(g, tuple(like.shape), ())
    return prims.broadcast_in_dim(g, tuple(like.shape), tuple(d for d in range(like.ndim) if d != cdim))


@per_argument
def _cross_entropy(call: GradCall) -> tuple:
    input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing = call.args
    if call.wants(weight):  # the kernels give no gradient for class weights: the decomposition does
        raise NoGradRule("torch.nn.functional.cross_entropy with a weight that requires grad")
    reduction = _reduction(size_average, reduce, reduction)
    logp = call.residuals[0]
    cdim = _class_dim(input)
    n_classes = input.shape[cdim]
    eps = float(label_smoothing)
    compute = k._compute_dtype(input.dtype)
    g = _to(call.g, compute)
    gt = None
    if tuple(target.shape) == tuple(input.shape):
        if reduction == "mean":
            g = prims.div(g, float(logp.numel() // n_classes) if n_classes else 0.0)
        gb = _broadcast_cotangent(g, logp, cdim)
        w = _class_vector(weight, logp, compute)
        if w is not None:
            gb = prims.mul(gb, w)
        t = _to(target, compute)
        if eps > 0:
            t = prims.add(prims.mul(t, 1.0 - eps), eps / n_classes)
        g_logp = prims.neg(prims.mul(gb, t))
        if call.wants(target):
            gt = _to(prims.neg(prims.mul(prims.mul(gb, _to(logp, compute)), 1.0 - eps)), target.dtype)
    else:
        total_weight = call.residuals[1]
        g_logp = _to(_nll_nd_backward(_to(_scaled(g, 1.0 - eps), logp.dtype), logp, target, weight, reduction, ignore_index, total_weight), compute)
        if eps > 0:
            gs = prims.mul(g, eps / n_classes)
            if reduction == "mean":
                gs = prims.div(gs, _to(total_weight, compute))
            kept = _to(prims.ne(target, ignore_index), compute)
            per_target = prims.mul(prims.broadcast_in_dim(gs, tuple(kept.shape), ()) if gs.ndim == 0 else gs, kept)
            gb = _broadcast_cotangent(per_target, logp, cdim)
            w = _class_vector(weight, logp, compute)
            g_logp = prims.sub(g_logp, gb if w is None else prims.mul(gb, w))
    gx = k.log_softmax_backward_data(_to(g_logp, logp.dtype), logp, cdim, input.dtype)
    return gx, gt, None, None, None, None, None, None


# --- scaled dot product attention -----------------------------------------------------------


def _flash_for_cpu(query, key, value, attn_mask, dropout_p, enable_gqa) -> bool:
    """Whether eager runs this call on the CPU flash kernel (else: the math path, saved probabilities)."""
    q, kk, v = query, key, value
    return (
        q.device.type == "cpu"
        and q.ndim == kk.ndim == v.ndim == 4
        and dropout_p == 0
        and q.shape[0] == kk.shape[0] == v.shape[0]
        and q.shape[1] == kk.shape[1] == v.shape[1]  # grouped heads take the math path here
        and q.shape[-1] == kk.shape[-1] == v.shape[-1]
        and (attn_mask is None or (not attn_mask.requires_grad and attn_mask.dtype in (torch.bool, q.dtype)))
    )


def _float_mask(attn_mask, like: TensorProxy):
    # the flash kernel takes an additive mask of the query's dtype; eager converts a boolean one so
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return prims.where(attn_mask, prims.full(tuple(attn_mask.shape), 0.0, device=like.device, dtype=like.dtype), -math.inf)


def _repeat_heads(t: TensorProxy, repeats: int) -> TensorProxy:
    """Head h of `t` becomes heads h*repeats ... h*repeats + repeats - 1 (grouped-query attention)."""
    if repeats == 1:
        return t
    shape = list(t.shape)
    h = t.ndim - 3
    expanded = shape[: h + 1] + [repeats] + shape[h + 1 :]
    t = prims.broadcast_in_dim(t, tuple(expanded), tuple(d for d in range(len(expanded)) if d != h + 1))
    return prims.reshape(t, tuple(shape[:h] + [shape[h] * repeats] + shape[h + 1 :]))


def _unrepeat_heads(g: TensorProxy, repeats: int) -> TensorProxy:
    if repeats == 1:
        return g
    shape = list(g.shape)
    h = g.ndim - 3
    g = prims.reshape(g, tuple(shape[:h] + [shape[h] // repeats, repeats] + shape[h + 1 :]))
    return prims.sum(g, (h + 1,))


def _gqa_repeats(query, key, value, enable_gqa) -> tuple[int, int]:
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        return query.shape[-3] // key.shape[-3], query.shape[-3] // value.shape[-3]
    return 1, 1


def _sdpa_forward(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if _flash_for_cpu(query, key, value, attn_mask, dropout_p, enable_gqa):
        out, lse = k.flash_attention_for_cpu(query, key, value, 0.0, is_causal, attn_mask=_float_mask(attn_mask, query), scale=scale)
        return out, (lse,)
    # the math path, as eager's: the (dropped-out) probabilities are what the backward reads
    rk, rv = _gqa_repeats(query, key, value, enable_gqa)
    key, value = _repeat_heads(key, rk), _repeat_heads(value, rv)
    scores, _ = k._attention_scores(query, key, is_causal, attn_mask, scale)
    probs = k.softmax_forward(scores, -1, False)
    if attn_mask is not None:  # a fully masked row attends to nothing (eager's safe softmax)
        probs = prims.where(prims.isnan(probs), 0.0, probs)
    keep = None
    dropped = probs
    if dropout_p > 0:
        u = prims.uniform(tuple(probs.shape), 0.0, 1.0, device=probs.device, dtype=probs.dtype)
        keep = prims.ge(u, float(dropout_p))
        dropped = prims.where(keep, prims.mul(probs, 1.0 / (1.0 - dropout_p)) if dropout_p < 1 else probs, 0.0)
    out = _to(ltorch.matmul(dropped, k._up(value)), query.dtype)
    return out, (probs, dropped, keep)


@per_argument
def _sdpa(call: GradCall) -> tuple:
    query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa = call.args
    g = call.g
    if _flash_for_cpu(query, key, value, attn_mask, dropout_p, enable_gqa):
        (lse,) = call.residuals
        gq, gk, gv = k.flash_attention_for_cpu_backward(
            g, query, key, value, call.output, lse, 0.0, is_causal, attn_mask=_float_mask(attn_mask, query), scale=scale
        )
        return gq, gk, gv, None, None, None, None, None
    probs, dropped, keep = call.residuals
    rk, rv = _gqa_repeats(query, key, value, enable_gqa)
    q, kk, v = (k._up(t) for t in (query, _repeat_heads(key, rk), _repeat_heads(value, rv)))
    gu = k._up(g)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    gv = _unrepeat_heads(_sum_to(ltorch.matmul(_t(dropped), gu), v.shape), rv)
    gp = ltorch.matmul(gu, _t(v))
    if keep is not None:
        gp = prims.where(keep, prims.mul(gp, 1.0 / (1.0 - dropout_p)) if dropout_p < 1 else gp, 0.0)
    gs = k.softmax_backward_data(gp, probs, -1, probs.dtype)
    gq = _sum_to(ltorch.matmul(_scaled(gs, scale), kk), query.shape)
    gk = _unrepeat_heads(_sum_to(ltorch.matmul(_t(_scaled(gs, scale)), q), kk.shape), rk)
    gm = None
    if call.wants(attn_mask) and attn_mask.dtype != torch.bool:
        gm = _to(_sum_to(gs, attn_mask.shape), attn_mask.dtype)
    return _to(gq, query.dtype), _to(gk, key.dtype), _to(gv, value.dtype), gm, None, None, None, None


# --- convolution ----------------------------------------------------------------------------


def _ntuple(value, n: int) -> list[int]:
    return [value] * n if isinstance(value, int) else list(value) * (n if len(value) == 1 else 1)


def _conv_padding(padding, weight: TensorProxy, dilation: list[int]) -> list[int]:
    n = weight.ndim - 2
    if padding == "valid":
        return [0] * n
    if padding == "same":
        totals = [d * (kk - 1) for d, kk in zip(dilation, weight.shape[2:])]
        if any(t % 2 for t in totals):
            # eager pads such inputs unevenly before a symmetric convolution; no one kernel call matches
            raise NoGradRule("convolution with padding='same' and an even effective kernel size")
        return [t // 2 for t in totals]
    return _ntuple(padding, n)


def _conv_grads(call: GradCall, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) -> tuple:
    n = weight.ndim - 2
    stride, dilation = _ntuple(stride, n), _ntuple(dilation, n)
    padding = _conv_padding(padding, weight, dilation)
    output_padding = _ntuple(output_padding, n)
    g, x = call.g, input
    unbatched = input.ndim == n + 1
    if unbatched:  # the kernels take a batch: a batch of one
        g, x = ltorch.unsqueeze(g, 0), ltorch.unsqueeze(x, 0)
    mask = [call.wants(input), call.wants(weight), call.wants(bias)]
    bias_sizes = None if bias is None else [bias.shape[0]]
    gi, gw, gb = k.convolution_backward(g, x, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)
    if unbatched and gi is not None:
        gi = prims.reshape(gi, tuple(input.shape))
    return gi, gw, gb


@per_argument
def _conv(call: GradCall) -> tuple:
    input, weight, bias, stride, padding, dilation, groups = call.args
    gi, gw, gb = _conv_grads(call, input, weight, bias, stride, padding, dilation, False, 0, groups)
    return gi, gw, gb, None, None, None, None


@per_argument
def _conv_transpose(call: GradCall) -> tuple:
    input, weight, bias, stride, padding, output_padding, groups, dilation = call.args
    gi, gw, gb = _conv_grads(call, input, weight, bias, stride, padding, dilation, True, output_padding, groups)
    return gi, gw, gb, None, None, None, None, None


@per_argument
def _convolution(call: GradCall) -> tuple:
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups = call.args
    gi, gw, gb = _conv_grads(call, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return gi, gw, gb, None, None, None, None, None, None


# --- pooling --------------------------------------------------------------------------------


def _pool_args(kernel_size, stride, padding, dilation=1) -> tuple[list[int], list[int], list[int], list[int]]:
    kernel = _ntuple(kernel_size, 2)
    stride = kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) else _ntuple(stride, 2)
    return kernel, stride, _ntuple(padding, 2), _ntuple(dilation, 2)


def _max_pool2d_forward(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    kernel, stride, padding, dilation = _pool_args(kernel_size, stride, padding, dilation)
    out, indices = k.max_pool2d_with_indices(input, kernel, stride, padding, dilation, bool(ceil_mode))
    return ((out, indices) if return_indices else out), (indices,)


def _max_pool2d_rule(with_indices: bool) -> Callable[[GradCall], tuple]:
    @per_argument
    def backward(call: GradCall) -> tuple:
        input, kernel_size, stride, padding, dilation, ceil_mode, return_indices = call.args
        (indices,) = call.residuals
        kernel, stride, padding, dilation = _pool_args(kernel_size, stride, padding, dilation)
        g = call.cotangents[0]
        gi = k.max_pool2d_with_indices_backward(g, input, kernel, stride, padding, dilation, bool(ceil_mode), indices)
        return gi, None, None, None, None, None, None

    return backward


def _max_pool2d_with_indices_forward(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool2d_forward(input, kernel_size, stride, padding, dilation, ceil_mode, True)


@per_argument
def _avg_pool2d(call: GradCall) -> tuple:
    input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override = call.args
    kernel, stride, padding, _ = _pool_args(kernel_size, stride, padding)
    gi = k.avg_pool2d_backward(call.g, input, kernel, stride, padding, bool(ceil_mode), bool(count_include_pad), divisor_override)
    return gi, None, None, None, None, None, None


@per_argument
def _adaptive_avg_pool2d(call: GradCall) -> tuple:
    input, _ = call.args
    return k.adaptive_avg_pool2d_backward(call.g, input), None


# --- batch and group norm -------------------------------------------------------------------


def _batch_norm_forward(input, running_mean, running_var, weight, bias, training, momentum, eps):
    if not training:
        # eval mode normalizes with the running statistics: the op itself, nothing more to save
        return _ltorch_op("torch.nn.functional.batch_norm")(input, running_mean, running_var, weight, bias, training, momentum, eps), ()
    if running_mean is not None and running_var is not None:
        out, mean, rstd, new_mean, new_var = k.batch_norm_functional(input, weight, bias, running_mean, running_var, True, float(momentum), float(eps))
        return (out, new_mean, new_var), (mean, rstd)
    out, mean, rstd = k.batch_norm_no_stats(input, weight, bias, True, float(momentum), float(eps))
    return out, (mean, rstd)


def _zeros_if(wanted: bool, p: TensorProxy | None) -> TensorProxy | None:
    return prims.full(tuple(p.shape), 0, device=p.device, dtype=p.dtype) if wanted and p is not None else None


@per_argument
def _batch_norm(call: GradCall) -> tuple:
    input, running_mean, running_var, weight, bias, training, momentum, eps = call.args
    mean, rstd = call.residuals if training else (None, None)
    mask = [call.wants(input), call.wants(weight), call.wants(bias)]
    if input.numel() == 0:
        # an empty batch: eager's batch_norm never reaches the backward kernel (it scales a clone of
        # the input), and PyTorch's CPU kernel divides by the zero count there (SIGFPE). Nothing met
        # the weight or bias: their gradients are zero, as eager's
        gi, gw, gb = (_zeros_if(want, p) for want, p in zip(mask, (input, weight, bias)))
        return gi, None, None, gw, gb, None, None, None
    g = call.cotangents[0]  # the running statistics' new values take no gradient
    gi, gw, gb = k.native_batch_norm_backward(g, input, weight, running_mean, running_var, mean, rstd, bool(training), float(eps), mask)
    return gi, None, None, gw, gb, None, None, None


def _group_norm_sizes(input: TensorProxy) -> tuple[int, int, int]:
    return input.shape[0], input.shape[1], math.prod(input.shape[2:])


def _group_norm_forward(input, num_groups, weight=None, bias=None, eps=1e-5):
    N, C, HxW = _group_norm_sizes(input)
    out, mean, rstd = k.native_group_norm(input, weight, bias, N, C, HxW, num_groups, float(eps))
    return out, (mean, rstd)


@per_argument
def _group_norm(call: GradCall) -> tuple:
    input, num_groups, weight, bias, _ = call.args
    mean, rstd = call.residuals
    N, C, HxW = _group_norm_sizes(input)
    mask = [call.wants(input), call.wants(weight), call.wants(bias)]
    gi, gw, gb = k.native_group_norm_backward(call.g, input, mean, rstd, weight, N, C, HxW, num_groups, mask)
    return gi, None, gw, gb, None


# --- dropout --------------------------------------------------------------------------------


def _drops(p, train) -> bool:
    return bool(train) and 0 < p < 1


def _dropout_forward(input, p, train):
    # aten's training kernel, which draws eager's mask (differentiating the decomposition
    # would draw the same numbers only where no executor reorders the draw)
    if not _drops(p, train):
        return ltorch.dropout(input, p, train), ()
    out, mask = k.native_dropout(input, float(p), True)
    return out, (mask,)


def _dropout(call: GradCall) -> tuple:
    # (a call that returns its input, not training or p == 0, never reaches a rule)
    input, p, train = call.args
    if not _drops(p, train):
        return (prims.mul(call.g, 0.0),)  # p == 1
    (mask,) = call.residuals
    return (k.native_dropout_backward(call.g, mask, 1.0 / (1.0 - p)),)


# --- the zero norm -------------------------------------------------------------------------


def _zero_norm_rule(ord_at: int) -> Callable[[GradCall], tuple]:
    """vector_norm, norm, pairwise_distance: with ord 0 (a count of nonzeros) eager's backward
    returns no gradient at all, None, not zeros; other orders go through the decomposition."""

    def backward(call: GradCall) -> tuple:
        if call.args[ord_at] != 0:
            raise NoGradRule(f"the {call.args[ord_at]}-norm (its decomposition has the gradient)")
        return tuple(None for _ in call.inputs)

    return backward


def _not_differentiable_in_eager(call: GradCall) -> tuple:
    # floor_divide: eager's backward raises ("derivative for aten::floor_divide is not
    # implemented"); PyTorch's autograd gives the same error, zeros would hide it
    raise NeedsAutograd("floor_divide, whose derivative eager does not implement")


# --- the table ------------------------------------------------------------------------------

# ltorch op id -> (backward, forward or None)
_RULES: dict[str, tuple[Callable, Callable | None]] = {
    "torch.softmax": (_softmax_rule(k.softmax_backward_data), None),
    "torch.nn.functional.softmax": (_softmax_rule(k.softmax_backward_data), None),
    "torch.log_softmax": (_softmax_rule(k.log_softmax_backward_data), None),
    "torch.nn.functional.log_softmax": (_softmax_rule(k.log_softmax_backward_data), None),
    "torch.nn.functional.layer_norm": (_layer_norm, _layer_norm_forward),
    "torch.nn.functional.rms_norm": (_rms_norm, _rms_norm_forward),
    "torch.nn.functional.gelu": (_gelu, None),
    "torch.nn.functional.silu": (_silu, None),
    "torch.relu": (_relu, None),
    "torch.nn.functional.embedding": (_embedding, None),
    "torch.matmul": (_matmul, None),
    "torch.mm": (_mm, None),
    "torch.bmm": (_bmm, None),
    "torch.addmm": (_add_product(ltorch.mm), None),
    "torch.baddbmm": (_add_product(ltorch.bmm), None),
    "torch.nn.functional.linear": (_linear, None),
    "torch.split": (_pieces_rule(squeezed=False), None),
    "torch.Tensor.split": (_pieces_rule(squeezed=False), None),
    "torch.chunk": (_pieces_rule(squeezed=False), None),
    "torch.unbind": (_pieces_rule(squeezed=True), None),
    "torch.nn.functional.nll_loss": (_nll_loss, _nll_loss_forward),
    "torch.nn.functional.cross_entropy": (_cross_entropy, _cross_entropy_forward),
    "torch.nn.functional.scaled_dot_product_attention": (_sdpa, _sdpa_forward),
    "torch.nn.functional.conv1d": (_conv, None),
    "torch.nn.functional.conv2d": (_conv, None),
    "torch.nn.functional.conv3d": (_conv, None),
    "torch.nn.functional.conv_transpose1d": (_conv_transpose, None),
    "torch.nn.functional.conv_transpose2d": (_conv_transpose, None),
    "torch.nn.functional.conv_transpose3d": (_conv_transpose, None),
    "torch.convolution": (_convolution, None),
    "torch.nn.functional.max_pool2d": (_max_pool2d_rule(False), _max_pool2d_forward),
    "torch.nn.functional.max_pool2d_with_indices": (_max_pool2d_rule(True), _max_pool2d_with_indices_forward),
    "torch.nn.functional.avg_pool2d": (_avg_pool2d, None),
    "torch.nn.functional.adaptive_avg_pool2d": (_adaptive_avg_pool2d, None),
    "torch.nn.functional.batch_norm": (_batch_norm, _batch_norm_forward),
    "torch.nn.functional.group_norm": (_group_norm, _group_norm_forward),
    "torch.nn.functional.dropout": (_dropout, _dropout_forward),
    "torch.floor_divide": (_not_differentiable_in_eager, None),
    "torch.Tensor.__rfloordiv__": (_not_differentiable_in_eager, None),
    "torch.linalg.vector_norm": (_zero_norm_rule(1), None),
    "torch.norm": (_zero_norm_rule(1), None),
    "torch.nn.functional.pairwise_distance": (_zero_norm_rule(2), None),
}


def register_ltorch_rules(rules: GradRules) -> None:
    """File the rules above; an id the torch language no longer has is an error, not a silent skip."""
    known = ltorch.all_symbols()
    missing = sorted(set(_RULES) - set(known))
    if missing:
        raise RuntimeError(f"squall: grad rules for ltorch ops that do not exist: {missing}")
    for op_id, (backward, forward) in _RULES.items():
        rules.register(op_id, backward, forward)
