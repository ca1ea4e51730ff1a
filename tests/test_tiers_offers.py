"""An upgrade's several offers (`FusionExecutor.offers()`: inductor's large regions, then islands):
judged in turn, the first winner installed at once, a later one replacing it only where it beats
both the torch plan and the offer running, timed in the same sitting; failures passed over."""
from __future__ import annotations

import time
import warnings

import pytest
import torch

import squall
from squall.market.torch_executor import make_executor
from squall.runtime import tiers
from test_tiers import SlowFuser, _own_cache, _scripted_clock, program  # noqa: F401 - fixtures used by name


class TwoOffers(SlowFuser):
    """A fuser offering two ways to fuse: "wide" (its own regions, one more op claimed: none here,
    the same regions under another name) first, then "narrow" (itself)."""

    def __init__(self, name: str = "slowfuse"):
        super().__init__(name)
        self.gate.set()
        self.wide = SlowFuser(name)
        self.wide.gate.set()

    def offers(self):
        return [("wide", self.wide), ("narrow", self)]


def _judge_in_turn(monkeypatch, *sittings: float | tuple[float, float, float]) -> list:
    """Each in-context judgement says the next sitting's times (no timing in tests): a number is
    the fused plan's time beside a torch plan of 2 ms and, where an offer runs already, its time
    when it was kept; a tuple is (torch plan, offer running, new fused plan) of a sitting."""
    real_judge, times, judged, running_s = tiers.judge, iter(sittings), [], []

    def judge(torch_run, fused_run, **kwargs):
        judged.append(1)
        sitting = next(times)
        if not isinstance(sitting, tuple):
            sitting = (2e-3, running_s[-1] if running_s else None, sitting)
        plan_s = sitting if kwargs.get("running") else (sitting[0], sitting[2])
        verdict = real_judge(torch_run, fused_run, clock=_scripted_clock(*plan_s), **kwargs)
        if verdict.keep == "fused":
            running_s.append(sitting[2])
        return verdict

    monkeypatch.setattr(tiers, "judge", judge)
    return judged


def _upgraded(fuser) -> tuple:
    """`program` jitted with `fuser` and the torch executor, waiting for its upgrade, called once
    (its result checked against eager's): (the jitted function, the input, its upgrade)."""
    fn = squall.jit(program, executors=[fuser, make_executor()], wait=True)
    x = torch.randn(16)
    torch.testing.assert_close(fn(x), program(x))
    (upgrade,) = squall.upgrades(fn)
    return fn, x, upgrade


def test_offers_are_judged_in_turn_and_one_slower_than_torch_is_not_kept(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 3e-3, 1e-3)  # "wide" loses to torch, "narrow" wins
    fuser = TwoOffers()
    fn, x, upgrade = _upgraded(fuser)
    assert upgrade.status == "upgraded" and len(judged) == 2
    # every offer's time shows in the reason (and so in squall.explain), then the one kept
    matched = ", its results matching the torch plan's on the call's values and on drawn values"
    assert upgrade.reason == ("wide: the fused plan was not faster in context: torch plan 2.000 ms, fused 3.000 ms per call (best of 3 batches each)" + matched + "; "
                              "narrow: in context: torch plan 2.000 ms, fused 1.000 ms per call (best of 3 batches each)" + matched + "; kept narrow")
    assert fuser.compiled_sources and fuser.wide.compiled_sources  # both planned, "narrow" runs
    assert upgrade.verdict.fused_s == pytest.approx(1e-3)


def test_of_two_offers_faster_than_torch_the_fastest_is_kept(monkeypatch):
    # both beat torch's 2 ms, "wide" not by far (above tiers.CLEAR_WIN), so "narrow" is tried too, and wins
    judged = _judge_in_turn(monkeypatch, 1.8e-3, 1e-3)
    fuser = TwoOffers()
    fn, x, upgrade = _upgraded(fuser)
    assert upgrade.status == "upgraded" and len(judged) == 2
    assert upgrade.reason.endswith("; kept narrow") and upgrade.verdict.fused_s == pytest.approx(1e-3)
    assert squall.last_traces(fn)[-1].bsyms[0].executor is fuser  # "narrow" is what runs


def test_a_later_offer_is_judged_against_the_one_running_in_the_same_sitting(monkeypatch):
    # "wide" wins at 0.9x the torch plan; "narrow" is timed in a slower sitting where the torch plan
    # took 3 ms: 0.8x of it, but slower than "wide" beside it, so "wide" keeps running (offers'
    # ratios from two sittings are not compared)
    judged = _judge_in_turn(monkeypatch, 1.8e-3, (3e-3, 2e-3, 2.4e-3))
    fuser = TwoOffers()
    fn, x, upgrade = _upgraded(fuser)
    assert upgrade.status == "upgraded" and len(judged) == 2
    assert squall.last_traces(fn)[-1].bsyms[0].executor is fuser.wide, upgrade.reason
    assert ("narrow: the fused plan was not faster than wide in context: torch plan 3.000 ms, wide (running) 2.000 ms, "
            "fused 2.400 ms per call") in upgrade.reason
    assert upgrade.reason.endswith("; kept wide") and upgrade.verdict.fused_s == pytest.approx(1.8e-3)
    torch.testing.assert_close(fn(x), program(x))


