"""What a traced program does in Python that a trace cannot replay at every call, and the
stand-ins that let it run as eager does or send it to eager (part of the state recorder,
`squall.frontend.state_guards`):

- torch's objects that keep their state in Python (an optimizer, a caching distributions
  transform) and what answers differently at every call (a clock, an iterator kept between
  calls): reading one runs the call eagerly (`refuse_python_state_owner`, `refuse_call_dependent`);
- the builtins `print` and `id` as the program's own code looks them up (`traced_print`,
  `traced_id`), and a `logging.Logger` it reads (`TracedLogger`): printing or logging while
  traced would happen once, and an id would be a view's or the first call's.
"""
from __future__ import annotations

import functools
import logging
import os
import random
import secrets
import sys
import time
import types
import uuid
from collections.abc import Iterator
from typing import Any

import torch

from ..ltorch.unmodelled import UnmodelledMode
from ..proxies import NumberProxy, TensorProxy
from .state_views import _RECORDED_AS, _VIEW_CLASSES_REVERSED, UnreplayableWrite, _info, _where

__all__ = ["refuse_python_state_owner", "refuse_call_dependent", "traced_print", "traced_id", "TracedLogger"]


# torch's objects whose methods keep state in Python (momentum buffers, step counts, a scale):
# read and written by torch's own code, unviewed, so neither guarded nor replayed
_PYTHON_STATE_OWNERS = (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler, torch.amp.GradScaler)


def refuse_python_state_owner(value: Any, label: str) -> None:
    """Run the program eagerly where it uses one of torch's objects that keep Python state (an
    optimizer: jitting `opt.step`, or a function calling it); its trace would bake in the state
    it saw and write proxies into the object."""
    owner = value.__self__ if type(value) is types.MethodType else value
    if isinstance(owner, _PYTHON_STATE_OWNERS):
        raise UnmodelledMode(
            f"squall: the program uses {label}, a {type(owner).__module__}.{type(owner).__qualname__}, whose state "
            "(momentum buffers, step counts) torch keeps in Python objects that squall's trace does not record")
    if isinstance(owner, torch.distributions.transforms.Transform) and _caches_in_python(owner):
        # (cache_size=1 keeps the last input and output on the object: traced tensors, left there)
        raise UnmodelledMode(
            f"squall: the program uses {label}, a {type(owner).__qualname__} with cache_size=1 (itself or a part), whose "
            "last input and output torch keeps on the object, which squall's trace does not record")


# what answers differently at every call (clocks, fresh random bytes): read while traced, its
# first answer would be frozen into the trace
_CALL_DEPENDENT_FUNCTIONS = frozenset(
    getattr(time, name) for name in ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
                                     "process_time", "process_time_ns", "thread_time", "thread_time_ns", "sleep")
    if hasattr(time, name)) | {os.urandom, uuid.uuid1, uuid.uuid4} | {
    getattr(secrets, name) for name in ("token_bytes", "token_hex", "token_urlsafe", "randbelow", "randbits", "choice")}


def refuse_call_dependent(value: Any, label: str) -> None:
    """Run the program eagerly where it reads what answers differently at every call: a clock
    (`time.perf_counter()`, the `time` module itself), or an iterator that lives on between calls
    (`next(COUNTER)`, a generator kept on an object), whose traced answers would be frozen at the
    first call's (the same count, the same elapsed time at every call)."""
    if value is time:
        what = "the time module (its clocks answer differently at every call)"
    elif isinstance(value, (types.BuiltinFunctionType, types.FunctionType)) and value in _CALL_DEPENDENT_FUNCTIONS:
        what = f"{value.__module__}.{value.__name__}, which answers differently at every call"
    elif isinstance(value, Iterator):
        what = f"a {type(value).__qualname__}, an iterator that advances at every call"
    elif _random_generator(value.__self__ if type(value) in (types.MethodType, types.BuiltinMethodType) else value):
        # (torch's, Python's and numpy's global generators are followed: squall.frontend.random_state)
        what = "a random number generator of its own, whose draws advance at every call"
    else:
        return
    raise UnmodelledMode(f"squall: the program reads {label}, {what}; traced, its answers would be those of the first call, "
                         "frozen into the trace")


