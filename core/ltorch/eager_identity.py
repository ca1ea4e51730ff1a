"""Which tensor object a torch call returns, as eager answers it: its input itself, or a new one.

The difference decides gradients under `torch.no_grad()` inside a program. Eager's
`x.flatten(1, 1)`, `torch.real(x)` on a real tensor and `torch.atleast_1d(x)` on a matrix
return `x` itself, so a gradient still reaches `x` through what they returned; eager's
`x.expand(x.shape)` or adaptive pooling to the input's size return a new tensor, which
under no_grad carries none. squall's ops answer by value (an op that changes nothing may
return its input proxy, and one that reshapes to the same shape makes a new one), so where
it matters (grad off, an input that requires grad) the dispatcher asks eager, on the meta
device, and gives the program the object eager would have.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..proxies import TensorProxy
from ..symbolic import concrete_shape

__all__ = ["as_meta", "returned_inputs", "may_return_an_input"]


def as_meta(x: Any) -> Any:
    """A meta-device tensor standing for `x` (a proxy or a real tensor); anything else as it is."""
    if isinstance(x, TensorProxy):
        return torch.empty(concrete_shape(x.shape), dtype=x.dtype, device="meta")
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    return x


def may_return_an_input(inputs: list[TensorProxy], outputs: list[Any]) -> bool:
    """Whether eager's answer can differ from squall's for these outputs: one of them is an input
    proxy, or has the shape and dtype of an input (an op eager answers with the input itself)."""
    for o in outputs:
        if type(o) is not TensorProxy:
            continue
        for p in inputs:
            if o is p or (o.dtype == p.dtype and tuple(o.shape) == tuple(p.shape)):
                return True
    return False


def returned_inputs(func: Callable, args: tuple, kwargs: dict, n_outputs: int) -> list[TensorProxy | None] | None:
    """For each of the `n_outputs` tensors eager's `func(*args, **kwargs)` returns (in pytree
    order), the input proxy it is (eager returned its argument itself), or None for a new tensor.

    None where eager cannot answer on the meta device or answers with another structure."""
    by_meta: dict[int, tuple[torch.Tensor, TensorProxy]] = {}  # holding each meta keeps its id unique

    def noted(x: Any) -> Any:
        m = as_meta(x)
        if isinstance(x, TensorProxy):
            by_meta[id(m)] = (m, x)
        return m

    try:
        with torch._C.DisableTorchFunction(), torch.no_grad():
            result = func(*tree_map(noted, args), **tree_map(noted, kwargs))
    except Exception:  # noqa: BLE001 - an op the meta device does not run: no answer
        return None
    results = [r for r in tree_flatten(result)[0] if isinstance(r, torch.Tensor)]
    if len(results) != n_outputs:
        return None
    return [by_meta[id(r)][1] if id(r) in by_meta else None for r in results]
