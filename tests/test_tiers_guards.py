"""Tiered compilation of the programs the in-context judge once skipped: programs with value guards
(judged on the values the guards read) and programs that draw random numbers (judged in the caller's thread)."""
from __future__ import annotations

import pytest
import torch

import squall
from squall.frontend.speculation import guard_input_paths
from squall.market.torch_executor import make_executor
from squall.runtime import judge_inputs, tiers
from squall.runtime.jit import jitted_state
from test_tiers import SlowFuser, _own_cache, fused_faster, program  # noqa: F401 - fixtures used by name


def big_sum(x, y):
    # example inputs (normal floats) sum to about 0: only the call's own x passes this guard
    z = torch.exp(y) * 2.0 + 1.0
    return z * x if bool(x.sum() > 100) else z - x


def _fuser() -> SlowFuser:
    fuser = SlowFuser()
    fuser.gate.set()
    return fuser


def test_guard_input_paths_follow_the_values_a_guard_reads():
    f = squall.jit(big_sum, executors=[make_executor()])
    f(torch.full((8,), 20.0), torch.randn(8))
    assert guard_input_paths(jitted_state(f).last_entry.compilation) == [("args", 0)]


def test_a_guarded_program_is_judged_in_context_on_the_calls_values(fused_faster):
    f = squall.jit(big_sum, executors=[_fuser(), make_executor()], wait=True)
    x, y = torch.full((8,), 20.0), torch.randn(8)
    torch.testing.assert_close(f(x, y), big_sum(x, y))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "upgraded", upgrade
    # timed in context (the scripted judge: torch 2 ms, fused 1 ms), not kept untimed
    assert upgrade.verdict.torch_s == pytest.approx(2e-3) and "not judged" not in upgrade.reason
    assert squall.last_traces(f).plan.regions
    torch.testing.assert_close(f(x, y), big_sum(x, y))
    # a call whose guard fails compiles a variant, and computes eager's result
    small = torch.ones(8)
    torch.testing.assert_close(f(small, y), big_sum(small, y))
    torch.testing.assert_close(f(x, y), big_sum(x, y))


def test_a_guarded_program_whose_fused_plan_is_slower_keeps_the_torch_plan(monkeypatch):
    real_judge = tiers.judge
    slower = lambda torch_run, fused_run, **kw: real_judge(  # noqa: E731
        torch_run, fused_run, clock=iter([0.0, 1.0] + [0.0, 1e-3, 1e-3, 3e-3] * 3).__next__, **kw)
    monkeypatch.setattr(tiers, "judge", slower)
    f = squall.jit(big_sum, executors=[_fuser(), make_executor()], wait=True)
    x, y = torch.full((8,), 20.0), torch.randn(8)
    torch.testing.assert_close(f(x, y), big_sum(x, y))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "kept the torch plan" and "not faster" in upgrade.reason, upgrade
    assert not squall.last_traces(f).plan.regions


def test_guarded_inputs_too_large_to_copy_are_read_in_place(fused_faster, monkeypatch):
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 0)
    f = squall.jit(big_sum, executors=[_fuser(), make_executor()], wait=True)
    x, y = torch.full((8,), 20.0), torch.randn(8)
    torch.testing.assert_close(f(x, y), big_sum(x, y))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "upgraded" and upgrade.verdict.torch_s == pytest.approx(2e-3), upgrade
    torch.testing.assert_close(f(torch.ones(8), y), big_sum(torch.ones(8), y))


def test_guarded_inputs_changed_before_the_judge_leave_the_fused_plan_untimed_saying_so(fused_faster, monkeypatch):
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 0)  # not copied: read in place when the judge runs
    f = squall.jit(big_sum, executors=[_fuser(), make_executor()])
    x, y = torch.full((8,), 20.0), torch.randn(8)
    torch.testing.assert_close(f(x, y), big_sum(x, y))
    x.fill_(1.0)  # the user's tensor changes before the background judge runs: its value guard fails there
    assert squall.wait_for_upgrades(f, timeout=30)
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "upgraded" and upgrade.verdict.torch_s is None
    assert "a value guard failed on the judge's inputs" in upgrade.reason, upgrade.reason
    torch.testing.assert_close(f(x, y), big_sum(x, y))


