"""Grad rules for prims: one backward per differentiable prim, over prims.

Prims are strict (operands share shape and dtype, no broadcasting), so their rules are
short: a rule gets a `GradCall` and returns one gradient per tensor argument. Written
with `per_argument`, a rule returns one entry per positional argument (None for a
number or an argument without a gradient) and the wrapper keeps the tensors' entries.

This module holds the elementwise rules and `register_prim_rules`, which files every
prim rule; reductions and linear algebra are in `prim_reductions`, shape and indexing
in `prim_shapes`. Formulas follow PyTorch's derivatives.yaml, so gradients agree with
eager's at the edges too (ties, zeros, non-finite values). Complex operands follow
PyTorch's convention, grad · conj(d out / d in); a rule whose formula does not is
wrapped in `real_only`, which refuses complex operands rather than be wrong.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ... import prims
from ...ltorch import kernels as k
from ...prims.base import PrimIDs
from ...proxies import TensorProxy
from ..gradients import GradCall, GradRules
from .prim_reductions import reduction_rules
from .prim_shapes import shape_rules
from .support import conj, per_argument, real_only, to_dtype, zeros

__all__ = ["register_prim_rules", "per_argument"]


def _unary(fn: Callable[[TensorProxy, TensorProxy, TensorProxy], TensorProxy]) -> Callable[[GradCall], tuple]:
    """A rule for a unary prim from its gradient written as fn(a, out, g) -> grad."""

    def backward(call: GradCall) -> tuple:
        (a,) = call.args
        return (fn(a, call.output, call.g),)

    backward.__name__ = fn.__name__
    return backward


def _neg(a, out, g):
    return prims.neg(g)


def _exp(a, out, g):
    return prims.mul(g, conj(out))


def _expm1(a, out, g):
    return prims.mul(g, conj(prims.add(out, 1)))


def _exp2(a, out, g):
    return prims.mul(g, prims.mul(conj(out), math.log(2)))


def _log(a, out, g):
    return prims.div(g, conj(a))


def _log1p(a, out, g):
    return prims.div(g, conj(prims.add(a, 1)))


def _log2(a, out, g):
    return prims.div(g, prims.mul(conj(a), math.log(2)))


def _log10(a, out, g):
    return prims.div(g, prims.mul(conj(a), math.log(10)))


def _sqrt(a, out, g):
    return prims.div(g, prims.mul(conj(out), 2))


def _rsqrt(a, out, g):
    # d/da a^-1/2 = -1/2 a^-3/2 = -1/2 out^3, as eager's rsqrt backward computes it: three kernels
    return prims.mul(prims.mul(g, -0.5), conj(prims.pow(out, 3)))


def _sin(a, out, g):
    return prims.mul(g, conj(prims.cos(a)))


def _cos(a, out, g):
    return prims.neg(prims.mul(g, conj(prims.sin(a))))


def _tan(a, out, g):
    return prims.mul(g, conj(prims.add(prims.mul(out, out), 1)))


def _one_minus_square(a):
    return prims.sub(1, prims.mul(a, a))


def _asin(a, out, g):
    return prims.mul(g, conj(prims.rsqrt(_one_minus_square(a))))


def _acos(a, out, g):
    return prims.neg(prims.mul(g, conj(prims.rsqrt(_one_minus_square(a)))))


def _atan(a, out, g):
    return prims.div(g, conj(prims.add(prims.mul(a, a), 1)))


def _asinh(a, out, g):
    return prims.mul(g, conj(prims.rsqrt(prims.add(prims.mul(a, a), 1))))


def _acosh(a, out, g):
    if a.dtype.is_complex:  # sqrt(a^2 - 1) takes the wrong branch off the real axis
        return prims.mul(g, conj(prims.mul(prims.rsqrt(prims.add(a, 1)), prims.rsqrt(prims.sub(a, 1)))))
    return prims.mul(g, prims.rsqrt(prims.sub(prims.mul(a, a), 1)))


def _atanh(a, out, g):
    return prims.div(g, conj(_one_minus_square(a)))


def _sinh(a, out, g):
    return prims.mul(g, conj(prims.cosh(a)))


def _cosh(a, out, g):
    return prims.mul(g, conj(prims.sinh(a)))


def _tanh(a, out, g):
    if not out.dtype.is_complex:
        return k.tanh_backward(g, out)  # eager's one kernel, where the formula is three
    return prims.mul(g, conj(prims.sub(1, prims.mul(out, out))))


def _erf(a, out, g):
    # 2/sqrt(pi) * exp(-a^2)
    return prims.mul(g, prims.mul(prims.exp(prims.neg(prims.mul(a, a))), 2.0 / math.sqrt(math.pi)))


def _erfc(a, out, g):
    return prims.mul(g, prims.mul(prims.exp(prims.neg(prims.mul(a, a))), -2.0 / math.sqrt(math.pi)))


def _erfinv(a, out, g):
    # d/da erfinv(a) = sqrt(pi)/2 * exp(erfinv(a)^2)
    return prims.mul(g, prims.mul(prims.exp(prims.mul(out, out)), math.sqrt(math.pi) / 2))


def _lgamma(a, out, g):
    return prims.mul(g, prims.digamma(a))


def _trigamma(x: TensorProxy) -> TensorProxy:
    """polygamma(1, x), which has no prim: the series ATen's trigamma evaluates, step by step.

    Below 1/2 the reflection psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x); then six steps of
    psi1(x) = 1/x^2 + psi1(x + 1); then the asymptotic series at x + 6.
    """
    reflect = prims.lt(x, 0.5)
    sin_pi_x = prims.sin(prims.mul(x, math.pi))
    correction = prims.where(reflect, prims.neg(prims.div(math.pi**2, prims.mul(sin_pi_x, sin_pi_x))), 0.0)
    x = prims.where(reflect, prims.sub(1, x), x)
    result = correction
    for _ in range(6):
        result = prims.add(result, prims.reciprocal(prims.mul(x, x)))
        x = prims.add(x, 1)
    ixx = prims.reciprocal(prims.mul(x, x))
    series = prims.mul(ixx, prims.sub(1 / 30, prims.mul(ixx, 1 / 42)))
    series = prims.add(prims.add(prims.div(0.5, x), 1), prims.mul(ixx, prims.sub(1 / 6, series)))
    result = prims.add(result, prims.div(series, x))
    # ATen negates the whole sum below 1/2: -(-pi^2/sin^2 + psi1(1 - x)) = pi^2/sin^2 - psi1(1 - x)
    return prims.where(reflect, prims.neg(result), result)


def _digamma(a, out, g):
    return prims.mul(g, _trigamma(a))


def _reciprocal(a, out, g):
    return prims.neg(prims.mul(g, conj(prims.mul(out, out))))


def _abs(a, out, g):
    return prims.mul(g, prims.sign(a))


def _flat(a, out, g):
    """floor, ceil, round, trunc, sign: piecewise constant, so PyTorch's gradient is zero."""
    return zeros(a)


