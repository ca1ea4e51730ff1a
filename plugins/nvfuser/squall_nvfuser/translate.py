"""Prims -> nvFuser: one translator per supported prim, and the function that builds a definition.

`TRANSLATORS` maps a prim id to a `Translator`: the `fd.ops` operations it emits (the table
is what `squall executors --ops nvfuser` shows), the function that emits them, and an
optional `accepts` rule for argument values nvFuser does not take (read by the checkers).

`translate_region(calls, inputs, outputs, fd, ...)` is the only place a definition is
built; the executor calls it inside `with nvfuser.FusionDefinition() as fd:`. It is a plain
function of the region's calls and an `fd`, so the real path and the GPU tests share it.
This module does not import nvFuser: the `DataType` enum is passed in.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from squall.extend import BoundSymbol, PrimIDs, SymInt, TensorProxy, symbol_reads

__all__ = ["Translator", "TRANSLATORS", "NV_DTYPES", "LOW_PRECISION", "translate_region", "Translation", "SymbolNotReadable", "symbolic_shape"]

# torch dtype -> the name of the nvfuser.DataType member (no complex: not offered, see README)
NV_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "Double",
    torch.float32: "Float",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int64: "Int",
    torch.int32: "Int32",
    torch.bool: "Bool",
}
# reduced in float32 and cast back, as PyTorch accumulates them
LOW_PRECISION = frozenset({torch.float16, torch.bfloat16})
# the DataType of a Python number operand, by its type (bool before int: bool is an int)
_NUMBER_DTYPES = ((bool, "Bool"), (int, "Int"), (float, "Double"))


class Translation:
    """The state of one definition being built: `fd`, and nvFuser values by proxy name."""

    def __init__(self, fd: Any, data_type: Any):
        self.fd = fd
        self.data_type = data_type
        self.values: dict[str, Any] = {}
        self.symbols: dict[str, Any] = {}  # size symbol -> its nvFuser scalar (`fd.ops.size` of an input)

    def size(self, n: Any) -> Any:
        """A size argument as nvFuser takes it: an int, or a symbolic size (squall.symbolic) as
        nvFuser scalar arithmetic over the sizes of the region's inputs."""
        if type(n) is not SymInt:
            return n
        return self._poly(n.poly)

    def sizes(self, shape: Sequence[Any]) -> list[Any]:
        return [self.size(n) for n in shape]

    def _poly(self, poly: tuple) -> Any:
        ops, total = self.fd.ops, None
        for atoms, coefficient in poly:
            term = None
            for atom in atoms:
                value = self._atom(atom)
                term = value if term is None else ops.mul(term, value)
            if term is None:
                term = self._int(coefficient)
            elif coefficient != 1:
                term = ops.mul(term, self._int(coefficient))
            total = term if total is None else ops.add(total, term)
        return total if total is not None else self._int(0)

    def _atom(self, atom: tuple) -> Any:
        if atom[0] == "s":
            if atom[1] not in self.symbols:
                raise SymbolNotReadable(atom[1])
            return self.symbols[atom[1]]
        # floor division and remainder of sizes, which are never negative: C's truncation agrees
        a, b = self._poly(atom[1]), self._poly(atom[2])
        return self.fd.ops.div(a, b) if atom[0] == "//" else self.fd.ops.fmod(a, b)

    def _int(self, value: int) -> Any:
        return self.fd.define_scalar(value, dtype=self.data_type.Int)

    def dtype(self, dtype: torch.dtype) -> Any:
        """The `nvfuser.DataType` for a torch dtype."""
        return getattr(self.data_type, NV_DTYPES[dtype])

    def conform(self, value: Any, dtype: torch.dtype) -> Any:
        """`value` in the dtype the trace gives it: nvFuser computes some ops on f16/bf16 in
        f32 and returns f32 (`fd.ops.neg` does), where the prim keeps its operand's dtype."""
        wanted = self.dtype(dtype)
        return value if value.dtype() == wanted else self.fd.ops.cast(value, dtype=wanted)

    def nv(self, x: Any) -> Any:
        """The nvFuser value for an operand: a tensor defined earlier, or a number as a scalar."""
        if isinstance(x, TensorProxy):
            return self.values[x.name]
        for kind, name in _NUMBER_DTYPES:
            if isinstance(x, kind):
                return self.fd.define_scalar(x, dtype=getattr(self.data_type, name))
        raise TypeError(f"nvFuser translation got an operand of type {type(x).__name__}")


class SymbolNotReadable(ValueError):
    """A size symbol a region's calls use that no input of the region holds as a dimension."""

    def __init__(self, symbol: str):
        super().__init__(f"symbolic size {symbol} is not a dimension of any input of the region")
        self.symbol = symbol


