"""State guards: the Python state a trace read besides its inputs, checked before each cached call.

A trace bakes in more than its inputs' metadata: a module's `self.scale`, which submodule
`self.lin` is, whether a submodule has hooks, the global `SCALE` or tensor `MASK` a function
reads, a closure variable, an object argument's attributes. While tracing, the program runs
on *recording views* that note each such read (`StateRecorder`):

- a module (and every submodule, object attribute and global module it reaches) is traced
  through a view: an instance of a subclass of its class that shares the module's own
  `__dict__`, so it behaves as the module does, while its `__getattribute__`/`__getattr__`
  note what was read and its `__setattr__` keeps writes to itself. Recording never changes
  the user's module or its class, so other threads never see it;
- a Python function (the jitted one, a module's methods, a helper reached through a global
  or attribute) runs as a copy whose globals are a dict that notes each global it looks up;
  its closure cells are guarded as a whole.

Each read becomes one condition (a number or string by type and value, telling -0.0 from 0.0
and NaN as one value; anything else by identity) in a generated check that runs before the
cached program; a failed check sends the call back to be compiled again (`squall.jit`).

Writes are side effects to replay, as eager makes them at every call: an attribute set on a
module or object (`self.count = self.count + 1`, `self.last = x * 2`) is set again after each
call to the value this call computed, and items appended to a list the program reached are
appended again. A write squall cannot replay (deleting an attribute, changing a list other
than by appending, assigning a global) is an error at compile time naming the source line.

A hook on an inner submodule may have Python side effects a trace cannot replay, so while one
is registered the compiled function runs the module eagerly, with a `SquallWarning`; the hook
dicts are guarded, so removing the hook compiles it again. (Hooks on the jitted module itself
are the jitted module's concern, not this one.)
"""
from __future__ import annotations

import copy
import dis
import math
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map
from torch.utils.hooks import RemovableHandle

from .ltorch.base import SquallWarning
from .proxies import TensorProxy
from .sources import load_source
from .symbol import user_stacklevel
from .trace import plain_scalar, scalar_key
from .unbound_methods import stand_in_for

__all__ = ["StateRecorder", "StateGuards", "UnreplayableWrite"]

_MISSING = object()
_SCALARS = (int, float, bool, str, complex, type(None))
# the hook dicts nn.Module._call_impl reads; a non-empty one on an inner module means eager
_HOOK_DICTS = frozenset(
    {
        "_forward_hooks",
        "_forward_pre_hooks",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_pre_hooks_with_kwargs",
        "_forward_hooks_always_called",
    }
)
# nn.Module's own bookkeeping: never rebound after __init__; `training` is in the cache key
_MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) - _HOOK_DICTS - {"_modules", "_parameters", "_buffers"}


class UnreplayableWrite(RuntimeError):
    """The program changes Python state in a way squall cannot replay at every call."""


def _where() -> str:
    """The user's source line making the current call (the nearest frame outside squall and torch)."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith("squall") or module.startswith("torch") or frame.f_code.co_filename == __file__):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _store_line(code: types.CodeType, name: str) -> str | None:
    """Where `code` (or code nested in it) assigns the global `name`, as file:line."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") and ins.argval == name:
            return f"{code.co_filename}:{ins.positions.lineno}"
    nested = (_store_line(c, name) for c in code.co_consts if isinstance(c, types.CodeType))
    return next((found for found in nested if found), None)


def _user_function(fn: Any) -> bool:
    """A plain Python function of the user's (not torch's or squall's), whose globals can be watched."""
    if type(fn) is not types.FunctionType or type(fn.__globals__) is not dict:
        return False
    module = fn.__globals__.get("__name__") or ""
    return not (module == "torch" or module.startswith(("torch.", "squall")))


def _traced_closure(fn: types.FunctionType) -> tuple | None:
    """`fn`'s closure cells, with a torch.Tensor C method held in one (`op = torch.Tensor.__radd__`
    captured before tracing) in a new cell holding its stand-in, unless `fn` assigns that variable."""
    cells = fn.__closure__
    if not cells:
        return cells
    traced, assigned = [], None
    for name, cell in zip(fn.__code__.co_freevars, cells):
        try:
            value = cell.cell_contents
        except ValueError:
            traced.append(cell)
            continue
        stand_in = stand_in_for(value)
        if stand_in is not value and assigned is None:
            assigned = {i.argval for i in dis.get_instructions(fn.__code__) if i.opname in ("STORE_DEREF", "DELETE_DEREF")}
        traced.append(cell if stand_in is value or name in assigned else types.CellType(stand_in))
    return tuple(traced)


