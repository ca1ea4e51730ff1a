"""OpInfos for the ops of squall.ltorch.grouped."""
from __future__ import annotations

import torch

from opinfos import ErrorInput, OpInfo, SampleInput, make_tensor


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def _grouped_mm(a, b, offs, rows=None):
    # eager leaves the rows past the last boundary unwritten: only the rest is compared
    out = torch._grouped_mm(a, b, offs=offs)
    return out if rows is None else out[:rows]


def _grouped_mm_reference(a, b, offs, rows=None):
    # one product per group, from the boundaries' values; what eager leaves unwritten past the
    # last boundary (and its backward too) is left out or zero here; torch checks the arguments
    torch._grouped_mm(a.detach(), b.detach(), offs=offs)
    if offs is None:
        return a @ b
    starts = [0, *offs.tolist()[:-1]]
    if a.ndim == 2 and b.ndim == 3:
        out = torch.cat([a[s:e] @ b[i] for i, (s, e) in enumerate(zip(starts, offs.tolist()))])
        return out if rows is None else out[:rows]
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, offs.tolist())])


def _grouped_mm_samples(dtype, device):
    # torch's kernels want 16-byte aligned strides: sizes are multiples of 8
    t = lambda *shape: make_tensor(shape, dtype, device, low=-2, high=2)  # noqa: E731
    yield SampleInput((t(24, 8), t(3, 8, 16), _offs(5, 5, 20), 20))  # an MoE layer's rows by expert, one empty
    yield SampleInput((t(16, 8), t(2, 8, 8), _offs(16, 16), 16))
    yield SampleInput((t(8, 16), t(16, 8), _offs(3, 16)))  # the contraction dimension by group
    yield SampleInput((t(2, 8, 8), t(2, 8, 16), None))  # batched


def _grouped_mm_errors(device):
    f = lambda *shape: make_tensor(shape, torch.float32, device)  # noqa: E731
    yield ErrorInput(SampleInput((f(16, 8), f(2, 8, 8), _offs(3, 16).long())), RuntimeError, "Offsets have to be int32")
    yield ErrorInput(SampleInput((f(16, 8), f(2, 8, 8), None)), RuntimeError, "Have to provide offsets")
    yield ErrorInput(SampleInput((f(2, 8, 8), f(2, 8, 8), _offs(1, 2))), RuntimeError, "no offset if both matrices are 3d")
    yield ErrorInput(SampleInput((f(16, 8).long(), f(2, 8, 8).long(), _offs(3, 16))), RuntimeError, "Float32, BFloat16 or Float16")


opinfos = [
    OpInfo(
        "_grouped_mm",
        _grouped_mm,
        _grouped_mm_samples,
        dtypes=(torch.float32, torch.bfloat16),
        error_inputs=_grouped_mm_errors,
        reference=_grouped_mm_reference,
        symbol="torch._grouped_mm",
    ),
]
