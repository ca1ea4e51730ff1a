"""Generated Python source, executed and registered with `linecache`.

squall's code generator and plugins that generate code (inductor's region functions) load
their source here, so tracebacks, debuggers and `inspect.getsource` show the generated text
under one naming scheme, `<squall-LABEL-N>`, with no two loads sharing a file name.

A long source's compiled code is also kept on disk, in squall's cache folder (`cache_root()`),
as Python keeps a module's in `__pycache__`: keyed by the source text and the interpreter's
bytecode version, so a new process running the same program skips `compile()` (a model's state
check or computation: 1-2 ms each, a sizeable part of a compile). A missing, damaged or
unwritable file only costs compiling.
"""
from __future__ import annotations

import collections
import hashlib
import importlib.util
import itertools
import linecache
import marshal
import os
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any

__all__ = ["load_source", "cache_root"]

_counter = itertools.count()

# source text -> its code, compiled once: the same text comes back often (a module's state check
# at each recompile, an entry point per jit) and compiling a long check costs milliseconds
_COMPILED: collections.OrderedDict[str, types.CodeType] = collections.OrderedDict()
_COMPILED_KEPT = 256
_compiled_lock = threading.Lock()


def load_source(source: str, label: str, namespace: dict[str, Any]) -> str:
    """Execute generated `source` into `namespace`; tracebacks and debuggers can show it.

    Returns the pseudo file name the source is registered under in `linecache`.
    """
    filename = f"<squall-{label}-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(_renamed(_compiled(source), filename), namespace)
    return filename


def _compiled(source: str) -> types.CodeType:
    with _compiled_lock:
        code = _COMPILED.get(source)
        if code is not None:
            _COMPILED.move_to_end(source)
            return code
    kept = len(source) >= _ON_DISK_FROM
    code = _code_on_disk(source) if kept else None
    if code is None:
        code = compile(source, "<squall>", "exec")
        if kept:
            _keep_on_disk(source, code)
    with _compiled_lock:
        _COMPILED[source] = code
        if len(_COMPILED) > _COMPILED_KEPT:
            _COMPILED.popitem(last=False)
    return code


# shorter sources compile in about the time reading a file takes
_ON_DISK_FROM = 2000


def cache_root(environ: dict[str, str] | None = None) -> Path:
    """squall's cache folder: $SQUALL_CACHE_DIR, else the platform's user cache folder + squall."""
    env = os.environ if environ is None else environ
    root = env.get("SQUALL_CACHE_DIR")
    if not root:
        if sys.platform == "win32":
            base = env.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
        elif sys.platform == "darwin":
            base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
        else:
            base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "squall")
    return Path(root)


def _code_path(source: str) -> Path:
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER + source.encode()).hexdigest()
    return cache_root() / "code" / f"{digest}.bin"


def _code_on_disk(source: str) -> types.CodeType | None:
    try:
        code = marshal.loads(_code_path(source).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None  # not kept yet, or damaged: compiled again (and kept again)
    return code if isinstance(code, types.CodeType) else None


def _keep_on_disk(source: str, code: types.CodeType) -> None:
    path = _code_path(source)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps(code))
            os.replace(temporary, path)  # whole or absent: a reader never sees half a file
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass  # an unwritable cache folder only costs compiling in the next process


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """`code` (and the functions defined in it) as if compiled from `filename`."""
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)
