"""Remembered dynamic dimensions: a program whose sizes turned symbolic once compiles them
symbolic from its first call the next time it is jitted, in this process or a later one.

Under the "auto" policy (squall.runtime.dynamic_dims) a new `squall.jit` of a program starts
static and learns which dimensions vary, at the cost of one compile it then throws away (a
stream of lengths compiles twice). The dimensions a jitted program made symbolic because they
changed between its calls are kept per program, keyed by its code (a function's, or a module's
forward's: file, first line, name and the compiled code itself), as Dynamo's automatic dynamic
keeps its frame state per code object and, with its local profile (on by default), on disk: a
later `squall.jit` of the same code (a new wrapper of the same model, another instance of its
class, the same script run again) starts with them symbolic and compiles once. They are kept
for the process and in `dynamic_dims.json` in squall's cache folder ($SQUALL_CACHE_DIR); edited
code has other code, and starts afresh. A dimension a compile had to key by value again
(`DynamicDims.specialise`) is forgotten. `$SQUALL_REMEMBER_DYNAMIC=0` turns this off (each jit
then starts static, whatever ran before); `forget()` clears what was learned, on disk too.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import marshal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..market.config import env_switch
from ..sources import cache_root
from .choices import ChoiceStore

__all__ = ["REMEMBER_ENV", "remember_enabled", "program_code", "learned", "learn", "unlearn", "forget"]

REMEMBER_ENV = "SQUALL_REMEMBER_DYNAMIC"

_lock = threading.Lock()
_learned: dict[str, dict[tuple, frozenset[int]]] = {}  # program_code -> argument path -> its symbolic dimensions
_stores: dict[Any, ChoiceStore] = {}


def remember_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a new jit starts with the dimensions its program's earlier jits learned:
    `$SQUALL_REMEMBER_DYNAMIC` (1/true/yes/on, the default, or 0/false/no/off)."""
    return env_switch(REMEMBER_ENV, True, environ)


def program_code(fn: Callable) -> str | None:
    """What a jitted program's learned dimensions are kept under: its code (a function's, or a
    module's forward's, beneath its decorators) as a string that a later process running the
    same code makes alike: its file, first line and name, and a digest of the compiled code
    (edited code digests otherwise). None where it has none (a builtin, a callable object)."""
    forward = getattr(fn, "forward", None) if not hasattr(fn, "__code__") else fn
    forward = getattr(forward, "__func__", forward)  # a bound method: its function
    try:
        # a decorated forward: the function it wraps (transformers wraps every model's forward
        # in one shared wrapper, whose code would key them all alike)
        forward = inspect.unwrap(forward) if forward is not None else None
    except ValueError:
        pass  # a cycle of __wrapped__: the outermost
    code = getattr(forward, "__code__", None)
    if code is None:
        return None
    digest = hashlib.sha256(marshal.dumps(code)).hexdigest()[:16]
    return f"{code.co_filename}:{code.co_firstlineno}:{code.co_qualname}:{digest}"


def _store() -> ChoiceStore:
    """The learned dimensions on disk, in squall's cache folder (resolved at each use)."""
    path = cache_root() / "dynamic_dims.json"
    return _stores.setdefault(path, ChoiceStore(path, required="dims"))


def _written(path: tuple) -> str | None:
    """`path` as text a later process reads back (`ast.literal_eval`), or None where it cannot be."""
    text = repr(path)
    try:
        return text if ast.literal_eval(text) == path else None
    except (ValueError, SyntaxError):
        return None


def _read(entry: dict | None) -> dict[tuple, frozenset[int]]:
    found: dict[tuple, frozenset[int]] = {}
    for text, dims in (entry or {}).get("dims", {}).items():
        try:
            path = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue  # written by another version: learned again
        if isinstance(path, tuple) and isinstance(dims, list) and all(type(d) is int for d in dims):
            found[path] = frozenset(dims)
    return found


def _kept(code: str) -> dict[tuple, frozenset[int]]:
    """What this process knows of `code`'s dimensions: read from disk at its first use (under `_lock`)."""
    if code not in _learned:
        _learned[code] = _read(_store().get(code))
    return _learned[code]


def _keep(code: str, kept: dict[tuple, frozenset[int]]) -> None:
    written = {text: sorted(dims) for path, dims in kept.items() if (text := _written(path)) is not None}
    _store().put(code, {"dims": written})


def learned(code: str) -> dict[tuple, frozenset[int]]:
    """The dimensions earlier jits of `code` (a `program_code`), here or in an earlier process,
    made symbolic because they changed: path -> dims."""
    with _lock:
        return dict(_kept(code))


def learn(code: str, path: tuple, dims: frozenset[int]) -> None:
    """Jits of `code` from now on start with `dims` of the argument at `path` symbolic."""
    with _lock:
        kept = _kept(code)
        if dims <= kept.get(path, frozenset()):
            return
        kept[path] = kept.get(path, frozenset()) | dims
        _keep(code, kept)


def unlearn(code: str, path: tuple, dim: int | None) -> None:
    """Dimension `dim` at `path` had to be keyed by value: later jits start with it a constant."""
    with _lock:
        kept = _kept(code)
        if dim not in kept.get(path, frozenset()):
            return
        left = kept[path] - {dim}
        if left:
            kept[path] = left
        else:
            kept.pop(path)
        _keep(code, kept)


def forget() -> None:
    """Forget every program's learned dimensions, in this process and on disk."""
    with _lock:
        _learned.clear()
        _store().clear()
