"""Elementwise torch-language ops of two or more operands: arithmetic, comparisons, logical and bitwise ops, where, clamp, lerp, addcmul."""
from __future__ import annotations

import torch

from .. import prims
from .base import data_dependent_error, torchsymbol
from .functionalization import inplace
from .elementwise_unary import not_implemented_for
from .helpers import Promotion, broadcast, cast_number, check, check_input, computation_dtype, is_number, is_tensor, number_dtype, promote, result_dtype, to_dtype
from ..prims.base import dtype_category, number_type
from ..proxies import NumberProxy
from ..symbol import Tags

_T = torch.Tensor
_TAGS = (Tags.ELEMENTWISE,)


def _floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _is_integral(dtype: torch.dtype) -> bool:  # bool included, as torch's isIntegralType(t, true)
    return dtype_category(dtype) < 2


def _check_operands(name: str, a, b, operands: str) -> None:
    """`operands`: "any" (a number may stand for either), "tensor_first", or "tensors"."""
    for what, x in (("input", a), ("other", b)):
        check(is_tensor(x) or is_number(x), lambda: f"{name}(): argument '{what}' must be Tensor or Number, not {type(x).__name__}", TypeError)
    check(is_tensor(a) or is_tensor(b), lambda: f"{name}(): expected at least one tensor argument", TypeError)
    if operands != "any":
        check_input(name, a)
    if operands == "tensors":
        check_input(name, b, "other")


def _binary_core(name: str, prim, kind: Promotion, a, b, *, exact: bool = False, refuse=None, **prim_kwargs):
    """`prim` over `a` and `b` promoted and broadcast as torch does; low precision in float32 unless `exact`."""
    compute, result = promote(a, b, kind=kind)
    if refuse is not None:
        check(not refuse(compute), lambda: f"{name}(): not implemented for {compute} tensors", NotImplementedError)
    a, b = broadcast(to_dtype(a, compute), to_dtype(b, compute))  # torch casts operands to the common dtype first
    if not exact and kind is not Promotion.ALWAYS_BOOL:
        compute = computation_dtype(compute)
    return to_dtype(prim(to_dtype(a, compute), to_dtype(b, compute), **prim_kwargs), result)


def _numbers_as_torch_takes_them(a, b):
    """torch.add, sub, mul and div given two numbers (`torch.div(seq_len, window, rounding_mode="trunc")`,
    LED's attention): the first becomes the 0-d CPU tensor torch's argument parser makes of it, so
    the result is the 0-d tensor eager's is (int64 from two ints, the default float dtype from a float)."""
    if is_tensor(a) or is_tensor(b) or not (is_number(a) and is_number(b)):
        return a
    dtype = number_dtype(a)
    return prims.full((), cast_number(a, dtype), device=torch.device("cpu"), dtype=dtype)


def _binary(name: str, prim, kind: Promotion, *torchfns, operands: str = "any", exact: bool = False, refuse=None):
    def op(input, other):
        _check_operands(name, input, other, operands)
        return _binary_core(name, prim, kind, input, other, exact=exact, refuse=refuse)

    op.__name__ = name
    return torchsymbol(*torchfns, tags=_TAGS)(op)


def _reflected(op, dunder: str):
    """`other <op> self` for a reflected dunder such as Tensor.__rpow__."""

    def reflected(self, other):
        return op(other, self)

    reflected.__name__ = f"r{op.name}"
    # named by its dunder: torch defines __rtruediv__ as an alias of __rdiv__
    return torchsymbol(getattr(_T, dunder), id=f"torch.Tensor.{dunder}", tags=_TAGS)(reflected)


# --- add, sub, mul, div --------------------------------------------------------------------


