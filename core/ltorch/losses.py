"""Torch-language ops: loss functions (torch.nn.functional.*_loss, cross_entropy, kl_div).

Each loss computes its elementwise terms in the computation dtype (float32 for
bf16/f16), reduces ('none', 'mean', 'sum'), and rounds once to the result dtype.
"""
from __future__ import annotations

import sys
import warnings

import torch
import torch.nn.functional as F

from .. import prims
from .base import torchsymbol
from .unmodelled import NotModelled
from .helpers import broadcast, broadcast_to, check, computation_dtype, count_operand, is_tensor, promote, to_dtype
from .softmax import log_softmax
from ..prims.base import dtype_category
from ..proxies import TensorProxy
from ..symshape import shape_text

__all__ = [
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "nll_loss", "cross_entropy",
]


# --- shared pieces ----------------------------------------------------------------------


def _check_input(name: str, what: str, x) -> None:
    check(is_tensor(x), lambda: f"{name}(): argument '{what}' must be Tensor, not {type(x).__name__}", TypeError)


def _reduction(size_average, reduce, reduction: str, *, allowed=("none", "mean", "sum")) -> str:
    """The reduction string, after torch's legacy size_average/reduce arguments."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    check(reduction in allowed, lambda: f"{reduction} is not a valid value for reduction", ValueError)
    return reduction


def _all_dims(x: TensorProxy) -> tuple[int, ...]:
    return tuple(range(x.ndim))


def _reduce(loss: TensorProxy, reduction: str) -> TensorProxy:
    # an empty mean is 0/0: NaN, as torch gives; a symbolic count is divided by as the size it is
    # (`count_operand`), not read and guarded (a compile per length)
    if reduction == "none":
        return loss
    total = prims.sum(loss, _all_dims(loss))
    return total if reduction == "sum" else prims.div(total, count_operand(loss.numel()))


def _floating_result(name: str, *operands) -> tuple[torch.dtype, torch.dtype]:
    """(computation dtype, result dtype) of a loss over these operands."""
    _, result = promote(*operands)
    check(dtype_category(result) >= 2, lambda: f"{name}: expected floating point inputs, got {result}", RuntimeError)
    return computation_dtype(result), result


def _warn_size(input: TensorProxy, target: TensorProxy) -> None:
    if target.shape != input.shape:
        warnings.warn(
            f"Using a target size ({shape_text(target.shape)}) that is different to the input size ({shape_text(input.shape)}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=4,
        )


def _pointwise_loss(name: str, term, input, target, reduction: str, weight, *, weighted_mean_divides_by_weight: bool):
    """A loss of `term(input - target)` per element, optionally weighted per element as torch does."""
    _check_input(name, "input", input)
    _check_input(name, "target", target)
    _warn_size(input, target)
    compute, result = _floating_result(name, input, target)
    x, y = broadcast(to_dtype(input, compute), to_dtype(target, compute))
    loss = term(prims.sub(x, y))
    if weight is None:
        return to_dtype(_reduce(loss, reduction), result)
    check(tuple(weight.shape) == tuple(input.shape), lambda: "Weights and input must have the same size.", ValueError)
    check(reduction in ("none", "mean", "sum"), lambda: f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.", ValueError)
    w = broadcast_to(to_dtype(weight, compute), loss.shape)
    loss = prims.mul(loss, w)
    if reduction == "mean" and weighted_mean_divides_by_weight:
        out = prims.div(prims.sum(loss, _all_dims(loss)), prims.sum(w, _all_dims(w)))
    else:
        out = _reduce(loss, reduction)
    return to_dtype(out, torch.promote_types(result, weight.dtype))


# --- regression losses ------------------------------------------------------------------


@torchsymbol(F.mse_loss)
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error."""
    reduction = _reduction(size_average, reduce, reduction)
    return _pointwise_loss("mse_loss", lambda d: prims.mul(d, d), input, target, reduction, weight, weighted_mean_divides_by_weight=True)


