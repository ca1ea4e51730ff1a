"""Torch-language ops: vector norms and what is built on them (vector_norm, linalg.norm, norm, normalize, cosine_similarity, pairwise_distance, cdist,
norm_except_dim and the weight norm torch.nn.utils's weight_norm parametrization computes)."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import NotInLanguage, torchsymbol
from .unmodelled import NotModelled
from .elementwise_binary import div, mul
from .helpers import broadcast, broadcast_shapes, broadcast_to, canonical_dim, check, check_input, computation_dtype, expand_reduced, is_tensor, result_dtype, to_dtype
from .reductions import keep_dims, reduction_dims, root_of_sum
from ..prims.base import dtype_category
from ..proxies import TensorProxy
from ..symbol import Tags

F = torch.nn.functional
_REDUCTION = (Tags.REDUCTION,)

__all__ = [
    "cdist", "vector_norm", "linalg_norm", "norm", "normalize", "cosine_similarity", "pairwise_distance", "norm_except_dim", "weight_norm",
]


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@torchsymbol(torch.cdist)
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """torch.cdist: p-norm distances between the rows of x1 and x2, batch dimensions broadcast."""
    for arg, t in (("x1", x1), ("x2", x2)):
        check(is_tensor(t), lambda: f"cdist(): argument '{arg}' must be Tensor, not {type(t).__name__}", TypeError)
    check(compute_mode in _CDIST_MODES, lambda: f"{compute_mode} is not a valid value for compute_mode", ValueError)
    check(x1.ndim >= 2, lambda: f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D", RuntimeError)
    check(x2.ndim >= 2, lambda: f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D", RuntimeError)
    check(x1.shape[-1] == x2.shape[-1], lambda: f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}", RuntimeError)
    check(x1.dtype.is_floating_point, lambda: f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}", RuntimeError)
    check(x1.dtype == x2.dtype, lambda: f"cdist(): expected X1 and X2 of one dtype, got {x1.dtype} and {x2.dtype}", RuntimeError)
    check(p >= 0, lambda: "cdist only supports non-negative p values", RuntimeError)
    batch = broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    (P, M), R = x1.shape[-2:], x2.shape[-2]
    compute = computation_dtype(x1.dtype)
    a = to_dtype(broadcast_to(x1, (*batch, P, M)), compute)
    b = to_dtype(broadcast_to(x2, (*batch, R, M)), compute)
    nb = len(batch)
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (compute_mode == _CDIST_MODES[0] and (P > 25 or R > 25))):
        # |a|^2 + |b|^2 - 2 a.b with one matmul, clamped at 0 against rounding, as torch does
        sq_a = prims.broadcast_in_dim(prims.sum(prims.mul(a, a), [nb + 1]), (*batch, P, R), list(range(nb + 1)))
        sq_b = prims.broadcast_in_dim(prims.sum(prims.mul(b, b), [nb + 1]), (*batch, P, R), [*range(nb), nb + 1])
        cross = prims.matmul(a, prims.transpose(b, [*range(nb), nb + 1, nb]))
        dist2 = prims.add(prims.add(prims.mul(cross, -2.0), sq_a), sq_b)
        return to_dtype(root_of_sum(prims.maximum(dist2, 0.0)), x1.dtype)
    shape = (*batch, P, R, M)
    diff = prims.sub(prims.broadcast_in_dim(a, shape, [*range(nb), nb, nb + 2]), prims.broadcast_in_dim(b, shape, [*range(nb), nb + 1, nb + 2]))
    last = [nb + 2]
    if p == 0:
        # eager's kernel counts min(ceil(|d|), 1): a NaN difference (inf - inf) makes the count NaN
        out = prims.sum(prims.minimum(prims.ceil(prims.abs(diff)), 1.0), last)
    elif p == math.inf:
        out = prims.amax(prims.abs(diff), last) if M else prims.sum(diff, last)
    elif p == 1:
        out = prims.sum(prims.abs(diff), last)
    elif p == 2:
        out = root_of_sum(prims.sum(prims.mul(diff, diff), last))
    else:
        out = root_of_sum(prims.sum(prims.pow(prims.abs(diff), float(p)), last), p)
    return to_dtype(out, x1.dtype)


def _vector_norm(a: TensorProxy, ord, dims: tuple[int, ...], keepdim: bool, dtype) -> TensorProxy:
    name = "linalg.vector_norm"
    check(dtype_category(a.dtype) >= 2, lambda: f"{name}: Expected a floating point or complex tensor as input. Got {a.dtype}", RuntimeError)
    if dtype is not None:
        check(dtype_category(dtype) >= 2, lambda: f"{name}: dtype should be floating point or complex, but got {dtype}", RuntimeError)
        check(
            torch.promote_types(a.dtype, dtype) == dtype,
            lambda: f"{name}: the dtype of the input ({a.dtype}) should be convertible without narrowing to the specified dtype ({dtype})",
            RuntimeError,
        )
        a = to_dtype(a, dtype)
    check(isinstance(ord, (int, float)) and not isinstance(ord, bool), lambda: f"{name}: ord must be a number, got {ord!r}", TypeError)
    result = a.dtype.to_real() if a.dtype.is_complex else a.dtype
    x = prims.abs(to_dtype(a, computation_dtype(a.dtype)))
    if ord in (math.inf, -math.inf):
        for d in dims:
            check(
                a.shape[d] != 0,
                lambda: f"{name} cannot compute the {ord} norm on the dimension {d} because this dimension is empty and the operation does not have an identity",
                RuntimeError,
            )
        check(a.numel() != 0 or a.ndim != 0, lambda: f"{name} cannot compute the {ord} norm on an empty tensor", RuntimeError)
        out = (prims.amax if ord > 0 else prims.amin)(x, dims)
    elif ord == 0:
        out = prims.sum(to_dtype(prims.ne(x, 0.0), x.dtype), dims)
    elif ord == 1:
        out = prims.sum(x, dims)
    elif ord == 2:
        out = root_of_sum(prims.sum(prims.mul(x, x), dims))
    else:
        out = root_of_sum(prims.sum(prims.pow(x, float(ord)), dims), ord)
    return keep_dims(to_dtype(out, result), a, dims, keepdim)


@torchsymbol(torch.linalg.vector_norm, tags=_REDUCTION)
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of `x` over `dim` (every element when None)."""
    check_input("linalg.vector_norm", x)
    return _vector_norm(x, ord, reduction_dims(x, dim), keepdim, dtype)


