"""Replayed module calls: a submodule called again in one trace, of the same class and forward,
on inputs of the same metadata and with the same other arguments, gets a copy of the calls its
first call recorded (the new module's parameters in place of the first's), and the first call's
guards re-bound to the new module, without running its forward again.

A model is a stack of layers alike (gpt2's 12 blocks, DistilBERT's 6): tracing runs each one's
Python again on the same shapes. What a forward records is a function of what it read: its
inputs' metadata (the key: `squall.replays.module_call_key`, which also holds grad mode,
autocast and the global defaults), the state its guards read, and its module tree's parameters
(inputs of the trace, by metadata) and training flags (compared, as the cache key holds them).
So where the first call's guards, each re-bound from the first module's objects to the new
module's at the same place in its tree, hold for the new module, a fresh trace of the new call
records the same calls and the same guards, re-bound: the replay checks each guard on the new
module (an attribute read now holding another value, a hook now registered: no replay) and
then makes them again, in order, so the guard set is the one a fresh trace makes.

A call is recorded for replay only where it did nothing but read and record calls: no write to
any object (attributes, lists, dicts, sets, globals), no in-place op, no constant captured, no
tensor value read, no new size symbol, no layout read, no route through the call's arguments,
no effect to replay, no random, opaque or side-effecting op (`squall.replays`); and it is
replayed only where every object a guard of it read is the new module's counterpart or shared by
both (never an object only the first module holds: a list, a helper object), and nothing was
rebound in the trace since. Anything else traces the call as without replays.
`SQUALL_REPLAY_MODULES=0` turns replays off. Only modules with submodules whose class occurs
three times or more in the compiled module are recorded (a leaf's one op is replayed by
`squall.replays`; one repeat does not pay for the record).
"""
from __future__ import annotations

import collections
import functools
import re
import types
from collections.abc import Callable
from typing import Any

import torch

from ..ltorch.autocast import autocast_state
from ..market.config import env_switch
from ..proxies import TensorProxy, current_context, real_tensor
from ..replays import NOT_REPLAYED, Decomposition, module_call_key, walk_values
from ..symbolic import SymInt
from ..trace import scalar_key
from .state_views import _HOOK_DICTS, _MISSING, _MODULE_INTERNALS, _SCALARS, _ViewInfo

__all__ = ["ModuleReplays", "REPLAY_ENV", "replays_enabled"]

REPLAY_ENV = "SQUALL_REPLAY_MODULES"


def replays_enabled(environ: dict | None = None) -> bool:
    """Whether module calls are replayed: `$SQUALL_REPLAY_MODULES` (1/true/yes/on, the default, or
    0/false/no/off), read as squall's other settings are (squall.market.config.env_flag)."""
    return env_switch(REPLAY_ENV, True, environ)


class _Refused(Exception):
    """This call cannot replay the first one (it is traced as without replays)."""


_UNSEEN = object()
# a module class must occur this often in the compiled tree for its calls to be recorded: a
# first replay in a trace costs about a layer (the record's log, its places, its decomposition's
# walk), so one repeat alone (a 2-layer encoder) would make the compile slower, not faster
_WORTH_RECORDING = 3


class _FirstCall:
    """What a module's first call with a key recorded: its view, input proxies, the calls it
    recorded, its output, its guards' log and its view notes."""

    __slots__ = ("info", "inputs", "objects", "calls", "output", "log", "notes", "rebinds", "depth", "decomposition", "layout", "program")

    def __init__(self, info: _ViewInfo, inputs: list, objects: list, calls: list, output: Any, log: list, notes: list, rebinds: int, depth: int):
        self.info = info
        self.inputs = inputs
        self.objects = objects  # the objects its key names by identity, held while it is
        self.calls = calls
        self.output = output
        self.log = log
        self.notes = notes
        self.rebinds = rebinds
        self.depth = depth
        self.decomposition: Any = _UNSEEN  # made at the first replay: most calls are never repeated
        self.layout: Any = _UNSEEN  # its module's places (_Layout), made at the first replay too
        self.program: Any = _UNSEEN  # its guard log, ready to re-bind (_Program), made then too


