"""Passes over traces that every compilation runs: dead code removal, write-backs folded into
the calls that compute them, and freeing intermediates.

Each takes a trace and returns a new one; the trace it was given is left as it was.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from .. import prims
from ..frontend.outputs import output_with_proxies_replaced
from ..proxies import TensorProxy
from ..symbol import DEL, BoundSymbol, Tags, flat_proxies
from ..symbolic import same_shape
from ..trace import Trace
from .checking import needs_check

__all__ = ["remove_dead_code", "dead_code_removed", "write_backs_folded", "fresh_values_written_in_place", "lossless_round_trips_removed",
           "narrow_ops_on_torch", "free_after_last_use"]


def remove_dead_code(bsyms: list[BoundSymbol], output: Any) -> list[BoundSymbol]:
    """The calls whose results something uses (side effects are always kept)."""
    live = {p.name for p in flat_proxies(output)}
    kept = []
    for bsym in reversed(bsyms):
        if Tags.SIDE_EFFECT in bsym.sym.tags or any(p.name in live for p in bsym.output_proxies()):
            kept.append(bsym)
            live.update(p.name for p in bsym.input_proxies())
    kept.reverse()
    return kept


def dead_code_removed(trace: Trace) -> Trace:
    """`trace` without the calls whose results nobody uses."""
    return Trace.from_trace(trace, bsyms=remove_dead_code(trace.bsyms, trace.output), provenance="dead code removed")


def write_backs_folded(trace: Trace) -> Trace:
    """`trace` (planned) with the write-backs into its inputs (the `copy_(input, result)` a traced
    in-place update ends with) folded into the calls that compute them, where the executor of
    such a call runs it in place (`Executor.in_place_form`): batch norm's running statistics
    updated by its kernel, as eager's, not copied in after it (two copies per batch norm); a
    preallocated KV cache written at one position (`cache.index_copy_`, `cache[:, pos] = kv`)
    in place, as eager writes it, not copied whole into a new tensor and back at every step; an
    elementwise update (`x.mul_(2)`) or a chain of them (a moving average's `buf.mul_(d).add_(x)`:
    each call's only reader the next, `chain_from`) in one pass over the input's memory, each link
    in place, not a new tensor per link and a copy back.

    Only where nothing between that call and the write-back reads the input's old value (the input
    itself or a view of it); the result (and any view of it), which becomes the input's memory, is
    neither returned nor read after a later write into the input; the call reads no other view of
    the input; their dtypes and shapes agree; and no guard or checked call follows (either can
    stop the run and run the call again, which must find its inputs as they were). Later readers
    of the result read the input instead."""
    bsyms = trace.bsyms
    returned = {p.name for p in flat_proxies(trace.output)}
    readers = _readers(bsyms)
    # a failed guard, or a checked call's fault, stops the run and runs the call again (another
    # variant, a replan): it must find the inputs unwritten, so nothing before one is folded
    last_stop = max((i for i, b in enumerate(bsyms) if Tags.BARRIER in b.sym.tags or needs_check(b)), default=-1)

    def chain_from(result: Any) -> tuple[list[int], Any]:
        """The calls that go on updating `result` as one in-place chain (`buf.mul_(d).add_(x)`:
        each takes the last one's result as its first argument, is its only reader, and keeps its
        dtype and shape, so in place it writes the same memory), and the chain's last result."""
        links = []
        while isinstance(result, TensorProxy) and result.name not in returned:
            found = readers.get(result.name, ())
            if len(found) != 1:
                break
            link = bsyms[found[0]]
            form = link.executor.in_place_form(link) if link.executor is not None else None
            if form is None or not _writes_in_place(link, form, result.name):
                break
            links.append(found[0])
            result = link.output
        return links, result

    def write_back_of(i: int, result: Any, target: Any) -> tuple[int, list[int]] | None:
        """The index of the write-back of call i's `result` into `target`, where it may be folded,
        and the calls of an in-place chain between them (`chain_from`), folded with it."""
        if not (isinstance(result, TensorProxy) and isinstance(target, TensorProxy)) or result.name in returned:
            return None
        links, result = chain_from(result)
        if result.name in returned:
            return None
        copies = [r for r in readers.get(result.name, ()) if bsyms[r].sym.id == prims.copy_.id and bsyms[r].args[1].name == result.name]
        if len(copies) != 1:
            return None
        write_back = copies[0]
        dst, src = bsyms[write_back].args
        if dst.name != target.name or result.dtype != target.dtype or not same_shape(result.shape, target.shape):
            return None
        # (views of a tensor only its own call and its write-back read cannot exist: no walk for them)
        old = _sharing_memory(bsyms, 0, target.name) if set(readers.get(target.name, ())) - {i, write_back} else {target.name}
        if any(p.name in old and p.name != target.name for p in bsyms[i].input_proxies()):
            return None  # the call reads a view of what it writes
        if any(i < r < write_back for name in old for r in readers.get(name, ())):
            return None  # a call before the write-back reads the input's old value, which the call in place overwrites
        # the result (and its views) becomes the input's memory: never returned (nor saved for a
        # backward), nor read after a later write into the input
        result_views = _sharing_memory(bsyms, i + 1, result.name) if len(readers[result.name]) > 1 else {result.name}
        if returned & result_views:
            return None
        last_read = max((r for name in result_views for r in readers.get(name, ())), default=-1)
        if last_read > write_back and any(Tags.SIDE_EFFECT in bsyms[w].sym.tags and w < last_read
                                          for name in old for w in readers.get(name, ()) if w > write_back):
            return None
        return write_back, links

    folded: dict[int, BoundSymbol] = {}
    dropped: set[int] = set()
    becomes: dict[str, TensorProxy] = {}  # a folded call's result -> the input it was written into
    for i, bsym in enumerate(bsyms):
        form = bsym.executor.in_place_form(bsym) if bsym.executor is not None and i > last_stop else None
        if form is None:
            continue
        outputs = bsym.output if isinstance(bsym.output, tuple) else (bsym.output,)
        found = [write_back_of(i, outputs[k], bsym.args[a]) for k, a in form.writes.items()]
        if None in found or any(link in folded for _, links in found for link in links):
            continue
        folded[i] = _in_place_call(bsym, form)
        for (write_back, links), (k, a) in zip(found, form.writes.items()):
            dropped.add(write_back)
            becomes[outputs[k].name] = bsym.args[a]
            for link in links:  # each link of the chain writes the same memory: the input's
                folded[link] = _in_place_call(bsyms[link], bsyms[link].executor.in_place_form(bsyms[link]))
                becomes[bsyms[link].output.name] = bsym.args[a]
    if not folded:
        return trace
    bsyms = _with_folded(bsyms, readers, folded, becomes, dropped)
    return Trace.from_trace(trace, bsyms=bsyms, provenance="write-backs folded into the calls that compute them")


