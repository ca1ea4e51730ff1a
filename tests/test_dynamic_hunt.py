"""Wrong answers found by differential fuzzing of dynamic shapes against eager (the dynhunt task).

Each test is a minimised case that gave another result than eager before its fix.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import squall


def _attend(x, mask):
    q = x[:, None]
    return F.scaled_dot_product_attention(q, q, q, attn_mask=mask[:, None, None, :])


@pytest.mark.parametrize("dynamic", [None, True])
def test_attention_over_a_head_dimension_with_a_step_trains_as_eager_over_changing_lengths(dynamic):
    # the input's head dimension has stride 2 (a slice of a wider tensor): the CPU flash kernels
    # read it as if dense, so squall's forward and gradients were another attention's
    jf = squall.jit(_attend, dynamic=dynamic)
    torch.manual_seed(0)
    for batch, length in ((2, 3), (5, 3), (1, 5), (3, 4)):
        wide = torch.randn(batch, length, 8)
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, length // 2 + 1 :] = False  # the last row padded at its end
        wide_eager = wide.clone().requires_grad_(True)
        wide.requires_grad_(True)
        x, x_eager = wide[..., ::2], wide_eager[..., ::2]
        out, expected = jf(x, mask), _attend(x_eager, mask)
        assert_close(out, expected)
        cotangent = torch.randn_like(expected)
        assert_close(torch.autograd.grad(out, wide, cotangent)[0], torch.autograd.grad(expected, wide_eager, cotangent)[0])


_MEAN_LOSSES = {
    "mse": lambda x: F.mse_loss(x, x.flip(0)),
    "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, (x > 0).float()),
    "kl_div_batchmean": lambda x: F.kl_div(x.log_softmax(-1).transpose(0, 1), x.softmax(-1).transpose(0, 1), reduction="batchmean"),
    "cross_entropy_probabilities": lambda x: F.cross_entropy(x.reshape(-1, 4), x.detach().reshape(-1, 4).softmax(-1)),
}


@pytest.mark.parametrize("name", sorted(_MEAN_LOSSES))
def test_a_loss_s_mean_over_symbolic_lengths_compiles_once_with_eager_s_values_and_gradients(name):
    # the mean divided by the element count read as a float: a symbolic count was read and
    # guarded, so every length compiled anew (5 compiles for 4 lengths, the first thrown away)
    loss = _MEAN_LOSSES[name]
    jf = squall.jit(loss, dynamic=True)
    torch.manual_seed(0)
    for length in (3, 5, 6, 7):
        x = torch.randn(2, length, 4, requires_grad=True)
        out, expected = jf(x), loss(x)
        assert_close(out, expected)
        assert_close(torch.autograd.grad(out, x)[0], torch.autograd.grad(expected, x)[0])
    assert jf.cache_info().misses == 1
