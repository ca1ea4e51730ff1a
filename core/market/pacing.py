"""Pacing squall's background work: the background upgrade thread's slices and pauses (`pace`), the
threads waiting for upgrades (`upgrades_awaited`), and the end of compiling at interpreter exit
(`stop_compiling`). Re-exported by squall.market.fusion, where fusion executors find them."""
from __future__ import annotations

import contextlib
import threading
import time

__all__ = ["stop_compiling", "compiling_stopped", "mark_background_upgrade_thread", "in_background_upgrade", "pace",
           "upgrades_awaited", "upgrades_are_awaited", "PACE_SLICE_S", "PACE_PAUSE"]

# set at interpreter exit (squall.runtime.tiers): a background upgrade still planning must not start
# region compiles then (their compilers' thread pools are shutting down, and a thread still
# inside one as the interpreter finalises aborts the process)
_exiting = threading.Event()


def stop_compiling() -> None:
    """From now on every region not yet compiled is declined (called once, at interpreter exit)."""
    _exiting.set()


def compiling_stopped() -> bool:
    """Whether the interpreter is exiting: a region compile that fails now is no fault to report."""
    return _exiting.is_set()


_upgrade_thread = threading.local()
# the background upgrade thread holds the interpreter in slices of about PACE_SLICE_S of its CPU
# time and sleeps PACE_PAUSE times as long after each (`pace`): at most a tenth of the time. A user's
# thread waits for the interpreter at the end of every torch op it runs (ops release it) while the
# upgrade runs Python, up to the 5 ms switch interval each time: beside a thread running Python flat
# out a GPT block's torch-plan calls took 3-7x as long, beside one holding it a quarter of the time 1.6-1.9x
PACE_SLICE_S = 1e-3
PACE_PAUSE = 9.0
_sleep, _cpu_time = time.sleep, time.thread_time


def mark_background_upgrade_thread() -> None:
    """Called by squall.runtime.tiers' worker thread as it starts: `in_background_upgrade()` is True there."""
    _upgrade_thread.active = True
    _upgrade_thread.since = _cpu_time()


# threads blocked in `upgrades_awaited` (squall.wait_for_upgrades): while one waits for the upgrades,
# they pace nothing (the waiting thread has no call to run, and the pauses would only delay it)
_awaiting = 0
_awaiting_lock = threading.Lock()


@contextlib.contextmanager
def upgrades_awaited():
    """While a thread waits here for background upgrades to finish, `pace` and the judge's pauses give way to no one."""
    global _awaiting
    with _awaiting_lock:
        _awaiting += 1
    try:
        yield
    finally:
        with _awaiting_lock:
            _awaiting -= 1


def upgrades_are_awaited() -> bool:
    """Whether a thread is blocked waiting for background upgrades (`upgrades_awaited`)."""
    return _awaiting > 0


def pace() -> None:
    """Called between steps of an upgrade's work (the planner's calls, the fusion pass's regions, the
    upgrade's stages): in the background upgrade thread, once it has run PACE_SLICE_S of CPU time
    since it last slept, sleep PACE_PAUSE times as long, so the user's threads have the interpreter
    nine tenths of the time; elsewhere (a compile in the user's thread), or while a thread waits for
    the upgrades (`upgrades_awaited`), nothing but a thread-local read."""
    if not getattr(_upgrade_thread, "active", False) or _awaiting:
        return
    ran = _cpu_time() - _upgrade_thread.since
    if ran >= PACE_SLICE_S:
        _sleep(PACE_PAUSE * ran)
        _upgrade_thread.since = _cpu_time()


def in_background_upgrade() -> bool:
    """Whether the calling thread is squall's background upgrade worker: work done here (a region
    compile) runs beside the user's own threads, not in one of them."""
    return getattr(_upgrade_thread, "active", False)
