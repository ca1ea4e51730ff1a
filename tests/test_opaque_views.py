"""Views returned by torch calls squall runs opaquely (not in its torch language: `x.imag`,
`torch.view_as_real`): read, they answer as eager; a write through one, or a use of one after its
tensor changed, is refused with a clear error (it silently did not reach the other before)."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from eager_answers import runs_eagerly_saying


def _quiet_jit(fn):
    jitted = squall.jit(fn)

    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)  # "runs as an opaque torch call"
            return jitted(*args)

    return call


def test_a_view_an_opaque_call_returns_reads_as_in_eager():
    def f(x):
        return x.imag * 2 + torch.view_as_real(x).sum(-1), x.real.abs()

    x = torch.randn(5, dtype=torch.complex64)
    torch.testing.assert_close(_quiet_jit(f)(x), f(x))


@pytest.mark.parametrize("write", [
    lambda y: y.imag.add_(1),
    lambda y: y.real.mul_(2),
    lambda y: torch.view_as_real(y).__setitem__((..., 0), 0.0),
    lambda y: y.imag.zero_(),
])
def test_a_write_through_an_opaque_view_runs_eagerly(write):
    def f(x):
        y = x.clone()
        write(y)
        return y

    x = torch.randn(4, dtype=torch.complex64)
    runs_eagerly_saying(f, lambda: (x.clone(),), "opaque torch call, which returns a view")


def test_a_write_through_an_opaque_view_of_an_input_runs_eagerly_and_writes_it_as_eager_does():
    def f(x):
        x.imag.zero_()
        return x

    x = torch.randn(4, dtype=torch.complex64)
    runs_eagerly_saying(f, lambda: (x.clone(),), r"torch.Tensor.imag\(...\)")


def test_an_opaque_view_used_after_its_tensor_changed_runs_eagerly():
    def f(x):
        y = x.clone()
        im = y.imag
        y.mul_(2)  # eager's `im` sees this
        return im + 1

    x = torch.randn(4, dtype=torch.complex64)
    runs_eagerly_saying(f, lambda: (x.clone(),), "a view torch.Tensor.imag.*changed since")


def test_an_opaque_view_taken_after_the_change_compiles():
    def f(x):
        y = x.clone()
        y.mul_(2)
        return y.imag + 1

    x = torch.randn(4, dtype=torch.complex64)
    torch.testing.assert_close(_quiet_jit(f)(x), f(x))
