"""The translation table: each supported prim as a C++ expression, per dtype category.

A template's `{0}`, `{1}`, `{2}` are the operands, already loaded in the operation's
compute type ("opmath": float for float16, the dtype itself otherwise, as PyTorch's
CUDA kernels compute); `$` is the suffix of the C math function for that type (`f` for
float, nothing for double). The generated statement then rounds the result to the
output's dtype, so every intermediate is rounded exactly where the torch executor
rounds it. Where C and PyTorch disagree (NaN-propagating max/min, Python-style
remainder and floor division, shifts past the bit width, round-half-even), the template
calls a helper from `PREAMBLE`, written to PyTorch's definition.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import torch

from squall.extend import PrimIDs

__all__ = ["Translation", "TRANSLATIONS", "C_TYPES", "CUPY_TYPES", "PREAMBLE", "opmath", "literal", "translate", "category"]

# torch dtype -> the C type CuPy's ElementwiseKernel gives a parameter of that dtype
C_TYPES = {
    torch.bool: "bool",
    torch.uint8: "unsigned char",
    torch.int8: "signed char",
    torch.int16: "short",
    torch.int32: "int",
    torch.int64: "long long",
    torch.float16: "float16",
    torch.float32: "float",
    torch.float64: "double",
}
# torch dtype -> the type name ElementwiseKernel's parameter lists use
CUPY_TYPES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.float32: "float32",
    torch.float64: "float64",
}
# bfloat16 and complex dtypes are left to other executors: CuPy has no bfloat16 array
# dtype to receive them through DLPack, and complex arithmetic is not translated here.


def category(dtype: torch.dtype) -> str:
    """'bool', 'int' or 'float': which column of a translation applies."""
    if dtype == torch.bool:
        return "bool"
    return "float" if dtype.is_floating_point else "int"


def opmath(dtype: torch.dtype) -> str:
    """The C type an operand of `dtype` is computed in (float16 computes in float, as in PyTorch)."""
    return "float" if dtype == torch.float16 else C_TYPES[dtype]


@dataclass(frozen=True)
class Translation:
    """A prim's C++ expression per operand dtype category; None where it is not translated."""

    float: str | None
    int: str | None = None
    bool: str | None = None
    kwargs: tuple[tuple[str, object], ...] = ()  # keyword values this entry stands for (div's rounding_mode)
    half: bool = True  # False where computing in float and rounding to float16 differs from float16 itself

    def template(self, dtype: torch.dtype) -> str | None:
        if dtype == torch.float16 and not self.half:
            return None
        return getattr(self, category(dtype))


def _same(template: str) -> Translation:
    return Translation(template, template, template)


_CMP = {PrimIDs.EQ: "==", PrimIDs.NE: "!=", PrimIDs.LT: "<", PrimIDs.LE: "<=", PrimIDs.GT: ">", PrimIDs.GE: ">="}
_FLOAT_UNARY = {
    PrimIDs.EXP: "exp$({0})", PrimIDs.EXPM1: "expm1$({0})", PrimIDs.EXP2: "exp2$({0})",
    PrimIDs.LOG: "log$({0})", PrimIDs.LOG1P: "log1p$({0})", PrimIDs.LOG2: "log2$({0})", PrimIDs.LOG10: "log10$({0})",
    PrimIDs.SQRT: "sqrt$({0})", PrimIDs.RSQRT: "rsqrt$({0})",
    PrimIDs.SIN: "sin$({0})", PrimIDs.COS: "cos$({0})", PrimIDs.TAN: "tan$({0})",
    PrimIDs.ASIN: "asin$({0})", PrimIDs.ACOS: "acos$({0})", PrimIDs.ATAN: "atan$({0})",
    PrimIDs.ASINH: "asinh$({0})", PrimIDs.ACOSH: "acosh$({0})", PrimIDs.ATANH: "atanh$({0})",
    PrimIDs.SINH: "sinh$({0})", PrimIDs.COSH: "cosh$({0})", PrimIDs.TANH: "tanh$({0})",
    PrimIDs.ERF: "erf$({0})", PrimIDs.ERFC: "erfc$({0})", PrimIDs.ERFINV: "erfinv$({0})", PrimIDs.LGAMMA: "lgamma$({0})",
    PrimIDs.RECIPROCAL: "(1 / {0})",
}

