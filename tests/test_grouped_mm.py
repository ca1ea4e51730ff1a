"""torch._grouped_mm beyond its OpInfo (tests/opinfos/grouped.py): the layout eager's CPU kernel rejects, gradients, bias."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import squall
from opinfos import prims_only_executor


def _grouped(a, b, offs):
    return torch._grouped_mm(a, b, offs=offs)


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def test_grouped_mm_columns_by_group_decomposed():
    # 3-D x 2-D: eager's CPU kernel rejects it in torch 2.13, so the reference is per-group products
    a, b, offs = torch.randn(3, 4, 8), torch.randn(8, 12), _offs(4, 8, 12)
    actual = squall.jit(_grouped, executors=[prims_only_executor()])(a, b, offs)
    assert_close(actual, torch.cat([a[i] @ b[:, 4 * i : 4 * i + 4] for i in range(3)], dim=1))


def test_grouped_mm_gradients_match_eager():
    a, b, offs = torch.randn(10, 8, requires_grad=True), torch.randn(3, 8, 4, requires_grad=True), _offs(3, 7, 10)
    expected = torch.autograd.grad(_grouped(a, b, offs).square().sum(), (a, b))
    actual = torch.autograd.grad(squall.jit(_grouped)(a, b, offs).square().sum(), (a, b))
    for g, e in zip(actual, expected):
        assert_close(g, e)


def test_grouped_mm_bias_is_rejected_as_torch_rejects_it():
    a, b, offs = torch.randn(10, 8), torch.randn(3, 8, 4), _offs(3, 7, 10)
    with pytest.raises(RuntimeError, match="Bias not supported"):
        torch._grouped_mm(a, b, offs=offs, bias=torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="Bias not supported"):
        squall.jit(lambda a, b, o: torch._grouped_mm(a, b, offs=o, bias=torch.ones(3, 4)))(a, b, offs)
