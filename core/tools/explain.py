"""Explain: what the marketplace did with a program, and what is on the market.

`explain(fn, *args, **kwargs)` traces and plans `fn` as `squall.jit` would (nothing is
run or cached) and returns a report that prints as a table: each operation with its
line in the user's code, the executor that took it, the ones that declined and why,
fusion regions, and opaque fallbacks. `executors()` lists what is installed.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..compiler.pipeline import compile_program
from ..compiler.planner import Plan, RegionRecord
from ..frontend.tracing import argument_names, module_slots
from ..market.config import ExecutorPriority, resolve_executors
from ..market.fusion import LEFT_OUT  # not from squall.extend: tools come before the public face
from ..market.plugins import Marketplace, default_marketplace
from ..proxies import type_string
from ..runtime.aliasing import describe_path
from ..runtime.entry import entry_guards
from ..runtime.jit import JittedFunction, JittedModule, jitted_state
from ..symbol import Tags

__all__ = ["explain", "executors", "ExplainReport", "OperationRow", "ExecutorRow", "ExecutorTable"]


def _table(header: list[str], rows: list[list[str]], *, max_width: int = 60) -> str:
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


@dataclass
class OperationRow:
    """One operation of the program (depth 0) or of a decomposition (depth > 0)."""

    op: str
    depth: int
    executor: str | None  # None: decomposed into the rows below it
    declined: list[tuple[str, str]]
    output: str
    source: tuple[str, int, str] | None = None
    region: int | None = None
    opaque: bool = False

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.source[0])}:{self.source[1]}" if self.source else ""


@dataclass
class ExplainReport:
    """The planning decisions for one program, printable as a table; `to_dict()` for JSON."""

    function: str
    executors: list[str]
    config_source: str
    per_op: dict[str, list[str]]
    rows: list[OperationRow]
    regions: list[RegionRecord]
    unavailable: dict[str, str]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    plan: Plan | None = field(default=None, repr=False)
    # where squall differentiated the program: its backward's operations and regions
    backward_rows: list[OperationRow] = field(default_factory=list)
    backward_regions: list[RegionRecord] = field(default_factory=list)
    # for a jitted function: its background upgrades so far (squall.runtime.tiers), one per signature
    upgrades: list[str] = field(default_factory=list)
    # for a jitted module that split (squall.runtime.split): what runs eagerly, why, and its compiled children
    split: str | None = None
    # the guards the compiled program would put on later calls, one a line (squall.guard_set)
    guards: list[str] = field(default_factory=list)
    # for a jitted function: whether its most recent entry fits this call, and if not, which guard fails
    last_entry: str | None = None
    # for a jitted function: the argument dimensions it compiled symbolic from its first call because
    # earlier jits of the same code, in this process or an earlier one, learned they vary (squall.runtime.dims_profile)
    remembered: list[str] = field(default_factory=list)

    @property
    def opaque(self) -> list[str]:
        return sorted({r.op.removeprefix("opaque.") for r in self.rows if r.opaque})

    def taken_by(self, op: str) -> list[str | None]:
        """The executor of every call of `op` (None where it was decomposed)."""
        return [r.executor for r in self.rows if r.op == op]

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "executors": self.executors,
            "config_source": self.config_source,
            "per_op": self.per_op,
            "operations": [_row_dict(r) for r in self.rows],
            "regions": [asdict(r) for r in self.regions],
            "backward_operations": [_row_dict(r) for r in self.backward_rows],
            "backward_regions": [asdict(r) for r in self.backward_regions],
            "unavailable": self.unavailable,
            "opaque": self.opaque,
            "errors": self.errors,
            "warnings": self.warnings,
            "upgrades": self.upgrades,
            "split": self.split,
            "guards": self.guards,
            "last_entry": self.last_entry,
            "remembered": self.remembered,
        }

    def __str__(self) -> str:
        order = " > ".join(self.executors)
        lines = [f"squall.explain({self.function}): executors {order} (from {self.config_source})"]
        for op, names in self.per_op.items():
            lines.append(f"  for {op}: {' > '.join(names)}")
        lines.extend(_operations_table(self.rows, self.regions))
        if self.backward_rows:
            lines.append("backward (squall's gradient transform, planned on the same marketplace):")
            lines.extend(_operations_table(self.backward_rows, self.backward_regions))
        # the table cuts long cells: each reason a fusion executor gave for handing calls back, whole
        handed_back: dict[tuple[str, str], list[str]] = {}
        for r in self.rows:
            for n, why in r.declined:
                if why.startswith(f"{LEFT_OUT}: "):
                    handed_back.setdefault((n, why.removeprefix(f"{LEFT_OUT}: ")), []).append(r.op)
        for (name, why), ops in handed_back.items():
            counts = {op: ops.count(op) for op in ops}
            listed = ", ".join(op if k == 1 else f"{op} x{k}" for op, k in counts.items())
            lines.append(f"handed back by {name} ({listed}): {why}")
        lines.append(f"opaque fallbacks: {', '.join(self.opaque) or 'none'}")
        for upgrade in self.upgrades:
            lines.append(f"background upgrade of {upgrade}")
        if self.split is not None:
            lines.append(f"split: {self.split}")
        if self.remembered:
            lines.append("symbolic from the first call, as earlier jits of this code learned (squall.runtime.dims_profile; "
                         f"$SQUALL_REMEMBER_DYNAMIC=0 starts static): {'; '.join(self.remembered)}")
        lines.append(f"guards on later calls: {len(self.guards)}")
        lines.extend(f"  {guard}" for guard in self.guards)
        if self.last_entry is not None:
            lines.append(f"the last compiled entry: {self.last_entry}")
        for name, why in self.unavailable.items():
            lines.append(f"passed over: {name} ({why})")
        for message in self.errors + self.warnings:
            lines.append(f"note: {message}")
        return "\n".join(lines)


def _row_dict(r: OperationRow) -> dict[str, Any]:
    return {
        "op": r.op,
        "depth": r.depth,
        "executor": r.executor,
        "declined": [{"executor": n, "reason": why} for n, why in r.declined],
        "output": r.output,
        "source": {"file": r.source[0], "line": r.source[1], "text": r.source[2]} if r.source else None,
        "region": r.region,
        "opaque": r.opaque,
    }


def _operations_table(rows: list[OperationRow], regions: list[RegionRecord]) -> list[str]:
    body = []
    for r in rows:
        taken = r.executor if r.executor is not None else "(decomposed)"
        if r.region is not None:
            taken += f" [region {r.region}]"
        declined = "; ".join(f"{n}: {why}" for n, why in r.declined)
        text = r.source[2] if r.source and r.depth == 0 else ""
        body.append([r.where if r.depth == 0 else "", "  " * r.depth + r.op, taken, declined, text])
    lines = [_table(["where", "operation", "taken by", "declined (why)", "source"], body)]
    for i, region in enumerate(regions):
        reused = ", reusing an identical region's compilation" if region.reused else ""
        lines.append(f"region {i} ({region.executor}): {len(region.ops)} ops, {len(region.inputs)} inputs -> "
                     f"{len(region.outputs)} outputs{reused}: {', '.join(region.ops)}")
    return lines


def explain(fn: Callable, *args: Any, **kwargs: Any) -> ExplainReport:
    """How squall would run `fn(*args, **kwargs)`: traced and planned, not run.

    `fn` is a function, an nn.Module, or the result of `squall.jit` (whose executor
    list is then used; otherwise the configuration in force is). A `squall.jit` result called
    with no inputs reports the compilation its most recent call made, without tracing again.
    """
    if isinstance(fn, JittedModule) or hasattr(fn, "__squall__"):
        fn = jitted_state(fn)
    upgrades, split, last_entry, options, compilation, remembered = [], None, None, {}, None, []
    if isinstance(fn, JittedFunction):
        # traced as the jitted function would trace this call: its symbolic dimensions and run-time numbers
        options = dict(dims=dict(fn._dims.dims), dynamic=frozenset(fn._numbers.paths))
        target, module, priority = fn.fn, fn.module, fn.executors
        upgrades = [str(u) for u in fn._upgrades.values()]
        split = fn.cache_info().split
        positional = [path[1] + 1 for path in fn._dims.remembered if path[0] == "args"]
        names = argument_names(fn.module.forward if fn.module is not None else fn.fn, max(positional, default=0))
        remembered = [f"{describe_path(path, names, [])} dimensions {', '.join(map(str, sorted(dims)))}"
                      for path, dims in fn._dims.remembered.items()]
        if not args and not kwargs and fn.last_entry is not None:
            # no inputs given: the compilation its last call made (a graph torch.compile handed to
            # squall's backend, whose inputs the caller never sees); no call to check it against
            compilation = fn.last_entry.compilation
        else:
            last_entry = _fits(fn, args, kwargs)
    else:
        target, module, priority = fn, fn if isinstance(fn, torch.nn.Module) else None, resolve_executors(None)
    caught: list[warnings.WarningMessage] = []
    if compilation is None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compilation = compile_program(target, args, kwargs, executors=priority, module=module, generate_code=False, **options)
    execution = compilation.plan
    backward = compilation.backward.plan if compilation.backward is not None else None
    per_op = {op: [ex.name for ex in exs] for op, exs in getattr(priority, "per_op", {}).items()}
    name = getattr(target, "__name__", type(target).__name__)
    return ExplainReport(
        name,
        [ex.name for ex in priority],
        priority.source if isinstance(priority, ExecutorPriority) else "jit(executors=...)",
        per_op,
        _rows(execution),
        execution.regions,
        execution.unavailable,
        list(execution.errors) + (list(backward.errors) if backward else []),
        sorted({str(w.message) for w in caught}),
        execution,
        _rows(backward) if backward else [],
        backward.regions if backward else [],
        upgrades,
        str(split) if split is not None else None,
        _guards(compilation, target, module),
        last_entry,
        remembered,
    )


def _guards(compilation: Any, target: Callable, module: torch.nn.Module | None) -> list[str]:
    """The compilation's guard set in words, as the cache would complete it (squall.runtime.entry)."""
    names = argument_names(module.forward if module is not None else target, len(compilation.bindings))
    tensors = [f"{kind} {path!r}" for kind, path in _module_tensor_names(module)]
    describe = lambda path: describe_path(path, names, tensors)
    return entry_guards(compilation, alias=True, takes_params=module is not None, describe=describe).describe()


