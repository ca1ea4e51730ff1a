"""Elementwise torch-language ops: math, comparisons, logical and bitwise ops, where."""
from __future__ import annotations

import torch

from squall import prims
from squall.ltorch.base import torch_inplace, torchsymbol
from squall.ltorch.helpers import Promotion, broadcast, check, computation_dtype, is_tensor, promote, to_dtype
from squall.symbol import Tags

__all__: list[str] = []


def _export(*ops):
    for op in ops:
        __all__.append(op.name if hasattr(op, "name") else op.__name__)


def _unary(name: str, prim, kind: Promotion, *torchfns):
    """An ltorch unary op computed by `prim` in the promoted dtype (low precision in float32)."""

    def op(a):
        check(is_tensor(a), lambda: f"{name}(): argument 'input' must be Tensor, not {type(a).__name__}", TypeError)
        compute, result = promote(a, kind=kind)
        if kind is not Promotion.ALWAYS_BOOL:
            compute = computation_dtype(compute)
        return to_dtype(prim(to_dtype(a, compute)), result)

    op.__name__ = name
    return torchsymbol(*torchfns, tags=(Tags.ELEMENTWISE,))(op)


def _binary_core(name: str, prim, kind: Promotion, a, b, **prim_kwargs):
    check(is_tensor(a) or is_tensor(b), lambda: f"{name}(): expected at least one tensor argument", TypeError)
    compute, result = promote(a, b, kind=kind)
    if kind is not Promotion.ALWAYS_BOOL:
        compute = computation_dtype(compute)
    a, b = broadcast(a, b)
    out = prim(to_dtype(a, compute), to_dtype(b, compute), **prim_kwargs)
    return to_dtype(out, result)


def _binary(name: str, prim, kind: Promotion, *torchfns):
    def op(a, b):
        return _binary_core(name, prim, kind, a, b)

    op.__name__ = name
    return torchsymbol(*torchfns, tags=(Tags.ELEMENTWISE,))(op)


exp = _unary("exp", prims.exp, Promotion.INT_TO_FLOAT, torch.exp, torch.Tensor.exp)
tanh = _unary("tanh", prims.tanh, Promotion.INT_TO_FLOAT, torch.tanh, torch.Tensor.tanh, torch.nn.functional.tanh)
neg = _unary("neg", prims.neg, Promotion.DEFAULT, torch.neg, torch.Tensor.neg, torch.Tensor.__neg__, torch.negative)


@torchsymbol(torch.add, torch.Tensor.add, torch.Tensor.__add__, tags=(Tags.ELEMENTWISE,))
def add(a, b, *, alpha=None):
    if alpha is not None:
        b = mul(b, alpha) if is_tensor(b) else b * alpha
    return _binary_core("add", prims.add, Promotion.DEFAULT, a, b)


@torchsymbol(torch.Tensor.__radd__, tags=(Tags.ELEMENTWISE,))
def radd(a, b):
    return add(b, a)


@torchsymbol(torch.sub, torch.Tensor.sub, torch.Tensor.__sub__, torch.subtract, tags=(Tags.ELEMENTWISE,))
def sub(a, b, *, alpha=None):
    if alpha is not None:
        b = mul(b, alpha) if is_tensor(b) else b * alpha
    return _binary_core("sub", prims.sub, Promotion.DEFAULT, a, b)


@torchsymbol(torch.Tensor.__rsub__, tags=(Tags.ELEMENTWISE,))
def rsub(a, b):
    return sub(b, a)


mul = _binary("mul", prims.mul, Promotion.DEFAULT, torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.multiply)


@torchsymbol(torch.Tensor.__rmul__, tags=(Tags.ELEMENTWISE,))
def rmul(a, b):
    return mul(b, a)


@torchsymbol(torch.div, torch.Tensor.div, torch.Tensor.__truediv__, torch.divide, torch.true_divide, tags=(Tags.ELEMENTWISE,))
def div(a, b, *, rounding_mode=None):
    check(rounding_mode in (None, "trunc", "floor"), lambda: f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'", ValueError)
    if rounding_mode is None:
        return _binary_core("div", prims.div, Promotion.INT_TO_FLOAT, a, b)
    return _binary_core("div", prims.div, Promotion.DEFAULT, a, b, rounding_mode=rounding_mode)


@torchsymbol(torch.Tensor.__rtruediv__, tags=(Tags.ELEMENTWISE,))
def rtruediv(a, b):
    return div(b, a)


add_ = torch_inplace(add, torch.Tensor.add_, torch.Tensor.__iadd__)
sub_ = torch_inplace(sub, torch.Tensor.sub_, torch.Tensor.__isub__)
mul_ = torch_inplace(mul, torch.Tensor.mul_, torch.Tensor.__imul__)
div_ = torch_inplace(div, torch.Tensor.div_, torch.Tensor.__itruediv__)

__all__ += [n for n, v in list(globals().items()) if not n.startswith("_") and hasattr(v, "torchfns") and n not in ("torchsymbol",)]
