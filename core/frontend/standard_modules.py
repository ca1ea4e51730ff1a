"""The standard library's modules as a traced program reads them (part of the state recorder,
`squall.frontend.state_guards`): what they answer or do at every call in eager, a trace would
answer or do once, at trace time. So the program gets stand-ins where it reads one:

- `warnings` (and `warnings.warn`): a warning is replayed at every call (`warn_explicit` at
  the program's place), so the filters show it as eager's (once per place, at every call under
  "always"); one a filter makes an error runs the call eagerly, which raises it;
- `logging` (and `logging.info`, ...): the module's functions log through the root logger, as a
  `logging.Logger` the program reads does (`TracedLogger`);
- `sys.stdout` and `sys.stderr`: writing to them runs the call eagerly, as `print` does;
- `os.environ` and `os.getenv`: a variable read is guarded on its value (or absence); setting or
  deleting one runs the call eagerly;
- a `contextvars.ContextVar`: its value read is guarded (until the program sets it itself);
- `datetime.datetime.now()` and its kin, `os.urandom`, `uuid.uuid4` and `secrets`' draws answer
  differently at every call: reading one runs the call eagerly, as a clock of the `time` module does.

Other attributes of these modules are the modules' own.
"""
from __future__ import annotations

import contextvars
import datetime
import functools
import logging
import os
import secrets
import sys
import types
import uuid
import warnings
from typing import Any

from ..ltorch.unmodelled import UnmodelledMode
from .python_effects import refuse_call_dependent, TracedLogger
from .state_views import UnreplayableWrite, _where

__all__ = ["has_stand_in", "standard_stand_in"]


def has_stand_in(value: Any) -> bool:
    """Whether the program gets a stand-in for `value` (`standard_stand_in`)."""
    return (type(value) is types.ModuleType and value in _STANDARD_MODULES or value is os.environ or value is os.getenv
            or value is warnings.warn or type(value) is contextvars.ContextVar or value is datetime.datetime or value is datetime.date
            or type(value) is types.FunctionType and value in _ROOT_LOGGING)


def standard_stand_in(value: Any, guards: Any, label: str) -> Any:
    """The stand-in the program gets for `value`, a standard-library module or one of the
    functions above that it read (`label` says where), or None where it reads it as it is."""
    if value is warnings or value is warnings.warn:
        warn = functools.partial(_traced_warn, guards)
        return _ModuleStandIn(warnings, {"warn": warn}) if value is warnings else warn
    if value is logging or type(value) is types.FunctionType and value in _ROOT_LOGGING:
        root = _RootLogging(guards)
        return _ModuleStandIn(logging, {name: getattr(root, name) for name in _ROOT_LOGGING_NAMES}) if value is logging else getattr(root, value.__name__)
    if value is sys:
        return _ModuleStandIn(sys, {"stdout": _WriteRefused(sys.stdout, "sys.stdout"), "stderr": _WriteRefused(sys.stderr, "sys.stderr")})
    if value is os or value is os.environ or value is os.getenv:
        environ = _TracedEnviron(guards)
        if value is os:
            return _ModuleStandIn(os, {"environ": environ, "getenv": environ.get, "putenv": environ.refuse, "unsetenv": environ.refuse})
        return environ if value is os.environ else environ.get
    if value is uuid or value is secrets:
        return _ModuleStandIn(value, {})
    if type(value) is contextvars.ContextVar:
        return _TracedContextVar(value, guards)
    if value is datetime:
        return _ModuleStandIn(datetime, {"datetime": _ClockClass(datetime.datetime), "date": _ClockClass(datetime.date)})
    if value is datetime.datetime or value is datetime.date:
        return _ClockClass(value)
    return None


_STANDARD_MODULES = (warnings, logging, sys, os, uuid, secrets, datetime)


class _ModuleStandIn(types.ModuleType):
    """A standard module as the program reads it: the names in `replaced` are stand-ins, the
    others the module's own."""

    def __init__(self, real: types.ModuleType, replaced: dict[str, Any]):
        super().__init__(real.__name__, real.__doc__)
        held = types.ModuleType.__getattribute__(self, "__dict__")
        held["_squall_real"], held["_squall_replaced"] = real, replaced

    def __getattribute__(self, name: str) -> Any:
        held = types.ModuleType.__getattribute__(self, "__dict__")
        replaced = held["_squall_replaced"]
        if name in replaced:
            return replaced[name]
        value = getattr(held["_squall_real"], name)
        refuse_call_dependent(value, f"{name!r} of module {held['_squall_real'].__name__}")  # (`os.urandom`, `uuid.uuid4`)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        real = types.ModuleType.__getattribute__(self, "__dict__")["_squall_real"]
        raise UnreplayableWrite(f"squall: the program assigns {real.__name__}.{name} ({_where()}); squall cannot replay "
                                "assigning a module's attributes at every call")

    __delattr__ = __setattr__