class Masked(torch.nn.Module):
    """As Hugging Face's attention masks: a mask of all ones takes the fast branch."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, mask):
        h = torch.exp(self.proj(x)) * 2.0 + 1.0
        if bool(mask.all()):
            return h
        return h * mask[..., None]


def test_a_module_judged_on_its_mask_keeps_variants_compiled_before_the_upgrade(fused_faster):
    fuser = SlowFuser()
    m = Masked().eval()
    f = squall.jit(m, executors=[fuser, make_executor()])
    x = torch.randn(2, 4, 8)
    full, padded = torch.ones(2, 4, dtype=torch.long), torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with torch.no_grad():
        torch.testing.assert_close(f(x, full), m(x, full))  # the upgrade waits at the fuser's gate
        torch.testing.assert_close(f(x, padded), m(x, padded))  # a second variant, on the torch plan
        fuser.gate.set()
        assert squall.wait_for_upgrades(f, timeout=30)
        first, variant = squall.upgrades(f)
        assert "(a variant)" in variant.function
        for upgrade in (first, variant):
            assert upgrade.status == "upgraded" and upgrade.verdict.torch_s is not None, upgrade
        misses = f.cache_info().misses
        torch.testing.assert_close(f(x, padded), m(x, padded))
        torch.testing.assert_close(f(x, full), m(x, full))
        torch.testing.assert_close(f(x, padded), m(x, padded))
    assert f.cache_info().misses == misses  # the variant compiled before the upgrade was kept
    assert all(r.executor == "slowfuse" for r in squall.last_traces(f).plan.regions) and squall.last_traces(f).plan.regions


def test_a_variant_compiled_after_a_guard_failed_is_upgraded_judged_on_its_own_values(fused_faster):
    f = squall.jit(big_sum, executors=[_fuser(), make_executor()], wait=True)
    small, big, y = torch.ones(8), torch.full((8,), 20.0), torch.randn(8)
    torch.testing.assert_close(f(small, y), big_sum(small, y))
    torch.testing.assert_close(f(big, y), big_sum(big, y))  # the guard fails: a variant, upgraded at once
    first, variant = squall.upgrades(f)
    # examples (normal floats) would fail the variant's guard: it was judged on its own call's x
    assert variant.status == "upgraded" and variant.verdict.torch_s == pytest.approx(2e-3), variant
    assert first.status == "upgraded", first
    assert squall.last_traces(f).plan.regions
    misses = f.cache_info().misses
    for x in (small, big, small):
        torch.testing.assert_close(f(x, y), big_sum(x, y))
    assert f.cache_info().misses == misses


def noisy(x):
    return torch.nn.functional.dropout(torch.exp(x) * 2.0, p=0.5, training=True) + 1.0


def test_a_program_drawing_random_numbers_is_judged_in_the_callers_thread_leaving_its_stream_alone(fused_faster):
    f = squall.jit(noisy, executors=[_fuser(), make_executor()], wait=True)
    x = torch.randn(64)
    torch.manual_seed(3)
    out, after = f(x), torch.rand(4)
    torch.manual_seed(3)
    torch.testing.assert_close(out, noisy(x))  # the first call draws what eager draws: the judge's draws were undone
    torch.testing.assert_close(after, torch.rand(4))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "upgraded" and upgrade.verdict.torch_s == pytest.approx(2e-3), upgrade
    assert "values not compared, only where they are NaN or infinite: the program draws random numbers" in upgrade.reason


class NaNFuser(SlowFuser):
    """Its regions return NaNs: a broken executor, on a program whose values the judge cannot compare."""

    def compile_region(self, region):
        fn = super().compile_region(region)
        return lambda *a: (fn(*a)[0] * float("nan"), *fn(*a)[1:])


@pytest.mark.parametrize("timed", [True, False])
def test_a_program_drawing_random_numbers_is_not_upgraded_to_a_plan_returning_nans(fused_faster, timed):
    # its values are not compared (dropout draws other masks in a fused kernel), but NaNs where the
    # torch plan has none are wrong whatever was drawn; untimed (inductor with autotune off) as well
    fuser = NaNFuser()
    fuser.judge_in_context = timed
    fuser.gate.set()
    f = squall.jit(noisy, executors=[fuser, make_executor()], wait=True)
    x = torch.randn(64)
    with pytest.warns(squall.SquallWarning, match="NaNs or infinities where the torch plan has none"):
        out = f(x)
    assert torch.isfinite(out).all()
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "kept the torch plan", upgrade
    assert torch.isfinite(f(x)).all()


def test_in_the_background_a_program_drawing_random_numbers_keeps_its_regions_untimed(fused_faster):
    f = squall.jit(noisy, executors=[_fuser(), make_executor()])
    f(torch.randn(64))
    assert squall.wait_for_upgrades(f, timeout=30)
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "upgraded" and upgrade.verdict.torch_s is None
    assert "the user's calls draw beside the background judge" in upgrade.reason, upgrade.reason


# --- the judge runs on the call's values, not only where a guard reads them -----------------------


class WrongOnLargeValuesFuser(SlowFuser):
    """Its regions are wrong only where an input is below -50: drawn examples (normal floats) never are."""

    def compile_region(self, region):
        fn = super().compile_region(region)
        return lambda *a: (fn(*a)[0] + (a[0] < -50), *fn(*a)[1:])


def test_the_judge_checks_the_fused_plan_on_the_calls_values_without_guards(fused_faster):
    f = squall.jit(program, executors=[_with_gate(WrongOnLargeValuesFuser()), make_executor()], wait=True)
    x = torch.full((8,), -60.0)
    with pytest.warns(squall.SquallWarning, match="computes other results than its torch plan"):
        out = f(x)
    torch.testing.assert_close(out, program(x))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "kept the torch plan" and "results differ" in upgrade.reason, upgrade


def test_call_specs_copy_every_inputs_values_while_they_fit_the_budget(monkeypatch):
    small, large, weight = torch.arange(4.0), torch.arange(64.0), torch.full((2, 2), 3.0, requires_grad=True)
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 4 * 4 + 4 * 4)  # the small input and the weight, not the large
    params, (small_spec, large_spec), _ = tiers.call_specs([weight], (small, large), {})
    kept = small_spec.example()
    small.add_(1.0)  # the user's tensor changes after the call: the judge's copy does not
    torch.testing.assert_close(kept, torch.arange(4.0))
    torch.testing.assert_close(params[0].example(), weight.detach())
    assert params[0].example().requires_grad
    # past the budget: the user's tensor itself, read in place (no copy), while it lives
    borrowed = large_spec.example()
    assert borrowed.data_ptr() == large.data_ptr() and torch.equal(borrowed, large)
    del large, borrowed
    drawn = large_spec.example()  # then a drawn example of the same shape and dtype
    assert drawn.shape == (64,) and not torch.equal(drawn, torch.arange(64.0))


def test_call_specs_never_lend_the_judge_an_input_the_program_writes(monkeypatch):
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 0)
    weight, state = torch.ones(8, requires_grad=True), torch.zeros(8)
    params, (state_spec,), _ = tiers.call_specs([weight], (state,), {}, written=[("args", 0)])
    lent = params[0].example()
    assert lent.data_ptr() == weight.data_ptr() and lent.requires_grad and lent is not weight
    drawn = state_spec.example()  # written: the judge's runs must not write into the user's tensor
    assert drawn.data_ptr() != state.data_ptr()
    # an input whose metadata changed since the call (resized in place) is not read either
    weight.data = torch.ones(4)
    assert params[0].example().data_ptr() != weight.data_ptr()


def test_call_specs_keep_less_of_the_inputs_no_guard_reads(monkeypatch):
    # every entry's job holds its copies until its entry is hot: the unguarded ones take a smaller share
    guarded, other = torch.arange(8.0), torch.arange(8.0)
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_OTHERS_MAX_BYTES", 4 * 4)  # less than `other` takes
    (guarded_spec, other_spec), _ = tiers.call_specs(None, (guarded, other), {}, keep=[("args", 0)])[1:]
    torch.testing.assert_close(guarded_spec.example(), guarded)
    assert other_spec.value is None  # not copied: read in place
    assert other_spec.example().data_ptr() == other.data_ptr()


def _with_gate(fuser: SlowFuser) -> SlowFuser:
    fuser.gate.set()
    return fuser


def test_the_judge_checks_inputs_past_the_copy_budget_on_the_callers_values(fused_faster, monkeypatch):
    # a model's weights past the budget: drawn examples (unit normal) hid a plan wrong on the call's values
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 0)
    f = squall.jit(program, executors=[_with_gate(WrongOnLargeValuesFuser()), make_executor()], wait=True)
    x = torch.full((8,), -60.0)
    with pytest.warns(squall.SquallWarning, match="computes other results than its torch plan"):
        out = f(x)
    torch.testing.assert_close(out, program(x))
    torch.testing.assert_close(x, torch.full((8,), -60.0))  # read in place, never written
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "kept the torch plan" and "results differ" in upgrade.reason, upgrade


class WritesItsInputOnceFuser(SlowFuser):
    """Its first run writes its input in place, as a user's optimizer step beside a background judge
    would: the judge's two runs did not read the same values, so it runs both again on values
    drawn at the scale of the caller's."""

    def __init__(self):
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def compile_region(self, region):
        fn = super().compile_region(region)

        def run(*a):
            self.seen.append(a[0])
            if len(self.seen) == 1:
                a[0].add_(0.0)
            return fn(*a)
        return run