@torchsymbol(F.l1_loss)
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error."""
    if weight is None and _weight_dropped_by_torch() is not None:
        raise NotModelled(
            "squall: this torch's torch.nn.functional.l1_loss does not pass weight= on to "
            "__torch_function__, so a traced call cannot see it; write the weighted loss out "
            "(e.g. (weight * (input - target).abs()).mean()) or call l1_loss outside squall.jit"
        )
    reduction = _reduction(size_average, reduce, reduction)
    return _pointwise_loss("l1_loss", prims.abs, input, target, reduction, weight, weighted_mean_divides_by_weight=True)


def _weight_dropped_by_torch():
    """The weight= a caller gave torch.nn.functional.l1_loss, found in its frame (torch drops it)."""
    frame = sys._getframe(1)
    code = torch.nn.functional.l1_loss.__code__
    while frame is not None:
        if frame.f_code is code:
            return frame.f_locals.get("weight")
        frame = frame.f_back
    return None


def _huber_term(delta: float, *, scale: float):
    # |d| < delta: 0.5 d^2 / scale;  otherwise: (|d| - 0.5 delta) * delta / scale
    def term(d: TensorProxy) -> TensorProxy:
        a = prims.abs(d)
        quadratic = prims.div(prims.mul(prims.mul(d, d), 0.5), scale)
        linear = prims.div(prims.mul(prims.sub(a, 0.5 * delta), delta), scale)
        return prims.where(prims.lt(a, delta), quadratic, linear)

    return term


@torchsymbol(F.smooth_l1_loss)
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1: quadratic below `beta`, linear above (plain L1 when beta is 0)."""
    reduction = _reduction(size_average, reduce, reduction)
    check(beta >= 0, lambda: "smooth_l1_loss does not support negative values for beta.", RuntimeError)
    term = prims.abs if beta == 0 else _huber_term(float(beta), scale=float(beta))
    return _pointwise_loss("smooth_l1_loss", term, input, target, reduction, None, weighted_mean_divides_by_weight=False)


@torchsymbol(F.huber_loss)
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber loss: quadratic below `delta`, linear (scaled by delta) above."""
    reduction = _reduction(None, None, reduction)
    check(delta > 0, lambda: "huber_loss does not support non-positive values for delta.", RuntimeError)
    out = _pointwise_loss("huber_loss", _huber_term(float(delta), scale=1.0), input, target, reduction, weight, weighted_mean_divides_by_weight=False)
    # unlike mse_loss, torch's huber_loss kernel keeps the input's dtype
    return out if weight is not None else to_dtype(out, input.dtype)


# --- binary classification -------------------------------------------------------------


def _check_same_size(name: str, input: TensorProxy, target: TensorProxy, message: str) -> None:
    check(tuple(target.shape) == tuple(input.shape), lambda: message.format(t=target.shape, i=input.shape), ValueError)


def _weighted(loss: TensorProxy, weight, compute: torch.dtype) -> TensorProxy:
    if weight is None:
        return loss
    _check_input("loss", "weight", weight)
    return prims.mul(loss, broadcast_to(to_dtype(weight, compute), loss.shape))


def _clamp_log(log: TensorProxy) -> TensorProxy:
    # torch clamps each log at -100 so that 0 * log(0) stays finite; NaN passes through
    return prims.where(prims.lt(log, -100.0), -100.0, log)


@torchsymbol(F.binary_cross_entropy)
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), each log clamped at -100 as torch does."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_input("binary_cross_entropy", "input", input)
    _check_input("binary_cross_entropy", "target", target)
    _check_same_size(
        "binary_cross_entropy", input, target,
        "Using a target size ({t}) that is different to the input size ({i}) is deprecated. Please ensure they have the same size.",
    )
    check(target.dtype == input.dtype, lambda: f"binary_cross_entropy: Found dtype {target.dtype} but expected {input.dtype}", RuntimeError)
    check(dtype_category(input.dtype) == 2, lambda: f"binary_cross_entropy: expected a floating point input, got {input.dtype}", RuntimeError)
    compute = computation_dtype(input.dtype)
    x, t = to_dtype(input, compute), to_dtype(target, compute)
    log_x, log_1mx = _clamp_log(prims.log(x)), _clamp_log(prims.log1p(prims.neg(x)))
    # (t - 1) * log(1 - x) - t * log(x)
    loss = prims.sub(prims.mul(prims.sub(t, 1.0), log_1mx), prims.mul(t, log_x))
    return to_dtype(_reduce(_weighted(loss, weight, compute), reduction), input.dtype)


@torchsymbol(F.binary_cross_entropy_with_logits)
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
    """Binary cross entropy of sigmoid(input), computed stably from the logits."""
    reduction = _reduction(size_average, reduce, reduction)
    name = "binary_cross_entropy_with_logits"
    _check_input(name, "input", input)
    _check_input(name, "target", target)
    _check_same_size(name, input, target, "Target size ({t}) must be the same as input size ({i})")
    compute, result = _floating_result(name, input, target)
    x, t = to_dtype(input, compute), to_dtype(target, compute)
    # softplus(-x) = max(-x, 0) + log(exp(-max) + exp(-x - max)), as torch computes it
    neg_x = prims.neg(x)
    max_val = prims.where(prims.gt(neg_x, 0.0), neg_x, 0.0)
    softplus = prims.add(prims.log(prims.add(prims.exp(prims.neg(max_val)), prims.exp(prims.sub(prims.neg(x), max_val)))), max_val)
    if pos_weight is not None:
        _check_input(name, "pos_weight", pos_weight)
        pw = broadcast_to(to_dtype(pos_weight, compute), x.shape)
        softplus = prims.mul(prims.add(prims.mul(prims.sub(pw, 1.0), t), 1.0), softplus)
    loss = prims.add(prims.mul(prims.sub(1.0, t), x), softplus)
    return to_dtype(_reduce(_weighted(loss, weight, compute), reduction), result)


# --- distributions ----------------------------------------------------------------------


@torchsymbol(F.kl_div)
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence with `input` as log-probabilities (and `target` too when log_target)."""
    reduction = _reduction(size_average, reduce, reduction, allowed=("none", "mean", "sum", "batchmean"))
    _check_input("kl_div", "input", input)
    _check_input("kl_div", "target", target)
    compute, result = _floating_result("kl_div", input, target)
    x, t = broadcast(to_dtype(input, compute), to_dtype(target, compute))
    if log_target:
        loss = prims.mul(prims.exp(t), prims.sub(t, x))
    else:
        # xlogy(t, t) - t * x, where 0 * log(0) is 0
        xlogy = prims.where(prims.eq(t, 0.0), 0.0, prims.mul(t, prims.log(t)))
        loss = prims.sub(xlogy, prims.mul(t, x))
    if reduction == "batchmean":
        out = prims.sum(loss, _all_dims(loss))
        if input.ndim != 0:
            out = prims.div(out, count_operand(input.shape[0]))
    else:
        out = _reduce(loss, reduction)
    return to_dtype(out, result)