def _viewable(obj: Any) -> bool:
    """An object whose attribute reads can be recorded through a view sharing its __dict__."""
    cls = type(obj)
    if isinstance(obj, torch.nn.Module):
        return True
    # a class of the user's or a library's (a config); not the standard library's (a
    # threading.Event's state must stay real) nor torch's
    package = cls.__module__.partition(".")[0]
    return (
        cls.__new__ is object.__new__
        and package not in sys.stdlib_module_names
        and package not in ("builtins", "torch", "squall")
        and not isinstance(obj, (type, types.ModuleType, torch.Tensor, BaseException))
        and isinstance(getattr(obj, "__dict__", None), dict)
        and "__slots__" not in cls.__dict__
    )


# --- recording views --------------------------------------------------------------------------


class _ViewInfo:
    """What a view stands for: the real object, where it was reached, its own pending writes."""

    __slots__ = ("real", "dict", "label", "recorder", "in_tree", "is_root", "writes")

    def __init__(self, real, label, recorder, in_tree, is_root):
        self.real = real
        self.dict = real.__dict__
        self.label = label
        self.recorder = recorder
        self.in_tree = in_tree  # a module of the jitted tree: its parameters are inputs
        self.is_root = is_root
        self.writes: dict[str, Any] = {}  # attributes the program set, newest value


def _info(view) -> _ViewInfo:
    return object.__getattribute__(view, "_squall_view_info")


def _view_getattribute(self, name: str):
    info = _info(self)
    if name in info.writes:
        return info.writes[name]
    value = type(info.real).__getattribute__(self, name)
    if name in info.dict and info.dict[name] is value:
        return info.recorder._read_attribute(info, name, value)
    if type(value) is types.MethodType and value.__self__ is self and _user_function(value.__func__):
        return types.MethodType(info.recorder._recording_function(value.__func__), self)
    return value


def _view_getattr(self, name: str):
    info = _info(self)
    if name in info.writes:
        return info.writes[name]
    getattr_ = getattr(type(info.real), "__getattr__", None)
    try:
        if getattr_ is None:
            raise AttributeError(name)
        value = getattr_(self, name)
    except AttributeError:
        info.recorder._read_absent(info, name)
        raise
    return info.recorder._read_slot(info, name, value)


def _view_setattr(self, name: str, value):
    info = _info(self)
    info.recorder._write(info, name, value)


def _view_delattr(self, name: str):
    raise UnreplayableWrite(
        f"squall: the program deletes attribute {name!r} of {_info(self).label} ({_where()}); squall cannot "
        "replay that at every call: delete it outside the compiled function"
    )


def _view_new(cls, *args, **kwargs):
    # code that builds a new object of its own class (`self.__class__(...)`, as slicing a
    # ModuleList does) gets a plain object of the real class, not a view without a subject
    return cls.__mro__[1](*args, **kwargs)


def _view_copy(self):
    return copy.copy(_info(self).real)


def _view_deepcopy(self, memo):
    # a copy is of the real object: the view's own slot holds the recorder, and through it the
    # module tree being traced, which a deep copy must never reach
    return copy.deepcopy(_info(self).real, memo)


def _view_reduce_ex(self, protocol):
    return _info(self).real.__reduce_ex__(protocol)


_VIEW_CLASSES: dict[type, type] = {}


def _view_class(cls: type) -> type:
    view = _VIEW_CLASSES.get(cls)
    if view is None:
        namespace = {
            "__slots__": ("_squall_view_info",),
            "__new__": _view_new,
            "__copy__": _view_copy,
            "__deepcopy__": _view_deepcopy,
            "__reduce_ex__": _view_reduce_ex,
            "__getattribute__": _view_getattribute,
            "__getattr__": _view_getattr,
            "__setattr__": _view_setattr,
            "__delattr__": _view_delattr,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        }
        view = _VIEW_CLASSES[cls] = type(cls.__name__, (cls,), namespace)
    return view


