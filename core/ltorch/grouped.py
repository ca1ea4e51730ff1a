"""Torch-language ops: grouped matrix products (torch._grouped_mm, the Mixture-of-Experts kernel).

`offs` holds the group boundaries as data, so the groups' sizes are not known while tracing.
The decomposition keeps every shape fixed: each row (or column, or contraction index) learns
its group by comparing its position with the boundaries, and the products are taken for the
whole operand and masked. Positions past the last boundary, which torch leaves unwritten,
come out as zeros. The torch executor runs the op as torch._grouped_mm itself.
"""
from __future__ import annotations

import torch

from .base import torchsymbol
from .elementwise_binary import ge, logical_and, lt, mul, where
from .factories import arange, zeros
from .helpers import check, is_tensor, to_dtype, torch_type_name
from .indexing import index_select
from .joins_and_splits import cat
from .matmul import matmul
from .reductions import sum
from .shape import squeeze, unsqueeze

__all__ = ["grouped_mm"]

_OPERAND_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _group_masks(offs, length: int):
    """(groups, length) bool: position j belongs to group i when offs[i-1] <= j < offs[i]."""
    ends = to_dtype(offs, torch.int64)
    starts = cat([zeros(1, dtype=torch.int64, device=offs.device), ends[:-1]])
    positions = unsqueeze(arange(length, device=offs.device), 0)
    return logical_and(ge(positions, unsqueeze(starts, 1)), lt(positions, unsqueeze(ends, 1)))


@torchsymbol(torch._grouped_mm)
def grouped_mm(input, mat2, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm: one matrix product per group; 2-D operands are split into groups by `offs`.

    2-D x 3-D: rows of `input` by group, each times its group's matrix (an MoE layer's
    forward); 3-D x 2-D: columns of `mat2` by group; 2-D x 2-D: the contraction dimension
    by group, one (m, n) product per group; 3-D x 3-D: a batched product, no `offs`.
    """
    check(is_tensor(input) and is_tensor(mat2), lambda: "_grouped_mm(): expected tensors for mat_a and mat_b", TypeError)
    for name, t in (("mat_a", input), ("mat_b", mat2)):
        check(t.dtype in _OPERAND_DTYPES, lambda: f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got {torch_type_name(t.dtype)}", RuntimeError)
        check(t.ndim in (2, 3), lambda: f"Multiplicands must be 2D or 3D but got mat_a.dim()={input.ndim} and mat_b.dim()={mat2.ndim}", RuntimeError)
    check(input.dtype == mat2.dtype, lambda: f"Expected mat_a and mat_b of one dtype, got {input.dtype} and {mat2.dtype}", RuntimeError)
    check(bias is None, lambda: "Bias not supported yet", RuntimeError)
    check(out_dtype is None or out_dtype == input.dtype, lambda: "Grouped gemm output dtype must match `mat_a` dtype", RuntimeError)
    a_2d, b_2d = input.ndim == 2, mat2.ndim == 2
    if a_2d or b_2d:
        check(offs is not None, lambda: "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d", RuntimeError)
        check(is_tensor(offs) and offs.ndim == 1, lambda: "Offsets tensor must be 1D", RuntimeError)
        check(offs.dtype == torch.int32, lambda: "Offsets have to be int32", RuntimeError)
    else:
        check(offs is None, lambda: "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d", RuntimeError)
    check(not (a_2d and b_2d) or input.shape[1] == mat2.shape[0], lambda: f"contraction dimension of mat_a and mat_b must match, got {input.shape[1]} and {mat2.shape[0]}", RuntimeError)
    check((a_2d and b_2d) or input.shape[-1] == mat2.shape[-2], lambda: "contraction dimension of mat_a and mat_b must match", RuntimeError)
    if not a_2d and not b_2d:
        check(input.shape[0] == mat2.shape[0], lambda: "batched dimension has to match", RuntimeError)
        return matmul(input, mat2)
    groups = offs.shape[0]
    if a_2d and not b_2d:
        check(groups == mat2.shape[0], lambda: "matrix batch sizes have to match", RuntimeError)
        masks = _group_masks(offs, input.shape[0])  # (groups, m)
        # each row's group, and whether it has one (rows past the last boundary do not)
        owned = sum(masks, 0) > 0
        group = sum(mul(masks, unsqueeze(arange(groups, device=offs.device), 1)), 0)
        rows = squeeze(matmul(unsqueeze(input, 1), index_select(mat2, 0, group)), 1)  # (m, n)
        return where(unsqueeze(owned, 1), rows, 0)
    if b_2d and not a_2d:
        check(groups == input.shape[0], lambda: "matrix batch sizes have to match", RuntimeError)
        masks = _group_masks(offs, mat2.shape[1])  # (groups, n)
        products = matmul(input, mat2)  # (groups, m, n): every group times every column
        return sum(where(unsqueeze(masks, 1), products, 0), 0)
    masks = _group_masks(offs, input.shape[1])  # (groups, k)
    picked = where(unsqueeze(masks, 1), unsqueeze(input, 0), 0)  # (groups, m, k)
    return matmul(picked, mat2)
