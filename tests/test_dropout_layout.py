"""Dropout draws eager's mask whatever its input's layout: eager's kernel fills its mask in the memory
order of its input (`empty_like(x)` keeps x's strides), so for the same seed a transposed input gets
another mask than a contiguous one. Under gradients the torch executor used to hand the kernel a
contiguous copy of a transposed value, drawing another mask than eager's (found by the model sweep,
bench/sweep_models.py, in nn.TransformerEncoderLayer's training: its dropout1 follows attention's
transposed output)."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import squall


def _dropout_of_a_transposed_value(x, w):
    return torch.nn.functional.dropout((x @ w).transpose(0, 1), 0.1)


@pytest.mark.parametrize("grad", [False, True])
def test_dropout_of_a_transposed_value_draws_eagers_mask(grad):
    x, w = torch.randn(8, 2, 32), torch.randn(32, 32, requires_grad=True)
    with torch.set_grad_enabled(grad):
        torch.manual_seed(1)
        expected = _dropout_of_a_transposed_value(x, w)
        torch.manual_seed(1)
        actual = squall.jit(_dropout_of_a_transposed_value)(x, w)
    assert_close(actual, expected)
    if grad:
        (expected_grad,) = torch.autograd.grad(expected.sum(), w)
        (actual_grad,) = torch.autograd.grad(actual.sum(), w)
        assert_close(actual_grad, expected_grad)


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_batch_first_transformer_encoder_layer_trains_with_eagers_dropout_masks(norm_first):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.3, batch_first=True, norm_first=norm_first).train()
    x = torch.randn(5, 3, 16)
    compiled = squall.jit(layer)
    torch.manual_seed(3)
    expected = layer(x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), layer.linear1.weight)
    torch.manual_seed(3)
    actual = compiled(x)
    (actual_grad,) = torch.autograd.grad(actual.sum(), layer.linear1.weight)
    assert_close(actual, expected)
    assert_close(actual_grad, expected_grad)