def _module_tensor_names(module: torch.nn.Module | None) -> list[tuple[str, str]]:
    if module is None:
        return []
    slots, paths = module_slots(module)
    return [("parameter" if isinstance(store[k], torch.nn.Parameter) else "buffer", path) for (store, k), path in zip(slots, paths)]


def _fits(state: JittedFunction, args: tuple, kwargs: dict) -> str | None:
    """Whether `state`'s most recent entry fits a call with these arguments; which guard fails if not."""
    if state.last_entry is None:
        return None
    call = ([store[k] for store, k in state._slots], *args) if state.module is not None else args
    guards = state._guards(state.last_entry.compilation)
    try:
        failure = guards.explain(call, kwargs)
    except Exception as e:  # noqa: BLE001 - a layout that changed: say so rather than fail the report
        return f"cannot be checked against this call ({type(e).__name__}: {e})"
    return "fits this call" if failure is None else f"does not fit this call: {failure}"


def _rows(plan: Plan) -> list[OperationRow]:
    return [
        OperationRow(
            d.bsym.sym.id,
            d.depth,
            d.executor,
            list(d.declined),
            ", ".join(type_string(p) for p in d.bsym.output_proxies()),
            d.bsym.source,
            d.region,
            Tags.OPAQUE in d.bsym.sym.tags,
        )
        for d in plan.decisions
    ]


