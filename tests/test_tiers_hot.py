"""When a background upgrade is queued: once its entry is hot (squall.runtime.upgrade_worker.HOT_S), not at its first call."""
from __future__ import annotations

import time

import pytest
import torch

import squall
from squall.market.torch_executor import make_executor
from squall.runtime import tiers, upgrade_worker
from test_tiers import SlowFuser, fused_faster, program  # noqa: F401 - fused_faster is a fixture

POLLS = 3 * upgrade_worker.HOT_POLL_S  # time for the worker to look at the watched entries a few times


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path):
    # judgements are remembered on disk: each test starts with none
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "cache"))
    # and the worker watches none of the earlier tests' entries, which a lower HOT_S would queue beside its own
    for job, _ in upgrade_worker.default_worker()._watched.values():
        job.cancel()
    upgrade_worker.default_worker()._watched.clear()


def _heat(upgrade: tiers.Upgrade) -> float:
    """The seconds the worker counts the entry's calls as having taken so far."""
    job, heat = upgrade_worker.default_worker()._watched[id(upgrade)]
    return heat()


def _left_cold(upgrade: tiers.Upgrade, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while upgrade.status == "cold" and time.monotonic() < deadline:
        time.sleep(0.01)
    return upgrade.status != "cold"


def test_an_entry_called_once_is_not_queued(fused_faster):
    fuser = SlowFuser()
    fuser.gate.set()
    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(16)
    torch.testing.assert_close(fn(x), program(x))
    time.sleep(POLLS)
    (upgrade,) = squall.upgrades(fn)
    assert upgrade.status == "cold" and "queued once its calls have taken 0.05 s" in str(upgrade)
    assert not fuser.compiled_sources and not squall.last_traces(fn).plan.regions  # nothing compiled for it
    assert 0 < _heat(upgrade) < upgrade_worker.HOT_S


def test_an_entry_is_queued_once_its_calls_have_taken_hot_s(fused_faster, monkeypatch):
    fuser = SlowFuser()
    fuser.gate.set()
    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(16)
    fn(x)
    time.sleep(POLLS)  # (the heat is never more than the time since the first call started)
    (upgrade,) = squall.upgrades(fn)
    first = _heat(upgrade)  # one call's worth: each call counts as long as the first took
    monkeypatch.setattr(upgrade_worker, "HOT_S", 2.5 * first)  # hot at its third call
    torch.testing.assert_close(fn(x), program(x))
    time.sleep(POLLS)
    assert upgrade.status == "cold" and _heat(upgrade) == pytest.approx(2 * first)
    torch.testing.assert_close(fn(x), program(x))
    assert _left_cold(upgrade), "the hot entry's upgrade was never queued"
    assert squall.wait_for_upgrades(fn, timeout=30)
    assert upgrade.status == "upgraded" and upgrade.fused_after is not None
    assert "slowfuse_region" in squall.last_traces(fn).source
    torch.testing.assert_close(fn(x), program(x))  # the fused plan, as eager
    assert fn.cache_info().misses == 1


def test_calls_count_no_more_than_the_time_since_the_first_call(fused_faster):
    fuser = SlowFuser()
    fuser.gate.set()
    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(16)
    start = time.perf_counter()
    fn(x)
    (upgrade,) = squall.upgrades(fn)
    _, heat = upgrade_worker.default_worker()._watched[id(upgrade)]
    first = heat()
    for _ in range(int(2 * upgrade_worker.HOT_S / first) + 2):  # by the first call's time alone, hot twice over
        fn(x)
    assert heat() <= time.perf_counter() - start


def test_a_watched_entry_evicted_before_it_is_hot_is_not_upgraded(fused_faster):
    fuser = SlowFuser()
    fuser.gate.set()
    fn = squall.jit(program, executors=[fuser, make_executor()], cache_size=1, dynamic=False)
    fn(torch.randn(16))
    (first,) = squall.upgrades(fn)
    fn(torch.randn(8))  # a full cache: the first entry leaves it
    assert _left_cold(first)
    assert first.status == "evicted" and "before it was hot" in first.reason
    assert not fuser.compiled_sources


def test_the_worker_reads_no_heat_before_the_entry_can_be_hot(fused_faster, monkeypatch):
    # a call's heat counts no more than the time since the first call started: a poll before
    # HOT_S has passed could find nothing, and would only take the interpreter from the caller
    monkeypatch.setattr(upgrade_worker, "HOT_S", 0.3)
    fuser = SlowFuser()
    fuser.gate.set()
    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(16)
    start = time.perf_counter()
    fn(x)
    (upgrade,) = squall.upgrades(fn)
    worker = upgrade_worker.default_worker()
    assert worker._not_before[id(upgrade)] >= start + 0.3
    job, heat = worker._watched[id(upgrade)]
    read_at: list[float] = []

    def counted_heat():
        read_at.append(time.perf_counter())
        return heat()

    worker._watched[id(upgrade)] = (job, counted_heat)
    deadline = time.monotonic() + 10
    while not read_at and time.monotonic() < deadline:
        fn(x)
        time.sleep(0.01)
    assert read_at, "the worker never read the entry's heat"
    assert min(read_at) >= start + 0.3
    assert squall.wait_for_upgrades(fn, timeout=30)
