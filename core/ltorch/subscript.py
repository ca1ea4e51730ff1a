"""Torch-language ops: indexing syntax, `x[key]` and `x[key] = value`.

A key is normalised once (`_parse`) into basic steps (slices, selects, new axes) taken by
shape prims, and advanced indices (integer tensors and lists) taken by prims.index or
prims.index_put, following PyTorch's rules: ints select (they are not advanced indices),
advanced indices stay in place when adjacent and move to the front when separated.
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_map

from .. import prims
from .base import data_dependent_error, torchsymbol
from .unmodelled import NotModelled
from .functionalization import inplace
from .helpers import broadcast_shapes, broadcast_to, check, is_tensor
from .shape import clone
from ..prims.base import is_size
from ..proxies import TensorProxy, current_context
from ..symbolic import guarded_int, slice_indices

__all__ = [
    "getitem", "setitem", "setitem_",
]

_VALID = "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices"


@dataclass
class _Key:
    """A key in prim terms: per input dim (start, stop, step) and whether it is selected away,
    then where the basic result gets new axes, and the advanced indices by basic-result dim."""

    starts: list[int]
    stops: list[int]
    steps: list[int]
    selected: list[int] = field(default_factory=list)
    new_axes: list[int] = field(default_factory=list)  # positions in the basic result
    empty_axes: list[int] = field(default_factory=list)  # new axes from `False`, sliced to size 0
    advanced: dict[int, TensorProxy] = field(default_factory=dict)  # basic-result dim -> index


def _as_index_tensor(a: TensorProxy, item) -> TensorProxy:
    if isinstance(item, (list, tuple)):
        # a symbolic size in the list (x[[n - 1, 0]]) becomes its value, guarded, as in torch.tensor
        item = tree_map(guarded_int, item)
        flat = list(_flatten(item))
        if any(isinstance(v, bool) for v in flat):
            raise data_dependent_error("indexing with a list of bools (a mask)")
        check(all(isinstance(v, int) for v in flat), lambda: f"{_VALID} (got a list of {sorted({type(v).__name__ for v in flat})})", IndexError)
        # a list of ints is a constant index tensor of the compiled program
        with torch._C.DisableTorchFunction():  # a real tensor, not a traced torch.tensor call
            value = torch.tensor(item, dtype=torch.int64, device=a.device)
        return current_context().constant(value)
    if item.dtype in (torch.bool, torch.uint8):
        raise data_dependent_error("x[mask] (indexing with a bool tensor)")
    check(not item.dtype.is_floating_point and not item.dtype.is_complex, lambda: "tensors used as indices must be long, int, byte or bool tensors", IndexError)
    return item if item.dtype == torch.int64 else prims.convert_element_type(item, torch.int64)


def _flatten(x):
    for v in x:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def _parse(a: TensorProxy, key) -> _Key:
    items = list(key) if isinstance(key, tuple) else [key]
    consumed = sum(1 for k in items if k is not None and k is not Ellipsis and not isinstance(k, bool))
    ellipses = sum(1 for k in items if k is Ellipsis)
    check(ellipses <= 1, lambda: "an index can only have a single ellipsis ('...')", IndexError)
    if a.ndim == 0 and consumed and isinstance(items[0], int) and not isinstance(items[0], bool):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    check(consumed <= a.ndim, lambda: f"too many indices for tensor of dimension {a.ndim}", IndexError)
    if ellipses:
        i = items.index(Ellipsis)
        items[i : i + 1] = [builtins.slice(None)] * (a.ndim - consumed)
    else:
        items += [builtins.slice(None)] * (a.ndim - consumed)
    k = _Key([0] * a.ndim, list(a.shape), [1] * a.ndim)
    dim = pos = 0  # the input dim an item consumes, and its position in the basic result
    for item in items:
        if item is None or isinstance(item, bool):
            k.new_axes.append(pos)
            if item is False:
                k.empty_axes.append(pos)
            pos += 1
        elif isinstance(item, int):
            n = a.shape[dim]
            check(-n <= item < n, lambda: f"index {item} is out of bounds for dimension {dim} with size {n}", IndexError)
            item = item + n if item < 0 else item  # not `%`: n may be symbolic
            k.starts[dim], k.stops[dim] = item, item + 1
            k.selected.append(dim)
            dim += 1
        elif isinstance(item, builtins.slice):
            if bool in (type(item.start), type(item.stop), type(item.step)):  # eager reads a bool bound as its int
                item = builtins.slice(*(int(b) if type(b) is bool else b for b in (item.start, item.stop, item.step)))
            check(item.step is None or item.step != 0, lambda: "slice step cannot be zero", ValueError)
            check(item.step is None or item.step > 0, lambda: "step must be greater than zero", ValueError)
            for bound in (item.start, item.stop, item.step):
                check(bound is None or is_size(bound), lambda: f"{_VALID} (got a slice bound of type {type(bound).__name__})", TypeError)
            start, stop, step = slice_indices(item, a.shape[dim])
            stop = stop if stop >= start else start
            k.starts[dim], k.stops[dim], k.steps[dim] = start, stop, step
            dim += 1
            pos += 1
        elif is_tensor(item) or isinstance(item, (list, tuple)):
            k.advanced[pos] = _as_index_tensor(a, item)
            dim += 1
            pos += 1
        else:
            raise IndexError(f"{_VALID} (got {type(item).__name__})")
    return k


def _basic(a: TensorProxy, k: _Key) -> TensorProxy:
    """`a` sliced, selected and given its new axes: everything but the advanced indices."""
    out = prims.slice(a, k.starts, k.stops, k.steps)
    if k.selected:
        out = prims.squeeze(out, tuple(k.selected))
    if k.new_axes:
        shape = list(out.shape)
        for p in k.new_axes:
            shape.insert(p, 1)
        out = prims.reshape(out, shape)
    for p in k.empty_axes:
        starts, stops = [0] * out.ndim, list(out.shape)
        stops[p] = 0
        out = prims.slice(out, starts, stops, [1] * out.ndim)
    return out


def _index_tuple(k: _Key) -> tuple:
    """The advanced indices broadcast to one shape, as prims.index takes them (None: whole dim)."""
    shape = broadcast_shapes(*(t.shape for t in k.advanced.values()))
    last = max(k.advanced)
    return tuple(broadcast_to(k.advanced[d], shape) if d in k.advanced else None for d in range(last + 1))


@torchsymbol(torch.Tensor.__getitem__)
def getitem(a, key):
    k = _parse(a, key)
    out = _basic(a, k)
    if not k.advanced:
        return out
    return prims.index(out, _index_tuple(k))


def _value_as(a: TensorProxy, value, shape) -> TensorProxy | int | float | bool:
    """`value` as the setitem source for a region of `shape`: a's dtype, broadcast to the region."""
    if not is_tensor(value):
        numbers = (int, float, bool, complex) if a.dtype.is_complex else (int, float, bool)
        check(isinstance(value, numbers), lambda: f"can't assign a {type(value).__name__} to a {a.dtype} tensor", TypeError)
        if a.dtype == torch.bool:
            value = bool(value)
        elif not (a.dtype.is_floating_point or a.dtype.is_complex):
            value = int(value)
        return prims.full(tuple(shape), value, device=a.device, dtype=a.dtype)
    if value.dtype != a.dtype:
        value = prims.convert_element_type(value, a.dtype)
    # torch's copy broadcasting ignores leading size-1 dims of the source
    while value.ndim > len(shape) and value.shape[0] == 1:
        value = prims.reshape(value, value.shape[1:])
    return broadcast_to(value, shape)


