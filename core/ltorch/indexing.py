"""Torch-language ops: gather, scatter, index_* ops, masked_fill, embedding, one_hot.

Each op checks what torch checks, with torch's exception type and message, then
decomposes into the strict indexing prims (int64 1-D or same-rank indices, explicit
dims, sources of the input's dtype). A 0-d input is handled as a 1-element 1-D one,
as torch's kernels do.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .. import prims
from .base import data_dependent_error, torchsymbol
from .unmodelled import NotModelled
from .functionalization import inplace
from .helpers import broadcast, broadcast_shapes, broadcast_to, canonical_dim, cast_number, check, is_number, is_tensor, torch_type_name
from ..proxies import TensorProxy
from ..symbol import Tags
from ..symbolic import concrete_shape, same_shape

__all__ = [
    "index_select", "gather", "take_along_dim", "take", "scatter", "scatter_add", "scatter_reduce",
    "index_add", "index_copy", "index_fill", "index_put", "masked_fill", "embedding", "one_hot",
    "index_put_", "index_add_", "index_copy_", "index_fill_", "scatter_", "scatter_add_",
    "scatter_reduce_", "masked_fill_",
]


# --- helpers ----------------------------------------------------------------------------------


def _reshape(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    return a if same_shape(a.shape, shape) else prims.reshape(a, tuple(shape))


def _as_1d(a: TensorProxy) -> TensorProxy:
    return _reshape(a, (a.numel(),)) if a.ndim != 1 else a


def _long(index: TensorProxy) -> TensorProxy:
    return index if index.dtype == torch.int64 else prims.convert_element_type(index, torch.int64)


def _zero(dtype: torch.dtype):
    return cast_number(0, dtype)


def _full(shape: Sequence[int], value, like: TensorProxy, dtype: torch.dtype | None = None) -> TensorProxy:
    dtype = like.dtype if dtype is None else dtype
    return prims.full(tuple(shape), cast_number(value, dtype), device=like.device, dtype=dtype)


def _fill_value(name: str, value, a: TensorProxy, shape: Sequence[int]) -> TensorProxy | int | float | bool | complex:
    """A number or 0-d tensor `value` as an operand of a's dtype (a tensor broadcast to `shape`)."""
    if is_tensor(value):
        check(value.ndim == 0, lambda: f"{name} only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s).", RuntimeError)
        v = value if value.dtype == a.dtype else prims.convert_element_type(value, a.dtype)
        return prims.broadcast_in_dim(v, tuple(shape), ())
    check(is_number(value), lambda: f"{name}: value must be a number or a 0-d tensor, got {type(value).__name__}", TypeError)
    return cast_number(value, a.dtype)


def _check_input(name: str, a) -> None:
    check(is_tensor(a), lambda: f"{name}(): argument 'input' must be Tensor, not {type(a).__name__}", TypeError)


def _check_index_tensor(name: str, index) -> None:
    check(is_tensor(index), lambda: f"{name}(): argument 'index' must be Tensor, not {type(index).__name__}", TypeError)


# --- gathers ----------------------------------------------------------------------------------


@torchsymbol(torch.index_select, torch.Tensor.index_select)
def index_select(input, dim, index):
    """Slices of `input` along `dim` at the positions in the 1-D (or 0-d) `index`."""
    _check_input("index_select", input)
    _check_index_tensor("index_select", index)
    dim = canonical_dim(input.ndim, dim)
    check(index.dtype in (torch.int32, torch.int64), lambda: "index_select(): Expected dtype int32 or int64 for index", RuntimeError)
    check(index.ndim <= 1, lambda: "index_select(): Index is supposed to be a vector", IndexError)
    index = _long(_as_1d(index))
    if input.ndim == 0:
        check(index.numel() == 1, lambda: f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)", RuntimeError)
        return _reshape(prims.take(_reshape(input, (1,)), index, 0), ())
    return prims.take(input, index, dim)


