"""An example squall executor package: the shape every executor plugin has.

It adds one custom operation, `example.scaled_tanh(x, scale)`, and one executor,
`example`, that runs:
- `torch.exp` on float32 tensors only (its checker declines other dtypes),
- the prim `prims.mul` (so it takes multiplications from inside decomposed ops),
- `example.scaled_tanh`, through an execution transform into its own operator.
Each implementation counts its calls, so tests can see what really ran.
"""
from __future__ import annotations

from collections import Counter

import torch

from squall.extend import OperationRegistry, OperatorExecutor, TensorProxy, hookimpl

CALLS: Counter = Counter()


def _scaled_tanh_meta(x: TensorProxy, scale: float) -> TensorProxy:
    if not isinstance(x, TensorProxy):
        raise TypeError(f"scaled_tanh expected a tensor, got {type(x).__name__}")
    return TensorProxy(like=x)


def _scaled_tanh_reference(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


def _exp_checker(a) -> bool:
    return isinstance(a, TensorProxy) and a.dtype == torch.float32


def _exp_impl(a: torch.Tensor) -> torch.Tensor:
    CALLS["exp"] += 1
    return torch.exp(a)


def _mul_impl(a, b):
    CALLS["mul"] += 1
    return a * b


def _tanh_scale_impl(x: torch.Tensor, scale: float) -> torch.Tensor:
    CALLS["scaled_tanh"] += 1
    return torch.tanh(x).mul_(scale)


@hookimpl
def squall_register_operations(operations: OperationRegistry) -> None:
    operations.define("example.scaled_tanh", meta=_scaled_tanh_meta, reference=_scaled_tanh_reference)


@hookimpl
def squall_register_executors(operations: OperationRegistry) -> list[OperatorExecutor]:
    ex = OperatorExecutor("example", default_rank=10)
    ex.register_implementation("torch.exp", _exp_impl, checker=_exp_checker)
    ex.register_implementation("prims.mul", _mul_impl)
    tanh_scale = ex.register_operator("tanh_scale", meta=_scaled_tanh_meta, fn=_tanh_scale_impl)
    ex.register_implementation(
        operations.get("example.scaled_tanh"),
        execution_transform=lambda x, scale: tanh_scale(x, scale),
    )
    return [ex]
