"""Generated Python source, executed and registered with `linecache`.

squall's code generator and plugins that generate code (inductor's region functions) load
their source here, so tracebacks, debuggers and `inspect.getsource` show the generated text
under one naming scheme, `<squall-LABEL-N>`, with no two loads sharing a file name.
"""
from __future__ import annotations

import itertools
import linecache
from typing import Any

__all__ = ["load_source"]

_counter = itertools.count()


def load_source(source: str, label: str, namespace: dict[str, Any]) -> str:
    """Execute generated `source` into `namespace`; tracebacks and debuggers can show it.

    Returns the pseudo file name the source is registered under in `linecache`.
    """
    filename = f"<squall-{label}-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return filename