def fresh_values_written_in_place(trace: Trace) -> Trace:
    """`trace` (planned, its write-backs folded) with each write into an intermediate the program
    computed (`x = y.roll(1); x[0] = v`, a mask's rows set in a new tensor) made in that tensor's
    memory where the write is its last use, as eager writes it, instead of into a copy of it: for
    the calls whose executor's in-place form says their functional result is such a copy
    (`InPlaceForm.fresh`: setitem, index_copy). Later readers of the result read the intermediate.

    Only where the intermediate is memory of its own (its call's decomposition makes it, no view
    of another value: `_outputs_sharing`), computed by the same executor, neither an input nor
    returned (nor saved for a backward); nothing that may share its memory (a view of it) is read
    by the write or after it; and no opaque call reads it (a user's function could keep it). Not
    for a program run under PyTorch's autograd, which may have saved the intermediate (the caller
    leaves this pass out there)."""
    bsyms = trace.bsyms
    forms = {i: form for i, b in enumerate(bsyms)
             if b.executor is not None and (form := b.executor.in_place_form(b)) is not None and form.fresh}
    if not forms:
        return trace
    inputs = {p.name for p in trace.inputs}
    returned = {p.name for p in flat_proxies(trace.output)}
    readers = _readers(bsyms)
    made_by: dict[str, int] = {}
    for i, bsym in enumerate(bsyms):
        for p in bsym.output_proxies():
            made_by.setdefault(p.name, i)

    def writable(i: int, bsym: BoundSymbol, form: Any) -> bool:
        target = bsym.args[0] if bsym.args else None
        if not isinstance(target, TensorProxy) or not _writes_in_place(bsym, form, target.name):
            return False
        name = target.name
        maker = made_by.get(name)
        if name in inputs or maker is None or max(readers[name]) != i:
            return False
        if bsyms[maker].executor is not bsym.executor or name in _outputs_sharing(bsyms[maker], {p.name for p in bsyms[maker].input_proxies()}):
            return False  # not memory of its own
        sharing = _sharing_memory(bsyms, maker + 1, name)
        if sharing & returned:
            return False  # it, or a view of it, is returned with the values it had before the write
        if any(p.name in sharing for p in bsym.input_proxies() if p.name != name):
            return False  # the write reads a view of what it writes
        return not any((r > i and n != name) or Tags.OPAQUE in bsyms[r].sym.tags or Tags.OPAQUE_VIEW in bsyms[r].sym.tags
                       for n in sharing for r in readers.get(n, ()))

    folded: dict[int, BoundSymbol] = {}
    becomes: dict[str, TensorProxy] = {}  # a folded call's result -> the intermediate it was written into
    for i, form in forms.items():
        bsym = bsyms[i]
        if not writable(i, bsym, form):
            continue
        folded[i] = _in_place_call(bsym, form)
        target = bsym.args[0]
        becomes[bsym.output.name] = becomes.get(target.name, target)  # (a chain of writes: the first intermediate's memory)
    if not folded:
        return trace
    output = output_with_proxies_replaced(trace.output, lambda x: becomes.get(x.name, x))
    return Trace.from_trace(trace, bsyms=_with_folded(bsyms, readers, folded, becomes), output=output,
                            provenance="writes into intermediates made in place")


