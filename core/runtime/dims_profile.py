"""Remembered dynamic dimensions: a program whose sizes turned symbolic once compiles them
symbolic from its first call the next time it is jitted in this process.

Under the "auto" policy (squall.runtime.dynamic_dims) a new `squall.jit` of a program starts
static and learns again which dimensions vary, at the cost of one compile it then throws away
(a stream of lengths compiles twice). With `$SQUALL_REMEMBER_DYNAMIC=1` the dimensions a jitted
program made symbolic because they changed between its calls are kept per program, keyed by the
code object of the function (a module: of its forward), as Dynamo's automatic dynamic keeps its
frame state per code object: a later `squall.jit` of the same code (a new wrapper of the same
model, another instance of its class) starts with them symbolic. A dimension a compile had to
key by value again (`DynamicDims.specialise`) is forgotten. Off by default: it changes what a
first call compiles depending on what ran before in the process. `forget()` clears it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..market.config import env_switch

__all__ = ["REMEMBER_ENV", "remember_enabled", "program_code", "learned", "learn", "unlearn", "forget"]

REMEMBER_ENV = "SQUALL_REMEMBER_DYNAMIC"

_lock = threading.Lock()
_learned: dict[Any, dict[tuple, frozenset[int]]] = {}  # program_code -> argument path -> its symbolic dimensions


def remember_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a new jit starts with the dimensions its program's earlier jits learned:
    `$SQUALL_REMEMBER_DYNAMIC` (1/true/yes/on, or 0/false/no/off, the default)."""
    return env_switch(REMEMBER_ENV, False, environ)


def program_code(fn: Callable) -> Any:
    """What a jitted program's learned dimensions are kept under: its code object (a function's,
    or a module's forward's) with its file (code objects compare by contents, not by file); None
    where it has none (a builtin, a callable object)."""
    forward = getattr(fn, "forward", None) if not hasattr(fn, "__code__") else fn
    forward = getattr(forward, "__func__", forward)  # a bound method: its function
    code = getattr(forward, "__code__", None)
    return (code.co_filename, code) if code is not None else None


def learned(code: Any) -> dict[tuple, frozenset[int]]:
    """The dimensions earlier jits of `code` (a `program_code`) made symbolic because they changed: path -> dims."""
    with _lock:
        return dict(_learned.get(code, {}))


def learn(code: Any, path: tuple, dims: frozenset[int]) -> None:
    """Jits of `code` from now on start with `dims` of the argument at `path` symbolic."""
    with _lock:
        kept = _learned.setdefault(code, {})
        kept[path] = kept.get(path, frozenset()) | dims


def unlearn(code: Any, path: tuple, dim: int | None) -> None:
    """Dimension `dim` at `path` had to be keyed by value: later jits start with it a constant."""
    with _lock:
        kept = _learned.get(code, {})
        left = kept.get(path, frozenset()) - {dim}
        if left:
            kept[path] = left
        else:
            kept.pop(path, None)


def forget() -> None:
    """Forget every program's learned dimensions."""
    with _lock:
        _learned.clear()
