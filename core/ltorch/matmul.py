"""Torch-language ops: matrix products (matmul, mm, bmm, mv, dot, outer, the addmm family, addr, multi_dot, chain_matmul)."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .unmodelled import NotModelled
from .functionalization import inplace
from .elementwise_binary import add, mul
from .helpers import broadcast_shapes, broadcast_to, check, check_tensors, computation_dtype, is_tensor, reshape_if_needed, to_dtype, transpose_if_needed
from ..proxies import TensorProxy

__all__ = [
    "matmul", "rmatmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "addmm", "addmv", "baddbmm",
    "addbmm", "addmm_", "addmv_", "baddbmm_", "addbmm_", "multi_dot", "addr", "addr_",
    "chain_matmul",
]


def check_operand_dtypes(name: str, *tensors: TensorProxy) -> None:
    """The one dtype, not bool, that torch's matrix-product kernels require of their operands."""
    dtypes = [t.dtype for t in tensors]
    check(len(set(dtypes)) == 1, lambda: f"{name}(): expected operands of one dtype, but got {', '.join(map(str, dtypes))}", RuntimeError)
    # torch has no bool kernels for matrix products: its error is NotImplementedError
    check(dtypes[0] != torch.bool, lambda: f"{name}(): not implemented for 'Bool'", NotImplementedError)
    # eager's complex products (conjugate bits and all) are not in the prims: eager runs them
    check(not dtypes[0].is_complex, lambda: f"squall: {name}() of complex tensors is not in squall's torch language", NotModelled)


def _shape_str(t: TensorProxy) -> str:
    return "x".join(map(str, t.shape))


def _unsqueeze(a: TensorProxy, dim: int) -> TensorProxy:
    shape = list(a.shape)
    shape.insert(dim, 1)
    return reshape_if_needed(a, shape)


# --- matrix products ---------------------------------------------------------------------


@torchsymbol(torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.linalg.matmul)
def matmul(input, other, *, out=None):
    """torch.matmul: 1-D operands as vectors, batch dimensions broadcast."""
    check_tensors("matmul", input=input, other=other)
    a, b = input, other
    check(a.ndim >= 1 and b.ndim >= 1, lambda: f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D", RuntimeError)
    check_operand_dtypes("matmul", a, b)
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    check(a.shape[-1] == k_b, lambda: f"matmul(): shapes cannot be multiplied ({_shape_str(a)} and {_shape_str(b)})", RuntimeError)
    if a.ndim <= 2 and b.ndim <= 2:
        return prims.matmul(a, b)
    if b.ndim <= 2:
        # (..., n, k) @ (k, p): one 2-D product over the folded leading dims, as torch does
        folded = reshape_if_needed(a, (math.prod(a.shape[:-1]), a.shape[-1]))
        out_shape = tuple(a.shape[:-1]) + tuple(b.shape[1:])
        return reshape_if_needed(prims.matmul(folded, b), out_shape)
    a2 = _unsqueeze(a, 0) if a.ndim == 1 else a
    batch = broadcast_shapes(a2.shape[:-2], b.shape[:-2])
    a2 = broadcast_to(a2, batch + tuple(a2.shape[-2:]))
    b2 = broadcast_to(b, batch + tuple(b.shape[-2:]))
    result = prims.matmul(a2, b2)
    if a.ndim == 1:
        result = reshape_if_needed(result, batch + (b.shape[-1],))
    return result


@torchsymbol(torch.Tensor.__rmatmul__)
def rmatmul(self, other):
    """`other @ self` where `other` is not a tensor subclass that handles it."""
    return matmul(other, self)


@torchsymbol(torch.mm, torch.Tensor.mm)
def mm(input, mat2, *, out=None):
    """torch.mm: a product of two matrices, no broadcasting."""
    check_tensors("mm", input=input, mat2=mat2)
    check(input.ndim == 2, lambda: f"mm(): self must be a matrix, got a {input.ndim}-D tensor", RuntimeError)
    check(mat2.ndim == 2, lambda: f"mm(): mat2 must be a matrix, got a {mat2.ndim}-D tensor", RuntimeError)
    check_operand_dtypes("mm", input, mat2)
    check(input.shape[1] == mat2.shape[0], lambda: f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(input)} and {_shape_str(mat2)})", RuntimeError)
    return prims.matmul(input, mat2)


def _check_bmm(name: str, b1, b2) -> None:
    check(b1.ndim == 3, lambda: f"{name}(): batch1 must be a 3D tensor, got a {b1.ndim}-D tensor", RuntimeError)
    check(b2.ndim == 3, lambda: f"{name}(): batch2 must be a 3D tensor, got a {b2.ndim}-D tensor", RuntimeError)
    check(
        b2.shape[:2] == (b1.shape[0], b1.shape[2]),
        lambda: f"{name}(): Expected size for first two dimensions of batch2 tensor to be: {[b1.shape[0], b1.shape[2]]} but got: {list(b2.shape[:2])} (batch1 {list(b1.shape)}, batch2 {list(b2.shape)})",
        RuntimeError,
    )