def _with_alpha(name: str, prim, a, b, alpha):
    compute, result = promote(a, b)
    alpha_type = number_type(alpha)  # a run-time number's type is known; its value is not read
    check(not (_is_integral(result) and issubclass(alpha_type, float)), lambda: "For integral input tensors, argument alpha must not be a floating point number.")
    check(not (alpha_type is bool and result != torch.bool), lambda: "Boolean alpha only supported for Boolean results.")
    a, b = broadcast(to_dtype(a, compute), to_dtype(b, compute))
    compute = computation_dtype(compute)
    a, b = to_dtype(a, compute), to_dtype(b, compute)
    if type(alpha) is NumberProxy or (alpha is not True and alpha != 1):
        b = prims.mul(b, to_dtype(alpha, compute)) if is_tensor(b) else b * alpha
    return to_dtype(prim(a, b), result)


@torchsymbol(torch.add, _T.add, _T.__add__, tags=_TAGS)
def add(input, other, *, alpha=1):
    input = _numbers_as_torch_takes_them(input, other)
    _check_operands("add", input, other, "any")
    return _with_alpha("add", prims.add, input, other, alpha)


def _check_sub_bool(a, b) -> None:
    def is_bool(x):
        return x.dtype == torch.bool if is_tensor(x) else isinstance(x, bool)

    check(not (is_bool(a) and is_bool(b)), lambda: "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.")
    check(
        not (is_bool(a) or is_bool(b)),
        lambda: "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
    )


@torchsymbol(torch.sub, _T.sub, _T.__sub__, torch.subtract, _T.subtract, tags=_TAGS)
def sub(input, other, *, alpha=1):
    input = _numbers_as_torch_takes_them(input, other)
    _check_operands("sub", input, other, "any")
    _check_sub_bool(input, other)
    return _with_alpha("sub", prims.sub, input, other, alpha)


@torchsymbol(torch.rsub, _T.__rsub__, tags=_TAGS)
def rsub(input, other, *, alpha=1):
    return sub(other, input, alpha=alpha)


@torchsymbol(torch.mul, _T.mul, _T.__mul__, torch.multiply, _T.multiply, tags=_TAGS)
def mul(input, other):
    input = _numbers_as_torch_takes_them(input, other)
    _check_operands("mul", input, other, "any")
    return _binary_core("mul", prims.mul, Promotion.DEFAULT, input, other)
radd = _reflected(add, "__radd__")
rmul = _reflected(mul, "__rmul__")


