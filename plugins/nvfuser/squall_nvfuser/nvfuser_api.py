"""The parts of nvFuser's Python API this plugin relies on, as read from nvFuser's source.

nvFuser cannot be installed on squall's CI machines, so the names below were checked by
reading NVIDIA/Fuser at commit 4a3e6b9a452aa3bce1c1576f4bf94136d73650e9 (python/version.txt
0.2.35), the last commit before the legacy `nvfuser.FusionDefinition` frontend was removed
(3925c6fd, "Remove legacy bindings", February 2026; later releases ship only
`nvfuser_direct`). Files read:

- python/python_frontend/python_bindings.cpp: every `fd.ops.*` name (the
  NVFUSER_PYTHON_BINDING_*_OP macros and the `nvf_ops.def(...)` calls), the `DataType`
  enum, `define_tensor(shape, contiguity, dtype, is_cpu, stride_order)`,
  `define_scalar(value, dtype)`, `add_output(output)`, `compute_tensor_descriptor`.
- python/nvfuser/__init__.py: `FusionDefinition` (a context manager:
  `with FusionDefinition() as fd:`) and `FusionDefinition.execute(inputs) -> list[Tensor]`.
- csrc/ops/arith.cpp: `sum`/`prod` promote integer inputs to Int when no dtype is given.

The translation table in `translate.py` is tested against these sets, so an op name that
nvFuser does not have cannot enter the table unnoticed.
"""
from __future__ import annotations

__all__ = ["NVFUSER_COMMIT", "NVFUSER_VERSION_READ", "FD_OPS", "FD_METHODS", "DATA_TYPES", "MODULE_FUNCTIONS"]

NVFUSER_COMMIT = "4a3e6b9a452aa3bce1c1576f4bf94136d73650e9"
NVFUSER_VERSION_READ = "0.2.35"

# `fd.ops.<name>`: every operation bound in python_bindings.cpp at NVFUSER_COMMIT
FD_OPS = frozenset({
    # unary (NVFUSER_PYTHON_BINDING_UNARY_OP)
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "exp", "exp2",
    "expm1", "erf", "erfc", "erfinv", "erfcinv", "floor", "frac", "lgamma", "log", "log10", "log1p",
    "log2", "neg", "logical_not", "bitwise_not", "relu", "rand_like", "randn_like", "reciprocal",
    "round", "rsqrt", "set", "segment_set", "sign", "sigmoid", "signbit", "silu", "sin", "sinh",
    "sqrt", "tan", "tanh", "trunc", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal",
    "real", "imag", "triu",
    # binary (NVFUSER_PYTHON_BINDING_BINARY_OP and *_WITH_ALPHA_OP)
    "add", "atan2", "div", "truediv", "fmod", "mul", "nextafter", "pow", "remainder", "sub",
    "minimum", "maximum", "mod", "eq", "ge", "gt", "le", "lt", "ne", "logical_and", "logical_or",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    "logical_right_shift", "gcd", "add_alpha", "sub_alpha",
    # ternary and friends
    "lerp", "where", "clamp", "threshold", "addcmul",
    # reductions (NVFUSER_PYTHON_BINDING_REDUCTION_OP), normalization statistics
    "max", "min", "prod", "sum", "var", "var_mean", "welford",
    # dtype
    "cast",
    # shape and indexing
    "broadcast_in_dim", "broadcast", "cat", "expand", "index_select", "index_put_accumulate",
    "select", "scatter", "gather", "pad", "take_along_axis", "permute", "shape", "size", "at",
    "slice", "squeeze", "tensor_sizes", "reshape", "stride_order",
    # factories, linear algebra, others bound at that commit
    "iota", "full", "uniform", "normal", "matmul", "linear", "batch_norm", "sdpfa_fwd", "sdpfa_bwd",
    "embedding_fwd", "argsort", "cumsum", "topk", "grouped_mm", "scaled_mm", "cutlass_nvfp4_grouped_mm",
})

# `fd.<name>`: the FusionDefinition methods this plugin calls
FD_METHODS = frozenset({"define_tensor", "define_scalar", "add_output", "execute", "ops"})

# `nvfuser.<name>`: module-level names this plugin imports
MODULE_FUNCTIONS = frozenset({"FusionDefinition", "DataType", "compute_tensor_descriptor", "version"})

# `nvfuser.DataType.<name>` (py::enum_<PrimDataType> "DataType")
DATA_TYPES = frozenset({
    "Double", "Float", "Half", "Int", "Int32", "UInt64", "Bool", "BFloat16", "Float8_e4m3fn",
    "Float8_e5m2", "Float8_e8m0fnu", "Float4_e2m1fn", "Float4_e2m1fn_x2", "ComplexFloat",
    "ComplexDouble", "Null",
})