@torchsymbol(torch.bmm, torch.Tensor.bmm)
def bmm(input, mat2, *, out=None):
    """torch.bmm: batched products of 3-D tensors with equal batch sizes."""
    check_tensors("bmm", input=input, mat2=mat2)
    _check_bmm("bmm", input, mat2)
    check_operand_dtypes("bmm", input, mat2)
    return prims.matmul(input, mat2)


@torchsymbol(torch.mv, torch.Tensor.mv)
def mv(input, vec, *, out=None):
    """torch.mv: a matrix times a vector."""
    check_tensors("mv", input=input, vec=vec)
    check(input.ndim == 2 and vec.ndim == 1, lambda: f"mv(): matrix @ vector expected, got shapes {list(input.shape)} and {list(vec.shape)}", RuntimeError)
    check_operand_dtypes("mv", input, vec)
    check(input.shape[1] == vec.shape[0], lambda: f"mv(): size mismatch, got mat ({_shape_str(input)}), vec ({_shape_str(vec)})", RuntimeError)
    return prims.matmul(input, vec)


def _dot(name: str, input, tensor) -> TensorProxy:
    check_tensors(name, input=input, tensor=tensor)
    check(input.ndim == 1 and tensor.ndim == 1, lambda: f"{name}(): 1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors", RuntimeError)
    check_operand_dtypes(name, input, tensor)
    check(
        input.shape == tensor.shape,
        lambda: f"{name}(): inconsistent tensor size, expected tensors of one size, but got {input.shape[0]} and {tensor.shape[0]} elements",
        RuntimeError,
    )
    return prims.matmul(input, tensor)


@torchsymbol(torch.dot, torch.Tensor.dot)
def dot(input, tensor, *, out=None):
    """torch.dot: the inner product of two vectors."""
    return _dot("dot", input, tensor)


@torchsymbol(torch.vdot, torch.Tensor.vdot)
def vdot(input, other, *, out=None):
    """torch.vdot: dot with the first vector conjugated (the same as dot for real tensors)."""
    check(not (is_tensor(input) and input.dtype.is_complex), lambda: "vdot(): complex tensors are not supported by squall", NotModelled)
    return _dot("vdot", input, other)


@torchsymbol(torch.outer, torch.Tensor.outer, torch.ger, torch.Tensor.ger)
def outer(input, vec2, *, out=None):
    """torch.outer: the outer product of two vectors (type promotion as mul)."""
    check_tensors("outer", input=input, vec2=vec2)
    check(input.ndim == 1, lambda: f"outer: Expected 1-D argument self, but got {input.ndim}-D", RuntimeError)
    check(vec2.ndim == 1, lambda: f"outer: Expected 1-D argument vec2, but got {vec2.ndim}-D", RuntimeError)
    return mul(_unsqueeze(input, 1), _unsqueeze(vec2, 0))


def _scalar_for(x, dtype: torch.dtype):
    # torch casts alpha/beta to the tensors' dtype: a float scale on integers truncates
    if dtype.is_floating_point or dtype.is_complex:
        return x
    return int(x)


def _scaled_sum(name: str, input, product: TensorProxy, beta, alpha) -> TensorProxy:
    """beta * input + alpha * product, computed once in the computation dtype, as torch's kernels do."""
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check(
        input.dtype == product.dtype,
        lambda: f"{name}(): self and mat2 must have the same dtype, but got {input.dtype} and {product.dtype}",
        RuntimeError,
    )
    dtype = product.dtype
    compute = computation_dtype(dtype)
    input = broadcast_to(input, product.shape)
    out = to_dtype(product, compute)
    if alpha != 1:
        out = prims.mul(out, _scalar_for(alpha, compute))
    # beta == 0 ignores input entirely (NaN and inf in it included), as torch documents
    if beta != 0:
        scaled = to_dtype(input, compute)
        if beta != 1:
            scaled = prims.mul(scaled, _scalar_for(beta, compute))
        out = prims.add(scaled, out)
    return to_dtype(out, dtype)


@torchsymbol(torch.addmm, torch.Tensor.addmm)
def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """torch.addmm: beta * input + alpha * (mat1 @ mat2)."""
    return _scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha)


@torchsymbol(torch.addmv, torch.Tensor.addmv)
def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """torch.addmv: beta * input + alpha * (mat @ vec)."""
    return _scaled_sum("addmv", input, mv(mat, vec), beta, alpha)


