"""OpInfos for elementwise ops."""
from __future__ import annotations

import torch

from opinfos import FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor

_SHAPES = ((), (5,), (4, 3), (2, 0, 3))
_BROADCASTS = (((4, 3), (3,)), ((4, 1), (1, 3)), ((), (2, 3)), ((2, 1, 3), (4, 1)))


def _unary_samples(low=None, high=None):
    def samples(dtype, device):
        for shape in _SHAPES:
            yield SampleInput((make_tensor(shape, dtype, device, low=low, high=high),))
        yield SampleInput((make_tensor((4, 6), dtype, device, low=low, high=high, noncontiguous=True),))

    return samples


def _binary_samples(rhs_low=None):
    def samples(dtype, device):
        for shape in _SHAPES:
            yield SampleInput((make_tensor(shape, dtype, device), make_tensor(shape, dtype, device, low=rhs_low)))
        for a, b in _BROADCASTS:
            yield SampleInput((make_tensor(a, dtype, device), make_tensor(b, dtype, device, low=rhs_low)))
        yield SampleInput((make_tensor((3, 2), dtype, device), 2))
        yield SampleInput((make_tensor((3, 2), dtype, device), 1.5))
        yield SampleInput((make_tensor((3, 2), dtype, device), make_tensor((), torch.float64, device, low=rhs_low)))

    return samples


def _binary_errors(op_name):
    def errors(device):
        yield ErrorInput(SampleInput((make_tensor((4, 3), torch.float32, device), make_tensor((2, 3), torch.float32, device))), RuntimeError, "must match the size")

    return errors


opinfos = [
    OpInfo("exp", torch.exp, _unary_samples(-5, 5), NUMERIC + (torch.bool,), symbol="torch.exp"),
    OpInfo("tanh", torch.tanh, _unary_samples(), NUMERIC, symbol="torch.tanh"),
    OpInfo("neg", torch.neg, _unary_samples(), NUMERIC, symbol="torch.neg"),
    OpInfo("add", torch.add, _binary_samples(), NUMERIC, error_inputs=_binary_errors("add"), symbol="torch.add"),
    OpInfo("add_alpha", lambda a, b: torch.add(a, b, alpha=2), _binary_samples(), NUMERIC, symbol="torch.add"),
    OpInfo("sub", torch.sub, _binary_samples(), NUMERIC, error_inputs=_binary_errors("sub"), symbol="torch.sub"),
    OpInfo("mul", torch.mul, _binary_samples(), NUMERIC, symbol="torch.mul"),
    OpInfo("div", torch.div, _binary_samples(rhs_low=0.5), FLOATING, symbol="torch.div"),
    OpInfo("rsub_operator", lambda a, b: 2.5 - a - b, _binary_samples(), FLOATING, symbol="torch.Tensor.__rsub__"),
]