def _readers(bsyms: list[BoundSymbol]) -> dict[str, list[int]]:
    """Each value's name -> the indices of the calls that read it, in order."""
    readers: dict[str, list[int]] = {}
    for i, bsym in enumerate(bsyms):
        for p in bsym.input_proxies():
            readers.setdefault(p.name, []).append(i)
    return readers


def _writes_in_place(bsym: BoundSymbol, form: Any, name: str) -> bool:
    """Whether `bsym`, run by its in-place `form`, writes its result into the memory of its first
    argument, the value `name`: a single result of that value's dtype and shape, and `name` read
    once (`add(t, t)` in place would read what it writes)."""
    target, out = bsym.args[0] if bsym.args else None, bsym.output
    return (form.writes == {0: 0} and isinstance(target, TensorProxy) and target.name == name
            and sum(p.name == name for p in bsym.input_proxies()) == 1
            and isinstance(out, TensorProxy) and out.dtype == target.dtype and same_shape(out.shape, target.shape))


def _with_folded(bsyms: list[BoundSymbol], readers: dict[str, list[int]], folded: dict[int, BoundSymbol],
                 becomes: dict[str, TensorProxy], dropped: frozenset[int] | set[int] = frozenset()) -> list[BoundSymbol]:
    """`bsyms` with the `folded` calls in place of theirs, the `dropped` ones left out, and the calls
    that read a folded result (`becomes`: its name -> the tensor it was written into) reading that
    tensor instead (a name's proxies are several objects: one per call that reads it)."""
    reading = {r for name in becomes for r in readers.get(name, ())} - dropped
    renamed = {id(p): becomes[p.name] for r in reading for p in _named_proxies(bsyms[r]) if p.name in becomes}
    return [folded.get(i, b).swap_proxies(renamed) if i in reading else folded.get(i, b) for i, b in enumerate(bsyms) if i not in dropped]


def _in_place_call(bsym: BoundSymbol, form: Any) -> BoundSymbol:
    """`bsym` run by its executor's in-place form: its results written into its arguments (`form.writes`) are no results."""
    outputs = bsym.output if isinstance(bsym.output, tuple) else (bsym.output,)
    kept = tuple(o for k, o in enumerate(outputs) if k not in form.writes)
    output = kept if len(kept) > 1 else (kept[0] if kept else None)
    return BoundSymbol(form.sym, bsym.args, bsym.kwargs, output, source=bsym.source, executor=bsym.executor,
                       impl=form.impl, call_keywords=bsym.call_keywords, grad_enabled=bsym.grad_enabled)


def _named_proxies(bsym: BoundSymbol) -> Iterator[TensorProxy]:
    """The proxies `bsym` names, in its arguments and in its decomposition where that was copied
    (what `BoundSymbol.swap_proxies` replaces)."""
    yield from bsym.input_proxies()
    if type(bsym._subsymbols) is tuple:
        for sub in bsym._subsymbols:
            yield from _named_proxies(sub)


def _sharing_memory(bsyms: list[BoundSymbol], start: int, name: str) -> set[str]:
    """The names of the values that may share memory with the value `name` (itself included), as
    the calls from `start` on compute them: through the views their decompositions make."""
    sharing = {name}
    for bsym in bsyms[start:]:
        if any(p.name in sharing for p in bsym.input_proxies()):
            sharing |= _outputs_sharing(bsym, sharing)
    return sharing