def test_judge_keeps_a_new_fused_plan_only_where_it_beats_the_running_one_too():
    torch_run = fused_run = running_run = lambda: None
    running = ("wide", running_run)
    beats_both = tiers.judge(torch_run, fused_run, running=running, clock=_scripted_clock(2e-3, 1.5e-3, 1e-3))
    assert beats_both.keep == "fused" and beats_both.running_s == pytest.approx(1.5e-3)
    assert "wide (running) 1.500 ms" in beats_both.reason
    behind_running = tiers.judge(torch_run, fused_run, running=running, clock=_scripted_clock(2e-3, 1e-3, 1.5e-3))
    assert behind_running.keep == "running" and "not faster than wide" in behind_running.reason
    behind_torch = tiers.judge(torch_run, fused_run, running=running, clock=_scripted_clock(1e-3, 1.5e-3, 1.2e-3))
    assert behind_torch.keep == "torch"


class RaisingFuser(SlowFuser):
    """Its regions raise when called (inductor's one-unit code did, on a training program's saved views)."""

    def compile_region(self, region):
        def region_fn(*args):
            raise RuntimeError("expected size 4==4, stride 1==6 at dim=0")

        return region_fn


def test_an_offer_whose_plan_raises_on_the_judges_inputs_is_passed_over_for_the_next(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1e-3)  # only "narrow" is timed
    fuser = TwoOffers()
    fuser.wide = RaisingFuser(fuser.name)
    fuser.wide.gate.set()
    fn, x, upgrade = _upgraded(fuser)
    assert upgrade.status == "upgraded" and len(judged) == 1, upgrade
    assert upgrade.reason.startswith("wide: its plan raised on the judge's inputs (RuntimeError: expected size 4==4")
    assert upgrade.reason.endswith("; kept narrow")
    torch.testing.assert_close(fn(x), program(x))


def test_the_winning_offer_is_remembered_and_alone_planned_in_the_next_process(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1.7e-3, 1.9e-3)  # "wide" wins, not by far: "narrow" is judged too
    x = torch.randn(16)
    for process in range(2):
        tiers._stores.clear()  # as a fresh process: read from the file
        fuser = TwoOffers()
        fn = squall.jit(program, executors=[fuser, make_executor()], wait=True)
        torch.testing.assert_close(fn(x), program(x))
        assert squall.upgrades(fn)[0].status == "upgraded"
        assert fuser.wide.compiled_sources and bool(fuser.compiled_sources) == (process == 0)  # then "narrow" is not planned
    assert len(judged) == 2  # both judged once, in the first process
    assert squall.upgrades(fn)[0].reason.startswith("remembered: wide: in context")


@pytest.mark.parametrize("wide_sitting, kept", [((40e-3, 40e-3), "narrow"), ((2e-3, 1.7e-3), "wide")])
def test_a_judgement_whose_sittings_timed_the_torch_plan_far_apart_is_not_remembered(monkeypatch, wide_sitting, kept):
    # "wide" judged on a busy machine (the torch plan 20x its time in the next sitting: lfm2's 238 ms
    # against 1.6 ms beside another job's compiles), or "narrow" so: a later process judges again
    wide_torch_s, wide_s = wide_sitting
    narrow = (2e-3, None, 1e-3) if kept == "narrow" else (40e-3, 1.7e-3, 50e-3)
    judged = _judge_in_turn(monkeypatch, (wide_torch_s, None, wide_s), narrow, (wide_torch_s, None, wide_s), narrow)
    for process in range(2):
        tiers._stores.clear()  # as a fresh process: read from the file
        fn, x, upgrade = _upgraded(TwoOffers())
        assert upgrade.status == "upgraded" and upgrade.reason.endswith(
            f"; kept {kept}; not remembered: the torch plan's time differed 20.0x between sittings "
            "(a busy machine), a later process judges again"), upgrade.reason
        assert len(judged) == 2 * (process + 1)  # both offers judged again in the second process
    torch.testing.assert_close(fn(x), program(x))


