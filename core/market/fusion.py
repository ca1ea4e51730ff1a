"""Fusion: claimed calls grouped into regions, each compiled into one callable.

A `FusionExecutor` claims the operations it can fuse (an op it supports, or one whose
whole decomposition it supports). Its `fusion_pass` groups the claimed calls into maximal
regions along data flow, never creating a cycle between regions (`form_regions`), and asks
`compile_region` for one callable per `FusionRegion`; identical regions compile once. A
region it hands back, with or without a reason (`Declined`), runs on the other executors.
An executor whose compiles run elsewhere may have several regions compiled at once
(`FusionExecutor.parallel_compiles`: those that read no other region's outputs).

Before compiling, a cost model (`FusionExecutor.skip_reason`) leaves out regions that cannot
pay back their compilation: pure metadata, one cheap op, or an estimated eager time below what
calling the executor's compiled region costs by itself; the reason shows in `squall explain`.
"""
from __future__ import annotations

import contextlib
import contextvars
import heapq
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..proxies import TensorProxy
from ..symbol import BoundSymbol, Symbol, Tags, flat_proxies
from ..symbolic import SymInt, concrete_shape, symbols_of
from .executor import Executor, Implementation
from .operations import CustomOperation, symbol_id
from .pacing import (PACE_PAUSE, PACE_SLICE_S, compiling_stopped, in_background_upgrade, mark_background_upgrade_thread, pace,
                     stop_compiling, upgrades_are_awaited, upgrades_awaited)

__all__ = ["symbolic_sizes", "declines_symbolic", "FusionExecutor", "FusionRegion", "Declined", "RegionCost", "form_regions", "FUSION_REGION", "LEFT_OUT", "saved_for_backward", "only_saved", "NOT_WORTH_IT", "stop_compiling", "compiling_stopped", "mark_background_upgrade_thread", "in_background_upgrade", "pace", "upgrades_awaited", "upgrades_are_awaited", "PACE_PAUSE", "PACE_SLICE_S"]

FUSION_REGION = Tags.FUSION_REGION  # the tag on a fusion region's symbol
LEFT_OUT = "fusion pass left it out"  # a fusion executor claimed a call, then handed it back
NOT_WORTH_IT = "not compiled, it cannot pay back"  # the cost model's reasons start so
# how many times a region that failed to compile is halved (`Declined.split`): each halving costs
# compiles, and a part still failing at this depth runs on the other executors
SPLIT_DEPTH = 5

# eager's cost per call, to estimate a region's eager time without running it: (seconds to
# dispatch one op, bytes per second it moves). Deliberately generous to eager (a high per-op
# cost, a low bandwidth): an estimate that errs makes the cost model skip less, not more.
_EAGER_COST = {"cpu": (3e-6, 10e9), "cuda": (6e-6, 500e9)}


# the strides of a program's values as its calls met them, by proxy name, while the program is
# planned (squall.compiler.pipeline.compile_traced): the backward's inputs as the torch plan's
# backwards met them (an upgrade's), and the outputs of each region compiled so far on its example
# run. A fusion executor compiles a region for the layouts its inputs will have, where a region
# compiled for contiguous examples would meet the first real call's other strides and compile again
_STRIDES_MET: ContextVar[dict[str, tuple[int, ...]] | None] = ContextVar("squall_strides_met", default=None)


@contextlib.contextmanager
def strides_met(strides: Mapping[str, tuple[int, ...]]):
    """Within the block, `stride_met` answers from `strides` (proxy name -> strides) and what
    `note_strides` adds."""
    token = _STRIDES_MET.set(dict(strides))
    try:
        yield
    finally:
        _STRIDES_MET.reset(token)


def stride_met(p: TensorProxy) -> tuple[int, ...] | None:
    """The strides `p`'s value had at run time where they are known (`strides_met`) and `p` has
    concrete sizes (a symbolic size's strides vary); None elsewhere."""
    met = _STRIDES_MET.get()
    stride = met.get(p.name) if met is not None else None
    if stride is None or len(stride) != len(p.shape) or any(type(n) is not int for n in p.shape):
        return None
    return stride


