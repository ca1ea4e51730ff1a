"""Torch-language ops: convolution (conv1d-3d, conv_transpose1d-3d, torch.convolution) and its im2col pair, unfold and fold."""
from __future__ import annotations

import torch

from .. import prims
from .base import torchsymbol
from .helpers import check, computation_dtype, is_tensor, to_dtype
from .windows import batched, sizes_text, unbatch, windows
from ..proxies import TensorProxy
from ..symbolic import guarded_int

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "im2col", "col2im",
]


def _guarded(values) -> tuple:
    """Sizes a convolution's meta computes with, symbolic ones read and guarded."""
    return tuple(guarded_int(v) for v in values)


def _ntuple(name: str, arg: str, value, n: int) -> tuple[int, ...]:
    """An int or a sequence of 1 or n ints, as n ints (torch's expand_param_if_needed)."""
    value = [guarded_int(v) for v in value] if isinstance(value, (tuple, list)) else guarded_int(value)  # sizes the meta computes with
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    check(
        isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
        lambda: f"{name}(): argument '{arg}' must be an int or a tuple of ints, not {value!r}",
        TypeError,
    )
    check(
        len(value) in (1, n),
        lambda: f"{name}(): expected {arg} to be a single integer value or a list of {n} values to match the convolution dimensions, but got {arg}={list(value)}",
        RuntimeError,
    )
    return tuple(value) * n if len(value) == 1 else tuple(value)


# --- convolution -------------------------------------------------------------------------


def _check_conv_operands(name: str, x, weight, bias, n: int) -> None:
    check(is_tensor(weight), lambda: f"{name}(): argument 'weight' must be Tensor, not {type(weight).__name__}", TypeError)
    check(weight.ndim == n + 2, lambda: f"{name}(): expected a {n + 2}-D weight, got a weight of size {list(weight.shape)}", RuntimeError)
    check(x.dtype == weight.dtype, lambda: f"{name}(): Input type ({x.dtype}) and weight type ({weight.dtype}) should be the same", RuntimeError)
    check(x.dtype != torch.bool, lambda: f"{name}(): not implemented for 'Bool'", NotImplementedError)
    if bias is not None:
        check(is_tensor(bias), lambda: f"{name}(): argument 'bias' must be Tensor, not {type(bias).__name__}", TypeError)
        check(bias.dtype == x.dtype, lambda: f"{name}(): Input type ({x.dtype}) and bias type ({bias.dtype}) should be the same", RuntimeError)


def _check_conv_params(stride, dilation, groups) -> None:
    check(all(s > 0 for s in stride), lambda: f"non-positive stride is not supported, got stride={list(stride)}", RuntimeError)
    check(all(d > 0 for d in dilation), lambda: f"dilation should be greater than zero, but got {list(dilation)}", RuntimeError)
    groups = guarded_int(groups)
    check(isinstance(groups, int) and groups > 0, lambda: f"non-positive groups is not supported, got groups={groups}", RuntimeError)


def _check_groups_divide(weight, groups) -> list:
    """The weight's first dimension is a multiple of `groups` (torch's message); its shape as a list."""
    wshape = list(weight.shape)
    check(
        weight.shape[0] % groups == 0,
        lambda: f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of size {wshape} instead",
        RuntimeError,
    )
    return wshape


