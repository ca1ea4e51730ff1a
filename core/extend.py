"""What an executor is: the objects a plugin builds to put implementations on the market.

An `OperatorExecutor` maps symbol ids (ltorch ops, prims, custom operations, or its own
executor-level symbols) to an `Implementation`: the callable run on real tensors, a
checker run on proxies at compile time, and optionally an execution transform that
rewrites the call into the executor's own symbols. A `FusionExecutor` claims operations
and supplies `compile_region`; the region-forming algorithm is shared (`form_regions`).
`add_operator_executor` builds an operator executor from plain code, without a package.
"""
from __future__ import annotations

import functools
import heapq
import importlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from . import ltorch, prims
from .hookspecs import hookimpl
from .plugins import CustomOperation, Marketplace, OperationRegistry, default_marketplace
from .proxies import TensorProxy, current_context
from .symbol import BoundSymbol, Symbol, flat_proxies

__all__ = [
    "Availability",
    "Implementation",
    "Executor",
    "OperatorExecutor",
    "FusionExecutor",
    "FusionRegion",
    "Declined",
    "CustomOperation",
    "OperationRegistry",
    "form_regions",
    "resolve_operation",
    "add_operator_executor",
    "register_executor",
    "hookimpl",
    "NOT_IMPLEMENTED",
    "CHECKER_DECLINED",
    "FUSION_REGION",
    "LEFT_OUT",
]

# why an executor did not take an operation; reasons start with one of these
NOT_IMPLEMENTED = "not implemented"
CHECKER_DECLINED = "checker declined"
CHECKER_RAISED = "checker raised"
UNAVAILABLE = "unavailable"
FUSION_REGION = "fusion_region"  # the tag on a fusion region's symbol
LEFT_OUT = "fusion pass left it out"  # a fusion executor claimed a call, then handed it back


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:4])


@dataclass(frozen=True)
class Availability:
    """Whether an executor can run here, and if not, why (library missing, no device, ...)."""

    available: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.available

    @classmethod
    def of_library(cls, module: str, min_version: str = "", *, distribution: str | None = None) -> Availability:
        """Available when `module` is importable and (its distribution's) version is at least `min_version`."""
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return cls(False, f"library {module!r} is not installed")
        if min_version:
            try:
                version = importlib.metadata.version(distribution or module)
            except importlib.metadata.PackageNotFoundError:
                version = str(getattr(importlib.import_module(module), "__version__", ""))
            if _version_tuple(version) < _version_tuple(min_version):
                return cls(False, f"{module} {version or '(unknown version)'} is older than the required {min_version}")
        return cls(True)

    @classmethod
    def of_cuda(cls) -> Availability:
        """Available when PyTorch sees a CUDA device."""
        return cls(True) if torch.cuda.is_available() else cls(False, "no CUDA device")


@dataclass(frozen=True)
class Implementation:
    """One executor's offer for one operation."""

    impl: Callable | None
    checker: Callable[..., bool] | None = None
    execution_transform: Callable | None = None


@functools.cache
def _known_symbols() -> dict[str, Symbol]:
    return {**prims.all_prims(), **ltorch.names_to_symbols()}


