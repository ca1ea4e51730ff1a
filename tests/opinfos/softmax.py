"""OpInfos for the ops of squall.ltorch.softmax."""
from __future__ import annotations

import warnings

import torch

from opinfos import FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor


F = torch.nn.functional


def _softmax_samples(dtype, device):
    yield SampleInput((make_tensor((), dtype, device), 0))
    yield SampleInput((make_tensor((5,), dtype, device), -1))
    yield SampleInput((make_tensor((4, 3), dtype, device), 0))
    yield SampleInput((make_tensor((2, 3, 4), dtype, device, noncontiguous=True), -2))
    yield SampleInput((make_tensor((2, 0, 3), dtype, device), 1))
    yield SampleInput((make_tensor((2, 0, 3), dtype, device), 2))
    yield SampleInput((make_tensor((3, 5), dtype, device, low=-100, high=100), 1))
    yield SampleInput((torch.tensor([[float("-inf"), 1.0, 2.0], [float("-inf")] * 3], dtype=dtype, device=device), 1))
    yield SampleInput((make_tensor((3, 4), dtype, device),), {"dim": 1, "dtype": torch.float64})


def _softmax_errors(op):
    def errors(device):
        yield ErrorInput(SampleInput((make_tensor((4, 3), torch.float32, device), 2)), IndexError, "Dimension out of range")
        yield ErrorInput(SampleInput((torch.tensor([1, 2, 3], device=device), 0)), NotImplementedError, "floating point")
        yield ErrorInput(SampleInput((make_tensor((), torch.float32, device), 1)), IndexError, "Dimension out of range")

    return errors


def _functional_softmax_samples(dtype, device):
    yield from _softmax_samples(dtype, device)
    # keyword forms, and the positional _stacklevel slot F.softmax keeps
    yield SampleInput((make_tensor((3, 4), dtype, device),), {"dim": 0})
    yield SampleInput((make_tensor((3, 4), dtype, device), 1, 3, torch.float64))
    yield SampleInput((torch.tensor([[1, 2], [3, 4]], device=device),), {"dim": 1, "dtype": torch.float32})


def _implicit_dim(op):
    # the legacy dim=None rule: dim 0 for 0-, 1- and 3-d inputs, dim 1 otherwise
    def run(a):
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Implicit dimension", UserWarning)
            return op(a)

    return run


def _implicit_dim_samples(dtype, device):
    for shape in ((), (5,), (3, 4), (2, 3, 4), (2, 3, 4, 2)):
        yield SampleInput((make_tensor(shape, dtype, device),))


opinfos = [
    OpInfo("softmax", torch.softmax, _softmax_samples, FLOATING, error_inputs=_softmax_errors(torch.softmax), symbol="torch.softmax"),
    OpInfo("softmax_method", lambda a, *args, **kw: a.softmax(*args, **kw), _softmax_samples, FLOATING, symbol="torch.softmax"),
    OpInfo("special_softmax", lambda a, dim, **kw: torch.special.softmax(a, dim, **kw), _softmax_samples, FLOATING, symbol="torch.softmax"),
    OpInfo("log_softmax", torch.log_softmax, _softmax_samples, FLOATING, error_inputs=_softmax_errors(torch.log_softmax), symbol="torch.log_softmax"),
    OpInfo("log_softmax_method", lambda a, *args, **kw: a.log_softmax(*args, **kw), _softmax_samples, FLOATING, symbol="torch.log_softmax"),
    OpInfo("nn.functional.softmax", F.softmax, _functional_softmax_samples, FLOATING, error_inputs=_softmax_errors(F.softmax), symbol="torch.nn.functional.softmax"),
    OpInfo("nn.functional.log_softmax", F.log_softmax, _functional_softmax_samples, FLOATING, error_inputs=_softmax_errors(F.log_softmax), symbol="torch.nn.functional.log_softmax"),
    OpInfo("nn.functional.softmin", F.softmin, _functional_softmax_samples, FLOATING, symbol="torch.nn.functional.softmin"),
    OpInfo("softmax_implicit_dim", _implicit_dim(F.softmax), _implicit_dim_samples, FLOATING, symbol="torch.nn.functional.softmax"),
    OpInfo("log_softmax_implicit_dim", _implicit_dim(F.log_softmax), _implicit_dim_samples, FLOATING, symbol="torch.nn.functional.log_softmax"),
]