# --- classification over C classes -----------------------------------------------------


def _class_dim(input: TensorProxy) -> int:
    return 0 if input.ndim == 1 else 1


def _check_class_target(name: str, input: TensorProxy, target: TensorProxy, weight) -> int:
    """Check a class-index target against an (N, C, d1, ...) or (C,) input; the class count."""
    check(input.ndim >= 1, lambda: f"{name}: input tensor should be 1D or more, got a 0-d input", ValueError)
    check(
        target.dtype in (torch.int64, torch.uint8),
        lambda: f"expected target dtype to be Long or Byte, but got {target.dtype} (a class-index target)",
        RuntimeError,
    )
    if input.ndim == 1:
        check(target.ndim == 0, lambda: f"0D target tensor expected for a 1D input, got shape {list(target.shape)}", RuntimeError)
    elif input.ndim == 2:
        check(target.ndim == 1, lambda: f"0D or 1D target tensor expected, multi-target not supported (target shape {list(target.shape)})", RuntimeError)
        check(
            target.shape[0] == input.shape[0],
            lambda: f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target.shape[0]}).",
            ValueError,
        )
    else:
        expected = [input.shape[0], *input.shape[2:]]
        check(list(target.shape) == expected, lambda: f"Expected target size {expected}, got {list(target.shape)}", RuntimeError)
    n_classes = input.shape[_class_dim(input)]
    if weight is not None:
        _check_weight(name, weight, n_classes)
    return n_classes


def _check_weight(name: str, weight, n_classes: int) -> None:
    _check_input(name, "weight", weight)
    check(
        weight.ndim == 1 and weight.shape[0] == n_classes,
        lambda: f"weight tensor should be defined either for all {n_classes} classes or no classes but got weight tensor of shape: {list(weight.shape)}",
        RuntimeError,
    )


def _class_weights(input: TensorProxy, weight, compute: torch.dtype) -> TensorProxy | None:
    """`weight` (C,) broadcast along the class dimension of `input`, or None."""
    if weight is None:
        return None
    return prims.broadcast_in_dim(to_dtype(weight, compute), input.shape, (_class_dim(input),))


def nll_parts(logp: TensorProxy, target: TensorProxy, weight, ignore_index: int):
    """(per-target weight w, picked log-probabilities, kept mask, safe index in logp's shape with
    the class dim of size 1, class dim) over class-index targets; nll_loss's backward kernel
    (squall.ltorch.kernels) shares them."""
    cdim = _class_dim(logp)
    keep = prims.ne(target, ignore_index)
    # ignored targets may hold any value (-100): point them at class 0 and weigh them 0
    kept_shape = list(target.shape)
    kept_shape.insert(cdim, 1)
    index = prims.reshape(prims.where(keep, to_dtype(target, torch.int64), 0), tuple(kept_shape))
    picked = prims.reshape(prims.take_along_axis(logp, index, cdim), tuple(target.shape))
    if weight is None:
        w = to_dtype(keep, logp.dtype)
    else:
        flat = prims.reshape(index, (index.numel(),))
        w = prims.reshape(prims.take(to_dtype(weight, logp.dtype), flat, 0), tuple(target.shape))
        w = prims.where(keep, w, 0.0)
    return w, picked, keep, index, cdim


