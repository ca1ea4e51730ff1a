"""The parts of `nvfuser_direct`'s Python API this plugin relies on, as listed by the real library.

Read with `dir()` from nvfuser_direct 0.2.36+git7e04d26 (the wheel
nvfuser-cu126-torch210 0.2.36.dev20260301, torch 2.10.0, Python 3.12; it imports without a
GPU). CI has no nvFuser, so the translation table is tested against these sets there; in
the verification environment (plugins/nvfuser/verify/verify.sh) the tests also check the
sets against the installed library itself, and nvFuser builds every definition.
"""
from __future__ import annotations

__all__ = ["NVFUSER_VERSION_READ", "FD_OPS", "FD_METHODS", "DATA_TYPES", "MODULE_FUNCTIONS"]

NVFUSER_VERSION_READ = "0.2.36+git7e04d26"

# `fd.ops.<name>` (= nvfuser_direct.ops): every public name at NVFUSER_VERSION_READ
FD_OPS = frozenset({
    "abs", "acos", "acosh", "add", "addcmul", "argsort", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "broadcast", "broadcast_in_dim", "cast", "cat", "ceil", "clamp", "complex", "cos",
    "cosh", "cummax", "cummin", "cumprod", "cumsum", "cutlass_nvfp4_grouped_mm", "div", "embedding_fwd",
    "eq", "erf", "erfc", "erfcinv", "erfinv", "exp", "exp2", "expand", "expm1", "floor", "fmod", "frac",
    "full", "gather", "gcd", "ge", "grouped_mm", "gt", "imag", "index_select", "iota", "isfinite",
    "isinf", "isnan", "isneginf", "isposinf", "isreal", "le", "lerp", "lgamma", "linear", "log",
    "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or", "logical_right_shift", "lt",
    "matmul", "max", "maximum", "min", "minimum", "mod", "mul", "ne", "neg", "nextafter", "normal",
    "nv_block_quantize", "nv_grouped_block_quantize", "pad", "permute", "pow",
    "preprocess_grouped_matmul_input_sf", "prod", "rand_like", "randn_like", "real", "reciprocal",
    "relu", "remainder", "reshape", "round", "rsqrt", "scaled_mm", "scatter", "sdpfa_bwd", "sdpfa_fwd",
    "segment_set", "select", "set", "shape", "sigmoid", "sign", "signbit", "silu", "sin", "sinh",
    "size", "slice", "sqrt", "squeeze", "stride_order", "sub", "sum", "take_along_axis", "tan", "tanh",
    "threshold", "topk", "triu", "truediv", "trunc", "uniform", "var", "var_mean", "welford", "where",
})

# `fd.<name>`: the FusionDefinition methods this plugin calls
FD_METHODS = frozenset({"define_tensor", "define_scalar", "add_output", "execute", "ops"})

# `nvfuser_direct.<name>`: module-level names this plugin uses
MODULE_FUNCTIONS = frozenset({"FusionDefinition", "DataType", "compute_tensor_descriptor", "__version__"})

# `nvfuser_direct.DataType.<name>`
DATA_TYPES = frozenset({
    "BFloat16", "Bool", "ComplexDouble", "ComplexFloat", "Double", "Float", "Float4_e2m1fn",
    "Float4_e2m1fn_x2", "Float8_e4m3fn", "Float8_e5m2", "Float8_e8m0fnu", "Half", "Index", "Int",
    "Int32", "Null", "UInt64",
})
