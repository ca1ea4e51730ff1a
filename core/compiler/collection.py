"""The cyclic garbage collector paused while a program is traced.

A trace allocates tens of thousands of Python objects (proxies, bound symbols, guards, views)
and frees few of them: the compiled entry keeps them. Each young collection during the trace
scans objects that all survive it, and every tenth one scans the older generation too: on a
DistilBERT compile those collections cost about as much again as the trace's own work (the
length stream in bench/length_stream.py, CPU time: about 5 ms of collections in 60 ms). Paused,
the objects are scanned once after the trace, when the collector's counts next say so.

Only the trace is paused, never planning (a fusion executor may compile for seconds there,
allocating as it likes). The pause is process-wide, as the collector is: threads tracing at
once share it, and it ends when the last of them is done. A collector the process had disabled
stays disabled; one that code run during the trace disabled (the traced program, another
thread) is enabled again when the pause ends.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused"]

_lock = threading.Lock()
_tracing = 0  # traces under way in this process
_paused = False  # whether the pause disabled the collector (it was enabled before the first trace)


@contextmanager
def collection_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector for the block (nested and concurrent blocks share
    one pause); enable it again after the last block if it was enabled before the first."""
    global _tracing, _paused
    with _lock:
        if _tracing == 0 and gc.isenabled():
            gc.disable()
            _paused = True
        _tracing += 1
    try:
        yield
    finally:
        with _lock:
            _tracing -= 1
            if _tracing == 0 and _paused:
                _paused = False
                gc.enable()
