"""Recording stand-ins: what a traced program reads Python state through (`squall.frontend.state_guards`).

While a program is traced, a module or object it reaches is read through a *view*: an instance
of a subclass of its class sharing the real object's `__dict__` (or reading its `__slots__`
through their descriptors), whose attribute reads and writes go to the `StateRecorder` that
made it; a user's Python module is read through a `_ModuleReads`; a list, deque, dict or set it
reaches is a recording copy (squall.frontend.recorded_containers). Neither the objects nor their
classes are changed. This module holds the views and the small predicates about objects both sides share;
the recorder is in `squall.frontend.state_recorder` (and its bases), the generated check in
`squall.frontend.state_guards`.
"""
from __future__ import annotations

import array
import collections
import copy
import dis
import functools
import sys
import types
from typing import Any

import numpy
import torch

from ..proxies import NumberProxy, TensorProxy
from ..symbolic import SymInt
from ..symshape import SymShape
from ..trace import plain_scalar
from .autograd_functions import is_autograd_function


__all__ = ["UnreplayableWrite", "EagerFirst", "HooksWhileTracing", "raised_by_users_code", "traced_type", "viewable", "by_structure", "global_hook_dicts", "describe_global_hooks"]

_MISSING = object()
_SCALARS = frozenset({int, float, bool, str, complex, type(None)})
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
_MODULE_GETATTR = torch.nn.Module.__getattr__


class UnreplayableWrite(RuntimeError):
    """The program changes Python state in a way squall cannot replay at every call."""


class EagerFirst(UnreplayableWrite):
    """The program makes a one-time change that eager must make itself: it registers a hook on an
    inner module while traced (transformers' output capture does on its first call). That call
    runs eagerly, and the next compiles again with the change in place."""


class HooksWhileTracing(collections.OrderedDict):
    """An inner module's empty hook dict as a traced program sees it: a hook registered into it
    would be one on the real module, made by the trace, so registering one is an `EagerFirst`."""

    __slots__ = ("label",)

    def __setitem__(self, key, value):
        raise EagerFirst(
            f"squall: the program registers a hook on {self.label} ({_where()}); that call runs eagerly, "
            "and the next compiles again with the hook in place"
        )


def _where() -> str:
    """The user's source line making the current call (the nearest frame outside squall and torch)."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith("squall") or module.startswith("torch") or frame.f_code.co_filename == __file__):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def raised_by_users_code(error: BaseException) -> bool:
    """Whether `error` was raised in the user's own code (the innermost frame it passed is
    neither squall's nor torch's), not by squall or torch on its behalf."""
    where = error.__traceback__
    if where is None:
        return False
    while where.tb_next is not None:
        where = where.tb_next
    frame = where.tb_frame
    module = frame.f_globals.get("__name__", "")
    return not (module == "torch" or module.startswith(("squall", "torch.")) or frame.f_code.co_filename == __file__)


def _store_line(code: types.CodeType, name: str) -> str | None:
    """Where `code` (or code nested in it) assigns the global `name`, as file:line."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") and ins.argval == name:
            return f"{code.co_filename}:{ins.positions.lineno}"
    nested = (_store_line(c, name) for c in code.co_consts if isinstance(c, types.CodeType))
    return next((found for found in nested if found), None)


def _user_function(fn: Any) -> bool:
    """A plain Python function of the user's (not torch's or squall's), whose globals can be watched;
    or torch's decorator around one (`@torch.no_grad()`), traced as the user's own so that the
    function in its closure is too: its object read through a view, its globals watched."""
    if type(fn) is not types.FunctionType or type(fn.__globals__) is not dict:
        return False
    module = fn.__globals__.get("__name__") or ""
    if not (module == "torch" or module.startswith(("torch.", "squall"))):
        return True
    wrapped = getattr(fn, "__wrapped__", None)
    return (module.startswith("torch.") and type(wrapped) is types.FunctionType and _user_function(wrapped)
            and any(_cell_value(cell) is wrapped for cell in fn.__closure__ or ()))


def _users_class(cls: type) -> bool:
    """A class of the user's or a library's (a config); not the standard library's (a
    threading.Event's state must stay real) nor torch's."""
    package = (getattr(cls, "__module__", None) or "builtins").partition(".")[0]
    return package not in sys.stdlib_module_names and package not in ("builtins", "torch", "squall")


def viewable(obj: Any) -> bool:
    """An object whose attribute reads can be recorded through a view: one sharing its
    __dict__, reading its __slots__ from it."""
    cls = type(obj)
    if isinstance(obj, (torch.nn.Module, torch.distributions.Distribution)):
        # (a distribution caches what it derives, `logits` from `probs`, as attributes set on
        # first read: through a view that write is the program's, replayed, not a proxy left behind)
        return True
    return (
        cls.__new__ is object.__new__
        and _users_class(cls)
        and not isinstance(obj, (type, types.ModuleType, torch.Tensor, BaseException))
        and (isinstance(getattr(obj, "__dict__", None), dict) or (not hasattr(obj, "__dict__") and bool(_members(cls))))
    )


