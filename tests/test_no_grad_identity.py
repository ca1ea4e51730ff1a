"""Ops that can return their input, called under `torch.no_grad()` inside a compiled program.

Eager answers some of them with the input object itself (`x.flatten(1, 1)`, `torch.real` of a
real tensor, `torch.atleast_2d` of a matrix, `x.to(x.dtype)`): a gradient still reaches `x`
through the result. Others return a new tensor (`x.expand(x.shape)`, adaptive pooling to the
input's size, `einsum("ij->ij")`), which under no_grad carries none. squall's gradient must
follow eager's exactly in both modes: cut where eager cuts, passed once where eager passes.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import squall

SHAPE = (2, 3, 3, 4)

# ops that, on a tensor of SHAPE, may give back a tensor of the same shape and dtype
IDENTITY_FORMS = {
    "adaptive_avg_pool2d": lambda t: F.adaptive_avg_pool2d(t, (3, 4)),
    "adaptive_max_pool2d": lambda t: F.adaptive_max_pool2d(t, (3, 4)),
    "interpolate_area": lambda t: F.interpolate(t, size=(3, 4), mode="area"),
    "expand": lambda t: t.expand(*SHAPE),
    "expand_as": lambda t: t.expand_as(t),
    "broadcast_to": lambda t: torch.broadcast_to(t, SHAPE),
    "einsum": lambda t: torch.einsum("abcd->abcd", t),
    "flatten_one_dim": lambda t: t.flatten(1, 1),
    "real": lambda t: torch.real(t),
    "atleast_1d": lambda t: torch.atleast_1d(t),
    "atleast_2d": lambda t: torch.atleast_2d(t),
    "atleast_3d": lambda t: torch.atleast_3d(t),
    "reshape": lambda t: t.reshape(SHAPE),
    "view": lambda t: t.view(SHAPE),
    "contiguous": lambda t: t.contiguous(),
    "to_same_dtype": lambda t: t.to(torch.float64),
    "type_as": lambda t: t.type_as(t),
    "double": lambda t: t.double(),
    "narrow_whole": lambda t: t.narrow(1, 0, 3),
    "slice_whole": lambda t: t[:],
    "pad_zero": lambda t: F.pad(t, (0, 0)),
    "repeat_ones": lambda t: t.repeat(1, 1, 1, 1),
    "permute_identity": lambda t: t.permute(0, 1, 2, 3),
    "squeeze_none": lambda t: t.squeeze(0),
    "dropout_eval": lambda t: F.dropout(t, 0.5, training=False),
    "positive": lambda t: torch.positive(t),
    "conj_real": lambda t: t.conj(),
    "resolve_conj": lambda t: t.resolve_conj(),
}


def _program(op, no_grad: bool):
    def f(x):
        y = x * 1.5
        if no_grad:
            with torch.no_grad():
                z = op(y)
        else:
            z = op(y)
        # z's use is outside no_grad: a gradient reaches x through z only if z is y itself
        return (y * 2).sum() + (z * 3).sum()

    return f


def _assert_value_and_gradient_match(f, x):
    """squall.jit(f)(x) and its gradient for x are eager's."""
    expected = f(x)
    (expected_grad,) = torch.autograd.grad(expected, x)
    actual = squall.jit(f)(x)
    (actual_grad,) = torch.autograd.grad(actual, x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_grad, expected_grad)


@pytest.mark.filterwarnings("ignore::squall.SquallWarning")
@pytest.mark.parametrize("no_grad", [False, True], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name", list(IDENTITY_FORMS))
def test_identity_op_gradient_matches_eager(name, no_grad):
    f = _program(IDENTITY_FORMS[name], no_grad)
    x = torch.randn(*SHAPE, dtype=torch.float64, requires_grad=True)
    _assert_value_and_gradient_match(f, x)


@pytest.mark.filterwarnings("ignore::squall.SquallWarning")
def test_no_grad_expand_keeps_view_semantics():
    # the new name given under no_grad is still a view: a write through it reaches its base
    def f(x):
        y = x * 1
        with torch.no_grad():
            z = y.expand(2, 3)
            z.add_(1)
            return y.clone(), z.clone()

    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(squall.jit(f)(x), f(x))


def test_atleast_of_a_matrix_is_the_matrix():
    def f(x):
        return torch.atleast_2d(x) is x, torch.real(x) is x

    x = torch.randn(2, 3)
    assert squall.jit(f)(x) == f(x) == (True, True)


IN_PLACE_UNDER_NO_GRAD = {
    "add_": lambda y: y.add_(1),
    "clamp_": lambda y: y.clamp_(-0.5, 0.5),
    "setitem": lambda y: y.__setitem__((0, slice(None)), 5.0),
    "mul_through_view": lambda y: y[1].mul_(3),
}


@pytest.mark.parametrize("name", list(IN_PLACE_UNDER_NO_GRAD))
def test_in_place_write_under_no_grad_keeps_the_gradient_path(name):
    # eager's autograd keeps the written tensor in the graph: the gradient reaching its new value
    # passes unchanged to the value it replaced
    write = IN_PLACE_UNDER_NO_GRAD[name]

    def f(x):
        y = x * 2
        with torch.no_grad():
            write(y)
        return (y * y).sum() + x.sum()

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    _assert_value_and_gradient_match(f, x)
