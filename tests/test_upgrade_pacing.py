"""The background upgrade's work in the user's process holds the interpreter a tenth of the time at
most (squall.market.fusion.pace; the in-context judge's pauses): a user's thread waits for the
interpreter at the end of every torch op while the upgrade runs Python."""
from __future__ import annotations

import threading

import torch

import squall
from squall.compiler.planner import plan
from squall.market import fusion, pacing
from squall.market.config import resolve_executors
from squall.runtime import tiers, upgrade_worker
from test_planner import PyFuser
from test_tiers import SlowFuser, _scripted_clock


def long_program(x):
    for _ in range(60):
        x = torch.exp(x) * 0.5 + 1.0
    return x.sum()


def _traced():
    jf = squall.jit(long_program, executors=["torch"])
    jf(torch.randn(8))
    return squall.last_traces(jf).traced


def _planned_in(thread_is_upgrade: bool, traced) -> list[str]:
    """The planned trace's calls (by executor and op), planned in a new thread, marked as the background upgrade's or not."""
    out: list[str] = []

    def run():
        if thread_is_upgrade:
            fusion.mark_background_upgrade_thread()
        planned = plan(traced, resolve_executors([PyFuser(), "torch"]))
        out.extend(f"{b.executor.name if b.executor else None}.{b.sym.id}" for b in planned.bsyms)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return out


def _scripted_pacing(monkeypatch) -> list[float]:
    """`pace`'s sleeps, recorded (not slept), with CPU time running on as a scripted clock says: 0.4
    ms per reading, so every few calls planned make a slice."""
    slept: list[float] = []
    monkeypatch.setattr(pacing, "_sleep", slept.append)
    ticks = iter(range(10**6))
    monkeypatch.setattr(pacing, "_cpu_time", lambda: next(ticks) * 4e-4)
    return slept


def test_the_upgrade_thread_plans_in_slices_sleeping_nine_times_as_long_and_a_users_thread_never_sleeps(monkeypatch):
    traced = _traced()
    slept = _scripted_pacing(monkeypatch)
    in_users_thread = _planned_in(False, traced)
    assert slept == []
    in_upgrade = _planned_in(True, traced)
    assert in_upgrade == in_users_thread  # the same plan, only paced
    assert len(slept) >= 10, slept
    # each pause is nine times the slice that ran before it: the thread holds the interpreter a tenth of the time
    assert all(s >= fusion.PACE_PAUSE * fusion.PACE_SLICE_S - 1e-12 for s in slept), slept
    assert fusion.PACE_PAUSE / (1 + fusion.PACE_PAUSE) >= 0.9


def test_a_background_judge_pauses_as_the_rest_of_the_upgrade_does(monkeypatch, tmp_path):
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "cache"))
    asked: list[dict] = []
    real_judge = tiers.judge

    def judge(torch_run, fused_run, **kwargs):
        asked.append(kwargs)
        return real_judge(torch_run, fused_run, clock=_scripted_clock(2e-3, 1e-3), **kwargs)

    monkeypatch.setattr(tiers, "judge", judge)
    fuser = SlowFuser()
    fuser.gate.set()
    jf = squall.jit(tiers_program, executors=[fuser, "torch"])
    x = torch.randn(16)
    jf(x)
    assert squall.wait_for_upgrades(jf, timeout=60)
    (upgrade,) = squall.upgrades(jf)
    assert upgrade.status == "upgraded", upgrade
    (kwargs,) = asked
    # batches of JUDGE_SLICE_S, each followed by a sleep `pause` times as long: a tenth of the time at most
    assert kwargs["slice_s"] == tiers.JUDGE_SLICE_S and 1 / (1 + kwargs["pause"]) <= 0.1 + 1e-12, kwargs
    torch.testing.assert_close(jf(x), tiers_program(x))
    assert upgrade_worker.default_worker().wait_idle(timeout=60)


def tiers_program(x):
    return torch.exp(x) * 2.0 + 1.0


def test_nothing_is_paced_while_a_thread_waits_for_the_upgrades(monkeypatch):
    # squall.wait_for_upgrades: the waiting thread runs no call the pauses would make room for
    traced = _traced()
    slept = _scripted_pacing(monkeypatch)
    with fusion.upgrades_awaited():
        assert fusion.upgrades_are_awaited()
        _planned_in(True, traced)
    assert slept == []
    assert not fusion.upgrades_are_awaited()
    _planned_in(True, traced)
    assert slept  # (paced again once nobody waits)
    # the judge's pauses too
    paused: list[float] = []
    clock = _scripted_clock(2e-3, 1e-3)
    run = lambda: None  # noqa: E731
    with fusion.upgrades_awaited():
        tiers.judge(run, run, clock=clock, sleep=paused.append, slice_s=tiers.JUDGE_SLICE_S, pause=tiers.JUDGE_PAUSE)
    assert paused == []
