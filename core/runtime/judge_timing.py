"""The in-context judge's timing: both plans interleaved batch by batch, best batch each, and a
verdict (squall.runtime.tiers judges each upgrade's fused plans with it)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..market.fusion import upgrades_are_awaited
from .choices import timing_clock

__all__ = ["MARGIN", "DECISIVE", "Verdict", "judge"]

# the fused program must beat the torch plan by this factor in context: timing noise is not a win
MARGIN = 0.97
# a sliced judge stops once its first `rounds` rounds leave no doubt: the fused plan's best batch beats the
# torch plan's by this fraction beyond the margin, or loses by it (gpt2's whole-model region ran in 0.5-0.6x
# the torch plan's time, and the background judge's 30 rounds and pauses took 1.2 s of the cold time to fused)
DECISIVE = 0.15


@dataclass
class Verdict:
    """The in-context judgement: which plan runs, its per-call times, and why."""

    keep: str  # "fused", "torch", or "running" (the fused plan running now beat it)
    torch_s: float | None
    fused_s: float | None
    reason: str
    running_s: float | None = None  # the fused plan running now, where it was timed in the same sitting


def judge(
    torch_run: Callable[[], Any],
    fused_run: Callable[[], Any],
    *,
    clock: Callable[[], float] | None = None,
    sync: Callable[[], None] = lambda: None,
    device_type: str = "cpu",
    rounds: int = 3,
    budget_s: float = 0.3,
    margin: float = MARGIN,
    slice_s: float | None = None,
    pause: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
    decisive: float = DECISIVE,
    running: tuple[str, Callable[[], Any]] | None = None,
) -> Verdict:
    """Time both plans, interleaved batch by batch (so load changes hit both), best batch
    each; keep the fused plan only when it is faster than `margin` times the torch plan.

    `running` is (label, run) of another fused plan, the one running now: it is timed in the same
    rounds, between the two, and the new fused plan is kept only when it also beats it by `margin`.
    Offers timed in separate sittings are not compared by their ratios to the torch plan: where
    the host is loaded, a plan making fewer calls slows less than one making many (a GPU's launch
    overhead), so ratios from two sittings disagree with what runs faster.

    By default `rounds` batches each, together about `budget_s` long. With `slice_s` (squall's
    upgrade judge), batches last about `slice_s` (at least one call) and there are as many as
    `budget_s` holds (at least `rounds`), but the judge stops after `rounds` rounds, or any round
    after, once the best batches leave no doubt: the fused plan's below `margin * (1 - decisive)`
    times the fastest other plan's, or above `1 + decisive` times it; only a close call uses the whole
    budget. After each batch the judge sleeps `pause` times as long as the batch took (a judge
    beside the user's calls): inductor's CPU kernels hold the GIL while they run, so a judge that
    ran flat out would stall the user's thread for whole batches; this one holds it at most
    1 / (1 + pause) of the time, in stretches of about `slice_s`, and its best batch is one the
    user's calls did not slow. `clock` defaults to `timing_clock(device_type)` (CPU time where
    that is fair to both)."""
    clock = clock or timing_clock(device_type)
    plans = {"torch": torch_run, **({"running": running[1]} if running else {}), "fused": fused_run}
    sync()
    start = clock()
    for run in plans.values():
        run()
    sync()
    once = max(clock() - start, 1e-7)
    at_least = rounds  # a sliced judge's rounds before it may stop early
    if slice_s is None:
        number = max(1, min(1000, int(budget_s / rounds / once)))
    else:
        number = max(1, min(1000, int(2 * slice_s / once)))  # `once` is a call of each
        rounds = max(rounds, min(1000, int(budget_s / (number * once))))
    best = dict.fromkeys(plans, float("inf"))
    for done in range(1, rounds + 1):
        for name, run in plans.items():
            start = clock()
            for _ in range(number):
                run()
            sync()
            took = clock() - start
            best[name] = min(best[name], took / number)
            if pause and not upgrades_are_awaited():
                sleep(pause * took)
        if slice_s is not None and done >= at_least and _decided(best, margin, decisive):
            break
    torch_s, fused_s, running_s = best["torch"], best["fused"], best.get("running")
    beside = f", {running[0]} (running) {running_s * 1e3:.3f} ms" if running else ""
    times = (f"in context: torch plan {torch_s * 1e3:.3f} ms{beside}, fused {fused_s * 1e3:.3f} ms per call "
             f"(best of {done} batches each)")
    if fused_s >= torch_s * margin:
        return Verdict("torch", torch_s, fused_s, f"the fused plan was not faster {times}", running_s)
    if running_s is not None and fused_s >= running_s * margin:
        return Verdict("running", torch_s, fused_s, f"the fused plan was not faster than {running[0]} {times}", running_s)
    return Verdict("fused", torch_s, fused_s, times, running_s)


def _decided(best: dict[str, float], margin: float, decisive: float) -> bool:
    """Whether best times this far apart settle the verdict (`judge`'s early stop): the new fused
    plan's against the fastest other plan's."""
    fused_s = best["fused"]
    rival_s = min(t for name, t in best.items() if name != "fused")
    return fused_s < rival_s * margin * (1 - decisive) or fused_s > rival_s * (1 + decisive)