def test_the_judge_runs_on_drawn_examples_where_a_lent_input_changed_under_it(fused_faster, monkeypatch):
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 0)
    fuser = _with_gate(WritesItsInputOnceFuser())
    f = squall.jit(program, executors=[fuser, make_executor()], wait=True)
    x = torch.randn(4096) * 0.01 - 60.0
    torch.testing.assert_close(f(x), program(x))
    first, again = fuser.seen[0], fuser.seen[1]
    assert first.data_ptr() == x.data_ptr()  # the call's tensor, read in place
    assert again.data_ptr() != x.data_ptr() and not torch.equal(again, x)  # then drawn ...
    torch.testing.assert_close(again.mean(), x.mean(), atol=2e-3, rtol=0)  # ... at its scale, not unit normal
    torch.testing.assert_close(again.std(), x.std(), atol=0, rtol=0.1)


def bumped(x):
    x.add_(1.0)
    return torch.exp(x) * 3.0 - 1.0


def test_only_drawn_example_inputs_count_against_the_judges_memory_bound(fused_faster, monkeypatch):
    monkeypatch.setattr(judge_inputs, "JUDGE_KEEP_MAX_BYTES", 0)
    monkeypatch.setattr(tiers, "JUDGE_MAX_BYTES", 16)  # less than one input of 8 floats
    f = squall.jit(program, executors=[_fuser(), make_executor()], wait=True)
    x = torch.randn(8)
    torch.testing.assert_close(f(x), program(x))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.verdict.torch_s == pytest.approx(2e-3), upgrade  # read in place: nothing drawn
    # an input the program writes into is never read in place: its drawn example counts
    g = squall.jit(bumped, executors=[_fuser(), make_executor()], wait=True)
    x = torch.randn(8)
    expected_x = x.clone()
    expected = bumped(expected_x)
    torch.testing.assert_close(g(x), expected)
    torch.testing.assert_close(x, expected_x)
    (upgrade,) = squall.upgrades(g)
    assert upgrade.verdict.torch_s is None and "example inputs it would draw take more than" in upgrade.reason, upgrade