def _check_gather_shapes(a: TensorProxy, dim: int, index: TensorProxy) -> None:
    check(max(a.ndim, 1) == max(index.ndim, 1), lambda: "Index tensor must have the same number of dimensions as input tensor", RuntimeError)
    for d in range(index.ndim):
        check(
            d == dim or index.shape[d] <= a.shape[d],
            lambda: f"Size does not match at dimension {d} expected index {list(index.shape)} to be no larger than self {list(a.shape)} apart from dimension {dim}",
            RuntimeError,
        )


@torchsymbol(torch.gather, torch.Tensor.gather)
def gather(input, dim, index, *, sparse_grad=False):
    """out[i][j] = input[index[i][j]][j] for dim 0 (and so on), like torch.gather."""
    _check_input("gather", input)
    _check_index_tensor("gather", index)
    dim = canonical_dim(input.ndim, dim)
    check(index.dtype in (torch.int32, torch.int64), lambda: "gather(): Expected dtype int32/int64 for index", RuntimeError)
    index = _long(index)
    if index.numel() == 0:
        # torch skips its shape checks for an empty index: there is nothing to gather
        return _full(index.shape, 0, input)
    _check_gather_shapes(input, dim, index)
    if input.ndim == 0 or index.ndim == 0:
        return _reshape(prims.take_along_axis(_reshape(input, (input.numel(),)), _as_1d(index), 0), index.shape)
    return prims.take_along_axis(input, index, dim)


@torchsymbol(torch.take_along_dim, torch.Tensor.take_along_dim)
def take_along_dim(input, indices, dim=None):
    """gather with `input` and `indices` broadcast off `dim` (flattened when dim is None)."""
    _check_input("take_along_dim", input)
    check(is_tensor(indices), lambda: f"take_along_dim(): argument 'indices' must be Tensor, not {type(indices).__name__}", TypeError)
    check(
        indices.dtype == torch.int64,
        lambda: f"torch.take_along_dim(): dtype of indices should be Long but got {torch_type_name(indices.dtype)}",
        RuntimeError,
    )
    if dim is None:
        return gather(_as_1d(input), 0, _as_1d(indices))
    dim = canonical_dim(input.ndim, dim)
    check(
        input.ndim == indices.ndim,
        lambda: f"torch.take_along_dim(): input and indices should have the same number of dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices",
        RuntimeError,
    )
    check(input.ndim > 0, lambda: f"Dimension specified as {dim} but tensor has no dimensions", IndexError)
    input_shape = list(input.shape)
    input_shape[dim] = indices.shape[dim]
    shape = list(broadcast_shapes(input_shape, indices.shape))
    indices = broadcast_to(indices, shape)
    shape[dim] = input.shape[dim]
    return gather(broadcast_to(input, shape), dim, indices)


@torchsymbol(torch.take, torch.Tensor.take)
def take(input, index):
    """input.flatten()[index], shaped like `index`."""
    _check_input("take", input)
    _check_index_tensor("take", index)
    check(index.dtype == torch.int64, lambda: f"take(): Expected a long tensor for index, but got {torch_type_name(index.dtype)}", RuntimeError)
    flat = prims.take(_reshape(input, (input.numel(),)), _as_1d(index), 0)
    return _reshape(flat, index.shape)




# --- scatters ---------------------------------------------------------------------------------


def _check_scatter(name: str, a, dim, index, src) -> int:
    """torch's scatter checks (dtypes, ranks, sizes); returns the canonical dim."""
    _check_input(name, a)
    _check_index_tensor(name, index)
    dim = canonical_dim(a.ndim, dim)
    # torch names every scatter variant "scatter()" in these messages
    check(index.dtype in (torch.int32, torch.int64), lambda: "scatter(): Expected dtype int32/int64 for index", RuntimeError)
    if is_tensor(src):
        check(src.dtype == a.dtype, lambda: "scatter(): Expected self.dtype to be equal to src.dtype", RuntimeError)
    if index.numel() == 0:
        return dim
    check(max(index.ndim, 1) == max(a.ndim, 1), lambda: "Index tensor must have the same number of dimensions as self tensor", RuntimeError)
    if is_tensor(src):
        check(max(index.ndim, 1) == max(src.ndim, 1), lambda: "Index tensor must have the same number of dimensions as src tensor", RuntimeError)
    for d in range(index.ndim):
        too_big = (d != dim and index.shape[d] > a.shape[d]) or (is_tensor(src) and src.ndim and index.shape[d] > src.shape[d])
        check(
            not too_big,
            lambda: f"Expected index {list(index.shape)} to be no larger than self {list(a.shape)} apart from dimension {dim}"
            + (f" and to be no larger size than src {list(src.shape)}" if is_tensor(src) else ""),
            RuntimeError,
        )
    return dim


