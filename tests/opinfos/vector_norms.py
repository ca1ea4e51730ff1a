"""OpInfos for the ops of squall.ltorch.vector_norms."""
from __future__ import annotations

import math

import torch

from opinfos import FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor
from squall.ltorch.unmodelled import NotModelled


F = torch.nn.functional


_LOW = {torch.bfloat16: (3e-2, 3e-2)}


def _normalize_samples(dtype, device):
    yield SampleInput((make_tensor((4, 3), dtype, device),))
    yield SampleInput((make_tensor((4, 3), dtype, device),), {"p": 1, "dim": 0})
    yield SampleInput((make_tensor((2, 3, 4), dtype, device, noncontiguous=True), 3.0, -1))
    yield SampleInput((make_tensor((2, 5), dtype, device),), {"p": math.inf, "eps": 0.5})
    yield SampleInput((torch.zeros(2, 3, dtype=dtype, device=device),))
    yield SampleInput((make_tensor((0, 3), dtype, device),))
    yield SampleInput((make_tensor((), dtype, device),), {"dim": 0})


def _normalize_errors(device):
    yield ErrorInput(SampleInput((make_tensor((4,), torch.float32, device),)), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput((torch.tensor([[1, 2]], device=device),)), RuntimeError, "floating point")


def _cosine_samples(dtype, device):
    yield SampleInput((make_tensor((4, 3), dtype, device), make_tensor((4, 3), dtype, device)))
    yield SampleInput((make_tensor((4, 3), dtype, device), make_tensor((3,), dtype, device)), {"dim": -1})
    yield SampleInput((make_tensor((2, 3, 4), dtype, device, noncontiguous=True), make_tensor((2, 1, 4), dtype, device), 0))
    yield SampleInput((make_tensor((5,), dtype, device), make_tensor((5,), dtype, device)), {"dim": 0, "eps": 1e-3})
    yield SampleInput((torch.zeros(2, 3, dtype=dtype, device=device), make_tensor((2, 3), dtype, device)))
    yield SampleInput((make_tensor((0, 3), dtype, device), make_tensor((0, 3), dtype, device)))


def _cosine_errors(device):
    x = make_tensor((4, 3), torch.float32, device)
    yield ErrorInput(SampleInput((x, x, 2)), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput((x, make_tensor((2, 3), torch.float32, device))), RuntimeError, "must match the size")
    yield ErrorInput(SampleInput((torch.tensor([[1, 2]], device=device), torch.tensor([[3, 4]], device=device))), RuntimeError, "floating point")


def _pairwise_samples(dtype, device):
    yield SampleInput((make_tensor((4, 3), dtype, device), make_tensor((4, 3), dtype, device)))
    yield SampleInput((make_tensor((4, 3), dtype, device), make_tensor((3,), dtype, device)), {"p": 1.0})
    yield SampleInput((make_tensor((2, 3, 4), dtype, device, noncontiguous=True), make_tensor((2, 3, 4), dtype, device)), {"keepdim": True, "eps": 1e-3})
    yield SampleInput((make_tensor((5,), dtype, device), make_tensor((5,), dtype, device), math.inf))
    yield SampleInput((make_tensor((), dtype, device), make_tensor((), dtype, device)), {"keepdim": True})
    yield SampleInput((make_tensor((3, 4), dtype, device), make_tensor((3, 4), dtype, device), 3.0))
    yield SampleInput((make_tensor((0, 3), dtype, device), make_tensor((0, 3), dtype, device)))


def _pairwise_errors(device):
    x = make_tensor((4, 3), torch.float32, device)
    yield ErrorInput(SampleInput((x, make_tensor((2, 3), torch.float32, device))), RuntimeError, "must match the size")
    yield ErrorInput(SampleInput((torch.tensor([[1, 2]], device=device), torch.tensor([[3, 4]], device=device))), RuntimeError, "floating point", torch_raises=False)


opinfos = [
    OpInfo("nn.functional.normalize", F.normalize, _normalize_samples, FLOATING, error_inputs=_normalize_errors, symbol="torch.nn.functional.normalize"),
    OpInfo("cosine_similarity", F.cosine_similarity, _cosine_samples, FLOATING, error_inputs=_cosine_errors, symbol="torch.nn.functional.cosine_similarity", tolerances=_LOW),
    OpInfo("pairwise_distance", F.pairwise_distance, _pairwise_samples, FLOATING, error_inputs=_pairwise_errors, symbol="torch.nn.functional.pairwise_distance", tolerances=_LOW),
]


def _cdist_samples(dtype, device):
    x = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)
    for p in (2.0, 1.0, 0.0, 3.0, float("inf")):
        yield SampleInput((x(3, 4), x(5, 4)), {"p": p})
    yield SampleInput((x(2, 1, 3, 4), x(5, 5, 4, noncontiguous=True)))  # batch dims broadcast
    yield SampleInput((x(30, 4), x(6, 4)))  # more than 25 rows: the matmul form
    yield SampleInput((x(2, 3, 4), x(2, 5, 4)), {"compute_mode": "use_mm_for_euclid_dist"})
    yield SampleInput((x(0, 4), x(5, 4)))
    yield SampleInput((x(3, 0), x(5, 0)), {"p": 1.5})


def _cdist_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    yield ErrorInput(SampleInput((x(4), x(5, 4))), RuntimeError, "at least 2D tensors, X1 got: 1D")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 3))), RuntimeError, "same number of columns. X1: 4 X2: 3")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 4)), {"p": -1}), RuntimeError, "non-negative p values")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 4)), {"compute_mode": "foo"}), ValueError, "not a valid value for compute_mode")
    yield ErrorInput(SampleInput((x(3, 4, dtype=torch.int64), x(5, 4, dtype=torch.int64))), RuntimeError, "floating-point dtypes")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 4, dtype=torch.float64))), RuntimeError, "dtype")


