"""Torch-language ops: pooling over sliding windows (max, average) and adaptive pooling."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .reductions import mean
from .helpers import check, computation_dtype, count_operand, is_tensor, to_dtype
from .windows import batched, sizes_text, unbatch, window_counts, windows
from ..proxies import TensorProxy
from ..symbolic import SymInt, guarded_int

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
]


def _adaptive_setup(name: str, n: int, input, output_size):
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(input.ndim in (n + 1, n + 2), lambda: f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got {list(input.shape)}", RuntimeError)
    for d in range(input.ndim - n, input.ndim):
        check(
            input.shape[d] > 0,
            lambda: f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {list(input.shape)} with dimension {d} being empty",
            RuntimeError,
        )
    if isinstance(output_size, int) or output_size is None:
        output_size = (output_size,) * n
    check(isinstance(output_size, (tuple, list)) and len(output_size) == n, lambda: f"{name}: output_size must be {n}", RuntimeError)
    spatial = input.shape[input.ndim - n :]
    sizes = tuple(guarded_int(L if o is None else o) for o, L in zip(output_size, spatial))
    check(all(isinstance(o, int) and o >= 0 for o in sizes), lambda: f"{name}: elements of output_size must be greater than or equal to 0 but received {list(output_size)}", RuntimeError)
    return sizes


def is_global(sizes: tuple[int, ...]) -> bool:
    """Whether adaptive pooling to `sizes` pools each plane to a single value."""
    return all(size == 1 for size in sizes)


def _bounds(L: int, out: int, device) -> tuple[TensorProxy, TensorProxy]:
    """(start, end) of every output cell, as int64 tensors of length `out`."""
    i = prims.iota(out, start=0, step=1, device=device, dtype=torch.int64)
    start = prims.div(prims.mul(i, L), out, rounding_mode="floor")
    end = prims.div(prims.add(prims.mul(i, L), L + out - 1), out, rounding_mode="floor")
    return start, end


def _cell_positions(L: int, out: int, device) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """(out, widest) input positions of every cell, padded to the widest cell by repeating its last
    position; with the (out, widest) mask of real positions and the cell sizes."""
    if type(L) is SymInt and out:
        # a symbolic length: a bound, not the exact widest cell (reading it would guard L, a
        # compile per length): a cell spans fewer than L/out + 2 positions, so at most
        # L // out + 2; the positions past a cell's end repeat its last and are masked out
        widest = L // out + 2
    else:
        widest = max(-(-((i + 1) * L) // out) - (i * L) // out for i in range(out)) if out else 1
    start, end = _bounds(L, out, device)
    k = prims.broadcast_in_dim(prims.iota(widest, start=0, step=1, device=device, dtype=torch.int64), (out, widest), [1])
    first = prims.add(prims.broadcast_in_dim(start, (out, widest), [0]), k)
    last = prims.broadcast_in_dim(prims.sub(end, 1), (out, widest), [0])
    return prims.minimum(first, last), prims.le(first, last), prims.sub(end, start)


def _cells(x: TensorProxy, dim: int, out: int, positions: TensorProxy | None = None) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """Every cell of `dim` gathered into a new dim after it (see _cell_positions), the mask, the sizes."""
    real = counts = None
    if positions is None:
        positions, real, counts = _cell_positions(x.shape[dim], out, x.device)
    widest = positions.shape[1]
    gathered = prims.take(x, prims.reshape(positions, (out * widest,)), dim)
    shape = list(x.shape)
    shape[dim : dim + 1] = [out, widest]
    return prims.reshape(gathered, shape), real, counts


def _adaptive_avg_dim(x: TensorProxy, dim: int, out: int) -> TensorProxy:
    """Average `dim` of `x` (in its computation dtype) down to `out` cells."""
    L = x.shape[dim]
    if out == L:
        return x
    if out > 0 and L % out == 0:
        # equal cells: a reshape and a sum
        shape = list(x.shape)
        shape[dim : dim + 1] = [out, L // out]
        # (a global pool's L // 1 is a symbolic size: divided by as it is, not read and guarded)
        return prims.div(prims.sum(prims.reshape(x, shape), [dim + 1]), count_operand(L // out))
    cells, real, counts = _cells(x, dim, out)
    # a select, not a multiply by the mask: a NaN must stay inside its own cells
    dims = [dim, dim + 1]
    real = prims.broadcast_in_dim(real, cells.shape, dims)
    total = prims.sum(prims.where(real, cells, 0.0), [dim + 1])
    counts = prims.broadcast_in_dim(prims.convert_element_type(counts, x.dtype), total.shape, [dim])
    return prims.div(total, counts)


def _adaptive_avg_pool(name: str, n: int, input, output_size) -> TensorProxy:
    sizes = _adaptive_setup(name, n, input, output_size)
    check(input.dtype.is_floating_point, lambda: f"{name}(): not implemented for '{input.dtype}'", NotImplementedError)
    if is_global(sizes):
        # eager computes a global pool as the mean over the pooled dims (its kernel and its
        # gradient: an expand and a divide, not the pooling backward kernel)
        return mean(input, tuple(range(-n, 0)), keepdim=True)
    x = to_dtype(input, computation_dtype(input.dtype))
    for i, out in enumerate(sizes):
        x = _adaptive_avg_dim(x, input.ndim - n + i, out)
    return to_dtype(x, input.dtype)


@torchsymbol(torch.nn.functional.adaptive_avg_pool1d)
def adaptive_avg_pool1d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool1d."""
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