def _scatter_with(prim, a, dim: int, index, src):
    """`prim` (scatter or scatter_add) on the checked operands; 0-d operands as 1-element 1-D ones."""
    if index.numel() == 0:
        return a
    index = _long(index)
    if a.ndim == 0 or index.ndim == 0:
        out = prim(_reshape(a, (1,)), _as_1d(index), _reshape(src, (1,)) if src.ndim == 0 else src, 0)
        return _reshape(out, a.shape)
    return prim(a, index, src, dim)


def _src_tensor(a, index, src, value):
    if is_tensor(src):
        return src
    v = src if src is not None else value
    check(is_number(v), lambda: f"scatter(): expected a src tensor or a number value, got {type(v).__name__}", TypeError)
    return _full(index.shape, v, a)


@torchsymbol(torch.scatter, torch.Tensor.scatter)
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with src (or value) written at `index` along `dim`; reduce='add' adds instead."""
    check(src is not None or value is not None, lambda: "scatter() expected a src tensor or a value", TypeError)
    dim = _check_scatter("scatter", input, dim, index, src)
    check(reduce in (None, "add", "multiply"), lambda: "reduce argument must be either add or multiply.", RuntimeError)
    if index.numel() == 0:
        return input
    src = _src_tensor(input, index, src, value)
    if reduce is None:
        return _scatter_with(prims.scatter, input, dim, index, src)
    if reduce == "add":
        return _scatter_with(prims.scatter_add, input, dim, index, src)
    return _scatter_with(_reducing("prod", True), input, dim, index, src)


def _reducing(reduce: str, include_self: bool):
    """prims.scatter_reduce with its reduction fixed, shaped like prims.scatter for _scatter_with."""
    return lambda a, index, src, dim: prims.scatter_reduce(a, index, src, dim, reduce, include_self)


@torchsymbol(torch.scatter_add, torch.Tensor.scatter_add)
def scatter_add(input, dim, index, src):
    """input with src added at `index` along `dim` (duplicates accumulate)."""
    check(is_tensor(src), lambda: f"scatter_add(): argument 'src' must be Tensor, not {type(src).__name__}", TypeError)
    dim = _check_scatter("scatter_add", input, dim, index, src)
    return _scatter_with(prims.scatter_add, input, dim, index, src)


@torchsymbol(torch.scatter_reduce, torch.Tensor.scatter_reduce)
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """scatter with a reduction of the values landing on each position (and, by default, its own)."""
    check(is_tensor(src), lambda: f"scatter_reduce(): argument 'src' must be Tensor, not {type(src).__name__}", TypeError)
    check(
        reduce in ("sum", "prod", "mean", "amax", "amin", "max", "min"),
        lambda: f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}",
        RuntimeError,
    )
    dim = _check_scatter("scatter_reduce", input, dim, index, src)
    if index.numel() == 0:
        return input
    if reduce not in ("sum", "mean"):
        # 'max' and 'min' are torch's older names for 'amax' and 'amin'
        reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)
        return _scatter_with(_reducing(reduce, bool(include_self)), input, dim, index, src)
    base = input
    if not include_self:
        # the positions written to start from zero instead of their own value
        base = _scatter_with(prims.scatter, input, dim, index, _full(index.shape, 0, input))
    total = _scatter_with(prims.scatter_add, base, dim, index, src)
    if reduce == "sum":
        return total
    one = _full(input.shape, 1 if include_self else 0, input)
    count = _scatter_with(prims.scatter_add, one, dim, index, _full(index.shape, 1, input))
    # untouched positions (count 0) keep their value: divide them by 1
    count = prims.where(prims.eq(count, _zero(input.dtype)), cast_number(1, input.dtype), count)
    if input.dtype.is_floating_point or input.dtype.is_complex:
        return prims.div(total, count)
    return prims.div(total, count, rounding_mode="floor")


# --- index_* ops ------------------------------------------------------------------------------


@torchsymbol(torch.index_add, torch.Tensor.index_add)
def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source added at rows `index` along `dim`."""
    _check_input("index_add", input)
    _check_index_tensor("index_add", index)
    check(is_tensor(source), lambda: f"index_add(): argument 'source' must be Tensor, not {type(source).__name__}", TypeError)
    dim = canonical_dim(input.ndim, dim)
    check(
        index.ndim <= 1,
        lambda: f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: {torch_type_name(index.dtype)} and size: {list(index.shape)}",
        IndexError,
    )
    check(
        index.dtype in (torch.int32, torch.int64),
        lambda: f"index_add_(): Expected dtype int32/int64 for index but got: {torch_type_name(index.dtype)}",
        RuntimeError,
    )
    check(
        input.dtype == source.dtype,
        lambda: f"index_add_(): self ({torch_type_name(input.dtype)}) and source ({torch_type_name(source.dtype)}) must have the same scalar type",
        RuntimeError,
    )
    source_size = source.shape[dim] if source.ndim > dim else 1
    check(
        index.numel() == source_size,
        lambda: f"index_add_(): Number of indices ({index.numel()}) should be equal to source.size(dim): ({source_size}), for dim: {dim}",
        RuntimeError,
    )
    return _index_update("index_add", prims.index_add, input, dim, index, source, alpha=alpha)


