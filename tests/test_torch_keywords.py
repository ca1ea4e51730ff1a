"""Keyword names torch's C argument parser accepts besides a parameter's own: numpy's (`axis` for
`dim`, `keepdims` for `keepdim`, `x2` for `other`) and `input` where squall's op names the tensor
`a`. transformers' Funnel calls `torch.cat(..., axis=...)`; squall raised TypeError where eager ran."""
from __future__ import annotations

import pytest
import torch

import squall

CALLS = {
    "torch.cat(axis=)": lambda a, b: torch.cat([a, b], axis=1),
    "torch.stack(axis=)": lambda a, b: torch.stack([a, b], axis=0),
    "torch.sum(axis=, keepdims=)": lambda a, b: torch.sum(a, axis=0, keepdims=True),
    "Tensor.sum(axis=)": lambda a, b: a.sum(axis=1),
    "Tensor.mean(axis=, keepdims=)": lambda a, b: a.mean(axis=1, keepdims=True),
    "torch.softmax(axis=)": lambda a, b: torch.softmax(a, axis=-1),
    "torch.argmax(axis=)": lambda a, b: torch.argmax(a, axis=1),
    "Tensor.max(axis=)": lambda a, b: a.max(axis=1).values,
    "torch.cumsum(axis=)": lambda a, b: torch.cumsum(a, axis=0),
    "Tensor.unsqueeze(axis=)": lambda a, b: a.unsqueeze(axis=0),
    "torch.add(x2=)": lambda a, b: torch.add(a, x2=b),
    "torch.sum(input=)": lambda a, b: torch.sum(input=a, dim=0),
    "torch.mul(input=, other=)": lambda a, b: torch.mul(input=a, other=b),
    "torch.where(input=, other=)": lambda a, b: torch.where(a > 0, input=a, other=b),
}

# functions written in Python take only their own names; a name given twice is an error in eager too
REFUSED = {
    "F.softmax(axis=)": lambda a, b: torch.nn.functional.softmax(a, axis=-1),
    "Tensor.split(axis=)": lambda a, b: a.split(1, axis=0),
    "torch.sum(dim=, axis=)": lambda a, b: torch.sum(a, dim=0, axis=0),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_torch_keyword_names_run_as_in_eager(call):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(squall.jit(call)(a, b), call(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("call", REFUSED.values(), ids=REFUSED.keys())
def test_names_eager_refuses_are_refused(call):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    with pytest.raises(TypeError, match="axis") as eager:
        call(a, b)
    # a TypeError naming the keyword, as eager's does (its wording is torch's, and differs between versions)
    with pytest.raises(TypeError, match="axis"):
        squall.jit(call)(a, b)
    assert "unexpected keyword argument 'axis'" in str(eager.value) or "invalid combination of arguments" in str(eager.value)


def test_keyword_names_under_gradients():
    a = torch.randn(2, 3, requires_grad=True)
    b = torch.randn(2, 3)

    def f(a, b):
        return torch.cat([a, b], axis=1).softmax(-1).sum(axis=0, keepdims=True)

    expected = torch.autograd.grad(f(a, b).square().sum(), a)[0]
    actual = torch.autograd.grad(squall.jit(f)(a, b).square().sum(), a)[0]
    torch.testing.assert_close(actual, expected)