class _RecordedList(list):
    """A list the program reached, copied: notes whether its items were read, so that a list
    only appended to (a log) is not guarded on its contents, which change every call; a change
    other than appending is refused where it is made."""

    __slots__ = ("items_read", "label", "recorder")

    # an object item comes back as a view, as an object attribute does: a write to it (a KV
    # cache's layer, `layer.keys = torch.cat(...)`) is replayed, never left holding a proxy
    def __getitem__(self, i):
        self.items_read = True
        item = list.__getitem__(self, i)
        if type(i) is slice:
            return [self.recorder._item(v, f"an item of {self.label}") for v in item]
        return self.recorder._item(item, f"{self.label}[{i}]")

    def __iter__(self):
        self.items_read = True
        return (self.recorder._item(v, f"{self.label}[{i}]") for i, v in enumerate(list.__iter__(self)))

    def __reversed__(self):
        return iter(self[::-1])


def _held_items(recorded: _RecordedList) -> list:
    """The items a recorded list holds, not views of them (squall's own reading, noting nothing)."""
    return list(list.__iter__(recorded))


def _noting_read(base: Callable) -> Callable:
    def reading(self, *args):
        self.items_read = True
        return base(self, *args)

    return reading


def _refused(name: str) -> Callable:
    def change(self, *args):
        raise UnreplayableWrite(
            f"squall: the program changes {self.label} other than by appending to it ({name}, at {_where()}); "
            "squall cannot replay that at every call"
        )

    return change


for _name in ("__len__", "__contains__", "index", "count", "copy", "__eq__"):
    setattr(_RecordedList, _name, _noting_read(getattr(list, _name)))
for _name in ("pop", "insert", "remove", "clear", "sort", "reverse", "__setitem__", "__delitem__", "__imul__"):
    setattr(_RecordedList, _name, _refused(_name))


# --- the recorder -------------------------------------------------------------------------------