def note_strides(proxies: Sequence[TensorProxy], values: Sequence[Any]) -> None:
    """Record the strides of `values`, the run-time values of `proxies` (a compiled region's
    outputs on its examples), for the regions planned after it in the same `strides_met` block."""
    met = _STRIDES_MET.get()
    if met is None:
        return
    for p, v in zip(proxies, values):
        if isinstance(v, torch.Tensor) and isinstance(p, TensorProxy):
            met[p.name] = tuple(v.stride())


# the values a differentiated program's forward returns only for its backward (saved, and not among
# the user's outputs), by name, while that forward is planned (squall.compiler.pipeline): no user
# sees their strides, so a fusion executor may return them in the layout its kernels prefer
# (inductor's channels-last plan for a convolution region) where no other forward call reads them
_ONLY_SAVED: ContextVar[frozenset[str]] = ContextVar("squall_only_saved", default=frozenset())


@contextlib.contextmanager
def saved_for_backward(names: frozenset[str]):
    """Within the block, `only_saved` answers from `names`: values only the backward reads."""
    token = _ONLY_SAVED.set(frozenset(names))
    try:
        yield
    finally:
        _ONLY_SAVED.reset(token)


def only_saved() -> frozenset[str]:
    """The names of the values the program being planned returns only for its backward (`saved_for_backward`)."""
    return _ONLY_SAVED.get()


def example_tensor(shape: Sequence[int], dtype: torch.dtype, device: torch.device | str, *, requires_grad: bool = False,
                   seed: int = 0) -> torch.Tensor:
    """A tensor to time or check a compiled region on: normal floats, zero integers and booleans
    (zeros are valid indices and class targets, so a region that gathers runs).

    The floats come from a generator of its own: timing runs beside the user's program (in the
    background tier too) and must not move the random stream the program draws from; `seed` seeds it
    (the same for every tensor by default: tensors of one shape get equal values).
    """
    if dtype.is_floating_point or dtype.is_complex:
        generator = torch.Generator(device=device).manual_seed(seed)
        t = torch.randn(tuple(shape), dtype=dtype, device=device, generator=generator)
    else:
        t = torch.zeros(tuple(shape), dtype=dtype, device=device)
    return t.requires_grad_(requires_grad)

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
    # positions in `outputs` of the values only the backward reads (`only_saved`, and read by no call
    # outside the region): the executor may return those in the layout its kernels chose; every
    # other output keeps the strides eager's calls would give it
    layout_free: tuple[int, ...] = ()

    def signature(self) -> tuple:
        """Equal for regions with the same operations, arguments and input metadata (and, for a call of
        several outputs, the same outputs' shapes)."""
        local: dict[str, tuple] = {p.name: ("in", k) for k, p in enumerate(self.inputs)}
        parts = []
        for b in self.calls:
            leaves, spec = tree_flatten((b.args, b.kwargs))
            norm = []
            for x in leaves:
                if isinstance(x, TensorProxy):
                    norm.append(local.get(x.name, ("free", x.name)))
                else:
                    norm.append(_value_key(x))
            produced = b.output_proxies()
            for p in produced:
                local[p.name] = ("local", len(local))
            part = (b.sym.id, str(spec), tuple(norm))
            if len(produced) > 1:
                # how many pieces `x.split(2)` returns, and their sizes, follow from the guards its trace
                # holds, not from its arguments: a region whose unused last pieces differ is another region
                part += (tuple(_shape_key(p.shape) for p in produced),)
            parts.append(part)
        meta = tuple((_shape_key(p.shape), p.dtype, p.device, p.requires_grad) for p in self.inputs)
        outputs = tuple(local[p.name] for p in self.outputs)
        # (a region with no layout-free output keeps the signature it had before they existed: regions remembered on disk stay found)
        return (tuple(parts), outputs, meta, self.layout_free) if self.layout_free else (tuple(parts), outputs, meta)


def _shape_key(shape) -> tuple:
    """A shape in a region signature: each symbolic size by its expression (reading none's value)."""
    return tuple(n.poly if type(n) is SymInt else n for n in shape)


