"""The built-in torch executor: every prim and every ltorch op, run by PyTorch eager.

It is always asked last, so every program runs. It implements each ltorch op with the
torch callable the op stands for (softmax runs as one torch softmax, not six prims),
which is why a torch-only plan costs no more than eager.
"""
from __future__ import annotations

import torch

from squall import ltorch, prims
from squall.extend import Implementation, OperatorExecutor
from squall.prims.base import PrimIDs
from squall.symbol import Symbol, Tags

__all__ = ["TorchExecutor", "PRIM_IMPLS", "make_executor"]


def _broadcast_in_dim(a, shape, broadcast_dimensions):
    view = [1] * len(shape)
    for d, n in zip(broadcast_dimensions, a.shape):
        view[d] = n
    return a.reshape(view).expand(shape)


def _with_tensor_first(fn):
    # Prims accept a Python number for either operand; some torch functions only for the second.
    def impl(a, b):
        if not isinstance(a, torch.Tensor):
            a = torch.scalar_tensor(a, dtype=b.dtype, device=b.device)
        return fn(a, b)

    impl.__name__ = fn.__name__
    return impl


# --- shape impl helpers ---
# --- end shape impl helpers ---
# --- reduction impl helpers ---
# --- end reduction impl helpers ---
# --- indexing impl helpers ---
# --- end indexing impl helpers ---
# --- factory impl helpers ---
# --- end factory impl helpers ---
# --- linalg impl helpers ---
# --- end linalg impl helpers ---


