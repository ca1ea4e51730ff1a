"""Splitting a module's program at module granularity: an eager frame with compiled children.

Some modules cannot keep one stable compiled program: a value their forward reads changes at
every call (a guard site that keeps failing, `squall.frontend.speculation`), a Python attribute they
read changes at every call (`self.n += 1`, `squall.frontend.state_guards`), an inner submodule has a
hook whose Python side effects a trace cannot replay, or two of their tensors overlap in
memory while the program writes into them (`squall.runtime.aliasing`). Such a module is *split*: its
own `forward` runs as Python, eagerly, and every submodule it calls runs compiled, each
through its own jitted module with the parent's options (executors, check mode, strict,
wait), created on its first call. A child that cannot keep a stable program either splits
the same way, on its own. So where a model's mask code branches on data that changes at
every call, the mask code runs eagerly while the embedding, each decoder layer and the
final norm run compiled; autograd runs through the compiled children and the eager code
between them as through any torch calls.

The eager frame runs on a *routing view* of the module, never on the module itself: an
instance of a subclass of its class sharing the module's own `__dict__` (as the state
guards' recording views do), so attribute reads and writes are the module's own, as in
eager. The view differs in two places: a submodule read through it (`self.lin`,
`self._modules`, so also iterating, indexing and slicing a ModuleList, Sequential or
ModuleDict) is a routing view of that submodule, and calling a routing view
(`nn.Module.__call__` reaches `_call_impl`) calls the submodule's compiled module, which runs
its hooks around the compiled forward as a jitted module does (`squall.runtime.wrappers`). Neither
the user's modules nor their classes are changed, so other threads never see the split.

Only a module's program splits: a jitted plain function that cannot keep a stable program
runs eagerly as a whole (splitting it would need its Python bytecode to be continued).
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Split", "SplitReport"]


@dataclass
class SplitReport:
    """What a split module does: why it runs eagerly, and the children it runs compiled (by path)."""

    module: str
    because: list[str]
    children: dict[str, Any]  # path ("lin", "layers.0") -> the compiled child's cache stats
    compiled: dict[str, Callable] = field(default_factory=dict, repr=False)  # path -> the compiled child

    def __str__(self) -> str:
        listed = ", ".join(f"{path} ({stats.misses} compiled, {stats.hits} cached calls)" for path, stats in self.children.items())
        return (f"{self.module} runs its forward eagerly, each submodule it calls compiled: "
                f"{listed or 'none called yet'}; because " + "; ".join(self.because))


class Split:
    """A jitted module's eager frame: `split(*args, **kwargs)` runs the module's forward on its
    routing view; each submodule it calls runs through `compile_child(submodule)`, made once
    per submodule on its first call and kept here."""

    def __init__(self, module: torch.nn.Module, compile_child: Callable[[torch.nn.Module], Callable]):
        self.module = module
        self.compile_child = compile_child
        self.because: list[str] = []
        self._lock = threading.Lock()
        self._views: dict[int, tuple[torch.nn.Module, Any]] = {}  # id(module) -> (module, its routing view)
        self._children: dict[int, tuple[torch.nn.Module, str, Callable]] = {}  # id -> (module, path, compiled)
        self._paths: dict[int, str] = {id(module): ""}
        self.root = self.view(module, "")

    def add_reason(self, reason: str) -> None:
        if reason not in self.because:
            self.because.append(reason)

    def __call__(self, *args, **kwargs):
        return self.root.forward(*args, **kwargs)

    def runner(self) -> Callable:
        """What a jitted module's cache holds for a split entry (its runners take the parameters first)."""
        root = self.root
        return lambda params, *args, **kwargs: root.forward(*args, **kwargs)

    def view(self, module: torch.nn.Module, path: str) -> Any:
        """The routing view of `module`, reached at `path` (the first path it was reached by names it)."""
        found = self._views.get(id(module))
        if found is not None:
            return found[1]
        view = object.__new__(_routing_class(type(module)))
        object.__setattr__(view, "_squall_route", (self, module))
        object.__setattr__(view, "__dict__", module.__dict__)
        self._paths.setdefault(id(module), path)
        self._views[id(module)] = (module, view)  # the module is held: its id names only it
        return view

    def child(self, module: torch.nn.Module) -> Callable:
        """The compiled module that runs `module` for this frame, made on its first call."""
        found = self._children.get(id(module))
        if found is None:
            with self._lock:
                found = self._children.get(id(module))
                if found is None:
                    path = self._paths.get(id(module)) or type(module).__name__
                    found = self._children[id(module)] = (module, path, self.compile_child(module))
        return found[2]

    def report(self, stats_of: Callable[[Callable], Any]) -> SplitReport:
        """Why this module runs eagerly and its compiled children, each with `stats_of(compiled)`."""
        compiled = {path: child for _, path, child in self._children.values()}
        children = {path: stats_of(child) for path, child in compiled.items()}
        return SplitReport(type(self.module).__name__, list(self.because), children, compiled)