# prims whose torch kernels may return their operand's memory: views, and a conversion to the
# dtype it has (`.to` returns its input)
def _prim_may_alias(bsym: BoundSymbol) -> bool:
    tags = bsym.sym.tags
    if Tags.SHAPE_ONLY in tags or Tags.SIDE_EFFECT in tags or Tags.OPAQUE in tags or Tags.OPAQUE_VIEW in tags:
        return True
    if bsym.sym.id == prims.convert_element_type.id:
        return isinstance(bsym.args[0], TensorProxy) and bsym.args[0].dtype == bsym.output.dtype
    return bsym.sym.id in _VIEWING_ELEMENTWISE


def _outputs_sharing(bsym: BoundSymbol, names: set[str]) -> set[str]:
    """The names of `bsym`'s outputs that may share memory with its inputs named in `names`: all of
    them for a prim that may return a view, and for a call with no decomposition (an opaque call,
    a kernel squall cannot see into); otherwise as its decomposition's calls pass them on."""
    outputs = {p.name for p in bsym.output_proxies()}
    if bsym.sym.is_prim:
        return outputs if _prim_may_alias(bsym) else outputs & names
    subsymbols = bsym.subsymbols
    if not subsymbols or Tags.OPAQUE in bsym.sym.tags or Tags.OPAQUE_VIEW in bsym.sym.tags:
        return outputs
    inner = set(names)
    for sub in subsymbols:
        if any(p.name in inner for p in sub.input_proxies()):
            inner |= _outputs_sharing(sub, inner)
    return outputs & inner


# elementwise prims whose torch call returns a view of its operand (a complex tensor's real part)
_VIEWING_ELEMENTWISE = frozenset({prims.real.id, prims.imag.id})


def lossless_round_trips_removed(trace: Trace) -> Trace:
    """`trace` with each conversion back to the dtype a value was widened from (bfloat16 to
    float32 and back) replaced by the value itself, which it is, bit for bit; the widening goes
    too where nothing else reads it. squall's elementwise ops compute low precision in float32
    and convert back, so their derivatives convert there and back between them: on the torch
    executor a kernel each (a bfloat16 LLaMA training step made 109 conversions, eager 26).
    A conversion the trace returns is replaced only by a value an elementwise op computed, which
    nothing else returns (a returned view, a second result or an input would share the returned
    tensor's memory, which the conversion's copy did not: a bfloat16 gradient that went there and
    back to float32 at the end of a backward is returned as computed)."""
    returned = {p.name for p in flat_proxies(trace.output)}
    fresh: set[str] = set()  # values an elementwise op computed into memory of their own
    widened_from: dict[str, TensorProxy] = {}  # a widening's result -> the value it widened
    mapping: dict[int, TensorProxy] = {}  # a round trip's result -> the value it started from
    bsyms = []
    for bsym in trace.bsyms:
        bsym = bsym.swap_proxies(mapping) if mapping else bsym
        if Tags.SIDE_EFFECT in bsym.sym.tags:
            widened_from.clear()  # (a write may change a value a later use would read in its place)
        if bsym.sym.id == prims.convert_element_type.id and isinstance(bsym.args[0], TensorProxy):
            value, out = bsym.args[0], bsym.output
            origin = widened_from.get(value.name)
            if origin is not None and origin.dtype == out.dtype and (out.name not in returned or origin.name in fresh - returned):
                mapping[id(out)] = origin
                if out.name in returned:
                    returned.add(origin.name)  # (another round trip from it keeps its copy)
                continue
            if _widens_exactly(value.dtype, out.dtype):
                widened_from[out.name] = value
            if value.dtype != out.dtype:
                fresh.add(out.name)  # (a conversion to another dtype copies)
        elif (Tags.ELEMENTWISE in bsym.sym.tags and bsym.sym.is_prim and bsym.sym.id not in _VIEWING_ELEMENTWISE
              and isinstance(bsym.output, TensorProxy)):
            fresh.add(bsym.output.name)
        bsyms.append(bsym)
    if not mapping:
        return trace
    output = output_with_proxies_replaced(trace.output, lambda x: mapping.get(id(x), x))
    return Trace.from_trace(trace, bsyms=remove_dead_code(bsyms, output), output=output,
                            provenance="conversions back to a widened value's dtype removed")


# torch's kernels for these compute a bfloat16 or float16 result in float32 and round it once:
# the same bits as converting the operands to float32, computing there and converting back. With
# a number operand only mul and div do so on a CPU (its vectorized add rounds the number first)
_NARROW_IN_ONE_KERNEL = frozenset({prims.add.id, prims.sub.id, prims.mul.id, prims.div.id, prims.neg.id})
_NARROW_WITH_NUMBERS = frozenset({prims.mul.id, prims.div.id})


