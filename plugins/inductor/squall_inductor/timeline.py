"""Timestamps of a region's way to fused speed, for measuring cold starts (bench/cold_start.py --timeline).

With SQUALL_INDUCTOR_TIMELINE set to a file path, the user's process and the compile worker each
append one line per step to that file: wall-clock seconds since the epoch, the process id, the
CPU seconds the process and its finished children (the C++ compilers) have used so far (a
measure a shared machine's load does not inflate much), and what just finished (the worker's spawn, its imports, the vector-ISA probe, its warm-up, a
request's trace, lowering and C++ compile, ...). Unset, `mark` costs one dictionary lookup.
This module imports nothing of squall's or inductor's, so the worker can mark before it imports them.
"""
from __future__ import annotations

import os
import time

__all__ = ["TIMELINE_ENV", "mark", "read_timeline"]

TIMELINE_ENV = "SQUALL_INDUCTOR_TIMELINE"


def mark(step: str, at: float | None = None, cpu: float | None = None) -> None:
    """Note that `step` finished now (or at `at`, seconds since the epoch, with the process's CPU
    seconds `cpu` then, where given), where a timeline is asked for."""
    path = os.environ.get(TIMELINE_ENV)
    if not path:
        return
    if cpu is None:
        cpu = sum(os.times()[:4])  # user and system, the process's and its waited-for children's
    line = f"{time.time() if at is None else at:.4f} {os.getpid()} {cpu:.3f} {step}\n"
    try:
        with open(path, "a") as f:  # one short write per line: lines of two processes do not interleave
            f.write(line)
    except OSError:  # a timeline is a measurement aid: never a reason to fail a compile
        pass


def read_timeline(path: str) -> list[tuple[float, int, float, str]]:
    """The (seconds since the epoch, process id, CPU seconds, step) lines of a timeline file, in time order."""
    steps = []
    with open(path) as f:
        for line in f:
            at, pid, cpu, step = line.rstrip("\n").split(" ", 3)
            steps.append((float(at), int(pid), float(cpu), step))
    return sorted(steps)