@torchsymbol(torch.nn.functional.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool2d (None in output_size keeps that input size)."""
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)


@torchsymbol(torch.nn.functional.adaptive_avg_pool3d)
def adaptive_avg_pool3d(input, output_size):
    """torch.nn.functional.adaptive_avg_pool3d (None in output_size keeps that input size)."""
    return _adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_max_with_indices(x: TensorProxy, n: int, sizes) -> tuple[TensorProxy, TensorProxy]:
    """Values and flat spatial positions of each cell's maximum (the first maximum, or a NaN, wins)."""
    lead = x.ndim - n
    spatial = x.shape[lead:]
    positions = [_cell_positions(L, out, x.device)[0] for L, out in zip(spatial, sizes)]
    widths = [p.shape[1] for p in positions]
    cells = x
    for i, p in enumerate(positions):
        cells = _cells(cells, lead + 2 * i, sizes[i], p)[0]
    # (*lead, o0, w0, o1, w1, ...) -> (*lead, o0, o1, ..., w0 * w1 * ...)
    order = [*range(lead), *(lead + 2 * i for i in range(n)), *(lead + 2 * i + 1 for i in range(n))]
    k = math.prod(widths)
    cells = prims.reshape(prims.transpose(cells, order), (*x.shape[:lead], *sizes, k))
    # the flat position of every cell element, laid out the same way: sum of position * stride
    grid = (*sizes, *widths)
    flat, stride = None, 1
    for i in reversed(range(n)):
        term = prims.broadcast_in_dim(prims.mul(positions[i], stride), grid, [i, n + i])
        flat = term if flat is None else prims.add(flat, term)
        stride *= spatial[i]
    flat = prims.broadcast_in_dim(prims.reshape(flat, (*sizes, k)), cells.shape, list(range(lead, cells.ndim)))
    best = prims.reshape(prims.argmax(cells, cells.ndim - 1), (*cells.shape[:-1], 1))
    out_shape = cells.shape[:-1]
    values = prims.reshape(prims.take_along_axis(cells, best, cells.ndim - 1), out_shape)
    return values, prims.reshape(prims.take_along_axis(flat, best, cells.ndim - 1), out_shape)


def _adaptive_max_pool(name: str, n: int, input, output_size, return_indices):
    sizes = _adaptive_setup(name, n, input, output_size)
    check(input.dtype.is_floating_point, lambda: f"{name}(): not implemented for '{input.dtype}'", NotImplementedError)
    # values read at the indices even where they are not returned, so their gradient reaches the
    # first maximum of each cell only, as eager's (a max per dimension would split it among ties)
    values, indices = _adaptive_max_with_indices(input, n, sizes)
    return (values, indices) if return_indices else values


@torchsymbol(torch.nn.functional.adaptive_max_pool1d)
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool1d."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, return_indices)


@torchsymbol(torch.nn.functional.adaptive_max_pool2d)
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool2d."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, return_indices)


@torchsymbol(torch.nn.functional.adaptive_max_pool3d)
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """torch.nn.functional.adaptive_max_pool3d."""
    return _adaptive_max_pool("adaptive_max_pool3d", 3, input, output_size, return_indices)


@torchsymbol(torch.nn.functional.adaptive_max_pool1d_with_indices)
def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool1d(..., return_indices=True): values and flat positions of the maxima."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, True)


@torchsymbol(torch.nn.functional.adaptive_max_pool2d_with_indices)
def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool2d(..., return_indices=True): values and flat positions of the maxima."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, True)


@torchsymbol(torch.nn.functional.adaptive_max_pool3d_with_indices)
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool3d(..., return_indices=True): values and flat positions of the maxima."""
    return _adaptive_max_pool("adaptive_max_pool3d", 3, input, output_size, True)


def _pool_param(name: str, arg: str, value, n: int) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    check(
        isinstance(value, (tuple, list)) and len(value) in (1, n) and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
        lambda: f"{name}: {arg} must either be a single int, or a tuple of {n} ints, got {value!r}",
        RuntimeError,
    )
    return tuple(value) * n if len(value) == 1 else tuple(value)


def _pool_output_size(L: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: the last window must start inside the input or left padding."""
    out = (L + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= L + p:
        out -= 1
    return out


def _pool_setup(name: str, n: int, input, kernel_size, stride, padding, dilation, ceil_mode, *, max_pool: bool):
    """Checks shared by the pools; returns (batched input, added batch?, kernel, stride, padding, dilation, output sizes)."""
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(
        input.ndim in (n + 1, n + 2) and all(s > 0 for s in input.shape[-n - 1 :]),
        lambda: f"{name}: Expected {n + 1}D or {n + 2}D (batch mode) tensor with optional 0 dim batch size for input, but got:{list(input.shape)}",
        RuntimeError,
    )
    kernel = _pool_param(name, "kernel_size", kernel_size, n)
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else _pool_param(name, "stride", stride, n)
    padding = _pool_param(name, "padding", padding, n)
    dilation = _pool_param(name, "dilation", dilation, n)
    check(all(s != 0 for s in stride), lambda: "stride should not be zero", RuntimeError)
    check(all(k > 0 for k in kernel), lambda: f"kernel_size must be greater than zero, but got {list(kernel)}", RuntimeError)
    check(all(s > 0 for s in stride), lambda: f"stride should be greater than zero, but got {list(stride)}", RuntimeError)
    check(all(d > 0 for d in dilation), lambda: f"dilation should be greater than zero, but got {list(dilation)}", RuntimeError)
    for k, p, d in zip(kernel, padding, dilation):
        check(p >= 0, lambda: f"{name}: pad must be non-negative, but got pad={p}", RuntimeError)
        if max_pool:
            check(p <= (d * (k - 1) + 1) // 2, lambda: f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and dilation={d}", RuntimeError)
        else:
            check(p <= k // 2, lambda: f"pad should be at most half of kernel size, but got pad={p} and kernel_size={k}", RuntimeError)
    x, added = batched(name, input, n)
    sizes = [_pool_output_size(L, k, s, p, d, ceil_mode) for L, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)]
    check(
        all(o > 0 for o in sizes),
        lambda: f"Given input size: ({sizes_text(x.shape[1:])}). Calculated output size: ({sizes_text([x.shape[1], *sizes])}). Output size is too small",
        RuntimeError,
    )
    return x, added, kernel, stride, padding, dilation, sizes


def _lowest(dtype: torch.dtype):
    return -math.inf if dtype.is_floating_point else torch.iinfo(dtype).min


def _max_pool(name: str, n: int, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, added, kernel, stride, padding, dilation, sizes = _pool_setup(name, n, input, kernel_size, stride, padding, dilation, ceil_mode, max_pool=True)
    check(x.dtype != torch.bool, lambda: f"{name}(): not implemented for 'Bool'", NotImplementedError)
    w = windows(x, kernel, stride, padding, dilation, sizes, _lowest(x.dtype))
    # values read at the indices even where they are not returned: their gradient reaches the
    # selected element only, as eager's (an amax would split it among a window's ties)
    # the flat spatial position of every window element, windowed exactly like the values
    spatial = x.shape[2:]
    positions = prims.iota(math.prod(spatial), start=0, step=1, device=x.device, dtype=torch.int64)
    positions = windows(prims.reshape(positions, (1, 1, *spatial)), kernel, stride, padding, dilation, sizes, -1)
    k = math.prod(kernel)
    flat = prims.reshape(w, (*w.shape[: 2 + n], k))
    # argmax keeps the first maximum (and a NaN), as torch's kernels do
    best = prims.reshape(prims.argmax(flat, 2 + n), (*flat.shape[:-1], 1))
    positions = prims.reshape(positions, (1, 1, *sizes, k))
    values = prims.take_along_axis(flat, best, 2 + n)
    if any(padding) and (return_indices or x.requires_grad):
        # a window whose elements are all -inf ties with its padding, and argmax takes a padding
        # position (-1) where eager's kernel takes the window's first element inside the input.
        # Only the index and the gradient show it (the value is -inf either way), so a forward
        # that returns neither skips these ops (a third slower through the prims on CPU)
        # (per window position, not per batch and channel: small)
        first_inside = prims.reshape(prims.argmax(prims.convert_element_type(prims.ge(positions, 0), torch.int32), 2 + n), (1, 1, *sizes, 1))
        starts_in_padding = prims.broadcast_in_dim(prims.ne(first_inside, 0), best.shape, list(range(best.ndim)))
        first_inside = prims.broadcast_in_dim(first_inside, best.shape, list(range(best.ndim)))
        tied_with_padding = prims.logical_and(prims.eq(values, _lowest(x.dtype)), starts_in_padding)
        best = prims.where(tied_with_padding, first_inside, best)
        values = prims.take_along_axis(flat, best, 2 + n)  # the same -inf, its gradient to that element
    positions = prims.broadcast_in_dim(positions, flat.shape, list(range(flat.ndim)))
    indices = prims.take_along_axis(positions, best, 2 + n)
    shape = (*flat.shape[:-1],)
    values = unbatch(prims.reshape(values, shape), added)
    return (values, unbatch(prims.reshape(indices, shape), added)) if return_indices else values


@torchsymbol(torch.nn.functional.max_pool1d, torch.max_pool1d)
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool1d."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@torchsymbol(torch.nn.functional.max_pool2d, torch.max_pool2d)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool2d."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@torchsymbol(torch.nn.functional.max_pool3d, torch.max_pool3d)
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool3d."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_divisor(x: TensorProxy, kernel, stride, padding, sizes, count_include_pad: bool, ceil_mode: bool):
    """How many elements each window averages: a number when all agree, else an (*out) tensor."""
    number, tensor = 1, None
    for i, (L, k, s, p, out) in enumerate(zip(x.shape[2:], kernel, stride, padding, sizes)):
        counts = window_counts(L, out, k, s, p, count_include_pad, ceil_mode, x.device)
        if is_tensor(counts):
            counts = prims.broadcast_in_dim(counts, sizes, [i])
            tensor = counts if tensor is None else prims.mul(tensor, counts)
        else:
            number *= counts
    return number if tensor is None else (tensor if number == 1 else prims.mul(tensor, number))


def _avg_pool(name: str, n: int, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) -> TensorProxy:
    x, added, kernel, stride, padding, _, sizes = _pool_setup(name, n, input, kernel_size, stride, padding, 1, ceil_mode, max_pool=False)
    check(x.dtype != torch.bool, lambda: f"{name}(): not implemented for 'Bool'", NotImplementedError)
    check(divisor_override is None or divisor_override != 0, lambda: "divisor must be not zero", RuntimeError)
    dtype = x.dtype
    compute = computation_dtype(dtype)
    w = windows(to_dtype(x, compute), kernel, stride, padding, (1,) * n, sizes, 0)
    total = prims.sum(w, list(range(2 + n, 2 + 2 * n)))
    divisor = divisor_override if divisor_override is not None else _avg_divisor(x, kernel, stride, padding, sizes, count_include_pad, ceil_mode)
    if is_tensor(divisor):
        divisor = prims.broadcast_in_dim(to_dtype(divisor, compute), total.shape, list(range(2, 2 + n)))
    # integer averages truncate toward zero, as torch's integer kernels do
    out = prims.div(total, divisor if is_tensor(divisor) else to_dtype(divisor, compute), **({} if compute.is_floating_point else {"rounding_mode": "trunc"}))
    return unbatch(to_dtype(out, dtype), added)


@torchsymbol(torch.nn.functional.max_pool1d_with_indices)
def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """max_pool1d(..., return_indices=True): values and flat positions of the maxima."""
    return _max_pool("max_pool1d_with_indices", 1, input, kernel_size, stride, padding, dilation, ceil_mode, True)


@torchsymbol(torch.nn.functional.max_pool2d_with_indices)
def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """max_pool2d(..., return_indices=True): values and flat positions of the maxima."""
    return _max_pool("max_pool2d_with_indices", 2, input, kernel_size, stride, padding, dilation, ceil_mode, True)


@torchsymbol(torch.nn.functional.max_pool3d_with_indices)
def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """max_pool3d(..., return_indices=True): values and flat positions of the maxima."""
    return _max_pool("max_pool3d_with_indices", 3, input, kernel_size, stride, padding, dilation, ceil_mode, True)


@torchsymbol(torch.nn.functional.avg_pool1d)
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """torch.nn.functional.avg_pool1d."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@torchsymbol(torch.nn.functional.avg_pool2d)
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """torch.nn.functional.avg_pool2d."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@torchsymbol(torch.nn.functional.avg_pool3d)
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """torch.nn.functional.avg_pool3d."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
