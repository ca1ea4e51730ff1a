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
twice or more in the compiled module are recorded: a leaf's one op is replayed by `squall.replays`.
"""
from __future__ import annotations

import collections
import functools
import os
import re
import types
from collections.abc import Callable
from typing import Any

import torch

from ..proxies import TensorProxy, current_context, real_tensor
from ..replays import NOT_REPLAYED, Decomposition, module_call_key, walk_values
from ..symbolic import SymInt
from ..trace import scalar_key
from .state_views import _HOOK_DICTS, _MODULE_INTERNALS, _SCALARS, _ViewInfo

__all__ = ["ModuleReplays", "REPLAY_ENV", "replays_enabled"]

REPLAY_ENV = "SQUALL_REPLAY_MODULES"


def replays_enabled(environ: dict | None = None) -> bool:
    """Whether module calls are replayed: `$SQUALL_REPLAY_MODULES` (1/true/yes, the default, or 0/false/no)."""
    value = (os.environ if environ is None else environ).get(REPLAY_ENV, "").strip().lower()
    if value in ("", "1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise ValueError(f"squall: ${REPLAY_ENV} must be 1/true/yes or 0/false/no, got {value!r}")


class _Refused(Exception):
    """This call cannot replay the first one (it is traced as without replays)."""


_UNSEEN = object()


class _FirstCall:
    """What a module's first call with a key recorded: its view, input proxies, the calls it
    recorded, its output, its guards' log and its view notes."""

    __slots__ = ("info", "inputs", "objects", "calls", "output", "log", "notes", "rebinds", "depth", "decomposition")

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


class ModuleReplays:
    """The module calls of one trace that a later call may replay (see the module's docstring)."""

    def __init__(self, module: torch.nn.Module):
        counts = collections.Counter(type(m) for m in module.modules())
        self._repeated = frozenset(cls for cls, n in counts.items() if n > 1)
        self._first: dict[tuple, _FirstCall | None] = {}

    def call(self, view: Any, info: _ViewInfo, forward: Callable, args: tuple, kwargs: dict) -> Any:
        """`forward(*args, **kwargs)` of the module `view` stands for, or the replay of an earlier call."""
        cls = type(info.real)
        if (cls not in self._repeated or not info.in_tree or not info.dict.get("_modules")
                or type(forward) is not types.MethodType or forward.__self__ is not view):
            return forward(*args, **kwargs)
        keyed = module_call_key((cls, forward.__func__), args, kwargs)
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
        len(ctx.substitutes), len(ctx.shapes.symbols), len(ctx.views.stale), ctx.rebinds, len(ctx.layouts_guarded),
        len(speculation.values) if speculation is not None else 0,
        len(r._write_order), sum(len(i.writes) for i in r._write_order),
        len(r._lists), sum(list.__len__(copy) for _, copy, _, _ in r._lists), len(r._list_copies),
        len(r._dict_copies), sum(len(c.keys_set) for c in r._dict_copies.values()),
        len(r._argument_copies), sum(len(c.keys_set) for c in r._argument_copies),
        len(r._set_copies), sum(len(c.added) for c in r._set_copies.values()),
        len(r._deques), sum(len(c.appended) for c, _ in r._deques),
        len(r._snapshots), len(r._namespaces), len(r._passed_as_is), sum(len(v) for v in r._routed_by_type.values()),
        len(r._metadata_guarded), len(r.routed_ints),
        len(r.guards.effects), len(r.guards.eager_because), len(r.guards._roots),
    )


# --- the first module's objects -> the new module's ---------------------------------------------


