"""Linear-algebra prims: matmul and convolution, with every argument explicit."""
from __future__ import annotations

import torch

from .base import PrimIDs, check, make_prim
from ..proxies import TensorProxy

__all__ = ["matmul", "convolution"]


def _check_pair(name: str, a, b) -> None:
    check(isinstance(a, TensorProxy) and isinstance(b, TensorProxy), lambda: f"{name} expects two tensors, got {type(a).__name__} and {type(b).__name__}", TypeError)
    check(a.dtype == b.dtype, lambda: f"{name} expects operands of one dtype, got {a.dtype} and {b.dtype}", RuntimeError)
    check(a.device == b.device, lambda: f"{name} expects operands on one device, got {a.device} and {b.device}", RuntimeError)
    check(a.dtype != torch.bool and not a.dtype.is_complex, lambda: f"{name} expects integer or floating point operands, got {a.dtype}", TypeError)


def _matmul_meta(a, b):
    _check_pair("matmul", a, b)
    sa, sb = list(a.shape), list(b.shape)
    check(a.ndim >= 1 and b.ndim >= 1, lambda: f"matmul expects operands of at least 1 dimension, got shapes {sa} and {sb}", RuntimeError)
    # the contracted dim: a's last, b's first (1-D) or second-to-last
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    check(a.shape[-1] == k_b, lambda: f"matmul: inner sizes differ: shapes {sa} and {sb} cannot be multiplied ({a.shape[-1]} != {k_b})", RuntimeError)
    if a.ndim <= 2 and b.ndim <= 2:
        shape = sa[:-1] + sb[1:] if b.ndim == 2 else sa[:-1]
        return TensorProxy(like=a, shape=shape, requires_grad=a.requires_grad or b.requires_grad)
    # batched: no broadcasting at this level, batch dims must be identical
    check(a.ndim == b.ndim and sa[:-2] == sb[:-2], lambda: f"matmul expects identical batch dimensions (broadcast first), got shapes {sa} and {sb}", RuntimeError)
    return TensorProxy(like=a, shape=sa[:-1] + sb[-1:], requires_grad=a.requires_grad or b.requires_grad)


matmul = make_prim(PrimIDs.MATMUL, "matmul", meta=_matmul_meta)


def _check_params(name: str, value, n: int, *, minimum: int) -> tuple[int, ...]:
    check(
        isinstance(value, (tuple, list)) and len(value) == n and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
        lambda: f"convolution expects {name} as a tuple of {n} ints (one per spatial dimension), got {value!r}",
        TypeError,
    )
    check(all(v >= minimum for v in value), lambda: f"convolution expects {name} >= {minimum}, got {tuple(value)}", RuntimeError)
    return tuple(value)


def _convolution_meta(a, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _check_pair("convolution", a, weight)
    check(a.ndim >= 3 and a.ndim == weight.ndim, lambda: f"convolution expects a batched input (N, C, *spatial) and a weight of the same rank, got shapes {list(a.shape)} and {list(weight.shape)}", RuntimeError)
    n = a.ndim - 2
    stride = _check_params("stride", stride, n, minimum=1)
    padding = _check_params("padding", padding, n, minimum=0)
    dilation = _check_params("dilation", dilation, n, minimum=1)
    output_padding = _check_params("output_padding", output_padding, n, minimum=0)
    check(isinstance(transposed, bool), lambda: f"convolution expects transposed as a bool, got {transposed!r}", TypeError)
    check(isinstance(groups, int) and groups >= 1, lambda: f"convolution expects groups >= 1, got {groups!r}", RuntimeError)
    wshape, ashape = list(weight.shape), list(a.shape)
    kernel = weight.shape[2:]
    if transposed:
        check(weight.shape[0] == a.shape[1], lambda: f"convolution (transposed): weight of shape {wshape} expects {weight.shape[0]} input channels, got input of shape {ashape}", RuntimeError)
        check(weight.shape[0] % groups == 0, lambda: f"convolution (transposed): weight of shape {wshape} has {weight.shape[0]} input channels, not divisible by groups={groups}", RuntimeError)
        check(all(op < max(s, d) for op, s, d in zip(output_padding, stride, dilation)), lambda: f"convolution: output_padding {output_padding} must be smaller than either stride {stride} or dilation {dilation}", RuntimeError)
        out_channels = weight.shape[1] * groups
        spatial = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in zip(a.shape[2:], stride, padding, dilation, kernel, output_padding)]
    else:
        check(weight.shape[0] % groups == 0, lambda: f"convolution: weight of shape {wshape} has {weight.shape[0]} output channels, not divisible by groups={groups}", RuntimeError)
        check(a.shape[1] == weight.shape[1] * groups, lambda: f"convolution: weight of shape {wshape} with groups={groups} expects {weight.shape[1] * groups} input channels, got input of shape {ashape}", RuntimeError)
        check(all(op == 0 for op in output_padding), lambda: f"convolution expects output_padding 0 unless transposed, got {output_padding}", RuntimeError)
        padded = [i + 2 * p for i, p in zip(a.shape[2:], padding)]
        check(
            all(pi >= d * (k - 1) + 1 for pi, d, k in zip(padded, dilation, kernel)),
            lambda: f"convolution: padded input size {padded} is smaller than the dilated kernel size {[d * (k - 1) + 1 for d, k in zip(dilation, kernel)]} (input {ashape}, weight {wshape})",
            RuntimeError,
        )
        out_channels = weight.shape[0]
        spatial = [(pi - d * (k - 1) - 1) // s + 1 for pi, d, k, s in zip(padded, dilation, kernel, stride)]
    check(all(x > 0 for x in spatial), lambda: f"convolution: input of shape {ashape} and weight of shape {wshape} give an output size {spatial}, which is too small", RuntimeError)
    if bias is not None:
        check(isinstance(bias, TensorProxy), lambda: f"convolution expects bias as a tensor or None, got {type(bias).__name__}", TypeError)
        check(bias.shape == (out_channels,), lambda: f"convolution expects a bias of shape [{out_channels}], got {list(bias.shape)}", RuntimeError)
        check(bias.dtype == a.dtype, lambda: f"convolution expects a bias of dtype {a.dtype}, got {bias.dtype}", RuntimeError)
    requires_grad = a.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    return TensorProxy(like=a, shape=(a.shape[0], out_channels, *spatial), requires_grad=requires_grad)


convolution = make_prim(PrimIDs.CONVOLUTION, "convolution", meta=_convolution_meta)
