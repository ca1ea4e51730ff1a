"""Torch-language ops: histograms (torch.histc, which Mixture-of-Experts layers use to count tokens per expert)."""
from __future__ import annotations

import math

import torch

from .base import torchsymbol
from .elementwise_binary import add, div, eq, ge, le, logical_and, mul, sub, where
from .elementwise_unary import trunc
from .factories import arange, full, zeros
from .helpers import check, is_tensor, to_dtype, torch_type_name
from .reductions import amax, amin, sum
from .shape import reshape, unsqueeze
from ..symbol import Tags

__all__ = ["histc"]


# counts carry no gradient (eager: histc is not differentiable, its result never requires grad)
@torchsymbol(torch.histc, torch.Tensor.histc, tags=(Tags.STOPS_GRADIENT,))
def histc(input, bins=100, min=0, max=0, *, out=None):
    """Counts of `input`'s values in `bins` equal bins over [min, max]; values outside are not counted.

    When min == max the range is the data's own (one wider on each side where it is one
    value), as torch computes it: from tensor values, in the trace. Each value's bin is
    torch's (value - min) * bins / (max - min), truncated, in the input's dtype; the maximum
    falls in the last bin. torch raises where a data-derived range is not finite (NaN or
    infinite values); the decomposition then counts nothing (the torch executor runs
    torch.histc itself, and raises).
    """
    check(is_tensor(input), lambda: f"histc(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(input.dtype.is_floating_point, lambda: f"\"histogram_cpu\" not implemented for '{torch_type_name(input.dtype)}'", NotImplementedError)
    check(bins > 0, lambda: f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0", RuntimeError)
    check(min <= max, lambda: "torch.histc: max must be larger than min", RuntimeError)
    check(math.isfinite(min) and math.isfinite(max), lambda: f"torch.histc: range of [{min}, {max}] is not finite", RuntimeError)
    dtype, device = input.dtype, input.device
    if input.numel() == 0:
        return zeros(bins, dtype=dtype, device=device)
    values = reshape(input, (-1,))
    if min == max:
        low, high = amin(values), amax(values)
        one_value = eq(low, high)
        low, high = where(one_value, sub(low, 1), low), where(one_value, add(high, 1), high)
    else:
        # the edges are values of the input's dtype, as torch's kernel holds them
        low, high = full((), min, dtype=dtype, device=device), full((), max, dtype=dtype, device=device)
    inside = logical_and(ge(values, low), le(values, high))  # NaN is never inside
    position = to_dtype(trunc(div(mul(sub(values, low), bins), sub(high, low))), torch.int64)
    position = where(eq(position, bins), bins - 1, position)
    hits = logical_and(eq(unsqueeze(position, 0), unsqueeze(arange(bins, device=device), 1)), unsqueeze(inside, 0))
    return to_dtype(sum(hits, 1), dtype)
