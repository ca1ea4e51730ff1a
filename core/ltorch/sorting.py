"""Torch-language ops: sorting and selection (sort, argsort, msort, topk)."""
from __future__ import annotations

import torch

from .. import prims
from .base import torchsymbol
from .helpers import check, check_input
from ..prims.base import canonical_dim
from ..proxies import TensorProxy

__all__ = [
    "topk", "sort", "argsort", "msort",
]


def _along(prim, a: TensorProxy, dim: int, *args):
    """Run a (values, indices) prim along `dim`; a 0-d tensor is treated as one element."""
    d = canonical_dim(a.ndim, dim)
    if a.ndim > 0:
        return prim(a, d, *args) if prim is not prims.topk else prim(a, args[0], d, *args[1:])
    flat = prims.reshape(a, (1,))
    values, indices = prim(flat, 0, *args) if prim is not prims.topk else prim(flat, args[0], 0, *args[1:])
    return prims.reshape(values, ()), prims.reshape(indices, ())


@torchsymbol(torch.topk, torch.Tensor.topk)
def topk(a, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) elements along `dim`, and their indices."""
    check_input("topk", a)
    check(a.dtype != torch.bool, lambda: "topk does not support bool dtypes on CPU", RuntimeError)
    size = a.shape[canonical_dim(a.ndim, dim)] if a.ndim else 1
    check(isinstance(k, int) and 0 <= k <= size, lambda: f"selected index k out of range: k={k} for a dimension of size {size}", RuntimeError)
    values, indices = _along(prims.topk, a, dim, k, bool(largest), bool(sorted))
    return torch.return_types.topk((values, indices))


@torchsymbol(torch.sort, torch.Tensor.sort)
def sort(a, dim=-1, descending=False, *, stable=False):
    """Sorted values along `dim` and the indices that sort it."""
    check_input("sort", a)
    values, indices = _along(prims.sort, a, dim, bool(descending), bool(stable))
    return torch.return_types.sort((values, indices))


@torchsymbol(torch.argsort, torch.Tensor.argsort)
def argsort(a, dim=-1, descending=False, *, stable=False):
    """The indices that sort `a` along `dim`."""
    check_input("argsort", a)
    return _along(prims.sort, a, dim, bool(descending), bool(stable))[1]


@torchsymbol(torch.msort, torch.Tensor.msort)
def msort(a):
    """`a` sorted along its first dimension."""
    check_input("msort", a)
    return _along(prims.sort, a, 0, False, False)[0]
