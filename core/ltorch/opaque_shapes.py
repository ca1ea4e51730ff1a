"""The output shapes of some opaque torch calls, as expressions of their inputs' symbolic sizes.

A torch call outside squall's language runs opaque (`TorchLanguage.opaque`): its outputs are
learnt by running it on the meta device, which takes only int sizes, so every size of its
inputs was read and guarded, and each length compiled anew. For the calls here the output
shape is a known function of the input's (a reduction along one dimension, a scan, a diagonal
embedding), so the meta device runs at this call's sizes unguarded and the outputs take the
rule's sizes instead; a rule records, as shape guards, the relations its call's validity
depends on (kthvalue's k within the dimension). Where the rule's sizes disagree with the meta
device's, the caller reads and guards the sizes as before.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..prims.base import canonical_dim
from ..proxies import TensorProxy
from ..symbolic import SymInt

__all__ = ["output_shapes"]

Shape = tuple


def _argument(args: tuple, kwargs: dict, at: int, name: str, default: Any) -> Any:
    # the argument torch's parser binds to `name`: positional (after the input) or keyword
    return args[at] if len(args) > at else kwargs.get(name, default)


def _reduced_along(shape: Shape, dim: int, keepdim: bool) -> Shape:
    if not shape:
        return ()
    d = canonical_dim(len(shape), dim)
    return tuple(1 if i == d else n for i, n in enumerate(shape)) if keepdim else shape[:d] + shape[d + 1:]


def _values_and_indices_along(first_dim_at: int, default_dim: Any = -1, k_at: int | None = None) -> Callable:
    """kthvalue, median(dim), mode: (values, indices) with the dimension reduced (kept as 1)."""

    def rule(input: TensorProxy, *args: Any, **kwargs: Any) -> list[Shape] | None:
        if k_at is None and default_dim is None and not args and not kwargs:
            return [()]  # median(x): one 0-d tensor
        dim = _argument(args, kwargs, first_dim_at, "dim", default_dim)
        keepdim = _argument(args, kwargs, first_dim_at + 1, "keepdim", False)
        if dim is None or type(dim) is not int or type(keepdim) is not bool:
            return None
        if k_at is not None:
            k = _argument(args, kwargs, k_at, "k", None)
            size = input.shape[canonical_dim(input.ndim, dim)] if input.ndim else 1
            # valid for the sizes k falls within (torch refuses the others): a shape guard
            if type(k) is not int and type(k) is not SymInt:
                return None
            if not (1 <= k and k <= size):  # (a symbolic k: both relations recorded as shape guards)
                return None
        shape = _reduced_along(tuple(input.shape), dim, keepdim)
        return [shape, shape]

    return rule


def _scan(outputs: int) -> Callable:
    """cummax, cummin (values, indices), logcumsumexp: the input's shape."""

    def rule(input: TensorProxy, *args: Any, **kwargs: Any) -> list[Shape] | None:
        return [tuple(input.shape)] * outputs

    return rule


def _diag_embed(input: TensorProxy, *args: Any, **kwargs: Any) -> list[Shape] | None:
    # the last dimension's n elements on a diagonal (offset from the main one) of a new
    # (n + |offset|)-square pair of dimensions at dim1 and dim2 of the output
    offset = _argument(args, kwargs, 0, "offset", 0)
    dim1 = _argument(args, kwargs, 1, "dim1", -2)
    dim2 = _argument(args, kwargs, 2, "dim2", -1)
    if input.ndim == 0 or not all(type(v) is int for v in (offset, dim1, dim2)):
        return None
    rank = input.ndim + 1
    d1, d2 = canonical_dim(rank, dim1), canonical_dim(rank, dim2)
    if d1 == d2:
        return None
    side = input.shape[-1] + abs(offset)
    rest = iter(input.shape[:-1])
    return [tuple(side if i in (d1, d2) else next(rest) for i in range(rank))]


def _same_shape(input: TensorProxy, *args: Any, **kwargs: Any) -> list[Shape] | None:
    # real, imag: a view of the (complex) input's real or imaginary parts, the input's shape
    return [tuple(input.shape)]


def _view_as_real(input: TensorProxy, *args: Any, **kwargs: Any) -> list[Shape] | None:
    # each complex element as its (real, imaginary) pair: a new last dimension of 2
    return [(*input.shape, 2)]


_RULES: dict[Callable, Callable] = {
    # (`x.real` reaches the dispatcher as the property's bound getter, which compares equal to itself)
    **dict.fromkeys((torch.real, torch.Tensor.real.__get__, torch.imag, torch.Tensor.imag.__get__), _same_shape),
    torch.view_as_real: _view_as_real,
    **dict.fromkeys((torch.kthvalue, torch.Tensor.kthvalue), _values_and_indices_along(1, k_at=0)),
    **dict.fromkeys((torch.median, torch.Tensor.median, torch.nanmedian, torch.Tensor.nanmedian), _values_and_indices_along(0, default_dim=None)),
    **dict.fromkeys((torch.mode, torch.Tensor.mode), _values_and_indices_along(0)),
    **dict.fromkeys((torch.cummax, torch.Tensor.cummax, torch.cummin, torch.Tensor.cummin), _scan(2)),
    **dict.fromkeys((torch.logcumsumexp, torch.Tensor.logcumsumexp), _scan(1)),
    **dict.fromkeys((torch.diag_embed, torch.Tensor.diag_embed), _diag_embed),
}


def output_shapes(func: Callable, args: tuple, kwargs: dict) -> list[Shape] | None:
    """The shapes of the tensors the opaque call `func(*args, **kwargs)` returns, in order, as
    expressions of its input's sizes; None where squall has no rule for it (or for this form of
    its arguments: a `dim` given as a name, an `out=`), and the caller reads the sizes."""
    rule = _RULES.get(func)
    if rule is None or not args or type(args[0]) is not TensorProxy or "out" in kwargs:
        return None
    try:
        return rule(*args, **kwargs)
    except (TypeError, IndexError, ValueError):  # (an argument form the rule does not read: torch answers)
        return None