TRANSLATIONS: dict[str, Translation] = {
    **{prim: Translation(t) for prim, t in _FLOAT_UNARY.items()},
    PrimIDs.ABS: Translation("fabs$({0})", "({0} < 0 ? -{0} : {0})"),
    PrimIDs.NEG: Translation("(-{0})", "(-{0})"),
    PrimIDs.FLOOR: Translation("floor$({0})", "{0}"),
    PrimIDs.CEIL: Translation("ceil$({0})", "{0}"),
    PrimIDs.ROUND: Translation("rint$({0})", "{0}"),  # half to even, as torch.round
    PrimIDs.TRUNC: Translation("trunc$({0})", "{0}"),
    PrimIDs.SIGNBIT: Translation("signbit({0})", "({0} < 0)", "false"),
    PrimIDs.ISFINITE: Translation("isfinite({0})", "true", "true"),
    PrimIDs.ISNAN: Translation("isnan({0})", "false", "false"),
    PrimIDs.ISINF: Translation("isinf({0})", "false", "false"),
    PrimIDs.LOGICAL_NOT: _same("(!{0})"),
    PrimIDs.BITWISE_NOT: Translation(None, "(~{0})", "(!{0})"),
    PrimIDs.ADD: _same("({0} + {1})"),
    PrimIDs.SUB: Translation("({0} - {1})", "({0} - {1})"),
    PrimIDs.MUL: _same("({0} * {1})"),
    PrimIDs.DIV: Translation("({0} / {1})"),
    "prims.div/trunc": Translation("trunc$({0} / {1})", "({0} / {1})", kwargs=(("rounding_mode", "trunc"),)),
    "prims.div/floor": Translation("squall_floor_divide({0}, {1})", "squall_floor_divide({0}, {1})", kwargs=(("rounding_mode", "floor"),)),
    PrimIDs.POW: Translation("pow$({0}, {1})"),
    PrimIDs.REMAINDER: Translation("squall_remainder({0}, {1})", "squall_remainder({0}, {1})"),
    PrimIDs.FMOD: Translation("fmod$({0}, {1})", "({0} % {1})"),
    PrimIDs.ATAN2: Translation("atan2$({0}, {1})"),
    PrimIDs.HYPOT: Translation("hypot$({0}, {1})"),
    PrimIDs.COPYSIGN: Translation("copysign$({0}, {1})"),
    # the next float after a float16 value rounds back to that value: float16 needs its own step
    PrimIDs.NEXTAFTER: Translation("nextafter$({0}, {1})", half=False),
    PrimIDs.MAXIMUM: _same("squall_maximum({0}, {1})"),
    PrimIDs.MINIMUM: _same("squall_minimum({0}, {1})"),
    **{prim: _same(f"({{0}} {op} {{1}})") for prim, op in _CMP.items()},
    PrimIDs.LOGICAL_AND: _same("(({0} != 0) && ({1} != 0))"),
    PrimIDs.LOGICAL_OR: _same("(({0} != 0) || ({1} != 0))"),
    PrimIDs.LOGICAL_XOR: _same("(({0} != 0) != ({1} != 0))"),
    PrimIDs.BITWISE_AND: Translation(None, "({0} & {1})", "({0} & {1})"),
    PrimIDs.BITWISE_OR: Translation(None, "({0} | {1})", "({0} | {1})"),
    PrimIDs.BITWISE_XOR: Translation(None, "({0} ^ {1})", "({0} ^ {1})"),
    PrimIDs.BITWISE_LEFT_SHIFT: Translation(None, "squall_left_shift({0}, {1})"),
    PrimIDs.BITWISE_RIGHT_SHIFT: Translation(None, "squall_right_shift({0}, {1})"),
    PrimIDs.WHERE: _same("({0} ? {1} : {2})"),
    PrimIDs.CONVERT_ELEMENT_TYPE: _same("{0}"),  # the store into the output's type converts
}

# Helpers for the operations where C's operator means something else than PyTorch's.
PREAMBLE = r"""
template <typename T> __device__ T squall_maximum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template <typename T> __device__ T squall_minimum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
__device__ float squall_fmod(float a, float b) { return fmodf(a, b); }
__device__ double squall_fmod(double a, double b) { return fmod(a, b); }
template <typename T> __device__ T squall_remainder(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <> __device__ float squall_remainder<float>(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <> __device__ double squall_remainder<double>(double a, double b) {
  double r = fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> __device__ T squall_floor_divide(T a, T b) {
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ T squall_floor_divide_floating(T a, T b) {
  if (b == 0) return a / b;
  T mod = squall_fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(T(0), a / b);
  T floordiv = floor(div);
  return (div - floordiv > T(0.5)) ? floordiv + 1 : floordiv;
}
template <> __device__ float squall_floor_divide<float>(float a, float b) { return squall_floor_divide_floating(a, b); }
template <> __device__ double squall_floor_divide<double>(double a, double b) { return squall_floor_divide_floating(a, b); }
template <typename T> __device__ T squall_left_shift(T a, T b) {
  const T bits = T(sizeof(T) * 8);
  return (b < 0 || b >= bits) ? T(0) : T((unsigned long long)a << b);
}
template <typename T> __device__ T squall_right_shift(T a, T b) {
  const T bits = T(sizeof(T) * 8);
  return (b < 0 || b >= bits) ? T(a >> (bits - 1)) : T(a >> b);
}
"""


def literal(value: bool | int | float, dtype: torch.dtype) -> str:
    """A Python number as a C++ constant in `dtype`'s compute type (PyTorch casts a scalar operand so)."""
    ctype = opmath(dtype)
    if isinstance(value, bool):
        return f"(({ctype})({'true' if value else 'false'}))"
    if isinstance(value, int):
        return f"(({ctype})({value}LL))"
    if math.isfinite(value):
        return f"(({ctype})({value!r}))"
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    return f"(({ctype})__longlong_as_double({bits}LL))"  # inf and nan, bit for bit


def translation_key(prim_id: str, kwargs: dict) -> str:
    """The table key for a call: div's rounding modes are separate entries."""
    if prim_id == PrimIDs.DIV and kwargs.get("rounding_mode") is not None:
        return f"{prim_id}/{kwargs['rounding_mode']}"
    return prim_id


def translate(prim_id: str, operands: list[str], operand_dtype: torch.dtype, kwargs: dict | None = None) -> str | None:
    """The C++ expression for one call, or None when the table does not cover it."""
    entry = TRANSLATIONS.get(translation_key(prim_id, kwargs or {}))
    template = entry.template(operand_dtype) if entry is not None else None
    if template is None:
        return None
    suffix = "f" if opmath(operand_dtype) == "float" else ""
    return template.replace("$", suffix).format(*operands)
