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

This module holds the table of every ltorch rule and the rules for softmax, the norms,
activations, embedding, the matmul family, splits and dropout; the classification losses
are in `ltorch_losses`, attention in `ltorch_attention`, convolution and pooling in
`ltorch_convolution`.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ... import ltorch, prims
from ...ltorch import kernels as k
from ...ltorch.helpers import computation_dtype
from ...ltorch.reductions import reduction_dims
from ...prims.base import canonical_dim
from ...proxies import TensorProxy
from ..gradients import GradCall, GradRules, NeedsAutograd, NoGradRule
from .ltorch_attention import attention_rules
from .ltorch_convolution import convolution_rules
from .ltorch_losses import loss_rules
from .support import expand, last_two_swapped, per_argument, real_only, scaled, sum_to, to_dtype

__all__ = ["register_ltorch_rules"]


@functools.cache
def _ltorch_op(op_id: str):
    return ltorch.all_symbols()[op_id]


# --- softmax --------------------------------------------------------------------------------


def _softmax_rule(kernel: Callable) -> Callable[[GradCall], tuple]:
    def backward(call: GradCall) -> tuple:
        a, dim = call.args[0], call.args[1]
        if dim is None:  # F.softmax's legacy rule for an unspecified dim
            dim = 0 if a.ndim in (0, 1, 3) else 1
        out = call.output
        return (to_dtype(kernel(call.g, out, dim, out.dtype), a.dtype),)

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


def _sigmoid(call: GradCall) -> tuple:
    # eager's: from the saved output, y * (1 - y); the decomposition's 1 / (1 + exp(-x)) gives
    # 0 * inf = NaN below -88, where exp(-x) overflows
    y = call.output
    return (prims.mul(call.g, prims.mul(y, prims.sub(1.0, y))),)


def _logit(call: GradCall) -> tuple:
    # eager's logit_backward: outside [eps, 1 - eps] 0, or NaN without eps (the decomposition's
    # 1 / (x (1 - x)) there is a number); at exactly 0 or 1, g * inf (the decomposition's NaN)
    x = call.args[0]
    eps = call.args[1] if len(call.args) > 1 else call.kwargs.get("eps")
    g = call.g
    compute = computation_dtype(x.dtype)
    x, g = to_dtype(x, compute), to_dtype(g, compute)
    lo, hi, outside = (0.0, 1.0, math.nan) if eps is None or eps < 0 else (float(eps), 1.0 - eps, 0.0)
    at_bounds = prims.logical_or(prims.eq(x, 0.0), prims.eq(x, 1.0))
    inside = prims.where(at_bounds, prims.mul(g, math.inf), prims.div(g, prims.mul(x, prims.sub(1.0, x))))
    grad = prims.where(prims.logical_or(prims.lt(x, lo), prims.gt(x, hi)), outside, inside)
    return (to_dtype(grad, call.args[0].dtype),)


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
    return None, to_dtype(gw, weight.dtype)


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
        ga = prims.reshape(sum_to(ltorch.matmul(g2, last_two_swapped(b2)), a2.shape), tuple(a.shape))
    if call.wants(b):
        if b2.ndim == 2 and a2.ndim > 2:
            # (..., n, k) @ (k, p): one (k, M) @ (M, p) product over the folded batch
            m = math.prod(a2.shape[:-1])
            flat_a = ltorch.reshape(a2, (m, a2.shape[-1]))
            gb = ltorch.mm(last_two_swapped(flat_a), ltorch.reshape(g2, (m, g2.shape[-1])))
        else:
            gb = sum_to(ltorch.matmul(last_two_swapped(a2), g2), b2.shape)
        gb = prims.reshape(gb, tuple(b.shape))
    return ga, gb


@per_argument
def _mm(call: GradCall) -> tuple:
    a, b = call.args[0], call.args[1]
    return (ltorch.mm(call.g, last_two_swapped(b)) if call.wants(a) else None), (ltorch.mm(last_two_swapped(a), call.g) if call.wants(b) else None)


@per_argument
def _bmm(call: GradCall) -> tuple:
    a, b = call.args[0], call.args[1]
    return (ltorch.bmm(call.g, last_two_swapped(b)) if call.wants(a) else None), (ltorch.bmm(last_two_swapped(a), call.g) if call.wants(b) else None)