def narrow_ops_on_torch(trace: Trace) -> Trace:
    """`trace` (planned) with each op that the torch executor computes in float32 between
    widenings of its operands and a narrowing of its result (bfloat16 -> float32, mul, ->
    bfloat16: how squall's elementwise ops and their derivatives compute low precision) run on
    the narrow operands instead, as eager runs it: torch's kernel computes in float32 and rounds
    once, so the result is the same bits, in one kernel where there were up to four."""
    returned = {p.name for p in flat_proxies(trace.output)}
    readers: dict[str, int] = {}
    for bsym in trace.bsyms:
        for p in bsym.input_proxies():
            readers[p.name] = readers.get(p.name, 0) + 1
    by_torch = lambda b: b.executor is not None and b.executor.name == "torch"
    widened_from: dict[str, TensorProxy] = {}
    computed: dict[str, tuple[int, BoundSymbol]] = {}  # a foldable op's result -> (index, the op)
    folded: dict[int, BoundSymbol] = {}
    dropped: set[int] = set()
    for i, bsym in enumerate(trace.bsyms):
        if Tags.SIDE_EFFECT in bsym.sym.tags:
            widened_from.clear()  # (the op moves to its narrowing: a write between may change its operands)
            computed.clear()
        if not by_torch(bsym):
            continue
        if bsym.sym.id == prims.convert_element_type.id and isinstance(bsym.args[0], TensorProxy):
            value, out = bsym.args[0], bsym.output
            if _widens_exactly(out.dtype, value.dtype) and value.name in computed and readers.get(value.name) == 1 and value.name not in returned:
                j, op = computed.pop(value.name)
                narrow = [widened_from[a.name] if isinstance(a, TensorProxy) else a for a in op.args]
                if all(not isinstance(a, TensorProxy) or a.dtype == out.dtype for a in narrow):
                    folded[i] = op.from_bsym(args=tuple(narrow), output=out)
                    dropped.add(j)
                    continue
            if _widens_exactly(value.dtype, out.dtype) and value.dtype in (torch.bfloat16, torch.float16):
                widened_from[out.name] = value
        elif (bsym.sym.id in _NARROW_IN_ONE_KERNEL and not bsym.kwargs and isinstance(bsym.output, TensorProxy)
              and any(isinstance(a, TensorProxy) for a in bsym.args)
              and all(a.name in widened_from if isinstance(a, TensorProxy) else bsym.sym.id in _NARROW_WITH_NUMBERS for a in bsym.args)):
            computed[bsym.output.name] = (i, bsym)
    if not folded:
        return trace
    bsyms = [folded.get(i, b) for i, b in enumerate(trace.bsyms) if i not in dropped]
    return Trace.from_trace(trace, bsyms=remove_dead_code(bsyms, trace.output), provenance="ops on float32 between narrow values run narrow (torch)")


def _widens_exactly(narrow: torch.dtype, wide: torch.dtype) -> bool:
    # every value of a narrower float type is one of a wider float type (float16 is not bfloat16's)
    return narrow.is_floating_point and wide.is_floating_point and wide.itemsize > narrow.itemsize and torch.promote_types(narrow, wide) == wide


def free_after_last_use(trace: Trace) -> Trace:
    """The execution trace: `trace` with a `del` after the last use of every intermediate and input.

    What the program returns and captured constants are never deleted.
    """
    keep = {p.name for p in flat_proxies(trace.output)} | set(trace.constants)
    last_use: dict[str, int] = {}
    for i, bsym in enumerate(trace.bsyms):
        for p in bsym.input_proxies():
            last_use[p.name] = i
    bsyms: list[BoundSymbol] = []
    for i, bsym in enumerate(trace.bsyms):
        bsyms.append(bsym)
        dying: dict[str, Any] = {}
        for p in bsym.input_proxies():
            if last_use.get(p.name) == i and p.name not in keep:
                dying.setdefault(p.name, p)
        for p in bsym.output_proxies():  # computed but never read
            if p.name not in last_use and p.name not in keep:
                dying.setdefault(p.name, p)
        if dying:
            bsyms.append(BoundSymbol(DEL, tuple(dying[n] for n in sorted(dying)), {}, None))
    names = sorted({b.executor.name for b in trace.bsyms if b.executor is not None})
    return Trace.from_trace(trace, bsyms=bsyms, provenance=f"execution trace ({', '.join(names)}): intermediates freed after their last use")
