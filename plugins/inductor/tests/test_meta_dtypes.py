"""Ops inductor would give other output dtypes than eager's kernel stay with torch, and a compiled
region whose outputs are not the trace's dtypes is not used (squall_inductor.meta_dtypes).

CPU batch norm of a bfloat16 input with float32 weights (what bfloat16 autocast makes of a
BatchNorm2d) saves its mean and inverse std in float32 in eager, in bfloat16 in torch's meta
function and decomposition: a region holding it returned bfloat16 statistics that a backward
region compiled for float32 read past their end (timm's ResNet: NaN weight gradients)."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from squall.extend import Declined, FusionRegion

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import InductorExecutor  # noqa: E402
from squall_inductor import executor as inductor_executor  # noqa: E402

needs_cpu_inductor = pytest.mark.skipif(squall_inductor.cpp_compiler() is None,
                                        reason="no C++ compiler for inductor's CPU backend (g++ or clang++)")

BATCH_NORM = "aten._native_batch_norm_legit_functional"


def _batch_norm_call(dtype: torch.dtype):
    """The training-mode batch norm call of a BatchNorm2d (float32 weights) on a `dtype` input, as traced."""
    bn = torch.nn.BatchNorm2d(4)
    jfn = squall.jit(bn, executors=["torch"])
    jfn(torch.randn(2, 4, 8, 8, dtype=dtype)).sum().backward()
    return next(b for t in squall.last_traces(jfn) for b in t.bsyms if b.sym.id == BATCH_NORM)


def test_batch_norm_saving_float32_statistics_of_a_bfloat16_input_is_declined():
    call = _batch_norm_call(torch.bfloat16)
    assert [p.dtype for p in call.output_proxies()[:3]] == [torch.bfloat16, torch.float32, torch.float32]
    impl, why = InductorExecutor(autotune=False, choices_path=None).offer(call)
    assert impl is None and "traces its output 1 as torch.bfloat16 where eager's kernel returns torch.float32" in why


def test_a_one_output_op_mixing_dtypes_is_claimed_without_a_fake_run(monkeypatch):
    # transformers' attention upcasts its softmax to float32 in every bfloat16 model: asking torch's
    # fake tensors about it would import Dynamo in the user's process for nothing
    def softmax_upcast(x):
        return torch.softmax(x, -1, dtype=torch.float32)

    jfn = squall.jit(softmax_upcast, executors=["torch"])
    jfn(torch.randn(4, 8, dtype=torch.bfloat16))
    call = next(b for b in squall.last_traces(jfn).traced.bsyms if "softmax" in b.sym.id)
    assert {p.dtype for p in (*call.input_proxies(), *call.output_proxies())} == {torch.bfloat16, torch.float32}
    asked = []
    monkeypatch.setattr(squall_inductor.meta_dtypes, "_ask", lambda *a: asked.append(a) or "")
    impl, why = InductorExecutor(autotune=False, choices_path=None).offer(call)
    assert impl is not None and not asked, why


def test_batch_norm_of_one_dtype_is_still_claimed():
    impl, why = InductorExecutor(autotune=False, choices_path=None).offer(_batch_norm_call(torch.float32))
    assert impl is not None, why


@needs_cpu_inductor
def test_a_compiled_region_returning_other_dtypes_than_the_trace_is_declined(monkeypatch):
    # the region-level net under the checker: were such an op claimed, its compiled region is not used
    call = _batch_norm_call(torch.bfloat16)
    monkeypatch.setattr(inductor_executor, "dtypes_differ", lambda bsym, callee: "")
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    assert ex.offer(call)[0] is not None
    region = FusionRegion("inductor", [call], [call], call.input_proxies(), call.output_proxies())
    result = ex.compile_region(region)
    assert isinstance(result, Declined) and "returned cpu torch.bfloat16 [4]" in result.reason, result


class ConvBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


@needs_cpu_inductor
def test_a_training_step_under_bfloat16_autocast_fuses_around_batch_norm_without_a_fault():
    torch.manual_seed(0)
    model, x = ConvBatchNorm().train(), torch.randn(4, 3, 10, 10)
    eager = ConvBatchNorm().train()
    eager.load_state_dict(model.state_dict())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager(x).float().sum().backward()
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(model, executors=[ex, "torch"], wait=True)
    with warnings.catch_warnings():
        # an executor's fault (a region returning bfloat16 statistics) would warn and replan
        warnings.filterwarnings("error", message=".*executor 'inductor'", category=squall.SquallWarning)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = jfn(x)
        out.float().sum().backward()
    (upgrade,) = squall.upgrades(jfn)
    traces = squall.last_traces(jfn)
    assert traces.plan.regions, upgrade
    assert all(BATCH_NORM not in region.ops for region in traces.plan.regions), traces.plan.regions
    for p, q in zip(model.parameters(), eager.parameters()):
        assert torch.isfinite(p.grad).all()
        torch.testing.assert_close(p.grad, q.grad, rtol=2e-2, atol=2e-2 * q.grad.abs().max().item())
