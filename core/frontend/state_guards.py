"""State guards: the Python state a trace read besides its inputs, checked before each cached call.

A trace bakes in more than its inputs' metadata: a module's `self.scale`, which submodule
`self.lin` is, whether a submodule has hooks, the global `SCALE` or tensor `MASK` a function
reads, a closure variable, an object argument's attributes. While tracing, the program runs
on *recording views* that note each such read (`StateRecorder`; the views and recording
copies themselves are in `squall.frontend.state_views`):

- a module (and every submodule, object attribute and global module it reaches) is traced
  through a view: an instance of a subclass of its class that shares the module's own
  `__dict__` (and reads its `__slots__` from it), so it behaves as the module does, while
  its `__getattribute__`/`__getattr__` note what was read and its `__setattr__` keeps writes
  to itself. Recording never changes the user's module or its class, so other threads never
  see it. A container's `_modules` read gives views, so layers reached by slicing a
  `ModuleList` (`self.layers[:n]`), iterating a `ModuleDict` or `Sequential` are views too;
- an attribute found on the class (a class-body `scale = 2.0`, a method, a property) is
  guarded as the class's own lookup gives it, and the object's `__dict__` is checked not to
  shadow it (for torch's classes only the jitted module's `forward`: one check per module
  per call would cost too much); a name the class's own `__getattribute__` finds elsewhere
  (a transformers config's `attribute_map`) is guarded by asking the object again;
- a Python function (the jitted one, a module's methods, a helper reached through a global,
  attribute, closure cell or argument, a `functools.partial` of one, a callable object's
  `__call__`) runs as a copy whose globals are a dict that notes each global it looks up;
  its closure cells are guarded as a whole, and a module, object or function in one is read
  through as well. A user's own Python module (`settings.SCALE`) is read through a stand-in
  noting each attribute;
- a list, dict, OrderedDict, defaultdict or set reached from any of these (a closure cell
  included) is a recording copy (a list's items guarded once read; a dict's items by key,
  or all of them once iterated; a set's contents once read), its items, and a tuple's,
  read through as the rest. A dict argument is a recording copy too, whose writes are
  replayed on the caller's dict (its contents are in the cache key);
- the program's own `type(obj)` (and `obj.__class__`) gives the class of the object a view
  or copy stands for, torch.Tensor for a traced tensor, as eager's does.

Each read becomes one condition (a number or string by type and value, telling -0.0 from 0.0
and NaN as one value; anything else by identity) in a generated check that runs before the
cached program; a failed check sends the call back to be compiled again (`squall.jit`).

Writes are side effects to replay, as eager makes them at every call: an attribute set on a
module or object (`self.count = self.count + 1`, `self.last = x * 2`) is set again after each
call to the value this call computed, items appended to a list, added to a set or set in a
dict the program reached are appended, added or set again, on the very object (one the
program returns is returned as itself). A write squall cannot replay (deleting an attribute,
changing a list other than by appending, a dict other than by setting items or a set other
than by adding, assigning a global, a closure variable holding a module or object, or a
settings module's attribute) makes calls of that signature run eagerly, with a warning
naming the source line (squall.jit), as does the user's code raising while it is traced.

A forward or forward pre-hook on an inner submodule that is a Python function is traced with the
forward, through a recording copy like any function it calls (`_TRACED_HOOKS`); registering one
while traced is an `EagerFirst` (the call runs eagerly, so eager registers it, once). Any other
hook (a backward hook, an object of torch's) may have side effects a trace cannot replay, so while
one is registered a compiled module splits (`squall.runtime.split`: its forward runs eagerly, each submodule
it calls compiled, the hooked one with its hooks) and a compiled function runs eagerly, with a
`SquallWarning`; the hook
dicts are guarded, so removing the hook compiles it again. The global module hooks
(`register_module_forward_hook` and kin), which eager runs at every module call, are treated
alike for programs that call a module; an empty hook dict costs nothing per call while no hook
was registered anywhere (`StateGuards.stays_empty`). (Hooks on the jitted module itself, and
the global hooks while one is registered, are the jitted module's concern: squall.jit.)

A deque is followed as a list is (appends on the right replayed); an `array.array` or
`bytearray` is guarded by its contents, and a change the program makes to one is undone
when tracing ends and refused (the call runs eagerly). A list, deque or dict passed as an
argument is a recording copy whose writes are replayed on the caller's object, and one the
program returns is the caller's object; an object argument (a KV cache) and what is read of it
are reached through the call's arguments at every call (`squall.frontend.argument_routes`).

Not guarded: other containers than these (a `queue.Queue`); objects of the standard
library's classes and installed packages' Python modules read as objects; an instance-level
`forward` or a method replaced on torch's classes other than for the jitted module.
"""
from __future__ import annotations