@dataclass(frozen=True)
class Translator:
    """How one prim becomes nvFuser operations.

    `ops`: the `fd.ops` names it emits; `emit(t, call)`: emits them for `call` (a bound prim)
    and returns the result; `accepts`: the prim's signature, False for argument values nvFuser
    cannot take (dtype, device and rank limits are common to all and live in `checkers`);
    `limits`: what `accepts` allows, in words.
    """

    ops: tuple[str, ...]
    emit: Callable[[Translation, BoundSymbol], Any]
    accepts: Callable[..., bool] | None = None
    limits: str = ""


def _same(op: str) -> Translator:
    """An elementwise prim whose nvFuser op has the same operands in the same order."""

    def emit(t: Translation, call: BoundSymbol) -> Any:
        return getattr(t.fd.ops, op)(*(t.nv(x) for x in call.args))

    emit.__name__ = f"_emit_{op}"
    return Translator((op,), emit)


def _floating_only(*args: Any, **kwargs: Any) -> bool:
    # integer pow/remainder/fmod follow C rules in generated code, not PyTorch's
    return all(x.dtype.is_floating_point for x in args if isinstance(x, TensorProxy))


def _not_bool(a: TensorProxy) -> bool:
    return a.dtype != torch.bool


def _emit_div(t: Translation, call: BoundSymbol) -> Any:
    a, b = call.args[:2]
    return t.fd.ops.div(t.nv(a), t.nv(b))


def _div_accepts(a: Any, b: Any, rounding_mode: str | None = None) -> bool:
    # only true division (floating operands, as the prim requires); rounding modes stay with torch
    return rounding_mode is None


def _emit_cast(t: Translation, call: BoundSymbol) -> Any:
    a, dtype = call.args
    return t.fd.ops.cast(t.nv(a), dtype=t.dtype(dtype))


def _accumulating(op: str) -> Callable[[Translation, BoundSymbol], Any]:
    """sum or prod: f16/bf16 inputs are cast to f32, reduced, and cast back, as PyTorch does."""

    def emit(t: Translation, call: BoundSymbol) -> Any:
        a, dims = call.args
        x = t.nv(a)
        low = a.dtype in LOW_PRECISION
        if low:
            x = t.fd.ops.cast(x, dtype=t.dtype(torch.float32))
        out = getattr(t.fd.ops, op)(x, list(dims))
        return t.fd.ops.cast(out, dtype=t.dtype(a.dtype)) if low else out

    emit.__name__ = f"_emit_{op}"
    return emit


def _selecting(op: str) -> Callable[[Translation, BoundSymbol], Any]:
    """max or min: exact in any dtype, so no casts."""

    def emit(t: Translation, call: BoundSymbol) -> Any:
        a, dims = call.args
        return getattr(t.fd.ops, op)(t.nv(a), list(dims))

    emit.__name__ = f"_emit_{op}"
    return emit


def _sum_accepts(a: TensorProxy, dims: Sequence[int]) -> bool:
    # nvFuser promotes integer sums to int64 (csrc/ops/arith.cpp); the prim keeps the dtype.
    # An empty dims list (a copy) is left to torch.
    return a.dtype.is_floating_point and len(dims) > 0


def _minmax_accepts(a: TensorProxy, dims: Sequence[int]) -> bool:
    return a.dtype != torch.bool and len(dims) > 0


def _emit_var(t: Translation, call: BoundSymbol) -> Any:
    a, dims = call.args
    x = t.nv(a)
    low = a.dtype in LOW_PRECISION
    if low:
        x = t.fd.ops.cast(x, dtype=t.dtype(torch.float32))
    out = t.fd.ops.var(x, list(dims), int(call.kwargs["correction"]))
    return t.fd.ops.cast(out, dtype=t.dtype(a.dtype)) if low else out


def _var_accepts(a: TensorProxy, dims: Sequence[int], *, correction: float) -> bool:
    # fd.ops.var takes an int64 correction
    return a.dtype.is_floating_point and len(dims) > 0 and float(correction).is_integer()


def _emit_broadcast_in_dim(t: Translation, call: BoundSymbol) -> Any:
    a, shape, broadcast_dimensions = call.args
    return t.fd.ops.broadcast_in_dim(t.nv(a), t.sizes(shape), list(broadcast_dimensions))


def _emit_reshape(t: Translation, call: BoundSymbol) -> Any:
    a, shape = call.args
    return t.fd.ops.reshape(t.nv(a), t.sizes(shape))


def _emit_permute(t: Translation, call: BoundSymbol) -> Any:
    a, permutation = call.args
    return t.fd.ops.permute(t.nv(a), list(permutation))


