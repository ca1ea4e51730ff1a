"""State guards: the Python state a trace read besides its inputs, checked before each cached call.

A trace bakes in more than its inputs' metadata: a module's `self.scale`, which submodule
`self.lin` is, whether a submodule has hooks, the global `SCALE` or tensor `MASK` a function
reads, a closure variable, an object argument's attributes. While tracing, the program runs
on *recording views* that note each such read (`squall.frontend.state_recorder.StateRecorder`;
the views and recording copies themselves are in `squall.frontend.state_views`):

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
call to the value this call computed, items appended to a list or set at an int index of it,
added to a set or set in a dict the program reached are appended, set, added or set again, on
the very object (one the program returns is returned as itself). A write squall cannot replay
(deleting an attribute, changing a list other than by appending or setting an item at an int
index, a dict other than by setting items or a set other than by adding, assigning a global,
a closure variable holding a module or object, or a
settings module's attribute) makes calls of that signature run eagerly, with a warning
naming the source line (squall.jit), as does the user's code raising while it is traced.

A forward or forward pre-hook on an inner submodule that is a Python function is traced with the
forward, through a recording copy like any function it calls (`attribute_reads._TRACED_HOOKS`); registering one
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

import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..guard_set import STATE, GuardSet
from ..ltorch.base import SquallWarning
from ..sources import load_source
from ..symbol import user_stacklevel
from ..trace import scalar_key
from .state_views import _SCALARS

__all__ = ["StateGuards", "ONE_OR_MORE"]


def _same_items(items: Any, expected: list) -> bool:
    """A list read by a trace still holds what it held: the same objects, or equal numbers."""
    if type(items) is not list or len(items) != len(expected):
        return False
    return all(a is b or (type(a) in _SCALARS and type(a) is type(b) and _same_scalar(a, b)) for a, b in zip(items, expected))


# in a metadata pattern's shape: a symbolic size that may be 1 (squall.symbolic.ShapeEnv.ones)
ONE_OR_MORE = "1 or more"


def _same_metadata(t: Any, pattern: tuple) -> bool:
    """Whether `t` is a tensor of the dtype, device, requires_grad and shape in `pattern`; a
    None in its shape is a symbolic size, any of 2 or more, and ONE_OR_MORE one of 1 or more."""
    dtype, device, requires_grad, shape = pattern
    if type(t) is not torch.Tensor or t.dtype is not dtype or t.device != device or t.requires_grad is not requires_grad:
        return False
    sizes = t.shape
    return len(sizes) == len(shape) and all(n == s if type(s) is int else n >= 2 if s is None else n >= 1 for n, s in zip(sizes, shape))


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
        # the logs of the module calls being recorded (squall.frontend.module_replays): each gets
        # every guard made while it is open, as the call that made it (a replay makes them again)
        self.logs: list[list] = []
        self._logging = False  # inside a logged call: the calls it makes are not logged again
        # the context variables the program set while traced (squall.frontend.standard_modules):
        # what it reads of them after is its own value, not the caller's, and is not guarded
        self.context_vars_set: set[int] = set()

    # --- logged while a module call is recorded ---------------------------------------------------

    def start_log(self) -> list:
        """A new log, open until `stop_log`: every guard made meanwhile goes into it."""
        log: list = []
        self.logs.append(log)
        if len(self.logs) == 1:
            # (the instance's own: the class's methods stay free of the check while no log is open)
            self.bind, self.add, self.watch, self.stays_empty, self.note = self._bind_logged, self._add_logged, self._watch_logged, self._empty_logged, self._note_logged
        return log

    def stop_log(self, log: list) -> None:
        del self.logs[next(i for i, open_log in enumerate(self.logs) if open_log is log)]  # (by identity: empty logs are equal)
        if not self.logs:
            for name in ("bind", "add", "watch", "stays_empty", "note"):
                del self.__dict__[name]

    def _logged(self, entry: tuple, method: Callable, *args: Any, **kwargs: Any) -> Any:
        if self._logging:
            return method(self, *args, **kwargs)
        for log in self.logs:
            log.append(entry)
        self._logging = True
        try:
            return method(self, *args, **kwargs)
        finally:
            self._logging = False

    def _bind_logged(self, obj: Any, hint: str) -> str:
        if self._logging:
            return GuardSet.bind(self, obj, hint)
        known = len(self._bound)
        name = GuardSet.bind(self, obj, hint)
        for log in self.logs:
            log.append(("bind", obj, hint, name, len(self._bound) > known))
        return name

    def _add_logged(self, condition: str, label: str, *, kind: str = STATE, site: str = "") -> None:
        self._logged(("add", condition, label, kind, site), GuardSet.add, condition, label, kind=kind, site=site)

    def _watch_logged(self, expr: str, value: Any, label: str, *, kind: str = STATE) -> None:
        self._logged(("watch", expr, value, label, kind), GuardSet.watch, expr, value, label, kind=kind)

    def _empty_logged(self, container: Any, label: str) -> None:
        self._logged(("empty", container, label), GuardSet.stays_empty, container, label)

    def _note_logged(self, kind: str, label: str, site: str = "", *, condition: str | None = None) -> None:
        self._logged(("note", kind, label, site, condition), GuardSet.note, kind, label, site, condition=condition)

    def same_dict(self, expr: str, d: dict, label: str) -> None:
        """Guard that the dict at `expr` holds `d`'s keys, in its order, each with the same value
        (the same object, or an equal number)."""
        if not d:
            self.add(f"not {expr}", label)
            return
        keys, values = self.bind(list(d), "k"), self.bind(list(d.values()), "k")
        self.add(f"list({expr}) == {keys} and _same_items(list({expr}.values()), {values})", label)

    def log_class_read(self, obj: Any, name: str) -> None:
        """Note in the open logs that `name` was read from the class of `obj` (squall.frontend.attribute_reads)."""
        for log in self.logs:
            log.append(("class", obj, name))

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
