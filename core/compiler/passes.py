"""Passes over traces that every compilation runs: dead code removal, write-backs folded into
the calls that compute them, and freeing intermediates.

Each takes a trace and returns a new one; the trace it was given is left as it was.
"""
from __future__ import annotations

from typing import Any

from .. import prims
from ..proxies import TensorProxy
from ..symbol import DEL, BoundSymbol, Tags, flat_proxies
from ..trace import Trace
from .checking import needs_check

__all__ = ["remove_dead_code", "dead_code_removed", "write_backs_folded", "free_after_last_use"]


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
    updated by its kernel, as eager's, not copied in after it (two copies per batch norm).

    Only where nothing reads the input between that call and the write-back, the result has no
    reader but the write-back, their dtypes agree, and no guard or checked call follows (either
    can stop the run and run the call again, which must find its inputs as they were)."""
    bsyms = trace.bsyms
    returned = {p.name for p in flat_proxies(trace.output)}
    readers: dict[str, list[int]] = {}
    for i, bsym in enumerate(bsyms):
        for p in bsym.input_proxies():
            readers.setdefault(p.name, []).append(i)
    # a failed guard, or a checked call's fault, stops the run and runs the call again (another
    # variant, a replan): it must find the inputs unwritten, so nothing before one is folded
    last_stop = max((i for i, b in enumerate(bsyms) if Tags.BARRIER in b.sym.tags or needs_check(b)), default=-1)

    def write_back_of(i: int, result: Any, target: Any) -> int | None:
        """The index of the write-back of call i's `result` into `target`, where it may be folded."""
        if not (isinstance(result, TensorProxy) and isinstance(target, TensorProxy)) or result.name in returned:
            return None
        uses = readers.get(result.name, [])
        if len(uses) != 1 or bsyms[uses[0]].sym.id != prims.copy_.id:
            return None
        dst, src = bsyms[uses[0]].args
        if dst.name != target.name or src.name != result.name or result.dtype != target.dtype:
            return None
        return None if any(i < r < uses[0] for r in readers.get(target.name, ())) else uses[0]

    folded: dict[int, BoundSymbol] = {}
    dropped: set[int] = set()
    for i, bsym in enumerate(bsyms):
        form = bsym.executor.in_place_form(bsym) if bsym.executor is not None and i > last_stop else None
        if form is None:
            continue
        outputs = bsym.output if isinstance(bsym.output, tuple) else (bsym.output,)
        copies = [write_back_of(i, outputs[k], bsym.args[a]) for k, a in form.writes.items()]
        if None in copies:
            continue
        kept = tuple(o for k, o in enumerate(outputs) if k not in form.writes)
        output = kept if len(kept) > 1 else (kept[0] if kept else None)
        folded[i] = BoundSymbol(form.sym, bsym.args, bsym.kwargs, output, source=bsym.source, executor=bsym.executor,
                                impl=form.impl, call_keywords=bsym.call_keywords, grad_enabled=bsym.grad_enabled)
        dropped.update(copies)
    if not folded:
        return trace
    bsyms = [folded.get(i, b) for i, b in enumerate(bsyms) if i not in dropped]
    return Trace.from_trace(trace, bsyms=bsyms, provenance="write-backs folded into the calls that compute them")


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
