"""One cache entry in one record, and its guard set.

`CacheEntry` holds everything about one input signature of a jitted function (Thunder's
`CacheEntry` is the anchor): the compiled program it runs (`CompiledEntry`), the slot the hot
path reads (`[runner, hits]`, the very list the entry point's dict holds), its value-guard
variants, the entries set aside when the state they read changed, the executors kept out of
it after a fault, the compilations each state change caused, whether it split, and its
background upgrade. Nothing about an entry lives in a parallel dict.

`entry_guards(compilation, ...)` completes a compilation's guard set (`squall.guard_set`) once:
the state guards tracing recorded, plus the tensor metadata the key holds, the value guards
in the program, and, for a program that writes its inputs, the check that no two input
tensors share memory.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..compiler.pipeline import Compilation
from ..frontend.speculation import guards_of
from ..frontend.state_guards import ONE_OR_MORE, StateGuards
from ..guard_set import ALIAS, NUMBER, SHAPE, TENSOR, VALUE
from ..proxies import NumberProxy, type_string
from ..symbolic import SymInt, is_symbolic, lone_symbol, source
from ..trace import plain_scalar
from . import tiers
from .aliasing import storage_key, tensor_paths_of, tensors_at

__all__ = ["CompiledEntry", "CacheEntry", "entry_guards"]


@dataclass
class CompiledEntry:
    """One compiled program: its compilation (traces, plan, generated function) and compile time."""

    compilation: Compilation
    compile_seconds: float
    # the background upgrade to fused regions this entry's first plan waits for (squall.runtime.tiers)
    upgrade: tiers.Upgrade | None = None

    @property
    def source(self) -> str:
        return self.compilation.source


@dataclass(eq=False)
class CacheEntry:
    """Everything about one input signature (one cache key) of a jitted function."""

    key: Any
    # the program the slot runs (None: evicted, or set aside until its state comes back)
    compiled: CompiledEntry | None = None
    # [runner, hits]: what the entry point's dict holds for the key, read and bumped by the hot path
    slot: list | None = None
    recency: tuple[int, int] = (0, 0)  # (hits when last looked at, the compilation it was last seen used by)
    upgrade: tiers.Upgrade | None = None
    variant_upgrades: list[tiers.Upgrade] = field(default_factory=list)  # of variants compiled after a value guard failed
    set_aside: list[CompiledEntry] = field(default_factory=list)  # newest first (squall.frontend.state_guards)
    exclusions: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (executor, ops) kept apart
    state_compiles: dict[str, int] = field(default_factory=dict)  # state label -> compilations it caused
    split: bool = False  # runs the module's eager frame: no background upgrade replaces it
    # its slot runs eagerly while the signature waits for its compile (squall.runtime.ski_rental): its calls are no hits
    waiting: bool = False

    @property
    def cached(self) -> bool:
        return self.slot is not None

    @property
    def idle(self) -> bool:
        """Nothing left worth keeping: not cached, no upgrade, nothing set aside or kept out."""
        return (self.slot is None and self.upgrade is None and not self.variant_upgrades and not self.set_aside and not self.exclusions
                and not self.state_compiles)


def entry_guards(compilation: Compilation, *, alias: bool, takes_params: bool, describe: Callable[[tuple], str]) -> StateGuards:
    """The compilation's one guard set, completed once: the state guards tracing recorded;
    the tensor metadata its cache key holds; its value and number guards; and where `alias`
    (a program that writes its inputs, not itself traced for a pattern of shared tensors), the
    check that the call's input tensors share no memory. `describe(path)` names an input."""
    guards = compilation.__dict__.get("guard_set")
    if guards is not None:
        return guards
    state = getattr(compilation.traced.context, "state", None)
    guards = state.guards if state is not None else StateGuards()
    guards.namespace["_metadata"] = _metadata
    env = getattr(compilation.traced.context, "shapes", None)
    ones = env.ones if env is not None else frozenset()
    for b in compilation.bindings:
        if b.path[0] == "state":
            continue  # a tensor an argument object holds: its metadata is a state guard (squall.frontend.state_guards)
        if type(b.proxy) is not NumberProxy:
            if is_symbolic(b.proxy.shape):
                # a symbolic size is keyed as "2 or more" (squall.runtime.dynamic_dims), so it is explained
                # so; one the program never relied on being 2 or more as "1 or more" (`shared_with_ones`)
                p = b.proxy
                sizes = tuple(n if type(n) is int else ONE_OR_MORE if lone_symbol(n) in ones else None for n in p.shape)
                expected = guards.bind((p.dtype, p.device, p.requires_grad, sizes), "m")
                condition = f"_same_metadata({_expression(b.path, takes_params)}, {expected})"
            else:
                condition = f"_metadata({_expression(b.path, takes_params)}) == {guards.bind(_metadata(b.proxy), 'm')}"
            guards.note(TENSOR, f"{describe(b.path)}: {type_string(b.proxy)}", condition=condition)
    for relation in env.describe() if env is not None else ():
        guards.note(SHAPE, relation, "shape guards")
    for g in guards_of(compilation):
        how, read, _, expected, site = g.args
        number = bool(read) and all(type(r) is NumberProxy for r in read)  # as GuardFailed.on_number says at run time
        guards.note(NUMBER if number else VALUE, f"{how}({', '.join(r.name if hasattr(r, 'name') else source(r) if type(r) is SymInt else repr(r) for r in read)}) == {_short(expected)}", site)
    if alias and (compilation.writes_inputs or compilation.writes_captured):
        paths = tensor_paths_of(compilation.bindings)
        pick = guards.bind(tensors_at(paths, takes_params), "pick")
        guards.namespace["_storage_key"] = storage_key
        names = ", ".join(describe(p) for p in paths)
        keys = f"{{_storage_key(t) for t in {pick}(args, kwargs)}}"
        captured = compilation.captured_tensors
        if not captured:
            guards.add(f"len({keys}) == {len(paths)}", f"no two of {names} share memory", kind=ALIAS)
        else:
            # (read at every call: a captured tensor's storage may be swapped, `acc.data = ...`)
            held = guards.bind(captured, "k")
            guards.add(f"(len(_ks := {keys}) == {len(paths)} and _ks.isdisjoint([_storage_key(c) for c in {held}]))",
                       f"no two of {names} and the tensors the program captured share memory", kind=ALIAS)
    compilation.guard_set = guards
    return guards


def _metadata(t: Any) -> tuple:
    """What the cache key holds of a tensor (squall.runtime.entry_point), comparable between a proxy and a tensor."""
    return (tuple(t.shape), t.dtype, str(t.device), t.requires_grad)


def _expression(path: tuple, takes_params: bool) -> str:
    """The input at `path` (an input binding's), as an expression over a runner's `args` and `kwargs`."""
    root, first, *rest = path
    if root == "params":
        head = f"args[0][{first!r}]"
    elif root == "args":
        head = f"args[{first + (1 if takes_params else 0)}]"
    else:
        head = f"kwargs[{plain_scalar(first)!r}]"
    return head + "".join(f"[{plain_scalar(k)!r}]" for k in rest)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"

