"""Whether two plans of a program computed the same results (squall.runtime.tiers' judge).

A fused kernel rounds and sums in another order than eager, so results are compared within a
tolerance of their largest magnitude, NaNs and infinities where the torch plan has them; the
gradients of the inputs a plan differentiated are compared after its outputs, looser, against
the largest of them all. A program drawing random numbers has only where its NaNs and
infinities are compared (a fused kernel may draw other numbers than torch's).
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..proxies import real_tensor

__all__ = ["results_differ", "outputs_differ", "largest_difference", "GRADIENT_LOOSER", "ROUNDING_CHANGE", "CONDITIONING_FACTOR",
           "rounding_change", "ill_conditioned"]


# a fused kernel rounds and sums in another order than eager, and example inputs have any
# scale: outputs agree when their largest difference is within this fraction of the largest
# magnitude (NaNs and infinities where eager has them); the half-precision dtypes get more
_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 2e-2}
_FLOAT_TOLERANCE = 1e-4


def _tolerance(t: torch.Tensor) -> float:
    """The fraction of the largest magnitude by which two plans' `t` may differ. float32 on CUDA
    where TF32 is allowed (cuDNN's convolutions allow it by default) is computed with float16's
    10-bit mantissa inside convolutions and matmuls, by eager too: it gets float16's tolerance. On an
    H100, eager's own ResNet-50 gradients moved by 5.8% of the largest between TF32 and IEEE float32;
    inductor's differed from the torch plan's by 1.4%, and float32's tolerance refused them."""
    if t.dtype == torch.float32 and t.device.type == "cuda" and (
            torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32):
        return _TOLERANCE[torch.float16]
    return _TOLERANCE.get(t.dtype, _FLOAT_TOLERANCE)


# a weight's gradient sums a product over every row of the batch, and the judge's example values
# (normal weights, equal tokens) cancel much of it: summed in another order, it spreads wider
GRADIENT_LOOSER = 10.0


# where two plans differ, the torch plan runs again on the values changed by ROUNDING_CHANGE rounding errors
# each: where that moves its results by 1/CONDITIONING_FACTOR of the plans' distance, the program is
# ill-conditioned there (timm's LeViT in training on drawn weights: eager's float32 23-35% off float64's),
# so no plan is refused on drawn values, nor called wrong on the call's (`ill_conditioned`)
ROUNDING_CHANGE = 4
CONDITIONING_FACTOR = 10.0


def rounding_change(t: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Factors changing each of `t`'s floating values by up to ROUNDING_CHANGE rounding errors (from a
    generator of their own, seeded by `t`'s size and `seed`: the user's random stream is not touched;
    give tensors of one size other seeds for other changes)."""
    generator = torch.Generator(device=t.device).manual_seed(t.numel() + seed)
    change = torch.rand(t.shape, generator=generator, dtype=t.dtype, device=t.device) * 2 - 1
    return 1 + change * (ROUNDING_CHANGE * torch.finfo(t.dtype).eps)


def ill_conditioned(apart: float, moved: float) -> str:
    """Why rounding alone can explain two plans' results `apart` (largest_difference) where the torch
    plan's own moved by `moved` when its inputs changed by ROUNDING_CHANGE rounding errors ("" where it cannot).
    Never an infinite distance: results of other shapes, dtypes or integer values, or NaNs elsewhere."""
    if not math.isfinite(apart) or apart > CONDITIONING_FACTOR * moved:
        return ""
    return (f"there the plans differ by {apart:.2g} of their largest values, and a change of its inputs by {ROUNDING_CHANGE} "
            f"rounding errors moves the torch plan's own results by {moved:.2g}: the program is ill-conditioned at those values")


def outputs_differ(expected: Any, actual: Any, looser: float = 1.0, shared_scale: bool = False) -> str:
    """Why two program outputs differ beyond a fused kernel's tolerance, `looser` times wider ("" if
    they do not); with `shared_scale`, each measured against the largest magnitude of them all
    (gradients: a bias's before a batch norm sums terms that cancel to rounding noise, whose size is
    the terms', not the sum's)."""
    exp, _ = tree_flatten(expected)
    act, _ = tree_flatten(actual)
    if len(exp) != len(act):
        return f"{len(act)} outputs where the torch plan returns {len(exp)}"
    largest = max((_largest(e) for e in exp if real_tensor(e) and (e.dtype.is_floating_point or e.dtype.is_complex)), default=0.0) if shared_scale else 0.0
    for i, (e, a) in enumerate(zip(exp, act)):
        if not real_tensor(e):
            continue
        if not real_tensor(a) or (a.shape, a.dtype, a.device) != (e.shape, e.dtype, e.device):
            return f"output {i} is {_meta(a)} where the torch plan's is {_meta(e)}"
        if not (e.dtype.is_floating_point or e.dtype.is_complex):
            if not torch.equal(a, e):
                return f"output {i}: {int((a != e).sum())} of {e.numel()} elements differ"
            continue
        finite = torch.isfinite(e)
        if not _same_non_finite(e, a, finite):
            return f"output {i}: NaNs or infinities where the torch plan has none, or the reverse"
        if finite.any():
            scale = e[finite].abs().max().item()
            worst = (a[finite] - e[finite]).abs().max().item()
            tolerance = looser * _tolerance(e) * max(scale, largest, 1e-6)
            if worst > tolerance:
                return f"output {i}: differs by up to {worst:.3g} where its values reach {scale:.3g}"
    return ""


def largest_difference(expected: Any, actual: Any) -> float:
    """The largest difference between two plans' results (outputs and gradients, flattened), each
    floating tensor's measured against its own largest finite magnitude: how far apart they are,
    as one number (0 where they hold no floating values). Infinite where they differ otherwise
    than by finite values: in structure, shape or dtype, in an integer result, or in where their
    NaNs and infinities are."""
    exp, act = tree_flatten(expected)[0], tree_flatten(actual)[0]
    if len(exp) != len(act):
        return float("inf")
    worst = 0.0
    for e, a in zip(exp, act):
        if not (real_tensor(e) and real_tensor(a)):
            continue
        if (e.shape, e.dtype) != (a.shape, a.dtype):
            return float("inf")
        if not e.dtype.is_floating_point:
            if not torch.equal(e, a):
                return float("inf")
            continue
        finite = torch.isfinite(e)
        if not _same_non_finite(e, a, finite):
            return float("inf")
        if finite.any():
            scale = max(e[finite].abs().max().item(), 1e-30)
            worst = max(worst, (a[finite].double() - e[finite].double()).abs().max().item() / scale)
    return worst


def _same_non_finite(e: torch.Tensor, a: torch.Tensor, finite: torch.Tensor) -> bool:
    """Whether `a` has NaNs and infinities where `e` has them (`finite`: `torch.isfinite(e)`), the same ones."""
    return torch.equal(finite, torch.isfinite(a)) and torch.equal(e[~finite].isnan(), a[~finite].isnan())


def _non_finite_differ(expected: Any, actual: Any) -> str:
    """Where a plan has NaNs or infinities in an output that the torch plan has none in ("" if
    nowhere): what is compared of a program drawing random numbers, whose values differ between plans."""
    exp, act = tree_flatten(expected)[0], tree_flatten(actual)[0]
    for i, (e, a) in enumerate(zip(exp, act)):
        if real_tensor(e) and real_tensor(a) and e.dtype.is_floating_point and a.dtype.is_floating_point:
            if bool(torch.isfinite(e).all()) and not bool(torch.isfinite(a).all()):
                return f"output {i}: NaNs or infinities where the torch plan has none"
    return ""


def _largest(t: torch.Tensor) -> float:
    finite = t[torch.isfinite(t)]
    return finite.abs().max().item() if finite.numel() else 0.0


def _meta(x: Any) -> str:
    return f"{x.dtype} {tuple(x.shape)} on {x.device}" if real_tensor(x) else type(x).__name__


def results_differ(torch_result: tuple[Any, Any], fused_result: tuple[Any, Any], values: bool = True) -> str:
    """Why a fused plan's (outputs, input gradients) differ from the torch plan's ("" if they do
    not): their values with `values`, else only where NaNs and infinities are."""
    (torch_out, torch_grads), (fused_out, fused_grads) = torch_result, fused_result
    differ = outputs_differ(torch_out, fused_out) if values else _non_finite_differ(torch_out, fused_out)
    if not differ:
        differ = (outputs_differ(torch_grads, fused_grads, looser=GRADIENT_LOOSER, shared_scale=True) if values
                  else _non_finite_differ(torch_grads, fused_grads))
        differ = differ and f"the gradients of its inputs: {differ}"
    return differ