class StateRecorder:
    """Records, while one program is traced, the Python state it read and wrote."""

    def __init__(self, module: torch.nn.Module | None, arg_offset: int):
        self.module = module
        self.arg_offset = arg_offset  # a module's generated function takes params first
        self.guards = StateGuards()
        self._views: dict[int, Any] = {}
        self._functions: dict[int, types.FunctionType] = {}
        self._tree = {id(m) for m in module.modules()} if module is not None else set()
        self._lists: list[tuple[list, _RecordedList, str, str]] = []  # (real, copy, label, where)
        self._list_copies: dict[int, _RecordedList] = {}
        self._write_order: list[_ViewInfo] = []
        self._wrote: list[tuple[dict, Callable, dict]] = []  # (globals as they were, function, its recording globals)

    # views

    def view(self, obj: Any, label: str, *, is_root: bool = False) -> Any:
        v = self._views.get(id(obj))
        if v is None:
            v = object.__new__(_view_class(type(obj)))
            object.__setattr__(v, "_squall_view_info", _ViewInfo(obj, label, self, id(obj) in self._tree, is_root))
            object.__setattr__(v, "__dict__", obj.__dict__)
            self._views[id(obj)] = v
        return v

    def entry(self, fn: Callable, args: tuple, kwargs: dict) -> tuple[Callable, tuple, dict]:
        """The callable to trace in place of `fn` (the module's forward, or the function), and
        its arguments with object arguments replaced by views."""
        if self.module is not None:
            # its own hooks run eagerly around the compiled forward (squall.wrappers)
            fn = self.view(self.module, "the module", is_root=True).forward
        elif _user_function(fn):
            fn = self._recording_function(fn)
        elif type(fn) is types.MethodType and _user_function(fn.__func__) and _viewable(fn.__self__):
            # a bound method: its object is read like a module's attributes
            fn = types.MethodType(self._recording_function(fn.__func__), self.view(fn.__self__, f"{type(fn.__self__).__name__} object"))
        else:
            fn = stand_in_for(fn)  # squall.jit(torch.Tensor.cfloat): torch's method object takes no proxy
        args = tuple(self._argument(a, f"args[{i + self.arg_offset}]", f"argument {i}") for i, a in enumerate(args))
        kwargs = {k: self._argument(v, f"kwargs[{plain_scalar(k)!r}]", f"keyword argument {k!r}") for k, v in kwargs.items()}
        return fn, args, kwargs

    def _argument(self, value: Any, expr: str, label: str) -> Any:
        if type(value) in _SCALARS or isinstance(value, (TensorProxy, torch.nn.Module)) or not _viewable(value):
            return value
        self.guards.root(value, expr)
        return self.view(value, label)

    def _recording_function(self, fn: types.FunctionType) -> types.FunctionType:
        copy = self._functions.get(id(fn))
        if copy is None:
            recorder, real = self, fn.__globals__

            class RecordingGlobals(dict):
                __slots__ = ()

                def __getitem__(self, name):
                    value = dict.__getitem__(self, name)
                    return recorder._read_global(real, name, value, fn)

            watched = RecordingGlobals(real)
            # torch.Tensor's C methods held as defaults or closure variables (squall.unbound_methods)
            defaults = tuple(map(stand_in_for, fn.__defaults__)) if fn.__defaults__ else fn.__defaults__
            copy = types.FunctionType(fn.__code__, watched, fn.__name__, defaults, _traced_closure(fn))
            copy.__kwdefaults__ = {k: stand_in_for(v) for k, v in fn.__kwdefaults__.items()} if fn.__kwdefaults__ else fn.__kwdefaults__
            copy.__qualname__ = fn.__qualname__
            self._functions[id(fn)] = copy
            self._wrote.append((dict(real), fn, watched))
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                self.guards.watch(f"{self.guards.bind(cell, 'cell')}.cell_contents", value, f"closure variable {name!r} of {fn.__qualname__}")
        return copy

    # reads

    def _read_attribute(self, info: _ViewInfo, name: str, value: Any) -> Any:
        if name == "training" and not info.in_tree:
            return self._reached(value, f"{self._dict_expr(info)}['training']", f"the training flag of {info.label}")
        if name in _MODULE_INTERNALS or name == "__dict__":
            return value  # bookkeeping; the jitted tree's training flags are in the cache key
        if isinstance(value, TensorProxy) or (info.in_tree and isinstance(value, torch.Tensor)):
            return value  # a tensor attribute of the jitted tree: an input, read at every call
        if name in _HOOK_DICTS or name in ("_modules", "_parameters", "_buffers"):
            bound = self.guards.bind(value, "d")
        if name in _HOOK_DICTS:
            if info.is_root:
                return value  # the jitted module's own hooks: JittedModule's concern
            if value:
                self.guards.add(f"tuple({bound}) == {self.guards.bind(tuple(value), 'k')}", f"the hooks of {info.label}")
            else:
                self.guards.stays_empty(value, f"the hooks of {info.label}")
            if value:
                hook = next(iter(value.values()))
                code = getattr(hook, "__code__", None)
                where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
                self.guards.eager_because.append(
                    f"{info.label} has a {name.strip('_').replace('_', ' ')} hook {getattr(hook, '__qualname__', hook)!r}{where}, "
                    "whose Python side effects a compiled trace cannot replay at every call"
                )
                return type(value)()  # not run while tracing: the module runs eagerly instead
            return value
        if name == "_modules":
            # the same modules in the same order (a key renamed with its module kept is not seen)
            self.guards.add(f"list({bound}.values()) == {self.guards.bind(list(value.values()), 'k')}", f"the submodules of {info.label}")
            return {k: (self.view(m, f"{info.label}.{k}" if not info.is_root else f"submodule {k!r}") if m is not None else None) for k, m in value.items()}
        if name in ("_parameters", "_buffers") and not info.in_tree:
            # not inputs: each is a constant of the trace, so which tensor each is matters
            keys, tensors = self.guards.bind(list(value), "k"), self.guards.bind(list(value.values()), "k")
            self.guards.add(f"list({bound}) == {keys} and _same_items(list({bound}.values()), {tensors})", f"the {name[1:]} of {info.label}")
            return value
        if name in ("_parameters", "_buffers"):
            present = [k for k, v in value.items() if v is not None]
            self.guards.add(f"[k for k, v in {bound}.items() if v is not None] == {self.guards.bind(present, 'k')}", f"the {name[1:]} of {info.label}")
            return value
        return self._reached(value, f"{self._dict_expr(info)}[{plain_scalar(name)!r}]", f"attribute {name!r} of {info.label}")

    def _dict_expr(self, info: _ViewInfo) -> str:
        # an argument is reached through the call's arguments (another object may be equal to
        # it by the cache key); anything else is guarded by identity where it was reached
        rooted = self.guards.rooted(info.real)
        return f"{rooted}.__dict__" if rooted is not None else self.guards.bind(info.dict, "d")

    def _reached(self, value: Any, expr: str, label: str) -> Any:
        """A value read from an attribute or global: guarded; a list or object comes back as a
        recording copy or view so that what is done with it is seen too."""
        self.guards.watch(expr, value, label)
        if type(value) is list:
            copy = self._list_copies.get(id(value))
            if copy is None:
                copy = self._list_copies[id(value)] = _RecordedList(value)
                copy.items_read = False
                copy.label = label
                copy.recorder = self
                self._lists.append((value, copy, label, expr))
            return copy
        if _user_function(value):
            return self._recording_function(value)  # a helper's own global reads are seen too
        if isinstance(value, torch.nn.Module) or (_viewable(value) and not callable(value)):
            return self.view(value, label)
        return stand_in_for(value)

    def _item(self, value: Any, label: str) -> Any:
        """An item of a list the program reached (guarded with the list's items), as it is to use it."""
        return self.view(value, label) if isinstance(value, torch.nn.Module) or (_viewable(value) and not callable(value)) else value  # `radd = torch.Tensor.__radd__` taken before tracing takes proxies too

    def _read_slot(self, info: _ViewInfo, name: str, value: Any) -> Any:
        d = info.dict
        for store in ("_parameters", "_buffers", "_modules"):
            held = d.get(store, {})
            if name not in held:
                continue
            expr = f"{self.guards.bind(held, 'd')}[{plain_scalar(name)!r}]"
            label = f"{store[1:-1]} {name!r} of {info.label}"
            if store == "_modules":
                self.guards.watch(expr, held[name], label)
                return self.view(value, f"{info.label}.{name}" if not info.is_root else f"submodule {name!r}") if value is not None else None
            if info.in_tree:
                # a parameter or buffer of the jitted tree is an input, read at every call, and
                # its removal is seen there; what is left to check is a None one being set
                if held[name] is None:
                    self.guards.add(f"{expr} is None", label)
            else:
                self.guards.watch(expr, held[name], label)
            return value
        return value  # from a user class's own __getattr__

    def _read_absent(self, info: _ViewInfo, name: str) -> None:
        stores = [self.guards.bind(info.dict.get(s, {}), "d") for s in ("_parameters", "_buffers", "_modules")]
        d = self._dict_expr(info)
        self.guards.add(" and ".join(f"{plain_scalar(name)!r} not in {s}" for s in [d, *stores]), f"attribute {name!r} of {info.label} (absent)")

    def _read_global(self, real: dict, name: str, value: Any, fn: types.FunctionType) -> Any:
        return self._reached(value, f"{self.guards.bind(real, 'g')}[{plain_scalar(name)!r}]", f"global {name!r} of {fn.__qualname__}")

    # writes

    def _write(self, info: _ViewInfo, name: str, value: Any) -> None:
        where = _where()
        if name in _HOOK_DICTS or name in _MODULE_INTERNALS or name in ("_modules", "_parameters", "_buffers"):
            raise UnreplayableWrite(f"squall: the program sets {name!r} of {info.label} ({where}); squall cannot replay that at every call")
        if isinstance(value, (torch.nn.Parameter, torch.nn.Module)):
            raise UnreplayableWrite(
                f"squall: the program sets {info.label}.{name} to a {type(value).__name__} ({where}); squall cannot "
                "replay creating parameters or modules at every call: create them in __init__"
            )
        if info not in self._write_order:
            self._write_order.append(info)
        info.writes[name] = value

    def finish(self, result: Any) -> Any:
        """After the program ran: the output with the values to replay appended (as
        `(output, effects)`) when it wrote Python state; the writes it made noted as effects."""
        for before, fn, watched in self._wrote:
            for name, value in watched.items():
                # (a dunder is the interpreter's bookkeeping: warnings' __warningregistry__)
                if before.get(name, _MISSING) is not value and not name.startswith("__"):
                    raise UnreplayableWrite(
                        f"squall: {fn.__qualname__} assigns the global {name!r} ({_store_line(fn.__code__, name) or fn.__code__.co_filename}); squall "
                        "cannot replay assigning globals at every call: pass the value in, or return it"
                    )
        values = []
        for info in self._write_order:
            target = self.guards.bind(info.real, "o")
            for name, value in info.writes.items():
                # a name is emitted as a plain str, never by a subclass's own repr (as everywhere here)
                self.guards.effects.append(f"_setattr({target}, {plain_scalar(name)!r}, effects[{len(values)}])")
                values.append(value)
        for real, recorded, label, expr in self._lists:
            if recorded.items_read:
                self.guards.add(f"_same_items({expr}, {self.guards.bind(list(real), 'k')})", f"the items of {label}")
            items = _held_items(recorded)
            if len(items) < len(real) or any(a is not b for a, b in zip(real, items)):  # list.__init__ on it, say
                raise UnreplayableWrite(f"squall: the program changes {label} other than by appending to it; squall cannot replay that")
            if len(items) > len(real):
                self.guards.effects.append(f"{self.guards.bind(real, 'l')}.extend(effects[{len(values)}])")
                values.append(items[len(real):])
        # a view never leaves the trace: an output or value set that is one is the real object
        result, values = tree_map(self._unview, (result, values))
        return (result, tuple(values)) if values else result

    def existing(self, x: Any) -> bool:
        """Whether the program returns, in `x`, an object it did not make but was given or reached
        (and read through a view): that object itself is the output, as in eager. Only one the
        cache key and the guards tell apart by identity: for one equal to others by its own
        `__eq__`, a later call may bring an equal one, and the output is rebuilt instead."""
        return id(x) in self._views and type(x).__eq__ is object.__eq__ and not isinstance(x, torch.nn.Module)

    def _unview(self, x: Any) -> Any:
        info = type(x).__dict__.get("_squall_view_info")
        return info.__get__(x).real if info is not None and type(x) in _VIEW_CLASSES.values() else x


