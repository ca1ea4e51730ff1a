"""A jitted function that reads tensors requiring grad without taking them as arguments (a global
module's parameters, one reached through a closure or a checkpointed lambda): their gradients
are eager's. squall's own gradient transform differentiates only the program's inputs, so such a
program is differentiated by PyTorch's autograd, with a warning saying how to avoid that."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import squall

torch.manual_seed(0)
HEAD = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def through_global(x, y):
    return F.cross_entropy(HEAD(x), y)


def through_checkpoint(x, y):
    return F.cross_entropy(checkpoint(lambda t: HEAD(t), x, use_reentrant=False), y)


def _gradients(fn, x, y):
    HEAD.zero_grad()
    x = x.detach().clone().requires_grad_(x.requires_grad)
    loss = fn(x, y)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in HEAD.parameters()], x.grad


@pytest.mark.parametrize("fn", [through_global, through_checkpoint])
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_captured_parameters_get_eagers_gradients(fn, input_requires_grad):
    jitted = squall.jit(fn)
    for batch in (5, 5, 7):
        x, y = torch.randn(batch, 4, requires_grad=input_requires_grad), torch.randint(0, 3, (batch,))
        expected = _gradients(fn, x, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)  # (said once per compile: the test below)
            actual = _gradients(jitted, x, y)
        torch.testing.assert_close(actual[0], expected[0])
        for got, want in zip(actual[1], expected[1]):
            torch.testing.assert_close(got, want)
        if input_requires_grad:
            torch.testing.assert_close(actual[2], expected[2])


def test_the_warning_says_how_to_have_squall_differentiate_it():
    x, y = torch.randn(5, 4, requires_grad=True), torch.randint(0, 3, (5,))
    with pytest.warns(squall.SquallWarning, match=r"reads 4 tensor\(s\) that require grad without taking them as arguments.*squall.jit the module itself"):
        squall.jit(through_global)(x, y)


def test_a_jitted_module_is_differentiated_by_squall_without_the_warning():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.randn(5, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.cross_entropy(squall.jit(model)(x), torch.randint(0, 3, (5,))).backward()
    assert not any("without taking them as arguments" in str(w.message) for w in caught)
    assert all(p.grad is not None for p in model.parameters())