import collections
import functools
import keyword
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map

from ..guard_set import GuardSet
from ..ltorch.base import SquallWarning
from ..proxies import TensorProxy, size_leaf, real_tensor
from ..sources import load_source
from ..symbol import user_stacklevel
from ..trace import Itself, Reached, plain_scalar, scalar_key
from .argument_routes import ArgumentRoutes
from .autograd_functions import TracedAutogradFunction, is_autograd_function
from .state_views import (
    _cell_value,
    describe_global_hooks,
    global_hook_dicts,
    _HOOK_DICTS,
    _MISSING,
    _MODULE_INTERNALS,
    _ModuleReads,
    _recordable,
    RECORDED_CONTAINERS,
    RECORDED_DICT_TYPES,
    SNAPSHOT_TYPES,
    _RecordedDeque,
    _RecordedList,
    _RecordedSet,
    _SCALARS,
    _slot_value,
    _store_line,
    EagerFirst,
    HooksWhileTracing,
    UnreplayableWrite,
    _user_function,
    _users_module,
    raised_by_users_code,
    traced_type,
    _view_class,
    _VIEW_CLASSES,
    by_structure,
    viewable,
    _ViewInfo,
    _where,
)

__all__ = ["StateRecorder", "StateGuards", "UnreplayableWrite", "EagerFirst", "raised_by_users_code", "viewable", "by_structure", "global_hook_dicts", "describe_global_hooks"]


# inner modules' hooks traced with the forward (when each is a Python function squall reads
# through); the dicts saying which of them take kwargs or always run; backward hooks never are
_TRACED_HOOKS = frozenset({"_forward_hooks", "_forward_pre_hooks"})
_HOOK_BOOKKEEPING = frozenset({"_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called"})


class _RecordingGlobals(dict):
    """A recorded function's globals: a copy of its module's, whose reads its recorder sees
    (one class for all: a class made per function cost more than the function's trace)."""

    __slots__ = ("recorder", "real", "fn")

    def __getitem__(self, name):
        if name == "type" and not dict.__contains__(self, name):
            # the builtin, for an object read through a view or copy answering with the
            # object's own class, as eager's `type(obj)` does
            return traced_type
        value = dict.__getitem__(self, name)
        return self.recorder._read_global(self.real, name, value, self.fn)


