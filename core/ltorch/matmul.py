"""Torch-language ops: matrix products (matmul and its relatives), linear, einsum."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torch_inplace, torchsymbol
from .elementwise_binary import add, mul
from .helpers import broadcast_shapes, broadcast_to, canonical_dim, canonical_dims, check, computation_dtype, is_tensor, to_dtype
from ..proxies import TensorProxy

__all__: list[str] = []


def _check_tensors(name: str, **tensors) -> None:
    for arg, t in tensors.items():
        check(is_tensor(t), lambda: f"{name}(): argument '{arg}' must be Tensor, not {type(t).__name__}", TypeError)


def _check_dtypes(name: str, *tensors: TensorProxy) -> None:
    dtypes = [t.dtype for t in tensors]
    check(len(set(dtypes)) == 1, lambda: f"{name}(): expected operands of one dtype, but got {', '.join(map(str, dtypes))}", RuntimeError)
    # torch has no bool kernels for matrix products: its error is NotImplementedError
    check(dtypes[0] != torch.bool, lambda: f"{name}(): not implemented for 'Bool'", NotImplementedError)


def _shape_str(t: TensorProxy) -> str:
    return "x".join(map(str, t.shape))


def _permute(a: TensorProxy, perm) -> TensorProxy:
    """prims.transpose, left out of the trace when it would not move anything."""
    return a if list(perm) == list(range(a.ndim)) else prims.transpose(a, perm)


def _reshape(a: TensorProxy, shape) -> TensorProxy:
    """prims.reshape, left out of the trace when the shape does not change."""
    return a if tuple(shape) == tuple(a.shape) else prims.reshape(a, shape)


def _unsqueeze(a: TensorProxy, dim: int) -> TensorProxy:
    shape = list(a.shape)
    shape.insert(dim, 1)
    return _reshape(a, shape)


# --- matrix products ---------------------------------------------------------------------


@torchsymbol(torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.linalg.matmul)
def matmul(input, other, *, out=None):
    """torch.matmul: 1-D operands as vectors, batch dimensions broadcast."""
    check(out is None, lambda: "matmul(): out= is not supported by squall (results are new tensors)", NotImplementedError)
    _check_tensors("matmul", input=input, other=other)
    a, b = input, other
    check(a.ndim >= 1 and b.ndim >= 1, lambda: f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D", RuntimeError)
    _check_dtypes("matmul", a, b)
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    check(a.shape[-1] == k_b, lambda: f"matmul(): shapes cannot be multiplied ({_shape_str(a)} and {_shape_str(b)})", RuntimeError)
    if a.ndim <= 2 and b.ndim <= 2:
        return prims.matmul(a, b)
    if b.ndim <= 2:
        # (..., n, k) @ (k, p): one 2-D product over the folded leading dims, as torch does
        folded = _reshape(a, (math.prod(a.shape[:-1]), a.shape[-1]))
        out_shape = tuple(a.shape[:-1]) + tuple(b.shape[1:])
        return _reshape(prims.matmul(folded, b), out_shape)
    a2 = _unsqueeze(a, 0) if a.ndim == 1 else a
    batch = broadcast_shapes(a2.shape[:-2], b.shape[:-2])
    a2 = broadcast_to(a2, batch + tuple(a2.shape[-2:]))
    b2 = broadcast_to(b, batch + tuple(b.shape[-2:]))
    result = prims.matmul(a2, b2)
    if a.ndim == 1:
        result = _reshape(result, batch + (b.shape[-1],))
    return result


@torchsymbol(torch.Tensor.__rmatmul__)
def rmatmul(self, other):
    """`other @ self` where `other` is not a tensor subclass that handles it."""
    return matmul(other, self)


@torchsymbol(torch.mm, torch.Tensor.mm)
def mm(input, mat2, *, out=None):
    """torch.mm: a product of two matrices, no broadcasting."""
    check(out is None, lambda: "mm(): out= is not supported by squall", NotImplementedError)
    _check_tensors("mm", input=input, mat2=mat2)
    check(input.ndim == 2, lambda: f"mm(): self must be a matrix, got a {input.ndim}-D tensor", RuntimeError)
    check(mat2.ndim == 2, lambda: f"mm(): mat2 must be a matrix, got a {mat2.ndim}-D tensor", RuntimeError)
    _check_dtypes("mm", input, mat2)
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
    check(out is None, lambda: "bmm(): out= is not supported by squall", NotImplementedError)
    _check_tensors("bmm", input=input, mat2=mat2)
    _check_bmm("bmm", input, mat2)
    _check_dtypes("bmm", input, mat2)
    return prims.matmul(input, mat2)


@torchsymbol(torch.mv, torch.Tensor.mv)
def mv(input, vec, *, out=None):
    """torch.mv: a matrix times a vector."""
    check(out is None, lambda: "mv(): out= is not supported by squall", NotImplementedError)
    _check_tensors("mv", input=input, vec=vec)
    check(input.ndim == 2 and vec.ndim == 1, lambda: f"mv(): matrix @ vector expected, got shapes {list(input.shape)} and {list(vec.shape)}", RuntimeError)
    _check_dtypes("mv", input, vec)
    check(input.shape[1] == vec.shape[0], lambda: f"mv(): size mismatch, got mat ({_shape_str(input)}), vec ({_shape_str(vec)})", RuntimeError)
    return prims.matmul(input, vec)


def _dot(name: str, input, tensor) -> TensorProxy:
    _check_tensors(name, input=input, tensor=tensor)
    check(input.ndim == 1 and tensor.ndim == 1, lambda: f"{name}(): 1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors", RuntimeError)
    _check_dtypes(name, input, tensor)
    check(
        input.shape == tensor.shape,
        lambda: f"{name}(): inconsistent tensor size, expected tensors of one size, but got {input.shape[0]} and {tensor.shape[0]} elements",
        RuntimeError,
    )
    return prims.matmul(input, tensor)


@torchsymbol(torch.dot, torch.Tensor.dot)
def dot(input, tensor, *, out=None):
    """torch.dot: the inner product of two vectors."""
    check(out is None, lambda: "dot(): out= is not supported by squall", NotImplementedError)
    return _dot("dot", input, tensor)


@torchsymbol(torch.vdot, torch.Tensor.vdot)
def vdot(input, other, *, out=None):
    """torch.vdot: dot with the first vector conjugated (the same as dot for real tensors)."""
    check(out is None, lambda: "vdot(): out= is not supported by squall", NotImplementedError)
    check(not (is_tensor(input) and input.dtype.is_complex), lambda: "vdot(): complex tensors are not supported by squall", NotImplementedError)
    return _dot("vdot", input, other)


@torchsymbol(torch.outer, torch.Tensor.outer, torch.ger, torch.Tensor.ger)
def outer(input, vec2, *, out=None):
    """torch.outer: the outer product of two vectors (type promotion as mul)."""
    check(out is None, lambda: "outer(): out= is not supported by squall", NotImplementedError)
    _check_tensors("outer", input=input, vec2=vec2)
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
    check(out is None, lambda: "addmm(): out= is not supported by squall", NotImplementedError)
    return _scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha)


@torchsymbol(torch.addmv, torch.Tensor.addmv)
def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """torch.addmv: beta * input + alpha * (mat @ vec)."""
    check(out is None, lambda: "addmv(): out= is not supported by squall", NotImplementedError)
    return _scaled_sum("addmv", input, mv(mat, vec), beta, alpha)


@torchsymbol(torch.baddbmm, torch.Tensor.baddbmm)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """torch.baddbmm: beta * input + alpha * (batch1 @ batch2), batch by batch."""
    check(out is None, lambda: "baddbmm(): out= is not supported by squall", NotImplementedError)
    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@torchsymbol(torch.addbmm, torch.Tensor.addbmm)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """torch.addbmm: beta * input + alpha * (the sum over the batch of batch1 @ batch2)."""
    check(out is None, lambda: "addbmm(): out= is not supported by squall", NotImplementedError)
    _check_tensors("addbmm", batch1=batch1, batch2=batch2)
    _check_bmm("addbmm", batch1, batch2)
    _check_dtypes("addbmm", batch1, batch2)
    b, n, k = batch1.shape
    p = batch2.shape[2]
    # summing products over the batch is one product over (batch, k): (n, b*k) @ (b*k, p)
    lhs = _reshape(_permute(batch1, (1, 0, 2)), (n, b * k))
    rhs = _reshape(batch2, (b * k, p))
    return _scaled_sum("addbmm", input, prims.matmul(lhs, rhs), beta, alpha)


addmm_ = torch_inplace(addmm, torch.Tensor.addmm_)
addmv_ = torch_inplace(addmv, torch.Tensor.addmv_)
baddbmm_ = torch_inplace(baddbmm, torch.Tensor.baddbmm_)
addbmm_ = torch_inplace(addbmm, torch.Tensor.addbmm_)


@torchsymbol(torch.nn.functional.linear)
def linear(input, weight, bias=None):
    """torch.nn.functional.linear: input @ weight.T + bias."""
    _check_tensors("linear", input=input, weight=weight)
    check(weight.ndim in (1, 2), lambda: f"linear(): weight must be 1-D or 2-D, but got a {weight.ndim}-D weight of shape {list(weight.shape)}", RuntimeError)
    # torch runs 2-D and 3-D inputs with a bias through addmm, which needs a 2-D weight
    check(
        bias is None or weight.ndim == 2 or not is_tensor(input) or input.ndim not in (2, 3),
        lambda: f"linear(): mat2 must be a matrix, got 1-D tensor (a 1-D weight with a bias needs a 1-D or 4-D+ input, got {input.ndim}-D)",
        RuntimeError,
    )
    out = matmul(input, weight if weight.ndim == 1 else _permute(weight, (1, 0)))
    if bias is None:
        return out
    check(is_tensor(bias), lambda: f"linear(): argument 'bias' must be Tensor, not {type(bias).__name__}", TypeError)
    check(bias.dtype == out.dtype, lambda: f"linear(): bias of dtype {bias.dtype} does not match the input's {out.dtype}", RuntimeError)
    bias = broadcast_to(bias, out.shape)
    compute = computation_dtype(out.dtype)
    return to_dtype(prims.add(to_dtype(out, compute), to_dtype(bias, compute)), out.dtype)


# --- contractions over named dimensions ------------------------------------------------


def _contract_dims(a: TensorProxy, b: TensorProxy, dims_a: list[int], dims_b: list[int]) -> TensorProxy:
    """Sum a * b over the paired dims: free dims of a, then free dims of b, as one matmul."""
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    m = math.prod(a.shape[d] for d in free_a)
    k = math.prod(a.shape[d] for d in dims_a)
    n = math.prod(b.shape[d] for d in free_b)
    lhs = _reshape(_permute(a, free_a + dims_a), (m, k))
    rhs = _reshape(_permute(b, dims_b + free_b), (k, n))
    shape = [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b]
    return _reshape(prims.matmul(lhs, rhs), shape)


@torchsymbol(torch.tensordot)
def tensordot(a, b, dims=2, out=None):
    """torch.tensordot: contract the last `dims` dims of a with the first of b, or the listed pairs."""
    check(out is None, lambda: "tensordot(): out= is not supported by squall", NotImplementedError)
    _check_tensors("tensordot", a=a, b=b)
    check(a.dtype == b.dtype, lambda: f"tensordot(): both inputs should have same dtype, got {a.dtype} and {b.dtype}", RuntimeError)
    check(a.dtype != torch.bool, lambda: "tensordot(): not implemented for 'Bool'", NotImplementedError)
    if isinstance(dims, int) and not isinstance(dims, bool):
        check(dims >= 0, lambda: f"tensordot expects dims >= 0, but got dims={dims}", RuntimeError)
        check(dims <= min(a.ndim, b.ndim), lambda: f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}", RuntimeError)
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        check(isinstance(dims, (list, tuple)) and len(dims) == 2, lambda: f"tensordot(): dims must be an int or a pair of dim lists, got {dims!r}", TypeError)
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
        check(len(dims_a) == len(dims_b), lambda: "both dimension lists should have same length", RuntimeError)
        dims_a, dims_b = list(canonical_dims(a.ndim, dims_a)), list(canonical_dims(b.ndim, dims_b))
    for da, db in zip(dims_a, dims_b):
        check(
            a.shape[da] == b.shape[db],
            lambda: f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} and second has size {b.shape[db]} in dim {db}",
            RuntimeError,
        )
    return _contract_dims(a, b, dims_a, dims_b)


@torchsymbol(torch.inner, torch.Tensor.inner)
def inner(input, other, *, out=None):
    """torch.inner: contract the last dims (a 0-d operand multiplies, with type promotion)."""
    check(out is None, lambda: "inner(): out= is not supported by squall", NotImplementedError)
    _check_tensors("inner", input=input, other=other)
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    check(
        input.shape[-1] == other.shape[-1],
        lambda: f"inner() the last dimension must match on both input tensors but got shapes {list(input.shape)} and {list(other.shape)}",
        RuntimeError,
    )
    check(input.dtype == other.dtype, lambda: f"inner(): both inputs should have same dtype, got {input.dtype} and {other.dtype}", RuntimeError)
    check(input.dtype != torch.bool, lambda: "inner(): not implemented for 'Bool'", NotImplementedError)
    return _contract_dims(input, other, [input.ndim - 1], [other.ndim - 1])


@torchsymbol(torch.linalg.vecdot)
def vecdot(x, y, *, dim=-1, out=None):
    """torch.linalg.vecdot: sum(x * y) over `dim`, batch dimensions broadcast."""
    check(out is None, lambda: "linalg.vecdot(): out= is not supported by squall", NotImplementedError)
    _check_tensors("linalg.vecdot", x=x, y=y)
    check(x.dtype == y.dtype, lambda: f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type {x.dtype} and y of type {y.dtype} instead", RuntimeError)
    check(x.dtype.is_floating_point, lambda: f"linalg.vecdot: Expected a floating point or complex tensor as input. Got {x.dtype}", RuntimeError)
    shape = broadcast_shapes(x.shape, y.shape)
    d = canonical_dim(len(shape), dim)
    product = mul(broadcast_to(x, shape), broadcast_to(y, shape))
    compute = computation_dtype(x.dtype)
    return to_dtype(prims.sum(to_dtype(product, compute), [d]), x.dtype)


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
    check(out is None, lambda: "linalg.multi_dot(): out= is not supported by squall", NotImplementedError)
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
    _check_dtypes("multi_dot", *mats)
    for i in range(n - 1):
        check(
            mats[i].shape[1] == mats[i + 1].shape[0],
            lambda: f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and {list(tensors[i + 1].shape)} cannot be multiplied",
            RuntimeError,
        )
    result = _chain_product(mats)
    out_shape = ([] if first else [result.shape[0]]) + ([] if last else [result.shape[1]])
    return _reshape(result, out_shape)


@torchsymbol(torch.addr, torch.Tensor.addr)
def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """torch.addr: beta * input + alpha * outer(vec1, vec2), with type promotion."""
    check(out is None, lambda: "addr(): out= is not supported by squall", NotImplementedError)
    check(is_tensor(input), lambda: f"addr(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    product = outer(vec1, vec2)
    if alpha != 1:
        product = mul(product, alpha)
    if beta == 0:
        # beta == 0 ignores input (NaN included) but still broadcasts it and promotes with it
        dtype = torch.promote_types(input.dtype, product.dtype)
        return to_dtype(broadcast_to(product, broadcast_shapes(input.shape, product.shape)), dtype)
    return add(input if beta == 1 else mul(input, beta), product)


addr_ = torch_inplace(addr, torch.Tensor.addr_)


@torchsymbol(torch.nn.functional.bilinear)
def bilinear(input1, input2, weight, bias=None):
    """torch.nn.functional.bilinear: y[..., o] = input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    _check_tensors("bilinear", input1=input1, input2=input2, weight=weight)
    check(
        input1.dtype == input2.dtype == weight.dtype and (bias is None or bias.dtype == weight.dtype),
        lambda: f"All tensors must have the same dtype, got input1: {input1.dtype}, input2: {input2.dtype}, weight: {weight.dtype}",
        RuntimeError,
    )
    check(weight.ndim == 3, lambda: f"bilinear(): weight must be three-dimensional, got a weight of size {list(weight.shape)}", RuntimeError)
    check(input1.ndim == input2.ndim, lambda: f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}", RuntimeError)
    for d in range(input1.ndim - 1):
        check(input1.shape[d] == input2.shape[d], lambda: f"bilinear(): input batch dimensions do not match at dim {d}: got {input1.shape[d]} and {input2.shape[d]}", RuntimeError)
    o, i, j = weight.shape
    check(input1.shape[-1] == i, lambda: f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {i}", RuntimeError)
    check(input2.shape[-1] == j, lambda: f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {j}", RuntimeError)
    if bias is not None:
        check(bias.shape == (o,), lambda: f"bilinear(): bias size does not match weight size: got {bias.shape[-1] if bias.ndim else 0} but expected {o}", RuntimeError)
    batch = tuple(input1.shape[:-1])
    b = math.prod(batch)
    # (b, i) @ (i, o*j), then per row: (o, j) @ (j, 1)
    left = prims.matmul(_reshape(input1, (b, i)), _reshape(_permute(weight, (1, 0, 2)), (i, o * j)))
    y = prims.matmul(_reshape(left, (b, o, j)), _reshape(input2, (b, j, 1)))
    y = _reshape(y, (*batch, o))
    if bias is None:
        return y
    compute = computation_dtype(y.dtype)
    return to_dtype(prims.add(to_dtype(y, compute), to_dtype(broadcast_to(bias, y.shape), compute)), y.dtype)


@torchsymbol(torch.chain_matmul)
def chain_matmul(*matrices, out=None):
    """torch.chain_matmul (deprecated): multi_dot over 2-D matrices."""
    check(out is None, lambda: "chain_matmul(): out= is not supported by squall", NotImplementedError)
    check(len(matrices) >= 1, lambda: "chain_matmul(): Expected one or more matrices", RuntimeError)
    for i, m in enumerate(matrices):
        check(is_tensor(m) and m.ndim == 2, lambda: f"chain_matmul(): Tensor dimension is {getattr(m, 'ndim', None)}, expected 2 instead (tensor {i})", RuntimeError)
    if len(matrices) == 1:
        return matrices[0]
    return multi_dot(matrices)


# --- einsum ------------------------------------------------------------------------------
# A label is a letter, or a negative int for a dimension covered by an ellipsis (right-aligned:
# -1 is the last such dimension), so ellipses of different lengths broadcast naturally.

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist_equation(args) -> tuple[str, list]:
    """einsum(op0, sublist0, op1, sublist1, ..., [out]) as an equation and operands."""

    def term(sublist) -> str:
        out = []
        for s in sublist:
            if s is Ellipsis:
                out.append("...")
            else:
                check(isinstance(s, int) and 0 <= s < 52, lambda: f"einsum(): subscript in subscript list is not within the valid range [0, 52), got {s!r}", ValueError)
                out.append(_LETTERS[s])
        return "".join(out)

    operands = list(args[0::2][: len(args) // 2])
    terms = [term(s) for s in args[1::2][: len(args) // 2]]
    equation = ",".join(terms)
    if len(args) % 2:
        equation += "->" + term(args[-1])
    return equation, operands


def _parse_term(term: str, what: str, offset: int) -> tuple[list, bool]:
    labels, ellipsis, j = [], False, 0
    while j < len(term):
        c = term[j]
        if c == ".":
            check(term[j : j + 3] == "..." and not ellipsis, lambda: f"einsum(): found '.' for {what} that is not part of any ellipsis", RuntimeError)
            labels.append(Ellipsis)
            ellipsis = True
            j += 3
            continue
        check(c in _LETTERS, lambda: f"einsum(): invalid subscript given at index {offset + j} in the equation string, subscripts must be in [a-zA-Z]", RuntimeError)
        labels.append(c)
        j += 1
    return labels, ellipsis


def _expand_ellipsis(labels: list, ndim: int) -> list:
    n = ndim - (len(labels) - (Ellipsis in labels))
    if Ellipsis not in labels:
        return labels
    i = labels.index(Ellipsis)
    return labels[:i] + list(range(-n, 0)) + labels[i + 1 :]


def _take_diagonal(a: TensorProxy, labels: list) -> tuple[TensorProxy, list]:
    """A label repeated within one operand selects the diagonal of those dimensions."""
    for label in dict.fromkeys(labels):
        where = [i for i, l in enumerate(labels) if l == label]
        if len(where) < 2:
            continue
        others = [i for i in range(a.ndim) if i not in where]
        n, r = a.shape[where[0]], len(where)
        a = _permute(a, others + where)
        a = _reshape(a, [a.shape[i] for i in range(len(others))] + [n**r])
        # in the flattened block the diagonal entries sit 1 + n + ... + n^(r-1) apart
        step = max(sum(n**j for j in range(r)), 1)
        ndim = a.ndim
        a = prims.slice(a, [0] * ndim, list(a.shape), [1] * (ndim - 1) + [step])
        labels = [labels[i] for i in others] + [label]
    return a, labels


def _sum_out(a: TensorProxy, labels: list, keep) -> tuple[TensorProxy, list]:
    dims = [i for i, l in enumerate(labels) if l not in keep]
    if not dims:
        return a, labels
    return prims.sum(a, dims), [l for l in labels if l in keep]


def _contract(a, la, b, lb, kept) -> tuple[TensorProxy, list]:
    """Contract two operands over their shared labels that nothing later needs, with one matmul."""
    a, la = _sum_out(a, la, set(lb) | kept)
    b, lb = _sum_out(b, lb, set(la) | kept)
    batch = [l for l in la if l in lb and l in kept]
    contracted = [l for l in la if l in lb and l not in kept]
    a_free = [l for l in la if l not in lb]
    b_free = [l for l in lb if l not in la]
    size = {l: n for l, n in zip(la, a.shape)}
    for l, n in zip(lb, b.shape):
        size[l] = max(size.get(l, n), n)

    def arrange(t, lt, order):
        # shared labels of size 1 broadcast against the other operand's size
        full = [size[l] for l in lt]
        if list(t.shape) != full:
            t = prims.broadcast_in_dim(t, full, list(range(t.ndim)))
        return _permute(t, [lt.index(l) for l in order])

    nb, m, k, p = (math.prod(size[l] for l in ls) for ls in (batch, a_free, contracted, b_free))
    lhs = _reshape(arrange(a, la, batch + a_free + contracted), (nb, m, k) if batch else (m, k))
    rhs = _reshape(arrange(b, lb, batch + contracted + b_free), (nb, k, p) if batch else (k, p))
    out_labels = batch + a_free + b_free
    return _reshape(prims.matmul(lhs, rhs), [size[l] for l in out_labels]), out_labels


@torchsymbol(torch.einsum)
def einsum(*args):
    """torch.einsum: any number of operands, '...', implicit output, broadcasting, diagonals."""
    check(len(args) >= 1, lambda: "einsum(): must specify the equation string and at least one operand", RuntimeError)
    if is_tensor(args[0]):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    check(isinstance(equation, str), lambda: f"einsum(): expected an equation string, got {type(equation).__name__}", TypeError)
    for i, op in enumerate(operands):
        check(is_tensor(op), lambda: f"einsum(): operand {i} must be a Tensor, not {type(op).__name__}", TypeError)
    check(len(operands) >= 1, lambda: "einsum(): must provide at least one operand", RuntimeError)
    _check_dtypes("einsum", *operands)
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    check(len(terms) <= len(operands), lambda: "einsum(): fewer operands were provided than specified in the equation", RuntimeError)
    check(len(terms) >= len(operands), lambda: "einsum(): more operands were provided than specified in the equation", RuntimeError)

    labelled, offset = [], 0
    for i, (term, op) in enumerate(zip(terms, operands)):
        labels, ellipsis = _parse_term(term, f"operand {i}", offset)
        offset += len(term) + 1
        n = len(labels) - ellipsis
        if ellipsis:
            check(n <= op.ndim, lambda: f"einsum(): the number of subscripts in the equation ({n}) is more than the number of dimensions ({op.ndim}) for operand {i}", RuntimeError)
        else:
            check(n == op.ndim, lambda: f"einsum(): the number of subscripts in the equation ({n}) does not match the number of dimensions ({op.ndim}) for operand {i} and no ellipsis was given", RuntimeError)
        labelled.append(_expand_ellipsis(labels, op.ndim))

    sizes: dict = {}
    for i, (labels, op) in enumerate(zip(labelled, operands)):
        seen: dict = {}
        for l, n in zip(labels, op.shape):
            check(seen.setdefault(l, n) == n, lambda: f"einsum(): subscript {l} is repeated for operand {i} but the sizes don't match, {n} != {seen[l]}", RuntimeError)
            prev = sizes.get(l, 1)
            what = f"subscript {l}" if isinstance(l, str) else f"dimension {l} covered by ellipsis"
            check(prev == 1 or n == 1 or n == prev, lambda: f"einsum(): {what} has size {n} for operand {i} which does not broadcast with previously seen size {prev}", RuntimeError)
            sizes[l] = n if prev == 1 else prev
    ellipsis_labels = sorted((l for l in sizes if not isinstance(l, str)))

    if arrow:
        out_labels, out_ellipsis = _parse_term(rhs, "the output", len(lhs) + 2)
        if out_ellipsis:
            i = out_labels.index(Ellipsis)
            out_labels = out_labels[:i] + ellipsis_labels + out_labels[i + 1 :]
        for l in out_labels:
            check(l in sizes, lambda: f"einsum(): output subscript {l} does not appear in the equation for any input operand", RuntimeError)
            check(out_labels.count(l) == 1, lambda: f"einsum(): output subscript {l} appears more than once in the output", RuntimeError)
    else:
        counts: dict = {}
        for labels in labelled:
            for l in labels:
                counts[l] = counts.get(l, 0) + 1
        out_labels = ellipsis_labels + sorted(l for l in counts if isinstance(l, str) and counts[l] == 1)

    pieces = [_take_diagonal(op, labels) for op, labels in zip(operands, labelled)]
    needed = [set(out_labels)]  # needed[i]: labels used by operands after i, or the output
    for _, labels in reversed(pieces[1:]):
        needed.insert(0, needed[0] | set(labels))
    cur, cur_labels = _sum_out(*pieces[0], needed[0])
    for (op, labels), kept in zip(pieces[1:], needed[1:]):
        cur, cur_labels = _contract(cur, cur_labels, op, labels, kept)
    cur, cur_labels = _sum_out(cur, cur_labels, set(out_labels))
    full = [sizes[l] if cur.shape[cur_labels.index(l)] == 1 else cur.shape[cur_labels.index(l)] for l in out_labels]
    cur = _permute(cur, [cur_labels.index(l) for l in out_labels])
    if list(cur.shape) != full:
        cur = prims.broadcast_in_dim(cur, full, list(range(cur.ndim)))
    return cur


__all__ += [
    "matmul", "rmatmul", "mm", "bmm", "mv", "dot", "vdot", "outer",
    "addmm", "addmv", "baddbmm", "addbmm", "addmm_", "addmv_", "baddbmm_", "addbmm_",
    "linear", "einsum", "tensordot", "inner", "vecdot", "multi_dot", "addr", "addr_", "bilinear", "chain_matmul",
]  # fmt: skip
