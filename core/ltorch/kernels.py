"""Backward-kernel operations: symbols that stand for PyTorch's fused training kernels.

Each is declared like an ltorch op: `@torchsymbol(aten_op)` with a Python body that is a
correct decomposition over prims. The torch executor runs the aten kernel whole (the
kernels eager runs when it trains), and an executor that does not take the kernel gets
the decomposition, which it can fuse. The grad rules in `ltorch.py` call these.

Every parameter is positional and has no default, so a recorded call reaches the aten
op exactly as the rule made it (aten's keyword-only arguments stay keyword-only here).
Outputs the caller masks off (`output_mask`) are None, as aten returns them undefined.
"""
from __future__ import annotations

import math

import torch

from .. import ltorch, prims
from ..proxies import TensorProxy
from ..symbol import Symbol, Tags
from ..symbolic import guarded_residue
from . import torchsymbol
from .attention_kernels import (
    efficient_attention, efficient_attention_backward, flash_attention, flash_attention_backward,
    flash_attention_for_cpu, flash_attention_for_cpu_backward,
)
from .helpers import count_operand, is_tensor, times_ratio
from .losses import nll, nll_parts
from .pooling import _bounds
from .kernel_support import _compute_dtype, _dim, _keep, _stat_dtype, _sum_keep, _swap_last, _to, _up, _zeros
from .windows import window_counts

aten = torch.ops.aten

__all__ = ["all_kernels"]


# --- softmax ------------------------------------------------------------------------------


@torchsymbol(aten._softmax_backward_data.default, id="aten._softmax_backward_data")
def softmax_backward_data(grad_output, output, dim, input_dtype):
    """d(softmax)/d(input) applied to `grad_output`: out * (g - sum(g * out, dim))."""
    d = _dim(dim, output.ndim)
    g, out = _up(grad_output), _up(output)
    gx = prims.mul(out, prims.sub(g, _sum_keep(prims.mul(g, out), d)))
    return _to(gx, input_dtype)


@torchsymbol(aten._log_softmax_backward_data.default, id="aten._log_softmax_backward_data")
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    """d(log_softmax)/d(input) applied to `grad_output`: g - exp(out) * sum(g, dim)."""
    d = _dim(dim, output.ndim)
    g, out = _up(grad_output), _up(output)
    gx = prims.sub(g, prims.mul(prims.exp(out), _sum_keep(g, d)))
    return _to(gx, input_dtype)


@torchsymbol(aten._softmax.default, id="aten._softmax")
def softmax_forward(self, dim, half_to_float):
    """softmax of a floating tensor over `dim` (what attention's backward reads)."""
    d = _dim(dim, self.ndim)
    x = _max_shifted(_up(self), d)
    e = prims.exp(x)
    return _to(prims.div(e, _keep(prims.sum(e, d), x.shape, d)), torch.float32 if half_to_float else self.dtype)


@torchsymbol(aten._log_softmax.default, id="aten._log_softmax")
def log_softmax_forward(input, dim, half_to_float):
    """log_softmax of a floating tensor over `dim` (what cross_entropy's forward saves)."""
    d = _dim(dim, input.ndim)
    x = _max_shifted(_up(input), d)
    out = prims.sub(x, _keep(prims.log(prims.sum(prims.exp(x), d)), x.shape, d))
    return _to(out, torch.float32 if half_to_float else input.dtype)


def _max_shifted(x: TensorProxy, d: tuple[int, ...]) -> TensorProxy:
    # x less its maximum over `d` (exp of it cannot overflow); an empty `d` or dimension as it is
    return prims.sub(x, _keep(prims.amax(x, d), x.shape, d)) if d and x.shape[d[0]] > 0 else x


# --- layer and RMS norm ---------------------------------------------------------------------


def _trailing(x: TensorProxy, normalized_shape) -> tuple[int, ...]:
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))


def _stat_shape(x: TensorProxy, dims) -> tuple[int, ...]:
    return tuple(1 if d in dims else n for d, n in enumerate(x.shape))


