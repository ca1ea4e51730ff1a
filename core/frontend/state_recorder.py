"""The state recorder: while one program is traced, the Python state it reads and writes
besides its inputs, which become its state guards and the writes to replay (what is recorded
and why: `squall.frontend.state_guards`).

`StateRecorder` makes the views a program reads modules and objects through, turns its
arguments into views or recording copies, and at `finish` turns what the program wrote into
effects to replay. Its reads are in its bases: attributes and globals
(`squall.frontend.attribute_reads`), containers, functions and partials
(`squall.frontend.recording_copies`), objects reached through the call's arguments
(`squall.frontend.argument_routes`).
"""
from __future__ import annotations

import collections
import functools
import operator
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map

from ..proxies import TensorProxy, size_leaf
from ..trace import Itself, Reached, plain_scalar
from .argument_routes import ArgumentRoutes
from .attribute_reads import AttributeReads
from .recording_copies import RecordingCopies
from .state_guards import StateGuards
from .python_effects import refuse_python_state_owner
from .recomputed_regions import refuse_recomputed_write
from .recorded_containers import RECORDED_CONTAINERS, _RecordedDeque, _RecordedList, _RecordedSet
from .state_views import (
    _HOOK_DICTS,
    _MISSING,
    _MODULE_INTERNALS,
    _ModuleReads,
    restore_contents,
    same_contents,
    _store_line,
    UnreplayableWrite,
    _user_function,
    _view_class,
    _VIEW_CLASSES,
    by_structure,
    viewable,
    _ViewInfo,
    _where,
)

__all__ = ["StateRecorder"]


def _changed_names(now: dict, before: dict) -> list[str]:
    """The names set, deleted or rebound to another object in `now` since `before`, in order."""
    return sorted(k for k in now.keys() | before.keys() if now.get(k, _MISSING) is not before.get(k, _MISSING))