def _add_product(product: Callable) -> Callable[[GradCall], tuple]:
    """addmm / baddbmm: beta * input + alpha * product(m1, m2)."""

    @per_argument
    def backward(call: GradCall) -> tuple:
        input, m1, m2 = call.args
        beta, alpha = call.kwargs["beta"], call.kwargs["alpha"]
        g = call.g
        gi = sum_to(scaled(g, beta), input.shape) if call.wants(input) else None
        gm = scaled(g, alpha)
        g1 = product(gm, last_two_swapped(m2)) if call.wants(m1) else None
        g2 = product(last_two_swapped(m1), gm) if call.wants(m2) else None
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
            gx = sum_to(ltorch.mul(ge, w), x.shape)
        if call.wants(w):
            gw = sum_to(ltorch.mul(ge, x), w.shape)
    else:
        if call.wants(x):
            gx = ltorch.matmul(g, w)
        if call.wants(w):
            m = math.prod(x.shape[:-1])
            g2 = ltorch.reshape(g, (m, w.shape[0]))
            gw = ltorch.mm(last_two_swapped(g2), ltorch.reshape(x, (m, w.shape[1])))
    if call.wants(b):
        gb = sum_to(g, b.shape)
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


# --- batch and group norm -------------------------------------------------------------------


def _batch_norm_forward(input, running_mean, running_var, weight, bias, training, momentum, eps):
    if not training:
        # eval mode normalizes with the running statistics: the op itself, nothing more to save
        return _ltorch_op("torch.nn.functional.batch_norm")(input, running_mean, running_var, weight, bias, training, momentum, eps), ()
    if running_mean is not None and running_var is not None and _cudnn_may_take(input, weight, bias):
        out, mean, rstd, reserve, new_mean, new_var = k.batch_norm_with_update_functional(input, weight, bias, running_mean, running_var, float(momentum), float(eps))
        return (out, new_mean, new_var), (mean, rstd, reserve)
    if running_mean is not None and running_var is not None:
        out, mean, rstd, new_mean, new_var = k.batch_norm_functional(input, weight, bias, running_mean, running_var, True, float(momentum), float(eps))
        return (out, new_mean, new_var), (mean, rstd)
    out, mean, rstd = k.batch_norm_no_stats(input, weight, bias, True, float(momentum), float(eps))
    return out, (mean, rstd)


def _cudnn_may_take(input, weight, bias) -> bool:
    """Whether eager's training batch norm may run on cuDNN (a CUDA input with weight and bias):
    then the forward is torch's `_batch_norm_with_update`, which picks cuDNN where eager does, and
    the backward its `batch_norm_backward`, which picks the same from the same tensors and reads
    the forward's reserve (the native kernels, which squall ran before, took 1.4x cuDNN's time
    in a ResNet-50 training step on an H100)."""
    return input.device.type == "cuda" and weight is not None and bias is not None


def _zeros_if(wanted: bool, p: TensorProxy | None) -> TensorProxy | None:
    return prims.full(tuple(p.shape), 0, device=p.device, dtype=p.dtype) if wanted and p is not None else None