@dataclass
class ExecutorRow:
    """One installed executor."""

    name: str
    version: str
    distribution: str
    plugin: str
    available: bool
    reason: str
    rank: int
    default: bool
    ops: list[str]


@dataclass
class ExecutorTable:
    """What is installed: executors with availability and claims, and plugins that failed to load."""

    rows: list[ExecutorRow]
    load_errors: list[str]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> ExecutorRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"executors": [asdict(r) for r in self.rows], "load_errors": self.load_errors}

    def __str__(self) -> str:
        body = [
            [r.name, r.version or "-", r.distribution or "-", "yes" if r.available else f"no: {r.reason}",
             str(len(r.ops)), str(r.rank), "yes" if r.default else "only when named"]
            for r in self.rows
        ]
        text = _table(["executor", "version", "distribution", "available", "ops", "rank", "default"], body, max_width=70)
        for error in self.load_errors:
            text += f"\nnot loaded: {error}"
        return text


def executors(marketplace: Marketplace | None = None) -> ExecutorTable:
    """The installed executors (name, version, distribution, availability, rank, operations claimed)."""
    market = marketplace if marketplace is not None else default_marketplace()
    rows = []
    for ex in market.executors():
        availability = ex.availability()
        rows.append(ExecutorRow(
            ex.name, ex.version, ex.distribution, market.plugin_of(ex.name), bool(availability),
            availability.reason, ex.default_rank, market.in_defaults(ex.name), ex.claimed_ops(),
        ))
    return ExecutorTable(rows, [str(e) for e in market.load_errors])