def _index_update(name: str, prim, a, dim: int, index, source, **kwargs):
    """index_add/index_copy after their own checks: shapes, then the prim (0-d as 1-element 1-D)."""
    if a.ndim == 0 or source.ndim == 0:
        check(
            a.numel() == 1 and source.numel() == 1,
            lambda: f"{name}: source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {list(a.shape)} source.shape = {list(source.shape)}",
            RuntimeError,
        )
        a1 = _reshape(a, (1,))
        return _reshape(prim(a1, _long(_as_1d(index)), _reshape(source, (1,)), 0, **kwargs), a.shape)
    same = source.ndim == a.ndim and all(source.shape[d] == a.shape[d] for d in range(a.ndim) if d != dim)
    check(
        same,
        lambda: f"source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {list(a.shape)} source.shape = {list(source.shape)}",
        RuntimeError,
    )
    return prim(a, _long(_as_1d(index)), source, dim, **kwargs)


@torchsymbol(torch.index_copy, torch.Tensor.index_copy)
def index_copy(input, dim, index, source):
    """input with rows `index` along `dim` replaced by source's rows."""
    _check_input("index_copy", input)
    _check_index_tensor("index_copy", index)
    check(is_tensor(source), lambda: f"index_copy(): argument 'source' must be Tensor, not {type(source).__name__}", TypeError)
    dim = canonical_dim(input.ndim, dim)
    check(index.ndim <= 1, lambda: f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})", IndexError)
    check(index.dtype == torch.int64, lambda: f"index_copy_(): Expected a long tensor for index, but got {torch_type_name(index.dtype)}", RuntimeError)
    check(
        input.dtype == source.dtype,
        lambda: f"index_copy_(): self and source expected to have the same dtype, but got (self) {torch_type_name(input.dtype)} and (source) {torch_type_name(source.dtype)}",
        RuntimeError,
    )
    check(
        input.ndim == 0 or source.ndim == 0 or input.ndim == source.ndim,
        lambda: f"index_copy_(): When source and destination are not scalars, their dimensionality must match. Source dimensionality ({source.ndim}), destination dimensionality ({input.ndim})",
        IndexError,
    )
    source_size = source.shape[dim] if source.ndim > dim else 1
    check(
        index.numel() == source_size,
        lambda: f"index_copy_(): Number of indices ({index.numel()}) should be equal to source.size(dim) ({source_size})",
        IndexError,
    )
    if input.ndim and source.ndim:
        for d in range(input.ndim):
            check(
                d == dim or input.shape[d] == source.shape[d],
                lambda: f"index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: {input.shape[d]} at dimension {d} and source slice shape: {source.shape[d]} at dimension {d}.",
                RuntimeError,
            )
    return _index_update("index_copy_()", prims.index_copy, input, dim, index, source)