@torchsymbol(aten.native_layer_norm.default, id="aten.native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """Layer norm over the trailing `normalized_shape`; also the mean and rstd the backward reads."""
    dims = _trailing(input, normalized_shape)
    x = _up(input)
    n = math.prod(x.shape[d] for d in dims)
    mean = prims.div(prims.sum(x, dims), count_operand(max(n, 1)))
    rstd = prims.rsqrt(prims.add(prims.var(x, dims, correction=0), float(eps)))
    out = prims.mul(prims.sub(x, _keep(mean, x.shape, dims)), _keep(rstd, x.shape, dims))
    if weight is not None:
        out = prims.mul(out, prims.broadcast_in_dim(_up(weight), x.shape, dims))
    if bias is not None:
        out = prims.add(out, prims.broadcast_in_dim(_up(bias), x.shape, dims))
    stat_shape, stat_dtype = _stat_shape(x, dims), _stat_dtype(input, weight, bias)
    mean = _to(prims.reshape(mean, stat_shape), stat_dtype)
    rstd = _to(prims.reshape(rstd, stat_shape), stat_dtype)
    return _to(out, input.dtype), mean, rstd


def _norm_input_grad(gxh: TensorProxy, xhat: TensorProxy, rstd: TensorProxy, dims, *, centered: bool) -> TensorProxy:
    """The input gradient of x̂ = (x - mean) * rstd (centered) or x * rstd, given g·weight."""
    n = count_operand(math.prod(gxh.shape[d] for d in dims))
    inner = prims.mul(xhat, _sum_keep(prims.mul(gxh, xhat), dims))
    if centered:
        inner = prims.add(inner, _sum_keep(gxh, dims))
    return prims.mul(prims.div(rstd, n), prims.sub(prims.mul(gxh, n), inner))


@torchsymbol(aten.native_layer_norm_backward.default, id="aten.native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """Gradients of layer norm for (input, weight, bias), each None unless `output_mask` asks for it."""
    dims = _trailing(input, normalized_shape)
    outer = tuple(d for d in range(input.ndim) if d not in dims)
    x, g = _up(input), _up(grad_out)
    full = tuple(range(x.ndim))
    r = prims.broadcast_in_dim(_up(rstd), x.shape, full)
    xhat = prims.mul(prims.sub(x, prims.broadcast_in_dim(_up(mean), x.shape, full)), r)
    gx = gw = gb = None
    if output_mask[0]:
        gxh = g if weight is None else prims.mul(g, prims.broadcast_in_dim(_up(weight), x.shape, dims))
        gx = _to(_norm_input_grad(gxh, xhat, r, dims, centered=True), input.dtype)
    if output_mask[1] and weight is not None:
        gw = _to(prims.sum(prims.mul(g, xhat), outer), weight.dtype)
    if output_mask[2] and bias is not None:
        gb = _to(prims.sum(g, outer), bias.dtype)
    return gx, gw, gb


@torchsymbol(aten._fused_rms_norm.default, id="aten._fused_rms_norm")
def fused_rms_norm(input, normalized_shape, weight, eps):
    """RMS norm over the trailing `normalized_shape`; also the rstd (in the computation dtype)."""
    dims = _trailing(input, normalized_shape)
    x = _up(input)
    eps = torch.finfo(x.dtype).eps if eps is None else float(eps)
    n = math.prod(x.shape[d] for d in dims)
    rstd = prims.rsqrt(prims.add(prims.div(prims.sum(prims.mul(x, x), dims), count_operand(max(n, 1))), eps))
    out = prims.mul(x, _keep(rstd, x.shape, dims))
    if weight is not None:
        out = prims.mul(out, prims.broadcast_in_dim(_up(weight), x.shape, dims))
    return _to(out, input.dtype), prims.reshape(rstd, _stat_shape(x, dims))


@torchsymbol(aten._fused_rms_norm_backward.default, id="aten._fused_rms_norm_backward")
def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    """Gradients of RMS norm for (input, weight), each None unless `output_mask` asks for it."""
    return rms_norm_backward_decomposition(grad_out, input, normalized_shape, rstd, weight, output_mask)


def rms_norm_backward_decomposition(grad_out, input, normalized_shape, rstd, weight, output_mask):
    """`fused_rms_norm_backward` over prims: what a rule records where that kernel does not exist (CPU)."""
    dims = _trailing(input, normalized_shape)
    outer = tuple(d for d in range(input.ndim) if d not in dims)
    x, g = _up(input), _up(grad_out)
    r = prims.broadcast_in_dim(_up(rstd), x.shape, tuple(range(x.ndim)))
    xhat = prims.mul(x, r)
    gx = gw = None
    if output_mask[0]:
        gxh = g if weight is None else prims.mul(g, prims.broadcast_in_dim(_up(weight), x.shape, dims))
        gx = _to(_norm_input_grad(gxh, xhat, r, dims, centered=False), input.dtype)
    if output_mask[1] and weight is not None:
        gw = _to(prims.sum(prims.mul(g, xhat), outer), weight.dtype)
    return gx, gw


# --- activations ----------------------------------------------------------------------------


@torchsymbol(aten.gelu_backward.default, id="aten.gelu_backward")
def gelu_backward(grad_output, self, *, approximate):
    """d(gelu)/dx * g, exact (erf) or for the tanh approximation."""
    x, g = _up(self), _up(grad_output)
    if approximate == "tanh":
        beta = math.sqrt(2.0 / math.pi)
        kappa = 0.044715
        inner = prims.mul(prims.add(x, prims.mul(prims.mul(prims.mul(x, x), x), kappa)), beta)
        t = prims.tanh(inner)
        left = prims.mul(prims.add(t, 1.0), 0.5)
        d_inner = prims.mul(prims.add(prims.mul(prims.mul(x, x), 3.0 * kappa), 1.0), beta)
        right = prims.mul(prims.mul(prims.mul(x, 0.5), prims.sub(1.0, prims.mul(t, t))), d_inner)
        d = prims.add(left, right)
    else:
        cdf = prims.mul(prims.add(prims.erf(prims.mul(x, math.sqrt(0.5))), 1.0), 0.5)
        pdf = prims.mul(prims.exp(prims.mul(prims.mul(x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        d = prims.add(cdf, prims.mul(x, pdf))
    return _to(prims.mul(g, d), self.dtype)


@torchsymbol(aten.threshold_backward.default, id="aten.threshold_backward")
def threshold_backward(grad_output, self, threshold):
    """g where self > threshold, else 0 (relu's backward reads its output: self = relu(x))."""
    return prims.where(prims.le(self, threshold), 0, grad_output)


@torchsymbol(aten.tanh_backward.default, id="aten.tanh_backward")
def tanh_backward(grad_output, output):
    """g * (1 - y^2) from tanh's output y (real dtypes)."""
    return prims.mul(grad_output, prims.sub(1, prims.mul(output, output)))


@torchsymbol(aten.silu_backward.default, id="aten.silu_backward")
def silu_backward(grad_output, self):
    """g * s * (1 + x * (1 - s)) with s = sigmoid(x)."""
    x, g = _up(self), _up(grad_output)
    s = prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0))
    d = prims.mul(s, prims.add(prims.mul(x, prims.sub(1.0, s)), 1.0))
    return _to(prims.mul(g, d), self.dtype)