@per_argument
def _add(call: GradCall) -> tuple:
    return call.g, call.g


@per_argument
def _sub(call: GradCall) -> tuple:
    return call.g, prims.neg(call.g)


def _conj_operand(x):
    return x.conjugate() if isinstance(x, complex) else conj(x) if isinstance(x, TensorProxy) else x


@per_argument
def _mul(call: GradCall) -> tuple:
    a, b = call.args
    ga = prims.mul(call.g, _conj_operand(b)) if isinstance(a, TensorProxy) else None
    gb = prims.mul(call.g, _conj_operand(a)) if isinstance(b, TensorProxy) else None
    return ga, gb


@per_argument
def _div(call: GradCall) -> tuple:
    a, b, rounding_mode = call.args
    if rounding_mode is not None:  # floor/trunc division is flat almost everywhere
        return None, None, None
    ga = prims.div(call.g, _conj_operand(b)) if isinstance(a, TensorProxy) else None
    # d(a/b)/db = -out/b
    gb = prims.neg(prims.div(prims.mul(call.g, conj(call.output)), conj(b))) if isinstance(b, TensorProxy) else None
    return ga, gb, None


@per_argument
def _pow(call: GradCall) -> tuple:
    a, b = call.args
    g, out = call.g, call.output
    ga = gb = None
    if isinstance(a, TensorProxy):
        if isinstance(b, TensorProxy):  # b * a^(b-1), but 0 where b == 0 (even at a == 0)
            ga = prims.where(prims.eq(b, 0), 0.0, prims.mul(g, prims.mul(b, prims.pow(a, prims.sub(b, 1)))))
        elif b == 0:
            ga = zeros(a)
        else:
            ga = prims.mul(g, prims.mul(prims.pow(a, b - 1), b))
    if isinstance(b, TensorProxy):  # out * log(a), but 0 where a == 0 and b >= 0
        if isinstance(a, TensorProxy):
            flat = prims.logical_and(prims.eq(a, 0), prims.ge(b, 0))
            gb = prims.where(flat, 0.0, prims.mul(g, prims.mul(out, prims.log(a))))
        elif a == 0:
            gb = prims.where(prims.ge(b, 0), 0.0, prims.mul(g, prims.mul(out, -math.inf)))
        else:
            gb = prims.mul(g, prims.mul(out, math.log(a) if a > 0 else math.nan))
    return ga, gb