@torchsymbol(torch.index_fill, torch.Tensor.index_fill)
def index_fill(input, dim, index, value):
    """input with rows `index` along `dim` set to the number (or 0-d tensor) `value`."""
    _check_input("index_fill", input)
    _check_index_tensor("index_fill", index)
    dim = canonical_dim(input.ndim, dim)
    check(index.dtype == torch.int64, lambda: "index_fill_(): Expected dtype int64 for index.", IndexError)
    check(index.ndim <= 1, lambda: "Index has to be a vector/scalar", RuntimeError)
    fill = _fill_value("index_fill_", value, input, input.shape)
    # a boolean row mask along dim: False everywhere, True at the indexed rows
    size = input.shape[dim] if input.ndim else 1
    idx = _as_1d(index)
    rows = prims.scatter(_full((size,), False, input, torch.bool), idx, _full(idx.shape, True, input, torch.bool), 0)
    mask = prims.broadcast_in_dim(rows, tuple(input.shape), (dim,)) if input.ndim else _reshape(rows, ())
    return prims.where(mask, fill, input)


# --- index_put, masked_fill -----------------------------------------------------------------


@torchsymbol(torch.index_put, torch.Tensor.index_put)
def index_put(input, indices, values, accumulate=False):
    """input with input[indices] = values (or += with accumulate), indices broadcast together."""
    _check_input("index_put", input)
    check(isinstance(indices, (tuple, list)), lambda: f"index_put(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}", TypeError)
    check(is_tensor(values), lambda: f"index_put(): argument 'values' (position 3) must be Tensor, not {type(values).__name__}", TypeError)
    for i, t in enumerate(indices):
        check(is_tensor(t), lambda: f"expected Tensor as element {i} in argument 1, but got {type(t).__name__}", TypeError)
        if t.dtype in (torch.bool, torch.uint8):
            raise data_dependent_error("index_put with a boolean mask index")
        check(t.dtype in (torch.int64, torch.int32), lambda: "tensors used as indices must be long, int, byte or bool tensors", IndexError)
    check(len(indices) <= input.ndim, lambda: f"too many indices for tensor of dimension {input.ndim} (got {len(indices)})", IndexError)
    check(
        values.dtype == input.dtype,
        lambda: f"Index put requires the source and destination dtypes match, got {torch_type_name(input.dtype)} for the destination and {torch_type_name(values.dtype)} for the source.",
        RuntimeError,
    )
    if not indices:
        return input
    try:
        shape = broadcast_shapes(*(t.shape for t in indices))
    except RuntimeError:
        shapes = ", ".join(str(list(concrete_shape(t.shape))) for t in indices)  # this call's sizes, unguarded
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}") from None
    idx = tuple(_long(broadcast_to(t, shape)) for t in indices)
    result_shape = (*shape, *input.shape[len(idx):])
    check(
        _broadcastable(values.shape, result_shape),
        lambda: f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to indexing result of shape {list(result_shape)}",
        RuntimeError,
    )
    return prims.index_put(input, idx, broadcast_to(values, result_shape), bool(accumulate))


def _broadcastable(shape: Sequence[int], target: Sequence[int]) -> bool:
    if len(shape) > len(target):
        return False
    return all(n == 1 or n == m for n, m in zip(reversed(shape), reversed(target)))