opinfos += [
    OpInfo("cdist", torch.cdist, _cdist_samples, (torch.float32, torch.float64), error_inputs=_cdist_errors, symbol="torch.cdist", tolerances={torch.float32: (1e-4, 1e-4)}),
]


def _t(shape, dtype, device, **kwargs):
    return make_tensor(shape, dtype, device, **kwargs)


def _vector_norm_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device),))
    yield SampleInput((_t((4, 5), dtype, device), 1))
    yield SampleInput((_t((4, 5), dtype, device), math.inf, 1, True))
    yield SampleInput((_t((4, 5), dtype, device), -math.inf, -1))
    yield SampleInput((_t((4, 5), dtype, device), 0), {"dim": (0, 1)})
    yield SampleInput((_t((2, 3, 4), dtype, device), 3.5, (0, 2)))
    yield SampleInput((_t((2, 3, 4), dtype, device, low=0.5, high=2), -1.5), {"dim": 1})
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((2, 0), dtype, device),), {"dim": 0})
    yield SampleInput((_t((3, 4), dtype, device),), {"dtype": torch.float64})


def _vector_norm_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.int64, device),)), RuntimeError, "Expected a floating point or complex tensor")
    yield ErrorInput(SampleInput((_t((0, 3), torch.float32, device), math.inf, 0)), RuntimeError, "does not have an identity")
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device),), {"dtype": torch.bfloat16}), RuntimeError, "without narrowing")


def _linalg_norm_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device),))
    yield SampleInput((_t((2, 3, 4), dtype, device),))
    yield SampleInput((_t((4, 5), dtype, device), 2), {"dim": -1, "keepdim": True})
    yield SampleInput((_t((4, 5), dtype, device), 1), {"dim": (0,)})
    yield SampleInput((_t((5,), dtype, device), math.inf))
    yield SampleInput((_t((4, 5), dtype, device), "fro"))
    yield SampleInput((_t((2, 3, 4), dtype, device),), {"dim": (0, 2), "keepdim": True})
    yield SampleInput((_t((3, 4), dtype, device), -1.5), {"dim": 0, "dtype": torch.float64})
    yield SampleInput((_t((), dtype, device),))


def _linalg_norm_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.int64, device),)), RuntimeError, "Expected a floating point or complex tensor")
    yield ErrorInput(SampleInput((_t((2, 3, 4), torch.float32, device), 2)), RuntimeError, "the input must be 1D or 2D")


def _norm_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device),))
    yield SampleInput((_t((4, 5), dtype, device), "fro", 1))
    yield SampleInput((_t((4, 5), dtype, device), "fro", (0, 1), True))
    yield SampleInput((_t((4, 5), dtype, device), 1), {"dim": 1})
    yield SampleInput((_t((4, 5), dtype, device), math.inf))
    yield SampleInput((_t((2, 3, 4), dtype, device), 3), {"dim": (0, 2), "keepdim": True})
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((3, 4), dtype, device),), {"dtype": torch.float64})


def _norm_errors(device):
    x = _t((2, 3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((_t((2, 3), torch.int64, device),)), RuntimeError, "Expected a floating point or complex tensor")
    yield ErrorInput(SampleInput((x, "fro", (0, 1, 2))), RuntimeError, "dim must be a 2-tuple")
    yield ErrorInput(SampleInput((x, "nuc", (0, 1))), NotModelled, "singular value decomposition")


opinfos += [
    OpInfo("vector_norm", torch.linalg.vector_norm, _vector_norm_samples, FLOATING, error_inputs=_vector_norm_errors, symbol="torch.linalg.vector_norm"),
    OpInfo("linalg.norm", torch.linalg.norm, _linalg_norm_samples, FLOATING, error_inputs=_linalg_norm_errors, symbol="torch.linalg.norm"),
    OpInfo("norm", torch.norm, _norm_samples, FLOATING, error_inputs=_norm_errors, symbol="torch.norm"),
]


def _norm_except_dim_samples(dtype, device):
    yield SampleInput((_t((4, 3, 5), dtype, device),))
    yield SampleInput((_t((4, 3, 5), dtype, device), 2, 2))
    yield SampleInput((_t((4, 3, 5), dtype, device), 1, 1))
    yield SampleInput((_t((4, 3, 5), dtype, device), 2, -2))
    yield SampleInput((_t((4, 3, 5), dtype, device), 3, -1))  # every element: a 0-d tensor


def _weight_norm_samples(dtype, device):
    # g shaped as torch.nn.utils.parametrizations.weight_norm makes it: v's sizes at dim, 1 elsewhere
    yield SampleInput((_t((6, 4, 3), dtype, device), _t((6, 1, 1), dtype, device)))
    yield SampleInput((_t((6, 4, 3), dtype, device), _t((1, 1, 3), dtype, device), 2))
    yield SampleInput((_t((6, 4, 3), dtype, device, noncontiguous=True), _t((1, 4, 1), dtype, device)), {"dim": 1})
    yield SampleInput((_t((6, 4), dtype, device), _t((), dtype, device), -1))


opinfos += [
    OpInfo("norm_except_dim", torch.norm_except_dim, _norm_except_dim_samples, FLOATING, symbol="torch.norm_except_dim", tolerances=_LOW),
    OpInfo("_weight_norm", torch._weight_norm, _weight_norm_samples, FLOATING, symbol="torch._weight_norm", tolerances=_LOW),
]