def _value_key(x: Any) -> tuple:
    """A region signature's key for a non-tensor argument, reading no symbolic size's value: a
    SymInt is keyed by its expression (comparing or printing it would record a shape guard, and
    a guard `s1 == 13` recorded while an upgrade plans would make the upgraded program serve one
    length only), also as a slice's bound (`x[:, :n]`: slices are unhashable before Python 3.12,
    and their repr prints the bound's value)."""
    if type(x) is SymInt:
        return (SymInt, x.poly)
    if type(x) is slice:
        return (slice, _value_key(x.start), _value_key(x.stop), _value_key(x.step))
    try:
        hash(x)
        return (type(x), x)
    except TypeError:
        return (type(x), repr(x))


@dataclass(frozen=True)
class RegionCost:
    """What a region asks of eager PyTorch: its calls that compute (not only views), their
    prims, and the bytes those calls read and write."""

    compute_calls: list[BoundSymbol]
    compute_prims: int
    bytes_moved: int
    device_type: str

    @classmethod
    def of(cls, region: FusionRegion) -> RegionCost:
        compute, prims, moved = [], 0, 0
        for b in region.calls:
            n = sum(1 for p in b.walk() if p.sym.is_prim and Tags.SHAPE_ONLY not in p.sym.tags)
            if n:
                compute.append(b)
                prims += n
                moved += sum(_nbytes(p) for p in b.input_proxies() + b.output_proxies())
        proxies = region.inputs or region.outputs
        return cls(compute, prims, moved, proxies[0].device.type if proxies else "cpu")

    def eager_seconds(self) -> float:
        """An estimate of eager's time for the region: a dispatch per call plus its memory traffic."""
        per_op, bandwidth = _EAGER_COST.get(self.device_type, _EAGER_COST["cpu"])
        return len(self.compute_calls) * per_op + self.bytes_moved / bandwidth


def _nbytes(p: TensorProxy) -> int:
    n = p.dtype.itemsize
    for s in concrete_shape(p.shape):  # an estimate: this call's sizes, not guarded
        n *= s
    return n


@dataclass(frozen=True)
class Declined:
    """What `compile_region` returns to hand a region back *with a reason*.

    The region's calls go to the other executors, as when it returns None, and the
    reason ("torch was faster on these shapes (...)") is shown by `squall explain` for
    each of them. Identical regions are declined once, for the same reason.
    """

    reason: str
    # the executor failed to compile it (rather than judging it not worth it): the fusion pass then
    # splits the region in two, in trace order, and offers each part, so one call the executor
    # cannot compile does not keep the whole program from fusing
    split: bool = False


def symbolic_sizes(bsym: BoundSymbol) -> set[str]:
    """The size symbols a call's tensors' shapes or its arguments hold (squall.symbolic)."""
    found: set[str] = set()
    for p in (*bsym.input_proxies(), *bsym.output_proxies()):
        if type(p) is TensorProxy:
            found |= symbols_of(p.shape)
    found |= symbols_of([x for x in tree_flatten((bsym.args, bsym.kwargs))[0] if type(x) is SymInt])
    return found


def _sizes_that_may_be_one(bsym: BoundSymbol) -> set[str]:
    """The size symbols of a call that may be 1 at a later call (squall.symbolic.ShapeEnv.ones)."""
    found: set[str] = set()
    sizes = [n for p in (*bsym.input_proxies(), *bsym.output_proxies()) if type(p) is TensorProxy for n in p.shape]
    for n in (*sizes, *tree_flatten((bsym.args, bsym.kwargs))[0]):
        if type(n) is SymInt:
            found |= symbols_of(n) & n.env.ones
    return found


def declines_symbolic(executor: FusionExecutor, bsym: BoundSymbol) -> tuple[None, str] | None:
    """The planner's answer for a fusion executor that takes static shapes only, offered a call
    with symbolic sizes, or one not known to serve a size of 1, offered a call with a size symbol
    that may be 1: declined, saying which (None: offer it as usual)."""
    if executor.symbolic_shapes:
        ones = set() if executor.symbolic_ones else _sizes_that_may_be_one(bsym)
        if not ones:
            return None
        return None, f"symbolic sizes that may be 1 ({', '.join(sorted(ones, key=lambda n: int(n[1:])))}): {executor.name} is not known to compute a size of 1 correctly"
    symbols = symbolic_sizes(bsym)
    if not symbols:
        return None
    return None, f"symbolic sizes ({', '.join(sorted(symbols, key=lambda n: int(n[1:])))}): {executor.name} compiles regions of static shapes only"