@torchsymbol(torch.masked_fill, torch.Tensor.masked_fill, tags=(Tags.NUMBER_OPERANDS,))
def masked_fill(input, mask, value):
    """input where mask is False, value where it is True (mask and input broadcast together)."""
    _check_input("masked_fill", input)
    check(is_tensor(mask), lambda: f"masked_fill(): argument 'mask' must be Tensor, not {type(mask).__name__}", TypeError)
    check(mask.dtype == torch.bool, lambda: f"masked_fill_ only supports boolean masks, but got mask with dtype {str(mask.dtype).removeprefix('torch.')}", RuntimeError)
    a, m = broadcast(input, mask)
    fill = _fill_value("masked_fill_", value, a, a.shape)
    return prims.where(m, fill, a)


# --- embedding, one_hot -------------------------------------------------------------------


@torchsymbol(torch.nn.functional.embedding)
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` at the int64/int32 `input` (padding_idx only changes gradients)."""
    check(is_tensor(input) and is_tensor(weight), lambda: "embedding() expects tensors for input and weight", TypeError)
    if padding_idx is not None:
        if padding_idx > 0:
            check(padding_idx < weight.shape[0], lambda: "Padding_idx must be within num_embeddings", AssertionError)
        elif padding_idx < 0:
            check(padding_idx >= -weight.shape[0], lambda: "Padding_idx must be within num_embeddings", AssertionError)
    if max_norm is not None:
        raise NotModelled("squall: embedding(max_norm=...) renormalizes the weight in place, which squall does not support")
    check(weight.ndim == 2, lambda: "'weight' must be 2-D", RuntimeError)
    check(
        input.dtype in (torch.int64, torch.int32),
        lambda: f"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got torch.{torch_type_name(input.dtype)}Tensor instead (while checking arguments for embedding)",
        RuntimeError,
    )
    rows = prims.take(weight, _long(_as_1d(input)), 0)
    return _reshape(rows, (*input.shape, weight.shape[1]))


@torchsymbol(torch.nn.functional.one_hot)
def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding along a new last dim of size num_classes (which must be given)."""
    check(is_tensor(tensor), lambda: f"one_hot(): argument 'input' must be Tensor, not {type(tensor).__name__}", TypeError)
    check(tensor.dtype == torch.int64, lambda: "one_hot is only applicable to index tensor of type LongTensor.", RuntimeError)
    if num_classes == -1:
        raise data_dependent_error("torch.nn.functional.one_hot with num_classes=-1")
    check(num_classes >= 0, lambda: f"Class values must be smaller than num_classes (got num_classes={num_classes}).", RuntimeError)
    shape = (*tensor.shape, num_classes)
    classes = prims.iota(num_classes, start=0, step=1, device=tensor.device, dtype=torch.int64)
    lhs = prims.broadcast_in_dim(tensor, shape, tuple(range(tensor.ndim)))
    rhs = prims.broadcast_in_dim(classes, shape, (tensor.ndim,))
    return prims.convert_element_type(prims.eq(lhs, rhs), torch.int64)


# --- in-place forms ---------------------------------------------------------------------------

index_put_ = inplace(index_put, torch.Tensor.index_put_, torch.index_put_, checks_overlap=True)
index_add_ = inplace(index_add, torch.Tensor.index_add_, checks_overlap=True)
index_copy_ = inplace(index_copy, torch.Tensor.index_copy_, checks_overlap=True)
index_fill_ = inplace(index_fill, torch.Tensor.index_fill_)
scatter_ = inplace(scatter, torch.Tensor.scatter_, checks_overlap=True)
scatter_add_ = inplace(scatter_add, torch.Tensor.scatter_add_, checks_overlap=True)
scatter_reduce_ = inplace(scatter_reduce, torch.Tensor.scatter_reduce_, checks_overlap=True)
masked_fill_ = inplace(masked_fill, torch.Tensor.masked_fill_)