def _maximum_like(keep_a_unless: Callable, keep_b_unless: Callable) -> Callable[[GradCall], tuple]:
    """maximum/minimum: the gradient goes to the chosen operand, split evenly on ties (as PyTorch)."""

    @per_argument
    def backward(call: GradCall) -> tuple:
        a, b = call.args
        g = call.g
        shared = prims.where(prims.eq(a, b), prims.mul(g, 0.5), g)
        ga = prims.where(keep_a_unless(a, b), 0.0, shared) if isinstance(a, TensorProxy) else None
        gb = prims.where(keep_b_unless(a, b), 0.0, shared) if isinstance(b, TensorProxy) else None
        return ga, gb

    return backward


def _modulo(rounding_mode: str) -> Callable[[GradCall], tuple]:
    """remainder (floor) and fmod (trunc): a - b * rounded(a / b), the rounded quotient held flat."""

    @per_argument
    def backward(call: GradCall) -> tuple:
        a, b = call.args
        gb = prims.neg(prims.mul(call.g, prims.div(a, b, rounding_mode))) if isinstance(b, TensorProxy) else None
        return call.g, gb

    return backward


@per_argument
def _atan2(call: GradCall) -> tuple:
    a, b = call.args
    g = call.g
    like = a if isinstance(a, TensorProxy) else b
    square = lambda x: prims.mul(x, x) if isinstance(x, TensorProxy) else prims.full(tuple(like.shape), float(x * x), device=like.device, dtype=like.dtype)  # noqa: E731
    # at the origin eager's gradient is 0, not 0 * inf (its recip is masked there)
    radius2 = prims.add(square(a), square(b))
    recip = prims.where(prims.eq(radius2, 0), 0.0, prims.reciprocal(radius2))
    ga = prims.mul(g, prims.mul(b, recip)) if isinstance(a, TensorProxy) else None
    gb = prims.mul(g, prims.mul(prims.neg(a) if isinstance(a, TensorProxy) else -a, recip)) if isinstance(b, TensorProxy) else None
    return ga, gb


@per_argument
def _hypot(call: GradCall) -> tuple:
    a, b = call.args
    g, out = call.g, call.output
    ga = prims.mul(g, prims.div(a, out)) if isinstance(a, TensorProxy) else None
    gb = prims.mul(g, prims.div(b, out)) if isinstance(b, TensorProxy) else None
    return ga, gb


@per_argument
def _copysign(call: GradCall) -> tuple:
    a, b = call.args
    # out / a is the sign flip (+-1); PyTorch gives 0 at a == 0. The sign operand gets nothing.
    flip = prims.where(prims.eq(a, 0), 0.0, prims.div(call.output, a))
    return prims.mul(call.g, flip), None


@per_argument
def _nextafter(call: GradCall) -> tuple:
    # PyTorch treats nextafter(a, b) as a itself (a one-ulp step) except where a == b, where the
    # output does not move and a gets no gradient; b never gets one
    a, b = call.args
    return prims.where(prims.eq(a, b), 0.0, call.g), None


@per_argument
def _real(call: GradCall) -> tuple:
    (a,) = call.args
    return (prims.convert_element_type(call.g, a.dtype),)