def nll(logp: TensorProxy, target: TensorProxy, weight, ignore_index: int, reduction: str) -> tuple[TensorProxy, TensorProxy]:
    """(reduced negative log-likelihood, sum of the target weights) over class-index targets."""
    w, picked, keep, _, _ = nll_parts(logp, target, weight, ignore_index)
    # an ignored target adds nothing, not 0 * its row's class-0 value (NaN where that is infinite)
    loss = prims.where(keep, prims.neg(prims.mul(picked, w)), 0.0)
    total_weight = prims.sum(w, _all_dims(w))
    if reduction == "none":
        return loss, total_weight
    total = prims.sum(loss, _all_dims(loss))
    return (total if reduction == "sum" else prims.div(total, total_weight)), total_weight


@torchsymbol(F.nll_loss)
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of the target classes; 'mean' divides by the targets' total weight."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_input("nll_loss", "input", input)
    _check_input("nll_loss", "target", target)
    _check_class_target("nll_loss", input, target, weight)
    compute = computation_dtype(input.dtype)
    out, _ = nll(to_dtype(input, compute), target, weight, ignore_index, reduction)
    return to_dtype(out, input.dtype)


def _cross_entropy_probabilities(logp, target, weight, reduction, label_smoothing, n_classes, compute):
    cdim = _class_dim(logp)
    t = to_dtype(target, compute)
    if label_smoothing > 0:
        t = prims.add(prims.mul(t, 1.0 - label_smoothing), label_smoothing / n_classes)
    terms = prims.mul(logp, t)
    w = _class_weights(logp, weight, compute)
    if w is not None:
        terms = prims.mul(terms, w)
    if reduction == "none":
        return prims.neg(prims.sum(terms, (cdim,)))
    total = prims.neg(prims.sum(terms, _all_dims(terms)))
    if reduction == "sum":
        return total
    return prims.div(total, count_operand(logp.numel() // n_classes) if n_classes else 0.0)


@torchsymbol(F.cross_entropy)
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0):
    """log_softmax over the class dimension, then nll_loss (class indices) or -sum(p log q) (probabilities)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_input("cross_entropy", "input", input)
    _check_input("cross_entropy", "target", target)
    check(
        0.0 <= label_smoothing <= 1.0,
        lambda: f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}",
        RuntimeError,
    )
    check(input.ndim >= 1, lambda: "cross_entropy: input tensor should be 1D or more, got a 0-d input", ValueError)
    compute = computation_dtype(input.dtype)
    cdim = _class_dim(input)
    n_classes = input.shape[cdim]
    if tuple(target.shape) == tuple(input.shape):
        # a target of the input's shape holds class probabilities
        check(dtype_category(target.dtype) >= 2, lambda: f"expected a floating point probability target, got {target.dtype}", RuntimeError)
        check(ignore_index < 0, lambda: "ignore_index is not supported for floating point target", RuntimeError)
        if weight is not None:
            _check_weight("cross_entropy", weight, n_classes)
        logp = to_dtype(log_softmax(input, cdim), compute)
        out = _cross_entropy_probabilities(logp, target, weight, reduction, float(label_smoothing), n_classes, compute)
        return to_dtype(out, input.dtype)
    _check_class_target("cross_entropy", input, target, weight)
    logp = to_dtype(log_softmax(input, cdim), compute)
    nll_out, total_weight = nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return to_dtype(nll_out, input.dtype)
    # torch mixes in the uniform distribution's loss: -sum_c w_c log q_c / C, zero for ignored targets
    w = _class_weights(logp, weight, compute)
    smooth = prims.neg(prims.sum(logp if w is None else prims.mul(logp, w), (cdim,)))
    smooth = prims.where(prims.eq(target, ignore_index), 0.0, smooth)
    if reduction != "none":
        smooth = prims.sum(smooth, _all_dims(smooth))
        if reduction == "mean":
            smooth = prims.div(smooth, total_weight)
    eps = float(label_smoothing)
    out = prims.add(prims.mul(nll_out, 1.0 - eps), prims.mul(smooth, eps / n_classes))
    return to_dtype(out, input.dtype)