class StateRecorder(ArgumentRoutes):
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
        self._dict_copies: dict[int, Any] = {}  # id(real dict, OrderedDict, defaultdict) -> its recording copy
        self._set_copies: dict[int, _RecordedSet] = {}
        self._deques: list[tuple[_RecordedDeque, str]] = []  # (recording copy, where it was reached)
        self._snapshots: list[tuple[Any, Any, str]] = []  # (array or bytearray reached, its contents then, label)
        self._init_routes()  # squall.frontend.argument_routes
        self._module_reads: dict[int, _ModuleReads] = {}
        self._originals: dict[int, tuple[Any, Any]] = {}  # id(copy) -> (copy, what it stands for)
        self._write_order: list[_ViewInfo] = []
        self._cells: list[tuple[types.CellType, Any, str, types.FunctionType]] = []  # (recording cell, its value, name, function)
        self._class_readers: list[_ViewInfo] = []  # views with attributes read from their class
        self._global_hooks: bool | None = None  # whether global module hooks run (None: no module called yet)
        self._wrote: list[tuple[dict, Callable, dict]] = []  # (globals as they were, function, its recording globals)
        # makes a tensor an object's attribute holds (a KV cache's keys) an input of the program,
        # read from the object at every call: (tensor, owner dict, key, label) -> its proxy; None:
        # such tensors are constants of the trace, guarded by identity (squall.frontend.tracing sets it)
        self.tensor_input: Callable[[torch.Tensor, dict, str, str], TensorProxy] | None = None

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
        if self.module is not None:
            # its own hooks run eagerly around the compiled forward (squall.runtime.wrappers)
            fn = self.view(self.module, "the module", is_root=True).forward
        elif _user_function(fn):
            fn = self._recording_function(fn)
        elif type(fn) is types.MethodType and _user_function(fn.__func__) and viewable(fn.__self__):
            # a bound method: its object is read like a module's attributes
            fn = types.MethodType(self._recording_function(fn.__func__), self.view(fn.__self__, f"{type(fn.__self__).__name__} object"))
        args = tuple(self._argument(a, f"args[{i + self.arg_offset}]", f"argument {i}", ("args", i)) for i, a in enumerate(args))
        kwargs = {k: self._argument(v, f"kwargs[{plain_scalar(k)!r}]", f"keyword argument {k!r}", ("kwargs", k)) for k, v in kwargs.items()}
        return fn, args, kwargs

    def _recording_function(self, fn: types.FunctionType) -> types.FunctionType:
        copy = self._functions.get(id(fn))
        if copy is None:
            real = fn.__globals__
            watched = _RecordingGlobals(real)
            watched.recorder, watched.real, watched.fn = self, real, fn
            # a module, object or function in a closure cell is read through a view or recording
            # copy, in a cell of the copy's own (filled once the copy is known: it may be itself;
            # a nonlocal assignment to such a cell is refused at finish)
            cells = list(fn.__closure__ or ())
            recorded_cells = [i for i, cell in enumerate(cells) if _recordable(_cell_value(cell))]
            for i in recorded_cells:
                cells[i] = types.CellType()
            copy = types.FunctionType(fn.__code__, watched, fn.__name__, fn.__defaults__, tuple(cells) if fn.__closure__ else None)
            copy.__kwdefaults__ = fn.__kwdefaults__
            copy.__qualname__ = fn.__qualname__
            self._functions[id(fn)] = self._standing_for(copy, fn)
            for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())):
                value = _cell_value(cell)
                if value is _MISSING:
                    continue
                label = f"closure variable {name!r} of {fn.__qualname__}"
                expr = f"{self.guards.bind(cell, 'cell')}.cell_contents"
                self.guards.watch(expr, value, label)
                if i in recorded_cells:
                    cells[i].cell_contents = self._follow(value, expr, label)
                    self._cells.append((cells[i], cells[i].cell_contents, name, fn))
            self._wrote.append((dict(real), fn, watched))
        return copy

    # reads

    def _read_attribute(self, info: _ViewInfo, name: str, value: Any) -> Any:
        if name == "training" and not info.in_tree:
            return self._reached(value, f"{self._dict_expr(info)}['training']", f"the training flag of {info.label}")
        if name in _MODULE_INTERNALS or name == "__dict__":
            return value  # bookkeeping; the jitted tree's training flags are in the cache key
        if isinstance(value, TensorProxy) or (info.in_tree and real_tensor(value)):
            return value  # a tensor attribute of the jitted tree: an input, read at every call
        if type(value) is torch.Tensor and self.tensor_input is not None and info.dict is not None and info.dict.get(name) is value:
            return self._tensor_attribute(info, name, value)
        if name in _HOOK_DICTS or name in ("_modules", "_parameters", "_buffers"):
            bound = self.guards.bind(value, "d")
        if name in _HOOK_DICTS:
            if info.is_root:
                return value  # the jitted module's own hooks: JittedModule's concern
            if value:
                self.guards.add(f"tuple({bound}) == {self.guards.bind(tuple(value), 'k')}", f"the hooks of {info.label}")
            else:
                self.guards.stays_empty(value, f"the hooks of {info.label}")
                if name in _TRACED_HOOKS:
                    empty = HooksWhileTracing()
                    empty.label = info.label
                    return empty  # a hook registered while tracing is one eager registers (EagerFirst)
            if value and name in _HOOK_BOOKKEEPING:
                return value  # which hooks take kwargs or always run: the keys, guarded above
            if value and name in _TRACED_HOOKS:
                # forward (pre-)hooks that are Python functions are traced with the forward, their
                # reads guarded and their writes replayed as the forward's are (transformers'
                # output-capture hooks append to a dict the traced forward made)
                recorded = {k: self._recorded(hook, f"{name.strip('_').replace('_', ' ')} hook of {info.label}") for k, hook in value.items()}
                if all(r is not hook for r, hook in zip(recorded.values(), value.values())):
                    return type(value)(recorded)
            if value:
                hook = next((h for h in value.values() if self._recorded(h, info.label) is h), next(iter(value.values())))
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
        route = self.guards.route_of(info.real)
        return self._reached(value, f"{self._dict_expr(info)}[{plain_scalar(name)!r}]", f"attribute {name!r} of {info.label}",
                             (*route, ("attr", name)) if route is not None else None)

    def _dict_expr(self, info: _ViewInfo) -> str:
        # an argument is reached through the call's arguments (another object may be equal to
        # it by the cache key); anything else is guarded by identity where it was reached
        rooted = self.guards.rooted(info.real)
        return f"{rooted}.__dict__" if rooted is not None else self.guards.bind(info.dict, "d")

    def _reached(self, value: Any, expr: str, label: str, route: tuple | None = None) -> Any:
        """A value read from an attribute or global: guarded; a list or object comes back as a
        recording copy or view so that what is done with it is seen too. Where it was reached
        through the call's arguments (`route`), a list, tuple or `by_structure` object is
        guarded by its type (and length) and followed through the arguments, not by identity:
        a new KV cache of the same layout runs the same program."""
        if route is not None and (type(value) is list or type(value) is tuple or by_structure(value)):
            return self._reached_through_arguments(value, expr, label, route)
        self.guards.watch(expr, value, label)
        return self._follow(value, expr, label)

    def _follow(self, value: Any, expr: str, label: str) -> Any:
        """`value`, reached as `expr`, as the program is to use it: a list or dict as a
        recording copy, and its items (a tuple's too) as `_recorded` gives them, so that a
        layer in a plain list or a function in a dict is read through as well."""
        if type(value) is list:
            copy = self._list_copies.get(id(value))
            if copy is None:
                copy = self._list_copies[id(value)] = _RecordedList()
                copy.items_read, copy.label, copy.real, copy.target = False, label, value, None
                self._lists.append((value, copy, label, expr))
                list.extend(copy, [self._follow(v, f"{expr}[{i}]", f"item {i} of {label}") for i, v in enumerate(value)])
                copy.initial = list.copy(copy)
            return copy
        if type(value) is collections.deque:
            copy = self._list_copies.get(id(value))
            if copy is None:
                items = [self._follow(v, f"{expr}[{i}]", f"item {i} of {label}") for i, v in enumerate(value)]
                copy = self._list_copies[id(value)] = self._deque_copy(value, items, label, expr, target=None)
            return copy
        if type(value) in SNAPSHOT_TYPES:
            # a mutable sequence of numbers or bytes (array.array, bytearray): its contents
            # guarded; a change the program makes is found when it ends, undone and refused
            snapshot = value[:]
            self._snapshots.append((value, snapshot, label))
            self.guards.add(f"{expr} == {self.guards.bind(snapshot, 'k')}", f"the items of {label}")
            return value
        if type(value) in RECORDED_DICT_TYPES:
            copy = self._dict_copies.get(id(value))
            if copy is None:
                held = self.guards.bind(value, "d")
                items = {k: self._follow(v, f"{held}[{plain_scalar(k)!r}]", f"item {plain_scalar(k)!r} of {label}") if type(k) in _SCALARS else v for k, v in value.items()}
                copy = self._dict_copies[id(value)] = self._dict_copy(type(value), value, label, items)
                if type(value) is collections.defaultdict:
                    self.guards.watch(f"{held}.default_factory", value.default_factory, f"the default factory of {label}")
                    copy.default_factory = self._recorded(value.default_factory, f"the default factory of {label}")
            return copy
        if type(value) is set:
            copy = self._set_copies.get(id(value))
            if copy is None:
                copy = self._set_copies[id(value)] = _RecordedSet(value)
                copy.recorder, copy.real, copy.label, copy.whole_read, copy.added, copy.target = self, value, label, False, [], None
            return copy
        if type(value) is tuple:
            items = tuple(self._follow(v, f"{expr}[{i}]", f"item {i} of {label}") for i, v in enumerate(value))
            return value if all(a is b for a, b in zip(items, value)) else self._standing_for(items, value)
        return self._recorded(value, label)

    def _deque_copy(self, real: collections.deque, items: list, label: str, expr: str, *, target: str | None) -> _RecordedDeque:
        """A recording copy (squall.frontend.state_views) of deque `real`, holding `items`."""
        copy = _RecordedDeque(maxlen=real.maxlen)
        collections.deque.extend(copy, items)  # (not recorded as the program's appends)
        copy.items_read, copy.label, copy.real, copy.target, copy.appended = False, label, real, target, []
        self._deques.append((copy, expr))
        return copy

    def _dict_copy(self, cls: type, real: Any, label: str, items: dict) -> Any:
        """A recording copy (squall.frontend.state_views) of dict-like `real`, holding `items`."""
        copy = RECORDED_DICT_TYPES[cls]()
        copy.recorder, copy.real, copy.label, copy.whole_read, copy.keys_set, copy.target = self, real, label, False, {}, None
        for k, v in items.items():
            cls.__setitem__(copy, k, v)  # (not recorded as the program's writes)
        return copy

    def _standing_for(self, copy: Any, original: Any) -> Any:
        """Note that `copy` stands for `original` while tracing: an output or a value set that
        is the copy is the original."""
        self._originals[id(copy)] = (copy, original)
        return copy

    def _read_item(self, recorded: Any, key: Any, value: Any) -> Any:
        if recorded.target is not None:
            return value  # an argument's items are in the cache key
        if type(key) not in _SCALARS:
            recorded.whole_read = True  # a key the check cannot name: all items are checked
            return value
        expr = f"{self.guards.bind(recorded.real, 'd')}[{plain_scalar(key)!r}]"
        self.guards.watch(expr, dict.__getitem__(recorded.real, key), f"item {plain_scalar(key)!r} of {recorded.label}")
        return value  # (followed when the copy was made)

    def _read_key(self, recorded: Any, key: Any, found: bool) -> None:
        if recorded.target is not None:
            return
        if type(key) not in _SCALARS:
            recorded.whole_read = True
            return
        self.guards.add(f"({plain_scalar(key)!r} in {self.guards.bind(recorded.real, 'd')}) is {found}", f"key {plain_scalar(key)!r} of {recorded.label}")

    def _recorded(self, value: Any, label: str) -> Any:
        """`value` (already guarded where it was reached) as the program is to use it: a user
        function as a copy recording its global reads, a partial of one likewise, a module or
        object as a view, anything else as it is."""
        if _user_function(value):
            return self._recording_function(value)  # a helper's own global reads are seen too
        if type(value) is functools.partial:
            return self._recording_partial(value, label)
        if type(value) is types.MethodType and _user_function(value.__func__) and viewable(value.__self__):
            # a bound method: its object is read like a module's attributes
            owner = self.view(value.__self__, f"{type(value.__self__).__name__} object of {label}")
            return self._standing_for(types.MethodType(self._recording_function(value.__func__), owner), value)
        if viewable(value):
            return self.view(value, label)
        if is_autograd_function(value):
            # `MyFn.apply(proxy)`: its forward traced, or the whole Function opaque (squall.frontend.autograd_functions)
            forward = value.forward
            traced = TracedAutogradFunction(value, self._recording_function(forward) if _user_function(forward) else forward)
            return self._standing_for(traced, value)
        if _users_module(value):
            reads = self._module_reads.get(id(value))
            if reads is None:
                reads = self._module_reads[id(value)] = _ModuleReads(value.__name__)
                types.ModuleType.__getattribute__(reads, "__dict__")["_squall_module"] = (value, self)
                self._standing_for(reads, value)
            return reads
        return value

    def _recording_partial(self, p: functools.partial, label: str) -> functools.partial:
        """A copy of partial `p` whose function records; its keywords (the one part of a partial
        that can change in place) are guarded."""
        held = self.guards.bind(p, "o")
        self.guards.add(f"len({held}.keywords) == {len(p.keywords)}", f"the keywords of {label}")
        keywords = {}
        for k, v in p.keywords.items():
            self.guards.watch(f"{held}.keywords[{plain_scalar(k)!r}]", v, f"keyword {k!r} of {label}")
            keywords[k] = self._recorded(v, f"keyword {k!r} of {label}")
        args = [self._recorded(a, f"argument {i} of {label}") for i, a in enumerate(p.args)]
        return self._standing_for(functools.partial(self._recorded(p.func, label), *args, **keywords), p)

    def _read_member(self, info: _ViewInfo, name: str, member: Any, value: Any) -> Any:
        """A __slots__ slot read: guarded as an attribute in __dict__ is (_MISSING: unset), by
        identity; the value as the program is to use it (a list as a recording copy, so that an
        append is replayed on it, never made on it while tracing)."""
        rooted = self.guards.rooted(info.real)
        target = rooted if rooted is not None else self.guards.bind(info.real, "o")
        if "_slot_value" not in self.guards.namespace:
            self.guards.namespace.update(_slot_value=_slot_value, _MISSING=_MISSING)
        value_expr = f"_slot_value({self.guards.bind(member, 's')}, {target})"
        label = f"attribute {name!r} of {info.label}"
        if value is _MISSING:
            self.guards.add(f"{value_expr} is _MISSING", f"{label} (unset)")
            return value
        self.guards.watch(value_expr, value, label)
        return self._follow(value, value_expr, label)

    def _read_computed(self, info: _ViewInfo, name: str, value: Any) -> Any:
        rooted = self.guards.rooted(info.real)
        target = rooted if rooted is not None else self.guards.bind(info.real, "o")
        self.guards.namespace["_getattr"] = getattr
        return self._reached(value, f"_getattr({target}, {plain_scalar(name)!r})", f"attribute {name!r} of {info.label}")

    def _read_class_attribute(self, info: _ViewInfo, name: str, owner: type, raw: Any, value: Any) -> Any:
        """An attribute found on the object's class (`scale = 2.0` in the class body, a method,
        a property): guarded as the class gives it now, and (at finish) that the object's own
        __dict__ still does not shadow it."""
        cls = type(info.real)
        label = f"attribute {name!r} of class {cls.__qualname__}"
        if info.dict is not None:
            info.class_reads.add(name)
            if info not in self._class_readers:
                self._class_readers.append(info)
        try:
            # the class's own lookup (its MRO, through the type's attribute cache) gives the
            # same object at every call for data, functions and properties
            resolved = getattr(cls, name)
            stable = getattr(cls, name) is resolved
        except Exception:  # noqa: BLE001 - a descriptor that refuses class access
            stable = False
        if stable:
            held = self.guards.bind(cls, "c")
            expr = f"{held}.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"_getattr({held}, {plain_scalar(name)!r})"
            self.guards.namespace["_getattr"] = getattr
        else:
            # a descriptor making a new object per access (a classmethod): the raw one where
            # the class holds it, and no class before it in the MRO shadowing it
            for klass in cls.__mro__:
                if klass is owner:
                    break
                self.guards.add(f"{plain_scalar(name)!r} not in {self.guards.bind(klass.__dict__, 'c')}", label)
            expr, resolved = f"{self.guards.bind(owner.__dict__, 'c')}[{plain_scalar(name)!r}]", raw
        if value is raw:  # plain data in the class body: guarded and followed as any attribute
            return self._reached(value, expr, label)
        self.guards.watch(expr, resolved, label)  # a function or descriptor: which one it is
        return value

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
        if info.dict is None:
            return  # an object of __slots__ only: its slots are read as such, nothing else can appear
        stores = [self.guards.bind(info.dict.get(s, {}), "d") for s in ("_parameters", "_buffers", "_modules")]
        d = self._dict_expr(info)
        self.guards.add(" and ".join(f"{plain_scalar(name)!r} not in {s}" for s in [d, *stores]), f"attribute {name!r} of {info.label} (absent)")

    def _global_hooks_run(self) -> bool:
        """A module is called: whether global module hooks (torch.nn.modules.module's
        register_module_forward_hook and kin), which eager runs at every module call, are
        registered. Then the program runs eagerly; else the check sees that none is registered."""
        if self._global_hooks is None:
            dicts = global_hook_dicts()
            self._global_hooks = any(dicts)
            if self._global_hooks:
                for d in dicts:
                    self.guards.add(f"tuple({self.guards.bind(d, 'd')}) == {self.guards.bind(tuple(d), 'k')}", "the global module hooks")
                self.guards.eager_because.append(
                    f"{describe_global_hooks()}, which eager runs at every module call and a compiled trace cannot replay"
                )
            else:
                for d in dicts:
                    self.guards.stays_empty(d, "the global module hooks")
        return self._global_hooks

    def _read_global(self, real: dict, name: str, value: Any, fn: types.FunctionType) -> Any:
        return self._reached(value, f"{self.guards.bind(real, 'g')}[{plain_scalar(name)!r}]", f"global {name!r} of {fn.__qualname__}")

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
        if info not in self._write_order:
            self._write_order.append(info)
        info.writes[name] = value

    def finish(self, result: Any) -> Any:
        """After the program ran: the output with the values to replay appended (as
        `(output, effects)`) when it wrote Python state; the writes it made noted as effects."""
        for copy, items, label, _ in self._namespaces.values():
            now = vars(copy)
            if now.keys() != items.keys() or any(now[k] is not v for k, v in items.items()):
                raise UnreplayableWrite(f"squall: the program sets or deletes attributes of {label}, a SimpleNamespace; squall cannot replay that at every call")
        for before, fn, watched in self._wrote:
            for name, value in watched.items():
                # (a dunder is the interpreter's bookkeeping: warnings' __warningregistry__)
                if before.get(name, _MISSING) is not value and not name.startswith("__"):
                    raise UnreplayableWrite(
                        f"squall: {fn.__qualname__} assigns the global {name!r} ({_store_line(fn.__code__, name) or fn.__code__.co_filename}); squall "
                        "cannot replay assigning globals at every call: pass the value in, or return it"
                    )
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
            if len(recorded) < len(initial) or any(a is not b for a, b in zip(initial, recorded)):  # list.__init__ on it, say
                raise UnreplayableWrite(f"squall: the program changes {label} other than by appending to it; squall cannot replay that")
            if len(recorded) > len(initial):
                target = recorded.target if recorded.target is not None else self.guards.bind(real, "l")
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
            if real != snapshot:
                real[:] = snapshot  # the call runs eagerly, which makes the change itself
                raise UnreplayableWrite(
                    f"squall: the program changes {label} (of type {type(real).__name__}); squall cannot replay changes to it"
                )
        for recorded in [*self._dict_copies.values(), *self._argument_copies]:
            real = recorded.target if recorded.target is not None else self.guards.bind(recorded.real, "d")
            if recorded.whole_read and recorded.target is None:
                keys, items = self.guards.bind(list(recorded.real), "k"), self.guards.bind(list(recorded.real.values()), "k")
                self.guards.add(f"list({real}) == {keys} and _same_items(list({real}.values()), {items})", f"the items of {recorded.label}")
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


