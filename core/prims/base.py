"""make_prim, the closed list of prim ids, and the checks meta functions share."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..proxies import NumberProxy, TensorProxy
from ..symbol import Symbol
from ..symbolic import SymInt

__all__ = ["PrimIDs", "make_prim", "check", "check_tensor", "canonical_dim", "canonical_dims"]


class PrimIDs:
    """Every prim's id. A new prim gets its id here first: the list is closed on purpose."""

    # elementwise unary
    ABS = "prims.abs"
    NEG = "prims.neg"
    EXP = "prims.exp"
    EXPM1 = "prims.expm1"
    EXP2 = "prims.exp2"
    LOG = "prims.log"
    LOG1P = "prims.log1p"
    LOG2 = "prims.log2"
    LOG10 = "prims.log10"
    SQRT = "prims.sqrt"
    RSQRT = "prims.rsqrt"
    SIN = "prims.sin"
    COS = "prims.cos"
    TAN = "prims.tan"
    ASIN = "prims.asin"
    ACOS = "prims.acos"
    ATAN = "prims.atan"
    ASINH = "prims.asinh"
    ACOSH = "prims.acosh"
    ATANH = "prims.atanh"
    SINH = "prims.sinh"
    COSH = "prims.cosh"
    TANH = "prims.tanh"
    ERF = "prims.erf"
    ERFC = "prims.erfc"
    ERFINV = "prims.erfinv"
    LGAMMA = "prims.lgamma"
    DIGAMMA = "prims.digamma"
    FLOOR = "prims.floor"
    CEIL = "prims.ceil"
    ROUND = "prims.round"
    TRUNC = "prims.trunc"
    SIGN = "prims.sign"
    SIGNBIT = "prims.signbit"
    RECIPROCAL = "prims.reciprocal"
    ISFINITE = "prims.isfinite"
    ISNAN = "prims.isnan"
    ISINF = "prims.isinf"
    LOGICAL_NOT = "prims.logical_not"
    BITWISE_NOT = "prims.bitwise_not"
    REAL = "prims.real"
    IMAG = "prims.imag"
    # elementwise binary
    ADD = "prims.add"
    SUB = "prims.sub"
    MUL = "prims.mul"
    DIV = "prims.div"
    POW = "prims.pow"
    REMAINDER = "prims.remainder"
    FMOD = "prims.fmod"
    ATAN2 = "prims.atan2"
    HYPOT = "prims.hypot"
    COPYSIGN = "prims.copysign"
    NEXTAFTER = "prims.nextafter"
    MAXIMUM = "prims.maximum"
    MINIMUM = "prims.minimum"
    EQ = "prims.eq"
    NE = "prims.ne"
    LT = "prims.lt"
    LE = "prims.le"
    GT = "prims.gt"
    GE = "prims.ge"
    LOGICAL_AND = "prims.logical_and"
    LOGICAL_OR = "prims.logical_or"
    LOGICAL_XOR = "prims.logical_xor"
    BITWISE_AND = "prims.bitwise_and"
    BITWISE_OR = "prims.bitwise_or"
    BITWISE_XOR = "prims.bitwise_xor"
    BITWISE_LEFT_SHIFT = "prims.bitwise_left_shift"
    BITWISE_RIGHT_SHIFT = "prims.bitwise_right_shift"
    # elementwise ternary
    WHERE = "prims.where"
    # conversions and side effects
    CONVERT_ELEMENT_TYPE = "prims.convert_element_type"
    COPY_ = "prims.copy_"
    # devices
    DEVICE_PUT = "prims.device_put"
    # reductions
    SUM = "prims.sum"
    PROD = "prims.prod"
    AMAX = "prims.amax"
    AMIN = "prims.amin"
    ARGMAX = "prims.argmax"
    ARGMIN = "prims.argmin"
    VAR = "prims.var"
    CUMSUM = "prims.cumsum"
    CUMPROD = "prims.cumprod"
    TOPK = "prims.topk"
    SORT = "prims.sort"
    # shape
    BROADCAST_IN_DIM = "prims.broadcast_in_dim"
    RESHAPE = "prims.reshape"
    TRANSPOSE = "prims.transpose"
    SLICE = "prims.slice"
    SQUEEZE = "prims.squeeze"
    CAT = "prims.cat"
    PAD = "prims.pad"
    FLIP = "prims.flip"
    UNFOLD = "prims.unfold"
    # gather, scatter, indexing
    TAKE = "prims.take"
    TAKE_ALONG_AXIS = "prims.take_along_axis"
    INDEX = "prims.index"
    INDEX_PUT = "prims.index_put"
    INDEX_ADD = "prims.index_add"
    INDEX_COPY = "prims.index_copy"
    SCATTER = "prims.scatter"
    SCATTER_ADD = "prims.scatter_add"
    SCATTER_REDUCE = "prims.scatter_reduce"
    # factories
    FULL = "prims.full"
    IOTA = "prims.iota"
    UNIFORM = "prims.uniform"
    UNIFORM_PHILOX = "prims.uniform_philox"
    NORMAL = "prims.normal"
    # linear algebra
    MATMUL = "prims.matmul"
    CONVOLUTION = "prims.convolution"
    # Python numbers known at run time (NumberProxy)
    NUMBER_ADD = "prims.number_add"
    NUMBER_SUB = "prims.number_sub"
    NUMBER_MUL = "prims.number_mul"
    NUMBER_TRUEDIV = "prims.number_truediv"
    NUMBER_FLOORDIV = "prims.number_floordiv"
    NUMBER_MOD = "prims.number_mod"
    NUMBER_POW = "prims.number_pow"
    NUMBER_EQ = "prims.number_eq"
    NUMBER_NE = "prims.number_ne"
    NUMBER_LT = "prims.number_lt"
    NUMBER_LE = "prims.number_le"
    NUMBER_GT = "prims.number_gt"
    NUMBER_GE = "prims.number_ge"
    NUMBER_AND = "prims.number_and"
    NUMBER_OR = "prims.number_or"
    NUMBER_XOR = "prims.number_xor"
    NUMBER_NEG = "prims.number_neg"
    NUMBER_POS = "prims.number_pos"
    NUMBER_ABS = "prims.number_abs"
    CONVERT_NUMBER = "prims.convert_number"