@per_argument
def _batch_norm(call: GradCall) -> tuple:
    input, running_mean, running_var, weight, bias, training, momentum, eps = call.args
    mean, rstd, *reserve = call.residuals if training else (None, None)
    mask = [call.wants(input), call.wants(weight), call.wants(bias)]
    if input.numel() == 0:
        # an empty batch: eager's batch_norm never reaches the backward kernel (it scales a clone of
        # the input), and PyTorch's CPU kernel divides by the zero count there (SIGFPE). Nothing met
        # the weight or bias: their gradients are zero, as eager's
        gi, gw, gb = (_zeros_if(want, p) for want, p in zip(mask, (input, weight, bias)))
        return gi, None, None, gw, gb, None, None, None
    g = call.cotangents[0]  # the running statistics' new values take no gradient
    if training:
        # the batch's statistics are used, not the running ones: passed, they were saved for the
        # backward, and a second call's update of them in place (two views of a batch through one
        # encoder before the backward) failed autograd's version check, where eager's does not
        running_mean = running_var = None
    if reserve:
        gi, gw, gb = k.batch_norm_backward(g, input, weight, running_mean, running_var, mean, rstd, True, float(eps), mask, reserve[0])
    else:
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
    returns no gradient at all, None, not zeros; with ord +-inf see `_infinity_norm`; other
    orders go through the decomposition."""

    def backward(call: GradCall) -> tuple:
        order = call.args[ord_at]
        if isinstance(order, float) and math.isinf(order) and ord_at == 1:
            return _infinity_norm(call)
        if order != 0:
            raise NoGradRule(f"the {order}-norm (its decomposition has the gradient)")
        return tuple(None for _ in call.inputs)

    return backward


def _infinity_norm(call: GradCall) -> tuple:
    """eager's linalg_vector_norm_backward for ord +-inf: the gradient split among the elements
    whose |x| is the norm and the NaNs, times sgn(x) (0 at a NaN). The decomposition's amax
    matched no element where the norm is NaN and gave NaN to the whole slice."""
    a, dim, keepdim = call.args[0], call.args[2], call.args[3]
    if a.dtype.is_complex or call.kwargs.get("dtype") is not None or call.output.dtype != a.dtype:
        raise NoGradRule("the infinity norm of a complex input or in another dtype (its decomposition has the gradient)")
    dims = reduction_dims(a, dim)
    kept = tuple(n for d, n in enumerate(a.shape) if d not in dims)
    norm, g = call.output, call.g
    if keepdim:
        norm, g = prims.reshape(norm, kept), prims.reshape(g, kept)
    magnitude = prims.abs(a)
    chosen = prims.logical_or(prims.eq(magnitude, expand(norm, a.shape, dims)), prims.isnan(magnitude))
    chosen = prims.convert_element_type(chosen, a.dtype)
    share = expand(prims.div(g, prims.sum(chosen, dims)), a.shape, dims)
    return (prims.mul(prims.sign(a), prims.mul(share, chosen)),)


def _whole_extremum(call: GradCall) -> tuple:
    """max()/min() over every element: eager's evenly_distribute_backward, the gradient split
    among the elements equal to the result, or among the NaNs where the result is NaN (the
    decomposition's amax matches no element there and gave NaN everywhere). The forms with a
    dim or another tensor go through the decomposition."""
    a = call.args[0]
    dim = call.args[1] if len(call.args) > 1 else call.kwargs.get("dim")
    if dim is not None or call.kwargs.get("other") is not None or not isinstance(call.output, TensorProxy):
        raise NoGradRule("max/min along a dim or against a tensor (its decomposition has the gradient)")
    result = prims.broadcast_in_dim(call.output, tuple(a.shape), ())
    chosen = prims.logical_or(prims.eq(a, result), prims.logical_and(prims.isnan(a), prims.isnan(result)))
    chosen = prims.convert_element_type(chosen, a.dtype)
    share = prims.div(call.g, prims.sum(chosen, tuple(range(a.ndim))))
    return (prims.mul(prims.broadcast_in_dim(share, tuple(a.shape), ()), chosen),)


def _not_differentiable_in_eager(call: GradCall) -> tuple:
    # floor_divide: eager's backward raises ("derivative for aten::floor_divide is not
    # implemented"); PyTorch's autograd gives the same error, zeros would hide it
    raise NeedsAutograd("floor_divide, whose derivative eager does not implement")


# --- in-place comparisons and logical ops on tensors in autograd (ltorch.elementwise_binary) ---


@per_argument
def _comparison_written(call: GradCall) -> tuple:
    # eager's LtBackward1 (and its siblings): a zero gradient to each operand that wants one
    a, b = call.args
    return _zeros_if(call.wants(a), a), _zeros_if(call.wants(b), b) if isinstance(b, TensorProxy) else None


@per_argument
def _logical_written(call: GradCall) -> tuple:
    # autograd never saw the write: the gradient reaches `a`'s earlier value as it is, none reaches b
    return call.cotangents[0], None


# --- the table ------------------------------------------------------------------------------

# ltorch op id -> (backward, forward or None)
_RULES: dict[str, tuple[Callable, Callable | None]] = {
    "ltorch.comparison_written": (_comparison_written, None),
    "ltorch.logical_written": (_logical_written, None),
    "torch.softmax": (_softmax_rule(k.softmax_backward_data), None),
    "torch.nn.functional.softmax": (_softmax_rule(k.softmax_backward_data), None),
    "torch.log_softmax": (_softmax_rule(k.log_softmax_backward_data), None),
    "torch.nn.functional.log_softmax": (_softmax_rule(k.log_softmax_backward_data), None),
    "torch.nn.functional.layer_norm": (_layer_norm, _layer_norm_forward),
    "torch.nn.functional.rms_norm": (_rms_norm, _rms_norm_forward),
    "torch.nn.functional.gelu": (_gelu, None),
    "torch.nn.functional.silu": (_silu, None),
    "torch.relu": (_relu, None),
    "torch.logit": (real_only("logit", _logit), None),
    "torch.sigmoid": (real_only("sigmoid", _sigmoid), None),
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
    **loss_rules(),
    **attention_rules(),
    **convolution_rules(),
    "torch.nn.functional.batch_norm": (_batch_norm, _batch_norm_forward),
    "torch.nn.functional.group_norm": (_group_norm, _group_norm_forward),
    "torch.nn.functional.dropout": (_dropout, _dropout_forward),
    "torch.floor_divide": (_not_differentiable_in_eager, None),
    "torch.Tensor.__rfloordiv__": (_not_differentiable_in_eager, None),
    "torch.max": (_whole_extremum, None),
    "torch.min": (_whole_extremum, None),
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
