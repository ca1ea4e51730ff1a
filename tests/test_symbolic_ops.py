"""Ops over a symbolic size compile once for every length (issue 20): each case read the size's
exact value somewhere in its meta function, decomposition or grad rule (`float(n)`, a count
divided by, `int(n)`), so the symbolic trace was thrown away and every length compiled anew
(5 compiles for 4 lengths under `dynamic=True`). Each case checks eager's answers (and
gradients where differentiable) at every length, 1 and 2 included, and the compile count."""
from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import squall

LENGTHS = (3, 5, 8, 13)


def _floats(args):
    return [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _check(fn, make, *, grad: bool, lengths=LENGTHS, small=(2, 1), compiles=1):
    """`fn` jitted with every size symbolic: eager's answers (and gradients with `grad`) at each
    of `lengths` and then `small`, and `compiles` compiles over `lengths`."""
    jf = squall.jit(fn, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for i, n in enumerate((*lengths, *small)):
            torch.manual_seed(n)
            args = make(n)
            eager_args, jit_args = (_floats(args), _floats(args)) if grad else (args, args)
            expected, out = fn(*eager_args), jf(*jit_args)
            assert_close(out, expected, equal_nan=True)
            if grad:
                leaves = [a for a in eager_args if isinstance(a, torch.Tensor) and a.requires_grad]
                jit_leaves = [a for a in jit_args if isinstance(a, torch.Tensor) and a.requires_grad]
                cotangent = torch.randn_like(expected)
                assert_close(torch.autograd.grad(out, jit_leaves, cotangent), torch.autograd.grad(expected, leaves, cotangent), equal_nan=True)
            if i == len(lengths) - 1:
                assert jf.cache_info().misses == compiles


@pytest.fixture(autouse=True)
def _no_remembered_dims(monkeypatch):
    # what earlier jits of the same code learned would make a case's first call symbolic anyway
    monkeypatch.setenv("SQUALL_REMEMBER_DYNAMIC", "0")


# --- norms over a symbolic normalized size: the count divided by was read as a float ---------------

_NORMS = {
    "layer_norm over its last dim": (lambda x: F.layer_norm(x, (x.shape[-1],)), lambda n: (torch.randn(4, n),)),
    "layer_norm affine": (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), lambda n: (torch.randn(4, n), torch.randn(n), torch.randn(n))),
    "layer_norm over a batch": (lambda x: F.layer_norm(x, (4,)), lambda n: (torch.randn(n, 4),)),
    "rms_norm": (lambda x, w: F.rms_norm(x, (x.shape[-1],), w), lambda n: (torch.randn(4, n), torch.randn(n))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda n: (torch.randn(2, 4, n), torch.randn(4), torch.randn(4))),
    "var": (lambda x: x.var(-1), lambda n: (torch.randn(4, n),)),
    "std, no correction": (lambda x: x.std(-1, correction=0), lambda n: (torch.randn(4, n),)),
    "instance_norm": (lambda x: F.instance_norm(x), lambda n: (torch.randn(2, 4, n),)),
}


@pytest.mark.parametrize("name", sorted(_NORMS))
def test_a_norm_over_a_symbolic_size_compiles_once_with_eager_s_values_and_gradients(name):
    fn, make = _NORMS[name]
    # instance norm refuses one spatial element in training, as eager does: no length 1 there
    _check(fn, make, grad=True, small=(2,) if name == "instance_norm" else (2, 1))


def test_layer_norm_training_over_a_changing_hidden_size_under_the_default_policy_compiles_twice():
    # the first call static, the second symbolic: the same program for every later size
    def norm(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b)

    jf = squall.jit(norm)
    for n in (*LENGTHS, 21, 2):
        args = (torch.randn(4, n), torch.randn(n), torch.randn(n))
        eager_args, jit_args = _floats(args), _floats(args)
        expected, out = norm(*eager_args), jf(*jit_args)
        assert_close(out, expected)
        cotangent = torch.randn_like(expected)
        assert_close(torch.autograd.grad(out, jit_args, cotangent), torch.autograd.grad(expected, eager_args, cotangent))
    assert jf.cache_info().misses == 2  # one a size before (training: its grad rule read the count)
