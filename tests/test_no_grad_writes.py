"""In-place writes under `torch.no_grad()` (or through `.data`) into a tensor that requires grad,
inside a compiled program: weight clipping, EMA updates. Eager allows them on a leaf and keeps
the leaf in the graph; values and later gradients must be eager's."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall


def _clip_in_place(x, w):
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return (x @ w).sum()


def _two_writes(x, w):
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
        w.mul_(0.9)
    return (x @ w).tanh().sum()


def _through_data(x, w):
    w.data.clamp_(-0.5, 0.5)
    return (x @ w).sum()


def _row_zeroed(x, w):
    with torch.no_grad():
        w[0].zero_()
        w[:, 1] = 2.0
    return (x @ w).sum() + w.sum()


def _copied_in(x, w):
    with torch.no_grad():
        w.copy_(w * 0.5 + 1)
    return (x @ w).exp().sum()


def _used_before_without_saving_it(x, w):
    y = x @ w  # only w requires grad here: its gradient reads x, never w
    with torch.no_grad():
        w.mul_(0.5)
    return (y + x @ w).sum()


@pytest.mark.parametrize("program", [_clip_in_place, _two_writes, _through_data, _row_zeroed, _copied_in, _used_before_without_saving_it])
def test_a_write_under_no_grad_into_a_leaf_matches_eager(program):
    jf = squall.jit(program)
    for step in range(2):
        x = torch.randn(2, 4)
        w = torch.randn(4, 4, requires_grad=True)
        w_eager = w.detach().clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.filterwarnings("error", ".*(runs eagerly|autograd instead)", squall.SquallWarning)  # compiled and differentiated by squall
            out = jf(x, w)
        expected = program(x, w_eager)
        assert_close(out, expected)
        assert_close(w, w_eager)  # the caller's tensor written, as eager writes it
        out.backward()
        expected.backward()
        assert_close(w.grad, w_eager.grad)
    assert jf.cache_info().hits == 1


class _Clipped(nn.Module):
    """A WGAN-style critic: its weights clipped in forward, under no_grad."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        with torch.no_grad():
            for p in self.parameters():
                p.clamp_(-0.2, 0.2)
        return self.lin(x).relu().sum()


class _WithEma(nn.Module):
    """A model updating an exponential moving average of its weight (a parameter that requires
    grad, as a copied model's are) inside forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.ema = nn.Parameter(self.lin.weight.detach().clone())

    def forward(self, x, decay: float = 0.9):
        with torch.no_grad():
            self.ema.mul_(decay).add_(self.lin.weight, alpha=1 - decay)
        return (self.lin(x) + x @ self.ema.t()).sum()


@pytest.mark.parametrize("model", [_Clipped, _WithEma])
def test_modules_writing_their_parameters_under_no_grad_train_as_in_eager(model):
    torch.manual_seed(0)
    eager = model()
    twin = copy.deepcopy(eager)
    jm = squall.jit(twin)
    opt, opt_eager = torch.optim.SGD(twin.parameters(), lr=0.1), torch.optim.SGD(eager.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(5, 4) * 3
        for m, o in ((jm, opt), (eager, opt_eager)):
            o.zero_grad()
            m(x).backward()
            o.step()
        for p, q in zip(twin.parameters(), eager.parameters()):
            assert_close(p, q)
            assert_close(p.grad, q.grad)
    assert jm.cache_info().hits >= 1


def test_a_saved_value_written_under_no_grad_raises_at_backward_as_in_eager():
    # x @ w saves w for x's gradient; eager's backward then finds w changed. A compiled backward
    # would read the new value instead: the call runs eagerly (a warning says why) and raises as eager does
    def program(x, w):
        y = x @ w
        with torch.no_grad():
            w.mul_(0.5)
        return (y + x @ w).sum()

    x, w = torch.randn(2, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    with pytest.warns(squall.SquallWarning, match="earlier value"):
        out = squall.jit(program)(x, w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


class _DecayingScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0, 3.0, 4.0]))

    def forward(self, x):
        y = x * self.scale
        self.scale.mul_(0.5)
        return y.sum()


@pytest.mark.parametrize("argument", [False, True])
def test_a_saved_buffer_or_input_written_after_its_use_raises_at_backward_as_in_eager(argument):
    # mul saves the scale for x's gradient; the write-back of its new value overwrote what the
    # forward saved, and x's gradient came out halved (only inputs requiring grad were checked)
    def program(x, scale):
        y = x * scale
        scale.mul_(0.5)
        return y.sum()

    x = torch.ones(3, requires_grad=True)
    model = _DecayingScale()
    with pytest.warns(squall.SquallWarning, match="earlier value"):
        out = squall.jit(program)(x, torch.tensor([2.0, 3.0, 4.0])) if argument else squall.jit(model)(x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    assert x.grad is None


def test_a_write_with_grad_on_into_a_leaf_still_fails_as_in_eager():
    def program(x, w):
        w.mul_(0.5)
        return (x @ w).sum()

    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        program(torch.randn(2, 4), torch.randn(4, 4, requires_grad=True))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        squall.jit(program)(torch.randn(2, 4), torch.randn(4, 4, requires_grad=True))