def call_device(bsym: BoundSymbol) -> torch.device | None:
    """The device a call computes on: its first tensor output's (a CPU scalar it reads may be
    another's), else its first tensor input's; None for a call of numbers alone."""
    for p in (*bsym.output_proxies(), *bsym.input_proxies()):
        if type(p) is TensorProxy:
            return p.device
    return None


def form_regions(bsyms: Sequence[BoundSymbol], claimed: Callable[[BoundSymbol], bool]) -> tuple[list[list[int]], list[list[int]]]:
    """Group the claimed calls into maximal regions along data flow, never creating a cycle,
    each region's calls on one device (`call_device`).

    Returns (regions, order): each region is a list of indices into `bsyms`; `order` is
    every unit (a region, or one unclaimed call) as index lists, in an order that
    respects data flow, stable with respect to the original order.
    """
    producer: dict[str, int] = {}
    group_of: list[int | None] = []
    # the groups with a path to each call; for a group, those with a path to any of its members:
    # a region runs as one unit, so what reaches one member reaches every consumer of every member
    reaches: list[frozenset[int]] = []
    ancestors: list[set[int]] = []
    # whether a call outside the group already reads one of its members: such a group takes no
    # member that would bring it new ancestors, since the reach sets of calls after it, already
    # computed, would miss them (two regions joined that way formed a cycle through their consumers)
    consumed_outside: list[bool] = []
    groups: list[list[int]] = []
    group_device: list[torch.device | None] = []
    preds_of: list[set[int]] = []
    barrier: int | None = None  # the latest call tagged BARRIER: later calls follow it
    sealed: set[int] = set()  # regions formed before it, which later calls may not join
    for i, b in enumerate(bsyms):
        preds = {producer[p.name] for p in b.input_proxies() if p.name in producer}
        if barrier is not None:
            preds.add(barrier)
        r: set[int] = set()
        ro: set[int] = set(sealed)  # the groups with a path to call i through a call outside them
        for p in preds:
            gp = group_of[p]
            if gp is None:
                r |= reaches[p]
                ro |= reaches[p]  # through p, outside every group
            else:
                r.add(gp)
                r |= ancestors[gp]
                ro |= ancestors[gp]  # through gp's region, outside theirs

        device = call_device(b)

        def can_join(g: int) -> bool:
            # a region is compiled for one device: a call computing on another starts its own
            return g not in ro and (not consumed_outside[g] or r <= ancestors[g] | {g}) and group_device[g] == device

        group = None
        if claimed(b):
            # prefer a producer's region (vertical fusion), else the latest region it may join
            for p in sorted(preds, reverse=True):
                if group_of[p] is not None and can_join(group_of[p]):
                    group = group_of[p]
                    break
            else:
                group = next((g for g in reversed(range(len(groups))) if can_join(g)), None)
            if group is None:
                group = len(groups)
                groups.append([])
                group_device.append(device)
                ancestors.append(set())
                consumed_outside.append(False)
            groups[group].append(i)
            ancestors[group] |= r - {group}
        for p in preds:
            if group_of[p] is not None and group_of[p] != group:
                consumed_outside[group_of[p]] = True
        group_of.append(group)
        reaches.append(frozenset(r))
        preds_of.append(preds)
        # a random draw that returned its input (dropout in eval mode) returns the very tensor it
        # was given: its consumers depend on the real producer, so it splits no region. Other calls
        # that return their input (contiguous) may return another layout, which a later view needs
        passed_through = {p.name for p in b.input_proxies()} if Tags.RANDOM in b.sym.tags else set()
        for p in b.output_proxies():
            if p.name not in passed_through:
                producer[p.name] = i
        if Tags.BARRIER in b.sym.tags:
            barrier = i
            sealed.update(range(len(groups)))

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


