"""torch._grouped_mm (Mixture-of-Experts layers): whole on torch, and decomposed to prims, against eager."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from opinfos import prims_only_executor


def _grouped(a, b, offs):
    return torch._grouped_mm(a, b, offs=offs)


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


# eager leaves rows (or columns) past the last boundary unwritten: only the rest is compared
CASES = {
    "rows_by_group": (lambda: (torch.randn(10, 8), torch.randn(3, 8, 4), _offs(3, 3, 9)), (slice(0, 9),)),
    "contraction_by_group": (lambda: (torch.randn(8, 8), torch.randn(8, 4), _offs(3, 7)), (slice(None),)),
    "batched": (lambda: (torch.randn(3, 4, 8), torch.randn(3, 8, 4), None), (slice(None),)),
}


@pytest.mark.parametrize("executors", ["torch", "prims"])
@pytest.mark.parametrize("case", list(CASES))
def test_grouped_mm_matches_eager(case, executors):
    make, valid = CASES[case]
    a, b, offs = make()
    expected = _grouped(a, b, offs)
    jitted = squall.jit(_grouped, executors=None if executors == "torch" else [prims_only_executor()])
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        actual = jitted(a, b, offs)
    assert_close(actual[valid], expected[valid])


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


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((torch.randn(10, 8), torch.randn(3, 8, 4), _offs(3, 7, 10).long()), {}, "Offsets have to be int32"),
        ((torch.randn(10, 8), torch.randn(3, 8, 4), None), {}, "Have to provide offsets"),
        ((torch.randn(3, 4, 8), torch.randn(3, 8, 4), _offs(1, 2, 3)), {}, "no offset if both matrices are 3d"),
        ((torch.randn(10, 8).long(), torch.randn(3, 8, 4).long(), _offs(3, 7, 10)), {}, "Float32, BFloat16 or Float16"),
        ((torch.randn(10, 8), torch.randn(3, 8, 4), _offs(3, 7, 10)), {"bias": torch.randn(3, 4)}, "Bias not supported"),
    ],
)
def test_grouped_mm_errors_name_the_problem(args, kwargs, message):
    with pytest.raises(RuntimeError, match=message):
        torch._grouped_mm(*args, **kwargs)
    with pytest.raises(RuntimeError, match=message):
        squall.jit(lambda a, b, o: torch._grouped_mm(a, b, offs=o, **kwargs))(*args)
