"""Layouts: what `x.stride()`, `x.is_contiguous()` and `x.storage_offset()` answer while a program
is traced, as eager answers.

A trace does not model layouts (every op makes a value; executors take any layout), yet a
program may read one. The answer is eager's, learnt from the call being compiled
(`squall.frontend.speculation` computes `x` on the real inputs as the torch calls it stands
for), and made to hold at every call that reuses the trace:

- the layout of each input `x` is computed from is guarded where it is first read: contiguous
  (with a dimension of size 1, laid out exactly as a new tensor, its size-1 strides included),
  or (for an input that is not) its exact strides (`GUARD("contiguous")`,
  `GUARD("contiguous_strides")`, `GUARD("strides")`);
- where `x` is dense in some order of its dimensions (contiguous, transposed, permuted) and is
  no view, or a view only through reshapes and permutations, its strides are the products of
  its sizes in that order: expressions of its symbolic sizes, so a new length compiles nothing
  (`x.stride(0)` of a `[s0, 4]` tensor is `4`, of a `[4, s0]` one `s0`);
- any other layout (a slice, an expanded tensor) is answered with this call's numbers, every
  symbolic size of `x` and of its inputs read and guarded (specialised), so it too holds at
  every call that passes the guards;
- a storage offset is 0 for a tensor that is no view and starts its storage (for every size),
  else this call's, its sizes guarded; the offsets of the inputs it comes from are guarded.

Where the call's values are unknown (strict mode, a stand-in input for a device this machine
lacks), the answer is a contiguous tensor's strides, the layout squall's proxies stand for.
"""
from __future__ import annotations

from typing import Any

import torch

from ..guards import GUARD, has_contiguous_strides
from ..ltorch import collectives
from ..ltorch.base import DataDependentError
from ..proxies import NumberProxy, TensorProxy
from ..symbolic import SymInt, guarded_int, symbols_of
from .speculation import _site, inputs_reached

__all__ = ["traced_strides", "traced_is_contiguous", "traced_to_aliases", "traced_storage_offset", "traced_reshape_is_view", "traced_overlap", "view_strides", "memory_overlap"]

# view ops whose result's strides follow from their input's for any sizes of 2 or more (a size
# symbol is guarded so where a layout is read, `_two_or_more`): reshapes
# (a view of a dense tensor is dense) and permutations; a slice's, an expansion's or a diagonal's
# depend on sizes the view does not show (`x[:, :4]` is contiguous only while x has 4 columns)
_SIZE_INDEPENDENT_VIEWS = frozenset({
    "torch.Tensor.view", "torch.Tensor.view_as", "torch.Tensor.reshape", "torch.Tensor.reshape_as",
    "torch.Tensor.flatten", "torch.Tensor.unflatten", "torch.Tensor.contiguous", "torch.Tensor.squeeze",
    "torch.Tensor.unsqueeze", "torch.Tensor.detach", "torch.transpose", "torch.swapaxes", "torch.swapdims",
    "torch.t", "torch.Tensor.T", "torch.Tensor.H", "torch.Tensor.mT", "torch.Tensor.mH", "torch.Tensor.permute",
    "torch.movedim", "torch.Tensor.to.memory_format",
})  # fmt: skip


def traced_strides(ctx: Any, x: TensorProxy) -> tuple:
    """Eager's `x.stride()` in the program traced in `ctx`, as ints and symbolic sizes, guarded
    so that it holds at every call the trace serves (see the module's note)."""
    layout = _collective_layout(torch.Tensor.stride, x)
    if layout is not None:
        return layout
    real, sources = _eager_layout(ctx, x)
    if real is None:
        return _contiguous_strides(x.shape)
    if _size_independent(ctx, x):
        symbolic = _dense_strides(x.shape, tuple(real.stride()))
        if symbolic is not None:
            return symbolic
    _specialise(x, sources)  # a layout that depends on sizes the answer cannot name: this call's
    return tuple(real.stride())


def traced_is_contiguous(ctx: Any, x: TensorProxy, memory_format: torch.memory_format) -> bool:
    """Eager's `x.is_contiguous(memory_format)` in the program traced in `ctx`, guarded as
    `traced_strides` guards its answer: where `x` is dense in an order of its dimensions that no
    size decides, the answer holds for every size; else its sizes are guarded."""
    real, sources = _eager_layout(ctx, x)
    if real is None:
        return memory_format in (torch.contiguous_format, torch.preserve_format)
    if not (_size_independent(ctx, x) and _dense_strides(x.shape, tuple(real.stride())) is not None):
        _specialise(x, sources)
    return real.is_contiguous(memory_format=memory_format)