def by_structure(obj: Any) -> bool:
    """Whether an argument object is told apart from others by its type and what the program
    reads of it (guarded through the call's arguments), not by its identity: a plain Python
    object (a KV cache, which transformers makes anew at every `generate`) with identity's own
    equality. Modules are not: their parameters are read as the jitted tree's are not."""
    cls = type(obj)
    return viewable(obj) and not isinstance(obj, torch.nn.Module) and cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__


def _class_lookup(cls: type, name: str) -> tuple[type | None, Any]:
    """Where attribute lookup on an instance of `cls` finds `name` in the classes: (the class
    holding it, its raw value there), or (None, _MISSING)."""
    for klass in cls.__mro__:
        raw = klass.__dict__.get(name, _MISSING)
        if raw is not _MISSING:
            return klass, raw
    return None, _MISSING


def _members(cls: type) -> list[str]:
    """The names of `cls`'s __slots__ (their member descriptors), its bases' included."""
    return [name for klass in cls.__mro__ for name, raw in vars(klass).items() if type(raw) is types.MemberDescriptorType]


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not yet assigned
        return _MISSING


# a function under functools.lru_cache (or functools.cache) runs uncached while traced, as
# dynamo runs it: its cache would keep the traced tensors it returned, which a later trace, and
# eager, would then be given
_LRU_CACHE = functools._lru_cache_wrapper
# containers a program reaches that are read through recording copies (squall.frontend.recording_copies._follow)
_FOLLOWED_CONTAINERS = frozenset({list, collections.deque, dict, set, collections.OrderedDict, collections.defaultdict, collections.Counter})
# mutable sequences of plain values (read as they are, guarded by their contents; a change refused)
SNAPSHOT_TYPES = frozenset({array.array, bytearray, numpy.ndarray})


def snapshot_of(value: Any) -> Any:
    """A copy of an array.array's, bytearray's or numpy array's contents (a numpy slice is a view)."""
    return value.copy() if type(value) is numpy.ndarray else value[:]


def same_contents(value: Any, snapshot: Any) -> bool:
    """Whether `value` holds what `snapshot_of` copied (a numpy array: shape, dtype and values, NaN as NaN)."""
    if type(value) is numpy.ndarray:
        return (value.shape == snapshot.shape and value.dtype == snapshot.dtype
                and bool(numpy.array_equal(value, snapshot, equal_nan=value.dtype.kind in "fc")))
    return value == snapshot


def restore_contents(value: Any, snapshot: Any) -> None:
    """Put back what `snapshot_of` copied."""
    if type(value) is numpy.ndarray:
        value[...] = snapshot
    else:
        value[:] = snapshot


def _recordable(value: Any) -> bool:
    """Whether StateRecorder._recorded gives `value` to the program as a view or recording copy."""
    return (
        _user_function(value)
        or type(value) in _FOLLOWED_CONTAINERS
        or type(value) in SNAPSHOT_TYPES
        or type(value) is functools.partial
        or type(value) is _LRU_CACHE
        or (type(value) is types.MethodType and _user_function(value.__func__) and viewable(value.__self__))
        or viewable(value)
        or is_autograd_function(value)
        or _users_module(value)
    )


def _slot_value(member: Any, obj: Any) -> Any:
    """A __slots__ slot of `obj` read through its member descriptor; _MISSING while it is unset."""
    try:
        return member.__get__(obj, type(obj))
    except AttributeError:
        return _MISSING


def global_hook_dicts() -> tuple[dict, ...]:
    """The global module hook dicts nn.Module._call_impl runs at every module call."""
    m = torch.nn.modules.module
    return (m._global_forward_pre_hooks, m._global_forward_hooks, m._global_backward_pre_hooks, m._global_backward_hooks)


def describe_global_hooks() -> str | None:
    """The registered global module hooks, named with where each is defined (None: none is)."""
    kinds = ("forward pre", "forward", "backward pre", "backward")
    named = []
    for kind, d in zip(kinds, global_hook_dicts()):
        for hook in d.values():
            code = getattr(hook, "__code__", None)
            where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
            named.append(f"global module {kind} hook {getattr(hook, '__qualname__', type(hook).__qualname__)!r}{where}")
    return "; ".join(named) or None


# --- recording views --------------------------------------------------------------------------