class _Correspondence:
    """The first module's tree matched to the new module's, place by place: `mapped` (id of
    an object of the first -> the new one's at its place: modules, their dicts, parameters and
    buffers), `private` (ids of objects only the first holds, which no replay may read) and
    `tensors` (each parameter's or buffer's proxy, the first's and the new one's)."""

    def __init__(self, first: torch.nn.Module, new: torch.nn.Module, ctx: Any):
        self.mapped: dict[int, Any] = {}
        self._back: dict[int, Any] = {}
        self.private: set[int] = set()
        self.tensors: list[tuple[TensorProxy, TensorProxy]] = []
        self._proxies = ctx._constant_proxies
        self._module(first, new)

    def _pair(self, a: Any, b: Any) -> bool:
        known = self.mapped.get(id(a))
        if known is not None:
            if known is not b:
                raise _Refused
            return False
        if self._back.get(id(b), a) is not a:
            raise _Refused  # two of the first's objects at one of the new one's: not the same structure
        self.mapped[id(a)] = b
        self._back[id(b)] = a
        return True

    def _module(self, a: torch.nn.Module, b: torch.nn.Module) -> None:
        if type(a) is not type(b):
            raise _Refused
        if not self._pair(a, b):
            return
        da, db = a.__dict__, b.__dict__
        if list(da) != list(db):
            raise _Refused  # an attribute one has (an instance's own forward, say) and the other not
        self._pair(da, db)
        for name, va in da.items():
            vb = db[name]
            if name in ("_parameters", "_buffers"):
                self._tensors(va, vb)
            elif name == "_modules":
                if list(va) != list(vb):
                    raise _Refused
                self._pair(va, vb)
                for k, ma in va.items():
                    mb = vb[k]
                    if (ma is None) != (mb is None):
                        raise _Refused
                    if ma is not None:
                        self._module(ma, mb)
            elif isinstance(va, torch.nn.Module) and isinstance(vb, torch.nn.Module):
                self._module(va, vb)
            elif real_tensor(va) and real_tensor(vb):
                self._tensor(va, vb)
            elif va is vb:
                pass  # shared: its guards are the same guards
            elif type(va) in _SCALARS and type(vb) is type(va):
                if name in _MODULE_INTERNALS and scalar_key(va) != scalar_key(vb):
                    raise _Refused  # `training`: read unguarded (the cache key holds the jitted tree's)
            elif (name in _HOOK_DICTS or name in _MODULE_INTERNALS) and type(va) is type(vb) and isinstance(va, (dict, set)):
                self._pair(va, vb)  # a hook dict: what a trace reads of it is guarded
            elif type(va) is tuple and _same_value(va, vb):
                self._pair(va, vb)  # a layer norm's shape: guarded by identity, each module's own
            else:
                self.private.add(id(va))
                held = getattr(va, "__dict__", None)
                if held is not None:
                    self.private.add(id(held))

    def _tensors(self, da: dict, db: dict) -> None:
        if list(da) != list(db):
            raise _Refused
        self._pair(da, db)
        for k, ta in da.items():
            tb = db[k]
            if (ta is None) != (tb is None):
                raise _Refused
            if ta is not None:
                self._tensor(ta, tb)

    def _tensor(self, a: torch.Tensor, b: torch.Tensor) -> None:
        if not self._pair(a, b):
            return
        pa, pb = self._proxies.get(id(a)), self._proxies.get(id(b))
        if pa is None or pb is None or type(a) is not type(b) or _metadata(pa) != _metadata(pb):
            raise _Refused
        self.tensors.append((pa, pb))

    def of(self, obj: Any) -> Any:
        """The new module's counterpart of `obj` (itself where it is shared)."""
        new = self.mapped.get(id(obj))
        if new is not None:
            return new
        if id(obj) in self.private:
            raise _Refused
        return obj


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


