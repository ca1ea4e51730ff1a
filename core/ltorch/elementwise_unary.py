"""Unary elementwise torch-language ops: math functions, rounding, classification, and their in-place forms."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .functionalization import inplace
from .helpers import Promotion, check, check_input, computation_dtype, promote, to_dtype
from ..proxies import TensorProxy
from ..symbol import Tags

_T = torch.Tensor
_S = torch.special
_F = torch.nn.functional
_FLOAT_MATH = Promotion.INT_TO_FLOAT


def not_implemented_for(name: str, a: TensorProxy, bad: bool, what: str = "") -> None:
    """torch's NotImplementedError for a dtype its kernel lacks (e.g. abs of a bool tensor)."""
    check(not bad, lambda: f"{name}(): not implemented for {a.dtype} tensors{what}", NotImplementedError)


def _is_bool(dtype: torch.dtype) -> bool:
    return dtype == torch.bool


def _not_floating(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex)


def _floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _unary(name: str, prim, kind: Promotion, *torchfns, exact: bool = False, refuse=None):
    """An op computed by `prim` in the promoted dtype.

    Low-precision floats are computed in float32 unless `exact` (the result is exact in
    the input dtype, as for abs or floor); `refuse(dtype)` names dtypes torch has no kernel for.
    """

    def op(input):
        check_input(name, input)
        if refuse is not None:
            not_implemented_for(name, input, refuse(input.dtype))
        compute, result = promote(input, kind=kind)
        if not exact and kind is not Promotion.ALWAYS_BOOL:
            compute = computation_dtype(compute)
        return to_dtype(prim(to_dtype(input, compute)), result)

    op.__name__ = name
    return torchsymbol(*torchfns, tags=(Tags.ELEMENTWISE,))(op)


# --- sign and magnitude ------------------------------------------------------------------

abs = _unary("abs", prims.abs, Promotion.DEFAULT, torch.abs, _T.abs, _T.__abs__, torch.absolute, _T.absolute, exact=True, refuse=_is_bool)
sign = _unary("sign", prims.sign, Promotion.DEFAULT, torch.sign, _T.sign, exact=True)
sgn = _unary("sgn", prims.sign, Promotion.DEFAULT, torch.sgn, _T.sgn, exact=True)
signbit = _unary("signbit", prims.signbit, Promotion.ALWAYS_BOOL, torch.signbit, _T.signbit)


@torchsymbol(torch.neg, _T.neg, _T.__neg__, torch.negative, _T.negative, tags=(Tags.ELEMENTWISE,))
def neg(input):
    check_input("neg", input)
    check(
        input.dtype != torch.bool,
        lambda: "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
    )
    return prims.neg(input)


@torchsymbol(torch.positive, _T.positive, _T.__pos__, tags=(Tags.ELEMENTWISE,))
def positive(input):
    check_input("positive", input)
    check(input.dtype != torch.bool, lambda: "The `+` operator, on a bool tensor is not supported.")
    return input  # torch returns the tensor itself, not a copy


# --- exponentials, logarithms, powers ----------------------------------------------------

exp = _unary("exp", prims.exp, _FLOAT_MATH, torch.exp, _T.exp)
expm1 = _unary("expm1", prims.expm1, _FLOAT_MATH, torch.expm1, _T.expm1, _S.expm1)
exp2 = _unary("exp2", prims.exp2, _FLOAT_MATH, torch.exp2, _T.exp2, _S.exp2)
log = _unary("log", prims.log, _FLOAT_MATH, torch.log, _T.log)
log1p = _unary("log1p", prims.log1p, _FLOAT_MATH, torch.log1p, _T.log1p, _S.log1p)
log2 = _unary("log2", prims.log2, _FLOAT_MATH, torch.log2, _T.log2)
log10 = _unary("log10", prims.log10, _FLOAT_MATH, torch.log10, _T.log10)
sqrt = _unary("sqrt", prims.sqrt, _FLOAT_MATH, torch.sqrt, _T.sqrt)
rsqrt = _unary("rsqrt", prims.rsqrt, _FLOAT_MATH, torch.rsqrt, _T.rsqrt)
reciprocal = _unary("reciprocal", prims.reciprocal, _FLOAT_MATH, torch.reciprocal, _T.reciprocal)


