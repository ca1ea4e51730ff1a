"""Elementwise prims: unary, binary, where, dtype conversion, and the copy side effect.

Tensor operands of one prim share shape, dtype and device exactly; a Python number
may stand for one operand if its kind (bool < int < float < complex) fits the tensor's
dtype. Broadcasting and type promotion happen in the torch language above.
"""
from __future__ import annotations

import torch

from .base import PrimIDs, check, dtype_category, is_number, make_prim, number_category
from ..proxies import TensorProxy
from ..symbol import Tags

# Which dtypes a family accepts, as (bool, integer, floating, complex) category sets.
_ANY = frozenset({0, 1, 2, 3})
_NUMERIC = frozenset({1, 2, 3})
_REAL_NUMERIC = frozenset({1, 2})
_FLOATING = frozenset({2, 3})
_REAL_FLOATING = frozenset({2})
_INTEGRAL = frozenset({0, 1})
_COMPLEX = frozenset({3})

_CATEGORY_NAMES = {0: "bool", 1: "integer", 2: "floating point", 3: "complex"}


def _describe(categories: frozenset) -> str:
    return " or ".join(_CATEGORY_NAMES[c] for c in sorted(categories))


def _check_dtype(name: str, a: TensorProxy, categories: frozenset) -> None:
    check(
        dtype_category(a.dtype) in categories,
        lambda: f"{name} expects a {_describe(categories)} tensor, got {a.dtype}",
        TypeError,
    )


# --- unary ------------------------------------------------------------------------------


def _elementwise_unary(id: str, name: str, categories: frozenset, output: str = "same"):
    """A unary prim; `output` is "same" (input dtype), "bool", or "real" (complex -> its real dtype)."""

    def meta(a):
        check(isinstance(a, TensorProxy), lambda: f"{name} expects a tensor, got {type(a).__name__}", TypeError)
        _check_dtype(name, a, categories)
        if output == "bool":
            return TensorProxy(like=a, dtype=torch.bool, requires_grad=False)
        if output == "real" and a.dtype.is_complex:
            return TensorProxy(like=a, dtype=a.dtype.to_real())
        return TensorProxy(like=a)

    meta.__name__ = f"_{name}_meta"
    return make_prim(id, name, meta=meta, tags=(Tags.ELEMENTWISE,))


abs = _elementwise_unary(PrimIDs.ABS, "abs", _NUMERIC, "real")
neg = _elementwise_unary(PrimIDs.NEG, "neg", _NUMERIC)
exp = _elementwise_unary(PrimIDs.EXP, "exp", _FLOATING)
expm1 = _elementwise_unary(PrimIDs.EXPM1, "expm1", _FLOATING)
exp2 = _elementwise_unary(PrimIDs.EXP2, "exp2", _FLOATING)
log = _elementwise_unary(PrimIDs.LOG, "log", _FLOATING)
log1p = _elementwise_unary(PrimIDs.LOG1P, "log1p", _FLOATING)
log2 = _elementwise_unary(PrimIDs.LOG2, "log2", _FLOATING)
log10 = _elementwise_unary(PrimIDs.LOG10, "log10", _FLOATING)
sqrt = _elementwise_unary(PrimIDs.SQRT, "sqrt", _FLOATING)
rsqrt = _elementwise_unary(PrimIDs.RSQRT, "rsqrt", _FLOATING)
sin = _elementwise_unary(PrimIDs.SIN, "sin", _FLOATING)
cos = _elementwise_unary(PrimIDs.COS, "cos", _FLOATING)
tan = _elementwise_unary(PrimIDs.TAN, "tan", _FLOATING)
asin = _elementwise_unary(PrimIDs.ASIN, "asin", _FLOATING)
acos = _elementwise_unary(PrimIDs.ACOS, "acos", _FLOATING)
atan = _elementwise_unary(PrimIDs.ATAN, "atan", _FLOATING)
asinh = _elementwise_unary(PrimIDs.ASINH, "asinh", _FLOATING)
acosh = _elementwise_unary(PrimIDs.ACOSH, "acosh", _FLOATING)
atanh = _elementwise_unary(PrimIDs.ATANH, "atanh", _FLOATING)
sinh = _elementwise_unary(PrimIDs.SINH, "sinh", _FLOATING)
cosh = _elementwise_unary(PrimIDs.COSH, "cosh", _FLOATING)
tanh = _elementwise_unary(PrimIDs.TANH, "tanh", _FLOATING)
erf = _elementwise_unary(PrimIDs.ERF, "erf", _REAL_FLOATING)
erfc = _elementwise_unary(PrimIDs.ERFC, "erfc", _REAL_FLOATING)
erfinv = _elementwise_unary(PrimIDs.ERFINV, "erfinv", _REAL_FLOATING)
lgamma = _elementwise_unary(PrimIDs.LGAMMA, "lgamma", _REAL_FLOATING)
digamma = _elementwise_unary(PrimIDs.DIGAMMA, "digamma", _REAL_FLOATING)
floor = _elementwise_unary(PrimIDs.FLOOR, "floor", _REAL_NUMERIC)
ceil = _elementwise_unary(PrimIDs.CEIL, "ceil", _REAL_NUMERIC)
round = _elementwise_unary(PrimIDs.ROUND, "round", _REAL_NUMERIC)
trunc = _elementwise_unary(PrimIDs.TRUNC, "trunc", _REAL_NUMERIC)
sign = _elementwise_unary(PrimIDs.SIGN, "sign", _REAL_NUMERIC | {0})
signbit = _elementwise_unary(PrimIDs.SIGNBIT, "signbit", _REAL_NUMERIC | {0}, "bool")
reciprocal = _elementwise_unary(PrimIDs.RECIPROCAL, "reciprocal", _FLOATING)
isfinite = _elementwise_unary(PrimIDs.ISFINITE, "isfinite", _ANY, "bool")
isnan = _elementwise_unary(PrimIDs.ISNAN, "isnan", _ANY, "bool")
isinf = _elementwise_unary(PrimIDs.ISINF, "isinf", _ANY, "bool")
logical_not = _elementwise_unary(PrimIDs.LOGICAL_NOT, "logical_not", _ANY, "bool")
bitwise_not = _elementwise_unary(PrimIDs.BITWISE_NOT, "bitwise_not", _INTEGRAL)
real = _elementwise_unary(PrimIDs.REAL, "real", _COMPLEX, "real")
imag = _elementwise_unary(PrimIDs.IMAG, "imag", _COMPLEX, "real")