class _Guards:
    """The first call's guard log re-bound to the new module: `check` evaluates each guard on the
    new module's objects (raising _Refused where one fails or cannot be re-bound) and changes
    nothing; `commit` then makes them, in order, as a fresh trace of the new call would."""

    def __init__(self, guards: Any, log: list, places: _Correspondence, first_label: str, label: str):
        self.guards = guards
        self.log = log
        self.places = places
        self._label = re.compile(re.escape(first_label) + r"(?![\w'])")
        self.label = label
        self.objects: dict[str, Any] = {}  # a name the first call bound -> what the new call binds there
        self.watched: list[Any] = []  # each watched value, read on the new module

    def relabel(self, text: str) -> str:
        return self._label.sub(lambda _: self.label, text)

    def check(self) -> None:
        places = self.places
        namespace = self.guards.namespace
        for entry in self.log:
            if entry[0] == "bind":
                _, obj, _, name, made = entry
                if made and type(obj) in (list, tuple, frozenset):
                    self.objects[name] = type(obj)(places.of(x) for x in obj)  # made for the guard: made again
                elif type(obj) in (list, tuple, frozenset) and any(places.of(x) is not x for x in obj):
                    raise _Refused
                else:
                    self.objects[name] = places.of(obj)
        scope = dict(namespace)
        scope.update(self.objects)
        for entry in self.log:
            kind = entry[0]
            if kind == "add":
                self._names(entry[1])
                if not self._holds(entry[1], scope):
                    raise _Refused
            elif kind == "watch":
                _, expr, value, _, _ = entry
                self._names(expr)
                try:
                    got = eval(_code(expr), scope)  # noqa: S307 - squall's own guard text
                except Exception:  # noqa: BLE001 - an attribute the new module lacks
                    raise _Refused from None
                if not _same_watched(places.of(value), got):
                    raise _Refused
                self.watched.append(got)
            elif kind == "empty":
                if places.of(entry[1]):
                    raise _Refused  # a hook registered on the new module
            elif kind == "note":
                if entry[4] is not None:
                    raise _Refused
            elif kind == "class":
                places.of(entry[1])

    def _names(self, text: str) -> None:
        # each bound name the text reads is bound by the log, or shared by both modules
        parts = _template(text)
        namespace = self.guards.namespace
        for name in parts[1::2]:
            if name not in self.objects and name in namespace and self.places.of(namespace[name]) is not namespace[name]:
                raise _Refused

    @staticmethod
    def _holds(condition: str, scope: dict) -> bool:
        try:
            return bool(eval(_code(condition), scope))  # noqa: S307 - squall's own guard text
        except Exception:  # noqa: BLE001 - reads the call's arguments, or fails on the new module
            return False

    def commit(self, recorder: Any) -> None:
        guards, places = self.guards, self.places
        names: dict[str, str] = {}
        watched = iter(self.watched)

        def text(t: str) -> str:
            parts = list(_template(t))
            parts[1::2] = [names.get(n, n) for n in parts[1::2]]
            return "".join(parts)

        for entry in self.log:
            kind = entry[0]
            if kind == "bind":
                _, _, hint, name, _ = entry
                names[name] = guards.bind(self.objects[name], hint)
            elif kind == "add":
                _, condition, label, guard_kind, site = entry
                guards.add(text(condition), self.relabel(label), kind=guard_kind, site=site)
            elif kind == "watch":
                _, expr, _, label, guard_kind = entry
                guards.watch(text(expr), next(watched), self.relabel(label), kind=guard_kind)
            elif kind == "empty":
                guards.stays_empty(places.of(entry[1]), self.relabel(entry[2]))
            elif kind == "note":
                _, guard_kind, label, site, _ = entry
                guards.note(guard_kind, self.relabel(label), site)
            else:
                _, obj, name = entry
                new = places.of(obj)
                if new is not obj:
                    _read_from_class(recorder, obj, new, name, self.relabel)


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
    places = _Correspondence(first.info.real, info.real, ctx)
    mapping: dict[int, TensorProxy] = {}
    back: dict[int, TensorProxy] = {}
    for old, new in (*zip(first.inputs, proxies), *places.tensors):
        if mapping.setdefault(id(old), new) is not new or back.setdefault(id(new), old) is not old:
            raise _Refused
    if first.decomposition is None:
        raise _Refused
    guards = _Guards(recorder.guards, first.log, places, first.info.label, info.label)
    guards.check()
    if first.decomposition is _UNSEEN:
        first.decomposition = _decomposition(first, [old for old, _ in places.tensors])
    decomposition = first.decomposition
    if decomposition is None:
        raise _Refused

    def replay() -> Any:
        guards.commit(recorder)
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
