"""A fusion region as a plain Python function of torch calls, and example inputs for it.

The function is what the torch executor would run for the region's calls, one after
another (prims through `TORCH_PRIM_IMPLS`, torch-language ops through the torch callable
they stand for), so inductor sees the high-level ops (softmax, layer_norm, cross_entropy)
and eager and compiled runs of a region compute the same thing.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from squall.extend import TORCH_PRIM_IMPLS, BoundSymbol, FusionRegion, TensorProxy, ValuePrinter, example_tensor, load_source

__all__ = ["torch_callable", "region_function", "example_inputs"]


def torch_callable(bsym: BoundSymbol) -> Callable:
    """The torch callable the built-in torch executor runs for this call."""
    if bsym.sym.is_prim:
        return TORCH_PRIM_IMPLS[bsym.sym.id]
    return bsym.sym.torchfns[0]


def region_function(region: FusionRegion) -> tuple[Callable, str]:
    """(function, source): the region's calls as one function of its inputs returning a tuple of its outputs."""
    names = {p.name for p in region.inputs} | {p.name for b in region.calls for p in b.output_proxies()}
    printer = ValuePrinter({}, reserved=names)
    lines = [f"def region({', '.join(p.name for p in region.inputs)}):"]
    for b in region.calls:
        callee = printer.name_for(torch_callable(b), f"torch_{b.sym.name}")
        target, picks = printer.assignment(b.output) if b.output is not None else ("", [])
        lines.append(f"  {target + ' = ' if target else ''}{printer.call(callee, b)}")
        lines.extend(f"  {line}" for line in picks)
    lines.append(f"  return ({''.join(p.name + ', ' for p in region.outputs)})")
    source = "\n".join(lines) + "\n"
    # registered with linecache so dynamo's and Python's tracebacks show the region's source
    load_source(source, "inductor-region", printer.globals)
    return printer.globals["region"], source


def example_inputs(proxies: list[TensorProxy]) -> list[torch.Tensor]:
    """Real tensors with the proxies' metadata, drawn without touching the user's random stream."""
    return [example_tensor(p.shape, p.dtype, p.device) for p in proxies]