# --- binary -----------------------------------------------------------------------------


def _check_operands(name: str, *operands) -> TensorProxy:
    """The operands' shared tensor form; every tensor must match it exactly."""
    tensors = [x for x in operands if isinstance(x, TensorProxy)]
    check(bool(tensors), lambda: f"{name} expects at least one tensor operand", TypeError)
    first = tensors[0]
    for t in tensors[1:]:
        check(t.shape == first.shape, lambda: f"{name} expects operands of one shape, got {list(first.shape)} and {list(t.shape)} (broadcast first)", ValueError)
        check(t.dtype == first.dtype, lambda: f"{name} expects operands of one dtype, got {first.dtype} and {t.dtype} (convert first)", TypeError)
        check(t.device == first.device, lambda: f"{name} expects operands on one device, got {first.device} and {t.device}", RuntimeError)
    for x in operands:
        if isinstance(x, TensorProxy):
            continue
        check(is_number(x), lambda: f"{name} expects tensors or numbers, got {type(x).__name__}", TypeError)
        check(
            number_category(x) <= dtype_category(first.dtype),
            lambda: f"{name} cannot combine a {type(x).__name__} with a {first.dtype} tensor without promotion",
            TypeError,
        )
    return first


def _elementwise_binary(id: str, name: str, categories: frozenset, output: str = "same"):
    def meta(a, b):
        like = _check_operands(name, a, b)
        _check_dtype(name, like, categories)
        if output == "bool":
            return TensorProxy(like=like, dtype=torch.bool, requires_grad=False)
        return TensorProxy(like=like)

    meta.__name__ = f"_{name}_meta"
    return make_prim(id, name, meta=meta, tags=(Tags.ELEMENTWISE,))


