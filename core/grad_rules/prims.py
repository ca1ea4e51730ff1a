"""Grad rules for prims: one backward per differentiable prim, over prims.

Prims are strict (operands share shape and dtype, no broadcasting), so their rules are
short: a rule gets a `GradCall` and returns one gradient per tensor argument. Written
with `per_argument`, a rule returns one entry per positional argument (None for a
number or an argument without a gradient) and the wrapper keeps the tensors' entries.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from .. import prims
from ..gradients import GradCall, GradRules
from ..prims.base import PrimIDs
from ..proxies import TensorProxy

__all__ = ["register_prim_rules", "per_argument"]


def per_argument(rule: Callable[[GradCall], tuple]) -> Callable[[GradCall], tuple]:
    """Adapt a rule that returns one gradient per positional argument to one per tensor input."""

    def backward(call: GradCall) -> tuple:
        grads = rule(call)
        return tuple(g for a, g in zip(call.args, grads) if isinstance(a, TensorProxy))

    backward.__name__ = getattr(rule, "__name__", "backward")
    return backward


def _sum_to(g: TensorProxy, like: TensorProxy) -> TensorProxy:
    """`g` reduced to `like`'s shape (prims do not broadcast, so shapes already agree) and dtype."""
    if g.dtype != like.dtype:
        g = prims.convert_element_type(g, like.dtype)
    return g


def _unary(fn: Callable[[TensorProxy, TensorProxy, TensorProxy], TensorProxy]) -> Callable[[GradCall], tuple]:
    """A rule for a unary prim from d(out)/d(a) written as fn(a, out, g) -> grad."""

    def backward(call: GradCall) -> tuple:
        (a,) = call.args
        return (fn(a, call.output, call.g),)

    return backward


def _neg(a, out, g):
    return prims.neg(g)


def _exp(a, out, g):
    return prims.mul(g, out)


def _expm1(a, out, g):
    return prims.mul(g, prims.add(out, 1))


def _log(a, out, g):
    return prims.div(g, a)


def _log1p(a, out, g):
    return prims.div(g, prims.add(a, 1))


def _sqrt(a, out, g):
    return prims.div(g, prims.mul(out, 2))


def _rsqrt(a, out, g):
    # d/da a^-1/2 = -1/2 a^-3/2 = -1/2 out^3
    return prims.mul(g, prims.mul(prims.mul(prims.mul(out, out), out), -0.5))


def _sin(a, out, g):
    return prims.mul(g, prims.cos(a))


def _cos(a, out, g):
    return prims.neg(prims.mul(g, prims.sin(a)))


def _tanh(a, out, g):
    return prims.mul(g, prims.sub(1, prims.mul(out, out)))


def _erf(a, out, g):
    # 2/sqrt(pi) * exp(-a^2)
    return prims.mul(g, prims.mul(prims.exp(prims.neg(prims.mul(a, a))), 2.0 / math.sqrt(math.pi)))


def _reciprocal(a, out, g):
    return prims.neg(prims.mul(g, prims.mul(out, out)))


def _abs(a, out, g):
    return prims.mul(g, prims.sign(a))


@per_argument
def _add(call: GradCall) -> tuple:
    return call.g, call.g


@per_argument
def _sub(call: GradCall) -> tuple:
    return call.g, prims.neg(call.g)


@per_argument
def _mul(call: GradCall) -> tuple:
    a, b = call.args
    return prims.mul(call.g, b), prims.mul(call.g, a)


@per_argument
def _div(call: GradCall) -> tuple:
    a, b, rounding_mode = call.args
    if rounding_mode is not None:  # floor/trunc division is flat almost everywhere
        return None, None
    ga = prims.div(call.g, b)
    gb = prims.neg(prims.div(prims.mul(call.g, call.output), b)) if isinstance(b, TensorProxy) else None
    return ga, gb


@per_argument
def _where(call: GradCall) -> tuple:
    pred, a, b = call.args
    zero = 0 if not call.g.dtype.is_complex else 0j
    return None, prims.where(pred, call.g, zero), prims.where(pred, zero, call.g)


@per_argument
def _convert_element_type(call: GradCall) -> tuple:
    a, dtype = call.args
    return prims.convert_element_type(call.g, a.dtype), None


@per_argument
def _sum(call: GradCall) -> tuple:
    a, dims = call.args
    kept = tuple(d for d in range(a.ndim) if d not in dims)
    return prims.broadcast_in_dim(call.g, tuple(a.shape), kept), None


@per_argument
def _broadcast_in_dim(call: GradCall) -> tuple:
    a, shape, broadcast_dimensions = call.args
    # sum over the new dimensions and over the kept ones a had as size 1
    new = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    expanded = tuple(d for i, d in enumerate(broadcast_dimensions) if a.shape[i] == 1 and shape[d] != 1)
    g = call.g
    if new or expanded:
        g = prims.sum(g, tuple(sorted(new + expanded)))
    if tuple(g.shape) != tuple(a.shape):
        g = prims.reshape(g, tuple(a.shape))
    return g, None, None


@per_argument
def _reshape(call: GradCall) -> tuple:
    a, shape = call.args
    return prims.reshape(call.g, tuple(a.shape)), None


@per_argument
def _transpose(call: GradCall) -> tuple:
    a, permutation = call.args
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return prims.transpose(call.g, tuple(inverse)), None


@per_argument
def _matmul(call: GradCall) -> tuple:
    a, b = call.args
    g = call.g
    if a.ndim == 1 and b.ndim == 1:  # dot: g is a scalar
        return prims.mul(b, g), prims.mul(a, g)
    if a.ndim == 2 and b.ndim == 2:
        return prims.matmul(g, prims.transpose(b, (1, 0))), prims.matmul(prims.transpose(a, (1, 0)), g)
    raise NotImplementedError("squall: the prims.matmul grad rule handles 1-d and 2-d operands")


def register_prim_rules(rules: GradRules) -> None:
    """File a rule for every differentiable prim that has one here."""
    unary = {
        PrimIDs.NEG: _neg,
        PrimIDs.EXP: _exp,
        PrimIDs.EXPM1: _expm1,
        PrimIDs.LOG: _log,
        PrimIDs.LOG1P: _log1p,
        PrimIDs.SQRT: _sqrt,
        PrimIDs.RSQRT: _rsqrt,
        PrimIDs.SIN: _sin,
        PrimIDs.COS: _cos,
        PrimIDs.TANH: _tanh,
        PrimIDs.ERF: _erf,
        PrimIDs.RECIPROCAL: _reciprocal,
        PrimIDs.ABS: _abs,
    }
    for op, fn in unary.items():
        rules.register(op, _unary(fn))
    for op, rule in {
        PrimIDs.ADD: _add,
        PrimIDs.SUB: _sub,
        PrimIDs.MUL: _mul,
        PrimIDs.DIV: _div,
        PrimIDs.WHERE: _where,
        PrimIDs.CONVERT_ELEMENT_TYPE: _convert_element_type,
        PrimIDs.SUM: _sum,
        PrimIDs.BROADCAST_IN_DIM: _broadcast_in_dim,
        PrimIDs.RESHAPE: _reshape,
        PrimIDs.TRANSPOSE: _transpose,
        PrimIDs.MATMUL: _matmul,
    }.items():
        rules.register(op, rule)