class _ViewInfo:
    """What a view stands for: the real object, where it was reached, its own pending writes."""

    __slots__ = ("real", "dict", "label", "recorder", "in_tree", "is_root", "writes", "class_reads")

    def __init__(self, real, label, recorder, in_tree, is_root):
        self.real = real
        self.dict = getattr(real, "__dict__", None)  # None: an object of __slots__ only
        self.label = label
        self.recorder = recorder
        self.in_tree = in_tree  # a module of the jitted tree: its parameters are inputs
        self.is_root = is_root
        self.writes: dict[str, Any] = {}  # attributes the program set, newest value
        self.class_reads: set[str] = set()  # attributes read from its class, not its __dict__


def _info(view) -> _ViewInfo:
    return object.__getattribute__(view, "_squall_view_info")


def _view_getattribute(self, name: str):
    info = _info(self)
    if name == "__class__":
        info.recorder.note_class(type(info.real), f"the __class__ of {info.label}")
        return type(info.real)  # as eager's `obj.__class__` (`type(obj)`: traced_type)
    if name in info.writes:
        return info.writes[name]
    cls = type(info.real)
    owner, raw = _class_lookup(cls, name)
    if type(raw) is types.MemberDescriptorType:
        # a __slots__ slot: held by the real object (the view's own slots are empty)
        value = info.recorder._read_member(info, name, raw, _slot_value(raw, info.real))
        if value is _MISSING:
            raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
        return value
    if (owner is None and info.dict is not None and name not in info.dict and getattr(cls, "__getattr__", None) is _MODULE_GETATTR
            and cls.__getattribute__ is object.__getattribute__):
        # a module's parameter, buffer or submodule (`self.weight`, `self.q_lin`), as nn.Module's
        # own __getattr__ finds it once the instance and its class have not: read here, without
        # the failed lookup, that __getattr__'s Python and its reads of `__dict__` through the view
        d = info.dict
        for store in ("_parameters", "_buffers", "_modules"):
            held = d.get(store)
            if held is not None and name in held:
                return info.recorder._read_slot(info, name, held[name])
    if type(raw) is property and _user_function(raw.fget) and cls.__getattribute__ is object.__getattribute__:
        # a property's getter runs as a recording copy, as a method does: its own `type(self.t)`
        # and global reads are the program's (object.__getattribute__ would call it as it is)
        value = info.recorder._recording_function(raw.fget)(self)
    else:
        value = cls.__getattribute__(self, name)
    if info.dict is not None and name in info.dict and info.dict[name] is value:
        return info.recorder._read_attribute(info, name, value)
    if name.startswith("__") and name.endswith("__"):
        pass  # the interpreter's protocol, and the view's own (__deepcopy__)
    elif owner is not None and (_users_class(owner) or name == "forward"):
        # (of torch's classes only a module's forward: wrapping libraries replace it on the
        # instance, or patch the class, after a model is built; any other would cost a check
        # per module per call)
        value = info.recorder._read_class_attribute(info, name, owner, raw, value)
    elif owner is None and cls.__getattribute__ is not object.__getattribute__:
        # found by the class's own __getattribute__ elsewhere (a transformers config maps
        # `hidden_size` to `n_embd`): guarded by asking the object again
        return info.recorder._read_computed(info, name, value)
    if type(value) is types.MethodType and (value.__self__ is self or isinstance(value.__self__, type)):
        # a method, or a classmethod (bound to its class): its global reads are seen too
        func = value.__func__.__wrapped__ if type(value.__func__) is _LRU_CACHE else value.__func__
        if _user_function(func):
            return types.MethodType(info.recorder._recording_function(func), value.__self__)
    if owner is not None and _user_function(value):
        return info.recorder._recording_function(value)  # a staticmethod
    return value


# what `type()` answers for a stand-in the program holds; the recording copies of containers add
# theirs (squall.frontend.recorded_containers). A symbolic size and a shape holding one are an int
# and a torch.Size in eager (`type(n) is int`)
_RECORDED_AS: dict[type, type] = {SymInt: int, SymShape: torch.Size}


def traced_type(obj: Any, *rest: Any) -> type:
    """The built-in `type` as a traced program's own code calls it (squall.frontend.recording_copies puts it
    where the program looks `type` up): for an object read through a view or recording copy,
    the class of the object it stands for, and for a proxy the class of the value it stands
    for (`isinstance` answers so: a TensorProxy is a torch.Tensor, a NumberProxy's `__class__` its
    number type, a symbolic size an int, a shape holding one a torch.Size), as eager gives it; with three arguments, a new
    class, as the built-in makes it."""
    if rest:
        return type(obj, *rest)
    t = type(obj)
    if t is TensorProxy:
        return torch.nn.Parameter if getattr(obj, "_is_param", False) else torch.Tensor
    if t is NumberProxy:
        return obj.python_type
    if t in _VIEW_CLASSES_REVERSED:
        cls = _VIEW_CLASSES_REVERSED[t]
        _info(obj).recorder.note_class(cls, f"type() of {_info(obj).label}")
        return cls
    return _RECORDED_AS.get(t, t)


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


