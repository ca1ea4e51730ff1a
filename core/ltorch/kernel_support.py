"""Small helpers over prims for the backward-kernel operations (`kernels`, `attention_kernels`):
not recorded as operations of their own."""
from __future__ import annotations

import torch

from .. import prims
from ..proxies import TensorProxy


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for the half precision types, as PyTorch's kernels accumulate; else the dtype."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _to(x, dtype: torch.dtype):
    return x if x is None or x.dtype == dtype else prims.convert_element_type(x, dtype)


def _up(x):
    return None if x is None else _to(x, _compute_dtype(x.dtype))


def _stat_dtype(x: TensorProxy, *params: TensorProxy | None) -> torch.dtype:
    """The dtype of the statistics a norm kernel returns for input `x` with parameters `params`
    (weight, bias, running statistics; None where absent): float32 on CUDA for half precision;
    on CPU the input's, except where the parameters are in another dtype (a bfloat16 input with
    float32 weights, as under autocast: PyTorch's "mixed type" kernels keep them in float32)."""
    if x.device.type != "cpu":
        return _compute_dtype(x.dtype)
    param = next((p for p in params if p is not None), None)
    return torch.float32 if param is not None and param.dtype != x.dtype and x.dtype in (torch.bfloat16, torch.float16) else x.dtype


def _keep(reduced: TensorProxy, shape, dims) -> TensorProxy:
    """A reduction over `dims` broadcast back to `shape`."""
    kept = tuple(d for d in range(len(shape)) if d not in dims)
    return prims.broadcast_in_dim(reduced, tuple(shape), kept)


def _sum_keep(x: TensorProxy, dims) -> TensorProxy:
    return _keep(prims.sum(x, tuple(dims)), x.shape, tuple(dims))


def _zeros(shape, like: TensorProxy, dtype: torch.dtype | None = None) -> TensorProxy:
    return prims.full(tuple(shape), 0, device=like.device, dtype=dtype or like.dtype)


def _swap_last(x: TensorProxy) -> TensorProxy:
    return prims.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def _dim(dim: int, ndim: int) -> tuple[int, ...]:
    return (dim % ndim,) if ndim else ()