# --- the check ----------------------------------------------------------------------------------


def _same_items(items: Any, expected: list) -> bool:
    """A list read by a trace still holds what it held: the same objects, or equal numbers."""
    if type(items) is not list or len(items) != len(expected):
        return False
    return all(a is b or (type(a) in _SCALARS and type(a) is type(b) and _same_scalar(a, b)) for a, b in zip(items, expected))


def _same_metadata(t: Any, pattern: tuple) -> bool:
    """Whether `t` is a tensor of the dtype, device, requires_grad and shape in `pattern`; a
    None in its shape is a symbolic size, any of 2 or more."""
    dtype, device, requires_grad, shape = pattern
    if type(t) is not torch.Tensor or t.dtype is not dtype or t.device != device or t.requires_grad is not requires_grad:
        return False
    sizes = t.shape
    return len(sizes) == len(shape) and all(n == s if s is not None else n >= 2 for n, s in zip(sizes, shape))


def _same_scalar(a: Any, b: Any) -> bool:
    return scalar_key(a) == scalar_key(b) if type(a) in (float, complex) else a == b


class StateGuards(GuardSet):
    """The guard set of a compiled program (`squall.guard_set`), as tracing fills it: the
    conditions its state reads put on later calls, and its writes to replay.

    `runner(fn, stale)` is what the cache calls: `fn` when there is nothing to check or replay;
    otherwise a generated function that checks every condition (calling `stale(args, kwargs)`
    when one fails), runs `fn`, and replays the writes.
    """

    def __init__(self):
        super().__init__()
        self.effects: list[str] = []  # statements replaying the writes, reading `effects`
        self.eager_because: list[str] = []  # why the program must run eagerly (inner hooks)
        self.namespace.update(_same_items=_same_items, _same_metadata=_same_metadata, _setattr=setattr)
        self._roots: dict[int, str] = {}  # id(argument object) -> how the check reaches it
        self._routes: dict[int, tuple] = {}  # id(argument object) -> its route (squall.trace.route_source)

    def root(self, obj: Any, expr: str, route: tuple | None = None) -> None:
        """`obj` is reached at call time as `expr` (an argument, or an object reached through
        one by `route`), not as a bound object."""
        self._roots[id(obj)] = expr
        if route is not None:
            self._routes[id(obj)] = route

    def rooted(self, obj: Any) -> str | None:
        return self._roots.get(id(obj))

    def route_of(self, obj: Any) -> tuple | None:
        return self._routes.get(id(obj))

    @property
    def eager(self) -> bool:
        return bool(self.eager_because)

    def runner(self, fn: Callable, stale: Callable[[tuple, dict], Any]) -> Callable:
        """`fn` behind the one check of every guard (`GuardSet.runner`), its writes replayed after it."""
        return super().runner(fn, stale, self._body() if self.effects else None, "state-guards")

    def replaying(self, fn: Callable) -> Callable:
        """`fn` with the writes replayed, unchecked: for the call the program was traced for."""
        if not self.effects:
            return fn
        namespace = dict(self.namespace, fn=fn)
        load_source("\n".join(["def run(*args, **kwargs):", *self._body()]) + "\n", "state-effects", namespace)
        return namespace["run"]

    def _body(self) -> list[str]:
        if not self.effects:
            return ["    return fn(*args, **kwargs)"]
        return ["    out, effects = fn(*args, **kwargs)", *(f"    {e}" for e in self.effects), "    return out"]

    def failed(self, args: tuple, kwargs: dict) -> str | None:
        """The label of the first guard that fails for this call (None: all hold)."""
        failure = self.explain(args, kwargs)
        return failure.label if failure is not None else None

    def warn_eager(self, what: str) -> None:
        warnings.warn(
            f"squall: {'; '.join(self.eager_because)}: {what} runs eagerly while it is registered "
            "(removing it compiles the program again)",
            SquallWarning,
            stacklevel=user_stacklevel(),
        )
