"""Grad rules for convolution and pooling on PyTorch's backward kernels.

Part of the ltorch grad rules (`squall.compiler.grad_rules.ltorch`, whose table files them).
"""
from __future__ import annotations

from collections.abc import Callable


from ... import ltorch, prims
from ...ltorch import kernels as k
from ...ltorch.pooling import is_global
from ...proxies import TensorProxy
from ..gradients import GradCall, NoGradRule
from .support import per_argument

__all__ = ["convolution_rules"]


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
    if is_global(tuple(call.output.shape[-2:])):
        # eager computes a global pool as a mean, and its gradient as the mean's: an expand and a
        # divide (not the pooling backward kernel, which in bfloat16 on CUDA is atomic and slow)
        h, w = input.shape[-2:]
        return ltorch.div(ltorch.expand(call.g, input.shape), h * w), None
    return k.adaptive_avg_pool2d_backward(call.g, input), None


def convolution_rules() -> dict[str, tuple[Callable, Callable | None]]:
    """The rules of this module by ltorch op id: (backward, forward or None)."""
    return {
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
    }
