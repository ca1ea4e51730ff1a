"""OpInfos for the ops of squall.ltorch.linear."""
from __future__ import annotations

import torch

from opinfos import NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor


_MATMUL_DTYPES = NUMERIC  # torch has no bool matrix products


def _t(shape, dtype, device, **kw):
    # small values keep integer products exact and bf16 sums well inside tolerance
    return make_tensor(shape, dtype, device, low=-3, high=3, **kw)


def _linear_samples(dtype, device):
    for x, w, b in (((3, 4), (5, 4), (5,)), ((3, 4), (5, 4), None), ((4,), (5, 4), (5,)), ((2, 3, 4), (5, 4), (5,)), ((3, 4), (4,), None), ((4,), (4,), ()), ((2, 1, 3, 4), (4,), ()), ((0, 4), (5, 4), (5,)), ((3, 0), (5, 0), (5,))):
        yield SampleInput((_t(x, dtype, device), _t(w, dtype, device), None if b is None else _t(b, dtype, device)))
    yield SampleInput((_t((3, 4), dtype, device, noncontiguous=True), _t((5, 4), dtype, device)), {"bias": _t((5,), dtype, device)})


def _linear_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((5, 3), f, device))), RuntimeError, r"cannot be multiplied \(3x4 and 3x5\)")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((2, 5, 4), f, device))), RuntimeError, "1-D or 2-D")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((5, 4), f, device), make_tensor((3,), f, device))), RuntimeError, "expanded size")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((4,), f, device), make_tensor((), f, device))), RuntimeError, "mat2 must be a matrix")


_SMALL_BF16 = {torch.bfloat16: (3e-2, 5e-2)}


def _bilinear_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(2, 3), x(2, 4), x(5, 3, 4), x(5)))
    yield SampleInput((x(2, 7, 3), x(2, 7, 4, noncontiguous=True), x(5, 3, 4)))
    yield SampleInput((x(3), x(4), x(5, 3, 4), x(5)))
    yield SampleInput((x(0, 3), x(0, 4), x(5, 3, 4)))


def _bilinear_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    yield ErrorInput(SampleInput((x(2, 3), x(3, 4), x(5, 3, 4))), RuntimeError, "input batch dimensions do not match at dim 0: got 2 and 3")
    yield ErrorInput(SampleInput((x(2, 3), x(2, 4), x(5, 4, 4))), RuntimeError, "input1 size does not match weight size: got 3 but expected 4")
    yield ErrorInput(SampleInput((x(2, 3), x(2, 4), x(5, 3, 3))), RuntimeError, "input2 size does not match weight size: got 4 but expected 3")
    yield ErrorInput(SampleInput((x(2, 3), x(2, 4), x(5, 3, 4), x(4))), RuntimeError, "bias size does not match weight size: got 4 but expected 5")
    yield ErrorInput(SampleInput((x(2, 3), x(2, 4, dtype=torch.float64), x(5, 3, 4))), RuntimeError, "same dtype")


opinfos = [
    OpInfo("linear", torch.nn.functional.linear, _linear_samples, _MATMUL_DTYPES, error_inputs=_linear_errors, symbol="torch.nn.functional.linear", tolerances=_SMALL_BF16),
    OpInfo("bilinear", torch.nn.functional.bilinear, _bilinear_samples, _MATMUL_DTYPES, error_inputs=_bilinear_errors, symbol="torch.nn.functional.bilinear", tolerances={torch.bfloat16: (5e-2, 1e-1)}),
]