def _random_generator(value: Any) -> bool:
    """Whether `value` is a `random.Random` or a numpy `Generator` or `RandomState` other than the
    global ones (those a program seeds or draws from are followed: squall.frontend.random_state)."""
    if isinstance(value, random.Random):
        return value is not random._inst
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, (numpy.random.Generator, numpy.random.RandomState)) \
        and value is not numpy.random.mtrand._rand


def _caches_in_python(transform: Any, depth: int = 0) -> bool:
    """Whether a torch.distributions transform, or one it is made of (a ComposeTransform's parts,
    an inverse's forward), keeps its last input and output (cache_size=1)."""
    if getattr(transform, "_cache_size", 0):
        return True
    Transform = torch.distributions.transforms.Transform
    return depth < 8 and any(
        isinstance(part, Transform) and _caches_in_python(part, depth + 1)
        for v in vars(transform).values() for part in (v if type(v) in (list, tuple) else (v,)))


def traced_print(*args: Any, **kwargs: Any) -> None:
    """The built-in `print` as a traced program's own code calls it (put where the program looks
    `print` up, as `traced_type` is): printing while traced would print once, at trace time (a
    tensor as its proxy), where eager prints at every call, so the call runs eagerly."""
    raise UnreplayableWrite(f"squall: the program prints ({_where()}); printing while it is traced would print once, "
                            "not at every call as eager does")


class TracedLogger:
    """A `logging.Logger` as a traced program reads it (`logger.info(...)` in a forward): a
    message the logger would emit was emitted once, at trace time, where eager emits it at every
    call, so such a call runs eagerly (UnreplayableWrite); one it would not emit (its level is
    off) is skipped, guarded on staying off. Anything else (`warning_once`, whose once is
    eager's too; `isEnabledFor`, `name`) is the logger's own."""

    _LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
               "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL}

    def __init__(self, logger: logging.Logger, guards: Any, label: str):
        self._logger, self._guards, self._label = logger, guards, label

    @property
    def __class__(self) -> type:  # isinstance(logger, logging.Logger) and logger.__class__ answer as eager's
        return type(self._logger)

    def __getattr__(self, name: str) -> Any:
        level = self._LEVELS.get(name)
        if level is None and name != "log":
            return getattr(self._logger, name)
        return functools.partial(self._emit, level) if level is not None else self._emit

    def _emit(self, level: int, *args: Any, **kwargs: Any) -> None:
        if self._logger.isEnabledFor(level):
            raise UnreplayableWrite(f"squall: the program logs through {self._label} ({_where()}); a message logged while "
                                    "the program is traced would be logged once, not at every call as eager logs it")
        self._guards.add(f"not {self._guards.bind(self._logger, 'o')}.isEnabledFor({level})",
                         f"{self._label} logs nothing at level {logging.getLevelName(level)}")


def traced_id(obj: Any) -> int:
    """The built-in `id` as a traced program's own code calls it: for an object read through a
    view or recording copy, the identity of the object it stands for, as eager's `id(obj)`. A
    traced tensor's or number's identity is the call's own, which a trace would keep from its
    first call (`cache[id(x)]`), so asking for it runs the call eagerly."""
    t = type(obj)
    if t is TensorProxy or t is NumberProxy:
        raise UnmodelledMode(f"squall: the program asks for the id() of a traced {'tensor' if t is TensorProxy else 'number'} "
                             f"({_where()}), which is the call's own; a trace would keep the first call's")
    if t in _VIEW_CLASSES_REVERSED:
        return id(_info(obj).real)
    if t in _RECORDED_AS:
        return id(getattr(obj, "real", obj))
    return id(obj)
