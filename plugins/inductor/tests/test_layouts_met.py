"""Regions compile for the layouts their inputs will have (squall.market.fusion.strides_met):
a backward region reading what a forward region returned compiles once, for that layout."""
from __future__ import annotations

import pytest
import torch

import squall
from squall.market.fusion import strides_met

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import InductorExecutor  # noqa: E402
from squall_inductor.regions import example_inputs  # noqa: E402
from squall_inductor.worker import RegionCompiler  # noqa: E402

needs_cpu_inductor = pytest.mark.skipif(squall_inductor.cpp_compiler() is None,
                                        reason="no C++ compiler for inductor's CPU backend (g++ or clang++)")


def test_example_inputs_are_laid_out_as_the_strides_met_say():
    from squall.proxies import TensorProxy

    p = TensorProxy("t_saved", shape=(6, 4), dtype=torch.float32, device=torch.device("cpu"))
    assert example_inputs([p])[0].stride() == (4, 1)
    with strides_met({"t_saved": (1, 6)}):
        (example,) = example_inputs([p])
    assert example.shape == (6, 4) and example.stride() == (1, 6)


def saves_a_transposed_value(x, w):
    return (torch.exp(x.t()) * w).sum()


@needs_cpu_inductor
def test_a_backward_region_compiles_once_for_the_layout_the_forward_region_returns(monkeypatch):
    compiled_for = []
    real_call = RegionCompiler.__call__

    def counting(self, args):
        compiled_for.append([tuple(a.stride()) for a in args])
        return real_call(self, args)

    monkeypatch.setattr(RegionCompiler, "__call__", counting)
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    x, w = torch.randn(4, 6, requires_grad=True), torch.randn(6, 4)
    jfn = squall.jit(saves_a_transposed_value, executors=[ex, "torch"], wait=True)
    jfn(x, w).backward()  # the upgrade (wait=True) judged forward and backward before returning
    (upgrade,) = squall.upgrades(jfn)
    traces = squall.last_traces(jfn)
    assert traces.plan.regions and traces.backward.plan.regions, upgrade
    # exp of a transposed view is laid out transposed: the forward region returns it so, and the
    # backward region reading it was compiled for that layout, not again at the judge's backward
    assert len(compiled_for) == len(traces.plan.regions) + len(traces.backward.plan.regions), compiled_for
    assert any((1, 6) in strides for strides in compiled_for[1:]), compiled_for
    torch.testing.assert_close(x.grad, torch.exp(x.detach()) * w.t())
