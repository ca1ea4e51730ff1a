"""Torch-language ops: reshapes and views (view, reshape, flatten, squeeze, permute, transpose, expand, ...), repeats, and memory-layout ops."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .. import prims
from . import helpers
from .base import NotInLanguage, data_dependent_error, torchsymbol
from .unmodelled import NotModelled
from .helpers import broadcast_shapes, canonical_dim, check, is_tensor
from ..prims.base import is_size
from ..proxies import TensorProxy
from ..symbol import Tags

__all__ = [
    "view", "reshape", "view_as", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
    "permute", "transpose", "swapaxes", "swapdims", "t", "T", "mT", "mH", "H", "movedim",
    "diagonal", "expand", "expand_as", "broadcast_to", "broadcast_tensors", "meshgrid", "repeat", "tile",
    "repeat_interleave", "contiguous", "detach", "clone",
]

_SHAPE = (Tags.SHAPE_ONLY,)
_SHAPE_OF_OTHER = (Tags.SHAPE_ONLY, Tags.METADATA_OPERANDS)  # `other` lends its shape only


# --- argument forms ---------------------------------------------------------------------


def _sizes(name: str, args: tuple, keyword=None) -> tuple[int, ...]:
    """Sizes given as varargs (`x.view(2, 3)`), one sequence (`x.view((2, 3))`) or a keyword."""
    if keyword is not None:
        check(not args, lambda: f"{name}() got sizes both positionally and by keyword", TypeError)
        args = (keyword,)
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    check(
        all(map(is_size, args)),
        lambda: f"{name}(): sizes must be ints, got {args}",
        TypeError,
    )
    return tuple(args)


def _dims(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list, torch.Size)) else (x,)


def _infer_size(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    """`shape` with its one -1 filled in, with torch's errors for impossible shapes."""
    inferred = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            check(inferred is None, lambda: "only one dimension can be inferred")
            inferred = i
        else:
            check(s >= 0, lambda: f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
            known *= s
    if inferred is None:
        check(known == numel, lambda: f"shape '{list(shape)}' is invalid for input of size {numel}")
        return tuple(shape)
    check(
        known != 0,
        lambda: f"cannot reshape tensor of 0 elements into shape {list(shape)} because the unspecified dimension size -1 can be any value and is ambiguous",
    )
    check(numel % known == 0, lambda: f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(numel // known if s == -1 else s for s in shape)


def _reshape(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    return prims.reshape(a, _infer_size(shape, a.numel()))


def _slice_dim(a: TensorProxy, dim: int, start: int, stop: int, step: int = 1) -> TensorProxy:
    starts, stops, steps = [0] * a.ndim, list(a.shape), [1] * a.ndim
    starts[dim], stops[dim], steps[dim] = start, stop, step
    return prims.slice(a, starts, stops, steps)


# --- reshapes and views -----------------------------------------------------------------


@torchsymbol(torch.Tensor.view, tags=_SHAPE)
def view(a, *shape, size=None):
    check(
        not (len(shape) == 1 and isinstance(shape[0], torch.dtype)),
        lambda: "squall: Tensor.view(dtype) reinterprets memory, which squall does not model; use .to(dtype) for a value conversion",
        NotModelled,
    )
    return _reshape(a, _sizes("view", shape, size))


@torchsymbol(torch.Tensor.reshape, torch.reshape, tags=_SHAPE)
def reshape(input, *sizes, shape=None):
    return _reshape(input, _sizes("reshape", sizes, shape))


@torchsymbol(torch.Tensor.view_as, tags=_SHAPE_OF_OTHER)
def view_as(a, other):
    return _reshape(a, other.shape)


@torchsymbol(torch.Tensor.reshape_as, tags=_SHAPE_OF_OTHER)
def reshape_as(a, other):
    return _reshape(a, other.shape)


@torchsymbol(torch.Tensor.flatten, torch.flatten, tags=_SHAPE)
def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return prims.reshape(input, (1,))
    start, end = canonical_dim(input.ndim, start_dim), canonical_dim(input.ndim, end_dim)
    check(start <= end, lambda: "flatten() has invalid args: start_dim cannot come after end_dim")
    n = 1
    for s in input.shape[start : end + 1]:
        n *= s
    return prims.reshape(input, (*input.shape[:start], n, *input.shape[end + 1 :]))


@torchsymbol(torch.Tensor.unflatten, torch.unflatten, tags=_SHAPE)
def unflatten(input, dim, sizes):
    d = canonical_dim(input.ndim, dim)
    sizes = _sizes("unflatten", (sizes,))
    check(len(sizes) > 0, lambda: "unflatten: sizes must be non-empty")
    n = input.shape[d] if input.ndim else 1
    known = 1
    for s in sizes:
        known *= 1 if s == -1 else s
    check(
        (-1 in sizes and known != 0 and n % known == 0) or known == n,
        lambda: f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} ({n}) in the input tensor",
    )
    return prims.reshape(input, (*input.shape[:d], *_infer_size(sizes, n), *input.shape[d + 1 :]))


@torchsymbol(torch.Tensor.squeeze, torch.squeeze, tags=_SHAPE)
def squeeze(input, dim=None):
    if dim is None:
        dims = tuple(i for i, s in enumerate(input.shape) if s == 1)
    else:
        dims = tuple(sorted({canonical_dim(input.ndim, d) for d in _dims(dim)}))
        dims = tuple(d for d in dims if input.ndim and input.shape[d] == 1)
    return prims.squeeze(input, dims)


@torchsymbol(torch.Tensor.unsqueeze, torch.unsqueeze, tags=_SHAPE)
def unsqueeze(input, dim):
    d = canonical_dim(input.ndim + 1, dim)
    return prims.reshape(input, (*input.shape[:d], 1, *input.shape[d:]))


# --- permutations -------------------------------------------------------------------------


@torchsymbol(torch.Tensor.permute, torch.permute, tags=_SHAPE)
def permute(input, *dims_args, dims=None):
    dims = _sizes("permute", dims_args, dims)
    check(
        len(dims) == input.ndim,
        lambda: f"permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is not equal to len(dims) = {len(dims)}",
    )
    perm = tuple(canonical_dim(input.ndim, d) for d in dims)
    check(len(set(perm)) == len(perm), lambda: "permute(): duplicate dims are not allowed.")
    return prims.transpose(input, perm)


def _swap(a: TensorProxy, d0: int, d1: int) -> TensorProxy:
    d0, d1 = canonical_dim(a.ndim, d0), canonical_dim(a.ndim, d1)
    perm = list(range(a.ndim))
    if a.ndim:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return prims.transpose(a, perm)


@torchsymbol(torch.transpose, torch.Tensor.transpose, tags=_SHAPE)
def transpose(input, dim0, dim1):
    return _swap(input, dim0, dim1)


@torchsymbol(torch.swapaxes, torch.Tensor.swapaxes, tags=_SHAPE)
def swapaxes(input, axis0, axis1):
    return _swap(input, axis0, axis1)


@torchsymbol(torch.swapdims, torch.Tensor.swapdims, tags=_SHAPE)
def swapdims(input, dim0, dim1):
    return _swap(input, dim0, dim1)


@torchsymbol(torch.t, torch.Tensor.t, tags=_SHAPE)
def t(input):
    check(input.ndim <= 2, lambda: f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return prims.transpose(input, tuple(reversed(range(input.ndim))))


@torchsymbol(torch.Tensor.T.__get__, tags=_SHAPE)
def T(a):
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


@torchsymbol(torch.Tensor.mT.__get__, tags=_SHAPE)
def mT(a):
    check(a.ndim >= 2, lambda: f"tensor.mT is only supported on matrices or batches of matrices. Got {a.ndim}-D tensor.")
    return _swap(a, -2, -1)


def _no_complex(a: TensorProxy, name: str) -> None:
    # a conjugate needs complex prims squall does not have yet
    check(not a.dtype.is_complex, lambda: f"squall: {name} of a complex tensor is not supported", NotModelled)


@torchsymbol(torch.Tensor.mH.__get__, tags=_SHAPE)
def mH(a):
    check(a.ndim >= 2, lambda: f"tensor.mH is only supported on matrices or batches of matrices. Got {a.ndim}-D tensor.")
    _no_complex(a, "tensor.mH")
    return _swap(a, -2, -1)


@torchsymbol(torch.Tensor.H.__get__, tags=_SHAPE)
def H(a):
    check(
        a.ndim in (0, 2),
        lambda: f"tensor.H is only supported on matrices (2-D tensors). Got {a.ndim}-D tensor."
        + (" For batches of matrices, consider using tensor.mH" if a.ndim > 2 else ""),
    )
    _no_complex(a, "tensor.H")
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


@torchsymbol(torch.movedim, torch.Tensor.movedim, torch.moveaxis, torch.Tensor.moveaxis, tags=_SHAPE)
def movedim(input, source, destination):
    src, dst = _dims(source), _dims(destination)
    check(
        len(src) == len(dst),
        lambda: f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same number of dims as destination ({list(dst)} dims)",
    )
    src_c = [canonical_dim(input.ndim, d) for d in src]
    dst_c = [canonical_dim(input.ndim, d) for d in dst]
    check(len(set(src_c)) == len(src_c), lambda: f"movedim: repeated dim in `source` ({list(src)})")
    check(len(set(dst_c)) == len(dst_c), lambda: f"movedim: repeated dim in `destination` ({list(dst)})")
    if input.ndim == 0:
        return prims.transpose(input, ())
    perm = [-1] * input.ndim
    for s, d in zip(src_c, dst_c):
        perm[d] = s
    rest = iter(d for d in range(input.ndim) if d not in src_c)
    perm = [p if p != -1 else next(rest) for p in perm]
    return prims.transpose(input, perm)


@torchsymbol(torch.diagonal, torch.Tensor.diagonal, tags=_SHAPE)
def diagonal(input, offset=0, dim1=0, dim2=1):
    d1, d2 = canonical_dim(input.ndim, dim1), canonical_dim(input.ndim, dim2)
    check(d1 != d2, lambda: f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    a = movedim(input, (d1, d2), (-2, -1))
    rows, cols = a.shape[-2], a.shape[-1]
    # the diagonal of a row-major (rows, cols) block is every (cols + 1)-th element of it, flattened
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    start = offset if offset >= 0 else -offset * cols
    flat = prims.reshape(a, (*a.shape[:-2], rows * cols))
    if length == 0:
        return _slice_dim(flat, flat.ndim - 1, 0, 0)
    return _slice_dim(flat, flat.ndim - 1, start, start + (length - 1) * (cols + 1) + 1, cols + 1)


# --- expansion ----------------------------------------------------------------------------


def _expand(a: TensorProxy, sizes: Sequence[int]) -> TensorProxy:
    check(
        len(sizes) >= a.ndim,
        lambda: f"expand(size={list(sizes)}): the number of sizes provided ({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({a.ndim})",
    )
    offset = len(sizes) - a.ndim
    shape = []
    for i, s in enumerate(sizes):
        if s == -1:
            check(i >= offset, lambda: f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {i}")
            s = a.shape[i - offset]
        check(s >= 0, lambda: f"Trying to create tensor with negative dimension {s}: {list(sizes)}")
        shape.append(s)
    return helpers.broadcast_to(a, shape)


@torchsymbol(torch.Tensor.expand, tags=_SHAPE)
def expand(a, *sizes, size=None, implicit=False):
    return _expand(a, _sizes("expand", sizes, size))


@torchsymbol(torch.Tensor.expand_as, tags=_SHAPE_OF_OTHER)
def expand_as(a, other):
    return _expand(a, other.shape)


# the method first, which the torch executor calls: it takes the sizes as varargs too (`x.broadcast_to(2, 3)`)
@torchsymbol(torch.Tensor.broadcast_to, torch.broadcast_to, id="torch.broadcast_to", tags=_SHAPE)
def broadcast_to(input, *sizes, size=None):
    return _expand(input, _sizes("broadcast_to", sizes, size))


@torchsymbol(torch.broadcast_tensors, tags=_SHAPE)
def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(x.shape for x in tensors))
    return tuple(helpers.broadcast_to(x, shape) for x in tensors)


@torchsymbol(torch.meshgrid, tags=_SHAPE)
def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    # (without `indexing`, torch warns at every call: the opaque call warns as eager does)
    check(indexing is not None, lambda: "meshgrid(): without indexing= (torch warns at every call) is not supported by squall", NotInLanguage)
    check(indexing in ("ij", "xy"), lambda: f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    check(len(tensors) > 0, lambda: "meshgrid expects a non-empty TensorList")
    check(all(t.ndim <= 1 for t in tensors), lambda: "torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    check(len({t.dtype for t in tensors}) == 1, lambda: "meshgrid expects all tensors to have the same dtype")
    check(len({t.device for t in tensors}) == 1, lambda: "meshgrid expects all tensors to have the same device")
    # "xy" is "ij" with the first two dimensions swapped (cartesian, as numpy's)
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        order[0], order[1] = 1, 0
    lengths = [t.shape[0] if t.ndim else 1 for t in tensors]
    shape = [lengths[i] for i in order]
    return tuple(prims.broadcast_in_dim(prims.reshape(t, (n,)), shape, (order.index(i),)) for i, (t, n) in enumerate(zip(tensors, lengths)))


@torchsymbol(torch.Tensor.repeat)
def repeat(a, *repeats_args, repeats=None):
    reps = _sizes("repeat", repeats_args, repeats)
    check(
        len(reps) >= a.ndim,
        lambda: "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
    )
    shape = (1,) * (len(reps) - a.ndim) + tuple(a.shape)
    out_shape = [r * s for r, s in zip(reps, shape)]
    check(all(r >= 0 for r in reps), lambda: f"Trying to create tensor with negative dimension {min(out_shape)}: {out_shape}")
    # each dimension becomes (repeat, size); broadcasting fills the repeats, a reshape merges them
    a = prims.reshape(a, shape)
    interleaved = [n for pair in zip(reps, shape) for n in pair]
    b = prims.broadcast_in_dim(a, interleaved, tuple(range(1, 2 * len(shape), 2)))
    return prims.reshape(b, out_shape)


@torchsymbol(torch.Tensor.tile, torch.tile, id="torch.tile")  # (the method first: the torch executor calls it with varargs)
def tile(input, *dims_args, dims=None):
    reps = _sizes("tile", dims_args, dims)
    # fewer repeats than dimensions repeat the last ones (ones in front); then it is `repeat`
    return repeat(input, (1,) * (input.ndim - len(reps)) + tuple(reps))


@torchsymbol(torch.repeat_interleave, torch.Tensor.repeat_interleave)
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None or is_tensor(repeats):
        # how often each element repeats is tensor data, so the output shape is too
        raise data_dependent_error("torch.repeat_interleave with a tensor of repeats")
    check(isinstance(repeats, int), lambda: f"repeat_interleave(): repeats must be an int or a tensor, got {type(repeats).__name__}", TypeError)
    check(repeats >= 0, lambda: "Repeats must be non-negative")
    a = flatten(input) if dim is None else input
    d = 0 if dim is None else canonical_dim(a.ndim, dim)
    if a.ndim == 0:
        a = prims.reshape(a, (1,))
    shape = list(a.shape)
    b = prims.broadcast_in_dim(a, (*shape[: d + 1], repeats, *shape[d + 1 :]), tuple(i if i <= d else i + 1 for i in range(a.ndim)))
    out = prims.reshape(b, (*shape[:d], shape[d] * repeats, *shape[d + 1 :]))
    check(output_size is None or output_size == out.shape[d], lambda: f"repeat_interleave: output_size {output_size} does not match the result size {out.shape[d]}")
    return out


# --- memory-layout ops: a functional trace has no layouts, aliases or autograd edges -----------


@torchsymbol(torch.Tensor.contiguous)
def contiguous(a, memory_format=torch.contiguous_format):
    # A value under a new name: eager returns `a` itself only where it is laid out so, else a
    # copy; the trace notes it as a view whose writes are decided by eager's layout when one is
    # made (squall.frontend.views). The torch executor runs torch's contiguous.
    return prims.convert_element_type(a, a.dtype)


@torchsymbol(torch.Tensor.detach, torch.detach, tags=(Tags.STOPS_GRADIENT,))
def detach(input):
    # A value under a new name (so no gradient can reach `input` through it); the torch executor
    # runs torch's detach, which cuts the autograd graph and shares memory, as this conversion does
    out = prims.convert_element_type(input, input.dtype)
    out._requires_grad = False  # made just now, by this call
    return out


@torchsymbol(torch.clone, torch.Tensor.clone)
def clone(input, *, memory_format=None):
    # A new value under a new name, so in-place ops on the clone never reach the original;
    # an empty pad is the prim whose torch implementation always writes fresh memory.
    return prims.pad(input, False if input.dtype == torch.bool else 0, [(0, 0, 0)] * input.ndim)
