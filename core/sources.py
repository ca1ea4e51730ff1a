"""Generated Python source, executed and registered with `linecache`.

squall's code generator and plugins that generate code (inductor's region functions) load
their source here, so tracebacks, debuggers and `inspect.getsource` show the generated text
under one naming scheme, `<squall-LABEL-N>`, with no two loads sharing a file name.
"""
from __future__ import annotations

import collections
import itertools
import linecache
import threading
import types
from typing import Any

__all__ = ["load_source"]

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
    code = compile(source, "<squall>", "exec")
    with _compiled_lock:
        _COMPILED[source] = code
        if len(_COMPILED) > _COMPILED_KEPT:
            _COMPILED.popitem(last=False)
    return code


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """`code` (and the functions defined in it) as if compiled from `filename`."""
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)