def _view_call(self, *args, **kwargs):
    # called as a function: a module's call notes the global hooks it would run; a user
    # class's __call__ runs as a recording copy, as its other methods do
    info = _info(self)
    cls = type(info.real)
    call = cls.__call__
    if isinstance(info.real, torch.nn.Module) and info.recorder._global_hooks_run():
        return self.forward(*args, **kwargs)  # they make the program run eagerly: not traced
    if call is _MODULE_CALL and _hookless_module_call(info, cls):
        # nn.Module's own call of a module without hooks, its reads made as its Python makes them
        # (the forward, then each hook dict, recorded as empty) without its two frames and their
        # reads of torch's own class attributes: a compile's module calls cost a tenth of it
        forward = self.forward
        info.recorder._read_empty_hook_dicts(info, _MODULE_HOOK_DICTS)
        replays = info.recorder.module_replays
        if replays is not None:
            return replays.call(self, info, forward, args, kwargs)  # squall.frontend.module_replays
        return forward(*args, **kwargs)
    if _user_function(call):
        owner, raw = _class_lookup(cls, "__call__")
        if owner is not None:  # (as a method read from the class: rebinding it there is seen)
            info.recorder._read_class_attribute(info, "__call__", owner, raw, call)
        call = info.recorder._recording_function(call)
    return call(self, *args, **kwargs)


_MODULE_CALL = torch.nn.Module.__call__  # _wrapped_call_impl
_MODULE_CALL_IMPL = torch.nn.Module._call_impl
# the hook dicts nn.Module._call_impl reads, in its order (all of them where every one is empty)
_MODULE_HOOK_DICTS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks")


def _hookless_module_call(info: _ViewInfo, cls: type) -> bool:
    """Whether calling the module `info` stands for runs nn.Module's `_wrapped_call_impl` and
    `_call_impl` straight to `self.forward(...)`: neither overridden nor compiled
    (`module.compile()`), no TorchScript tracing, and its four hook dicts its own, unwritten and
    empty (the global hooks are checked by the caller). Their reads through the view would
    record nothing but the four hook dicts."""
    d = info.dict
    if d is None or info.writes or "_compiled_call_impl" in d or torch._C._get_tracing_state():
        return False
    # what the class says is asked once per class in a trace (a layer's modules are called many times)
    plain = info.recorder._plain_module_classes.get(cls)
    if plain is None:
        plain = info.recorder._plain_module_classes[cls] = (
            cls._call_impl is _MODULE_CALL_IMPL and cls._compiled_call_impl is None and cls.__getattribute__ is torch.nn.Module.__getattribute__
            and all(getattr(cls, name, _MISSING) is _MISSING for name in _MODULE_HOOK_DICTS)
        )
    if not plain:
        return False
    for name in _MODULE_HOOK_DICTS:
        held = d.get(name)
        if held is None or held:
            return False
    return True


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
_VIEW_CLASSES_REVERSED: dict[type, type] = {}  # view class -> the class it views


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
        if any("__call__" in vars(klass) for klass in cls.__mro__[:-1]):
            namespace["__call__"] = _view_call
        view = _VIEW_CLASSES[cls] = type(cls.__name__, (cls,), namespace)
        _VIEW_CLASSES_REVERSED[view] = cls
    return view




def _users_module(module: Any) -> bool:
    """A Python module of the user's own (a `config.py` a program reads settings from): not
    the standard library's, torch's or squall's, nor an installed package's."""
    if type(module) is not types.ModuleType:
        return False
    package = (getattr(module, "__name__", None) or "").partition(".")[0]
    file = getattr(module, "__file__", None) or ""
    installed = "site-packages" in file or "dist-packages" in file
    return package not in sys.stdlib_module_names and package not in ("builtins", "torch", "squall") and not installed


class _ModuleReads(types.ModuleType):
    """A user's Python module as the program reads it: each attribute read from it is guarded,
    as a global is; assigning one is refused (as assigning a global is)."""

    def __getattribute__(self, name):
        real, recorder = types.ModuleType.__getattribute__(self, "__dict__")["_squall_module"]
        value = getattr(real, name)
        if name in real.__dict__ and real.__dict__[name] is value and not name.startswith("__"):
            return recorder._reached(value, f"{recorder.guards.bind(real.__dict__, 'g')}[{plain_scalar(name)!r}]", f"{name!r} of module {real.__name__}")
        return value

    def __setattr__(self, name, value):
        real = types.ModuleType.__getattribute__(self, "__dict__")["_squall_module"][0]
        raise UnreplayableWrite(
            f"squall: the program assigns {real.__name__}.{name} ({_where()}); squall cannot replay assigning a "
            "module's attributes at every call: pass the value in, or return it"
        )

    __delattr__ = __setattr__


# --- the recorder -------------------------------------------------------------------------------
