"""Measured choices remembered on disk: small JSON files of winners, keyed by what was measured.

A fusion executor remembers which offer won a region on its real shapes (squall-inductor);
squall.runtime.tiers remembers which plan won a whole program in context. Either way the next
process skips the timing, and where torch won, the compilation too. The files live in
squall's cache folder ($SQUALL_CACHE_DIR, else the platform's user cache folder + squall).
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch


__all__ = ["ChoiceStore", "timing_clock"]


def timing_clock(device_type: str) -> Callable[[], float]:
    """The clock to time a choice with: the timing thread's CPU time where the timed code runs on
    that thread alone (CPU, one intra-op thread), so the time it waits for a core on a loaded
    machine (the user's calls, other processes) counts against neither contender; wall time
    otherwise (CUDA kernels, and the other intra-op threads' work, would not show in it)."""
    return time.thread_time if device_type == "cpu" and torch.get_num_threads() == 1 else time.perf_counter


class ChoiceStore:
    """Winners by key, read once from `path` and rewritten (atomically) when one is added,
    merged with the file as it is then.

    A choice is a dict with at least the field `required` ("winner"). A missing or damaged
    file, or a folder that cannot be written, only costs measuring again.
    """

    def __init__(self, path: Path | None, required: str = "winner"):
        self.path = path
        self.required = required
        self._choices: dict[str, dict] | None = None
        # regions compiled side by side (FusionExecutor.parallel_compiles) put from several threads
        self._lock = threading.RLock()

    def _load(self) -> dict[str, dict]:
        if self._choices is None:
            self._choices = {}
            if self.path is not None:
                try:
                    loaded = json.loads(self.path.read_text())
                    if isinstance(loaded, dict):
                        self._choices = {k: v for k, v in loaded.items() if isinstance(v, dict) and self.required in v}
                except (OSError, ValueError):
                    pass  # no file yet, or a damaged one: measure again
        return self._choices

    def get(self, key: str) -> dict | None:
        """The remembered choice for `key`, or None."""
        with self._lock:
            return self._load().get(key)

    def put(self, key: str, choice: dict) -> None:
        """Remember `choice` for `key`, beside what other processes wrote to the file meanwhile
        (ranks of one job, two runs side by side): each rewrites the whole file, and one that
        wrote only what it read at its start would drop the others' choices."""
        with self._lock:
            mine = self._load()
            self._choices = None
            self._load().update(mine)
            self._choices[key] = choice
            self._write()

    def clear(self) -> None:
        """Forget every choice: the file too."""
        with self._lock:
            self._choices = {}
            if self.path is not None:
                try:
                    self.path.unlink(missing_ok=True)
                except OSError:
                    pass  # a folder that cannot be written: nothing was kept there

    def _write(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.stem}-")
            with os.fdopen(fd, "w") as f:
                json.dump(self._choices, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            pass
