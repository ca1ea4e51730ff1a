"""The planner: hands every operation to the best executor that will take it.

For each top-level call, in order, executors are asked by rank; the first that
implements the operation and whose checker accepts the arguments wins. If nobody
takes it, the call is replaced by its decomposition and each piece is offered the
same way, down to prims. Fusion executors then group what they claimed. Every
decision is recorded.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from squall.extend import Executor, FusionExecutor, Implementation
from squall.proxies import tracing
from squall.symbol import BoundSymbol, Tags, flat_proxies
from squall.trace import Trace

__all__ = ["PlanDecision", "Plan", "plan", "PlanningError"]


class PlanningError(RuntimeError):
    """No executor can run an operation (only possible when the torch executor is left out)."""


@dataclass
class PlanDecision:
    """What happened to one operation: who took it, and why each executor before it declined."""

    bsym: BoundSymbol
    depth: int  # 0 for a call in the program, 1 for a piece of its decomposition, ...
    executor: str | None  # None: decomposed
    declined: list[tuple[str, str]] = field(default_factory=list)  # (executor name, reason)

    @property
    def decomposed(self) -> bool:
        return self.executor is None


@dataclass
class Plan:
    """The calls to run, each bound to an executor, and the decisions that led there."""

    bsyms: list[BoundSymbol]
    decisions: list[PlanDecision]
    unavailable: dict[str, str]  # executor name -> why it was passed over


def _ask(ex: Executor, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
    impl = ex.implementation_for(bsym.sym)
    if impl is None:
        return None, "not implemented"
    if impl.checker is not None:
        try:
            accepted = impl.checker(*bsym.args, **bsym.kwargs)
        except Exception as e:  # noqa: BLE001 - a plugin's fault must not break compilation
            return None, f"checker raised {type(e).__name__}: {e}"
        if not accepted:
            return None, "checker declined"
    return impl, ""


def _transform(ex: Executor, impl: Implementation, bsym: BoundSymbol, trace: Trace) -> list[BoundSymbol]:
    """Run an execution transform on proxies; its recorded calls replace `bsym`."""
    ctx = trace.context
    with tracing(ctx):
        ctx.scopes.append([])
        try:
            out = impl.execution_transform(*bsym.args, **bsym.kwargs)
        finally:
            recorded = ctx.scopes.pop()
    # the transform's outputs take the names the rest of the program uses
    for new, old in zip(flat_proxies(out), bsym.output_proxies()):
        new.name = old.name
    result = []
    for r in recorded:
        r_impl = ex.implementation_for(r.sym)
        if r_impl is None or r_impl.impl is None:
            raise PlanningError(f"executor {ex.name}'s transform for {bsym.sym.id} called {r.sym.id}, which it does not implement")
        result.append(r.with_executor(ex, r_impl.impl))
    return result


def plan(trace: Trace, executors: Sequence[Executor], *, autograd: bool = False) -> Plan:
    """Assign every operation of `trace` to an executor from `executors` (highest priority first).

    With `autograd`, only executors PyTorch's autograd can differentiate through are asked.
    """
    usable: list[Executor] = []
    unavailable: dict[str, str] = {}
    for ex in executors:
        availability = ex.is_available()
        if not availability:
            unavailable[ex.name] = availability.reason or "unavailable"
        elif autograd and not ex.supports_autograd:
            unavailable[ex.name] = "gradients are required and it does not support autograd"
        else:
            usable.append(ex)

    out: list[BoundSymbol] = []
    decisions: list[PlanDecision] = []

    def claim(bsym: BoundSymbol, depth: int) -> None:
        decision = PlanDecision(bsym, depth, None)
        decisions.append(decision)
        for ex in usable:
            impl, reason = _ask(ex, bsym)
            if impl is None:
                decision.declined.append((ex.name, reason))
                continue
            decision.executor = ex.name
            if impl.execution_transform is not None:
                out.extend(_transform(ex, impl, bsym, trace))
            else:
                out.append(bsym.with_executor(ex, impl.impl))
            return
        if not bsym.subsymbols:
            if bsym.sym.is_prim:
                raise PlanningError(
                    f"no executor implements {bsym.sym.id}; asked: "
                    + ", ".join(f"{n} ({r})" for n, r in decision.declined)
                )
            return  # an op with nothing to compute (it returned its input)
        for sub in bsym.subsymbols:
            claim(sub, depth + 1)

    for bsym in trace.bsyms:
        claim(bsym, 0)
    for ex in usable:
        if isinstance(ex, FusionExecutor):
            out = ex.fusion_pass(out)
    return Plan(remove_dead_code(out, trace.output), decisions, unavailable)


def remove_dead_code(bsyms: list[BoundSymbol], output) -> list[BoundSymbol]:
    """Drop calls whose results nobody uses (side effects are always kept)."""
    live = {p.name for p in flat_proxies(output)}
    kept = []
    for bsym in reversed(bsyms):
        if Tags.SIDE_EFFECT in bsym.sym.tags or any(p.name in live for p in bsym.output_proxies()):
            kept.append(bsym)
            live.update(p.name for p in bsym.input_proxies())
    kept.reverse()
    return kept