def make_prim(id: str, name: str, *, meta: Callable, tags: Sequence[str] = ()) -> Symbol:
    """Declare a prim: its id (from PrimIDs), its name in traces, and its meta function."""
    return Symbol(id, name, meta, is_prim=True, tags=tuple(tags))


def check(cond: bool, message: Callable[[], str], exc: type[Exception] = RuntimeError) -> None:
    """Raise `exc(message())` unless `cond`; the message is built only on failure."""
    if not cond:
        raise exc(message())


def check_tensor(name: str, x, what: str = "a tensor") -> None:
    check(isinstance(x, TensorProxy), lambda: f"{name} expected {what}, got {type(x).__name__}", TypeError)


def canonical_dim(ndim: int, dim: int, *, name: str = "dim") -> int:
    """`dim` wrapped into [0, ndim); a 0-d tensor accepts -1 and 0."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{name} must be an int, got {type(dim).__name__}")
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], but got {dim})")
    return dim % bound


def canonical_dims(ndim: int, dims: Sequence[int]) -> tuple[int, ...]:
    out = tuple(canonical_dim(ndim, d) for d in dims)
    check(len(set(out)) == len(out), lambda: f"dims {tuple(dims)} repeat a dimension", ValueError)
    return out


def is_size(x) -> bool:
    """Whether `x` can be a size: an int (not a bool), or a symbolic size (`squall.symbolic`)."""
    return type(x) is SymInt or (isinstance(x, int) and not isinstance(x, bool))


def is_number(x) -> bool:
    """A Python number, or a NumberProxy or symbolic size standing for one."""
    return (isinstance(x, (int, float, complex)) and not isinstance(x, torch.Tensor)) or type(x) is NumberProxy or type(x) is SymInt


_CATEGORY = {bool: 0, int: 1, float: 2, complex: 3}


def dtype_category(dtype: torch.dtype) -> int:
    """0 bool, 1 integer, 2 floating point, 3 complex: the order of type promotion."""
    if dtype == torch.bool:
        return 0
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 1


def number_type(x) -> type:
    """The Python type of the number `x` (a NumberProxy's is the type it stands for)."""
    return x.python_type if type(x) is NumberProxy else int if type(x) is SymInt else type(x)


def number_category(x) -> int:
    t = number_type(x)
    return _CATEGORY[t] if t in _CATEGORY else _CATEGORY[float]