@torchsymbol(torch.square, _T.square, tags=(Tags.ELEMENTWISE,))
def square(input):
    check_input("square", input)
    compute, result = promote(input, 2)  # torch.square is pow(input, 2): bool becomes int64
    x = to_dtype(input, computation_dtype(compute))
    return to_dtype(prims.mul(x, x), result)


# --- trigonometric and hyperbolic --------------------------------------------------------

sin = _unary("sin", prims.sin, _FLOAT_MATH, torch.sin, _T.sin)
cos = _unary("cos", prims.cos, _FLOAT_MATH, torch.cos, _T.cos)
tan = _unary("tan", prims.tan, _FLOAT_MATH, torch.tan, _T.tan)
asin = _unary("asin", prims.asin, _FLOAT_MATH, torch.asin, _T.asin, torch.arcsin, _T.arcsin)
acos = _unary("acos", prims.acos, _FLOAT_MATH, torch.acos, _T.acos, torch.arccos, _T.arccos)
atan = _unary("atan", prims.atan, _FLOAT_MATH, torch.atan, _T.atan, torch.arctan, _T.arctan)
sinh = _unary("sinh", prims.sinh, _FLOAT_MATH, torch.sinh, _T.sinh)
cosh = _unary("cosh", prims.cosh, _FLOAT_MATH, torch.cosh, _T.cosh)
tanh = _unary("tanh", prims.tanh, _FLOAT_MATH, torch.tanh, _T.tanh, _F.tanh)
asinh = _unary("asinh", prims.asinh, _FLOAT_MATH, torch.asinh, _T.asinh, torch.arcsinh, _T.arcsinh)
acosh = _unary("acosh", prims.acosh, _FLOAT_MATH, torch.acosh, _T.acosh, torch.arccosh, _T.arccosh)
atanh = _unary("atanh", prims.atanh, _FLOAT_MATH, torch.atanh, _T.atanh, torch.arctanh, _T.arctanh)

# --- special functions -------------------------------------------------------------------

erf = _unary("erf", prims.erf, _FLOAT_MATH, torch.erf, _T.erf, _S.erf)
erfc = _unary("erfc", prims.erfc, _FLOAT_MATH, torch.erfc, _T.erfc, _S.erfc)
erfinv = _unary("erfinv", prims.erfinv, _FLOAT_MATH, torch.erfinv, _T.erfinv, _S.erfinv)
lgamma = _unary("lgamma", prims.lgamma, _FLOAT_MATH, torch.lgamma, _T.lgamma, _S.gammaln)
digamma = _unary("digamma", prims.digamma, _FLOAT_MATH, torch.digamma, _T.digamma, _S.digamma, _S.psi)


@torchsymbol(torch.sigmoid, _T.sigmoid, _F.sigmoid, _S.expit, tags=(Tags.ELEMENTWISE,))
def sigmoid(input):
    check_input("sigmoid", input)
    compute, result = promote(input, kind=_FLOAT_MATH)
    x = to_dtype(input, computation_dtype(compute))
    return to_dtype(prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0)), result)


@torchsymbol(torch.logit, _T.logit, _S.logit, tags=(Tags.ELEMENTWISE,))
def logit(input, eps=None):
    check_input("logit", input)
    check(eps is None or isinstance(eps, (int, float)), lambda: f"logit(): argument 'eps' must be float, not {type(eps).__name__}", TypeError)
    compute, result = promote(input, kind=_FLOAT_MATH)
    x = to_dtype(input, computation_dtype(compute))
    if eps is not None and eps >= 0:  # torch ignores a negative eps
        lo, hi = float(eps), 1.0 - eps
        x = prims.where(prims.lt(x, lo), lo, prims.where(prims.gt(x, hi), hi, x))  # NaN stays NaN
    return to_dtype(prims.log(prims.div(x, prims.sub(1.0, x))), result)


# --- rounding ----------------------------------------------------------------------------

