"""Grad rules for the classification losses (nll_loss, cross_entropy) on PyTorch's backward kernels.

Part of the ltorch grad rules (`squall.compiler.grad_rules.ltorch`, whose table files them).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.nn import _reduction as reduction_enum

from ... import prims
from ...ltorch import kernels as k
from ...ltorch.helpers import broadcast_to, count_operand
from ...proxies import TensorProxy
from ..gradients import GradCall, NoGradRule
from .support import per_argument, scaled, to_dtype

__all__ = ["loss_rules"]


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
    return prims.broadcast_in_dim(to_dtype(weight, dtype), tuple(like.shape), (_class_dim(like),))


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
        t = to_dtype(target, compute)
        if eps > 0:
            t = prims.add(prims.mul(t, 1.0 - eps), eps / n_classes)
        terms = prims.mul(to_dtype(logp, compute), t)
        w = _class_vector(weight, logp, compute)
        if w is not None:
            terms = prims.mul(terms, w)
        if reduction == "none":
            out = prims.neg(prims.sum(terms, (cdim,)))
        else:
            out = prims.neg(prims.sum(terms, tuple(range(terms.ndim))))
            if reduction == "mean":
                out = prims.div(out, count_operand(logp.numel() // n_classes) if n_classes else 0.0)
        return to_dtype(out, input.dtype), (logp,)
    nll, total_weight = _nll_nd_forward(logp, target, weight, reduction, ignore_index)
    if eps == 0:
        return nll, (logp, total_weight)
    # label smoothing mixes in the uniform distribution's loss, zero for ignored targets
    lp = to_dtype(logp, compute)
    w = _class_vector(weight, lp, compute)
    smooth = prims.neg(prims.sum(lp if w is None else prims.mul(lp, w), (cdim,)))
    smooth = prims.where(prims.eq(target, ignore_index), 0.0, smooth)
    if reduction != "none":
        smooth = prims.sum(smooth, tuple(range(smooth.ndim)))
        if reduction == "mean":
            smooth = prims.div(smooth, to_dtype(total_weight, compute))
    out = prims.add(prims.mul(to_dtype(nll, compute), 1.0 - eps), prims.mul(smooth, eps / n_classes))
    return to_dtype(out, input.dtype), (logp, total_weight)


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
    g = to_dtype(call.g, compute)
    gt = None
    if tuple(target.shape) == tuple(input.shape):
        if reduction == "mean":
            g = prims.div(g, count_operand(logp.numel() // n_classes) if n_classes else 0.0)
        gb = _broadcast_cotangent(g, logp, cdim)
        w = _class_vector(weight, logp, compute)
        if w is not None:
            gb = prims.mul(gb, w)
        t = to_dtype(target, compute)
        if eps > 0:
            t = prims.add(prims.mul(t, 1.0 - eps), eps / n_classes)
        g_logp = prims.neg(prims.mul(gb, t))
        if call.wants(target):
            gt = to_dtype(prims.neg(prims.mul(prims.mul(gb, to_dtype(logp, compute)), 1.0 - eps)), target.dtype)
    else:
        total_weight = call.residuals[1]
        g_logp = to_dtype(_nll_nd_backward(to_dtype(scaled(g, 1.0 - eps), logp.dtype), logp, target, weight, reduction, ignore_index, total_weight), compute)
        if eps > 0:
            gs = prims.mul(g, eps / n_classes)
            if reduction == "mean":
                gs = prims.div(gs, to_dtype(total_weight, compute))
            kept = to_dtype(prims.ne(target, ignore_index), compute)
            per_target = prims.mul(prims.broadcast_in_dim(gs, tuple(kept.shape), ()) if gs.ndim == 0 else gs, kept)
            gb = _broadcast_cotangent(per_target, logp, cdim)
            w = _class_vector(weight, logp, compute)
            g_logp = prims.sub(g_logp, gb if w is None else prims.mul(gb, w))
    gx = k.log_softmax_backward_data(to_dtype(g_logp, logp.dtype), logp, cdim, input.dtype)
    return gx, gt, None, None, None, None, None, None


def _log_sigmoid(x: TensorProxy) -> TensorProxy:
    # eager's log_sigmoid: min(x, 0) - log1p(exp(-|x|)), finite wherever x is
    return prims.sub(prims.minimum(x, 0.0), prims.log1p(prims.exp(prims.neg(prims.abs(x)))))


@per_argument
def _bce_with_logits(call: GradCall) -> tuple:
    # eager's backwards: the input's (sigmoid(x) (pos_weight t + 1 - t) - pos_weight t) g, finite
    # at a logit of -inf (the decomposition's stable softplus gave NaN there), and the target's
    # (log_sigmoid(-x) - pos_weight log_sigmoid(x)) g, or -x g without pos_weight; a weight or
    # pos_weight that requires grad goes through the decomposition
    input, target, weight, size_average, reduce, reduction, pos_weight = call.args
    if call.wants(weight) or call.wants(pos_weight):
        raise NoGradRule("binary_cross_entropy_with_logits with a weight or pos_weight that requires grad")
    reduction = _reduction(size_average, reduce, reduction)
    compute = k._compute_dtype(input.dtype)
    shape = tuple(input.shape)
    x, t = to_dtype(input, compute), to_dtype(target, compute)
    g = to_dtype(call.g, compute)
    if reduction == "mean":
        g = prims.div(g, count_operand(input.numel()))
    g = broadcast_to(g, shape)
    if weight is not None:
        g = prims.mul(g, broadcast_to(to_dtype(weight, compute), shape))
    pw = None if pos_weight is None else broadcast_to(to_dtype(pos_weight, compute), shape)
    grad_input = grad_target = None
    if call.wants(input):
        s = prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0))
        if pw is not None:
            pt = prims.mul(pw, t)
            d = prims.sub(prims.mul(prims.sub(prims.add(pt, 1.0), t), s), pt)
        else:
            d = prims.sub(s, t)
        grad_input = to_dtype(prims.mul(d, g), input.dtype)
    if call.wants(target):
        if pw is not None:
            d = prims.sub(_log_sigmoid(prims.neg(x)), prims.mul(pw, _log_sigmoid(x)))
        else:
            d = prims.neg(x)
        grad_target = to_dtype(prims.mul(d, g), target.dtype)
    return grad_input, grad_target, None, None, None, None, None


def loss_rules() -> dict[str, tuple[Callable, Callable | None]]:
    """The rules of this module by ltorch op id: (backward, forward or None)."""
    return {
        "torch.nn.functional.nll_loss": (_nll_loss, _nll_loss_forward),
        "torch.nn.functional.cross_entropy": (_cross_entropy, _cross_entropy_forward),
        "torch.nn.functional.binary_cross_entropy_with_logits": (_bce_with_logits, None),
    }
