"""Torch-language ops: einsum and tensor contractions over named dimensions (tensordot, inner, linalg.vecdot)."""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .unmodelled import NotModelled
from .elementwise_binary import mul
from .helpers import broadcast_shapes, broadcast_to, canonical_dim, canonical_dims, check, check_tensors, computation_dtype, is_tensor, reshape_if_needed, to_dtype, transpose_if_needed
from .matmul import check_operand_dtypes
from .reductions import sum as sum_over
from ..proxies import TensorProxy

__all__ = [
    "tensordot", "inner", "vecdot", "einsum",
]


def _contract_dims(a: TensorProxy, b: TensorProxy, dims_a: list[int], dims_b: list[int]) -> TensorProxy:
    """Sum a * b over the paired dims: free dims of a, then free dims of b, as one matmul."""
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    m = math.prod(a.shape[d] for d in free_a)
    k = math.prod(a.shape[d] for d in dims_a)
    n = math.prod(b.shape[d] for d in free_b)
    lhs = reshape_if_needed(transpose_if_needed(a, free_a + dims_a), (m, k))
    rhs = reshape_if_needed(transpose_if_needed(b, dims_b + free_b), (k, n))
    shape = [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b]
    return reshape_if_needed(prims.matmul(lhs, rhs), shape)


@torchsymbol(torch.tensordot)
def tensordot(a, b, dims=2, out=None):
    """torch.tensordot: contract the last `dims` dims of a with the first of b, or the listed pairs."""
    check_tensors("tensordot", a=a, b=b)
    check(a.dtype == b.dtype, lambda: f"tensordot(): both inputs should have same dtype, got {a.dtype} and {b.dtype}", RuntimeError)
    check(a.dtype != torch.bool, lambda: "tensordot(): not implemented for 'Bool'", NotImplementedError)
    check(not a.dtype.is_complex, lambda: "squall: tensordot() of complex tensors is not in squall's torch language", NotModelled)
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
            a.shape[da] == b.shape[db] or a.shape[da] == 1 or b.shape[db] == 1,
            lambda: f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} and second has size {b.shape[db]} in dim {db}",
            RuntimeError,
        )
    # a contracted dimension of size 1 on one side broadcasts: as torch does, the other side
    # is summed over it first, and the pair contracts as size 1
    a_size, b_size = tuple(a.shape), tuple(b.shape)
    for da, db in zip(dims_a, dims_b):
        if b_size[db] == 1 and a_size[da] != 1:
            a = sum_over(a, da, keepdim=True)
        elif a_size[da] == 1 and b_size[db] != 1:
            b = sum_over(b, db, keepdim=True)
    return _contract_dims(a, b, dims_a, dims_b)


@torchsymbol(torch.inner, torch.Tensor.inner)
def inner(input, other, *, out=None):
    """torch.inner: contract the last dims (a 0-d operand multiplies, with type promotion)."""
    check_tensors("inner", input=input, other=other)
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
    check_tensors("linalg.vecdot", x=x, y=y)
    check(x.dtype == y.dtype, lambda: f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type {x.dtype} and y of type {y.dtype} instead", RuntimeError)
    check(x.dtype.is_floating_point, lambda: f"linalg.vecdot: Expected a floating point or complex tensor as input. Got {x.dtype}", RuntimeError)
    shape = broadcast_shapes(x.shape, y.shape)
    d = canonical_dim(len(shape), dim)
    product = mul(broadcast_to(x, shape), broadcast_to(y, shape))
    compute = computation_dtype(x.dtype)
    return to_dtype(prims.sum(to_dtype(product, compute), [d]), x.dtype)


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
        a = transpose_if_needed(a, others + where)
        a = reshape_if_needed(a, [a.shape[i] for i in range(len(others))] + [n**r])
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
        return transpose_if_needed(t, [lt.index(l) for l in order])

    nb, m, k, p = (math.prod(size[l] for l in ls) for ls in (batch, a_free, contracted, b_free))
    lhs = reshape_if_needed(arrange(a, la, batch + a_free + contracted), (nb, m, k) if batch else (m, k))
    rhs = reshape_if_needed(arrange(b, lb, batch + contracted + b_free), (nb, k, p) if batch else (k, p))
    out_labels = batch + a_free + b_free
    return reshape_if_needed(prims.matmul(lhs, rhs), [size[l] for l in out_labels]), out_labels


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
    check_operand_dtypes("einsum", *operands)
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
    cur = transpose_if_needed(cur, [cur_labels.index(l) for l in out_labels])
    if list(cur.shape) != full:
        cur = prims.broadcast_in_dim(cur, full, list(range(cur.ndim)))
    return cur
