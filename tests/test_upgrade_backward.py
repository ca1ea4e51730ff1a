"""The background upgrade plans the backward the user's calls run, for the layouts they met
(squall.runtime.tiers, squall.compiler.autograd's `backwards_run`, squall.market.fusion.strides_met)."""
from __future__ import annotations

import pytest
import torch

import squall
from squall.market.fusion import stride_met, strides_met
from squall.market.torch_executor import make_executor
from squall.runtime import tiers
from test_tiers import SlowFuser, _own_cache, fused_faster  # noqa: F401 - fixtures


def logits_and_loss(x):
    logits = torch.exp(x) * 2.0 + 1.0
    return logits, (logits * logits).sum()


def _eager_grad(x, with_logits: bool):
    x = x.detach().requires_grad_()
    logits, loss = logits_and_loss(x)
    (loss + (logits.sum() if with_logits else 0)).backward()
    return x.grad


def test_the_upgrade_compiles_only_the_backward_the_calls_ran_and_a_backward_first_needed_later_compiles_nothing(fused_faster):
    fuser = SlowFuser()
    fn = squall.jit(logits_and_loss, executors=[fuser, make_executor()])
    x = torch.randn(16, requires_grad=True)
    for _ in range(2):  # a training step: only the loss gets a gradient, the logits none
        x.grad = None
        fn(x)[1].backward()
    fuser.gate.set()
    assert squall.wait_for_upgrades(fn, timeout=30)
    (upgrade,) = squall.upgrades(fn)
    assert upgrade.status == "upgraded", upgrade
    assert "its backward (for calls leaving 1 output without a gradient, as the user's did)" in upgrade.reason, upgrade
    traces = squall.last_traces(fn)
    # the backward planned is the one the calls run: without the logits' cotangent
    assert len(traces.backward.inputs) == len(traces.differentiated.backward.inputs) - 1
    planned = len(traces.plan.regions) + len(traces.backward.plan.regions)
    assert len(fuser.compiled_sources) == planned  # the full backward was not compiled

    x.grad = None
    fn(x)[1].backward()
    torch.testing.assert_close(x.grad, _eager_grad(x, with_logits=False))
    assert len(fuser.compiled_sources) == planned

    x.grad = None
    logits, loss = fn(x)
    # the full backward, first needed now: planned in this thread without the background fuser (its
    # compiles would stall the step), and right
    (loss + logits.sum()).backward()
    torch.testing.assert_close(x.grad, _eager_grad(x, with_logits=True))
    assert len(fuser.compiled_sources) == planned


def test_with_wait_a_backward_first_needed_at_a_call_is_compiled_then(fused_faster):
    fuser = SlowFuser()
    fuser.gate.set()
    fn = squall.jit(logits_and_loss, executors=[fuser, make_executor()], wait=True)
    x = torch.randn(16, requires_grad=True)
    fn(x)[1].backward()  # upgraded before it returned: no backward had run, so the full one was planned
    compiled = len(fuser.compiled_sources)
    x.grad = None
    fn(x)[1].backward()  # the backward without the logits' gradient: planned and compiled now, as the user waits
    torch.testing.assert_close(x.grad, _eager_grad(x, with_logits=False))
    assert len(fuser.compiled_sources) > compiled


def test_calls_running_the_full_backward_upgrade_it_as_before(fused_faster):
    fuser = SlowFuser()
    fn = squall.jit(logits_and_loss, executors=[fuser, make_executor()])
    x = torch.randn(16, requires_grad=True)
    for _ in range(2):
        x.grad = None
        logits, loss = fn(x)
        (loss + logits.sum()).backward()
    fuser.gate.set()
    assert squall.wait_for_upgrades(fn, timeout=30)
    (upgrade,) = squall.upgrades(fn)
    assert upgrade.status == "upgraded" and "without a gradient" not in upgrade.reason, upgrade
    traces = squall.last_traces(fn)
    assert len(traces.backward.inputs) == len(traces.differentiated.backward.inputs)
    x.grad = None
    logits, loss = fn(x)
    (loss + logits.sum()).backward()
    torch.testing.assert_close(x.grad, _eager_grad(x, with_logits=True))


def saves_a_transposed_value(x):
    return (torch.exp(x.t()) * 3.0).sum()


def test_a_backward_records_the_strides_of_what_it_read_and_the_upgrade_plans_for_them():
    fn = squall.jit(saves_a_transposed_value, executors=["torch"])
    x = torch.randn(4, 6, requires_grad=True)
    fn(x).backward()
    compilation = squall.last_traces(fn)
    assert list(compilation.backwards_run) == [frozenset()]  # the full backward ran, once recorded
    names, without_gradient, strides = tiers._backward_the_calls_run(compilation)
    assert (names, without_gradient) == (frozenset(), frozenset())
    # exp of a transposed view is laid out transposed, in eager and on the torch plan
    expected = torch.exp(x.detach().t()).stride()
    assert expected == (1, 6)
    saved = [p for p in compilation.differentiated.backward.inputs if tuple(p.shape) == (6, 4)]
    assert saved and all(strides[p.name] == expected for p in saved), strides
    # what a fusion executor asks while the upgrade plans with them
    with strides_met(strides):
        assert stride_met(saved[0]) == expected
    assert stride_met(saved[0]) is None


def test_the_upgrade_reuses_the_torch_plans_differentiation_so_names_match(fused_faster):
    fuser = SlowFuser()
    fn = squall.jit(saves_a_transposed_value, executors=[fuser, make_executor()])
    x = torch.randn(4, 6, requires_grad=True)
    for _ in range(2):
        fn(x).backward()
    base = squall.last_traces(fn)
    fuser.gate.set()
    assert squall.wait_for_upgrades(fn, timeout=30)
    fused = squall.last_traces(fn)
    assert fused is not base and fused.differentiated is base.differentiated
    x.grad = None
    fn(x).backward()
    torch.testing.assert_close(x.grad, torch.exp(x.detach()) * 3.0)


@pytest.mark.parametrize("shape", [(6, 4), (3, 6, 4)])
def test_a_stride_met_for_other_sizes_is_not_used(shape):
    fn = squall.jit(saves_a_transposed_value, executors=["torch"])
    x = torch.randn(4, 6, requires_grad=True)
    fn(x).backward()
    saved = next(p for p in squall.last_traces(fn).differentiated.backward.inputs if tuple(p.shape) == (6, 4))
    with strides_met({saved.name: (1,) * (len(shape) + 1)}):
        assert stride_met(saved) is None  # strides of another rank: not this value's
