"""Number prims: arithmetic on Python numbers known only at run time (`NumberProxy`).

`s * 2`, `s > 0` or `-s` on a dynamic number is recorded as one of these, so the
generated code computes it from the call's own number. Each prim's meta computes the
result's value in the call being traced (which speculation reads where the program needs
it) with the Python operator itself, so the result's Python type is the one Python gives
(`int / int` is a float, a comparison a bool). The torch executor runs the same operator.
"""
from __future__ import annotations

import operator
from collections.abc import Callable

from .base import PrimIDs, check, make_prim
from ..proxies import NumberProxy

# the operator each number prim applies: its name in a NumberProxy dunder -> Python's function
OPERATORS: dict[str, Callable] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "neg": operator.neg,
    "pos": operator.pos,
    "abs": operator.abs,
}

# how a number is converted to another Python type (`convert_number`), by the type's name
CONVERSIONS: dict[str, Callable] = {"bool": bool, "int": int, "float": float, "complex": complex}

_NUMBER_TYPES = (bool, int, float, complex)


def value_of(x):
    """The value of `x` in the call being traced: a NumberProxy's recorded value, else `x`."""
    return x.value if type(x) is NumberProxy else x


def _number_op(id: str, name: str, fn: Callable):
    def meta(*operands):
        for x in operands:
            check(type(x) is NumberProxy or type(x) in _NUMBER_TYPES,
                  lambda: f"{name} expects Python numbers, got {type(x).__name__}", TypeError)
        value = fn(*map(value_of, operands))
        return NumberProxy(None, type(value), value)

    meta.__name__ = f"_{name}_meta"
    return make_prim(id, name, meta=meta)


number_add = _number_op(PrimIDs.NUMBER_ADD, "number_add", operator.add)
number_sub = _number_op(PrimIDs.NUMBER_SUB, "number_sub", operator.sub)
number_mul = _number_op(PrimIDs.NUMBER_MUL, "number_mul", operator.mul)
number_truediv = _number_op(PrimIDs.NUMBER_TRUEDIV, "number_truediv", operator.truediv)
number_floordiv = _number_op(PrimIDs.NUMBER_FLOORDIV, "number_floordiv", operator.floordiv)
number_mod = _number_op(PrimIDs.NUMBER_MOD, "number_mod", operator.mod)
number_pow = _number_op(PrimIDs.NUMBER_POW, "number_pow", operator.pow)
number_eq = _number_op(PrimIDs.NUMBER_EQ, "number_eq", operator.eq)
number_ne = _number_op(PrimIDs.NUMBER_NE, "number_ne", operator.ne)
number_lt = _number_op(PrimIDs.NUMBER_LT, "number_lt", operator.lt)
number_le = _number_op(PrimIDs.NUMBER_LE, "number_le", operator.le)
number_gt = _number_op(PrimIDs.NUMBER_GT, "number_gt", operator.gt)
number_ge = _number_op(PrimIDs.NUMBER_GE, "number_ge", operator.ge)
number_and = _number_op(PrimIDs.NUMBER_AND, "number_and", operator.and_)
number_or = _number_op(PrimIDs.NUMBER_OR, "number_or", operator.or_)
number_xor = _number_op(PrimIDs.NUMBER_XOR, "number_xor", operator.xor)
number_neg = _number_op(PrimIDs.NUMBER_NEG, "number_neg", operator.neg)
number_pos = _number_op(PrimIDs.NUMBER_POS, "number_pos", operator.pos)
number_abs = _number_op(PrimIDs.NUMBER_ABS, "number_abs", operator.abs)

# NumberProxy's dunder name -> its prim
BY_OPERATOR = {name: globals()[f"number_{name}"] for name in OPERATORS}


def convert(a, python_type: str):
    """The Python conversion `python_type(a)` (e.g. "float"): what type promotion asks of a number."""
    return CONVERSIONS[python_type](a)


def _convert_number_meta(a, python_type: str):
    check(type(a) is NumberProxy or type(a) in _NUMBER_TYPES, lambda: f"convert_number expects a Python number, got {type(a).__name__}", TypeError)
    check(python_type in CONVERSIONS, lambda: f"convert_number converts to {sorted(CONVERSIONS)}, not {python_type!r}", ValueError)
    value = convert(value_of(a), python_type)
    return NumberProxy(None, type(value), value)


convert_number = make_prim(PrimIDs.CONVERT_NUMBER, "convert_number", meta=_convert_number_meta)

__all__ = [name for name, value in list(globals().items()) if not name.startswith("_") and getattr(value, "is_prim", False)]