@torchsymbol(torch.baddbmm, torch.Tensor.baddbmm)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """torch.baddbmm: beta * input + alpha * (batch1 @ batch2), batch by batch."""
    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@torchsymbol(torch.addbmm, torch.Tensor.addbmm)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """torch.addbmm: beta * input + alpha * (the sum over the batch of batch1 @ batch2)."""
    check_tensors("addbmm", batch1=batch1, batch2=batch2)
    _check_bmm("addbmm", batch1, batch2)
    check_operand_dtypes("addbmm", batch1, batch2)
    b, n, k = batch1.shape
    p = batch2.shape[2]
    # summing products over the batch is one product over (batch, k): (n, b*k) @ (b*k, p)
    lhs = reshape_if_needed(transpose_if_needed(batch1, (1, 0, 2)), (n, b * k))
    rhs = reshape_if_needed(batch2, (b * k, p))
    return _scaled_sum("addbmm", input, prims.matmul(lhs, rhs), beta, alpha)


addmm_ = inplace(addmm, torch.Tensor.addmm_)
addmv_ = inplace(addmv, torch.Tensor.addmv_)
baddbmm_ = inplace(baddbmm, torch.Tensor.baddbmm_)
addbmm_ = inplace(addbmm, torch.Tensor.addbmm_)


# --- contractions over named dimensions ------------------------------------------------


def _chain_product(mats: list) -> TensorProxy:
    """The product of a matrix chain in the cheapest order, the order torch's multi_dot uses too
    (in low precision the association order changes the rounding)."""
    n = len(mats)
    dims = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    # cost[i][j]: fewest multiplications for mats[i..j]; split[i][j]: where that product splits
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k) for k in range(i, j)
            )

    def product(i: int, j: int) -> TensorProxy:
        if i == j:
            return mats[i]
        k = split[i][j]
        return prims.matmul(product(i, k), product(k + 1, j))

    return product(0, n - 1)


@torchsymbol(torch.linalg.multi_dot)
def multi_dot(tensors, *, out=None):
    """torch.linalg.multi_dot: a chain of matrix products; the first and last may be vectors."""
    tensors = list(tensors)
    check(len(tensors) >= 2, lambda: f"multi_dot(): expected at least 2 tensors but got {len(tensors)}", RuntimeError)
    for i, t in enumerate(tensors):
        check(is_tensor(t), lambda: f"multi_dot(): expected a sequence of tensors, got {type(t).__name__} at {i}", TypeError)
        check(t.dtype == tensors[0].dtype, lambda: f"multi_dot(): all tensors must have be the same dtype but tensor 0 is {tensors[0].dtype} and tensor {i} {t.dtype}", RuntimeError)
    n = len(tensors)
    check(tensors[0].ndim in (1, 2), lambda: f"multi_dot(): the first tensor must be 1D or 2D but got {tensors[0].ndim}D", RuntimeError)
    check(tensors[-1].ndim in (1, 2), lambda: f"multi_dot(): the last tensor must be 1D or 2D but got {tensors[-1].ndim}D", RuntimeError)
    for i in range(1, n - 1):
        check(tensors[i].ndim == 2, lambda: f"multi_dot(): tensor {i} must be 2D but got {tensors[i].ndim}D", RuntimeError)
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = [_unsqueeze(tensors[0], 0) if first else tensors[0], *tensors[1:-1], _unsqueeze(tensors[-1], 1) if last else tensors[-1]]
    check_operand_dtypes("multi_dot", *mats)
    for i in range(n - 1):
        check(
            mats[i].shape[1] == mats[i + 1].shape[0],
            lambda: f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and {list(tensors[i + 1].shape)} cannot be multiplied",
            RuntimeError,
        )
    result = _chain_product(mats)
    out_shape = ([] if first else [result.shape[0]]) + ([] if last else [result.shape[1]])
    return reshape_if_needed(result, out_shape)


@torchsymbol(torch.addr, torch.Tensor.addr)
def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """torch.addr: beta * input + alpha * outer(vec1, vec2), with type promotion."""
    check(is_tensor(input), lambda: f"addr(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    product = outer(vec1, vec2)
    if alpha != 1:
        product = mul(product, alpha)
    if beta == 0:
        # beta == 0 ignores input (NaN included) but still broadcasts it and promotes with it
        dtype = torch.promote_types(input.dtype, product.dtype)
        return to_dtype(broadcast_to(product, broadcast_shapes(input.shape, product.shape)), dtype)
    return add(input if beta == 1 else mul(input, beta), product)


addr_ = inplace(addr, torch.Tensor.addr_, checks_overlap=True)


@torchsymbol(torch.chain_matmul)
def chain_matmul(*matrices, out=None):
    """torch.chain_matmul (deprecated): multi_dot over 2-D matrices."""
    check(len(matrices) >= 1, lambda: "chain_matmul(): Expected one or more matrices", RuntimeError)
    for i, m in enumerate(matrices):
        check(is_tensor(m) and m.ndim == 2, lambda: f"chain_matmul(): Tensor dimension is {getattr(m, 'ndim', None)}, expected 2 instead (tensor {i})", RuntimeError)
    if len(matrices) == 1:
        return matrices[0]
    return multi_dot(matrices)


# --- einsum ------------------------------------------------------------------------------
# A label is a letter, or a negative int for a dimension covered by an ellipsis (right-aligned:
# -1 is the last such dimension), so ellipses of different lengths broadcast naturally.
