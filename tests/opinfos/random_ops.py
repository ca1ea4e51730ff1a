"""OpInfos for random ops: outputs are compared by shape, dtype and device (random=True).

That the torch configuration draws eager's exact numbers, and that the decompositions
draw the right distributions, is tested in tests/test_random.py.
"""
from __future__ import annotations

import torch

from opinfos import FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor
from squall.ltorch.unmodelled import NotModelled

INTS = (torch.float32, torch.float64, torch.bfloat16, torch.int64)


def _size_samples(dtype, device):
    yield SampleInput((2, 3), {"dtype": dtype})
    yield SampleInput(((4,),), {"dtype": dtype, "device": device})
    yield SampleInput(([0, 3],), {"dtype": dtype})
    yield SampleInput((), {"size": (2, 2), "dtype": dtype, "requires_grad": False})
    yield SampleInput(((),), {"dtype": dtype})


def _rand_errors(kernel):
    def errors(device):
        yield ErrorInput(SampleInput((2,), {"dtype": torch.int64}), NotImplementedError, f"{kernel}. not implemented for 'Long'")
        yield ErrorInput(SampleInput((2,), {"generator": torch.Generator()}), NotModelled, "generator")
        yield ErrorInput(SampleInput((-1,)), RuntimeError, "Dimension size must be non-negative")

    return errors


def _randint_samples(dtype, device):
    yield SampleInput((10, (3, 4)), {"dtype": dtype})
    yield SampleInput((-5, 5, (6,)), {"dtype": dtype, "device": device})
    yield SampleInput((3, 8, (0,)), {"dtype": dtype})
    yield SampleInput((7, ()))
    yield SampleInput((2, 4, [2, 2]))


def _randint_errors(device):
    yield ErrorInput(SampleInput((5, 2, (3,))), RuntimeError, "random_ expects 'from' to be less than 'to'")
    yield ErrorInput(SampleInput((5, (3,)), {"dtype": torch.bool}), RuntimeError, "out of bounds for bool")


def _like_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device),))
    yield SampleInput((make_tensor((), dtype, device),))
    yield SampleInput((make_tensor((0, 3), dtype, device),))
    yield SampleInput((make_tensor((2, 3), dtype, device, noncontiguous=True),), {"dtype": torch.float64})


def _randint_like_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device), 10))
    yield SampleInput((make_tensor((4,), dtype, device), -3, 3))
    yield SampleInput((make_tensor((), dtype, device), 5), {"dtype": torch.int64})


def _normal_samples(dtype, device):
    yield SampleInput((0.0, 1.0, (3, 2)), {"dtype": dtype})
    yield SampleInput((2, 0.5, [4]), {"dtype": dtype, "device": device})
    yield SampleInput((make_tensor((3, 2), dtype, device), make_tensor((3, 2), dtype, device, low=0)))
    yield SampleInput((make_tensor((3,), dtype, device), make_tensor((2, 3), dtype, device, low=0)))
    yield SampleInput((make_tensor((3, 2), dtype, device), 2.0))
    yield SampleInput((make_tensor((3, 2), dtype, device),))
    yield SampleInput((1.0, make_tensor((5,), dtype, device, low=0)))


def _normal_errors(device):
    yield ErrorInput(SampleInput((0.0, -1.0, (2,))), RuntimeError, "normal expects std >= 0.0")
    yield ErrorInput(SampleInput((torch.zeros(2, dtype=torch.long), 1.0)), NotImplementedError, "not implemented for 'Long'")


def _bernoulli_samples(dtype, device):
    yield SampleInput((make_tensor((4, 3), dtype, device, low=0, high=1),))
    yield SampleInput((make_tensor((), dtype, device, low=0, high=1),))
    yield SampleInput((make_tensor((0, 2), dtype, device, low=0, high=1),))
    yield SampleInput((make_tensor((4, 3), dtype, device), 0.3))


