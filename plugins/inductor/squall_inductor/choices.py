"""Measured choices: which offer wins a region on its real shapes, remembered on disk.

When inductor and the torch executor both can run a region, the executor times both
on example inputs with the region's exact metadata and keeps the faster one. The winner
is written to a small JSON file keyed by the region's signature, the torch version, the
device, the thread count and this plugin's release, so a later process skips both the timing
and, where torch won, inductor's compilation.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import torch
from squall.extend import ChoiceStore, timing_clock

__all__ = ["default_choices_path", "ChoiceStore", "best_time", "region_key"]


def default_choices_path() -> Path:
    """$SQUALL_CACHE_DIR, else $XDG_CACHE_HOME/squall, else ~/.cache/squall; the file inductor_choices.json."""
    root = os.environ.get("SQUALL_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "squall")
    return Path(root) / "inductor_choices.json"


def region_key(signature: tuple, device: str, release: str = "") -> str:
    """A stable key for a region's signature on this machine's configuration and the plugin's
    `release` (`Executor.release`: a new one compiles regions otherwise, so they are timed afresh)."""
    text = repr((signature, torch.__version__, device, torch.get_num_threads(), release))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def best_time(fn: Callable, args: list, *, device: str = "cpu", budget_s: float = 0.1, rounds: int = 3) -> float:
    """The best per-call time of `fn(*args)` over `rounds` rounds, each about budget_s / rounds long
    (CPU time where that is fair: squall.extend.timing_clock)."""
    clock = timing_clock(torch.device(device).type)
    start = clock()
    fn(*args)
    _sync(device)
    once = max(clock() - start, 1e-6)
    number = max(1, min(1000, int(budget_s / rounds / once)))
    best = float("inf")
    for _ in range(rounds):
        start = clock()
        for _ in range(number):
            fn(*args)
        _sync(device)
        best = min(best, (clock() - start) / number)
    return best