floor = _unary("floor", prims.floor, Promotion.DEFAULT, torch.floor, _T.floor, exact=True, refuse=_is_bool)
ceil = _unary("ceil", prims.ceil, Promotion.DEFAULT, torch.ceil, _T.ceil, exact=True, refuse=_is_bool)
trunc = _unary("trunc", prims.trunc, Promotion.DEFAULT, torch.trunc, _T.trunc, torch.fix, _T.fix, exact=True, refuse=_is_bool)


@torchsymbol(torch.round, _T.round, _S.round, tags=(Tags.ELEMENTWISE,))
def round(input, *, decimals=0):
    check_input("round", input)
    check(isinstance(decimals, int) and not isinstance(decimals, bool), lambda: f"round(): argument 'decimals' must be int, not {type(decimals).__name__}", TypeError)
    not_implemented_for("round", input, input.dtype == torch.bool)
    if decimals == 0:
        return prims.round(input)
    not_implemented_for("round", input, _not_floating(input.dtype), " with decimals != 0")
    x = to_dtype(input, computation_dtype(input.dtype))
    if decimals > 0:  # rounding half to even, as torch's kernel does, at the scaled value
        scale = 10.0**decimals
        out = prims.div(prims.round(prims.mul(x, scale)), scale)
    else:
        scale = 10.0 ** (-decimals)
        out = prims.mul(prims.round(prims.div(x, scale)), scale)
    return to_dtype(out, input.dtype)


@torchsymbol(torch.frac, _T.frac, tags=(Tags.ELEMENTWISE,))
def frac(input):
    check_input("frac", input)
    not_implemented_for("frac", input, _not_floating(input.dtype))
    return prims.sub(input, prims.trunc(input))  # in the input dtype, as torch's kernel does


# --- classification ----------------------------------------------------------------------

isfinite = _unary("isfinite", prims.isfinite, Promotion.ALWAYS_BOOL, torch.isfinite, _T.isfinite)
isnan = _unary("isnan", prims.isnan, Promotion.ALWAYS_BOOL, torch.isnan, _T.isnan)
isinf = _unary("isinf", prims.isinf, Promotion.ALWAYS_BOOL, torch.isinf, _T.isinf)


def _signed_inf(name: str, input, compare):
    check_input(name, input)
    if not input.dtype.is_floating_point:
        return prims.isinf(input)  # all False: integers and bools are never infinite
    return prims.logical_and(prims.isinf(input), compare(input, 0))


@torchsymbol(torch.isposinf, _T.isposinf, tags=(Tags.ELEMENTWISE,))
def isposinf(input):
    return _signed_inf("isposinf", input, prims.gt)


@torchsymbol(torch.isneginf, _T.isneginf, tags=(Tags.ELEMENTWISE,))
def isneginf(input):
    return _signed_inf("isneginf", input, prims.lt)


@torchsymbol(torch.isreal, _T.isreal, tags=(Tags.ELEMENTWISE,))
def isreal(input):
    check_input("isreal", input)
    if input.dtype.is_complex:
        return prims.eq(prims.imag(input), 0)
    # every element of a real tensor is real: isfinite of a bool tensor is all True
    return prims.isfinite(prims.signbit(input))


@torchsymbol(torch.nan_to_num, _T.nan_to_num, tags=(Tags.ELEMENTWISE,))
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    check_input("nan_to_num", input)
    for what, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        check(v is None or isinstance(v, (int, float)), lambda: f"nan_to_num(): argument '{what}' must be float, not {type(v).__name__}", TypeError)
    if not input.dtype.is_floating_point:
        # nothing to replace, but torch returns a new tensor, which an in-place op may change
        return prims.convert_element_type(input, input.dtype)
    info = torch.finfo(input.dtype)
    posinf = info.max if posinf is None else float(posinf)
    neginf = info.min if neginf is None else float(neginf)
    x = prims.where(prims.isnan(input), 0.0 if nan is None else float(nan), input)
    x = prims.where(prims.eq(x, math.inf), posinf, x)
    return prims.where(prims.eq(x, -math.inf), neginf, x)


# --- logical and bitwise -----------------------------------------------------------------

logical_not = _unary("logical_not", prims.logical_not, Promotion.ALWAYS_BOOL, torch.logical_not, _T.logical_not)
bitwise_not = _unary("bitwise_not", prims.bitwise_not, Promotion.DEFAULT, torch.bitwise_not, _T.bitwise_not, exact=True, refuse=_floating)


