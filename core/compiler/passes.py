"""Passes over traces that every compilation runs: dead code removal and freeing intermediates.

Each takes a trace and returns a new one; the trace it was given is left as it was.
"""
from __future__ import annotations

from typing import Any

from ..symbol import DEL, BoundSymbol, Tags, flat_proxies
from ..trace import Trace

__all__ = ["remove_dead_code", "dead_code_removed", "free_after_last_use"]


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