class ModuleReplays:
    """The module calls of one trace that a later call may replay (see the module's docstring)."""

    def __init__(self, module: torch.nn.Module, tree: list[tuple[str, torch.nn.Module]] | None = None):
        """`tree`: the module's `named_modules(remove_duplicate=False)` where the caller has it."""
        distinct = {id(m): m for _, m in tree}.values() if tree is not None else module.modules()
        counts = collections.Counter(type(m) for m in distinct)
        self._repeated = frozenset(cls for cls, n in counts.items() if n >= _WORTH_RECORDING)
        self._first: dict[tuple, _FirstCall | None] = {}

    def call(self, view: Any, info: _ViewInfo, forward: Callable, args: tuple, kwargs: dict) -> Any:
        """`forward(*args, **kwargs)` of the module `view` stands for, or the replay of an earlier call."""
        cls = type(info.real)
        if (cls not in self._repeated or not info.in_tree or not info.dict.get("_modules")
                or type(forward) is not types.MethodType or forward.__self__ is not view):
            return forward(*args, **kwargs)
        keyed = module_call_key((cls, forward.__func__, autocast_state()), args, kwargs)  # (a call's casts depend on autocast's state)
        if keyed is None:
            return forward(*args, **kwargs)
        key, proxies, objects = keyed
        first = self._first.get(key, _UNSEEN)
        if first is _UNSEEN:
            return self._record(key, info, forward, args, kwargs, proxies, objects)
        if first is not None:
            try:
                plan = _plan(first, info, proxies)
            except _Refused:
                pass
            else:
                return plan()
        return forward(*args, **kwargs)

    def _record(self, key: tuple, info: _ViewInfo, forward: Callable, args: tuple, kwargs: dict, proxies: list, objects: list) -> Any:
        ctx = current_context()
        recorder = info.recorder
        if recorder._write_order:
            # a view written to reads its writes, not the module: replays would read the module
            self._first[key] = None
            return forward(*args, **kwargs)
        before = _state(ctx, recorder)
        scope, depth = ctx.scopes[-1], len(ctx.scopes)
        start = len(scope)
        log = recorder.guards.start_log()
        notes: list = []
        ctx.views.logs.append(notes)
        try:
            out = forward(*args, **kwargs)
        finally:
            recorder.guards.stop_log(log)
            del ctx.views.logs[next(i for i, n in enumerate(ctx.views.logs) if n is notes)]
        pure = len(ctx.scopes) == depth and ctx.scopes[-1] is scope and _immutable(out) and _state(ctx, recorder) == before
        self._first[key] = _FirstCall(info, list(proxies), objects, scope[start:], out, log, notes, ctx.rebinds, depth) if pure else None
        return out


def _immutable(x: Any) -> bool:
    """An output of proxies, numbers and tuples of them: nothing the caller can change later."""
    t = type(x)
    if t is tuple:
        return all(_immutable(v) for v in x)
    return t is TensorProxy or t in _SCALARS or t is SymInt or t is torch.Size


def _state(ctx: Any, recorder: Any) -> tuple:
    """What a call that only reads and records calls leaves as it was (its writes, its captures,
    its reads of values and layouts, its routes through the arguments)."""
    speculation = ctx.speculation
    r = recorder
    return (
        len(ctx.constants), len(ctx.number_roots), len(ctx.mutated_inputs), len(ctx.inputs), len(ctx.gradient_passes),
        len(ctx.grad_roots), len(ctx.substitutes), len(ctx.shapes.symbols), len(ctx.views.stale), ctx.rebinds, len(ctx.layouts_guarded),
        len(speculation.values) if speculation is not None else 0,
        len(r._write_order), sum(len(i.writes) for i in r._write_order),
        # (a container read, shared by both modules, is read through one copy: what was written to any)
        sum(list.__len__(copy) - len(copy.initial) for _, copy, _, _ in r._lists),
        sum(len(c.keys_set) for c in r._dict_copies.values()),
        len(r._argument_copies), sum(len(c.keys_set) for c in r._argument_copies),
        sum(len(c.added) for c in r._set_copies.values()), sum(len(c.appended) for c, _ in r._deques),
        len(r._snapshots), len(r._namespaces), len(r._passed_as_is), sum(len(v) for v in r._routed_by_type.values()),
        len(r._metadata_guarded), len(r.routed_ints),
        len(r.guards.effects), len(r.guards.eager_because), len(r.guards._roots),
    )


