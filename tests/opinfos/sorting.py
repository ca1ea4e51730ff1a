"""OpInfos for the ops of squall.ltorch.sorting."""
from __future__ import annotations

import torch

from opinfos import NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor


def _t(shape, dtype, device, **kwargs):
    return make_tensor(shape, dtype, device, **kwargs)


def _topk_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device), 2))
    yield SampleInput((_t((4, 5), dtype, device), 3, 0))
    yield SampleInput((_t((4, 5), dtype, device), 2, -1, False))
    yield SampleInput((_t((2, 3, 4), dtype, device), 0), {"dim": 1})
    yield SampleInput((_t((6,), dtype, device), 6), {"largest": False, "sorted": True})
    yield SampleInput((_t((), dtype, device), 1))
    yield SampleInput((_t((0, 3), dtype, device), 2))


def _topk_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 4)), RuntimeError, "selected index k out of range")
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 1, 2)), IndexError, "Dimension out of range")


def _sort_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device),))
    yield SampleInput((_t((4, 5), dtype, device), 0))
    yield SampleInput((_t((4, 5), dtype, device), 0, True))
    yield SampleInput((_t((2, 3, 4), dtype, device),), {"dim": -2, "descending": True, "stable": True})
    yield SampleInput((_t((8,), dtype, device),), {"stable": True})
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((0, 3), dtype, device), 1))
    yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), 1))


def _sort_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 2)), IndexError, "Dimension out of range")


def _msort_samples(dtype, device):
    for shape in ((5,), (4, 3), (), (0, 2)):
        yield SampleInput((_t(shape, dtype, device),))


opinfos = [
    OpInfo("topk", torch.topk, _topk_samples, NUMERIC, error_inputs=_topk_errors, symbol="torch.topk"),
    OpInfo("sort", torch.sort, _sort_samples, NUMERIC, error_inputs=_sort_errors, symbol="torch.sort"),
    OpInfo("argsort", torch.argsort, _sort_samples, NUMERIC, error_inputs=_sort_errors, symbol="torch.argsort"),
    OpInfo("msort", torch.msort, _msort_samples, NUMERIC, symbol="torch.msort"),
]
