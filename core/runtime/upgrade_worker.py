"""The upgrade worker: one background thread that runs the tiers' upgrade jobs
(squall.runtime.tiers) in the order they come, and queues a job once its entry is hot.

An entry's upgrade is watched from its first call and queued once the entry's calls have taken
HOT_S in all, read from the hit counter the cached path bumps anyway, as a tiered JIT's counters
do; `wait_for_upgrades` queues the cold ones at once. The worker is one daemon thread, so squall
never holds more than one core for background compilation; on Linux it runs at a lower priority
(nice +5, which the C++ compiler processes it starts inherit). At exit, queued jobs are dropped,
and the running one starts no further region compile and is waited for (at most `EXIT_JOIN_S`): a
thread left inside a compiler while the interpreter finalises aborts the process.
"""
from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from ..market.fusion import mark_background_upgrade_thread, stop_compiling, upgrades_awaited
from .tiers import SETTLE_S, Upgrade, UpgradeJob

__all__ = ["UpgradeWorker", "default_worker", "wait_for_upgrades", "upgrades", "HOT_S"]

# how long interpreter exit waits for a running upgrade to wind down: it starts no region compile
# then, so this bounds only one in flight; a thread left inside a compiler aborts the process
EXIT_JOIN_S = 10.0
# an entry's upgrade is queued once its calls have taken this long in all (squall.runtime.calls), as a
# tiered JIT's counters do: an upgrade holds the interpreter for 10-20 ms of planning and judging
# even on a small program (a DistilBERT stream of 40 batches, 40 ms in all, lost 12 ms to one), and
# its compiles take seconds of a core, so an entry that has cost its caller less than a few times
# that is not worth them yet (bench/length_stream.py); a hot entry is queued at most HOT_S (plus
# a poll) later than at its first call
HOT_S = 0.05
# how often the worker reads the watched entries' heat; up to HOT_POLL_MAX_S while none is called
HOT_POLL_S = 0.02
HOT_POLL_MAX_S = 1.0
_WAKE = object()  # a queue item that only wakes the worker (to start polling)
_NICE = 5  # the worker yields the CPU to the user's threads (Linux: a thread's own nice value)