# --- the first module's objects -> the new module's ---------------------------------------------


class _Layout:
    """The first module's tree as places, made once and matched against each new module: its
    modules (each its parent's index and its name there), its tensors (module index, store or
    None for a plain attribute, name, proxy) and the place of each object a guard may read (id ->
    module index, what it is: the module, its `__dict__`, an attribute, an attribute's `__dict__`)."""

    def __init__(self, root: torch.nn.Module, proxies: dict[int, TensorProxy]):
        self.modules: list[tuple[int, str]] = []
        self.reals: list[torch.nn.Module] = []
        self.tensors: list[tuple[int, str | None, str, TensorProxy]] = []
        self.places: dict[int, tuple[int, str, str | None]] = {}
        self._proxies = proxies
        self._add(root, -1, "")

    def _add(self, module: torch.nn.Module, parent: int, key: str) -> None:
        i = len(self.reals)
        self.reals.append(module)
        self.modules.append((parent, key))
        held = module.__dict__
        self.places.setdefault(id(module), (i, "module", None))
        self.places.setdefault(id(held), (i, "dict", None))
        for name, value in held.items():
            if type(value) in _SCALARS:
                continue
            if name in ("_parameters", "_buffers"):
                self.places.setdefault(id(value), (i, "attr", name))
                for k, tensor in value.items():
                    if tensor is not None:
                        self._tensor(i, name, k, tensor)
            elif name == "_modules":
                self.places.setdefault(id(value), (i, "attr", name))
                for k, sub in value.items():
                    if sub is not None:
                        self._add(sub, i, k)
            elif real_tensor(value):
                self._tensor(i, None, name, value)
            else:
                self.places.setdefault(id(value), (i, "attr", name))
                attributes = getattr(value, "__dict__", None)
                if type(attributes) is dict:
                    self.places.setdefault(id(attributes), (i, "attrdict", name))

    def _tensor(self, i: int, store: str | None, name: str, tensor: torch.Tensor) -> None:
        proxy = self._proxies.get(id(tensor))
        if proxy is None:
            raise _Refused  # not an input of the trace (a module outside the compiled one)
        self.tensors.append((i, store, name, proxy))


class _Places:
    """The new module's objects at the places of the first module's (`_Layout`): `of(obj)` maps
    an object the first call read to the new call's (itself where both share it; _Refused where
    only the first module holds it); `tensors` pairs each tensor's proxy, the first's and the new one's."""

    def __init__(self, layout: _Layout, root: torch.nn.Module, proxies: dict[int, TensorProxy]):
        self.layout = layout
        news: list[torch.nn.Module] = []
        seen: dict[int, torch.nn.Module] = {}
        back: dict[int, torch.nn.Module] = {}
        for (parent, key), first in zip(layout.modules, layout.reals):
            new = root if parent < 0 else news[parent].__dict__["_modules"].get(key)
            if new is None or type(new) is not type(first):
                raise _Refused
            a, b = first.__dict__, new.__dict__
            # an attribute one has and the other not (an instance's own forward); `training`, read
            # unguarded (the cache key holds the compiled tree's); the same submodules
            if a.keys() != b.keys() or a["training"] != b["training"] or a["_modules"].keys() != b["_modules"].keys():
                raise _Refused
            if seen.setdefault(id(first), new) is not new or back.setdefault(id(new), first) is not first:
                raise _Refused  # a module shared in one tree and not in the other
            news.append(new)
        self.news = news
        self.tensors: list[tuple[TensorProxy, TensorProxy]] = []
        for i, store, name, first_proxy in layout.tensors:
            held = news[i].__dict__
            tensor = (held[store] if store is not None else held).get(name)
            proxy = proxies.get(id(tensor)) if real_tensor(tensor) else None
            if proxy is None or _metadata(proxy) != _metadata(first_proxy):
                raise _Refused
            self.tensors.append((first_proxy, proxy))

    def of(self, obj: Any) -> Any:
        """The new module's counterpart of `obj` (itself where it is shared)."""
        return self.at(self.layout.places.get(id(obj)), obj)

    def at(self, place: tuple | None, obj: Any) -> Any:
        """The new module's object at `place` (`_Layout.places`), where the first module holds `obj`."""
        if place is None:
            return obj  # not held by the first module's tree: shared (a class, a config, a global)
        i, kind, name = place
        new = self.news[i]
        if kind == "module":
            return new
        held = new.__dict__
        if kind == "dict":
            return held
        value = held.get(name, _MISSING)
        if kind == "attrdict":
            if value is self.layout.reals[i].__dict__.get(name):
                return obj  # the attribute's object is shared
            raise _Refused
        if value is obj:
            return obj
        if name in ("_parameters", "_buffers", "_modules") or name in _HOOK_DICTS or name in _MODULE_INTERNALS:
            if type(value) is type(obj):
                return value  # the new module's own, read through guards
        elif type(obj) is tuple and _same_value(obj, value):
            return value  # a layer norm's shape: guarded by identity, each module's own
        raise _Refused  # an object only the first module holds (a list, a helper)


