"""The guard set: every condition a compiled program puts on later calls, in one form.

A trace bakes in more than its code: the metadata of its input tensors, the Python state it
read (`squall.frontend.state_guards`), the tensor values speculation read (`squall.frontend.speculation`),
whether its inputs share memory (`squall.runtime.aliasing`), the exact value of a run-time number
(`squall.ltorch.numbers`). Each such condition is one `Guard` in the compilation's `GuardSet`: its
kind, a label in words ("attribute 'scale' of the module"), the source line that made it
(where known) and, for a guard checked before the program runs, a Python condition over the
call's `args` and `kwargs`.

Where a guard is checked depends on its kind (`GUARD_KINDS`), and is the only thing that does:

- "key": the cache key and the entry point's C check of tensor metadata hold it (the hot
  path: one key, one dict lookup, no Python per guard);
- "check": the set's one generated check, which runs before the program: every such guard's
  condition joined by `and` into one function (`GuardSet.runner`), which on failure hands the
  call to the runtime; `explain` then evaluates the conditions one by one and says, in a
  `GuardFailure`, which failed;
- "program": inside the generated program, where the value it checks is computed (a
  `squall.guard` call, which raises `GuardFailed` with its site).

How a new guard kind is added (a symbolic-shape relation, say "input 0 dim 1 >= 2"):

1. give it a row in `GUARD_KINDS` (what it guards, where it is checked: "check" for a
   relation over the inputs); a test may pass its own table (`GuardSet(kinds=...)`);
2. where the trace decides on it, add it to the compilation's guard set:
   `guards.add("args[0].shape[1] >= 2", "argument 'x' dim 1 >= 2", kind="shape", site=...)`;
   the condition may read objects bound with `guards.bind(obj, hint)`.

Nothing else changes: the generated check runs every "check" guard, `explain` names the one
that failed, and the runtime's policy (`squall.runtime.policy`) compiles the call again for
any kind it has no rule of its own for. (Where a dim leaves the key because it is symbolic,
the "tensor" guard's explain-only condition, made in `squall.runtime.entry`, should compare
what the key still holds; the relations on that dim are the new kind's "check" guards.)
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from .sources import load_source

__all__ = ["Guard", "GuardFailure", "GuardSet", "GUARD_KINDS", "STATE", "TENSOR", "VALUE", "NUMBER", "ALIAS", "SHAPE"]

TENSOR, STATE, ALIAS, VALUE, NUMBER, SHAPE = "tensor", "state", "alias", "value", "number", "shape"

# kind -> (what it guards, where it is checked: "key", "check" or "program")
GUARD_KINDS: dict[str, tuple[str, str]] = {
    TENSOR: ("an input's metadata (shape, dtype, device, requires_grad), grad mode, the default dtype, a number's value", "key"),
    STATE: ("Python state the trace read: attributes, globals, closure variables, hooks, list and dict items", "check"),
    ALIAS: ("whether the call's input tensors share memory (a program that writes an input)", "check"),
    VALUE: ("a tensor value speculation read while tracing (`if t.any():`, `t.item()`, a data-dependent shape)", "program"),
    NUMBER: ("the exact value of a run-time number argument the program needed (a shape, a dim)", "program"),
    SHAPE: ("relations between symbolic sizes the trace relied on (`s0 == s1 + 1`, `not (s0 > 128)`), checked once where the generated program reads the sizes", "program"),
}


@dataclass(frozen=True)
class Guard:
    """One condition on later calls: its kind, its label in words, the source line that made it
    (`file:line`, or ""), and for a guard checked before the program, its Python condition."""

    kind: str
    label: str
    condition: str | None = None
    site: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.label}" + (f" ({self.site})" if self.site else "")


@dataclass(frozen=True)
class GuardFailure:
    """What failed when a call did not fit an entry: the guard's kind, label and site, and what
    was seen (`detail`, "" where the check does not say); for a guard in the program, how it
    read its value (`read`: "item", "bool", ...). It decides nothing: the runtime's policy
    (`squall.runtime.policy`) maps it to what happens next."""

    kind: str
    label: str
    site: str = ""
    detail: str = ""
    read: str = ""

    def __str__(self) -> str:
        where = f" at {self.site}" if self.site else ""
        return f"{self.kind} guard failed: {self.label}{where}" + (f" ({self.detail})" if self.detail else "")


@functools.lru_cache(maxsize=1 << 16)
def _condition_code(condition: str) -> CodeType:
    """A guard condition compiled once: a call a variant's check rejects is explained (the
    runtime's policy acts on which guard failed), and hundreds of conditions recur across a
    function's variants and entries (a generate's decoding step switches between two at each
    `generate`: 500 conditions compiled from their text at every switch took 3-15 ms)."""
    return compile(condition, "<squall guard>", "eval")


class GuardSet:
    """The guards of one compilation, and the one generated check over those checked before the program.

    `runner(fn, failed)` is what the cache calls: `fn` when there is nothing to check;
    otherwise a generated function that evaluates every "check" guard's condition in one
    expression, calls `failed(args, kwargs)` when it does not hold, and runs `fn`.
    """

    def __init__(self, kinds: Mapping[str, tuple[str, str]] = GUARD_KINDS):
        self.kinds = kinds  # kind -> (what it guards, where it is checked): GUARD_KINDS, or a test's own
        # (kind, label, condition, site) of each guard in order: a trace adds hundreds, and most
        # compiles never read them as Guard objects (`guards` makes those on first read)
        self._entries: list[tuple[str, str, str | None, str]] = []
        self._made: list[Guard] = []
        self.namespace: dict[str, Any] = {"_copysign": math.copysign}
        self._bound: dict[int, str] = {}
        self._seen: set[str] = set()
        # containers that were empty (the hook dicts of most modules): one C-level any() checks all
        self._empty: dict[int, tuple[Any, str]] = {}
        self._holds: Callable | None = None
        # (how many guards there were, each guard with a condition and its code, key guards first)
        self._explain_order: tuple[int, list[tuple[Guard, CodeType]]] | None = None
        self._runners: dict[int, tuple[Callable, Callable]] = {}  # id(program) -> (program, its runner)

    # --- building the set ---------------------------------------------------------------------

    def bind(self, obj: Any, hint: str) -> str:
        """The name the generated check reads `obj` under (the object itself, kept alive)."""
        name = self._bound.get(id(obj))
        if name is None:
            name = self._bound[id(obj)] = f"{hint}{len(self._bound)}"
            self.namespace[name] = obj
        return name

    def add(self, condition: str, label: str, *, kind: str = STATE, site: str = "") -> None:
        """Guard that `condition` (a Python expression over `args`, `kwargs` and bound names)
        holds before the program runs; a condition already in the set is not added twice."""
        if self.kinds.get(kind, (None, None))[1] != "check":
            raise ValueError(f"squall: a {kind!r} guard is not checked before the program; kinds that are: "
                             f"{sorted(k for k, (_, where) in self.kinds.items() if where == 'check')}")
        if condition not in self._seen:
            self._seen.add(condition)
            self._entries.append((kind, label, condition, site))
            self._holds = None
            self._runners.clear()

    def note(self, kind: str, label: str, site: str = "", *, condition: str | None = None) -> None:
        """Record a guard the cache key or the program itself checks. A key guard's `condition`,
        when given, is never part of the generated check (the key holds it): `explain` reads it
        to say which input a call that missed differs in."""
        where = self.kinds.get(kind, (None, None))[1]
        if where is None or where == "check":
            raise ValueError(f"squall: a {kind!r} guard needs a condition (GuardSet.add), or is unknown; known: {sorted(self.kinds)}")
        if condition is not None and where != "key":
            raise ValueError(f"squall: a {kind!r} guard is checked inside the program: it has no condition of its own")
        self._entries.append((kind, label, condition, site))

    def watch(self, expr: str, value: Any, label: str, *, kind: str = STATE) -> None:
        """Guard that `expr` still gives `value`: numbers, strings and torch devices by type and
        value (-0.0 apart from 0.0, NaN as one value), None and bools and anything else by identity."""
        t = type(value)
        if value is None or t is bool:
            self.add(f"{expr} is {value!r}", label, kind=kind)
        elif t is float and value != value:
            self.add(f"(type(_v := {expr}) is float and _v != _v)", label, kind=kind)
        elif t is float and value == 0.0:
            self.add(f"(type(_v := {expr}) is float and _v == 0.0 and _copysign(1.0, _v) == {math.copysign(1.0, value)!r})", label, kind=kind)
        elif t in (int, float, str):
            self.add(f"(type(_v := {expr}) is {t.__name__} and _v == {self.bind(value, 'k')})", label, kind=kind)
        elif t is complex:
            self.add(f"(type(_v := {expr}) is complex and repr(_v) == {repr(value)!r})", label, kind=kind)
        elif t is torch.device:
            # a value, not an identity: each cache object that notes its device makes its own
            self.add(f"(type(_v := {expr}) is _device and _v == {self.bind(value, 'k')})", label, kind=kind)
            self.namespace["_device"] = torch.device
        else:
            self.add(f"{expr} is {self.bind(value, 'k')}", label, kind=kind)

    def stays_empty(self, container: Any, label: str) -> None:
        """Guard that `container` (a hook dict the trace found empty) is still empty.

        Every hook registration makes a `RemovableHandle`, whose class counts them: while the
        count is what it was at trace time, no hook was added anywhere and the check stops
        there; once it moved, every call looks at each dict (a C-level any())."""
        if not self._empty:
            self.add("(_RemovableHandle.next_id == _HANDLES_AT_TRACE or not _any(_EMPTY))", "the hooks of the submodules")
            # one list, grown in place: a trace reads thousands of hook dicts, and a tuple rebuilt
            # per dict made this quadratic (a quarter of a DistilBERT compile)
            self.namespace.update(_any=any, _RemovableHandle=RemovableHandle, _HANDLES_AT_TRACE=RemovableHandle.next_id,
                                  _EMPTY=[])
        if id(container) not in self._empty:
            self._empty[id(container)] = (container, label)
            self.namespace["_EMPTY"].append(container)

    # --- reading it ---------------------------------------------------------------------------

    @property
    def guards(self) -> list[Guard]:
        """Every guard, in the order added."""
        made = self._made
        if len(made) < len(self._entries):
            made.extend(Guard(*entry) for entry in self._entries[len(made):])
        return made

    @property
    def conditions(self) -> list[str]:
        """The conditions the generated check evaluates, in order (a key guard's are the key's)."""
        kinds = self.kinds
        return [condition for kind, _, condition, _ in self._entries if condition is not None and kinds[kind][1] == "check"]

    def of_kind(self, kind: str) -> list[Guard]:
        return [g for g in self.guards if g.kind == kind]

    def describe(self) -> list[str]:
        """Every guard in words, one a line: `kind: label (site)`."""
        return [str(g) for g in self.guards]

    # --- the generated check ------------------------------------------------------------------

    def _check(self, result: str, conditions: list[str] | None = None) -> list[str]:
        # an attribute or key gone (a KeyError), an argument no longer of its type, a user
        # __eq__ that raises: the state is not what was traced
        conditions = self.conditions if conditions is None else conditions
        return [
            "    try:",
            f"        {result} = {' and '.join(conditions) or 'True'}",
            "    except Exception:",
            f"        {result} = False",
        ]

    def runner(self, fn: Callable, failed: Callable[[tuple, dict], Any], body: list[str] | None = None, name: str = "guard-set") -> Callable:
        """`fn` behind the one check: `failed(args, kwargs)` answers a call the check rejects.
        `body`, lines that call `fn`, replaces the plain call (state writes replayed after it)."""
        conditions = self.conditions  # (read once: a list made from every guard)
        if not conditions and body is None:
            return fn
        made = self._runners.get(id(fn))
        if made is not None and made[0] is fn:
            return made[1]  # an entry cached again when its state came back: same runner
        lines = ["def run(*args, **kwargs):"]
        if conditions:
            lines += self._check("holds", conditions)
            lines += ["    if not holds:", "        return failed(args, kwargs)"]
        lines += body if body is not None else ["    return fn(*args, **kwargs)"]
        namespace = dict(self.namespace, fn=fn, failed=failed)
        load_source("\n".join(lines) + "\n", name, namespace)
        run = namespace["run"]
        run.__wrapped__ = fn  # the program it guards
        self._runners[id(fn)] = (fn, run)
        return run

    def holds(self, args: tuple, kwargs: dict) -> bool:
        """Whether every guard checked before the program holds for a call with these arguments."""
        if self._holds is None:
            namespace = dict(self.namespace)
            load_source("\n".join(["def holds(args, kwargs):", *self._check("holds"), "    return holds"]) + "\n", "guard-set", namespace)
            self._holds = namespace["holds"]
        return self._holds(args, kwargs)

    def explain(self, args: tuple, kwargs: dict) -> GuardFailure | None:
        """The first guard with a condition that fails for this call, in words (None: all hold):
        the key's guards first (which input a call that missed differs in), then the check's."""
        for container, label in self._empty.values():
            if container:
                return GuardFailure(STATE, label, detail="a hook was registered")
        if self._explain_order is None or self._explain_order[0] != len(self._entries):
            ordered = sorted((g for g in self.guards if g.condition is not None), key=lambda g: self.kinds[g.kind][1] != "key")
            self._explain_order = (len(self._entries), [(g, _condition_code(g.condition)) for g in ordered])
        namespace, call = dict(self.namespace), {"args": args, "kwargs": kwargs}
        for guard, code in self._explain_order[1]:
            try:
                ok = eval(code, namespace, call)  # noqa: S307 - squall's own source
            except Exception:  # noqa: BLE001 - a condition that cannot be evaluated does not hold
                ok = False
            if not ok:
                return GuardFailure(guard.kind, guard.label, guard.site)
        return None