def resolve_operation(name: str, operations: OperationRegistry | None = None) -> Symbol:
    """The symbol a name stands for: a torch name ("torch.nn.functional.softmax"), an ltorch or
    prim id, or a custom operation's id in `operations`. An unknown name is a `KeyError`."""
    sym = _known_symbols().get(name)
    if sym is not None:
        return sym
    if operations is not None and name in operations:
        return operations.get(name).symbol
    import difflib  # only on the error path

    close = difflib.get_close_matches(name, list(_known_symbols()) + [op.id for op in operations or ()], n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise KeyError(f"{name!r} names no operation squall knows (torch ops, prims, custom operations){hint}")


def _symbol_id(op: Symbol | CustomOperation | str) -> str:
    if isinstance(op, (Symbol, CustomOperation)):
        return op.id
    sym = _known_symbols().get(op)
    return sym.id if sym is not None else op


def _run_checker(impl: Implementation, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
    if impl.checker is None:
        return impl, ""
    try:
        accepted = impl.checker(*bsym.args, **bsym.kwargs)
    except Exception as e:  # noqa: BLE001 - a plugin's fault must not break compilation
        return None, f"{CHECKER_RAISED} {type(e).__name__}: {e}"
    return (impl, "") if accepted else (None, CHECKER_DECLINED)


class Executor:
    """An executor: a named vendor of implementations, with a rank and an availability.

    `requires` lists libraries it needs ("apex", "triton>=2.1"); `needs_cuda` a CUDA
    device; `default=False` keeps it out of the default list (used only when named).
    """

    def __init__(
        self,
        name: str,
        *,
        version: str = "",
        distribution: str = "",
        default_rank: int = 100,
        supports_autograd: bool = False,
        default: bool = True,
        requires: Sequence[str] = (),
        needs_cuda: bool = False,
    ):
        if not name.isidentifier():
            raise ValueError(f"executor name must be a Python identifier, got {name!r}")
        self.name = name
        self.version = version
        self.distribution = distribution
        # lower ranks are asked first; the built-in torch executor is always asked last
        self.default_rank = default_rank
        # whether PyTorch's autograd can differentiate through this executor's implementations
        self.supports_autograd = supports_autograd
        self.default = default
        self.requires = tuple(requires)
        self.needs_cuda = needs_cuda
        self._availability: Availability | None = None

    def is_available(self) -> Availability:
        """Whether this executor can run here; the default checks `requires` and `needs_cuda`."""
        for requirement in self.requires:
            module, _, min_version = requirement.partition(">=")
            found = Availability.of_library(module.strip(), min_version.strip())
            if not found:
                return found
        return Availability.of_cuda() if self.needs_cuda else Availability(True)

    def availability(self) -> Availability:
        """`is_available()`, asked once; one that raises makes the executor unavailable."""
        if self._availability is None:
            try:
                self._availability = self.is_available()
            except Exception as e:  # noqa: BLE001 - a plugin's fault must not break compilation
                self._availability = Availability(False, f"is_available() raised {type(e).__name__}: {e}")
        return self._availability

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        """This executor's offer for `sym`, or None."""
        return None

    def offer(self, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
        """The implementation for this call, or None and why not (a dict lookup and a checker call)."""
        impl = self.implementation_for(bsym.sym)
        if impl is None:
            return None, NOT_IMPLEMENTED
        return _run_checker(impl, bsym)

    def claimed_ops(self) -> list[str]:
        """The ids of the operations this executor implements."""
        return []

    def describe_op(self, op: str) -> str:
        """A short note on how this executor runs the claimed `op` (shown by `squall executors --ops`)."""
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class OperatorExecutor(Executor):
    """An executor that implements operations one call at a time."""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.implementations: dict[str, Implementation] = {}
        self.operators: dict[str, Symbol] = {}

    def register_operator(self, name: str, *, meta: Callable, fn: Callable, tags: tuple[str, ...] = ()) -> Symbol:
        """Declare an executor-level symbol `<executor>.<name>` whose implementation is `fn`.

        Execution transforms call such symbols (with proxies) to spell a torch op in this
        executor's own operations; `meta` gives their outputs.
        """
        if not name.isidentifier():
            raise ValueError(f"operator name must be a Python identifier, got {name!r}")
        sym = Symbol(f"{self.name}.{name}", name, meta, is_prim=True, tags=tags)
        self.operators[name] = sym
        self.implementations[sym.id] = Implementation(fn)
        return sym

    def register_implementation(
        self,
        op: Symbol | CustomOperation | str,
        impl: Callable | None = None,
        *,
        checker: Callable[..., bool] | None = None,
        execution_transform: Callable | None = None,
    ) -> None:
        """Offer `impl` (called with real tensors) for `op`, when `checker` (called with proxies) agrees.

        `op` is a symbol, a custom operation, or a name (a torch name such as "torch.exp", or
        an id). With an `execution_transform`, the call is instead rewritten by running the
        transform on proxies; it must call symbols this executor implements.
        """
        if impl is None and execution_transform is None:
            raise ValueError("register_implementation needs an impl or an execution_transform")
        self.implementations[_symbol_id(op)] = Implementation(impl, checker, execution_transform)

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        return self.implementations.get(sym.id)

    def claimed_ops(self) -> list[str]:
        return sorted(self.implementations)


@dataclass
class FusionRegion:
    """A maximal group of calls one fusion executor claimed, to be compiled into one callable.

    `calls` are the operations to compile, in order, each one the executor supports
    directly (ltorch ops it took through their decomposition are expanded). The compiled
    callable takes `inputs` positionally and returns a tuple matching `outputs`.
    """

    executor: str
    members: list[BoundSymbol]
    calls: list[BoundSymbol]
    inputs: list[TensorProxy]
    outputs: list[TensorProxy]

    def signature(self) -> tuple:
        """Equal for regions with the same operations, arguments and input metadata."""
        local: dict[str, tuple] = {p.name: ("in", k) for k, p in enumerate(self.inputs)}
        parts = []
        for b in self.calls:
            leaves, spec = tree_flatten((b.args, b.kwargs))
            norm = []
            for x in leaves:
                if isinstance(x, TensorProxy):
                    norm.append(local.get(x.name, ("free", x.name)))
                else:
                    try:
                        hash(x)
                        norm.append((type(x), x))
                    except TypeError:
                        norm.append((type(x), repr(x)))
            for p in b.output_proxies():
                local[p.name] = ("local", len(local))
            parts.append((b.sym.id, str(spec), tuple(norm)))
        meta = tuple((tuple(p.shape), p.dtype, p.device, p.requires_grad) for p in self.inputs)
        return (tuple(parts), tuple(local[p.name] for p in self.outputs), meta)


@dataclass(frozen=True)
class Declined:
    """What `compile_region` returns to hand a region back *with a reason*.

    The region's calls go to the other executors, as when it returns None, and the
    reason ("torch was faster on these shapes (...)") is shown by `squall explain` for
    each of them. Identical regions are declined once, for the same reason.
    """

    reason: str


def form_regions(bsyms: Sequence[BoundSymbol], claimed: Callable[[BoundSymbol], bool]) -> tuple[list[list[int]], list[list[int]]]:
    """Group the claimed calls into maximal regions along data flow, never creating a cycle.

    Returns (regions, order): each region is a list of indices into `bsyms`; `order` is
    every unit (a region, or one unclaimed call) as index lists, in an order that
    respects data flow, stable with respect to the original order.
    """
    producer: dict[str, int] = {}
    group_of: list[int | None] = []
    reaches: list[frozenset[int]] = []  # groups with a path to call i
    reaches_outside: list[frozenset[int]] = []  # ... through a call outside that group
    groups: list[list[int]] = []
    preds_of: list[set[int]] = []
    for i, b in enumerate(bsyms):
        preds = {producer[p.name] for p in b.input_proxies() if p.name in producer}
        r: set[int] = set()
        ro: set[int] = set()
        for p in preds:
            gp = group_of[p]
            for g in reaches[p]:
                r.add(g)
                if g != gp or g in reaches_outside[p]:
                    ro.add(g)
            if gp is not None:
                r.add(gp)
        group = None
        if claimed(b):
            # prefer a producer's region (vertical fusion), else the latest region it may join
            for p in sorted(preds, reverse=True):
                if group_of[p] is not None and group_of[p] not in ro:
                    group = group_of[p]
                    break
            else:
                group = next((g for g in reversed(range(len(groups))) if g not in ro), None)
            if group is None:
                group = len(groups)
                groups.append([])
            groups[group].append(i)
        group_of.append(group)
        reaches.append(frozenset(r))
        reaches_outside.append(frozenset(ro))
        preds_of.append(preds)
        for p in b.output_proxies():
            producer[p.name] = i

    # the units (regions and unclaimed calls) in a data-flow order, by topological sort
    unit_of = [("g", g) if g is not None else ("c", i) for i, g in enumerate(group_of)]
    members: dict[tuple, list[int]] = {}
    for i, u in enumerate(unit_of):
        members.setdefault(u, []).append(i)
    succs: dict[tuple, set] = {u: set() for u in members}
    indeg: dict[tuple, int] = {u: 0 for u in members}
    for i, preds in enumerate(preds_of):
        for p in preds:
            a, b = unit_of[p], unit_of[i]
            if a != b and b not in succs[a]:
                succs[a].add(b)
                indeg[b] += 1
    ready = [(members[u][0], u) for u in members if indeg[u] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(members[u])
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, (members[v][0], v))
    assert len(order) == len(members), "fusion regions formed a cycle"
    return groups, order


class FusionExecutor(Executor):
    """An executor that claims operations and fuses them into regions.

    It claims an operation it supports (`register_supported`), or one whose whole
    decomposition it supports. Its `fusion_pass` groups the claimed calls into maximal
    regions (`form_regions`) and asks `compile_region` for one callable per region;
    identical regions compile once. A region smaller than `min_region_size`, or one
    `compile_region` declines (returns None, or `Declined(reason)`) or fails on, is left
    to the planner's final pass, which hands its calls to the other executors and asks
    `left_out_reason` why, for `squall explain`.
    """

    min_region_size = 1

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.supported: dict[str, Callable[..., bool] | None] = {}
        self._compiled: dict[tuple, Callable | None] = {}
        self.region_symbol = Symbol(f"{name}.region", "region", lambda *a: None, is_prim=True, tags=(FUSION_REGION,))
        self.compile_errors: list[str] = []
        # the calls the latest fusion pass handed back, with why: id(bsym) -> (bsym, reason)
        self._left_out: dict[int, tuple[BoundSymbol, str]] = {}

    def left_out_reason(self, bsym: BoundSymbol) -> str:
        """Why the latest fusion pass handed `bsym` back ("" when it gave no reason)."""
        entry = getattr(self, "_left_out", {}).get(id(bsym))
        return entry[1] if entry is not None and entry[0] is bsym else ""

    def _hand_back(self, members: Sequence[BoundSymbol], reason: str) -> None:
        for b in members:
            self._left_out[id(b)] = (b, reason)

    def register_supported(self, op: Symbol | CustomOperation | str, checker: Callable[..., bool] | None = None) -> None:
        """Declare that this executor can fuse `op` (when `checker`, given proxies, agrees)."""
        self.supported[_symbol_id(op)] = checker

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        if sym.id not in self.supported:
            return None
        return Implementation(None, self.supported[sym.id])

    def offer(self, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
        impl, reason = super().offer(bsym)
        if impl is not None or not bsym.subsymbols:
            return impl, reason
        # an op it does not take directly is still fusible when its whole decomposition is
        for sub in bsym.subsymbols:
            sub_impl, sub_reason = self.offer(sub)
            if sub_impl is None:
                return None, f"{reason} (in its decomposition, {sub.sym.id}: {sub_reason})"
        return Implementation(None), ""

    def claimed_ops(self) -> list[str]:
        return sorted(self.supported)

    def _expand(self, bsym: BoundSymbol) -> list[BoundSymbol]:
        if super().offer(bsym)[0] is not None:
            return [bsym]
        return [c for sub in bsym.subsymbols for c in self._expand(sub)]

    def compile_region(self, region: FusionRegion) -> Callable | Declined | None:
        """One callable for `region`, or `Declined(reason)` (or None) to hand it back; subclasses compile here."""
        return None

    def fusion_pass(self, bsyms: list[BoundSymbol], output: Any) -> list[BoundSymbol]:
        """Replace the calls this executor claimed by region calls; `output` is the program's output."""
        mine = lambda b: b.executor is self and b.impl is None
        self._left_out = {}
        groups, order = form_regions(bsyms, mine)
        consumers: dict[str, set[int]] = {}
        for i, b in enumerate(bsyms):
            for p in b.input_proxies():
                consumers.setdefault(p.name, set()).add(i)
        returned = {p.name for p in flat_proxies(output)}
        result: list[BoundSymbol] = []
        for unit in order:
            if not mine(bsyms[unit[0]]) or len(unit) < self.min_region_size:
                if mine(bsyms[unit[0]]):
                    self._hand_back([bsyms[i] for i in unit], f"a region of {len(unit)} call{'s' * (len(unit) != 1)}, "
                                    f"below this executor's minimum of {self.min_region_size}")
                result.extend(bsyms[i] for i in unit)
                continue
            region_call = self._region(bsyms, unit, consumers, returned)
            result.extend([region_call] if region_call is not None else [bsyms[i] for i in unit])
        return result

    def _region(self, bsyms, unit: list[int], consumers: dict[str, set[int]], returned: set[str]) -> BoundSymbol | None:
        inside = set(unit)
        members = [bsyms[i] for i in unit]
        produced = {p.name for b in members for p in b.output_proxies()}
        inputs: dict[str, TensorProxy] = {}
        for b in members:
            for p in b.input_proxies():
                if p.name not in produced:
                    inputs.setdefault(p.name, p)
        outputs: dict[str, TensorProxy] = {}
        for b in members:
            for p in b.output_proxies():
                if p.name in returned or consumers.get(p.name, set()) - inside:
                    outputs.setdefault(p.name, p)
        calls = [c for b in members for c in self._expand(b)]
        region = FusionRegion(self.name, members, calls, list(inputs.values()), list(outputs.values()))
        key = region.signature()
        if key not in self._compiled:
            try:
                self._compiled[key] = self.compile_region(region)
            except Exception as e:  # noqa: BLE001 - a region that fails to compile runs unfused
                self.compile_errors.append(f"compile_region raised {type(e).__name__}: {e}")
                self._compiled[key] = Declined(f"compile_region raised {type(e).__name__}: {e}")
        fn = self._compiled[key]
        if fn is None or isinstance(fn, Declined):
            self._hand_back(members, fn.reason if fn is not None else "")
            return None
        return BoundSymbol(
            self.region_symbol, tuple(region.inputs), {}, tuple(region.outputs), tuple(members),
            members[0].source, self, fn,
        )


def _meta_like(sym: Symbol) -> Callable:
    """A meta function giving `sym`'s outputs, without recording its decomposition."""

    def meta(*args, **kwargs):
        ctx = current_context()
        ctx.scopes.append([])
        try:
            return sym.meta(*args, **kwargs)
        finally:
            ctx.scopes.pop()

    return meta


def register_executor(ex: Executor, *, add_to_default_executors: bool = True, marketplace: Marketplace | None = None) -> Executor:
    """Put an executor built in plain code on the (default) market."""
    (marketplace or default_marketplace()).add_executor(ex, default=add_to_default_executors)
    return ex


def add_operator_executor(
    name: str,
    op_map: Mapping[str, tuple[str, Callable[..., bool] | None, Callable]],
    *,
    add_to_default_executors: bool = True,
    default_rank: int = 0,
    marketplace: Marketplace | None = None,
) -> OperatorExecutor:
    """Build an operator executor from a map and put it on the market, first in the defaults.

        add_operator_executor("apex_xentropy", {
            "torch.nn.functional.cross_entropy": ("apex_xentropy", checker, impl)})

    The key names a torch operation (or an ltorch, prim or custom-op id); `checker` has
    the torch op's signature and is called with proxies at compile time (None: always
    accept); `impl` has the same signature and is called with real tensors at run time,
    as the executor-level operation `<name>.<op name>` shown in the execution trace.
    With `add_to_default_executors=False` it is used only where named in a priority list.
    """
    market = marketplace or default_marketplace()
    ex = OperatorExecutor(name, default_rank=default_rank, default=add_to_default_executors)
    for key, entry in op_map.items():
        sym = resolve_operation(key, market.operations)
        if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], str) and callable(entry[2])):
            raise TypeError(f"op_map[{key!r}] must be (operator name, checker or None, implementation), got {entry!r}")
        op_name, checker, impl = entry
        operator = ex.register_operator(op_name, meta=_meta_like(sym), fn=impl)
        ex.register_implementation(sym, checker=checker, execution_transform=functools.partial(_call, operator))
    market.add_executor(ex, default=add_to_default_executors)
    return ex


def _call(operator: Symbol, *args, **kwargs):
    return operator(*args, **kwargs)