def test_a_torch_plan_win_from_sittings_far_apart_is_not_remembered(monkeypatch):
    judged = _judge_in_turn(monkeypatch, (40e-3, None, 50e-3), 3e-3, (40e-3, None, 50e-3), 3e-3)  # both lose, twice
    for process in range(2):
        tiers._stores.clear()  # as a fresh process: read from the file
        fn, x, upgrade = _upgraded(TwoOffers())
        assert upgrade.status == "kept the torch plan" and upgrade.reason.endswith("differed 20.0x between sittings "
                                                                                    "(a busy machine), a later process judges again"), upgrade
        assert len(judged) == 2 * (process + 1)  # not skipped as a remembered torch win


def test_a_remembered_win_whose_plan_now_computes_other_results_is_refused_and_forgotten(monkeypatch):
    # the regions a remembered verdict runs are compiled anew in each process (or loaded from a cache
    # folder another machine may share): a remembered win is not timed again, but still compared
    judged = _judge_in_turn(monkeypatch, 1e-3)
    x = torch.randn(16)
    fuser = TwoOffers()
    fn = squall.jit(program, executors=[fuser, make_executor()], wait=True)
    fn(x)
    assert squall.upgrades(fn)[0].status == "upgraded" and len(judged) == 1
    for wrong in (True, False):  # then two later processes: in the first, its regions compute wrongly
        tiers._stores.clear()  # as a fresh process: read from the file
        fuser = TwoOffers()
        fuser.wide.wrong = wrong
        fn = squall.jit(program, executors=[fuser, make_executor()], wait=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.testing.assert_close(fn(x), program(x))
        (upgrade,) = squall.upgrades(fn)
        if wrong:
            assert [str(w.message) for w in caught if "other results" in str(w.message)], caught
            assert upgrade.status == "kept the torch plan" and "its results differ" in upgrade.reason, upgrade
            assert "slowfuse" not in squall.last_traces(fn).source
        else:  # what the wrong one found is remembered in its place: the torch plan, nothing compiled
            assert upgrade.status == "kept the torch plan" and upgrade.reason.startswith("remembered: its results differ"), upgrade
            assert not fuser.wide.compiled_sources
    assert len(judged) == 1  # never timed again


def test_a_remembered_win_is_compared_again_and_a_new_executor_version_is_judged_afresh(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1e-3, 1e-3)
    x = torch.randn(16)
    reasons = []
    for version in ("1.0", "1.0", "1.1"):  # three processes, the third with a new release of the fuser
        tiers._stores.clear()  # as a fresh process: read from the file
        fuser = TwoOffers()
        fuser.distribution = fuser.wide.distribution = "squall-slowfuse"  # (as the plugin registry sets it)
        fuser._release = fuser.wide._release = version  # the installed release of that distribution
        fn = squall.jit(program, executors=[fuser, make_executor()], wait=True)
        torch.testing.assert_close(fn(x), program(x))
        (upgrade,) = squall.upgrades(fn)
        assert upgrade.status == "upgraded", upgrade
        reasons.append(upgrade.reason)
    assert len(judged) == 2  # timed in the first process and under the new version
    assert reasons[1].startswith("remembered: wide: in context") and "its results matched the torch plan's" in reasons[1], reasons
    assert reasons[2].startswith("wide: in context"), reasons


def test_fusion_offers_swap_each_fusion_executor_for_its_offer_in_the_priority_list():
    fuser, torch_ex = TwoOffers(), make_executor()
    priority = squall.market.config.ExecutorPriority([fuser, torch_ex], per_op={"torch.exp": [fuser, torch_ex]}, source="test")
    offers = tiers.fusion_offers(priority)
    assert [label for label, _ in offers] == ["wide", "narrow"]
    wide = offers[0][1]
    assert list(wide) == [fuser.wide, torch_ex] and wide.per_op["torch.exp"] == (fuser.wide, torch_ex)
    assert wide.key == priority.key and wide.source == "test"  # the same names: the same program key
    assert list(offers[1][1]) == [fuser, torch_ex]


def test_a_dropout_in_eval_mode_draws_nothing_and_the_program_is_judged(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1e-3)
    fuser = SlowFuser()
    fuser.gate.set()

    def with_dropout(x):
        return torch.nn.functional.dropout(program(x), p=0.5, training=False) * 3.0

    fn = squall.jit(with_dropout, executors=[fuser, make_executor()], wait=True)
    x = torch.randn(16)
    torch.testing.assert_close(fn(x), with_dropout(x))
    assert len(judged) == 1 and squall.upgrades(fn)[0].reason.startswith("in context")


def test_an_offer_that_wins_by_far_is_kept_and_the_later_offers_are_not_compiled(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1e-3)  # "wide" runs in half the torch plan's time: under tiers.CLEAR_WIN
    fuser = TwoOffers()
    fn, x, upgrade = _upgraded(fuser)
    assert upgrade.status == "upgraded" and len(judged) == 1
    assert fuser.wide.compiled_sources and not fuser.compiled_sources  # "narrow" was never planned
    assert upgrade.reason.endswith("; narrow not compiled (wide ran in 0.50x the torch plan's time); kept wide")
    assert "narrow not compiled" in str(squall.explain(fn, x))
    assert squall.last_traces(fn)[-1].bsyms[0].executor is fuser.wide
    torch.testing.assert_close(fn(x * 3), program(x * 3))


def test_the_first_offer_that_wins_runs_while_the_later_ones_compile_and_a_faster_one_replaces_it(monkeypatch):
    _judge_in_turn(monkeypatch, 1.8e-3, 1e-3)  # "wide" wins, not by far; "narrow" wins by more
    fuser = TwoOffers()
    fuser.gate.clear()  # "narrow" compiles only when the test says so
    fn = squall.jit(program, executors=[fuser, make_executor()])
    x = torch.randn(16)
    torch.testing.assert_close(fn(x), program(x))
    assert not squall.wait_for_upgrades(fn, timeout=0)  # queued now, not once hot: still compiling
    (upgrade,) = squall.upgrades(fn)
    deadline = time.monotonic() + 30
    while upgrade.fused_after is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # "wide" runs now, before "narrow" is compiled: the upgrade is not done yet
    assert upgrade.status == "upgraded" and not upgrade.done.is_set() and upgrade.fused_after > 0
    assert squall.last_traces(fn)[-1].bsyms[0].executor is fuser.wide
    torch.testing.assert_close(fn(x), program(x))
    assert "(fused plan running after" in str(upgrade)
    fuser.gate.set()
    assert squall.wait_for_upgrades(fn, timeout=30)
    assert upgrade.status == "upgraded" and upgrade.reason.endswith("; kept narrow")
    assert squall.last_traces(fn)[-1].bsyms[0].executor is fuser  # swapped to "narrow"
    assert upgrade.verdict.fused_s == pytest.approx(1e-3)
    torch.testing.assert_close(fn(x), program(x))
    assert fn.cache_info().misses == 1


class BrokenWide(TwoOffers):
    """Its "wide" offer fails to compile every region (a compiler that crashes)."""

    def __init__(self):
        super().__init__()

        def crash(region):
            raise RuntimeError("the wide compiler crashed")

        self.wide.compile_region = crash


def test_when_the_first_offer_fails_to_compile_the_later_offers_still_compile_and_win(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1e-3)
    fuser = BrokenWide()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = squall.jit(program, executors=[fuser, make_executor()], wait=True)
        x = torch.randn(16)
        torch.testing.assert_close(fn(x), program(x))
    (upgrade,) = squall.upgrades(fn)
    assert upgrade.status == "upgraded" and len(judged) == 1, upgrade
    assert upgrade.reason.startswith("wide: no fusion region was kept; narrow: in context") and upgrade.reason.endswith("; kept narrow")
    assert fuser.compiled_sources and squall.last_traces(fn)[-1].bsyms[0].executor is fuser
    torch.testing.assert_close(fn(x - 1), program(x - 1))


def test_when_planning_the_first_offer_raises_the_later_offers_are_still_planned(monkeypatch):
    judged = _judge_in_turn(monkeypatch, 1e-3)
    fuser = TwoOffers()
    real_compile = tiers.compile_traced

    def compile_traced(traced, bindings, layout, *, executors, **options):
        if fuser.wide in list(executors):
            raise RuntimeError("planning broke")
        return real_compile(traced, bindings, layout, executors=executors, **options)

    monkeypatch.setattr(tiers, "compile_traced", compile_traced)
    fn, x, upgrade = _upgraded(fuser)
    assert upgrade.status == "upgraded" and len(judged) == 1
    assert upgrade.reason.startswith("wide: planning failed (RuntimeError: planning broke); narrow: in context")
    assert squall.last_traces(fn)[-1].bsyms[0].executor is fuser




def test_the_judges_output_gradient_tells_a_softmax_s_plans_apart():
    # all-ones output gradients give a softmax an input gradient of exactly zero (each row's sums to
    # zero): the judge compared two plans' rounding noise, and refused fused plans for it
    from squall.runtime.judge_inputs import input_gradients, judge_cotangent

    x = torch.randn(4, 8, requires_grad=True)
    (grad,) = input_gradients(torch.softmax(x, -1), [x])
    assert grad.abs().max() > 1e-3
    out = torch.randn(3, 5, dtype=torch.bfloat16)
    assert torch.equal(judge_cotangent(out), judge_cotangent(out.clone()))  # the same for every plan compared
    assert judge_cotangent(out).dtype == torch.bfloat16 and (judge_cotangent(out) >= 0.5).all()