@per_argument
def _imag(call: GradCall) -> tuple:
    (a,) = call.args
    # imag(z) = -i/2 (z - conj z): the gradient is g * i
    return (prims.mul(prims.convert_element_type(call.g, a.dtype), 1j),)


@per_argument
def _where(call: GradCall) -> tuple:
    pred, a, b = call.args
    zero = 0 if not call.g.dtype.is_complex else 0j
    return None, prims.where(pred, call.g, zero), prims.where(pred, zero, call.g)


@per_argument
def _convert_element_type(call: GradCall) -> tuple:
    a, dtype = call.args
    # (a cotangent already of the input's dtype stays as it is: eager's ToCopyBackward converts nothing)
    return to_dtype(call.g, a.dtype), None


@per_argument
def _device_put(call: GradCall) -> tuple:
    # the cotangent arrives on the output's device and goes back to the input's, as eager's
    # ToCopyBackward moves it (synchronously: a gradient is not read before it lands)
    a, device = call.args
    return prims.device_put(call.g, a.device, non_blocking=False), None


def register_prim_rules(rules: GradRules) -> None:
    """File a rule for every differentiable prim."""
    unary = {
        PrimIDs.NEG: _neg,
        PrimIDs.EXP: _exp,
        PrimIDs.EXPM1: _expm1,
        PrimIDs.EXP2: _exp2,
        PrimIDs.LOG: _log,
        PrimIDs.LOG1P: _log1p,
        PrimIDs.LOG2: _log2,
        PrimIDs.LOG10: _log10,
        PrimIDs.SQRT: _sqrt,
        PrimIDs.RSQRT: _rsqrt,
        PrimIDs.SIN: _sin,
        PrimIDs.COS: _cos,
        PrimIDs.TAN: _tan,
        PrimIDs.ASIN: _asin,
        PrimIDs.ACOS: _acos,
        PrimIDs.ATAN: _atan,
        PrimIDs.ASINH: _asinh,
        PrimIDs.ACOSH: _acosh,
        PrimIDs.ATANH: _atanh,
        PrimIDs.SINH: _sinh,
        PrimIDs.COSH: _cosh,
        PrimIDs.TANH: _tanh,
        PrimIDs.ERF: _erf,
        PrimIDs.ERFC: _erfc,
        PrimIDs.ERFINV: _erfinv,
        PrimIDs.LGAMMA: _lgamma,
        PrimIDs.DIGAMMA: _digamma,
        PrimIDs.RECIPROCAL: _reciprocal,
        PrimIDs.FLOOR: _flat,
        PrimIDs.CEIL: _flat,
        PrimIDs.ROUND: _flat,
        PrimIDs.TRUNC: _flat,
        PrimIDs.SIGN: _flat,
    }
    for op, fn in unary.items():
        rules.register(op, _unary(fn))
    # |z| of a complex z has gradient g * z/|z|, which needs a complex sign this rule lacks
    rules.register(PrimIDs.ABS, real_only("prims.abs", _unary(_abs)))
    rules.register(PrimIDs.POW, real_only("prims.pow", _pow))
    for op, rule in {
        PrimIDs.ADD: _add,
        PrimIDs.SUB: _sub,
        PrimIDs.MUL: _mul,
        PrimIDs.DIV: _div,
        PrimIDs.MAXIMUM: _maximum_like(prims.lt, prims.gt),
        PrimIDs.MINIMUM: _maximum_like(prims.gt, prims.lt),
        PrimIDs.REMAINDER: _modulo("floor"),
        PrimIDs.FMOD: _modulo("trunc"),
        PrimIDs.ATAN2: _atan2,
        PrimIDs.HYPOT: _hypot,
        PrimIDs.COPYSIGN: _copysign,
        PrimIDs.NEXTAFTER: _nextafter,
        PrimIDs.REAL: _real,
        PrimIDs.IMAG: _imag,
        PrimIDs.WHERE: _where,
        PrimIDs.CONVERT_ELEMENT_TYPE: _convert_element_type,
        PrimIDs.DEVICE_PUT: _device_put,
    }.items():
        rules.register(op, rule)
    for op, rule in {**reduction_rules(), **shape_rules()}.items():
        rules.register(op, rule)