def traced_to_aliases(ctx: Any, x: TensorProxy, memory_format: torch.memory_format) -> bool:
    """Whether eager's `x.to(memory_format=memory_format)` (nothing else changed) in the program
    traced in `ctx` returns `x` itself, else a copy: where `x`'s layout already suggests that format
    (`suggest_memory_format`, which reads strides and sizes of 1). Guarded as `traced_is_contiguous`
    guards its answer."""
    real, sources = _eager_layout(ctx, x)
    if real is None:
        return memory_format == torch.contiguous_format
    if not (_size_independent(ctx, x) and _dense_strides(x.shape, tuple(real.stride())) is not None):
        _specialise(x, sources)
    with torch._C.DisableTorchFunction():  # torch's own call on this call's tensor, not the tracing mode's
        out = real.to(memory_format=memory_format)  # `real` itself, though under another Python object
        return out.data_ptr() == real.data_ptr() and out.stride() == real.stride()


def traced_reshape_is_view(ctx: Any, x: TensorProxy, shape: tuple) -> bool:
    """Whether eager's `x.reshape(shape)` in the program traced in `ctx` is a view of `x` (else
    a copy): it is exactly where `x.view(shape)` would succeed for `x`'s sizes and strides
    (`view_strides`). The strides are `traced_strides`' (guarded as it guards them), and a
    comparison of symbolic sizes the rule makes is guarded as every size comparison is."""
    return view_strides(tuple(x.shape), traced_strides(ctx, x), tuple(shape)) is not None


def view_strides(shape: tuple, strides: tuple, new_shape: tuple) -> tuple | None:
    """The strides of a view of shape `new_shape` of a tensor of `shape` and `strides`; None
    where no view has that shape (eager's reshape then copies). PyTorch's rule
    (`at::detail::computeStride`): split `shape` into chunks of dimensions each laid out as one
    (`strides[d] == shape[d + 1] * strides[d + 1]`, a size 1 joining any chunk); `new_shape`
    must split into chunks of the same element counts, each viewing one of them."""
    if not shape:
        return (1,) * len(new_shape)
    numel: Any = 1
    for n in shape:
        numel = numel * n
    if numel == 0:  # no element to lay out: any view
        if tuple(shape) == tuple(new_shape):
            return tuple(strides)
        return _contiguous_strides(new_shape)
    new_strides: list[Any] = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]  # the stride of the innermost dimension of the current chunk
    tensor_numel: Any = 1
    view_numel: Any = 1
    for tensor_d in reversed(range(len(shape))):
        tensor_numel = tensor_numel * shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            # the chunk ends here: the view's dimensions that fill it take its strides
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel = view_numel * new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    return tuple(new_strides) if view_d == -1 else None


def traced_storage_offset(ctx: Any, x: TensorProxy) -> int:
    """Eager's `x.storage_offset()` in the program traced in `ctx`: the offsets of the inputs it is
    computed from are guarded with their layouts; 0 for a tensor that is no view and starts where
    its storage does (a new tensor's), for every size; else this call's, its sizes guarded."""
    layout = _collective_layout(torch.Tensor.storage_offset, x)
    if layout is not None:
        return layout
    real, sources = _eager_layout(ctx, x)
    if real is None:
        return 0
    site = _site()[0]
    for p in sources:
        value = ctx.speculation.values.get(p.name)
        if value is not None and ("offset", p.name) not in ctx.layouts_guarded:
            ctx.layouts_guarded.add(("offset", p.name))
            GUARD("storage_offset", (p,), {}, value.storage_offset(), site)
    offset = real.storage_offset()
    if offset != 0 or id(x) in ctx.views.steps:
        _specialise(x, sources)
    return offset


