"""OpInfos for the ops of squall.ltorch.histograms."""
from __future__ import annotations

import torch

from opinfos import ErrorInput, OpInfo, SampleInput, make_tensor


def _histc_samples(dtype, device):
    t = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)  # noqa: E731
    yield SampleInput((t(200),), {"bins": 7})  # the data's own range
    yield SampleInput((t(4, 50),), {"bins": 5, "min": -1.3, "max": 0.7})  # values outside are not counted
    yield SampleInput((t(30, low=-2, high=2).round(),), {"bins": 4, "min": -2, "max": 2})  # integral values on the edges
    yield SampleInput((torch.full((6,), 2.0, dtype=dtype, device=device),), {"bins": 4})  # one value: one wider each side
    yield SampleInput((torch.tensor([2.0, 3.0], dtype=dtype, device=device),), {"bins": 4, "min": 5, "max": 5})
    yield SampleInput((torch.tensor([1.0, float("nan"), 3.0], dtype=dtype, device=device),), {"bins": 4, "min": 0, "max": 4})
    yield SampleInput((t(0),), {"bins": 3})
    yield SampleInput((t(3, 3),))  # 100 bins by default
    # an MoE router's count of tokens per expert
    yield SampleInput((torch.tensor([0.0, 3, 1, 1, 2, 3, 3, 0], dtype=dtype, device=device),), {"bins": 4, "min": 0, "max": 3})


def _histc_errors(device):
    f = torch.tensor([1.0, 2.0], device=device)
    yield ErrorInput(SampleInput((f.long(),), {"bins": 4}), NotImplementedError, "not implemented for 'Long'")
    yield ErrorInput(SampleInput((f,), {"bins": 0}), RuntimeError, "bins must be > 0")
    yield ErrorInput(SampleInput((f,), {"bins": 3, "min": 3, "max": 1}), RuntimeError, "max must be larger than min")
    yield ErrorInput(SampleInput((f,), {"bins": 3, "min": float("-inf"), "max": 1}), RuntimeError, "is not finite")


opinfos = [
    OpInfo("histc", torch.histc, _histc_samples, dtypes=(torch.float32, torch.float64, torch.bfloat16), error_inputs=_histc_errors, symbol="torch.histc"),
]