def _emit_slice(t: Translation, call: BoundSymbol) -> Any:
    a, starts, ends, strides = call.args
    return t.fd.ops.slice(t.nv(a), t.sizes(starts), t.sizes(ends), list(strides))


def _slice_accepts(a: TensorProxy, start_indices: Sequence[int], end_indices: Sequence[int], strides: Sequence[int]) -> bool:
    return all(s == 1 for s in strides)


def _emit_squeeze(t: Translation, call: BoundSymbol) -> Any:
    a, dims = call.args
    return t.fd.ops.squeeze(t.nv(a), list(dims))


def _emit_cat(t: Translation, call: BoundSymbol) -> Any:
    tensors, dim = call.args
    return t.fd.ops.cat([t.nv(x) for x in tensors], dim)


def _emit_pad(t: Translation, call: BoundSymbol) -> Any:
    a, value, config = call.args
    # nvFuser takes (low, high) pairs from the last dimension to the first
    widths = [t.size(w) for lo, hi, _ in reversed(config) for w in (lo, hi)]
    # nvFuser requires the padding value in the tensor's dtype
    kind = bool if a.dtype == torch.bool else float if a.dtype.is_floating_point else int
    return t.fd.ops.pad(t.nv(a), widths, t.fd.define_scalar(kind(value), dtype=t.dtype(a.dtype)))