def traced_overlap(ctx: Any, a: TensorProxy, b: TensorProxy, key: Any = None, shared: bool = True) -> str | None:
    """How eager's `a` (or its view `a[key]`, for a basic `key`) and `b`, two tensors of one view
    family in the program traced in `ctx`, overlap in memory (`memory_overlap`); None where this
    call's values are unknown (squall cannot tell). `shared`: eager's `a` and `b` share a storage
    (no copy on their way from their root), so their values in this call, which keep eager's
    strides and offsets but not always its storage (a value written in place is computed anew),
    are compared as on one storage; else they overlap only where those values share one. It
    depends on the layouts of the inputs they come from (guarded, as a layout read guards them)
    and on their sizes (every symbolic one read and guarded, so a key computed from them holds too)."""
    real_a, sources_a = _eager_layout(ctx, a)
    real_b, sources_b = _eager_layout(ctx, b)
    if real_a is None or real_b is None:
        return None
    _specialise(a, sources_a)
    _specialise(b, sources_b)
    if key is not None:
        items = key if type(key) is tuple else (key,)
        if any(isinstance(k, (TensorProxy, NumberProxy)) for k in items):
            return None  # an index or a bound computed from data in the program
        index = tuple(_guarded_index(k) for k in items)
    with torch._C.DisableTorchFunction():  # torch's own calls on this call's tensors, not the tracing mode's
        if key is not None:
            real_a = real_a[index]
        if not shared and real_a.untyped_storage().data_ptr() != real_b.untyped_storage().data_ptr():
            return "none"
        overlap = memory_overlap(real_a, real_b)
        if overlap == "too_hard":
            # eager does not check: where they share an element, its answer is its loop order's
            return None if _may_share_elements(real_a, real_b) else "none"
        return overlap


# the most elements whose memory offsets a trace compares (`_may_share_elements`)
_OFFSETS_COMPARED = 1 << 20