def _same_value(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are numbers, strings and tuples of them alike, type for type."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return type(a) in _SCALARS and scalar_key(a) == scalar_key(b)


def _metadata(p: TensorProxy) -> tuple:
    shape = p.shape
    if type(shape) is not torch.Size:
        shape = tuple(("sym", d.poly) if type(d) is SymInt else d for d in shape)
    return shape, p.dtype, p.device, p.requires_grad, getattr(p, "_is_param", False)


# --- the guards, re-bound ----------------------------------------------------------------------

# a bound name in a guard's text (`d12`, `k3`), not inside a string literal nor after a dot
_TOKENS = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?<![.\w])([a-z]+[0-9]+)\b""")


@functools.lru_cache(maxsize=16384)
def _template(text: str) -> tuple[str, ...]:
    """`text` cut at the bound names it reads: (text, name, text, name, ..., text)."""
    parts, last = [], 0
    for m in _TOKENS.finditer(text):
        if m.group(2) is not None:
            parts += [text[last:m.start(2)], m.group(2)]
            last = m.end(2)
    parts.append(text[last:])
    return tuple(parts)


@functools.lru_cache(maxsize=16384)
def _code(text: str) -> types.CodeType:
    return compile(text, "<squall guard>", "eval")


def _relabelled(first: str, new: str, text: str) -> str:
    """`text` (a guard's label) naming the module labelled `new` where it named `first`'s tree
    (not a longer label `first` begins: layer 1 is not layer 10)."""
    parts, start = [], 0
    while (i := text.find(first, start)) >= 0:
        end = i + len(first)
        if end < len(text) and (text[end].isalnum() or text[end] in "_'"):
            parts.append(text[start:end])
        else:
            parts += [text[start:i], new]
        start = end
    if not parts:
        return text
    parts.append(text[start:])
    return "".join(parts)


def _same_watched(expected: Any, got: Any) -> bool:
    """Whether `GuardSet.watch`'s guard for `expected` holds for `got`."""
    t = type(expected)
    if type(got) is not t:
        return False
    if t is float or t is complex:
        return scalar_key(got) == scalar_key(expected)
    if t is int or t is str or t is torch.device:
        return got == expected
    return got is expected


_BIND, _ADD, _WATCH, _EMPTY, _NOTE, _CLASS = range(6)
_MADE_FOR_GUARDS = (list, tuple, frozenset)  # containers a guard makes to compare with


class _Program:
    """A first call's guard log (`StateGuards.start_log`) made ready to re-bind, once: each
    object's place in the first module's tree (`_Layout.places`), each text's bound names."""

    def __init__(self, log: list, layout: _Layout, namespace: dict):
        places = layout.places
        self.ops: list[tuple] = []
        bound: set[str] = set()
        texts: list[str] = []
        for entry in log:
            kind = entry[0]
            if kind == "bind":
                _, obj, hint, name, made = entry
                bound.add(name)
                elements = [(places.get(id(x)), x) for x in obj] if type(obj) in _MADE_FOR_GUARDS else None
                self.ops.append((_BIND, places.get(id(obj)), obj, hint, name, made, elements))
            elif kind == "add":
                _, condition, label, guard_kind, site = entry
                texts.append(condition)
                self.ops.append((_ADD, _code(condition), _template(condition), " for " in condition, label, guard_kind, site))
            elif kind == "watch":
                _, expr, value, label, guard_kind = entry
                texts.append(expr)
                self.ops.append((_WATCH, _code(expr), _template(expr), " for " in expr, value, places.get(id(value)), label, guard_kind))
            elif kind == "empty":
                self.ops.append((_EMPTY, places.get(id(entry[1])), entry[1], entry[2]))
            elif kind == "note":
                if entry[4] is not None:
                    raise _Refused  # (a key guard's condition: none is made inside a module's call)
                self.ops.append((_NOTE, entry[1], entry[2], entry[3]))
            else:
                self.ops.append((_CLASS, places.get(id(entry[1])), entry[1], entry[2]))
        # bound names a text reads that the log did not bind: each must be shared by both modules
        self.outside = [(name, places.get(id(namespace[name])), namespace[name])
                        for text in texts for name in _template(text)[1::2] if name not in bound and name in namespace]


def _check(program: _Program, places: _Places, namespace: dict) -> tuple[dict[str, Any], list]:
    """The first call's guards evaluated on the new module's objects, changing nothing: (what
    each name the log bound stands for now, each watched value read now); _Refused where one
    fails or reads an object only the first module holds."""
    for name, place, obj in program.outside:
        if places.at(place, obj) is not obj:
            raise _Refused
    objects: dict[str, Any] = {}
    watched: list = []
    at = places.at
    # each guard reads the new module's objects under the first's names: those names are looked
    # up first (the text's own), then the guard set's (a comprehension's body sees only the
    # latter: a guard with one is evaluated in a merged copy)
    for op in program.ops:
        kind = op[0]
        if kind == _BIND:
            _, place, obj, _, name, made, elements = op
            if elements is None:
                objects[name] = at(place, obj)
            elif made:
                objects[name] = type(obj)(at(p, x) for p, x in elements)  # made for the guard: made again
            elif any(at(p, x) is not x for p, x in elements):
                raise _Refused
            else:
                objects[name] = obj
        elif kind == _ADD:
            try:
                holds = eval(op[1], {**namespace, **objects} if op[3] else namespace, objects)  # noqa: S307 - squall's own guard text
            except Exception:  # noqa: BLE001 - reads the call's arguments, or fails on the new module
                holds = False
            if not holds:
                raise _Refused
        elif kind == _WATCH:
            try:
                got = eval(op[1], {**namespace, **objects} if op[3] else namespace, objects)  # noqa: S307 - squall's own guard text
            except Exception:  # noqa: BLE001 - an attribute the new module lacks
                raise _Refused from None
            if not _same_watched(at(op[5], op[4]), got):
                raise _Refused
            watched.append(got)
        elif kind == _EMPTY:
            if at(op[1], op[2]):
                raise _Refused  # a hook registered on the new module
        elif kind == _CLASS:
            at(op[1], op[2])
    return objects, watched


def _commit(program: _Program, places: _Places, objects: dict[str, Any], watched: list, recorder: Any, first_label: str, label: str) -> None:
    """Make the guards `_check` evaluated, in order, as a fresh trace of the new call makes them."""
    guards = recorder.guards
    names: dict[str, str] = {}
    watched_values = iter(watched)

    def text(parts: tuple[str, ...]) -> str:
        parts = list(parts)
        parts[1::2] = [names.get(n, n) for n in parts[1::2]]
        return "".join(parts)

    for op in program.ops:
        kind = op[0]
        if kind == _BIND:
            names[op[4]] = guards.bind(objects[op[4]], op[3])
        elif kind == _ADD:
            guards.add(text(op[2]), _relabelled(first_label, label, op[4]), kind=op[5], site=op[6])
        elif kind == _WATCH:
            guards.watch(text(op[2]), next(watched_values), _relabelled(first_label, label, op[6]), kind=op[7])
        elif kind == _EMPTY:
            guards.stays_empty(places.at(op[1], op[2]), _relabelled(first_label, label, op[3]))
        elif kind == _NOTE:
            guards.note(op[1], _relabelled(first_label, label, op[2]), op[3])
        else:
            new = places.at(op[1], op[2])
            if new is not op[2]:
                _read_from_class(recorder, op[2], new, op[3], lambda t: _relabelled(first_label, label, t))


def _read_from_class(recorder: Any, first: Any, new: Any, name: str, relabel: Callable[[str], str]) -> None:
    """Note, as `AttributeReads._read_class_attribute` does, that `name` was read from the class of `new`."""
    view = recorder._views.get(id(new))
    if view is None:
        first_info = object.__getattribute__(recorder._views[id(first)], "_squall_view_info")
        view = recorder.view(new, relabel(first_info.label))
    info = object.__getattribute__(view, "_squall_view_info")
    info.class_reads.add(name)
    if info not in recorder._class_readers:
        recorder._class_readers.append(info)
    if recorder.guards.logs:
        recorder.guards.log_class_read(new, name)


# --- the replay ----------------------------------------------------------------------------------


def _plan(first: _FirstCall, info: _ViewInfo, proxies: list) -> Callable[[], Any]:
    """The replay of `first` for the call of the module `info` stands for on `proxies` (in key
    order), checked and not yet made: a function that makes it and returns the call's output."""
    ctx = current_context()
    recorder = info.recorder
    if ctx.rebinds != first.rebinds or len(ctx.scopes) != first.depth or recorder._write_order:
        raise _Refused  # (a rebind renamed proxies the first call's record holds)
    if first.layout is _UNSEEN:
        try:
            first.layout = _Layout(first.info.real, ctx._constant_proxies)
        except _Refused:
            first.layout = None
    if first.layout is None:
        raise _Refused
    places = _Places(first.layout, info.real, ctx._constant_proxies)
    mapping: dict[int, TensorProxy] = {}
    back: dict[int, TensorProxy] = {}
    for old, new in (*zip(first.inputs, proxies), *places.tensors):
        if mapping.setdefault(id(old), new) is not new or back.setdefault(id(new), old) is not old:
            raise _Refused
    if first.decomposition is None:
        raise _Refused
    if first.program is _UNSEEN:
        try:
            first.program = _Program(first.log, first.layout, recorder.guards.namespace)
        except _Refused:
            first.program = None
    if first.program is None:
        raise _Refused
    objects, watched = _check(first.program, places, recorder.guards.namespace)
    if first.decomposition is _UNSEEN:
        first.decomposition = _decomposition(first, [old for old, _ in places.tensors])
    decomposition = first.decomposition
    if decomposition is None:
        raise _Refused

    def replay() -> Any:
        _commit(first.program, places, objects, watched, recorder, first.info.label, info.label)
        out, calls, value = decomposition.replay_calls(mapping, ctx.new_name)
        ctx.scopes[-1].extend(calls)
        for op, args, kwargs, made in first.notes:
            ctx.views.note(op, value(args), value(kwargs), value(made))
        return out

    return replay


def _decomposition(first: _FirstCall, tensors: list[TensorProxy]) -> Decomposition | None:
    """The first call's calls as a decomposition of its inputs and its tree's tensors; None where
    they read anything else or hold what a copy cannot make (squall.replays), or where a view
    note holds a value a copy cannot map."""
    inputs = list({id(p): p for p in (*first.inputs, *tensors)}.values())
    decomposition = Decomposition.record(inputs, first.output, tuple(first.calls), NOT_REPLAYED - {"random"})
    if decomposition is None:
        return None
    known = {id(p) for p in inputs} | set(decomposition.made)
    for _, args, kwargs, out in first.notes:
        found: list = []
        if not walk_values((args, kwargs, out), found) or any(id(p) not in known for p in found):
            return None
    return decomposition
