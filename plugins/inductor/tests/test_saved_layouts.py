"""A forward region returns the values only its backward reads in the layout inductor chose
(squall.extend.FusionRegion.layout_free): a convolution region's saved activations come back
channels-last, as inductor computed them, and the backward region reading them is compiled for
that layout (its convolution backwards run channels-last); the user's outputs keep eager's strides."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import squall

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import InductorExecutor  # noqa: E402
from squall_inductor.worker import RegionCompiler  # noqa: E402

needs_cpu_inductor = pytest.mark.skipif(squall_inductor.cpp_compiler() is None or not torch.backends.mkldnn.is_available(),
                                        reason="no C++ compiler for inductor's CPU backend, or no oneDNN (inductor's CPU channels-last plan)")


def conv_relu_conv(x, w1, w2):
    h = torch.relu(F.conv2d(x, w1, padding=1))  # read by the second convolution and saved for both backwards
    return F.conv2d(h, w2, padding=1)


def channels_last(strides, shape) -> bool:
    return tuple(strides) == torch.empty(shape).to(memory_format=torch.channels_last).stride()


@needs_cpu_inductor
def test_a_convolution_region_returns_its_saved_activation_channels_last_and_the_users_output_as_eager(monkeypatch):
    compiled_for = []
    real_call = RegionCompiler.__call__

    def recording(self, args):
        compiled_for.append([(tuple(a.shape), tuple(a.stride())) for a in args])
        return real_call(self, args)

    monkeypatch.setattr(RegionCompiler, "__call__", recording)
    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 12, 12)
    w1, w2 = torch.randn(16, 8, 3, 3, requires_grad=True), torch.randn(16, 16, 3, 3, requires_grad=True)
    jfn = squall.jit(conv_relu_conv, executors=[ex, "torch"], wait=True)
    jfn(x, w1, w2).sum().backward()  # the upgrade (wait=True) planned and judged forward and backward
    w1.grad = w2.grad = None
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = jfn(x, w1, w2)
    (upgrade,) = squall.upgrades(jfn)
    traces = squall.last_traces(jfn)
    assert upgrade.verdict.keep == "fused" and traces.plan.regions and traces.backward.plan.regions, upgrade
    # the user's output keeps eager's (contiguous) strides; the saved ReLU output is channels-last
    assert y.stride() == F.conv2d(torch.relu(F.conv2d(x, w1, padding=1)), w2, padding=1).stride() == (2304, 144, 12, 1)
    activations = [t for t in saved if t.shape == (2, 16, 12, 12)]
    assert activations and all(channels_last(t.stride(), t.shape) for t in activations), [t.stride() for t in saved]
    # the backward region was compiled for the channels-last activation it reads (not for eager's layout)
    backward_inputs = [strides for args in compiled_for[1:] for shape, strides in args if shape == (2, 16, 12, 12)]
    assert any(channels_last(s, (2, 16, 12, 12)) for s in backward_inputs), compiled_for  # (beside y's cotangents)
    y.sum().backward()
    # the gradients are eager's, and laid out as eager's (AccumulateGrad keeps the weights' layout)
    ex1, ex2 = w1.detach().clone().requires_grad_(), w2.detach().clone().requires_grad_()
    conv_relu_conv(x, ex1, ex2).sum().backward()
    torch.testing.assert_close(w1.grad, ex1.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(w2.grad, ex2.grad, rtol=1e-4, atol=1e-4)
    assert w1.grad.stride() == ex1.grad.stride() and w2.grad.stride() == ex2.grad.stride()


def conv_relu_returned(x, w1):
    return torch.relu(F.conv2d(x, w1, padding=1))  # saved for ReLU's backward, and the user's output


@needs_cpu_inductor
def test_a_saved_value_the_user_also_gets_keeps_eagers_strides():
    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    torch.manual_seed(0)
    x, w1 = torch.randn(2, 8, 12, 12), torch.randn(16, 8, 3, 3, requires_grad=True)
    jfn = squall.jit(conv_relu_returned, executors=[ex, "torch"], wait=True)
    jfn(x, w1).sum().backward()
    w1.grad = None
    y = jfn(x, w1)
    assert squall.last_traces(jfn).plan.regions
    assert y.stride() == conv_relu_returned(x, w1).stride() == (2304, 144, 12, 1)
    y.sum().backward()
    expected = w1.detach().clone().requires_grad_()
    conv_relu_returned(x, expected).sum().backward()
    torch.testing.assert_close(w1.grad, expected.grad, rtol=1e-4, atol=1e-4)


@needs_cpu_inductor
def test_gradients_asked_of_autograd_grad_keep_eagers_strides():
    # the backward region computes the second weight's gradient from the channels-last activation,
    # channels-last; `.grad` is restrided by AccumulateGrad, but `torch.autograd.grad` returns what the
    # backward gave: it is laid out as the weight is, as eager's is (a `.view(-1)` of it works as in eager)
    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 12, 12)
    w1, w2 = torch.randn(16, 8, 3, 3, requires_grad=True), torch.randn(16, 16, 3, 3, requires_grad=True)
    jfn = squall.jit(conv_relu_conv, executors=[ex, "torch"], wait=True)
    jfn(x, w1, w2).sum().backward()
    assert squall.upgrades(jfn)[0].verdict.keep == "fused" and squall.last_traces(jfn).backward.plan.regions
    grads = torch.autograd.grad(jfn(x, w1, w2).sum(), (w1, w2))
    expected = torch.autograd.grad(conv_relu_conv(x, w1, w2).sum(), (w1, w2))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert got.stride() == want.stride() == (got.shape[1] * 9, 9, 3, 1)
        assert got.view(-1).shape == (got.numel(),)
