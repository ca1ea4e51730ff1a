"""Executors kept out of an entry after a fault in a checked call (`squall.compiler.checking`).

An entry's record keeps `(executor, operations)` pairs (`CacheEntry.exclusions`; no
operations: the whole entry); the entry is compiled again under the priority list with
each pair kept apart (`excluding`), for the operations the executor failed on
(`ops_to_exclude`).
"""
from __future__ import annotations

from ..compiler.checking import ExecutorFault
from ..market.config import ExecutorPriority
from .entry import CompiledEntry

__all__ = ["excluding", "ops_to_exclude"]


def ops_to_exclude(compiled: CompiledEntry | None, fault: ExecutorFault) -> tuple[str, ...]:
    """The program's operations the executor must not take: those it failed running, or
    where it ran its own operations (an execution transform's), the ones it took there."""
    own = [op for op in fault.ops if op.startswith(f"{fault.executor}.")]
    if not own:
        return fault.ops
    plan = compiled.compilation.plan if compiled is not None else None
    taken = [
        d.bsym.sym.id
        for d in (plan.decisions if plan is not None else ())
        if d.executor == fault.executor and (fault.source is None or d.bsym.source == fault.source)
    ]
    return tuple(dict.fromkeys([op for op in fault.ops if op not in own] + taken))


def excluding(executors: ExecutorPriority, exclusions: list[tuple[str, tuple[str, ...]]]) -> ExecutorPriority:
    """`executors` with each (executor, operations) pair kept apart (no operations: everywhere)."""
    everywhere = {name for name, ops in exclusions if not ops}
    base = [ex for ex in executors if ex.name not in everywhere]
    per_op = {op: list(exs) for op, exs in (getattr(executors, "per_op", None) or {}).items()}
    for name, ops in exclusions:
        for op in ops:
            per_op[op] = [ex for ex in per_op.get(op, base) if ex.name != name]
    per_op = {op: [ex for ex in exs if ex.name not in everywhere] for op, exs in per_op.items()}
    source = getattr(executors, "source", "jit(executors=...)")
    return ExecutorPriority(base, per_op=per_op, source=f"{source}, replanned after executor faults")