# --- the check ----------------------------------------------------------------------------------


def _same_items(items: Any, expected: list) -> bool:
    """A list read by a trace still holds what it held: the same objects, or equal numbers."""
    if type(items) is not list or len(items) != len(expected):
        return False
    return all(a is b or (type(a) in _SCALARS and type(a) is type(b) and _same_scalar(a, b)) for a, b in zip(items, expected))


def _same_scalar(a: Any, b: Any) -> bool:
    return scalar_key(a) == scalar_key(b) if type(a) in (float, complex) else a == b


class StateGuards:
    """The conditions a compiled program's state reads put on later calls, and its writes to replay.

    `runner(fn, stale)` is what the cache calls: `fn` when there is nothing to check or replay;
    otherwise a generated function that checks every condition (calling `stale(args, kwargs)`
    when one fails), runs `fn`, and replays the writes.
    """

    def __init__(self):
        self.conditions: list[str] = []
        self.labels: list[str] = []
        self.effects: list[str] = []  # statements replaying the writes, reading `effects`
        self.eager_because: list[str] = []  # why the program must run eagerly (inner hooks)
        self.namespace: dict[str, Any] = {
            "_copysign": math.copysign,
            "_same_items": _same_items,
            "_setattr": setattr,
        }
        self._bound: dict[int, str] = {}
        self._roots: dict[int, str] = {}  # id(argument object) -> how the check reaches it
        self._seen: set[str] = set()
        # containers that were empty (the hook dicts of most modules): one C-level any() checks all
        self._empty: dict[int, tuple[Any, str]] = {}
        self._holds: Callable | None = None
        self._runners: dict[int, tuple[Callable, Callable]] = {}  # id(program) -> (program, its runner)

    def bind(self, obj: Any, hint: str) -> str:
        """The name the generated check reads `obj` under (the object itself, kept alive)."""
        name = self._bound.get(id(obj))
        if name is None:
            name = self._bound[id(obj)] = f"{hint}{len(self._bound)}"
            self.namespace[name] = obj
        return name

    def root(self, obj: Any, expr: str) -> None:
        """`obj` is reached at call time as `expr` (an argument), not as a bound object."""
        self._roots[id(obj)] = expr

    def rooted(self, obj: Any) -> str | None:
        return self._roots.get(id(obj))

    def add(self, condition: str, label: str) -> None:
        if condition not in self._seen:
            self._seen.add(condition)
            self.conditions.append(condition)
            self.labels.append(label)

    def stays_empty(self, container: Any, label: str) -> None:
        """Guard that `container` (a hook dict the trace found empty) is still empty.

        Every hook registration makes a `RemovableHandle`, whose class counts them: while the
        count is what it was at trace time, no hook was added anywhere and the check stops
        there; once it moved, every call looks at each dict (a C-level any())."""
        if not self._empty:
            self.conditions.append("(_RemovableHandle.next_id == _HANDLES_AT_TRACE or not _any(_EMPTY))")
            self.labels.append("the hooks of the submodules")
            self.namespace.update(_any=any, _RemovableHandle=RemovableHandle, _HANDLES_AT_TRACE=RemovableHandle.next_id)
        self._empty.setdefault(id(container), (container, label))
        self.namespace["_EMPTY"] = tuple(c for c, _ in self._empty.values())

    def watch(self, expr: str, value: Any, label: str) -> None:
        """Guard that `expr` still gives `value`: numbers and strings by type and value, else identity."""
        t = type(value)
        if value is None or t is bool:
            self.add(f"{expr} is {value!r}", label)
        elif t is float and value != value:
            self.add(f"(type(_v := {expr}) is float and _v != _v)", label)
        elif t is float and value == 0.0:
            self.add(f"(type(_v := {expr}) is float and _v == 0.0 and _copysign(1.0, _v) == {math.copysign(1.0, value)!r})", label)
        elif t in (int, float, str):
            self.add(f"(type(_v := {expr}) is {t.__name__} and _v == {self.bind(value, 'k')})", label)
        elif t is complex:
            self.add(f"(type(_v := {expr}) is complex and repr(_v) == {repr(value)!r})", label)
        else:
            self.add(f"{expr} is {self.bind(value, 'k')}", label)

    @property
    def eager(self) -> bool:
        return bool(self.eager_because)

    def runner(self, fn: Callable, stale: Callable[[tuple, dict], Any]) -> Callable:
        if not self.conditions and not self.effects:
            return fn
        made = self._runners.get(id(fn))
        if made is not None and made[0] is fn:
            return made[1]  # an entry cached again when its state came back: same runner
        lines = ["def run(*args, **kwargs):"]
        if self.conditions:
            lines += self._check("holds")
            lines += ["    if not holds:", "        return stale(args, kwargs)"]
        lines += self._body()
        namespace = dict(self.namespace, fn=fn, stale=stale)
        load_source("\n".join(lines) + "\n", "state-guards", namespace)
        run = namespace["run"]
        run.__wrapped__ = fn  # the program it guards
        self._runners[id(fn)] = (fn, run)
        return run

    def replaying(self, fn: Callable) -> Callable:
        """`fn` with the writes replayed, unchecked: for the call the program was traced for."""
        if not self.effects:
            return fn
        namespace = dict(self.namespace, fn=fn)
        load_source("\n".join(["def run(*args, **kwargs):", *self._body()]) + "\n", "state-effects", namespace)
        return namespace["run"]

    def _check(self, result: str) -> list[str]:
        # an attribute or key gone (a KeyError), an argument no longer of its type, a user
        # __eq__ that raises: the state is not what was traced
        return [
            "    try:",
            f"        {result} = {' and '.join(self.conditions) or 'True'}",
            "    except Exception:",
            f"        {result} = False",
        ]

    def _body(self) -> list[str]:
        if not self.effects:
            return ["    return fn(*args, **kwargs)"]
        return ["    out, effects = fn(*args, **kwargs)", *(f"    {e}" for e in self.effects), "    return out"]

    def holds(self, args: tuple, kwargs: dict) -> bool:
        """Whether every condition holds for a call with these arguments."""
        if self._holds is None:
            namespace = dict(self.namespace)
            load_source("\n".join(["def holds(args, kwargs):", *self._check("holds"), "    return holds"]) + "\n", "state-guards", namespace)
            self._holds = namespace["holds"]
        return self._holds(args, kwargs)

    def failed(self, args: tuple, kwargs: dict) -> str | None:
        """The label of the first condition that fails for this call (None: all hold)."""
        for container, label in self._empty.values():
            if container:
                return label
        for condition, label in zip(self.conditions, self.labels):
            try:
                ok = eval(condition, dict(self.namespace), {"args": args, "kwargs": kwargs})  # noqa: S307 - squall's own source
            except Exception:  # noqa: BLE001 - a condition that cannot be evaluated does not hold
                ok = False
            if not ok:
                return label
        return None

    def warn_eager(self, what: str) -> None:
        warnings.warn(
            f"squall: {'; '.join(self.eager_because)}: {what} runs eagerly while it is registered "
            "(removing it compiles the program again)",
            SquallWarning,
            stacklevel=user_stacklevel(),
        )