def _setitem_value(a: TensorProxy, key, value) -> TensorProxy:
    items = key if isinstance(key, tuple) else (key,)
    masks = [x for x in items if is_tensor(x) and x.dtype in (torch.bool, torch.uint8)]
    if masks:
        return _masked_set(a, items, value)
    k = _parse(a, key)
    if k.advanced:
        check(
            all(isinstance(x, builtins.slice) and x == builtins.slice(None) or x is Ellipsis or is_tensor(x) or isinstance(x, (list, tuple)) for x in items),
            lambda: "squall: x[key] = v with index tensors supports only `:` and `...` beside them",
            NotModelled,
        )
        indices = _index_tuple(k)
        shape = _indexed_shape(a, indices)
        return prims.index_put(a, indices, _value_as(a, value, shape), False)
    # the region's sizes as prims.slice computes them (stop >= start): symbolic sizes stay symbolic
    region = [(hi - lo + st - 1) // st for lo, hi, st in zip(k.starts, k.stops, k.steps)]
    target = list(_basic_shape(region, k))
    source = _value_as(a, value, target)
    if k.empty_axes:
        return clone(a)  # x[False] = v writes nothing
    source = prims.reshape(source, region)
    # scatter the region back into a's shape with pad (its interior padding undoes the step)
    config = [(lo, n - lo - ((r - 1) * st + 1 if r else 0), st - 1) for lo, st, r, n in zip(k.starts, k.steps, region, a.shape)]
    placed = prims.pad(source, False if a.dtype == torch.bool else 0, config)
    inside = prims.pad(prims.full(region, True, device=a.device, dtype=torch.bool), False, config)
    return prims.where(inside, placed, a)


def _basic_shape(region: list[int], k: _Key) -> tuple[int, ...]:
    shape = [n for d, n in enumerate(region) if d not in k.selected]
    for p in k.new_axes:
        shape.insert(p, 0 if p in k.empty_axes else 1)
    return tuple(shape)


def _indexed_shape(a: TensorProxy, indices: tuple) -> tuple[int, ...]:
    """The shape prims.index gives: advanced dims in place when adjacent, else first."""
    positions = [d for d, t in enumerate(indices) if t is not None]
    idx_shape = tuple(indices[positions[0]].shape)
    rest = [n for d, n in enumerate(a.shape) if d not in positions]
    if positions[-1] - positions[0] + 1 == len(positions):
        return (*rest[: positions[0]], *idx_shape, *rest[positions[0] :])
    return (*idx_shape, *rest)


def _masked_set(a: TensorProxy, items: tuple, value) -> TensorProxy:
    check(
        len(items) == 1,
        lambda: "squall: x[mask] = v supports a bool mask alone as the key",
        NotModelled,
    )
    mask = items[0]
    check(
        tuple(mask.shape) == tuple(a.shape[: mask.ndim]),
        lambda: f"The shape of the mask {list(mask.shape)} does not match the shape of the indexed tensor {list(a.shape)}",
        IndexError,
    )
    if mask.dtype != torch.bool:
        mask = prims.convert_element_type(mask, torch.bool)
    rest = tuple(a.shape[mask.ndim :])
    if is_tensor(value):
        trimmed = value.shape
        while len(trimmed) > len(rest) and trimmed[0] == 1:
            trimmed = trimmed[1:]
        if len(trimmed) > len(rest):
            # a value with one entry per selected element needs the mask's count of True
            raise data_dependent_error("x[mask] = values (one value per selected element)")
        value = prims.reshape(value, trimmed) if tuple(trimmed) != tuple(value.shape) else value
    # with the mask broadcast over the trailing dims, x[mask] = v is where(mask, v, x)
    keep = prims.broadcast_in_dim(mask, a.shape, tuple(range(mask.ndim)))
    return prims.where(keep, _value_as(a, value, a.shape), a)


def _torch_setitem(a: torch.Tensor, key, value) -> torch.Tensor:
    """The torch executor's functional setitem: assignment into a copy."""
    out = a.clone()
    out[key] = value
    return out


@torchsymbol(_torch_setitem, id="ltorch.setitem")
def setitem(a, key, value):
    """The value `a` has after `a[key] = value`."""
    return _setitem_value(a, key, value)


setitem_ = inplace(setitem, torch.Tensor.__setitem__, checks_overlap=1)  # torch checks `a[key]` against the value