class StateRecorder(AttributeReads, RecordingCopies, ArgumentRoutes):
    """Records, while one program is traced, the Python state it read and wrote."""

    def __init__(self, module: torch.nn.Module | None, arg_offset: int, tree: list[tuple[str, torch.nn.Module]] | None = None):
        """`tree`: the module's `named_modules(remove_duplicate=False)` where the caller has it."""
        self.module = module
        self.arg_offset = arg_offset  # a module's generated function takes params first
        self.guards = StateGuards()
        self._views: dict[int, Any] = {}
        self._functions: dict[int, types.FunctionType] = {}
        self._tree = {id(m) for _, m in (tree if tree is not None else module.named_modules())} if module is not None else set()
        self._lists: list[tuple[list, _RecordedList, str, str]] = []  # (real, copy, label, where)
        self._list_copies: dict[int, _RecordedList] = {}
        self._dict_copies: dict[int, Any] = {}  # id(real dict, OrderedDict, defaultdict) -> its recording copy
        self._set_copies: dict[int, _RecordedSet] = {}
        self._deques: list[tuple[_RecordedDeque, str]] = []  # (recording copy, where it was reached)
        self._snapshots: list[tuple[Any, Any, str]] = []  # (array or bytearray reached, its contents then, label)
        self._classes: dict[int, Any] = {}  # id(a user's class the program reached) -> its ClassState
        self._init_routes()  # squall.frontend.argument_routes
        self._module_reads: dict[int, _ModuleReads] = {}
        self._originals: dict[int, tuple[Any, Any]] = {}  # id(copy) -> (copy, what it stands for)
        self._write_order: list[_ViewInfo] = []
        self._cells: list[tuple[types.CellType, Any, str, types.FunctionType]] = []  # (recording cell, its value, name, function)
        self._plain_cells: dict[int, types.CellType] = {}  # id(a closure cell of numbers and the like) -> the copies' cell
        self._function_attributes: list[tuple[types.FunctionType, dict, types.FunctionType]] = []  # (copy, its attributes as made, function)
        self._class_readers: list[_ViewInfo] = []  # views with attributes read from their class
        # (class, name) -> the function or descriptor the class held when its guards were made
        self._class_guarded: dict[tuple[type, str], Any] = {}
        self._global_hooks: bool | None = None  # whether global module hooks run (None: no module called yet)
        # module class -> whether nn.Module's own call runs it (state_views._hookless_module_call)
        self._plain_module_classes: dict[type, bool] = {}
        self._wrote: list[tuple[dict, Callable, dict]] = []  # (globals as they were, function, its recording globals)
        # makes a tensor an object's attribute holds (a KV cache's keys) an input of the program,
        # read from the object at every call: (tensor, owner dict, key, label) -> its proxy; None:
        # such tensors are constants of the trace, guarded by identity (squall.frontend.tracing sets it)
        self.tensor_input: Callable[[torch.Tensor, dict, str, str], TensorProxy] | None = None
        # makes an int an object reached through the arguments holds a size symbol (value, key,
        # route) -> the symbol, or None where it stays a constant guarded by value (squall.frontend.tracing)
        self.size_input: Callable[[int, str, tuple], Any] | None = None
        # a repeated submodule's call copies its first call's record (squall.frontend.module_replays,
        # which squall.frontend.tracing sets); None: every call runs its forward
        self.module_replays: Any = None

    # views

    def view(self, obj: Any, label: str, *, is_root: bool = False) -> Any:
        v = self._views.get(id(obj))
        if v is None:
            v = object.__new__(_view_class(type(obj)))
            object.__setattr__(v, "_squall_view_info", _ViewInfo(obj, label, self, id(obj) in self._tree, is_root))
            if hasattr(obj, "__dict__"):
                object.__setattr__(v, "__dict__", obj.__dict__)
            self._views[id(obj)] = v
        return v

    def entry(self, fn: Callable, args: tuple, kwargs: dict) -> tuple[Callable, tuple, dict]:
        """The callable to trace in place of `fn` (the module's forward, or the function), and
        its arguments with object arguments replaced by views."""
        refuse_python_state_owner(fn, "the jitted method's object")
        if self.module is not None:
            # its own hooks run eagerly around the compiled forward (squall.runtime.wrappers)
            fn = self.view(self.module, "the module", is_root=True).forward
        elif _user_function(fn):
            fn = self._recording_function(fn, jitted=True)
        elif type(fn) is types.MethodType and viewable(fn.__self__) and (_user_function(fn.__func__) or isinstance(fn.__self__, torch.nn.Module)):
            # a bound method, a torch module's too (`squall.jit(model.forward)`): its object is
            # read like a module's attributes
            func = self._recording_function(fn.__func__) if _user_function(fn.__func__) else fn.__func__
            fn = types.MethodType(func, self.view(fn.__self__, f"{type(fn.__self__).__name__} object"))
        elif type(fn) is functools.partial:
            fn = self._recording_partial(fn, "the jitted partial")  # its keywords can change in place
        elif viewable(fn):
            fn = self.view(fn, f"{type(fn).__name__} object")  # a callable object: read as its __call__ runs
        args = tuple(self._argument(a, f"args[{i + self.arg_offset}]", f"argument {i}", ("args", i)) for i, a in enumerate(args))
        kwargs = {k: self._argument(v, f"kwargs[{plain_scalar(k)!r}]", f"keyword argument {k!r}", ("kwargs", k)) for k, v in kwargs.items()}
        return fn, args, kwargs

    # writes

    def _write(self, info: _ViewInfo, name: str, value: Any) -> None:
        where = _where()
        if name in _HOOK_DICTS or name in _MODULE_INTERNALS or name in ("_modules", "_parameters", "_buffers"):
            raise UnreplayableWrite(f"squall: the program sets {name!r} of {info.label} ({where}); squall cannot replay that at every call")
        if type(value) is not TensorProxy and isinstance(value, (torch.nn.Parameter, torch.nn.Module)):
            raise UnreplayableWrite(
                f"squall: the program sets {info.label}.{name} to a {type(value).__name__} ({where}); squall cannot "
                "replay creating parameters or modules at every call: create them in __init__"
            )
        refuse_recomputed_write(f"{info.label}.{name} ({where})")
        if info not in self._write_order:
            self._write_order.append(info)
        info.writes[name] = value

    def finish(self, result: Any) -> Any:
        """After the program ran: the output with the values to replay appended (as
        `(output, effects)`) when it wrote Python state; the writes it made noted as effects."""
        self._classes_changed()
        for copy, items, label, _ in self._namespaces.values():
            if _changed_names(vars(copy), items):
                raise UnreplayableWrite(f"squall: the program sets or deletes attributes of {label}, a SimpleNamespace; squall cannot replay that at every call")
        for before, fn, watched in self._wrote:
            if len(watched) == len(before) and all(map(operator.is_, watched, before)) and all(map(operator.is_, watched.values(), before.values())):
                continue  # the same names in the same order, each the same object: nothing assigned
            for name, value in watched.items():
                # (a dunder is the interpreter's bookkeeping: warnings' __warningregistry__)
                if before.get(name, _MISSING) is not value and not name.startswith("__"):
                    raise UnreplayableWrite(
                        f"squall: {fn.__qualname__} assigns the global {name!r} ({_store_line(fn.__code__, name) or fn.__code__.co_filename}); squall "
                        "cannot replay assigning globals at every call: pass the value in, or return it"
                    )
            for name in before:
                if name not in watched and not name.startswith("__"):  # `del` of a global: eager's module loses it
                    raise UnreplayableWrite(
                        f"squall: {fn.__qualname__} deletes the global {name!r} ({_store_line(fn.__code__, name) or fn.__code__.co_filename}); squall "
                        "cannot replay deleting globals at every call"
                    )
        for copy, attributes, fn in self._function_attributes:
            changed = _changed_names(copy.__dict__, attributes)
            if changed:
                raise UnreplayableWrite(f"squall: the program sets or deletes {', '.join(map(repr, changed))} on the function {fn.__qualname__}; "
                                        "squall cannot replay that at every call")
        for cell, value, name, fn in self._cells:
            if cell.cell_contents is not value:
                raise UnreplayableWrite(
                    f"squall: {fn.__qualname__} assigns the closure variable {name!r} ({fn.__code__.co_filename}:{fn.__code__.co_firstlineno}); "
                    "squall cannot replay that at every call: pass the value in, or return it"
                )
        for info in self._class_readers:
            # an attribute read from the class is shadowed once the object's __dict__ has it
            names = sorted(info.class_reads)
            label = f"attribute {names[0]!r} of {info.label} (set on the object, over its class's)"
            if len(names) == 1:
                self.guards.add(f"{plain_scalar(names[0])!r} not in {self._dict_expr(info)}", label)
            else:
                self.guards.add(f"{self._dict_expr(info)}.keys().isdisjoint({self.guards.bind(frozenset(names), 'k')})", label)
        values = []
        for info in self._write_order:
            target = self.guards.rooted(info.real) or self.guards.bind(info.real, "o")
            for name, value in info.writes.items():
                # a name is emitted as a plain str, never by a subclass's own repr (as everywhere here)
                self.guards.effects.append(f"_setattr({target}, {plain_scalar(name)!r}, effects[{len(values)}])")
                values.append(value)
        for real, recorded, label, expr in self._lists:
            if recorded.items_read and recorded.target is None:
                self.guards.add(f"_same_items({expr}, {self.guards.bind(list(real), 'k')})", f"the items of {label}")
            initial = recorded.initial
            if len(recorded) < len(initial):  # list.__init__ on it, say
                raise UnreplayableWrite(f"squall: the program changes {label} other than by appending to it or setting its items; squall cannot replay that")
            target = recorded.target if recorded.target is not None else self.guards.bind(real, "l")
            set_at = getattr(recorded, "items_set", ())
            for i, (before, now) in enumerate(zip(initial, recorded)):
                if before is now:
                    continue
                if i not in set_at:  # changed by C code (heapq), say
                    raise UnreplayableWrite(f"squall: the program changes {label} other than by appending to it or setting its items; squall cannot replay that")
                # set again at every call (its length is guarded, or it is the very list traced)
                self.guards.effects.append(f"{target}[{i}] = effects[{len(values)}]")
                values.append(now)
            if len(recorded) > len(initial):
                self.guards.effects.append(f"{target}.extend(effects[{len(values)}])")
                values.append(list(recorded[len(initial):]))
        for recorded, expr in self._deques:
            if recorded.items_read and recorded.target is None:
                self.guards.add(f"_same_items(list({expr}), {self.guards.bind(list(recorded.real), 'k')})", f"the items of {recorded.label}")
            if recorded.appended:
                target = recorded.target if recorded.target is not None else self.guards.bind(recorded.real, "q")
                self.guards.effects.append(f"{target}.extend(effects[{len(values)}])")
                values.append(list(recorded.appended))
        for real, snapshot, label in self._snapshots:
            if not same_contents(real, snapshot):
                restore_contents(real, snapshot)  # the call runs eagerly, which makes the change itself
                raise UnreplayableWrite(
                    f"squall: the program changes {label} (of type {type(real).__name__}); squall cannot replay changes to it"
                )
        for recorded in [*self._dict_copies.values(), *self._argument_copies]:
            real = recorded.target if recorded.target is not None else self.guards.bind(recorded.real, "d")
            if recorded.whole_read and (recorded.target is None or recorded.routed):
                self.guards.same_dict(real, recorded.real, f"the items of {recorded.label}")
            if recorded.keys_set:
                # items set again in the order the program set them; each key is held as it is
                # (a torch.Size key stays one, not rebuilt as a tuple output)
                for k in recorded.keys_set:
                    # (a key the program made from a view, `acts[module] = out` in a hook, is the real object)
                    self.guards.effects.append(f"{real}[{self.guards.bind(self._unview(k), 'k')}] = effects[{len(values)}]")
                    values.append(dict.__getitem__(recorded, k))
        for recorded in self._set_copies.values():
            real = self.guards.bind(recorded.real, "s")
            if recorded.whole_read:
                self.guards.add(f"{real} == {self.guards.bind(frozenset(recorded.real), 'k')}", f"the items of {recorded.label}")
            if recorded.added:
                self.guards.effects.append(f"{real}.update(effects[{len(values)}])")
                values.append(list(recorded.added))
        self._return_arguments_as_themselves(result)
        # a view never leaves the trace: an output or value set that is one is the real object;
        # so is a recording copy of a container the program reached (its changes are replayed
        # on it); one of a list or dict passed in leaves as a plain one (see _put above)
        result, values = tree_map(self._unview, (result, values), is_leaf=lambda x: type(x) in RECORDED_CONTAINERS or size_leaf(x))
        return (result, tuple(values)) if self.guards.effects else result

    def existing(self, x: Any) -> bool:
        """Whether the program returns, in `x`, an object it did not make but was given or reached
        (and read through a view): that object itself is the output, as in eager. Only one the
        cache key and the guards tell apart by identity: for one equal to others by its own
        `__eq__`, a later call may bring an equal one, and the output is rebuilt instead."""
        if type(x) is Itself or type(x) is Reached:
            return True  # a container the program reached (guarded by identity where it was read)
        if type(x) is types.SimpleNamespace and id(x) in self._namespaces:
            return True  # a namespace argument's copy: the call's own takes its place (finish)
        return id(x) in self._views and type(x).__eq__ is object.__eq__ and not isinstance(x, torch.nn.Module)

    def code_objects(self) -> list[types.CodeType]:
        """The code of the functions the program ran through recording copies."""
        return [copy.__code__ for copy in self._functions.values()]

    def _unview(self, x: Any) -> Any:
        standing = self._originals.get(id(x))
        if standing is not None and standing[0] is x:
            return standing[1]
        if type(x) in RECORDED_CONTAINERS:
            if getattr(x, "target", None) is None:
                return Itself(x.real)
            if type(x) is _RecordedList:
                plain = list(list.__iter__(x))
            elif type(x) is _RecordedDeque:
                plain = collections.deque(collections.deque.__iter__(x), maxlen=x.maxlen)
            else:
                plain = {k: dict.__getitem__(x, k) for k in dict.keys(x)}
            return tree_map(self._unview, plain, is_leaf=lambda x: type(x) in RECORDED_CONTAINERS or size_leaf(x))
        info = type(x).__dict__.get("_squall_view_info")
        if info is None or type(x) not in _VIEW_CLASSES.values():
            return x
        real = info.__get__(x).real
        route = self.guards.route_of(real)
        # an object the call gave (keyed by its type): the call's own, reached through its arguments
        return Reached(real, route) if route is not None and by_structure(real) else real