@torchsymbol(torch.linalg.norm, tags=_REDUCTION)
def linalg_norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """torch.linalg.norm: a vector norm, or the Frobenius norm of matrices (OWL-ViT normalizes its
    embeddings so); its other matrix norms (spectral, nuclear, max row or column sum) run as
    torch's opaque call."""
    check_input("linalg.norm", A)
    dims = (dim,) if isinstance(dim, int) else None if dim is None else tuple(dim)
    check(not (dims is None and ord is not None and A.ndim not in (1, 2)),
          lambda: f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")
    vector = (len(dims) == 1 if dims is not None else ord is None or A.ndim == 1) and not isinstance(ord, str)
    frobenius = ord in (None, "fro") and (len(dims) == 2 if dims is not None else A.ndim == 2)
    check(vector or frobenius, lambda: f"linalg.norm(): ord={ord!r} (a matrix norm other than the Frobenius) is not supported by squall", NotInLanguage)
    return _vector_norm(A, 2 if ord in (None, "fro") else ord, reduction_dims(A, dim), keepdim, dtype)


@torchsymbol(torch.norm, torch.Tensor.norm, tags=_REDUCTION)
def norm(a, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: the Frobenius norm, or the p-norm of the elements over `dim`."""
    check_input("norm", a)
    if isinstance(p, str):
        check(p in ("fro", "nuc"), lambda: f"norm(): unknown norm type {p!r}; expected 'fro', 'nuc' or a number", ValueError)
        if p == "nuc":
            raise NotModelled("squall: torch.norm(p='nuc') needs a singular value decomposition, which squall does not have")
        check(
            dim is None or isinstance(dim, int) or len(dim) <= 2,
            lambda: f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}",
            RuntimeError,
        )
        p = 2
    return _vector_norm(a, p, reduction_dims(a, dim), keepdim, dtype)


@torchsymbol(F.normalize)
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps)."""
    check_input("normalize", input)
    d = canonical_dim(input.ndim, dim)
    check(input.dtype.is_floating_point, lambda: f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {input.dtype}", RuntimeError)
    x = to_dtype(input, computation_dtype(input.dtype))
    if x.ndim == 0:
        x = prims.reshape(x, (1,))
    norm = expand_reduced(vector_norm(x, p, (d,)), x.shape, (d,))
    norm = prims.where(prims.lt(norm, float(eps)), float(eps), norm)
    return to_dtype(prims.reshape(prims.div(x, norm), tuple(input.shape)), input.dtype)


def _pair(name: str, x1, x2) -> tuple[TensorProxy, TensorProxy, torch.dtype]:
    check_input(name, x1, "x1")
    check_input(name, x2, "x2")
    dtype = result_dtype(x1, x2)
    check(dtype.is_floating_point, lambda: f"expected common dtype to be floating point, yet common dtype is {dtype}", RuntimeError)
    x1, x2 = broadcast(x1, x2)
    compute = computation_dtype(dtype)
    return to_dtype(x1, compute), to_dtype(x2, compute), dtype


@torchsymbol(torch.cosine_similarity)
def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """sum over dim of (x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))."""
    a, b, dtype = _pair("cosine_similarity", x1, x2)
    d = canonical_dim(a.ndim, dim)
    if a.ndim == 0:
        a, b = prims.reshape(a, (1,)), prims.reshape(b, (1,))
    na = expand_reduced(vector_norm(a, 2, (d,)), a.shape, (d,))
    nb = expand_reduced(vector_norm(b, 2, (d,)), b.shape, (d,))
    na = prims.where(prims.lt(na, float(eps)), float(eps), na)
    nb = prims.where(prims.lt(nb, float(eps)), float(eps), nb)
    return to_dtype(prims.sum(prims.mul(prims.div(a, na), prims.div(b, nb)), (d,)), dtype)


@torchsymbol(torch.pairwise_distance)
def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """||x1 - x2 + eps||_p over the last dimension."""
    a, b, dtype = _pair("pairwise_distance", x1, x2)
    diff = prims.add(prims.sub(a, b), float(eps))
    if diff.ndim == 0:
        # a 0-d pair has one element: its norm is 0-d with or without keepdim
        return to_dtype(vector_norm(prims.reshape(diff, (1,)), p, (0,)), dtype)
    return to_dtype(vector_norm(diff, p, (diff.ndim - 1,), keepdim=keepdim), dtype)


@torchsymbol(torch.norm_except_dim)
def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of `v` over every dimension but `dim`, which is kept (the others kept as size 1);
    dim -1: over every element, a 0-d tensor, as torch has it."""
    check_input("norm_except_dim", v, "v")
    if dim == -1:
        return vector_norm(v, pow)
    d = canonical_dim(v.ndim, dim)
    return vector_norm(v, pow, tuple(i for i in range(v.ndim) if i != d), keepdim=True)


@torchsymbol(torch._weight_norm)
def weight_norm(v, g, dim=0):
    """v * (g / norm_except_dim(v, 2, dim)): the weight `torch.nn.utils.parametrizations.weight_norm`
    makes from its direction `v` and magnitude `g` (wav2vec2's and HuBERT's positional convolution)."""
    check_input("_weight_norm", v, "v")
    check_input("_weight_norm", g, "g")
    return mul(v, div(g, norm_except_dim(v, 2, dim)))