# --- routing views ---------------------------------------------------------------------------


def _route(view: Any) -> tuple[Split, torch.nn.Module]:
    return object.__getattribute__(view, "_squall_route")


def _routed(split: Split, parent: torch.nn.Module, name: str, value: Any) -> Any:
    """A submodule read through a routing view, as the frame sees it: a routing view of it too."""
    if not isinstance(value, torch.nn.Module) or type(value) in _ROUTING_TYPES:
        return value
    prefix = split._paths.get(id(parent), "")
    return split.view(value, f"{prefix}.{name}" if prefix else name)


class _RoutedModules(MutableMapping):
    """A module's `_modules` as its routing view reads it: the same names, each module a routing
    view; changes go to the real dict (as eager makes them), holding real modules."""

    __slots__ = ("split", "parent", "real")

    def __init__(self, split: Split, parent: torch.nn.Module, real: dict):
        self.split, self.parent, self.real = split, parent, real

    def __getitem__(self, name: str) -> Any:
        return _routed(self.split, self.parent, name, self.real[name])

    def __setitem__(self, name: str, module: Any) -> None:
        self.real[name] = _real(module)

    def __delitem__(self, name: str) -> None:
        del self.real[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)


def _real(obj: Any) -> Any:
    return _route(obj)[1] if type(obj) in _ROUTING_TYPES else obj


def _routing_getattr(self, name: str):
    # reached only where ordinary lookup failed: parameters, buffers and submodules (nn.Module's
    # __getattr__), or a class's own __getattr__
    split, real = _route(self)
    value = type(real).__getattr__(self, name)
    if isinstance(value, torch.nn.Module) and self.__dict__.get("_modules", {}).get(name) is value:
        return _routed(split, real, name, value)
    return value


def _routing_modules(self) -> _RoutedModules:
    split, real = _route(self)
    return _RoutedModules(split, real, real.__dict__["_modules"])


def _routing_call_impl(self, *args, **kwargs):
    split, real = _route(self)
    if real is split.module or type(real).forward is torch.nn.Module.forward:
        # the frame's own module called again, or a container without a forward: as eager
        return type(real)._call_impl(self, *args, **kwargs)
    return split.child(real)(*args, **kwargs)


def _routing_setattr(self, name: str, value: Any) -> None:
    # a write is the module's own, as in eager; a routing view assigned is stored as its module
    type(_route(self)[1]).__setattr__(self, name, _real(value))


def _routing_new(cls, *args, **kwargs):
    # code that builds a new module of its own class (slicing a ModuleList or Sequential calls
    # `self.__class__(...)`) gets a plain module of the real class, holding the routing views
    return cls.__mro__[1](*args, **kwargs)


def _routing_copy(self):
    return copy.copy(_route(self)[1])


def _routing_deepcopy(self, memo):
    return copy.deepcopy(_route(self)[1], memo)


def _routing_reduce_ex(self, protocol):
    return _route(self)[1].__reduce_ex__(protocol)


_ROUTING_CLASSES: dict[type, type] = {}  # a module class -> its routing view class
_ROUTING_TYPES: set[type] = set()


def _routing_class(cls: type) -> type:
    view = _ROUTING_CLASSES.get(cls)
    if view is None:
        namespace = {
            "__slots__": ("_squall_route",),
            "__new__": _routing_new,
            "__copy__": _routing_copy,
            "__deepcopy__": _routing_deepcopy,
            "__reduce_ex__": _routing_reduce_ex,
            "__getattr__": _routing_getattr,
            "__setattr__": _routing_setattr,
            # a data descriptor: read before the `_modules` the shared __dict__ holds
            "_modules": property(_routing_modules),
            "_call_impl": _routing_call_impl,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        }
        view = _ROUTING_CLASSES[cls] = type(cls.__name__, (cls,), namespace)
        _ROUTING_TYPES.add(view)
    return view