# --- embedding ------------------------------------------------------------------------------


@torchsymbol(aten.embedding_dense_backward.default, id="aten.embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Rows of `grad_output` summed into a (num_weights, dim) gradient; the padding row gets none."""
    dim = grad_output.shape[-1]
    m = indices.numel()
    g = prims.reshape(grad_output, (m, dim))
    idx = prims.reshape(_to(indices, torch.int64), (m,))
    if padding_idx >= 0:
        g = prims.where(prims.broadcast_in_dim(prims.eq(idx, padding_idx), (m, dim), (0,)), 0.0, g)
    if scale_grad_by_freq:
        ones = prims.full((m,), 1, device=g.device, dtype=g.dtype)
        counts = prims.index_add(_zeros((num_weights,), g), idx, ones, 0)
        g = prims.div(g, prims.broadcast_in_dim(prims.take(counts, idx, 0), (m, dim), (0,)))
    return prims.index_add(_zeros((num_weights, dim), g), idx, g, 0)


# --- classification losses ------------------------------------------------------------------

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _all(x: TensorProxy) -> tuple[int, ...]:
    return tuple(range(x.ndim))


def _nll_forward(self, target, weight, reduction, ignore_index):
    return nll(self, target, weight, ignore_index, ("none", "mean", "sum")[reduction])


def _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    w, _, keep, index, cdim = nll_parts(self, target, weight, ignore_index)
    g = grad_output
    if reduction == 1:
        g = prims.div(g, total_weight)
    if reduction != 0:
        g = prims.broadcast_in_dim(g, tuple(w.shape), ())
    # an ignored target's gradient is 0, even where the total weight is NaN or 0 (eager skips it)
    per_target = prims.where(keep, prims.neg(prims.mul(g, w)), 0.0)
    return prims.scatter(_zeros(self.shape, self), index, prims.reshape(per_target, tuple(index.shape)), cdim)


@torchsymbol(aten.nll_loss_forward.default, id="aten.nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    """Negative log-likelihood of (C,) or (N, C) log-probabilities; also the targets' total weight."""
    return _nll_forward(self, target, weight, reduction, ignore_index)


@torchsymbol(aten.nll_loss_backward.default, id="aten.nll_loss_backward")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """The gradient of nll_loss_forward for its log-probabilities: -w (/ total weight) at the targets."""
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@torchsymbol(aten.nll_loss2d_forward.default, id="aten.nll_loss2d_forward")
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    """nll_loss_forward for (N, C, H, W) log-probabilities and (N, H, W) targets."""
    return _nll_forward(self, target, weight, reduction, ignore_index)


@torchsymbol(aten.nll_loss2d_backward.default, id="aten.nll_loss2d_backward")
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """nll_loss_backward for (N, C, H, W) log-probabilities."""
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


# --- convolution ----------------------------------------------------------------------------


def _conv_weight_grad(inp: TensorProxy, grad: TensorProxy, kernel, stride, padding, dilation, groups) -> TensorProxy:
    """sum over the batch and output positions of grad[o, y] * inp[i, y*stride + k*dilation - padding]:
    a (grad channels, inp channels / groups, *kernel) tensor, as one grouped convolution of `inp`
    (channels as the batch) with `grad` (the batch as channels), stride and dilation exchanged."""
    n = len(kernel)
    N, ci, co = inp.shape[0], inp.shape[1], grad.shape[1]
    cig, cog = ci // groups, co // groups
    if N == 0:  # no batch: the kernel met nothing (and a convolution over 0 channels is ill-formed)
        return _zeros((co, cig, *kernel), grad)
    spatial, out_spatial = tuple(inp.shape[2:]), tuple(grad.shape[2:])
    lhs = prims.reshape(inp, (N, groups, cig, *spatial))
    lhs = prims.reshape(prims.transpose(lhs, (2, 1, 0, *range(3, 3 + n))), (cig, groups * N, *spatial))
    rhs = prims.reshape(grad, (N, groups, cog, *out_spatial))
    rhs = prims.reshape(prims.transpose(rhs, (1, 2, 0, *range(3, 3 + n))), (groups * cog, N, *out_spatial))
    out = prims.convolution(lhs, rhs, None, tuple(dilation), tuple(padding), tuple(stride), False, (0,) * n, groups)
    if tuple(out.shape[2:]) != tuple(kernel):  # positions past the last whole window: not part of the kernel
        out = prims.slice(out, [0] * out.ndim, [*out.shape[:2], *kernel], [1] * out.ndim)
    return prims.transpose(out, (1, 0, *range(2, 2 + n)))


@torchsymbol(aten.convolution_backward.default, id="aten.convolution_backward")
def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask):
    """Gradients of a (transposed) convolution for (input, weight, bias), each None unless `output_mask` asks."""
    n = weight.ndim - 2
    kernel = tuple(weight.shape[2:])
    g = grad_output
    gi = gw = gb = None
    if output_mask[0]:
        if transposed:  # the adjoint of a transposed convolution is the convolution
            gi = prims.convolution(g, weight, None, tuple(stride), tuple(padding), tuple(dilation), False, (0,) * n, groups)
            if tuple(gi.shape) != tuple(input.shape):
                # output_padding rows lie past the last window (output_padding may reach the stride
                # when dilation exceeds it): the convolution over them gives floor(output_padding /
                # stride) positions more than the input has, which met no input
                gi = prims.slice(gi, [0] * gi.ndim, list(input.shape), [1] * gi.ndim)
        else:
            # the transposed convolution, with the rows the forward's floor dropped added back
            # (the convolution takes constants there: with a symbolic size, the rows are guarded as
            # a relation, a remainder of the stride, so each remainder compiles, not each size)
            extra = tuple(
                guarded_residue(size - ((o - 1) * s - 2 * p + d * (kk - 1) + 1))
                for size, o, s, p, d, kk in zip(input.shape[2:], g.shape[2:], stride, padding, dilation, kernel)
            )
            gi = prims.convolution(g, weight, None, tuple(stride), tuple(padding), tuple(dilation), True, extra, groups)
    if output_mask[1]:
        if transposed:
            gw = _conv_weight_grad(g, input, kernel, stride, padding, dilation, groups)
        else:
            gw = _conv_weight_grad(input, g, kernel, stride, padding, dilation, groups)
    if output_mask[2] and bias_sizes is not None:
        gb = prims.sum(g, tuple(d for d in range(g.ndim) if d != 1))
    return gi, gw, gb


# --- pooling --------------------------------------------------------------------------------


@torchsymbol(aten.max_pool2d_with_indices.default, id="aten.max_pool2d_with_indices")
def max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode):
    """2-D max pooling; also the flat spatial position of every maximum, which the backward reads."""
    return ltorch.max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)