# prim id -> the torch callable that computes it, with the prim's exact signature and result
PRIM_IMPLS = {
    # elementwise unary
    PrimIDs.ABS: torch.abs,
    PrimIDs.NEG: torch.neg,
    PrimIDs.EXP: torch.exp,
    PrimIDs.EXPM1: torch.expm1,
    PrimIDs.EXP2: torch.exp2,
    PrimIDs.LOG: torch.log,
    PrimIDs.LOG1P: torch.log1p,
    PrimIDs.LOG2: torch.log2,
    PrimIDs.LOG10: torch.log10,
    PrimIDs.SQRT: torch.sqrt,
    PrimIDs.RSQRT: torch.rsqrt,
    PrimIDs.SIN: torch.sin,
    PrimIDs.COS: torch.cos,
    PrimIDs.TAN: torch.tan,
    PrimIDs.ASIN: torch.asin,
    PrimIDs.ACOS: torch.acos,
    PrimIDs.ATAN: torch.atan,
    PrimIDs.ASINH: torch.asinh,
    PrimIDs.ACOSH: torch.acosh,
    PrimIDs.ATANH: torch.atanh,
    PrimIDs.SINH: torch.sinh,
    PrimIDs.COSH: torch.cosh,
    PrimIDs.TANH: torch.tanh,
    PrimIDs.ERF: torch.erf,
    PrimIDs.ERFC: torch.erfc,
    PrimIDs.ERFINV: torch.erfinv,
    PrimIDs.LGAMMA: torch.lgamma,
    PrimIDs.DIGAMMA: torch.digamma,
    PrimIDs.FLOOR: torch.floor,
    PrimIDs.CEIL: torch.ceil,
    PrimIDs.ROUND: torch.round,
    PrimIDs.TRUNC: torch.trunc,
    PrimIDs.SIGN: torch.sign,
    PrimIDs.SIGNBIT: torch.signbit,
    PrimIDs.RECIPROCAL: torch.reciprocal,
    PrimIDs.ISFINITE: torch.isfinite,
    PrimIDs.ISNAN: torch.isnan,
    PrimIDs.ISINF: torch.isinf,
    PrimIDs.LOGICAL_NOT: torch.logical_not,
    PrimIDs.BITWISE_NOT: torch.bitwise_not,
    PrimIDs.REAL: torch.real,
    PrimIDs.IMAG: torch.imag,
    # elementwise binary: Python operators accept a number on either side
    PrimIDs.ADD: lambda a, b: a + b,
    PrimIDs.SUB: lambda a, b: a - b,
    PrimIDs.MUL: lambda a, b: a * b,
    PrimIDs.DIV: lambda a, b, rounding_mode=None: (
        a / b if rounding_mode is None else _with_tensor_first(lambda x, y: torch.div(x, y, rounding_mode=rounding_mode))(a, b)
    ),
    PrimIDs.POW: lambda a, b: a**b,
    PrimIDs.REMAINDER: lambda a, b: a % b,
    PrimIDs.FMOD: _with_tensor_first(torch.fmod),
    PrimIDs.ATAN2: _with_tensor_first(torch.atan2),
    PrimIDs.HYPOT: _with_tensor_first(torch.hypot),
    PrimIDs.COPYSIGN: _with_tensor_first(torch.copysign),
    PrimIDs.NEXTAFTER: _with_tensor_first(torch.nextafter),
    PrimIDs.MAXIMUM: _with_tensor_first(torch.maximum),
    PrimIDs.MINIMUM: _with_tensor_first(torch.minimum),
    PrimIDs.EQ: lambda a, b: a == b,
    PrimIDs.NE: lambda a, b: a != b,
    PrimIDs.LT: lambda a, b: a < b,
    PrimIDs.LE: lambda a, b: a <= b,
    PrimIDs.GT: lambda a, b: a > b,
    PrimIDs.GE: lambda a, b: a >= b,
    PrimIDs.LOGICAL_AND: _with_tensor_first(torch.logical_and),
    PrimIDs.LOGICAL_OR: _with_tensor_first(torch.logical_or),
    PrimIDs.LOGICAL_XOR: _with_tensor_first(torch.logical_xor),
    PrimIDs.BITWISE_AND: lambda a, b: a & b,
    PrimIDs.BITWISE_OR: lambda a, b: a | b,
    PrimIDs.BITWISE_XOR: lambda a, b: a ^ b,
    PrimIDs.BITWISE_LEFT_SHIFT: lambda a, b: a << b,
    PrimIDs.BITWISE_RIGHT_SHIFT: lambda a, b: a >> b,
    PrimIDs.WHERE: torch.where,
    PrimIDs.CONVERT_ELEMENT_TYPE: lambda a, dtype: a.to(dtype),
    PrimIDs.COPY_: lambda dst, src: dst.copy_(src),
    # --- shape prims ---
    PrimIDs.BROADCAST_IN_DIM: _broadcast_in_dim,
    PrimIDs.RESHAPE: torch.reshape,
    PrimIDs.TRANSPOSE: torch.permute,
    # --- end shape prims ---
    # --- reduction prims ---
    # --- end reduction prims ---
    # --- indexing prims ---
    # --- end indexing prims ---
    # --- factory prims ---
    # --- end factory prims ---
    # --- linalg prims ---
    # --- end linalg prims ---
}


class TorchExecutor(OperatorExecutor):
    """Runs every prim and every ltorch op (and opaque torch calls) with PyTorch."""

    def __init__(self):
        super().__init__(
            "torch",
            version=torch.__version__,
            distribution="squall",
            default_rank=1_000_000,
            supports_autograd=True,
        )
        missing = sorted(set(prims.all_prims()) - set(PRIM_IMPLS))
        if missing:
            raise RuntimeError(f"squall: the torch executor has no implementation for {missing}")
        for prim_id, fn in PRIM_IMPLS.items():
            self.register_implementation(prim_id, fn)
        for sym in ltorch.all_symbols().values():
            self.register_implementation(sym, sym.torchfns[0])

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        found = self.implementations.get(sym.id)
        if found is None and Tags.OPAQUE in sym.tags:
            return Implementation(sym.torchfns[0])
        return found


def make_executor() -> TorchExecutor:
    """A fresh torch executor."""
    return TorchExecutor()