add = _elementwise_binary(PrimIDs.ADD, "add", _ANY)
sub = _elementwise_binary(PrimIDs.SUB, "sub", _NUMERIC)
mul = _elementwise_binary(PrimIDs.MUL, "mul", _ANY)
pow = _elementwise_binary(PrimIDs.POW, "pow", _NUMERIC)
remainder = _elementwise_binary(PrimIDs.REMAINDER, "remainder", _REAL_NUMERIC)
fmod = _elementwise_binary(PrimIDs.FMOD, "fmod", _REAL_NUMERIC)
atan2 = _elementwise_binary(PrimIDs.ATAN2, "atan2", _REAL_FLOATING)
hypot = _elementwise_binary(PrimIDs.HYPOT, "hypot", _REAL_FLOATING)
copysign = _elementwise_binary(PrimIDs.COPYSIGN, "copysign", _REAL_FLOATING)
nextafter = _elementwise_binary(PrimIDs.NEXTAFTER, "nextafter", _REAL_FLOATING)
maximum = _elementwise_binary(PrimIDs.MAXIMUM, "maximum", _ANY - {3})
minimum = _elementwise_binary(PrimIDs.MINIMUM, "minimum", _ANY - {3})
eq = _elementwise_binary(PrimIDs.EQ, "eq", _ANY, "bool")
ne = _elementwise_binary(PrimIDs.NE, "ne", _ANY, "bool")
lt = _elementwise_binary(PrimIDs.LT, "lt", _ANY - {3}, "bool")
le = _elementwise_binary(PrimIDs.LE, "le", _ANY - {3}, "bool")
gt = _elementwise_binary(PrimIDs.GT, "gt", _ANY - {3}, "bool")
ge = _elementwise_binary(PrimIDs.GE, "ge", _ANY - {3}, "bool")
logical_and = _elementwise_binary(PrimIDs.LOGICAL_AND, "logical_and", _ANY, "bool")
logical_or = _elementwise_binary(PrimIDs.LOGICAL_OR, "logical_or", _ANY, "bool")
logical_xor = _elementwise_binary(PrimIDs.LOGICAL_XOR, "logical_xor", _ANY, "bool")
bitwise_and = _elementwise_binary(PrimIDs.BITWISE_AND, "bitwise_and", _INTEGRAL)
bitwise_or = _elementwise_binary(PrimIDs.BITWISE_OR, "bitwise_or", _INTEGRAL)
bitwise_xor = _elementwise_binary(PrimIDs.BITWISE_XOR, "bitwise_xor", _INTEGRAL)
bitwise_left_shift = _elementwise_binary(PrimIDs.BITWISE_LEFT_SHIFT, "bitwise_left_shift", _INTEGRAL - {0})
bitwise_right_shift = _elementwise_binary(PrimIDs.BITWISE_RIGHT_SHIFT, "bitwise_right_shift", _INTEGRAL - {0})


def _div_meta(a, b, rounding_mode=None):
    like = _check_operands("div", a, b)
    check(rounding_mode in (None, "trunc", "floor"), lambda: f"div expects rounding_mode None, 'trunc' or 'floor', got {rounding_mode!r}", ValueError)
    if rounding_mode is None:
        _check_dtype("div (true division)", like, _FLOATING)
    else:
        _check_dtype(f"div (rounding_mode={rounding_mode!r})", like, _REAL_NUMERIC)
    return TensorProxy(like=like)


div = make_prim(PrimIDs.DIV, "div", meta=_div_meta, tags=(Tags.ELEMENTWISE,))


# --- ternary, conversion, side effect --------------------------------------------------


def _where_meta(pred, a, b):
    check(isinstance(pred, TensorProxy), lambda: f"where expects a tensor condition, got {type(pred).__name__}", TypeError)
    check(pred.dtype == torch.bool, lambda: f"where expects a bool condition, got {pred.dtype}", TypeError)
    like = _check_operands("where", a, b)
    check(pred.shape == like.shape, lambda: f"where expects a condition of shape {list(like.shape)}, got {list(pred.shape)}", ValueError)
    check(pred.device == like.device or pred.ndim == 0, lambda: f"where expects its condition on {like.device}, got {pred.device}")
    return TensorProxy(like=like)


where = make_prim(PrimIDs.WHERE, "where", meta=_where_meta, tags=(Tags.ELEMENTWISE,))


def _convert_element_type_meta(a, dtype):
    check(isinstance(a, TensorProxy), lambda: f"convert_element_type expects a tensor, got {type(a).__name__}", TypeError)
    check(isinstance(dtype, torch.dtype), lambda: f"convert_element_type expects a torch.dtype, got {dtype!r}", TypeError)
    return TensorProxy(like=a, dtype=dtype, requires_grad=a.requires_grad and (dtype.is_floating_point or dtype.is_complex))


convert_element_type = make_prim(
    PrimIDs.CONVERT_ELEMENT_TYPE, "convert_element_type", meta=_convert_element_type_meta, tags=(Tags.ELEMENTWISE,)
)


def _copy__meta(dst, src):
    check(isinstance(dst, TensorProxy) and isinstance(src, TensorProxy), lambda: "copy_ expects two tensors", TypeError)
    check(dst.shape == src.shape, lambda: f"copy_ expects a source of shape {list(dst.shape)}, got {list(src.shape)}", ValueError)
    return None


# Writes an in-place result back into a tensor the caller passed in.
copy_ = make_prim(PrimIDs.COPY_, "copy_", meta=_copy__meta, tags=(Tags.SIDE_EFFECT,))

__all__ = [
    name
    for name, value in list(globals().items())
    if not name.startswith("_") and getattr(value, "is_prim", False)
]