def _passes_through(bsym: BoundSymbol) -> bool:
    """Whether `bsym` is a random draw that returned its input (dropout in eval mode): it computes
    nothing, its readers read the producer's tensor, and dead code removal drops it once nothing
    outside a region reads that tensor (form_regions already lets it split no region)."""
    inputs = {p.name for p in bsym.input_proxies()}
    return Tags.RANDOM in bsym.sym.tags and all(p.name in inputs for p in bsym.output_proxies())


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
    # the cost model (see skip_reason): a region of one compute call with fewer prims than this
    # fuses nothing; a region whose estimated eager time is below min_eager_seconds cannot win
    # against the cost of calling a compiled region
    min_compute_prims = 0
    min_eager_seconds = 0.0
    # compile_region takes long (seconds: a compiler, timing runs): squall.jit's first call runs
    # without this executor and its regions are compiled in the background (squall.runtime.tiers)
    compiles_in_background = True
    # a plan with this executor's regions is timed, whole, against the plan without them, and
    # kept only if faster (squall.runtime.tiers); an executor that keeps every region it can compile
    # (no timing, as inductor with autotune off) says False
    judge_in_context = True
    # whether its regions may have symbolic sizes (squall.symbolic); an executor that says False
    # declines every call whose shapes or arguments hold one, saying so
    symbolic_shapes = False
    # whether its symbolic regions compute a call correctly where a size symbol that may be 1
    # (squall.symbolic.ShapeEnv.ones: the trace never relied on 2 or more) is 1; one that says
    # False declines calls with such a symbol, saying so
    symbolic_ones = True
    # where its latest region compiled, for squall.upgrades(): "" for this process's background
    # thread; an executor compiling elsewhere (inductor's worker process) says where
    compile_site = ""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.supported: dict[str, Callable[..., bool] | None] = {}
        self._compiled: dict[tuple, Callable | None] = {}
        self.region_symbol = Symbol(f"{name}.region", "region", lambda *a: None, is_prim=True, tags=(FUSION_REGION,))
        self.compile_errors: list[str] = []
        # the calls the latest fusion pass handed back, with why: id(bsym) -> (bsym, reason)
        self._left_out: dict[int, tuple[BoundSymbol, str]] = {}
        # held by the planner from this executor's fusion pass until its final pass has read
        # `_left_out`: squall.runtime.tiers plans in a background thread while the caller may plan too
        self.pass_lock = threading.RLock()

    def left_out_reason(self, bsym: BoundSymbol) -> str:
        """Why the latest fusion pass handed `bsym` back ("" when it gave no reason)."""
        entry = getattr(self, "_left_out", {}).get(id(bsym))
        return entry[1] if entry is not None and entry[0] is bsym else ""

    def _hand_back(self, members: Sequence[BoundSymbol], reason: str) -> None:
        for b in members:
            self._left_out[id(b)] = (b, reason)

    def register_supported(self, op: Symbol | CustomOperation | str, checker: Callable[..., bool] | None = None) -> None:
        """Declare that this executor can fuse `op` (when `checker`, given proxies, agrees)."""
        self.supported[symbol_id(op)] = checker

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

    def offers(self) -> list[tuple[str, FusionExecutor]]:
        """The ways this executor can fuse a program, for squall.runtime.tiers' in-context judge to choose
        from: (label, executor) pairs, each executor named as this one, largest regions first
        (e.g. inductor's "large regions" with matmuls and attention, then its elementwise
        "islands"). The judge plans the program with each in turn, times each beside the torch plan,
        and keeps the fastest that agrees with it and beats it. Default: this executor alone."""
        return [("regions", self)]

    def prepare(self) -> None:
        """Called when `squall.jit` is given a priority list with this executor, where it compiles
        in the background: start what its first compile will need (inductor: its worker process,
        which imports and warms up inductor at a low priority) without blocking the caller, whose
        first call must not wait for it. Default: nothing."""

    def settle(self) -> None:
        """Wait for the compilations this executor's regions started at calls they could not serve
        at once (inductor: a symbolic region's compilation for a size of 1 its kernel does not take,
        the region's torch calls running meanwhile). squall.runtime.tiers' judge calls it after a
        first run of the fused plan on its inputs, so that what it compares and times is what the
        user's later calls run, not those torch calls. Default: nothing to wait for."""

    def _expand(self, bsym: BoundSymbol) -> list[BoundSymbol]:
        if super().offer(bsym)[0] is not None:
            return [bsym]
        return [c for sub in bsym.subsymbols for c in self._expand(sub)]

    def skip_reason(self, region: FusionRegion) -> str:
        """Why compiling `region` cannot pay back ("" to compile it): it only moves metadata, is
        one cheap op (`min_compute_prims`), or eager runs it in less time than calling a compiled
        region costs (`min_eager_seconds`, against `RegionCost.eager_seconds`)."""
        cost = RegionCost.of(region)
        if not cost.compute_calls:
            return "pure metadata (views and reshapes): nothing to compute"
        if len(cost.compute_calls) == 1 and cost.compute_prims < self.min_compute_prims:
            op = cost.compute_calls[0].sym.id
            return f"a single cheap op ({op}, {cost.compute_prims} prim{'s' * (cost.compute_prims != 1)}): nothing to fuse"
        eager_s = cost.eager_seconds()
        if eager_s < self.min_eager_seconds:
            return (f"eager runs it in about {eager_s * 1e6:.0f} us ({len(cost.compute_calls)} calls, "
                    f"{cost.bytes_moved} bytes), less than the {self.min_eager_seconds * 1e6:.0f} us "
                    f"calling a compiled {self.name} region costs")
        return ""

    def compile_region(self, region: FusionRegion) -> Callable | Declined | None:
        """One callable for `region`, or `Declined(reason)` (or None) to hand it back; subclasses compile here."""
        return None

    def parallel_compiles(self) -> int:
        """How many regions the fusion pass may compile at once, each `compile_region` in a thread of
        its own (asked once a pass): more than 1 only for an executor whose `compile_region` may run
        in several threads at once and whose compiles run elsewhere (inductor: in worker processes,
        where the caller waits for them). Default 1: one region after another, in the pass's thread."""
        return 1

    def fusion_pass(self, bsyms: list[BoundSymbol], output: Any) -> list[BoundSymbol]:
        """Replace the calls this executor claimed by region calls; `output` is the program's output."""
        mine = lambda b: b.executor is self and b.impl is None
        self._left_out = {}
        groups, order = form_regions(bsyms, mine)
        consumers: dict[str, set[int]] = {}
        for i, b in enumerate(bsyms):
            if _passes_through(b):
                continue  # reads nothing it computes with: no reason for a region to return what it reads
            for p in b.input_proxies():
                consumers.setdefault(p.name, set()).add(i)
        returned = {p.name for p in flat_proxies(output)}
        parallel = self.parallel_compiles()
        if parallel > 1:
            self._compile_ahead(bsyms, [unit for unit in order if mine(bsyms[unit[0]])], consumers, returned, parallel)
        result: list[BoundSymbol] = []
        for unit in order:
            pace()
            if mine(bsyms[unit[0]]):
                result.extend(self._regions(bsyms, unit, consumers, returned, SPLIT_DEPTH))
            else:
                result.extend(bsyms[i] for i in unit)
        return result

    def _regions(self, bsyms, unit: list[int], consumers: dict[str, set[int]], returned: set[str], depth: int,
                 failed: str = "") -> list[BoundSymbol]:
        """The unit's calls as one region call, or as the calls themselves where it was handed back.
        A region that failed to compile is halved in trace order (edges run only from the first
        half to the second, so the halves form no cycle) and each half offered in turn; `failed`
        is why the region this unit is a part of was not compiled whole."""
        members = [bsyms[i] for i in unit]
        if len(unit) < self.min_region_size:
            why = f"a region of {len(unit)} call{'s' * (len(unit) != 1)}, below this executor's minimum of {self.min_region_size}"
            self._hand_back(members, f"{failed}; then, as a part of it, {why}" if failed else why)
            return members
        region, fn = self._region(bsyms, unit, consumers, returned)
        if isinstance(fn, Declined) and fn.split and depth > 0 and len(unit) > 1:
            half = len(unit) // 2
            failed = failed or fn.reason
            return (self._regions(bsyms, unit[:half], consumers, returned, depth - 1, failed)
                    + self._regions(bsyms, unit[half:], consumers, returned, depth - 1, failed))
        if fn is None or isinstance(fn, Declined):
            why = fn.reason if fn is not None else ""
            self._hand_back(members, f"{failed}; then, as a part of it, {why}" if failed and why != failed else why)
            return members
        return [BoundSymbol(
            self.region_symbol, tuple(region.inputs), {}, tuple(region.outputs), tuple(members),
            members[0].source, self, fn,
        )]

    def _form_region(self, bsyms, unit: list[int], consumers: dict[str, set[int]], returned: set[str]) -> FusionRegion:
        inside = set(unit)
        members = [bsyms[i] for i in unit]
        produced: set[str] = set()
        inputs: dict[str, TensorProxy] = {}
        for b in members:
            for p in b.input_proxies():
                if p.name not in produced:  # in order: a call that returns its input (contiguous) reads it first
                    inputs.setdefault(p.name, p)
            produced.update(p.name for p in b.output_proxies())
        outputs: dict[str, TensorProxy] = {}
        for b in members:
            for p in b.output_proxies():
                if p.name in returned or consumers.get(p.name, set()) - inside:
                    outputs.setdefault(p.name, p)
        calls = [c for b in members for c in self._expand(b)]
        saved = only_saved()
        layout_free = tuple(k for k, p in enumerate(outputs.values()) if p.name in saved and not consumers.get(p.name, set()) - inside)
        return FusionRegion(self.name, members, calls, list(inputs.values()), list(outputs.values()), layout_free)

    def _compiled_or_declined(self, region: FusionRegion) -> Callable | Declined | None:
        """`compile_region`'s answer for `region`, or why it was not asked (the cost model, the exiting
        interpreter) or failed."""
        try:
            why = self.skip_reason(region)
            if compiling_stopped():
                return Declined("the interpreter is exiting")
            return Declined(f"{NOT_WORTH_IT}: {why}") if why else self.compile_region(region)
        except Exception as e:  # noqa: BLE001 - a region that fails to compile runs unfused
            self.compile_errors.append(f"compile_region raised {type(e).__name__}: {e}")
            return Declined(f"compile_region raised {type(e).__name__}: {e}")

    def _compile_ahead(self, bsyms, units: list[list[int]], consumers: dict[str, set[int]], returned: set[str], parallel: int) -> None:
        """Compile the regions of `units` that read no other unit's outputs, `parallel` at a time, each
        in a thread of its own, into the table the pass then reads (`_region`). A region that reads
        another's outputs is left to the pass, which compiles it after that one: it is compiled for
        the strides that one's example run met (`note_strides`), which an independent region never reads."""
        produced = {p.name for unit in units for i in unit for p in bsyms[i].output_proxies()}
        ahead: dict[tuple, FusionRegion] = {}
        for unit in units:
            if len(unit) < self.min_region_size:
                continue
            region = self._form_region(bsyms, unit, consumers, returned)
            key = region.signature()
            if key not in self._compiled and key not in ahead and not any(p.name in produced for p in region.inputs) \
                    and not self.skip_reason(region):
                ahead[key] = region
        if len(ahead) < 2:
            return  # nothing to compile side by side: the pass compiles it
        # each thread runs in a copy of this one's context (the strides met, the values only saved),
        # as a background upgrade's where this is one; daemons, so an interpreter exiting while they
        # compile (a caller that stopped waiting) does not wait for them (`stop_compiling` ends them)
        background = in_background_upgrade()
        pending = list(ahead.items())
        taken = threading.Lock()

        def compile_some(context: contextvars.Context) -> None:
            if background:
                mark_background_upgrade_thread()
            while True:
                with taken:
                    if not pending:
                        return
                    key, region = pending.pop(0)
                self._compiled[key] = context.run(self._compiled_or_declined, region)

        threads = [threading.Thread(target=compile_some, args=(contextvars.copy_context(),), daemon=True,
                                    name=f"squall-{self.name}-compile-{n}") for n in range(min(parallel, len(ahead)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _region(self, bsyms, unit: list[int], consumers: dict[str, set[int]], returned: set[str]) -> tuple[FusionRegion, Callable | Declined | None]:
        region = self._form_region(bsyms, unit, consumers, returned)
        key = region.signature()
        if key not in self._compiled:
            self._compiled[key] = self._compiled_or_declined(region)
        return region, self._compiled[key]