def _convnd(name: str, n: int, input, weight, bias, stride, padding, dilation, groups) -> TensorProxy:
    x, added = batched(name, input, n)
    _check_conv_operands(name, x, weight, bias, n)
    stride = _ntuple(name, "stride", stride, n)
    dilation = _ntuple(name, "dilation", dilation, n)
    _check_conv_params(stride, dilation, groups)
    kernel = weight.shape[2:]
    if isinstance(padding, str):
        check(padding in ("same", "valid"), lambda: f"Invalid padding string: '{padding}'", RuntimeError)
        if padding == "valid":
            padding = (0,) * n
        else:
            check(all(s == 1 for s in stride), lambda: "padding='same' is not supported for strided convolutions", RuntimeError)
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            padding = tuple(t // 2 for t in total)
            # an odd total puts the extra element on the right, as torch does
            extra = [t - 2 * p for t, p in zip(total, padding)]
            if any(extra):
                x = prims.pad(x, 0, [(0, 0, 0), (0, 0, 0)] + [(0, e, 0) for e in extra])
    else:
        padding = _ntuple(name, "padding", padding, n)
        check(all(p >= 0 for p in padding), lambda: f"negative padding is not supported, got padding={list(padding)}", RuntimeError)
    wshape = _check_groups_divide(weight, groups)
    check(
        x.shape[1] == weight.shape[1] * groups,
        lambda: f"Given groups={groups}, weight of size {wshape}, expected input{list(x.shape)} to have {weight.shape[1] * groups} channels, but got {x.shape[1]} channels instead",
        RuntimeError,
    )
    if bias is not None:
        check(
            bias.shape == (weight.shape[0],),
            lambda: f"Given weight of size {wshape}, expected bias to be 1-dimensional with {weight.shape[0]} elements, but got bias of size {list(bias.shape)} instead",
            RuntimeError,
        )
    padded = [i + 2 * p for i, p in zip(x.shape[2:], padding)]
    dilated = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    check(
        all(p >= k for p, k in zip(padded, dilated)),
        lambda: f"Calculated padded input size per channel: ({sizes_text(padded)}). Kernel size: ({sizes_text(dilated)}). Kernel size can't be greater than actual input size",
        RuntimeError,
    )
    stride, padding, dilation, groups = _guarded(stride), _guarded(padding), _guarded(dilation), guarded_int(groups)
    out = prims.convolution(x, weight, bias, stride, padding, dilation, False, (0,) * n, groups)
    return unbatch(out, added)


@torchsymbol(torch.nn.functional.conv1d)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d (padding: int, tuple, 'same' or 'valid')."""
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(torch.nn.functional.conv2d)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d (padding: int, tuple, 'same' or 'valid')."""
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(torch.nn.functional.conv3d)
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d (padding: int, tuple, 'same' or 'valid')."""
    return _convnd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transposend(name: str, n: int, input, weight, bias, stride, padding, output_padding, groups, dilation) -> TensorProxy:
    x, added = batched(name, input, n)
    _check_conv_operands(name, x, weight, bias, n)
    stride = _ntuple(name, "stride", stride, n)
    dilation = _ntuple(name, "dilation", dilation, n)
    check(not isinstance(padding, str), lambda: f"{name}(): argument 'padding' must be tuple of ints, not str", TypeError)
    padding = _ntuple(name, "padding", padding, n)
    output_padding = _ntuple(name, "output_padding", output_padding, n)
    _check_conv_params(stride, dilation, groups)
    check(all(p >= 0 for p in padding), lambda: f"negative padding is not supported, got padding={list(padding)}", RuntimeError)
    check(all(p >= 0 for p in output_padding), lambda: f"negative output_padding is not supported, got output_padding={list(output_padding)}", RuntimeError)
    check(
        all(op < max(s, d) for op, s, d in zip(output_padding, stride, dilation)),
        lambda: f"output padding must be smaller than either stride or dilation, but got output_padding={list(output_padding)}, stride={list(stride)}, dilation={list(dilation)}",
        RuntimeError,
    )
    wshape = _check_groups_divide(weight, groups)
    check(
        x.shape[1] == weight.shape[0],
        lambda: f"Given transposed=1, weight of size {wshape}, expected input{list(x.shape)} to have {weight.shape[0]} channels, but got {x.shape[1]} channels instead",
        RuntimeError,
    )
    out_channels = weight.shape[1] * groups
    if bias is not None:
        check(
            bias.shape == (out_channels,),
            lambda: f"Given transposed=1, weight of size {wshape}, expected bias to be 1-dimensional with {out_channels} elements, but got bias of size {list(bias.shape)} instead",
            RuntimeError,
        )
    sizes = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in zip(x.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding)]
    check(
        all(s > 0 for s in sizes),
        lambda: f"Given input size per channel: ({sizes_text(x.shape[2:])}). Calculated output size per channel: ({sizes_text(sizes)}). Output size is too small",
        RuntimeError,
    )
    output_padding = _guarded(output_padding)
    stride, padding, dilation, groups = _guarded(stride), _guarded(padding), _guarded(dilation), guarded_int(groups)
    out = prims.convolution(x, weight, bias, stride, padding, dilation, True, output_padding, groups)
    return unbatch(out, added)


@torchsymbol(torch.nn.functional.conv_transpose1d)
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.nn.functional.conv_transpose1d."""
    return _conv_transposend("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@torchsymbol(torch.nn.functional.conv_transpose2d)
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.nn.functional.conv_transpose2d."""
    return _conv_transposend("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups, dilation)


@torchsymbol(torch.nn.functional.conv_transpose3d)
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.nn.functional.conv_transpose3d."""
    return _conv_transposend("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups, dilation)


@torchsymbol(torch.convolution)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch.convolution: every parameter explicit (sequences of one value per spatial dimension)."""
    check(is_tensor(weight), lambda: f"convolution(): argument 'weight' must be Tensor, not {type(weight).__name__}", TypeError)
    n = weight.ndim - 2
    check(
        is_tensor(input) and input.ndim == weight.ndim,
        lambda: f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight {list(weight.shape)}, but got {getattr(input, 'ndim', 0)}-dimensional input of size {list(getattr(input, 'shape', ()))} instead",
        RuntimeError,
    )
    if transposed:
        return _conv_transposend("convolution", n, input, weight, bias, stride, padding, output_padding, groups, dilation)
    check(all(p == 0 for p in _ntuple("convolution", "output_padding", output_padding, n)), lambda: "convolution(): output_padding must be 0 unless transposed", RuntimeError)
    return _convnd("convolution", n, input, weight, bias, stride, padding, dilation, groups)


# --- pooling -----------------------------------------------------------------------------


# --- unfold (im2col) and fold (col2im) ---------------------------------------------------


def _block_params(name: str, kernel_size, dilation, padding, stride):
    def pair(arg, value):
        if isinstance(value, int) and not isinstance(value, bool):
            return (value, value)
        check(isinstance(value, (tuple, list)), lambda: f"{name}(): {arg} must be an int or a tuple of ints, got {value!r}", TypeError)
        check(len(value) == 2, lambda: f"It is expected {arg} equals to 2, but got size {len(value)}", RuntimeError)
        return tuple(value)

    kernel, dilation, padding, stride = (pair(a, v) for a, v in (("kernel_size", kernel_size), ("dilation", dilation), ("padding", padding), ("stride", stride)))
    check(all(k > 0 for k in kernel), lambda: f"kernel size should be greater than zero, but got kernel_size={kernel}", RuntimeError)
    check(all(d > 0 for d in dilation), lambda: f"dilation should be greater than zero, but got dilation={dilation}", RuntimeError)
    check(all(p >= 0 for p in padding), lambda: f"padding should be non-negative, but got padding={padding}", RuntimeError)
    check(all(s > 0 for s in stride), lambda: f"stride should be greater than zero, but got stride={stride}", RuntimeError)
    return kernel, dilation, padding, stride


def _blocks(spatial, kernel, dilation, padding, stride) -> list[int]:
    return [(L + 2 * p - d * (k - 1) - 1) // s + 1 for L, k, d, p, s in zip(spatial, kernel, dilation, padding, stride)]


@torchsymbol(torch.nn.functional.unfold)
def im2col(input, kernel_size, dilation=1, padding=0, stride=1):
    """torch.nn.functional.unfold (im2col): (N, C, H, W) -> (N, C * kh * kw, blocks)."""
    check(is_tensor(input), lambda: f"unfold(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(input.ndim in (3, 4), lambda: f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)", RuntimeError)
    kernel, dilation, padding, stride = _block_params("unfold", kernel_size, dilation, padding, stride)
    x, added = (prims.reshape(input, (1, *input.shape)), True) if input.ndim == 3 else (input, False)
    sizes = _blocks(x.shape[2:], kernel, dilation, padding, stride)
    check(
        all(b > 0 for b in sizes),
        lambda: f"Given input with spatial size {tuple(x.shape[2:])}, kernel_size={kernel}, dilation={dilation}, padding={padding}, calculated shape of the array of sliding blocks as {tuple(sizes)}, but its components must be at least one.",
        RuntimeError,
    )
    w = windows(x, kernel, stride, padding, dilation, sizes, False if x.dtype == torch.bool else 0)
    n, c = x.shape[:2]
    w = prims.transpose(w, (0, 1, 4, 5, 2, 3))
    return unbatch(prims.reshape(w, (n, c * kernel[0] * kernel[1], sizes[0] * sizes[1])), added)


@torchsymbol(torch.nn.functional.fold)
def col2im(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """torch.nn.functional.fold (col2im): sums the blocks back into (N, C, *output_size)."""
    check(is_tensor(input), lambda: f"fold(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(
        input.ndim in (2, 3) and all(s > 0 for s in input.shape[-2:]),
        lambda: f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {list(input.shape)}",
        RuntimeError,
    )
    out_size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    check(len(out_size) == 2, lambda: f"It is expected output_size equals to 2, but got size {len(out_size)}", RuntimeError)
    kernel, dilation, padding, stride = _block_params("fold", kernel_size, dilation, padding, stride)
    x, added = (prims.reshape(input, (1, *input.shape)), True) if input.ndim == 2 else (input, False)
    k = kernel[0] * kernel[1]
    check(
        x.shape[1] % k == 0,
        lambda: f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={x.shape[1]} and kernel_size={kernel}.",
        RuntimeError,
    )
    blocks = _blocks(out_size, kernel, dilation, padding, stride)
    check(
        all(b > 0 for b in blocks) and x.shape[2] == blocks[0] * blocks[1],
        lambda: f"Given output_size={out_size}, kernel_size={kernel}, dilation={dilation}, padding={padding}, stride={stride}, expected size of input's dimension 2 to match the calculated number of sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)={x.shape[2]}.",
        RuntimeError,
    )
    # Each column entry adds into one output position (none where it falls in the padding):
    # a scatter-add in the order eager's loop adds, over the output with its padding, which is
    # then cut off. (A transposed convolution with an identity weight, as before, multiplied
    # every entry by the weight's zeros too, and 0 * inf made whole outputs NaN.)
    dtype = x.dtype
    compute = torch.float32 if dtype == torch.bool else computation_dtype(dtype)
    n, c = x.shape[0], x.shape[1] // k
    (kh, kw), (bh, bw) = kernel, blocks
    padded = [o + 2 * p for o, p in zip(out_size, padding)]
    grid = (kh, kw, bh, bw)

    def along(size: int, dim: int, step: int) -> TensorProxy:
        steps = prims.iota(size, start=0, step=step, device=x.device, dtype=torch.int64)
        return prims.broadcast_in_dim(steps, grid, [dim])

    row = prims.add(along(kh, 0, dilation[0]), along(bh, 2, stride[0]))
    col = prims.add(along(kw, 1, dilation[1]), along(bw, 3, stride[1]))
    flat = prims.reshape(prims.add(prims.mul(row, padded[1]), col), (k * bh * bw,))
    index = prims.broadcast_in_dim(flat, (n, c, k * bh * bw), [2])
    cols = prims.reshape(to_dtype(x, compute), (n, c, k * bh * bw))
    zeros = prims.full((n, c, padded[0] * padded[1]), 0, device=x.device, dtype=compute)
    out = prims.reshape(prims.scatter_add(zeros, index, cols, 2), (n, c, *padded))
    out = prims.slice(out, (0, 0, padding[0], padding[1]), (n, c, padding[0] + out_size[0], padding[1] + out_size[1]), (1, 1, 1, 1))
    out = prims.ne(out, 0.0) if dtype == torch.bool else to_dtype(out, dtype)
    return unbatch(out, added)