def _inplace_samples(dtype, device):
    yield SampleInput((make_tensor((4, 3), dtype, device),))
    yield SampleInput((make_tensor((), dtype, device),))
    yield SampleInput((make_tensor((5,), dtype, device, noncontiguous=True),))


def _dropout_samples(dtype, device):
    x = make_tensor((8, 5), dtype, device)
    yield SampleInput((x,))
    yield SampleInput((x, 0.2))
    yield SampleInput((x,), {"p": 0.7, "training": True})
    yield SampleInput((x, 0.5, False))
    yield SampleInput((x, 0.0))
    yield SampleInput((x, 1.0))
    yield SampleInput((make_tensor((), dtype, device),))
    yield SampleInput((make_tensor((0, 4), dtype, device), 0.5))


def _dropout_errors(device):
    x = make_tensor((3,), torch.float32, device)
    yield ErrorInput(SampleInput((x, 1.5)), ValueError, "dropout probability has to be between 0 and 1, but got 1.5")
    yield ErrorInput(SampleInput((x, -0.1)), ValueError, "dropout probability has to be between 0 and 1")
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.long),)), RuntimeError, "can't be cast to the desired output type Long")


def _dropout_inplace(x, p):
    x = x.clone()
    y = torch.nn.functional.dropout(x, p, True, True)
    return y, x


def _dropout_module(x):
    return torch.nn.Dropout(0.25)(x)


opinfos = [
    OpInfo("rand", torch.rand, _size_samples, FLOATING, _rand_errors("check_uniform_bounds"), symbol="torch.rand", random=True),
    OpInfo("randn", torch.randn, _size_samples, FLOATING, _rand_errors("normal_kernel_cpu"), symbol="torch.randn", random=True),
    OpInfo("randint", torch.randint, _randint_samples, INTS, _randint_errors, symbol="torch.randint", random=True),
    OpInfo("rand_like", torch.rand_like, _like_samples, FLOATING, symbol="torch.rand_like", random=True),
    OpInfo("randn_like", torch.randn_like, _like_samples, FLOATING, symbol="torch.randn_like", random=True),
    OpInfo("randint_like", torch.randint_like, _randint_like_samples, INTS, symbol="torch.randint_like", random=True),
    OpInfo("normal", torch.normal, _normal_samples, FLOATING, _normal_errors, symbol="torch.normal", random=True),
    OpInfo("bernoulli", torch.bernoulli, _bernoulli_samples, FLOATING, symbol="torch.bernoulli", random=True),
    OpInfo("Tensor.uniform_", lambda x: x.clone().uniform_(-2, 3), _inplace_samples, FLOATING, symbol="ltorch.uniform_like", random=True),
    OpInfo("Tensor.normal_", lambda x: x.clone().normal_(1.0, 2.0), _inplace_samples, FLOATING, symbol="ltorch.normal_like", random=True),
    OpInfo("Tensor.bernoulli_", lambda x: x.clone().bernoulli_(0.25), _inplace_samples, FLOATING, symbol="ltorch.bernoulli_like", random=True),
    OpInfo("Tensor.bernoulli__tensor_p", lambda x: torch.zeros_like(x).bernoulli_(x.abs() / (1 + x.abs())), _inplace_samples, FLOATING, symbol="ltorch.bernoulli_like", random=True),
    OpInfo("dropout", torch.nn.functional.dropout, _dropout_samples, FLOATING, _dropout_errors, symbol="torch.nn.functional.dropout", random=True),
    OpInfo("dropout_inplace", _dropout_inplace, lambda dtype, device: [SampleInput((make_tensor((6, 4), dtype, device), 0.5))], FLOATING, symbol="torch.nn.functional.dropout", random=True),
    OpInfo("nn.Dropout", _dropout_module, lambda dtype, device: [SampleInput((make_tensor((6, 4), dtype, device),))], FLOATING, symbol="torch.nn.functional.dropout", random=True),
]
