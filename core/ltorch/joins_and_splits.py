"""Torch-language ops: joining tensors (cat, stack, hstack, ...) and splitting them (split, chunk, unbind, narrow, Tensor.unfold)."""
from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from .. import prims
from .base import data_dependent_error, torchsymbol
from .unmodelled import NotModelled
from .helpers import canonical_dim, check, is_tensor
from .shape import _sizes, _slice_dim, clone, unsqueeze
from ..proxies import TensorProxy
from ..symbolic import SymInt, guarded_int, guarded_residue, source

__all__ = [
    "cat", "concatenate", "stack", "hstack", "vstack", "dstack", "split", "split_method", "chunk",
    "unbind", "tensor_split", "narrow", "select", "unfold", "diff",
]


# --- joins ----------------------------------------------------------------------------------


def _check_sequence(name: str, tensors) -> list[TensorProxy]:
    check(isinstance(tensors, (tuple, list)), lambda: f"{name}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}", TypeError)
    check(all(is_tensor(x) for x in tensors), lambda: f"{name}(): expected a sequence of Tensors, got {[type(x).__name__ for x in tensors]}", TypeError)
    return list(tensors)


def _cat(tensors, dim: int) -> TensorProxy:
    tensors = _check_sequence("cat", tensors)
    check(len(tensors) > 0, lambda: "torch.cat(): expected a non-empty list of Tensors", ValueError)
    for i, x in enumerate(tensors):
        check(x.ndim > 0, lambda: f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    dtype = functools.reduce(torch.promote_types, (x.dtype for x in tensors))
    # torch still skips 1-D empty tensors of any other shape (a legacy rule)
    numbered = [(i, x) for i, x in enumerate(tensors) if tuple(x.shape) != (0,)] or [(0, tensors[0])]
    kept = [x for _, x in numbered]
    first = kept[0]
    d = canonical_dim(first.ndim, dim)
    for i, x in numbered:
        check(x.ndim == first.ndim, lambda: f"Tensors must have same number of dimensions: got {first.ndim} and {x.ndim}")
        for j in range(first.ndim):
            check(
                j == d or x.shape[j] == first.shape[j],
                lambda: f"Sizes of tensors must match except in dimension {d}. Expected size {first.shape[j]} but got size {x.shape[j]} for tensor number {i} in the list.",
            )
    kept = [x if x.dtype == dtype else prims.convert_element_type(x, dtype) for x in kept]
    return prims.cat(kept, d)


@torchsymbol(torch.cat, torch.concat)
def cat(tensors, dim=0):
    return _cat(tensors, dim)


@torchsymbol(torch.concatenate)
def concatenate(tensors, axis=0):
    return _cat(tensors, axis)


@torchsymbol(torch.stack)
def stack(tensors, dim=0):
    tensors = _check_sequence("stack", tensors)
    check(len(tensors) > 0, lambda: "stack expects a non-empty TensorList")
    for i, x in enumerate(tensors):
        check(
            x.shape == tensors[0].shape,
            lambda: f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at entry 0 and {list(x.shape)} at entry {i}",
        )
    d = canonical_dim(tensors[0].ndim + 1, dim)
    return _cat([unsqueeze(x, d) for x in tensors], d)


def _atleast(x: TensorProxy, n: int) -> TensorProxy:
    if x.ndim >= n:
        return x
    if n == 3 and x.ndim == 2:
        return prims.reshape(x, (*x.shape, 1))
    if n == 3 and x.ndim == 1:
        return prims.reshape(x, (1, x.shape[0], 1))
    return prims.reshape(x, (1,) * (n - x.ndim) + tuple(x.shape))


@torchsymbol(torch.hstack)
def hstack(tensors):
    tensors = [_atleast(x, 1) for x in _check_sequence("hstack", tensors)]
    check(len(tensors) > 0, lambda: "hstack expects a non-empty TensorList")
    return _cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@torchsymbol(torch.vstack, torch.row_stack)
def vstack(tensors):
    tensors = [_atleast(x, 2) for x in _check_sequence("vstack", tensors)]
    check(len(tensors) > 0, lambda: "vstack expects a non-empty TensorList")
    return _cat(tensors, 0)


@torchsymbol(torch.dstack)
def dstack(tensors):
    tensors = [_atleast(x, 3) for x in _check_sequence("dstack", tensors)]
    check(len(tensors) > 0, lambda: "dstack expects a non-empty TensorList")
    return _cat(tensors, 2)


# --- splits ---------------------------------------------------------------------------------


def _split_sizes(a: TensorProxy, d: int, split_size) -> list[int | SymInt]:
    n = a.shape[d]
    if isinstance(split_size, int):  # (a symbolic size too)
        check(split_size >= 0, lambda: f"split expects split_size be non-negative, but got split_size={source(split_size)}")
        check(split_size > 0 or n == 0, lambda: f"split_size can only be 0 if dimension size is 0, but got dimension size of {source(n)}")
        if n == 0:
            return [0]
        # how many pieces it makes is the program's structure: guarded as the relation it is
        # (`(s0 + 1) // 2 == 3`), not by reading the sizes (a compile per length), so the lengths
        # with one piece count share a program (and `x.split(x.shape[-1] // 3, -1)` has one for
        # every width); past a few piece counts the policy runs the signature eagerly, saying so
        # (squall.runtime.policy). The last piece is what is left, 1 to split_size long.
        count = guarded_residue((n + split_size - 1) // split_size)
        return [split_size] * (count - 1) + [n - (count - 1) * split_size]
    n = guarded_int(n)  # (sizes given one by one: read, guarded, as they are compared one by one)
    sizes = _sizes("split", (split_size,))
    check(
        sum(sizes) == n and all(s >= 0 for s in sizes),
        lambda: f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {d}), but got split_sizes={list(sizes)}",
    )
    return list(sizes)


def _pieces(a: TensorProxy, d: int, sizes: Sequence[int]) -> tuple[TensorProxy, ...]:
    out, start = [], 0
    for s in sizes:
        out.append(_slice_dim(a, d, start, start + s))
        start += s
    return tuple(out)


def _split(a, split_size, dim):
    check(a.ndim > 0, lambda: "split expects at least a 1-dimensional tensor")
    d = canonical_dim(a.ndim, dim)
    return _pieces(a, d, _split_sizes(a, d, split_size))


@torchsymbol(torch.split)
def split(tensor, split_size_or_sections, dim=0):
    return _split(tensor, split_size_or_sections, dim)


@torchsymbol(torch.Tensor.split)
def split_method(self, split_size, dim=0):
    return _split(self, split_size, dim)


@torchsymbol(torch.chunk, torch.Tensor.chunk)
def chunk(input, chunks, dim=0):
    check(input.ndim > 0, lambda: "chunk expects at least a 1-dimensional tensor")
    check(chunks > 0, lambda: f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = canonical_dim(input.ndim, dim)
    n = input.shape[d]
    if n == 0:
        return _pieces(input, d, [0] * chunks)
    return _split(input, (n + chunks - 1) // chunks, d)


@torchsymbol(torch.unbind, torch.Tensor.unbind)
def unbind(input, dim=0):
    check(input.ndim > 0, lambda: "Dimension specified as 0 but tensor has no dimensions", IndexError)
    d = canonical_dim(input.ndim, dim)
    return tuple(prims.squeeze(p, (d,)) for p in _pieces(input, d, [1] * input.shape[d]))


@torchsymbol(torch.tensor_split, torch.Tensor.tensor_split)
def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None, tensor_indices_or_sections=None):
    arg = next((x for x in (indices_or_sections, sections, indices, tensor_indices_or_sections) if x is not None), None)
    if is_tensor(arg):
        raise data_dependent_error("torch.tensor_split with a tensor of indices or sections")
    check(input.ndim > 0, lambda: f"tensor_split expected at least a 1-dimensional tensor, but got a tensor with {input.ndim} dims")
    d = canonical_dim(input.ndim, dim)
    if isinstance(arg, int):
        check(arg > 0, lambda: f"number of sections must be larger than 0, got {arg}")
        # piece i holds ceil((length - i) / sections) elements (the first length % sections one more
        # than the rest): an expression of a symbolic length, no value read
        length = input.shape[d]
        return _pieces(input, d, [(length + arg - 1 - i) // arg for i in range(arg)])
    n = guarded_int(input.shape[d])  # the pieces' bounds depend on its value: read, guarded
    bounds = list(_sizes("tensor_split", (arg,)))
    out, prev = [], 0
    for stop in [*bounds, n]:
        # each piece is input[prev:stop] along d, with Python's clamping of slice bounds
        lo = min(max(prev + n if prev < 0 else prev, 0), n)
        hi = min(max(stop + n if stop < 0 else stop, 0), n)
        out.append(_slice_dim(input, d, lo, max(lo, hi)))
        prev = stop
    return tuple(out)


@torchsymbol(torch.narrow, torch.Tensor.narrow)
def narrow(input, dim, start, length):
    check(input.ndim > 0, lambda: "narrow() cannot be applied to a 0-dim tensor.")
    check(not is_tensor(start), lambda: "squall: narrow with a tensor start needs its value", NotModelled)
    d = canonical_dim(input.ndim, dim)
    n = input.shape[d]
    check(-n <= start <= n, lambda: f"start out of range (expected to be in range of [{-n}, {n}], but got {start})", IndexError)
    check(length >= 0, lambda: "narrow(): length must be non-negative.")
    start = start + n if start < 0 else start
    check(start + length <= n, lambda: f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _slice_dim(input, d, start, start + length)


@torchsymbol(torch.select, torch.Tensor.select)
def select(input, dim, index):
    """The slice at `index` along `dim`, that dimension dropped (a view, as `x[:, index]`)."""
    check(input.ndim > 0, lambda: "select() cannot be applied to a 0-dim tensor.", IndexError)
    check(not is_tensor(index), lambda: "squall: select with a tensor index needs its value", NotModelled)
    d = canonical_dim(input.ndim, dim)
    n = input.shape[d]
    check(
        -n <= index < n,
        lambda: f"select(): index {index} out of range for tensor of size [{', '.join(str(s) for s in input.shape)}] at dimension {dim}",
        IndexError,
    )
    index = index + n if index < 0 else index
    return prims.squeeze(_slice_dim(input, d, index, index + 1), (d,))


@torchsymbol(torch.Tensor.unfold)
def unfold(a, dimension, size, step):
    d = canonical_dim(a.ndim, dimension)
    n = a.shape[d] if a.ndim else 1
    check(size <= n, lambda: f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    check(size >= 0, lambda: f"size is {size} but must be >= 0")
    check(step > 0, lambda: f"step is {step} but must be > 0")
    if a.ndim == 0:
        return prims.reshape(a, (size,))
    return prims.unfold(a, d, size, step)


# --- flips and rolls ------------------------------------------------------------------------


# --- padding ----------------------------------------------------------------------------------


# --- triangles --------------------------------------------------------------------------------


# --- differences ----------------------------------------------------------------------------


@torchsymbol(torch.diff, torch.Tensor.diff)
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along `dim` (x[i+1] - x[i], n times over; logical xor for bool),
    of `input` with `prepend` and `append` joined on either side along `dim` first; n = 0 is a
    copy of `input` alone (prepend and append unused), as torch's."""
    n = guarded_int(n)
    check(isinstance(n, int) and not isinstance(n, bool), lambda: f"diff(): argument 'n' must be int, not {type(n).__name__}", TypeError)
    check(input.ndim >= 1, lambda: "diff expects input to be at least one-dimensional")
    check(n >= 0, lambda: f"order must be non-negative but got {n}")
    d = canonical_dim(input.ndim, dim)
    joined = [input]
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            continue
        check(is_tensor(extra), lambda: f"diff(): argument '{name}' must be Tensor, not {type(extra).__name__}", TypeError)
        check(extra.ndim == input.ndim, lambda: "diff expects prepend or append to be the same dimension as input")
        for j in range(input.ndim):
            check(j == d or extra.shape[j] == input.shape[j],
                  lambda: ("diff expects the shape of tensor to prepend or append to match that of input except along the "
                           f"differencing dimension; input.size({j}) = {input.shape[j]}, but got tensor.size({j}) = {extra.shape[j]}"))
        joined.insert(0 if name == "prepend" else len(joined), extra)
    if n == 0:
        return clone(input)
    x = _cat(joined, d) if len(joined) > 1 else input
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break  # nothing left to difference: torch returns the empty tensor as it is
        later, earlier = _slice_dim(x, d, 1, length), _slice_dim(x, d, 0, length - 1)
        x = prims.logical_xor(later, earlier) if x.dtype == torch.bool else prims.sub(later, earlier)
    return clone(x) if x is input else x