def _pad_accepts(a: TensorProxy, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> bool:
    # no interior (dilation) padding in nvFuser's pad; negative widths are left to torch
    return all(interior == 0 and lo >= 0 and hi >= 0 for lo, hi, interior in padding_config)


def _emit_where(t: Translation, call: BoundSymbol) -> Any:
    pred, a, b = call.args
    return t.fd.ops.where(t.nv(pred), t.nv(a), t.nv(b))


_UNARY = {
    PrimIDs.ABS: "abs", PrimIDs.NEG: "neg", PrimIDs.EXP: "exp", PrimIDs.EXPM1: "expm1", PrimIDs.EXP2: "exp2",
    PrimIDs.LOG: "log", PrimIDs.LOG1P: "log1p", PrimIDs.LOG2: "log2", PrimIDs.LOG10: "log10",
    PrimIDs.SQRT: "sqrt", PrimIDs.RSQRT: "rsqrt", PrimIDs.SIN: "sin", PrimIDs.COS: "cos", PrimIDs.TAN: "tan",
    PrimIDs.ASIN: "asin", PrimIDs.ACOS: "acos", PrimIDs.ATAN: "atan", PrimIDs.ASINH: "asinh",
    PrimIDs.ACOSH: "acosh", PrimIDs.ATANH: "atanh", PrimIDs.SINH: "sinh", PrimIDs.COSH: "cosh",
    PrimIDs.TANH: "tanh", PrimIDs.ERF: "erf", PrimIDs.ERFC: "erfc", PrimIDs.ERFINV: "erfinv",
    PrimIDs.LGAMMA: "lgamma", PrimIDs.FLOOR: "floor", PrimIDs.CEIL: "ceil", PrimIDs.ROUND: "round",
    PrimIDs.TRUNC: "trunc", PrimIDs.SIGNBIT: "signbit", PrimIDs.RECIPROCAL: "reciprocal",
    PrimIDs.ISFINITE: "isfinite", PrimIDs.ISNAN: "isnan", PrimIDs.ISINF: "isinf",
    PrimIDs.LOGICAL_NOT: "logical_not", PrimIDs.BITWISE_NOT: "bitwise_not",
}
_BINARY = {
    PrimIDs.ADD: "add", PrimIDs.SUB: "sub", PrimIDs.MUL: "mul", PrimIDs.ATAN2: "atan2",
    PrimIDs.MAXIMUM: "maximum", PrimIDs.MINIMUM: "minimum",
    PrimIDs.EQ: "eq", PrimIDs.NE: "ne", PrimIDs.LT: "lt", PrimIDs.LE: "le", PrimIDs.GT: "gt", PrimIDs.GE: "ge",
    PrimIDs.LOGICAL_AND: "logical_and", PrimIDs.LOGICAL_OR: "logical_or",
    PrimIDs.BITWISE_AND: "bitwise_and", PrimIDs.BITWISE_OR: "bitwise_or", PrimIDs.BITWISE_XOR: "bitwise_xor",
    PrimIDs.BITWISE_LEFT_SHIFT: "bitwise_left_shift", PrimIDs.BITWISE_RIGHT_SHIFT: "bitwise_right_shift",
}
_BINARY_FLOATING = {PrimIDs.POW: "pow", PrimIDs.REMAINDER: "remainder", PrimIDs.FMOD: "fmod"}


def _f32_f64_only(*args: Any, **kwargs: Any) -> bool:
    # nvFuser's nextafter takes float and double only ("Promoted type must be single or double precision float")
    return all(x.dtype in (torch.float32, torch.float64) for x in args if isinstance(x, TensorProxy))

_REDUCE_LIMITS = "floating dtypes, f16/bf16 accumulated in f32; dims not empty"

# prim id -> translator: the whole coverage of this executor
TRANSLATORS: dict[str, Translator] = {
    **{prim: _same(op) for prim, op in {**_UNARY, **_BINARY}.items()},
    **{prim: Translator((op,), _same(op).emit, _floating_only, "floating dtypes") for prim, op in _BINARY_FLOATING.items()},
    PrimIDs.NEXTAFTER: Translator(("nextafter",), _same("nextafter").emit, _f32_f64_only, "float32, float64"),
    PrimIDs.SIGN: Translator(("sign",), _same("sign").emit, _not_bool, "not bool"),
    PrimIDs.DIV: Translator(("div",), _emit_div, _div_accepts, "rounding_mode=None"),
    PrimIDs.WHERE: Translator(("where",), _emit_where),
    PrimIDs.CONVERT_ELEMENT_TYPE: Translator(("cast",), _emit_cast),
    PrimIDs.SUM: Translator(("sum", "cast"), _accumulating("sum"), _sum_accepts, _REDUCE_LIMITS),
    PrimIDs.PROD: Translator(("prod", "cast"), _accumulating("prod"), _sum_accepts, _REDUCE_LIMITS),
    PrimIDs.AMAX: Translator(("max",), _selecting("max"), _minmax_accepts, "not bool; dims not empty"),
    PrimIDs.AMIN: Translator(("min",), _selecting("min"), _minmax_accepts, "not bool; dims not empty"),
    PrimIDs.VAR: Translator(("var", "cast"), _emit_var, _var_accepts, _REDUCE_LIMITS + "; integer correction"),
    PrimIDs.BROADCAST_IN_DIM: Translator(("broadcast_in_dim",), _emit_broadcast_in_dim),
    PrimIDs.RESHAPE: Translator(("reshape",), _emit_reshape),
    PrimIDs.TRANSPOSE: Translator(("permute",), _emit_permute),
    PrimIDs.SLICE: Translator(("slice",), _emit_slice, _slice_accepts, "strides of 1"),
    PrimIDs.SQUEEZE: Translator(("squeeze",), _emit_squeeze),
    PrimIDs.CAT: Translator(("cat",), _emit_cat),
    PrimIDs.PAD: Translator(("pad",), _emit_pad, _pad_accepts, "no interior padding; widths >= 0"),
}


def symbolic_shape(shape: Sequence[Any]) -> list[int]:
    """A shape as `define_tensor` takes it: -1 (any extent) for each symbolic size (never 0 or 1:
    squall keeps those constant, so a symbolic dimension is never a broadcast one)."""
    return [-1 if type(n) is SymInt else n for n in shape]


def translate_region(
    calls: Sequence[BoundSymbol],
    inputs: Sequence[TensorProxy],
    outputs: Sequence[TensorProxy],
    fd: Any,
    *,
    data_type: Any,
    descriptors: Sequence[tuple[Sequence[int], Sequence[bool | None], Sequence[int]]],
) -> Translation:
    """Define a region in `fd` (an open `nvfuser.FusionDefinition`): inputs, every call, outputs.

    `descriptors[k]` is (shape, contiguity, stride_order) of input k, as nvFuser's
    `define_tensor` takes them (-1 for a symbolic size: `symbolic_shape`; the size arguments of
    the calls are then nvFuser scalars over `fd.ops.size` of the inputs) (`nvfuser.compute_tensor_descriptor` gives the last two);
    `data_type` is `nvfuser.DataType`. Returns the translation (nvFuser values by name).
    """
    t = Translation(fd, data_type)
    reads = symbol_reads(inputs)  # a dimension that is one size symbol: its value for the calls' size arguments
    for k, (p, (shape, contiguity, stride_order)) in enumerate(zip(inputs, descriptors, strict=True)):
        t.values[p.name] = fd.define_tensor(
            shape=list(shape), contiguity=list(contiguity), dtype=t.dtype(p.dtype), stride_order=list(stride_order)
        )
        for symbol, (i, d) in reads.items():
            if i == k:  # each size read right after its tensor is defined, as nvFuser records them in order
                t.symbols[symbol] = fd.ops.size(t.values[p.name], d)
    for call in calls:
        result = TRANSLATORS[call.sym.id].emit(t, call)
        produced = call.output_proxies()
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        for p, value in zip(produced, results, strict=True):
            t.values[p.name] = t.conform(value, p.dtype)
    for p in outputs:
        fd.add_output(t.values[p.name])
    return t
