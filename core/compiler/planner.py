"""The planner: hands every operation to the best executor that will take it.

For each top-level call, in order, executors are asked by rank; the first that
implements the operation and whose checker accepts the arguments wins. If nobody
takes it, the call is replaced by its decomposition and each piece is offered the
same way, down to prims. Fusion executors then group what they claimed into
regions, and a final pass hands whatever a fusion pass left out to the other
executors (torch last). Every decision is recorded.

Planning calls no hooks: executors were collected when the marketplace was built,
and asking one is a dictionary lookup plus, where it has one, its checker.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

from ..market.executor import UNAVAILABLE, Executor, Implementation
from ..market.fusion import FUSION_REGION, LEFT_OUT, FusionExecutor, declines_symbolic, pace
from ..proxies import tracing
from ..symbol import BoundSymbol, flat_proxies
from ..trace import Trace
from .passes import remove_dead_code

__all__ = ["PlanDecision", "Plan", "RegionRecord", "plan", "PlanningError"]


class PlanningError(RuntimeError):
    """No executor can run an operation (only possible when the torch executor is left out)."""


@dataclass
class PlanDecision:
    """What happened to one operation: who took it, and why each executor before it declined."""

    bsym: BoundSymbol
    depth: int  # 0 for a call in the program, 1 for a piece of its decomposition, ...
    executor: str | None  # None: decomposed
    declined: list[tuple[str, str]] = field(default_factory=list)  # (executor name, reason)
    region: int | None = None  # index into Plan.regions when a fusion region runs it

    @property
    def decomposed(self) -> bool:
        return self.executor is None


@dataclass
class RegionRecord:
    """One fusion region in the plan: who fused it, which operations, and whether it reused a compilation."""

    executor: str
    ops: list[str]
    inputs: list[str]
    outputs: list[str]
    reused: bool  # an identical region earlier in this plan (or an earlier plan) was compiled already


@dataclass
class Plan:
    """The decisions that led to a planned trace (attached to it as `trace.plan`)."""

    decisions: list[PlanDecision]
    unavailable: dict[str, str]  # executor name -> why it was passed over
    regions: list[RegionRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # plugin faults met while planning (checkers, fusion passes)
    executors: tuple[str, ...] = ()  # the priority list it was planned with


def _transform(ex: Executor, impl: Implementation, bsym: BoundSymbol, trace: Trace) -> list[BoundSymbol]:
    """Run an execution transform on proxies; its recorded calls replace `bsym`."""
    ctx = trace.context
    with tracing(ctx):
        ctx.scopes.append([])
        try:
            out = impl.execution_transform(*bsym.args, **bsym.kwargs)
        finally:
            recorded = ctx.scopes.pop()
    # the transform's outputs are the proxies the rest of the program uses
    outputs = {id(new): old for new, old in zip(flat_proxies(out), bsym.output_proxies())}
    result = []
    for r in recorded:
        r_impl = ex.implementation_for(r.sym)
        if r_impl is None or r_impl.impl is None:
            raise PlanningError(f"executor {ex.name}'s transform for {bsym.sym.id} called {r.sym.id}, which it does not implement")
        result.append(r.swap_proxies(outputs).from_bsym(source=bsym.source, executor=ex, impl=r_impl.impl))
    return result


class _Planner:
    """One planning run: the usable executors, the decisions, the calls planned so far."""

    def __init__(self, trace: Trace, executors: Sequence[Executor], per_op: Mapping[str, Sequence[Executor]], autograd: bool):
        self.trace = trace
        self.unavailable: dict[str, str] = {}
        self.decisions: list[PlanDecision] = []
        self.errors: list[str] = []
        self.decision_of: dict[int, PlanDecision] = {}  # id(planned bsym) -> its decision
        self.per_op = {op: self._filter(exs, autograd) for op, exs in per_op.items()}
        self.executors = self._filter(executors, autograd)

    def _filter(self, executors: Sequence[Executor], autograd: bool) -> list[tuple[Executor, str]]:
        """Each executor with "" when usable, or why not."""
        out = []
        for ex in executors:
            availability = ex.availability()
            if not availability:
                why = availability.reason or "unavailable"
            elif autograd and not ex.supports_autograd:
                why = "gradients are required and it does not support autograd"
            else:
                why = ""
            if why:
                self.unavailable[ex.name] = why
            out.append((ex, why))
        return out

    def claim(self, bsym: BoundSymbol, depth: int, out: list[BoundSymbol], *, fusion: bool = True) -> None:
        decision = PlanDecision(bsym, depth, None)
        self.decisions.append(decision)
        self._claim(bsym, decision, out, fusion=fusion)

    def _claim(self, bsym: BoundSymbol, decision: PlanDecision, out: list[BoundSymbol], *, fusion: bool) -> None:
        for ex, why in self.per_op.get(bsym.sym.id, self.executors):
            if not fusion and isinstance(ex, FusionExecutor):
                continue
            if why:
                # an unavailable executor only matters for what it would have taken
                known = ex.implementation_for(bsym.sym) is not None
                decision.declined.append((ex.name, f"{UNAVAILABLE}: {why}" if known else "not implemented"))
                continue
            impl, reason = ex.offer(bsym) if not isinstance(ex, FusionExecutor) else declines_symbolic(ex, bsym) or ex.offer(bsym)
            if impl is None:
                decision.declined.append((ex.name, reason))
                if reason.startswith("checker raised"):
                    self.errors.append(f"{ex.name}'s checker for {bsym.sym.id} raised: {reason.removeprefix('checker raised ')}")
                continue
            decision.executor = ex.name
            if impl.execution_transform is not None:
                planned = _transform(ex, impl, bsym, self.trace)
            else:
                planned = [bsym.with_executor(ex, impl.impl)]
            for p in planned:
                self.decision_of[id(p)] = decision
            out.extend(planned)
            return
        if not bsym.subsymbols:
            if bsym.sym.is_prim:
                raise PlanningError(
                    f"no executor implements {bsym.sym.id}; asked: "
                    + ", ".join(f"{n} ({r})" for n, r in decision.declined)
                )
            return  # an op with nothing to compute (it returned its input)
        for sub in bsym.subsymbols:
            self.claim(sub, decision.depth + 1, out, fusion=fusion)

    def fuse(self, bsyms: list[BoundSymbol], regions: list[RegionRecord]) -> list[BoundSymbol]:
        seen_impls: set[int] = set()
        recorded: set[int] = set()
        for ex, why in self.executors:
            if why or not isinstance(ex, FusionExecutor):
                continue
            before = len(ex.compile_errors)
            compiled_before = {id(fn) for fn in ex._compiled.values()}
            try:
                fused = ex.fusion_pass(bsyms, self.trace.output)
            except Exception as e:  # noqa: BLE001 - a failed fusion pass leaves its calls to the final pass
                self.errors.append(f"{ex.name}'s fusion pass raised {type(e).__name__}: {e}")
                continue
            self.errors.extend(f"{ex.name}: {msg}" for msg in ex.compile_errors[before:])
            for b in fused:
                if FUSION_REGION not in b.sym.tags or b.executor is not ex or id(b) in recorded:
                    continue
                recorded.add(id(b))
                inputs = [p.name for p in b.input_proxies()]
                outputs = [p.name for p in b.output_proxies()]
                reused = id(b.impl) in seen_impls or id(b.impl) in compiled_before
                regions.append(RegionRecord(ex.name, [m.sym.id for m in b.subsymbols], inputs, outputs, reused))
                seen_impls.add(id(b.impl))
                for m in b.subsymbols:
                    if id(m) in self.decision_of:
                        self.decision_of[id(m)].region = len(regions) - 1
            bsyms = fused
        return bsyms

    def pick_up(self, bsyms: list[BoundSymbol]) -> list[BoundSymbol]:
        """The final pass: calls a fusion executor claimed but left out of its regions go to the others."""
        out: list[BoundSymbol] = []
        for b in bsyms:
            if not (isinstance(b.executor, FusionExecutor) and b.impl is None):
                out.append(b)
                continue
            decision = self.decision_of.get(id(b)) or PlanDecision(b, 0, None)
            why = b.executor.left_out_reason(b)
            decision.declined.append((b.executor.name, f"{LEFT_OUT}: {why}" if why else f"claimed it, but its {LEFT_OUT}"))
            decision.executor = None
            unclaimed = b.from_bsym(executor=None, impl=None)
            self._claim(unclaimed, decision, out, fusion=False)
        return out


def plan(
    trace: Trace,
    executors: Sequence[Executor],
    *,
    autograd: bool = False,
    per_op: Mapping[str, Sequence[Executor]] | None = None,
) -> Trace:
    """The planned trace: every operation of `trace` assigned to an executor from `executors`
    (highest priority first), fusion regions formed, dead code removed; `.plan` holds the decisions.

    `per_op` maps operation ids to their own priority lists (defaults to the `per_op` of
    an `ExecutorPriority` from `squall.market.config`). With `autograd`, only executors PyTorch's
    autograd can differentiate through are used.
    """
    if per_op is None:
        per_op = getattr(executors, "per_op", None) or {}
    planner = _Planner(trace, executors, per_op, autograd)
    out: list[BoundSymbol] = []
    for bsym in trace.bsyms:
        pace()  # (in the background upgrade thread: its share of the interpreter stays small)
        planner.claim(bsym, 0, out)
    out = remove_dead_code(out, trace.output)
    regions: list[RegionRecord] = []
    fusers = {id(ex): ex for exs in [planner.executors, *planner.per_op.values()] for ex, _ in exs if isinstance(ex, FusionExecutor)}
    with ExitStack() as held:
        # a fusion executor keeps per-pass state (the calls it handed back, its compiled regions)
        # and squall.runtime.tiers plans in a background thread: one pass per executor at a time, until
        # the final pass has read that state; locks taken in one order, so no two plans deadlock
        for key in sorted(fusers):
            held.enter_context(fusers[key].pass_lock)
        live = out
        if any(isinstance(ex, FusionExecutor) for ex, why in planner.executors if not why):
            out = planner.fuse(out, regions)
        out = planner.pick_up(out)
    if len(out) != len(live) or any(a is not b for a, b in zip(out, live)):
        out = remove_dead_code(out, trace.output)  # (what fusion or the final pass changed; the calls as claimed are live)
    report = Plan(planner.decisions, planner.unavailable, regions, planner.errors, tuple(ex.name for ex in executors))
    used = [ex.name for ex, why in planner.executors if not why]
    fused = f", {len(regions)} fusion region{'s' * (len(regions) != 1)}" if regions else ""
    return Trace.from_trace(trace, bsyms=out, provenance=f"planned for {', '.join(used)}{fused}; dead code removed", plan=report)
