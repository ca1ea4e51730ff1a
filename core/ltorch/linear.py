"""Torch-language ops: the nn linear layers' functions (linear, bilinear)."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .helpers import broadcast_to, check, check_tensors, computation_dtype, is_tensor, reshape_if_needed, to_dtype, transpose_if_needed
from .matmul import matmul

__all__ = [
    "linear", "bilinear",
]


@torchsymbol(torch.nn.functional.linear)
def linear(input, weight, bias=None):
    """torch.nn.functional.linear: input @ weight.T + bias."""
    check_tensors("linear", input=input, weight=weight)
    check(weight.ndim in (1, 2), lambda: f"linear(): weight must be 1-D or 2-D, but got a {weight.ndim}-D weight of shape {list(weight.shape)}", RuntimeError)
    # torch runs 2-D and 3-D inputs with a bias through addmm, which needs a 2-D weight
    check(
        bias is None or weight.ndim == 2 or not is_tensor(input) or input.ndim not in (2, 3),
        lambda: f"linear(): mat2 must be a matrix, got 1-D tensor (a 1-D weight with a bias needs a 1-D or 4-D+ input, got {input.ndim}-D)",
        RuntimeError,
    )
    out = matmul(input, weight if weight.ndim == 1 else transpose_if_needed(weight, (1, 0)))
    if bias is None:
        return out
    check(is_tensor(bias), lambda: f"linear(): argument 'bias' must be Tensor, not {type(bias).__name__}", TypeError)
    check(bias.dtype == out.dtype, lambda: f"linear(): bias of dtype {bias.dtype} does not match the input's {out.dtype}", RuntimeError)
    bias = broadcast_to(bias, out.shape)
    compute = computation_dtype(out.dtype)
    return to_dtype(prims.add(to_dtype(out, compute), to_dtype(bias, compute)), out.dtype)


@torchsymbol(torch.nn.functional.bilinear)
def bilinear(input1, input2, weight, bias=None):
    """torch.nn.functional.bilinear: y[..., o] = input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    check_tensors("bilinear", input1=input1, input2=input2, weight=weight)
    check(
        input1.dtype == input2.dtype == weight.dtype and (bias is None or bias.dtype == weight.dtype),
        lambda: f"All tensors must have the same dtype, got input1: {input1.dtype}, input2: {input2.dtype}, weight: {weight.dtype}",
        RuntimeError,
    )
    check(weight.ndim == 3, lambda: f"bilinear(): weight must be three-dimensional, got a weight of size {list(weight.shape)}", RuntimeError)
    check(input1.ndim == input2.ndim, lambda: f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}", RuntimeError)
    for d in range(input1.ndim - 1):
        check(input1.shape[d] == input2.shape[d], lambda: f"bilinear(): input batch dimensions do not match at dim {d}: got {input1.shape[d]} and {input2.shape[d]}", RuntimeError)
    o, i, j = weight.shape
    check(input1.shape[-1] == i, lambda: f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {i}", RuntimeError)
    check(input2.shape[-1] == j, lambda: f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {j}", RuntimeError)
    if bias is not None:
        check(bias.shape == (o,), lambda: f"bilinear(): bias size does not match weight size: got {bias.shape[-1] if bias.ndim else 0} but expected {o}", RuntimeError)
    batch = tuple(input1.shape[:-1])
    b = math.prod(batch)
    # (b, i) @ (i, o*j), then per row: (o, j) @ (j, 1)
    left = prims.matmul(reshape_if_needed(input1, (b, i)), reshape_if_needed(transpose_if_needed(weight, (1, 0, 2)), (i, o * j)))
    y = prims.matmul(reshape_if_needed(left, (b, o, j)), reshape_if_needed(input2, (b, j, 1)))
    y = reshape_if_needed(y, (*batch, o))
    if bias is None:
        return y
    compute = computation_dtype(y.dtype)
    return to_dtype(prims.add(to_dtype(y, compute), to_dtype(broadcast_to(bias, y.shape), compute)), y.dtype)
