"""OpInfos for the ops of squall.ltorch.overwrites (copy_, fill_, zero_)."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor


def _overwritten(method: str):
    """`t.<method>(...)` on a tensor `t` computed from `a`, returned beside `a`: the gradient
    reaching `t`'s old value is eager's (none), and `a`'s other use keeps it differentiable."""
    return lambda a, *args, **kwargs: (getattr(a * 1, method)(*args, **kwargs), a)


def _copy_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((2, 3), dtype, device)))
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((3,), dtype, device)))  # broadcast
    yield SampleInput((make_tensor((4, 3), dtype, device, noncontiguous=True), make_tensor((4, 1), dtype, device)))
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((2, 3), torch.float64, device)))  # another dtype
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((), torch.int64, device)), {"non_blocking": True})
    yield SampleInput((make_tensor((2, 3), dtype, device), 3))  # a number, as torch takes it
    yield SampleInput((make_tensor((0, 3), dtype, device), make_tensor((3,), dtype, device)))


def _copy_errors(device):
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device), make_tensor((2, 3), torch.float32, device))), RuntimeError, "doesn't match the broadcast shape")
    yield ErrorInput(SampleInput((make_tensor((2, 3), torch.float32, device), make_tensor((3, 1), torch.float32, device))), RuntimeError, "size")
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device), "x")), TypeError, "must be Tensor, not str")


def _fill_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device), 2))
    yield SampleInput((make_tensor((4, 3), dtype, device, noncontiguous=True), True))
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((), dtype, device)))
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((), torch.float64, device)))  # another dtype
    yield SampleInput((make_tensor((), dtype, device), 5))


def _fill_errors(device):
    yield ErrorInput(SampleInput((make_tensor((2, 3), torch.float32, device), make_tensor((1,), torch.float32, device))), RuntimeError, "fill_ only supports 0-dimension value tensor")


def _zero_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device),))
    yield SampleInput((make_tensor((4, 3), dtype, device, noncontiguous=True),))
    yield SampleInput((make_tensor((), dtype, device),))


opinfos = [
    OpInfo("Tensor.copy_", _overwritten("copy_"), _copy_samples, NUMERIC, _copy_errors, symbol="ltorch.copy"),
    OpInfo("Tensor.fill_", _overwritten("fill_"), _fill_samples, ALL_TYPES, _fill_errors, symbol="torch.fill"),
    OpInfo("fill", torch.fill, _fill_samples, ALL_TYPES, _fill_errors),
    OpInfo("Tensor.zero_", _overwritten("zero_"), _zero_samples, ALL_TYPES),
    OpInfo("zero_", lambda a: (torch.zero_(a * 1), a), _zero_samples, FLOATING),
]