def _traced_warn(guards: Any, message: Any, category: type[Warning] | None = None, stacklevel: int = 1, **kwargs: Any) -> None:
    """`warnings.warn` as the program calls it: replayed at every call, as eager warns it (the
    filters and the place's registry decide whether it shows: once per place under the default
    filters, at every call under "always"); where a filter makes it an error, eager's error is
    raised now (the call runs eagerly), with the filters guarded to stay as they are."""
    if isinstance(message, Warning):
        category = type(message)
    category = category or UserWarning
    frame = sys._getframe(stacklevel)  # (this function's caller is frame 1: the program's line)
    module, lineno = frame.f_globals.get("__name__", "<string>"), frame.f_lineno
    text = str(message)
    action = warnings.defaultaction
    for act, msg, cat, mod, ln in warnings.filters:
        if (msg is None or msg.match(text)) and issubclass(category, cat) and (mod is None or mod.match(module)) and ln in (0, lineno):
            action = act
            break
    guards.add(f"{guards.bind(warnings, 'm')}.filters == {guards.bind(list(warnings.filters), 'f')}",
               "the warnings filters (a warning the program gives shows as eager shows it)")
    if action == "error":
        warnings.warn(message, category, stacklevel + 1, **kwargs)  # (raises: the call runs eagerly, which raises it)
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    bind = guards.bind
    guards.effects.append(f"{bind(warnings, 'm')}.warn_explicit({bind(message, 'k')}, {bind(category, 'k')}, "
                          f"{frame.f_code.co_filename!r}, {lineno}, {module!r}, {bind(registry, 'k')})")


# the logging module's own functions, which log through the root logger (configuring it first, where it has no handlers)
_ROOT_LOGGING_NAMES = ("debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log")
_ROOT_LOGGING = {getattr(logging, name) for name in _ROOT_LOGGING_NAMES}


class _RootLogging:
    """The logging module's functions as the program calls them: the root logger's, as
    `TracedLogger` reads a logger; where the root logger has no handlers yet, eager's first call
    configures it (`basicConfig`), which the call leaves to eager."""

    def __init__(self, guards: Any):
        self._logger = TracedLogger(logging.root, guards, "the logging module (the root logger)")

    def __getattr__(self, name: str) -> Any:
        if not logging.root.handlers:
            raise UnreplayableWrite(f"squall: the program logs through the logging module ({_where()}) while the root logger "
                                    "has no handlers; eager's call configures it (logging.basicConfig)")
        return getattr(self._logger, name)


class _WriteRefused:
    """`sys.stdout` or `sys.stderr` as the program reads it: a write would happen once, at trace
    time, where eager writes at every call, so it runs the call eagerly; anything else is the stream's."""

    def __init__(self, stream: Any, label: str):
        self._stream, self._label = stream, label

    def __getattr__(self, name: str) -> Any:
        if name in ("write", "writelines"):
            raise UnreplayableWrite(f"squall: the program writes to {self._label} ({_where()}); written while the program is "
                                    "traced, it would be written once, not at every call as eager writes it")
        return getattr(self._stream, name)


class _TracedEnviron:
    """`os.environ` as the program reads it: each variable read is guarded on its value (or its
    absence), the whole environment where the program iterates or measures it; setting or
    deleting a variable, which a trace would do once, runs the call eagerly."""

    def __init__(self, guards: Any):
        self._guards = guards
        self._held = guards.bind(os.environ, "env")

    def _read(self, key: str) -> str | None:
        value = os.environ.get(key)
        self._guards.add(f"{self._held}.get({key!r}) == {value!r}", f"the environment variable {key!r}")
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._read(key)
        return default if value is None else value

    def __getitem__(self, key: str) -> str:
        value = self._read(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._read(key) is not None

    def _whole(self) -> dict[str, str]:
        snapshot = dict(os.environ)
        self._guards.add(f"dict({self._held}) == {self._guards.bind(snapshot, 'env')}", "the environment variables")
        return snapshot

    def __iter__(self):
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def keys(self):
        return self._whole().keys()

    def items(self):
        return self._whole().items()

    def values(self):
        return self._whole().values()

    def copy(self) -> dict[str, str]:
        return self._whole()

    def refuse(self, *args: Any, **kwargs: Any) -> None:
        raise UnreplayableWrite(f"squall: the program changes the environment variables ({_where()}); changed while the "
                                "program is traced, they would be changed once, not at every call as eager changes them")

    __setitem__ = __delitem__ = setdefault = pop = popitem = update = clear = refuse


class _ClockClass:
    """`datetime.datetime` or `datetime.date` as the program reads it: `now()`, `today()` and
    `utcnow()` answer differently at every call, so reading one runs the call eagerly (a clock);
    anything else (making a date, `fromisoformat`) is the class's own."""

    _CLOCKS = ("now", "today", "utcnow")

    def __init__(self, cls: type):
        self._cls = cls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._cls(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in self._CLOCKS:
            raise UnmodelledMode(f"squall: the program reads {self._cls.__module__}.{self._cls.__name__}.{name} ({_where()}), "
                                 "which answers differently at every call; traced, its answer would be the first call's, "
                                 "frozen into the trace")
        return getattr(self._cls, name)


class _TracedContextVar:
    """A `contextvars.ContextVar` as the program reads it: its value (or its absence) in the
    calling context is guarded; after the program set it (transformers' output capture sets and
    resets one around a forward), what it reads is its own value, not guarded."""

    _UNSET = object()

    def __init__(self, var: contextvars.ContextVar, guards: Any):
        self._var, self._guards = var, guards

    def get(self, *default: Any) -> Any:
        if id(self._var) not in self._guards.context_vars_set:
            value = self._var.get(self._UNSET)
            self._guards.watch(f"{self._guards.bind(self._var, 'cv')}.get({self._guards.bind(self._UNSET, 'k')})", value,
                               f"the context variable {self._var.name!r}")
        return self._var.get(*default)  # (its own default, or eager's LookupError, where it has no value)

    def set(self, value: Any) -> contextvars.Token:
        self._guards.context_vars_set.add(id(self._var))
        return self._var.set(value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._var, name)