def _div(name: str, a, b, rounding_mode):
    a = _numbers_as_torch_takes_them(a, b)
    _check_operands(name, a, b, "any")
    check(rounding_mode in (None, "trunc", "floor"), lambda: f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")
    if rounding_mode is None:
        return _binary_core(name, prims.div, Promotion.INT_TO_FLOAT, a, b)
    # exact: torch rounds the quotient to a low-precision dtype before truncating or flooring it
    return _binary_core(name, prims.div, Promotion.DEFAULT, a, b, exact=True, refuse=lambda d: d == torch.bool, rounding_mode=rounding_mode)


@torchsymbol(torch.div, _T.div, _T.__truediv__, _T.__div__, torch.divide, _T.divide, tags=_TAGS)
def div(input, other, *, rounding_mode=None):
    return _div("div", input, other, rounding_mode)


@torchsymbol(torch.true_divide, _T.true_divide, tags=_TAGS)
def true_divide(dividend, divisor):
    return _div("true_divide", dividend, divisor, None)


@torchsymbol(torch.floor_divide, _T.floor_divide, _T.__floordiv__, tags=_TAGS)
def floor_divide(input, other):
    return _div("floor_divide", input, other, "floor")


rdiv = _reflected(div, "__rtruediv__")
rfloor_divide = _reflected(floor_divide, "__rfloordiv__")

# --- powers, remainders, and friends -----------------------------------------------------


@torchsymbol(torch.pow, _T.pow, _T.__pow__, tags=_TAGS)
def pow(input, exponent):
    _check_operands("pow", input, exponent, "any")
    check(
        not (is_tensor(input) and _is_integral(input.dtype) and isinstance(exponent, int) and exponent < 0),
        lambda: "Integers to negative integer powers are not allowed.",
    )
    return _binary_core("pow", prims.pow, Promotion.DEFAULT, input, exponent, refuse=lambda d: d == torch.bool)


rpow = _reflected(pow, "__rpow__")


@torchsymbol(torch.float_power, _T.float_power, tags=_TAGS)
def float_power(input, exponent):
    _check_operands("float_power", input, exponent, "any")
    # always computed and returned in double precision
    dtype = torch.complex128 if result_dtype(input, exponent).is_complex else torch.float64
    input, exponent = broadcast(input, exponent)
    return prims.pow(to_dtype(input, dtype), to_dtype(exponent, dtype))


def _float_power_inplace(input, exponent):
    out = float_power(input, exponent)
    check(input.dtype == out.dtype, lambda: f"the base given to float_power_ has dtype {input.dtype} but the operation's result requires dtype {out.dtype}")
    return out


_no_bool = lambda d: d == torch.bool  # noqa: E731
_not_float = lambda d: not _floating(d)  # noqa: E731
remainder = _binary("remainder", prims.remainder, Promotion.DEFAULT, torch.remainder, _T.remainder, _T.__mod__, refuse=_no_bool)
rremainder = _reflected(remainder, "__rmod__")
fmod = _binary("fmod", prims.fmod, Promotion.DEFAULT, torch.fmod, _T.fmod, operands="tensor_first", refuse=_no_bool)
atan2 = _binary("atan2", prims.atan2, Promotion.INT_TO_FLOAT, torch.atan2, _T.atan2, torch.arctan2, _T.arctan2, operands="tensors")
hypot = _binary("hypot", prims.hypot, Promotion.DEFAULT, torch.hypot, _T.hypot, operands="tensors", refuse=_not_float)
copysign = _binary("copysign", prims.copysign, Promotion.INT_TO_FLOAT, torch.copysign, _T.copysign, operands="tensor_first")
# nextafter is exact by definition: it must step in the result dtype itself
nextafter = _binary("nextafter", prims.nextafter, Promotion.DEFAULT, torch.nextafter, _T.nextafter, operands="tensors", exact=True, refuse=_not_float)
maximum = _binary("maximum", prims.maximum, Promotion.DEFAULT, torch.maximum, _T.maximum, operands="tensors", exact=True)
minimum = _binary("minimum", prims.minimum, Promotion.DEFAULT, torch.minimum, _T.minimum, operands="tensors", exact=True)


def _nan_ignoring(name: str, prim, keeps_input, *torchfns):
    """fmax/fmin: like maximum/minimum, but a NaN loses to a number."""

    def op(input, other):
        _check_operands(name, input, other, "tensors")
        dtype = result_dtype(input, other)
        a, b = broadcast(to_dtype(input, dtype), to_dtype(other, dtype))
        if not dtype.is_floating_point:
            return prim(a, b)
        # one select, as eager's backward: a tie's gradient goes to `input` whole (maximum's
        # is split between the two)
        return prims.where(prims.logical_or(keeps_input(a, b), prims.isnan(b)), a, b)

    op.__name__ = name
    return torchsymbol(*torchfns, tags=_TAGS)(op)


fmax = _nan_ignoring("fmax", prims.maximum, prims.ge, torch.fmax, _T.fmax)
fmin = _nan_ignoring("fmin", prims.minimum, prims.le, torch.fmin, _T.fmin)

# --- comparisons ---------------------------------------------------------------------------

_BOOL = Promotion.ALWAYS_BOOL
eq = _binary("eq", prims.eq, _BOOL, torch.eq, _T.eq, _T.__eq__, operands="tensor_first")
ne = _binary("ne", prims.ne, _BOOL, torch.ne, _T.ne, _T.__ne__, torch.not_equal, _T.not_equal, operands="tensor_first")
lt = _binary("lt", prims.lt, _BOOL, torch.lt, _T.lt, _T.__lt__, torch.less, _T.less, operands="tensor_first")
le = _binary("le", prims.le, _BOOL, torch.le, _T.le, _T.__le__, torch.less_equal, _T.less_equal, operands="tensor_first")
gt = _binary("gt", prims.gt, _BOOL, torch.gt, _T.gt, _T.__gt__, torch.greater, _T.greater, operands="tensor_first")
ge = _binary("ge", prims.ge, _BOOL, torch.ge, _T.ge, _T.__ge__, torch.greater_equal, _T.greater_equal, operands="tensor_first")

# --- logical and bitwise -------------------------------------------------------------------


def _logical(name: str, prim, *torchfns):
    def op(input, other):
        _check_operands(name, input, other, "tensors")
        a, b = broadcast(input, other)
        return prim(to_dtype(a, torch.bool), to_dtype(b, torch.bool))  # nonzero (NaN included) is True

    op.__name__ = name
    return torchsymbol(*torchfns, tags=_TAGS)(op)


logical_and = _logical("logical_and", prims.logical_and, torch.logical_and, _T.logical_and)
logical_or = _logical("logical_or", prims.logical_or, torch.logical_or, _T.logical_or)
logical_xor = _logical("logical_xor", prims.logical_xor, torch.logical_xor, _T.logical_xor)

_not_integral = lambda d: _floating(d)  # noqa: E731
_not_int = lambda d: _floating(d) or d == torch.bool  # noqa: E731
_D = Promotion.DEFAULT
bitwise_and = _binary("bitwise_and", prims.bitwise_and, _D, torch.bitwise_and, _T.bitwise_and, _T.__and__, exact=True, refuse=_not_integral)
bitwise_or = _binary("bitwise_or", prims.bitwise_or, _D, torch.bitwise_or, _T.bitwise_or, _T.__or__, exact=True, refuse=_not_integral)
bitwise_xor = _binary("bitwise_xor", prims.bitwise_xor, _D, torch.bitwise_xor, _T.bitwise_xor, _T.__xor__, exact=True, refuse=_not_integral)
bitwise_left_shift = _binary("bitwise_left_shift", prims.bitwise_left_shift, _D, torch.bitwise_left_shift, _T.bitwise_left_shift, _T.__lshift__, exact=True, refuse=_not_int)
bitwise_right_shift = _binary("bitwise_right_shift", prims.bitwise_right_shift, _D, torch.bitwise_right_shift, _T.bitwise_right_shift, _T.__rshift__, exact=True, refuse=_not_int)
rbitwise_and = _reflected(bitwise_and, "__rand__")
rbitwise_or = _reflected(bitwise_or, "__ror__")
rbitwise_xor = _reflected(bitwise_xor, "__rxor__")
rbitwise_left_shift = _reflected(bitwise_left_shift, "__rlshift__")
rbitwise_right_shift = _reflected(bitwise_right_shift, "__rrshift__")

# --- where, clamp, lerp, addcmul, addcdiv ----------------------------------------------------


@torchsymbol(torch.where, tags=_TAGS)
def where(condition, input=None, other=None):
    if input is None and other is None:
        raise data_dependent_error("torch.where(condition)")
    check_input("where", condition, "condition")
    check(condition.dtype == torch.bool, lambda: f"where expected condition to be a boolean tensor, but got a tensor with dtype {condition.dtype}")
    for what, x in (("input", input), ("other", other)):
        check(is_tensor(x) or is_number(x), lambda: f"where(): argument '{what}' must be Tensor or Number, not {type(x).__name__}", TypeError)
    dtype = result_dtype(input, other)
    cond, a, b = broadcast(condition, input, other)
    a, b = to_dtype(a, dtype), to_dtype(b, dtype)
    if not is_tensor(a) and not is_tensor(b):
        # the prim needs one tensor operand: `a` filled into the condition's shape
        a = prims.add(prims.mul(to_dtype(cond, dtype), to_dtype(0, dtype)), a)
    return prims.where(cond, a, b)


@torchsymbol(_T.where, tags=_TAGS)
def tensor_where(input, condition, other):
    return where(condition, input, other)


@torchsymbol(torch.clamp, _T.clamp, torch.clip, _T.clip, tags=_TAGS)
def clamp(input, min=None, max=None):
    check_input("clamp", input)
    check(min is not None or max is not None, lambda: "torch.clamp: At least one of 'min' or 'max' must not be None")
    for what, x in (("min", min), ("max", max)):
        check(x is None or is_tensor(x) or is_number(x), lambda: f"clamp(): argument '{what}' must be Tensor or Number, not {type(x).__name__}", TypeError)
    check(
        min is None or max is None or is_tensor(min) == is_tensor(max),
        lambda: "clamp(): min and max must both be tensors or both be numbers",
        TypeError,
    )
    dtype = result_dtype(input, min, max)
    check(dtype != torch.bool, lambda: "clamp(): not implemented for torch.bool tensors", NotImplementedError)
    a, lo, hi = (to_dtype(x, dtype) for x in broadcast(input, min, max))
    # comparisons and selections are exact in any dtype. NaN in the input stays NaN, a NaN of
    # its own rather than the input's: eager's clamp passes no gradient to a NaN input
    keep = lambda c, x: c
    if dtype.is_floating_point:
        a = prims.where(prims.isnan(a), float("nan"), a)
        keep = lambda c, x: prims.logical_or(c, prims.isnan(x))
    if lo is not None:
        a = prims.where(keep(prims.ge(a, lo), a), a, lo)
    if hi is not None:
        a = prims.where(keep(prims.le(a, hi), a), a, hi)
    return a


@torchsymbol(torch.clamp_min, _T.clamp_min, tags=_TAGS)
def clamp_min(input, min):
    return clamp(input, min=min)


@torchsymbol(torch.clamp_max, _T.clamp_max, tags=_TAGS)
def clamp_max(input, max):
    return clamp(input, max=max)


@torchsymbol(torch.lerp, _T.lerp, tags=_TAGS)
def lerp(input, end, weight):
    check_input("lerp", input)
    check_input("lerp", end, "end")
    check(is_tensor(weight) or is_number(weight), lambda: f"lerp(): argument 'weight' must be Tensor or Number, not {type(weight).__name__}", TypeError)
    check(end.dtype == input.dtype, lambda: f"expected dtype {input.dtype} for `end` but got dtype {end.dtype}")
    check(not is_tensor(weight) or weight.dtype == input.dtype, lambda: f"expected dtype {input.dtype} for `weight` but got dtype {weight.dtype}")
    not_implemented_for("lerp", input, not _floating(input.dtype))
    compute = computation_dtype(input.dtype)
    a, e, w = (to_dtype(x, compute) for x in broadcast(input, end, weight))
    diff = prims.sub(e, a)
    # torch's formula: from the nearer end, so that weight 0 and 1 give the ends exactly
    low = lambda: prims.add(a, prims.mul(w, diff))  # noqa: E731
    high = lambda: prims.sub(e, prims.mul(diff, prims.sub(1.0, w) if is_tensor(w) else 1.0 - w))  # noqa: E731
    if not is_tensor(w):
        out = low() if -0.5 < w < 0.5 else high()
    else:
        out = prims.where(prims.lt(prims.abs(w), 0.5), low(), high())
    return to_dtype(out, input.dtype)


def _addc(name: str, prim, input, tensor1, tensor2, value):
    for what, x in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        check_input(name, x, what)
    check(is_number(value), lambda: f"{name}(): argument 'value' must be Number, not {type(value).__name__}", TypeError)
    compute, result = promote(input, tensor1, tensor2)
    check(result != torch.bool, lambda: f"{name}(): not implemented for torch.bool tensors", NotImplementedError)
    operands = broadcast(*(to_dtype(x, compute) for x in (input, tensor1, tensor2)))
    compute = computation_dtype(compute)
    a, t1, t2 = (to_dtype(x, compute) for x in operands)
    if type(value) is NumberProxy or value != 1:  # (a run-time one: multiplied, never compared)
        # torch casts value to the tensors' type (an integral one truncates it)
        t1 = prims.mul(t1, int(value) if _is_integral(compute) else to_dtype(value, compute))
    return to_dtype(prims.add(a, prim(t1, t2)), result)


@torchsymbol(torch.addcmul, _T.addcmul, tags=_TAGS)
def addcmul(input, tensor1, tensor2, *, value=1):
    return _addc("addcmul", prims.mul, input, tensor1, tensor2, value)


@torchsymbol(torch.addcdiv, _T.addcdiv, tags=_TAGS)
def addcdiv(input, tensor1, tensor2, *, value=1):
    if is_tensor(tensor1) and is_tensor(tensor2):
        check(
            not (_is_integral(tensor1.dtype) and _is_integral(tensor2.dtype)),
            lambda: "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2. Use torch.addcmul with torch.true_divide instead.",
        )
    return _addc("addcdiv", prims.div, input, tensor1, tensor2, value)


# --- in-place comparisons and logical ops on tensors in autograd ----------------------------
# Eager's in-place comparison (`x.lt_(y)`) keeps x in autograd: its result requires grad where x
# or y does, and its backward (LtBackward1) gives each of them a zero gradient. An in-place
# logical op (`x.logical_or_(y)`) has no derivative, and autograd does not see the write at all:
# the result keeps x's history, so a gradient reaches x's earlier value unchanged and y gets none.


_COMPARISONS = {op.name: op for op in (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor)}


def _differentiable(t) -> bool:
    return is_tensor(t) and t.requires_grad


def _comparison_in_eager(a, b, *, op: str):
    # what the op below runs as, outside squall's grad rules: the comparison in a's dtype
    return getattr(torch, op)(a, b).to(a.dtype)


@torchsymbol(_comparison_in_eager, id="ltorch.comparison_written")
def comparison_written(a, b, *, op: str):
    """The value `a.lt_(b)` (`op` "lt"; eq, ne, le, gt, ge alike) writes into a floating `a`,
    where a or b requires grad: the comparison in a's dtype, requiring grad, with a zero
    gradient to each of a and b that requires one (its grad rule)."""
    out = prims.convert_element_type(_COMPARISONS[op](a, b), a.dtype)
    out._requires_grad = True
    return out


def _logical_in_eager(a, b, *, op: str):
    # what the op below runs as (a callable of its own: each ltorch op stands for one)
    return _comparison_in_eager(a, b, op=op)


@torchsymbol(_logical_in_eager, id="ltorch.logical_written")
def logical_written(a, b, *, op: str):
    """The value `a.logical_or_(b)` (`op` "logical_or"; logical_and, logical_xor alike) writes
    into a floating `a` that requires grad: the logical op in a's dtype, through which a
    gradient reaches `a` unchanged and none reaches b, as eager's autograd, which does not see
    the write (its grad rule)."""
    out = prims.convert_element_type(_COMPARISONS[op](a, b), a.dtype)
    out._requires_grad = True
    return out


def _comparison_in_place(op):
    def written(a, b):
        if torch.is_grad_enabled() and is_tensor(a) and _floating(a.dtype) and (_differentiable(a) or _differentiable(b)):
            return comparison_written(a, b, op=op.name)
        return op(a, b)

    written.__name__ = f"{op.name}_"
    return written


def _logical_in_place(op):
    def written(a, other):
        if torch.is_grad_enabled() and is_tensor(a) and _floating(a.dtype) and _differentiable(a):
            return logical_written(a, other, op=op.name)
        return op(a, other)

    written.__name__ = f"{op.name}_"
    return written


# --- in-place forms --------------------------------------------------------------------------

add_ = inplace(add, _T.add_, _T.__iadd__, checks_overlap=True)
sub_ = inplace(sub, _T.sub_, _T.__isub__, _T.subtract_, checks_overlap=True)
mul_ = inplace(mul, _T.mul_, _T.__imul__, _T.multiply_, checks_overlap=True)
div_ = inplace(div, _T.div_, _T.__itruediv__, _T.__idiv__, _T.divide_, checks_overlap=True)
true_divide_ = inplace(true_divide, _T.true_divide_, checks_overlap=True)
floor_divide_ = inplace(floor_divide, _T.floor_divide_, _T.__ifloordiv__, checks_overlap=True)
pow_ = inplace(pow, _T.pow_, _T.__ipow__, checks_overlap=True)
float_power_ = inplace(_float_power_inplace, _T.float_power_, checks_overlap=True)
remainder_ = inplace(remainder, _T.remainder_, _T.__imod__, checks_overlap=True)
fmod_ = inplace(fmod, _T.fmod_, checks_overlap=True)
atan2_ = inplace(atan2, _T.atan2_, _T.arctan2_, checks_overlap=True)
hypot_ = inplace(hypot, _T.hypot_, checks_overlap=True)
copysign_ = inplace(copysign, _T.copysign_, checks_overlap=True)
nextafter_ = inplace(nextafter, _T.nextafter_, checks_overlap=True)
eq_ = inplace(_comparison_in_place(eq), _T.eq_, checks_overlap=True)
ne_ = inplace(_comparison_in_place(ne), _T.ne_, _T.not_equal_, checks_overlap=True)
lt_ = inplace(_comparison_in_place(lt), _T.lt_, _T.less_, checks_overlap=True)
le_ = inplace(_comparison_in_place(le), _T.le_, _T.less_equal_, checks_overlap=True)
gt_ = inplace(_comparison_in_place(gt), _T.gt_, _T.greater_, checks_overlap=True)
ge_ = inplace(_comparison_in_place(ge), _T.ge_, _T.greater_equal_, checks_overlap=True)
logical_and_ = inplace(_logical_in_place(logical_and), _T.logical_and_, checks_overlap=True)
logical_or_ = inplace(_logical_in_place(logical_or), _T.logical_or_, checks_overlap=True)
logical_xor_ = inplace(_logical_in_place(logical_xor), _T.logical_xor_, checks_overlap=True)
bitwise_and_ = inplace(bitwise_and, _T.bitwise_and_, _T.__iand__, checks_overlap=True)
bitwise_or_ = inplace(bitwise_or, _T.bitwise_or_, _T.__ior__, checks_overlap=True)
bitwise_xor_ = inplace(bitwise_xor, _T.bitwise_xor_, _T.__ixor__, checks_overlap=True)
bitwise_left_shift_ = inplace(bitwise_left_shift, _T.bitwise_left_shift_, _T.__ilshift__, checks_overlap=True)
bitwise_right_shift_ = inplace(bitwise_right_shift, _T.bitwise_right_shift_, _T.__irshift__, checks_overlap=True)
clamp_ = inplace(clamp, _T.clamp_, _T.clip_, torch.clamp_, torch.clip_, checks_overlap=True)
clamp_min_ = inplace(clamp_min, _T.clamp_min_, checks_overlap=True)
clamp_max_ = inplace(clamp_max, _T.clamp_max_, checks_overlap=True)
lerp_ = inplace(lerp, _T.lerp_, checks_overlap=True)
addcmul_ = inplace(addcmul, _T.addcmul_, checks_overlap=True)
addcdiv_ = inplace(addcdiv, _T.addcdiv_, checks_overlap=True)

__all__ = [
    "add", "sub", "rsub", "mul", "radd", "rmul", "div", "true_divide", "floor_divide", "rdiv",
    "rfloor_divide", "pow", "rpow", "float_power", "remainder", "rremainder", "fmod", "atan2",
    "hypot", "copysign", "nextafter", "maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le",
    "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "rbitwise_and", "rbitwise_or",
    "rbitwise_xor", "rbitwise_left_shift", "rbitwise_right_shift", "where", "tensor_where", "clamp",
    "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv", "add_", "sub_", "mul_", "div_",
    "true_divide_", "floor_divide_", "pow_", "float_power_", "remainder_", "fmod_", "atan2_",
    "hypot_", "copysign_", "nextafter_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_", "logical_and_",
    "logical_or_", "logical_xor_", "bitwise_and_", "bitwise_or_", "bitwise_xor_",
    "bitwise_left_shift_", "bitwise_right_shift_", "clamp_", "clamp_min_", "clamp_max_", "lerp_",
    "addcmul_", "addcdiv_", "comparison_written", "logical_written",
]
