"""A user's torch.autograd.Function in a compiled program: its forward traced as ops where no
gradient is needed; run whole, with the user's own backward, where one is."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall


class ScaledTanh(torch.autograd.Function):
    """A backward that is not the forward's derivative (as straight-through estimators are)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.tanh(x) * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 + x, None


class Doubled(torch.autograd.Function):
    """The forward/setup_context form."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 5


def program(x):
    return ScaledTanh.apply(x + 1, 2.0) + Doubled.apply(x)


def test_forward_is_traced_as_ops_without_gradients():
    x = torch.randn(4)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no opaque call
        assert_close(squall.jit(program)(x), program(x))


def test_the_users_backward_gives_the_gradient():
    x = torch.randn(4, requires_grad=True)
    (expected,) = torch.autograd.grad(program(x).sum(), x)
    with pytest.warns(squall.SquallWarning, match="opaque"):
        out = squall.jit(program)(x)
    assert_close(out, program(x))
    (actual,) = torch.autograd.grad(out.sum(), x)
    assert_close(actual, expected)  # 3 + (x + 1) + 5: the user's backward, not tanh's derivative


class Flagged(torch.autograd.Function):
    """A forward that reads ctx.needs_input_grad (as kernels that save less where no gradient is needed)."""

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        return x * w * scale + float(ctx.needs_input_grad[0]) + 2 * float(ctx.needs_input_grad[1]) + 4 * float(ctx.needs_input_grad[2])

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0), None


@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_needs_input_grad_in_a_traced_forward_is_eagers_under_no_grad(x_requires_grad):
    # eager's needs_input_grad says whether each argument requires grad, in grad mode or not;
    # the traced forward's said False for every one (w, a parameter, requires grad)
    w = torch.nn.Parameter(torch.randn(4))
    x = torch.randn(3, 4, requires_grad=x_requires_grad)

    def program(x, w):
        return Flagged.apply(x, w, 2.0)

    with torch.no_grad():
        assert_close(squall.jit(program)(x, w), program(x, w))
