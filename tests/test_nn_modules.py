"""nn modules built on the nn family, compiled whole and compared with eager."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

import squall


def _compiled(module: torch.nn.Module):
    return squall.jit(module)


def _run_quietly(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no op may fall back to opaque
        return fn(*args)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_module(affine):
    m = torch.nn.LayerNorm((4, 5), elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(_run_quietly(_compiled(m), x), m(x))


def test_group_norm_and_rms_norm_modules():
    for m, x in ((torch.nn.GroupNorm(2, 6), torch.randn(2, 6, 4)), (torch.nn.RMSNorm(8), torch.randn(3, 8))):
        torch.testing.assert_close(_run_quietly(_compiled(m), x), m(x))


def test_batch_norm2d_eval_uses_running_stats():
    m = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 2.0)
    m.eval()
    x = torch.randn(2, 3, 4, 4)
    before = m.running_mean.clone()
    torch.testing.assert_close(_run_quietly(_compiled(m), x), m(x))
    torch.testing.assert_close(m.running_mean, before)  # eval leaves the statistics alone


def test_batch_norm2d_train_updates_running_stats():
    m = torch.nn.BatchNorm2d(3, momentum=0.3)
    eager = copy.deepcopy(m)
    jm = _compiled(m)
    for _ in range(3):  # the second and third calls take the cached program
        x = torch.randn(4, 3, 5, 5)
        torch.testing.assert_close(_run_quietly(jm, x), eager(x))
        torch.testing.assert_close(m.running_mean, eager.running_mean)
        torch.testing.assert_close(m.running_var, eager.running_var)
        assert m.num_batches_tracked.item() == eager.num_batches_tracked.item()
    assert not torch.equal(m.running_mean, torch.zeros(3))


def test_batch_norm_train_then_eval_recompiles():
    m = torch.nn.BatchNorm1d(4)
    eager = copy.deepcopy(m)
    jm = _compiled(m)
    x = torch.randn(8, 4)
    torch.testing.assert_close(_run_quietly(jm, x), eager(x))
    m.eval()
    eager.eval()
    torch.testing.assert_close(_run_quietly(jm, x), eager(x))
    torch.testing.assert_close(m.running_var, eager.running_var)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_instance_norm_tracking_running_stats_updates_them_in_training_then_uses_them(dtype):
    m = torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.3).to(dtype)
    eager = copy.deepcopy(m)
    jm = _compiled(m)
    for shape in ((4, 3, 5, 5), (2, 3, 6, 4), (4, 3, 5, 5)):
        x = torch.randn(shape, dtype=dtype)
        torch.testing.assert_close(_run_quietly(jm, x), eager(x))
        torch.testing.assert_close(m.running_mean, eager.running_mean)
        torch.testing.assert_close(m.running_var, eager.running_var)
    assert not torch.equal(m.running_var, torch.ones(3, dtype=dtype))
    m.eval(), eager.eval()
    x = torch.randn(2, 3, 5, 5, dtype=dtype)
    torch.testing.assert_close(_run_quietly(jm, x), eager(x))


def test_instance_norm_given_one_running_stat_raises_eager_s_error():
    x, mean = torch.randn(2, 3, 4), torch.zeros(3)
    with pytest.raises(ValueError, match="running_mean and running_var must either both be None or neither be None"):
        squall.jit(lambda x, m: torch.nn.functional.instance_norm(x, running_mean=m))(x, mean)


def test_batch_norm_without_running_stats_in_eval():
    # track_running_stats=False normalises with batch statistics in eval too
    m = torch.nn.BatchNorm1d(4, track_running_stats=False).eval()
    x = torch.randn(8, 4, 3)
    torch.testing.assert_close(_run_quietly(_compiled(m), x), m(x))


def test_activation_modules_inplace():
    seq = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(inplace=True), torch.nn.Linear(6, 6), torch.nn.SiLU(inplace=True))
    x = torch.randn(3, 6)
    torch.testing.assert_close(_run_quietly(_compiled(seq), x), seq(x))


def test_softmax_module_and_trace_shows_ltorch_softmax():
    m = torch.nn.Softmax(dim=-1)
    x = torch.randn(2, 5)
    jm = _compiled(m)
    torch.testing.assert_close(_run_quietly(jm, x), m(x))
    assert "softmax" in squall.last_traces(jm).source