@torchsymbol(_T.__invert__, tags=(Tags.ELEMENTWISE,))
def invert(input):
    # `~x` is refused with a TypeError, torch.bitwise_not with a NotImplementedError
    check_input("__invert__", input)
    check(_not_floating(input.dtype), lambda: "~ (operator.invert) is only implemented on integer and Boolean-type tensors", TypeError)
    return prims.bitwise_not(input)


# --- in-place forms ----------------------------------------------------------------------

abs_ = inplace(abs, _T.abs_, _T.absolute_)
neg_ = inplace(neg, _T.neg_, _T.negative_)
sign_ = inplace(sign, _T.sign_)
sgn_ = inplace(sgn, _T.sgn_)
exp_ = inplace(exp, _T.exp_)
expm1_ = inplace(expm1, _T.expm1_)
exp2_ = inplace(exp2, _T.exp2_)
log_ = inplace(log, _T.log_)
log1p_ = inplace(log1p, _T.log1p_)
log2_ = inplace(log2, _T.log2_)
log10_ = inplace(log10, _T.log10_)
sqrt_ = inplace(sqrt, _T.sqrt_)
rsqrt_ = inplace(rsqrt, _T.rsqrt_)
reciprocal_ = inplace(reciprocal, _T.reciprocal_)
square_ = inplace(square, _T.square_)
sin_ = inplace(sin, _T.sin_)
cos_ = inplace(cos, _T.cos_)
tan_ = inplace(tan, _T.tan_)
asin_ = inplace(asin, _T.asin_, _T.arcsin_)
acos_ = inplace(acos, _T.acos_, _T.arccos_)
atan_ = inplace(atan, _T.atan_, _T.arctan_)
sinh_ = inplace(sinh, _T.sinh_)
cosh_ = inplace(cosh, _T.cosh_)
tanh_ = inplace(tanh, _T.tanh_)
asinh_ = inplace(asinh, _T.asinh_, _T.arcsinh_)
acosh_ = inplace(acosh, _T.acosh_, _T.arccosh_)
atanh_ = inplace(atanh, _T.atanh_, _T.arctanh_)
erf_ = inplace(erf, _T.erf_)
erfc_ = inplace(erfc, _T.erfc_)
erfinv_ = inplace(erfinv, _T.erfinv_)
lgamma_ = inplace(lgamma, _T.lgamma_)
digamma_ = inplace(digamma, _T.digamma_)
sigmoid_ = inplace(sigmoid, _T.sigmoid_)
logit_ = inplace(logit, _T.logit_)
floor_ = inplace(floor, _T.floor_)
ceil_ = inplace(ceil, _T.ceil_)
trunc_ = inplace(trunc, _T.trunc_, _T.fix_)
round_ = inplace(round, _T.round_)
frac_ = inplace(frac, _T.frac_)
nan_to_num_ = inplace(nan_to_num, _T.nan_to_num_)
logical_not_ = inplace(logical_not, _T.logical_not_)
bitwise_not_ = inplace(bitwise_not, _T.bitwise_not_)

__all__ = [
    "abs", "sign", "sgn", "signbit", "neg", "positive", "exp", "expm1", "exp2", "log", "log1p",
    "log2", "log10", "sqrt", "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "lgamma",
    "digamma", "sigmoid", "logit", "floor", "ceil", "trunc", "round", "frac", "isfinite", "isnan",
    "isinf", "isposinf", "isneginf", "isreal", "nan_to_num", "logical_not", "bitwise_not", "invert",
    "abs_", "neg_", "sign_", "sgn_", "exp_", "expm1_", "exp2_", "log_", "log1p_", "log2_", "log10_",
    "sqrt_", "rsqrt_", "reciprocal_", "square_", "sin_", "cos_", "tan_", "asin_", "acos_", "atan_",
    "sinh_", "cosh_", "tanh_", "asinh_", "acosh_", "atanh_", "erf_", "erfc_", "erfinv_", "lgamma_",
    "digamma_", "sigmoid_", "logit_", "floor_", "ceil_", "trunc_", "round_", "frac_", "nan_to_num_",
    "logical_not_", "bitwise_not_",
]