@torchsymbol(aten.max_pool2d_with_indices_backward.default, id="aten.max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output's gradient added at the input position of its maximum."""
    lead = tuple(self.shape[:-2])
    hw = self.shape[-2] * self.shape[-1]
    m = grad_output.shape[-2] * grad_output.shape[-1]
    g = prims.reshape(grad_output, (*lead, m))
    index = prims.reshape(indices, (*lead, m))
    gi = prims.scatter_add(_zeros((*lead, hw), g), index, g, len(lead))
    return prims.reshape(gi, tuple(self.shape))


@torchsymbol(aten.avg_pool2d_backward.default, id="aten.avg_pool2d_backward")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Each output's gradient, divided by its window's divisor, spread over its window: a transposed
    convolution with a kernel of ones, cropped to the input (padding and the ceil_mode overhang removed)."""
    kernel = tuple(kernel_size)
    stride = tuple(stride) if len(stride) else kernel
    padding = tuple(padding)
    g = _up(grad_output)
    lead = tuple(g.shape[:-2])
    out_hw = tuple(g.shape[-2:])
    in_hw = tuple(self.shape[-2:])
    if divisor_override:
        g = prims.div(g, float(divisor_override))
    else:
        for i in range(2):
            counts = window_counts(in_hw[i], out_hw[i], kernel[i], stride[i], padding[i], count_include_pad, ceil_mode, g.device)
            if is_tensor(counts):
                counts = prims.broadcast_in_dim(prims.convert_element_type(counts, g.dtype), tuple(g.shape), (g.ndim - 2 + i,))
            g = prims.div(g, counts if is_tensor(counts) else float(counts))
    b = math.prod(lead)
    ones = prims.full((1, 1, *kernel), 1.0, device=g.device, dtype=g.dtype)
    spread = prims.convolution(prims.reshape(g, (b, 1, *out_hw)), ones, None, stride, (0, 0), (1, 1), True, (0, 0), 1)
    # spread covers the padded input from its first row; it may fall short of the end, or run past it
    reach = tuple(spread.shape[2:])
    need = tuple(p + n for p, n in zip(padding, in_hw))
    if any(r < n for r, n in zip(reach, need)):
        spread = prims.pad(spread, 0.0, [(0, 0, 0), (0, 0, 0)] + [(0, max(n - r, 0), 0) for r, n in zip(reach, need)])
    spread = prims.slice(spread, [0, 0, *padding], [b, 1, *need], [1, 1, 1, 1])
    return _to(prims.reshape(spread, tuple(self.shape)), self.dtype)


def _adaptive_cells(L: int, out: int, device, dtype) -> tuple[TensorProxy, TensorProxy]:
    """The (out, L) indicator of which input positions each adaptive-pooling cell averages, and the
    (out,) cell sizes: computed by the program from the cells' bounds (`pooling._bounds`), so a
    symbolic length is never read."""
    starts, ends = _bounds(L, out, device)
    pos = prims.broadcast_in_dim(prims.iota(L, start=0, step=1, device=device, dtype=torch.int64), (out, L), (1,))
    lo = prims.broadcast_in_dim(starts, (out, L), (0,))
    hi = prims.broadcast_in_dim(ends, (out, L), (0,))
    inside = prims.logical_and(prims.ge(pos, lo), prims.lt(pos, hi))
    return prims.convert_element_type(inside, dtype), prims.convert_element_type(prims.sub(ends, starts), dtype)


@torchsymbol(aten._adaptive_avg_pool2d_backward.default, id="aten._adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_output, self):
    """Each cell's gradient over its size, spread over its cell: rows^T @ (g / sizes) @ cols."""
    g = _up(grad_output)
    (oh, ow), (h, w) = tuple(g.shape[-2:]), tuple(self.shape[-2:])
    rows, row_sizes = _adaptive_cells(h, oh, g.device, g.dtype)
    cols, col_sizes = _adaptive_cells(w, ow, g.device, g.dtype)
    sizes = prims.mul(prims.broadcast_in_dim(row_sizes, (oh, ow), (0,)), prims.broadcast_in_dim(col_sizes, (oh, ow), (1,)))
    g = prims.div(g, prims.broadcast_in_dim(sizes, tuple(g.shape), (g.ndim - 2, g.ndim - 1)))
    spread = ltorch.matmul(ltorch.matmul(_swap_last(rows), g), cols)
    return _to(spread, self.dtype)


# --- batch and group norm -------------------------------------------------------------------


def _channels(x: TensorProxy, v: TensorProxy) -> TensorProxy:
    """A per-channel (C,) vector broadcast along dim 1 of `x`."""
    return prims.broadcast_in_dim(v, tuple(x.shape), (1,))


@torchsymbol(aten._native_batch_norm_legit_functional.default, id="aten._native_batch_norm_legit_functional")
def batch_norm_functional(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Training batch norm: (output, batch mean, batch rstd, new running mean, new running var)."""
    return _batch_norm_updating_stats(input, weight, bias, running_mean, running_var, momentum, eps)


@torchsymbol(aten._batch_norm_with_update_functional.default, id="aten._batch_norm_with_update_functional")
def batch_norm_with_update_functional(input, weight, bias, running_mean, running_var, momentum, eps):
    """Training batch norm as eager runs it on CUDA, cuDNN's where cuDNN takes the call: (output,
    batch mean, batch rstd, reserve, new running mean, new running var). The reserve is what
    cuDNN's backward reads of its forward (`batch_norm_backward` takes it); torch's meta and this
    decomposition give an empty one, as the native kernels do."""
    out, mean, rstd, new_mean, new_var = _batch_norm_updating_stats(input, weight, bias, running_mean, running_var, momentum, eps)
    reserve = prims.full((0,), 0, device=input.device, dtype=torch.uint8)
    return out, mean, rstd, reserve, new_mean, new_var


def _batch_norm_updating_stats(input, weight, bias, running_mean, running_var, momentum, eps):
    out, mean, rstd = _batch_norm_training(input, weight, bias, eps, running_mean, running_var)
    dims = tuple(d for d in range(input.ndim) if d != 1)
    count = math.prod(input.shape[d] for d in dims)
    x = _up(input)
    unbiased = times_ratio(prims.var(x, dims, correction=0), count, max(count - 1, 1))
    new_mean = _to(prims.add(prims.mul(_up(running_mean), 1.0 - momentum), prims.mul(_up(mean), float(momentum))), running_mean.dtype)
    new_var = _to(prims.add(prims.mul(_up(running_var), 1.0 - momentum), prims.mul(unbiased, float(momentum))), running_var.dtype)
    return out, mean, rstd, new_mean, new_var


@torchsymbol(aten._native_batch_norm_legit.no_stats, id="aten._native_batch_norm_legit.no_stats")
def batch_norm_no_stats(input, weight, bias, training, momentum, eps):
    """Training batch norm without running statistics: (output, batch mean, batch rstd)."""
    return _batch_norm_training(input, weight, bias, eps)


def _batch_norm_training(input, weight, bias, eps, running_mean=None, running_var=None):
    dims = tuple(d for d in range(input.ndim) if d != 1)
    x = _up(input)
    count = math.prod(input.shape[d] for d in dims)
    mean = prims.div(prims.sum(x, dims), count_operand(max(count, 1)))
    rstd = prims.rsqrt(prims.add(prims.var(x, dims, correction=0), float(eps)))
    out = prims.mul(prims.sub(x, _channels(x, mean)), _channels(x, rstd))
    if weight is not None:
        out = prims.mul(out, _channels(x, _up(weight)))
    if bias is not None:
        out = prims.add(out, _channels(x, _up(bias)))
    stat = _stat_dtype(input, weight, bias, running_mean, running_var)
    return _to(out, input.dtype), _to(mean, stat), _to(rstd, stat)


@torchsymbol(aten.native_batch_norm_backward.default, id="aten.native_batch_norm_backward")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask):
    """Gradients of batch norm for (input, weight, bias): batch statistics in training, running ones in eval."""
    return _batch_norm_grads(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask)


@torchsymbol(aten.batch_norm_backward.default, id="aten.batch_norm_backward")
def batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, output_mask, reserve):
    """The gradients of `batch_norm_with_update_functional`: torch picks the backend its forward
    picked (cuDNN's backward reads the reserve); both save the batch's inverse standard deviation."""
    return _batch_norm_grads(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, output_mask)


def _batch_norm_grads(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask):
    dims = tuple(d for d in range(input.ndim) if d != 1)
    x, g = _up(input), _up(grad_out)
    if train:
        mean, rstd = _up(save_mean), _up(save_invstd)
    else:
        mean, rstd = _up(running_mean), prims.rsqrt(prims.add(_up(running_var), float(eps)))
    r = _channels(x, rstd)
    xhat = prims.mul(prims.sub(x, _channels(x, mean)), r)
    gi = gw = gb = None
    if output_mask[0]:
        gxh = g if weight is None else prims.mul(g, _channels(x, _up(weight)))
        gi = _norm_input_grad(gxh, xhat, r, dims, centered=True) if train else prims.mul(gxh, r)
        gi = _to(gi, input.dtype)
    if output_mask[1]:
        gw = prims.sum(prims.mul(g, xhat), dims)
        gw = _to(gw, weight.dtype if weight is not None else input.dtype)
    if output_mask[2]:
        gb = prims.sum(g, dims)
        gb = _to(gb, weight.dtype if weight is not None else input.dtype)
    return gi, gw, gb


def _grouped(x: TensorProxy, N: int, group: int) -> TensorProxy:
    return prims.reshape(x, (N, group, x.numel() // max(N * group, 1)))


@torchsymbol(aten.native_group_norm.default, id="aten.native_group_norm")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """Group norm of (N, C, *) input; also the (N, group) mean and rstd the backward reads."""
    x = _up(input)
    grouped = _grouped(x, N, group)
    mean = prims.div(prims.sum(grouped, (2,)), count_operand(max(grouped.shape[2], 1)))
    rstd = prims.rsqrt(prims.add(prims.var(grouped, (2,), correction=0), float(eps)))
    out = prims.mul(prims.sub(grouped, _keep(mean, grouped.shape, (2,))), _keep(rstd, grouped.shape, (2,)))
    out = prims.reshape(out, tuple(input.shape))
    if weight is not None:
        out = prims.mul(out, _channels(x, _up(weight)))
    if bias is not None:
        out = prims.add(out, _channels(x, _up(bias)))
    stat = _stat_dtype(input, weight, bias)
    return _to(out, input.dtype), _to(mean, stat), _to(rstd, stat)


@torchsymbol(aten.native_group_norm_backward.default, id="aten.native_group_norm_backward")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    """Gradients of group norm for (input, weight, bias), each None unless `output_mask` asks for it."""
    x, g = _up(input), _up(grad_out)
    grouped = _grouped(x, N, group)
    r = _keep(_up(rstd), grouped.shape, (2,))
    xhat = prims.mul(prims.sub(grouped, _keep(_up(mean), grouped.shape, (2,))), r)
    dims = tuple(d for d in range(x.ndim) if d != 1)
    gi = gw = gb = None
    if output_mask[0]:
        gxh = g if weight is None else prims.mul(g, _channels(x, _up(weight)))
        gi = _norm_input_grad(_grouped(gxh, N, group), xhat, r, (2,), centered=True)
        gi = _to(prims.reshape(gi, tuple(input.shape)), input.dtype)
    if output_mask[1] and weight is not None:
        gw = _to(prims.sum(prims.mul(g, prims.reshape(xhat, tuple(x.shape))), dims), weight.dtype)
    if output_mask[2]:
        gb = _to(prims.sum(g, dims), weight.dtype if weight is not None else input.dtype)
    return gi, gw, gb


@torchsymbol(aten.native_dropout.default, id="aten.native_dropout", tags=(Tags.RANDOM,))
def native_dropout(input, p, train):
    """Dropout's training kernel (0 < p < 1): the output and the boolean mask it kept. Its draw is
    eager's: a bernoulli(1 - p) in input's dtype, as both aten.native_dropout and eager's CPU
    dropout draw it."""
    p1m = 1.0 - p
    u = prims.uniform(tuple(input.shape), 0.0, 1.0, device=input.device, dtype=_compute_dtype(input.dtype))
    mask = prims.lt(_to(u, input.dtype), p1m)
    out = prims.mul(prims.mul(input, prims.convert_element_type(mask, input.dtype)), 1.0 / p1m)
    return out, mask


@torchsymbol(aten.native_dropout_backward.default, id="aten.native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    """The gradient through dropout: the kept elements of `grad_output`, scaled."""
    return prims.mul(prims.mul(grad_output, prims.convert_element_type(mask, grad_output.dtype)), float(scale))


def has_kernel(sym: Symbol, device: torch.device) -> bool:
    """Whether PyTorch has `sym`'s aten kernel for `device` (some exist only for CUDA)."""
    keys = ("CompositeExplicitAutograd", "CompositeImplicitAutograd", {"cpu": "CPU", "cuda": "CUDA"}.get(device.type))
    name = sym.torchfns[0].name()
    return any(key is not None and torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in keys)


KERNELS: tuple[Symbol, ...] = (
    softmax_forward, softmax_backward_data, log_softmax_forward, log_softmax_backward_data,
    native_layer_norm, native_layer_norm_backward, fused_rms_norm, fused_rms_norm_backward,
    gelu_backward, threshold_backward, tanh_backward, silu_backward, embedding_dense_backward,
    nll_loss_forward, nll_loss_backward, nll_loss2d_forward, nll_loss2d_backward,
    flash_attention_for_cpu, flash_attention_for_cpu_backward, efficient_attention, efficient_attention_backward,
    flash_attention, flash_attention_backward, convolution_backward,
    max_pool2d_with_indices, max_pool2d_with_indices_backward, avg_pool2d_backward, adaptive_avg_pool2d_backward,
    batch_norm_functional, batch_norm_with_update_functional, batch_norm_no_stats, native_batch_norm_backward, batch_norm_backward, native_group_norm, native_group_norm_backward,
    native_dropout, native_dropout_backward,
)  # fmt: skip


def all_kernels() -> dict[str, Symbol]:
    """Every backward-kernel operation, by id (the torch executor registers each as its aten op)."""
    return {sym.id: sym for sym in KERNELS}