def _may_share_elements(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether `b`, read by an in-place op writing `a` (on one storage), may read an element of `a`
    at another position than the one it writes it at (where eager's loop may have written it
    already); the same element at the same position is read before written, as squall reads it."""
    if a.shape == b.shape and a.stride() == b.stride() and a.storage_offset() == b.storage_offset():
        return False
    ranges = [(t.storage_offset(), t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) for t in (a, b)]
    if ranges[0][1] < ranges[1][0] or ranges[1][1] < ranges[0][0]:
        return False
    if a.numel() > _OFFSETS_COMPARED or b.numel() > _OFFSETS_COMPARED:
        return True
    written = _element_offsets(a)
    try:
        read = _element_offsets(b).broadcast_to(written.shape)  # b's element read at each position of a
    except RuntimeError:
        return True
    return bool((torch.isin(read, written) & (read != written)).any())


def _element_offsets(t: torch.Tensor) -> torch.Tensor:
    """The storage offset of each element of `t`, shaped as `t`."""
    offsets = torch.full((), t.storage_offset(), dtype=torch.int64)
    for n, stride in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(n, dtype=torch.int64) * stride
    return offsets


def _guarded_index(k: Any) -> Any:
    """A basic index with each symbolic size in it read (guarded)."""
    if type(k) is SymInt:
        return guarded_int(k)
    if type(k) is slice:
        return slice(*(guarded_int(v) if type(v) is SymInt else v for v in (k.start, k.stop, k.step)))
    return k


def memory_overlap(a: torch.Tensor, b: torch.Tensor) -> str:
    """PyTorch's `get_overlap_status` of two tensors sharing a storage, which an in-place op
    checks between the tensor it writes and each operand: "full" (the same elements, laid out
    alike), "partial" (eager raises), "none", or "too_hard" (one is not dense and
    non-overlapping: eager does not check)."""
    if a.numel() == 0 or b.numel() == 0:
        return "none"
    if not (_non_overlapping_and_dense(a) and _non_overlapping_and_dense(b)):
        return "too_hard"
    a_begin, b_begin = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    a_end, b_end = a_begin + a.numel() * a.element_size(), b_begin + b.numel() * b.element_size()
    if a_begin == b_begin and a_end == b_end:
        return "full" if a.stride() == b.stride() else "partial"
    return "partial" if a_begin < b_end and b_begin < a_end else "none"


def _non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """Whether `t`'s elements fill a block of memory, each once, in some order of its dimensions
    (PyTorch's `is_non_overlapping_and_dense`; a dimension of size 1 takes no part)."""
    if t.is_contiguous():
        return True
    expected = 1
    for stride, n in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1):
        if stride != expected:
            return False
        expected *= n
    return True


def _collective_layout(method: Any, x: TensorProxy) -> Any:
    """`method`'s answer (stride, storage_offset) where `x` is a functional collective's result
    that PyTorch wraps in Python (ltorch.collectives.WrappedResults); None otherwise."""
    wrapped = collectives.WRAPPED_RESULTS
    return wrapped.layout(method, (x,)) if wrapped is not None else None


def _eager_layout(ctx: Any, x: TensorProxy) -> tuple[torch.Tensor | None, list[TensorProxy]]:
    """`x`'s value in the call being traced, computed as eager computes it, and the inputs it is
    computed from, whose layouts are now guarded; (None, []) where the call's values are unknown."""
    speculation = ctx.speculation
    if speculation is None or len(ctx.scopes) != 1:
        _two_or_more(ctx, [x])
        return None, []
    try:
        real = speculation.value(x)
    except DataDependentError:
        _two_or_more(ctx, [x])
        return None, []
    site = _site()[0]
    sources = _source_inputs(ctx, x)
    for p in sources:
        _guard_layout(ctx, p, speculation.values.get(p.name), site)
    _two_or_more(ctx, [x, *sources])
    return real, sources


def _two_or_more(ctx: Any, proxies: list[TensorProxy]) -> None:
    """A layout answer holds for sizes of 2 or more: eager's stride of a dimension of size 1 is
    whatever its maker left (`is_contiguous` ignores it), so a size symbol of these tensors that
    might be 1 (squall.symbolic.ShapeEnv.ones) is guarded as 2 or more."""
    env = getattr(ctx, "shapes", None)
    if env is not None and env.ones:
        env.at_least_two(symbols_of([n for p in proxies for n in p.shape]))


def _size_independent(ctx: Any, x: TensorProxy) -> bool:
    # no view, or a view only through ops whose result's layout no size decides
    return all(getattr(step.op, "id", None) in _SIZE_INDEPENDENT_VIEWS for step in ctx.views.steps.get(id(x), ()))


def _specialise(x: TensorProxy, sources: list[TensorProxy]) -> None:
    """Read and guard every symbolic size of `x` and of the inputs it is computed from."""
    for p in (x, *sources):
        for n in p.shape:
            guarded_int(n)


def _contiguous_strides(shape: Any) -> tuple:
    strides = []
    running: Any = 1
    for n in reversed(tuple(shape)):
        strides.append(running)
        running = running * (n if type(n) is SymInt else max(n, 1))  # (a symbolic size is 1 or more)
    return tuple(reversed(strides))


def _dense_strides(shape: Any, real: tuple) -> tuple | None:
    """The strides of a tensor of `shape` laid out densely in the order its `real` strides
    give, as products of its sizes; None where that is not how `real` lays it out."""
    shape = tuple(shape)
    if any(type(n) is int and n == 0 for n in shape):
        return None
    # innermost first: the smallest stride, and of equal ones (a size 1 beside) the later dimension
    order = sorted(range(len(shape)), key=lambda d: (real[d], -d))
    strides: list[Any] = [0] * len(shape)
    running: Any = 1
    for d in order:
        strides[d] = running
        running = running * (shape[d] if type(shape[d]) is SymInt else max(shape[d], 1))
    # checked against this call's layout: an order that does not lay it out so (an overlap, a gap)
    if any((s.value if type(s) is SymInt else s) != r for s, r in zip(strides, real)):
        return None
    return tuple(strides)


def _source_inputs(ctx: Any, x: TensorProxy) -> list[TensorProxy]:
    """The program's tensor inputs `x` is computed from (itself, where it is one)."""
    inputs = {p.name: p for p in ctx.inputs if type(p) is TensorProxy}
    return list(inputs_reached(ctx.scopes[0], inputs, [x.name]).values())


def _guard_layout(ctx: Any, p: TensorProxy, real: torch.Tensor | None, site: str) -> None:
    """Guard input `p`'s layout as it is in this call (`real`), once per trace: contiguous, or its
    exact strides. A dimension of size 1 (one at every call the trace serves: a size traced at 1
    is guarded so, `_two_or_more`) has a stride `is_contiguous()` ignores but `stride()` answers
    and the tensors computed from `p` inherit (so do all of an empty tensor's, size 0 is never
    symbolic), so where `p` has one, contiguous means laid out
    exactly as a new tensor (`torch.empty(shape)`), which holds for every size; an input whose
    size-1 strides are other than that has them guarded exactly."""
    if real is None or p.name in ctx.layouts_guarded:
        return
    ctx.layouts_guarded.add(p.name)
    if real.is_contiguous() and 1 not in real.shape and 0 not in real.shape:
        GUARD("contiguous", (p,), {}, True, site)
    elif real.is_contiguous() and has_contiguous_strides(real):
        GUARD("contiguous_strides", (p,), {}, True, site)
    else:
        GUARD("strides", (p,), {}, tuple(real.stride()), site)