class UpgradeWorker:
    """One background thread that runs upgrade jobs in the order they come, and queues the jobs
    it watches once their entries are hot (`watch`)."""

    def __init__(self):
        self._jobs: queue.SimpleQueue[UpgradeJob | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing = False
        self._outstanding = 0  # jobs queued or running (`wait_idle`)
        self._idle = threading.Condition(self._lock)
        # id(upgrade) -> (its job, heat(): the seconds its entry's calls have taken, None once the entry is gone)
        self._watched: dict[int, tuple[UpgradeJob, Callable[[], float | None]]] = {}
        self._heat_seen: dict[int, float] = {}
        # id(upgrade) -> the moment before which its entry cannot be hot: a poll sooner only takes the
        # interpreter from the caller (a niced thread holding the GIL on a busy machine stalls it for ms)
        self._not_before: dict[int, float] = {}
        self._poll_s = HOT_POLL_S
        self._waits_until = float("inf")  # when the waiting worker looks at the watched entries next

    def submit(self, job: UpgradeJob) -> None:
        """Queue `job` now."""
        with self._lock:
            if self._closing:
                return job.upgrade.finish("cancelled", "the interpreter is exiting")
            self._start()
            self._outstanding += 1
        self._jobs.put(job)

    def watch(self, job: UpgradeJob, heat: Callable[[], float | None], not_before: float | None = None) -> None:
        """Queue `job` once its entry is hot: once `heat()`, the seconds its entry's calls have
        taken so far, reaches HOT_S; dropped as evicted where `heat()` gives None first. The
        worker reads it every HOT_POLL_S (less often while no watched entry is called), not
        before `not_before` (a `time.perf_counter()` moment before which `heat()` cannot reach
        HOT_S: it counts no more than the time since the entry's first call started), so the
        entry's calls pay nothing for being counted: `heat` reads the hit counter they bump
        anyway, and a short burst of calls is not interrupted by polls that could find nothing."""
        with self._lock:
            if self._closing:
                return job.upgrade.finish("cancelled", "the interpreter is exiting")
            self._start()
            job.upgrade.status, job.upgrade.reason = "cold", f"queued once its calls have taken {HOT_S:g} s"
            self._watched[id(job.upgrade)] = (job, heat)
            if not_before is not None:
                self._not_before[id(job.upgrade)] = not_before
            self._poll_s = HOT_POLL_S
            # a worker waiting with nothing watched (or longer than this entry needs) is woken to poll
            wake = (HOT_POLL_S if not_before is None else not_before - time.perf_counter()) < self._waits_until - time.perf_counter()
        if wake:
            self._jobs.put(_WAKE)

    def queue_now(self, upgrade: Upgrade) -> None:
        """Queue the watched job of `upgrade` now, hot or not (`wait_for_upgrades` asks for it)."""
        with self._lock:
            found = self._watched.pop(id(upgrade), None)
            self._heat_seen.pop(id(upgrade), None)
            self._not_before.pop(id(upgrade), None)
        if found is not None:
            self._queue(found[0])

    def _queue(self, job: UpgradeJob) -> None:
        job.upgrade.status, job.upgrade.reason = "pending", ""
        job.upgrade.submitted = time.perf_counter()  # its times (fused_after, seconds) count from here
        with self._lock:
            self._outstanding += 1
        self._jobs.put(job)

    def _queue_hot(self) -> None:
        """Queue the watched jobs whose entries are hot; forget those whose entries are gone."""
        with self._lock:
            watched = list(self._watched.items())
        called = False
        now = time.perf_counter()
        for key, (job, heat) in watched:
            if self._not_before.get(key, now) > now and job.alive():
                called = True  # too soon to tell: looked at again at its moment (`_timeout`)
                continue
            spent = heat() if job.alive() else None
            if spent is not None and spent < HOT_S:
                called = called or self._heat_seen.get(key) != spent
                self._heat_seen[key] = spent
                continue
            with self._lock:
                if self._watched.pop(key, None) is None:
                    continue  # queued meanwhile by queue_now
                self._heat_seen.pop(key, None)
                self._not_before.pop(key, None)
            if not job.alive():
                job.upgrade.finish("evicted", "the jitted function no longer exists")
            elif spent is None:
                job.upgrade.finish("evicted", "its entry left the cache (or was replanned) before it was hot")
            else:
                self._queue(job)
        # while none of the watched entries is called, look less often
        self._poll_s = HOT_POLL_S if called else min(2 * self._poll_s, HOT_POLL_MAX_S)

    def _start(self) -> None:
        if self._thread is None:  # (under self._lock)
            self._thread = threading.Thread(target=self._loop, name="squall-upgrades", daemon=True)
            self._thread.start()
            atexit.register(self.close)

    def _timeout(self) -> float | None:
        """How long the worker waits for a job before it reads the watched entries' heat again:
        the poll interval, or until the first moment one of them can be hot, whichever is later;
        forever while none is watched."""
        with self._lock:
            if not self._watched:
                self._waits_until = float("inf")
                return None
            soonest = min((self._not_before.get(key, 0.0) for key in self._watched), default=0.0)
            now = time.perf_counter()
            wait = max(self._poll_s, soonest - now)
            self._waits_until = now + wait
        return wait

    def _next(self) -> UpgradeJob | None:
        """The next job to run (None: the worker stops), queueing hot watched jobs meanwhile."""
        while True:
            try:
                job = self._jobs.get(timeout=self._timeout())
            except queue.Empty:
                job = _WAKE
            if self._watched and not self._closing:
                self._queue_hot()
            if job is not _WAKE:
                return job

    def _loop(self) -> None:
        mark_background_upgrade_thread()
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)  # Linux: this thread only
        except (AttributeError, OSError):
            pass
        while (job := self._next()) is not None:
            time.sleep(SETTLE_S)
            if self._closing:
                job.cancel()
            else:
                torch.set_num_threads(job.num_threads)
                job.background = True
                if job.run():
                    self._jobs.put(job)  # its fused plan runs; its later offers come after the jobs queued meanwhile
                    continue
            with self._idle:
                self._outstanding -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no job is queued or running (jobs still watched, not yet hot, do not count);
        False if `timeout` seconds pass first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._outstanding == 0, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Drop queued jobs, stop region compiles, and give the running job `timeout` seconds (default
        EXIT_JOIN_S) to wind down (called at exit)."""
        with self._lock:
            self._closing = True
            thread = self._thread
            watched, self._watched = self._watched, {}
            self._not_before.clear()
        for job, _ in watched.values():
            job.cancel()
        stop_compiling()
        if thread is not None:
            self._jobs.put(None)
            thread.join(EXIT_JOIN_S if timeout is None else timeout)


_worker: UpgradeWorker | None = None
_worker_lock = threading.Lock()


def default_worker() -> UpgradeWorker:
    """The process's one upgrade worker, started at its first job."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = UpgradeWorker()
        return _worker


def upgrades(state: Any) -> list[Upgrade]:
    """The background upgrades of a jitted function's compiled entries, oldest first."""
    return list(state._upgrades.values())


def wait_for_upgrades(state: Any, timeout: float | None = None) -> bool:
    """Block until every pending upgrade of `state` (a JittedFunction) is done, those of entries
    not yet hot queued now; False on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pending = list(state._upgrades.values())
    for upgrade in pending:
        if upgrade.status == "cold":
            default_worker().queue_now(upgrade)
    with upgrades_awaited():  # (the upgrade's work is not paced while its caller waits for it)
        for upgrade in pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not upgrade.done.wait(left):
                return False
    return True
