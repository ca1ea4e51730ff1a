"""copy_, fill_ and zero_ as a program uses them: through views, into a module's buffer from call to
call (a recurrent state, as Mamba's cache keeps its own), and with gradients reaching the source.
No opaque call: each is a torch-language op (squall/ltorch/overwrites.py)."""
from __future__ import annotations

import warnings

import torch
from torch.testing import assert_close

import squall


def test_overwrites_through_views_reach_the_callers_tensor():
    def f(x, s):
        s[:, :2].copy_(x[:, 1:3])
        s[1].fill_(7)
        s.t()[0].zero_()
        return s * 2

    x, s = torch.randn(2, 4), torch.zeros(2, 4)
    s_expected = s.clone()
    expected = f(x, s_expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        actual = squall.jit(f)(x, s)
    assert_close(actual, expected)
    assert_close(s, s_expected)


class _RollingState(torch.nn.Module):
    """A state buffer shifted by one column per call and copied back in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(2, 4))
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.state.copy_(torch.cat([self.state[:, 1:], x[:, :1]], 1))
        return self.lin(self.state)


def test_a_buffer_written_with_copy_each_call_and_trained_through_matches_eager():
    torch.manual_seed(0)
    eager, compiled = _RollingState(), _RollingState()
    compiled.load_state_dict(eager.state_dict())
    jitted = squall.jit(compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for _ in range(3):
            x = torch.randn(2, 4)
            eager(x).square().sum().backward()
            jitted(x).square().sum().backward()
            assert_close(compiled.state, eager.state)
    assert_close(compiled.lin.weight.grad, eager.lin.weight.grad)
    assert squall.last_traces(jitted).backward is not None  # squall's own gradient


def test_gradients_reach_the_source_of_copy_and_fill_not_the_overwritten_value():
    def f(x, w):
        y = x * 3
        y.copy_(x * w)  # y's old value gets no gradient
        z = torch.zeros(3, 4).fill_(w.sum())
        return y.sum() + z.square().sum()

    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    expected = torch.autograd.grad(f(x, w), (x, w))
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        actual = torch.autograd.grad(squall.jit(f)(x, w), (x, w))
    assert_close(actual, expected)
