"""Forward results at special values (0, -0, inf, NaN, 1e30, ties) through both executor configs.

The OpInfo samples are random and finite; a decomposition can still differ from eager's kernel
where a masked-off branch holds inf or NaN (0 * inf is NaN), where a one-pass formula
overflows, or among ties. Each program runs on such values through the torch executor and
through the prims alone (every ltorch op decomposed, what a fusion executor is handed) and must
give eager's answer, NaN for NaN.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import squall
from squall.market.torch_executor import make_executor
from opinfos import prims_only_executor

CONFIGS = {
    "torch": [make_executor()],
    "decomposed": [prims_only_executor()],
}

inf, nan = math.inf, math.nan
# a row of 5 x 4 logits with non-finite values in rows whose target is ignored or weighed 0
LOGITS = torch.tensor(
    [[-1.0, 1e30, 0.999, 0.5], [-1e30, 0.0, inf, 1e-30], [-0.0, -inf, 3.0, 1.0], [nan, -2.5, -1.0, 1e30], [0.999, 0.5, -1e30, 0.0]],
    dtype=torch.float64,
)

# 0, -0, +-1, +-inf, NaN, huge and tiny values, cycled through a tensor of `shape`
SPECIALS = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, inf, -inf, nan, 1e30, -1e30, 1e-30, 3.0, -2.5, 0.999], dtype=torch.float64)


def specials(*shape: int) -> torch.Tensor:
    n = math.prod(shape)
    return SPECIALS[(torch.arange(n) * 5) % len(SPECIALS)].reshape(shape)


PROGRAMS = {
    # an ignored target adds nothing (the decomposition added 0 * its row's class-0 value: NaN)
    "nll_loss_ignored_rows": (lambda x: F.nll_loss(x, torch.tensor([-100, 1, 2, -100, 1])), LOGITS),
    "nll_loss_ignored_rows_none": (lambda x: F.nll_loss(x, torch.tensor([-100, 1, 2, -100, 1]), reduction="none"), LOGITS),
    "nll_loss_ignore_index_sum": (lambda x: F.nll_loss(x, torch.tensor([2, 0, 3, 2, 0]), ignore_index=2, reduction="sum"), LOGITS),
    # with grad on, the forward runs the grad rule's nll kernels: the same answer
    "nll_loss_ignored_rows_in_training": (lambda x: F.nll_loss(x, torch.tensor([-100, 1, 2, -100, 1])), LOGITS.clone().requires_grad_()),
    "cross_entropy_ignored_rows": (lambda x: F.cross_entropy(x, torch.tensor([2, 0, 3, 2]), ignore_index=2), LOGITS[[0, 2, 4, 3]]),
    # each column entry adds into its own output position (a convolution with an identity weight
    # multiplied it by the weight's zeros too: 0 * inf made whole outputs NaN)
    "fold": (lambda x: F.fold(x, (5, 5), 2), specials(2, 12, 16)),
    "fold_strided_padded": (lambda x: F.fold(x, 5, 2, stride=2, padding=1), specials(12, 9)),
    "fold_dilated": (lambda x: F.fold(x, (6, 5), (3, 2), dilation=(2, 1), stride=(1, 2)), specials(2, 6, 4)),
    # an output size equal to the input's samples input i at output i whatever the scale factor
    # (the decomposition resampled at 1 / 1.1), as x * 1 + x * 0: NaN at an infinity, as eager's kernel
    "interpolate_linear_same_size": (lambda x: F.interpolate(x, size=(5,), mode="linear"), specials(2, 3, 5)),
    "interpolate_linear_scale_to_same_size": (lambda x: F.interpolate(x, scale_factor=1.1, mode="linear"), torch.arange(10.0).reshape(1, 2, 5) ** 2),
    "interpolate_bilinear_scale_to_same_size": (
        lambda x: F.interpolate(x, scale_factor=(1.1, 2.0), mode="bilinear"), torch.arange(50.0, dtype=torch.float64).reshape(1, 2, 5, 5) ** 2,
    ),
    # eager counts min(ceil(|x - y|), 1): NaN where a difference is NaN (inf - inf), not 1
    "cdist_p0": (lambda x: torch.cdist(x[:3], x[3:], p=0.0), specials(8, 4)),
    # a window whose elements are all -inf: eager's index is its first element inside the input,
    # the decomposition's argmax took the padding around it (index -1)
    "max_pool2d_indices_all_minus_inf_padded": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), torch.full((1, 2, 4, 5), -inf)),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_forward_at_special_values_is_eagers(name: str, config: str):
    fn, x = PROGRAMS[name]
    expected = fn(x.clone())
    got = squall.jit(fn, executors=CONFIGS[config])(x.clone())
    torch.testing.assert_close(got, expected, equal_nan=True)
