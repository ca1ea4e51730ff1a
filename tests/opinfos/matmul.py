"""OpInfos for linalg ops: matrix products, linear, einsum."""
from __future__ import annotations

import torch

from opinfos import FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor

_MATMUL_DTYPES = NUMERIC  # torch has no bool matrix products


def _t(shape, dtype, device, **kw):
    # small values keep integer products exact and bf16 sums well inside tolerance
    return make_tensor(shape, dtype, device, low=-3, high=3, **kw)


def _pairs(pairs, dtype, device):
    for a, b in pairs:
        yield SampleInput((_t(a, dtype, device), _t(b, dtype, device)))


def _matmul_samples(dtype, device):
    pairs = [
        ((4,), (4,)),
        ((3, 4), (4,)),
        ((4,), (4, 5)),
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 5)),
        ((2, 3, 4), (4, 5)),
        ((3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((0, 3), (3, 2)),
        ((3, 0), (0, 2)),
    ]
    yield from _pairs(pairs, dtype, device)
    yield SampleInput((_t((3, 4), dtype, device, noncontiguous=True), _t((5, 4), dtype, device).T))


def _matmul_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((), f, device), make_tensor((3,), f, device))), RuntimeError, "at least 1D")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((5, 6), f, device))), RuntimeError, r"cannot be multiplied \(3x4 and 5x6\)")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((4, 2), torch.float64, device))), RuntimeError, "one dtype")
    yield ErrorInput(SampleInput((make_tensor((2, 3, 4), f, device), make_tensor((3, 4, 5), f, device))), RuntimeError, "must match the size")
    b = torch.bool
    yield ErrorInput(SampleInput((make_tensor((2, 2), b, device), make_tensor((2, 2), b, device))), NotImplementedError, "Bool")


def _mm_samples(dtype, device):
    yield from _pairs([((3, 4), (4, 5)), ((1, 1), (1, 1)), ((0, 4), (4, 2)), ((3, 0), (0, 2))], dtype, device)
    yield SampleInput((_t((4, 3), dtype, device).T, _t((4, 5), dtype, device, noncontiguous=True)))


def _mm_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((3,), f, device), make_tensor((3, 4), f, device))), RuntimeError, "self must be a matrix")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((4,), f, device))), RuntimeError, "mat2 must be a matrix")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((5, 6), f, device))), RuntimeError, r"\(3x4 and 5x6\)")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((4, 2), torch.float64, device))), RuntimeError, "one dtype")


def _bmm_samples(dtype, device):
    yield from _pairs([((2, 3, 4), (2, 4, 5)), ((1, 1, 1), (1, 1, 1)), ((0, 3, 4), (0, 4, 2)), ((2, 3, 0), (2, 0, 4))], dtype, device)
    yield SampleInput((_t((2, 3, 4), dtype, device, noncontiguous=True), _t((2, 5, 4), dtype, device).transpose(1, 2)))


def _bmm_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((2, 4, 5), f, device))), RuntimeError, "batch1 must be a 3D")
    yield ErrorInput(SampleInput((make_tensor((2, 3, 4), f, device), make_tensor((3, 4, 5), f, device))), RuntimeError, r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\]")
    yield ErrorInput(SampleInput((make_tensor((2, 3, 4), f, device), make_tensor((2, 5, 5), f, device))), RuntimeError, "batch2")


def _mv_samples(dtype, device):
    yield from _pairs([((3, 4), (4,)), ((1, 1), (1,)), ((0, 4), (4,)), ((3, 0), (0,))], dtype, device)
    yield SampleInput((_t((4, 3), dtype, device).T, _t((4,), dtype, device, noncontiguous=True)))


def _mv_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((4,), f, device), make_tensor((4,), f, device))), RuntimeError, "matrix @ vector expected")
    yield ErrorInput(SampleInput((make_tensor((3, 4), f, device), make_tensor((5,), f, device))), RuntimeError, "size mismatch")


def _dot_samples(dtype, device):
    yield from _pairs([((5,), (5,)), ((1,), (1,)), ((0,), (0,))], dtype, device)
    yield SampleInput((_t((6,), dtype, device, noncontiguous=True), _t((6,), dtype, device)))


def _dot_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((4, 1), f, device), make_tensor((4,), f, device))), RuntimeError, "1D tensors expected, but got 2D and 1D")
    yield ErrorInput(SampleInput((make_tensor((4,), f, device), make_tensor((5,), f, device))), RuntimeError, "inconsistent tensor size")
    yield ErrorInput(SampleInput((make_tensor((4,), f, device), make_tensor((4,), torch.float64, device))), RuntimeError, "one dtype")


def _outer_samples(dtype, device):
    yield from _pairs([((3,), (4,)), ((1,), (1,)), ((0,), (3,))], dtype, device)
    yield SampleInput((_t((3,), dtype, device), _t((2,), torch.float64, device)))  # promotes like mul
    yield SampleInput((_t((5,), dtype, device, noncontiguous=True), _t((2,), dtype, device)))


def _outer_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((4, 2), f, device), make_tensor((4,), f, device))), RuntimeError, "Expected 1-D argument self, but got 2-D")
    yield ErrorInput(SampleInput((make_tensor((4,), f, device), make_tensor((4, 2), f, device))), RuntimeError, "Expected 1-D argument vec2")


def _addmm_samples(dtype, device):
    for shape in ((3, 5), (5,), (3, 1), ()):
        yield SampleInput((_t(shape, dtype, device), _t((3, 4), dtype, device), _t((4, 5), dtype, device)))
    yield SampleInput((_t((3, 5), dtype, device), _t((3, 4), dtype, device), _t((4, 5), dtype, device)), {"beta": 2, "alpha": 3})
    yield SampleInput((_t((0, 2), dtype, device), _t((0, 4), dtype, device), _t((4, 2), dtype, device)), {"alpha": 2})
    yield SampleInput((_t((3, 2), dtype, device), _t((3, 0), dtype, device), _t((0, 2), dtype, device)), {"beta": 2})
    if dtype.is_floating_point:
        yield SampleInput((_t((3, 5), dtype, device), _t((3, 4), dtype, device), _t((4, 5), dtype, device)), {"beta": 0.5, "alpha": -1.5})
        nan = torch.full((3, 5), float("nan"), dtype=dtype, device=device)
        yield SampleInput((nan, _t((3, 4), dtype, device), _t((4, 5), dtype, device)), {"beta": 0})  # beta=0 ignores NaN


def _addmm_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make_tensor((3,), f, device), make_tensor((3, 4), f, device), make_tensor((4, 2), f, device))), RuntimeError, "expanded size")
    yield ErrorInput(SampleInput((make_tensor((3, 2), f, device), make_tensor((3, 4), torch.int64, device), make_tensor((4, 2), torch.int64, device))), RuntimeError, "same dtype")
    yield ErrorInput(SampleInput((make_tensor((3, 2), f, device), make_tensor((3, 4), f, device), make_tensor((5, 2), f, device))), RuntimeError, "cannot be multiplied")


def _addmm_inplace_samples(dtype, device):
    # an in-place result keeps the input's shape: no broadcasting of input
    yield SampleInput((_t((3, 5), dtype, device), _t((3, 4), dtype, device), _t((4, 5), dtype, device)))
    yield SampleInput((_t((3, 5), dtype, device), _t((3, 4), dtype, device), _t((4, 5), dtype, device)), {"beta": 0.5, "alpha": 2})


def _addmv_samples(dtype, device):
    for shape in ((3,), (1,), ()):
        yield SampleInput((_t(shape, dtype, device), _t((3, 4), dtype, device), _t((4,), dtype, device)))
    yield SampleInput((_t((3,), dtype, device), _t((3, 4), dtype, device), _t((4,), dtype, device)), {"beta": 2, "alpha": -1})
    yield SampleInput((_t((0,), dtype, device), _t((0, 4), dtype, device), _t((4,), dtype, device)))


def _baddbmm_samples(dtype, device):
    for shape in ((2, 3, 5), (3, 5), (1, 1, 5)):
        yield SampleInput((_t(shape, dtype, device), _t((2, 3, 4), dtype, device), _t((2, 4, 5), dtype, device)))
    yield SampleInput((_t((2, 3, 5), dtype, device), _t((2, 3, 4), dtype, device), _t((2, 4, 5), dtype, device)), {"beta": 3, "alpha": 2})
    yield SampleInput((_t((0, 3, 5), dtype, device), _t((0, 3, 4), dtype, device), _t((0, 4, 5), dtype, device)))


def _addbmm_samples(dtype, device):
    for shape in ((3, 5), (5,)):
        yield SampleInput((_t(shape, dtype, device), _t((2, 3, 4), dtype, device), _t((2, 4, 5), dtype, device)))
    yield SampleInput((_t((3, 5), dtype, device), _t((2, 3, 4), dtype, device), _t((2, 4, 5), dtype, device)), {"beta": 2, "alpha": 3})
    yield SampleInput((_t((3, 5), dtype, device), _t((0, 3, 4), dtype, device), _t((0, 4, 5), dtype, device)))


def _addmv_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(3), x(3, 4), x(5))), RuntimeError, "size mismatch")
    yield ErrorInput(SampleInput((x(2), x(3, 4), x(4))), RuntimeError, "expanded size")


def _baddbmm_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(2, 3, 5), x(2, 3, 4), x(3, 4, 5))), RuntimeError, "Expected size for first two dimensions of batch2 tensor")
    yield ErrorInput(SampleInput((x(2, 3, 4), x(2, 3, 4), x(2, 4, 5))), RuntimeError, "expanded size")
    yield ErrorInput(SampleInput((x(3, 5), x(2, 3, 4), x(2, 5, 5))), RuntimeError, "batch2")


def _addbmm_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(3, 5), x(2, 3, 4), x(3, 4, 5))), RuntimeError, "Expected size for first two dimensions of batch2 tensor")
    yield ErrorInput(SampleInput((x(3, 4), x(2, 3, 4), x(2, 4, 5))), RuntimeError, "expanded size")


def _chain_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(3), x(3, 4))), RuntimeError, "Tensor dimension is 1, expected 2")
    yield ErrorInput(SampleInput(()), RuntimeError, "Expected one or more matrices")


_SMALL_BF16 = {torch.bfloat16: (3e-2, 5e-2)}

opinfos = [
    OpInfo("matmul", torch.matmul, _matmul_samples, _MATMUL_DTYPES, error_inputs=_matmul_errors, symbol="torch.matmul"),
    OpInfo("matmul_operator", lambda a, b: a @ b, _matmul_samples, FLOATING, symbol="torch.matmul"),
    OpInfo("rmatmul", lambda a, b: torch.Tensor.__rmatmul__(b, a), _matmul_samples, FLOATING, symbol="torch.Tensor.__rmatmul__"),
    OpInfo("mm", torch.mm, _mm_samples, _MATMUL_DTYPES, error_inputs=_mm_errors, symbol="torch.mm"),
    OpInfo("bmm", torch.bmm, _bmm_samples, _MATMUL_DTYPES, error_inputs=_bmm_errors, symbol="torch.bmm"),
    OpInfo("mv", torch.mv, _mv_samples, _MATMUL_DTYPES, error_inputs=_mv_errors, symbol="torch.mv"),
    OpInfo("dot", torch.dot, _dot_samples, _MATMUL_DTYPES, error_inputs=_dot_errors, symbol="torch.dot"),
    OpInfo("vdot", torch.vdot, _dot_samples, _MATMUL_DTYPES, error_inputs=_dot_errors, symbol="torch.vdot"),
    OpInfo("outer", torch.outer, _outer_samples, _MATMUL_DTYPES, error_inputs=_outer_errors, symbol="torch.outer"),
    OpInfo("addmm", torch.addmm, _addmm_samples, _MATMUL_DTYPES, error_inputs=_addmm_errors, symbol="torch.addmm", tolerances=_SMALL_BF16),
    OpInfo("addmm_inplace", lambda i, a, b, **kw: (i * 1).addmm_(a, b, **kw), _addmm_inplace_samples, FLOATING, symbol="torch.addmm", tolerances=_SMALL_BF16),
    OpInfo("addmv", torch.addmv, _addmv_samples, _MATMUL_DTYPES, error_inputs=_addmv_errors, symbol="torch.addmv", tolerances=_SMALL_BF16),
    OpInfo("baddbmm", torch.baddbmm, _baddbmm_samples, _MATMUL_DTYPES, error_inputs=_baddbmm_errors, symbol="torch.baddbmm", tolerances=_SMALL_BF16),
    OpInfo("addbmm", torch.addbmm, _addbmm_samples, _MATMUL_DTYPES, error_inputs=_addbmm_errors, symbol="torch.addbmm", tolerances=_SMALL_BF16),
]


def _multi_dot_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput(([x(2, 3), x(3, 4)],))
    yield SampleInput(([x(3), x(3, 4), x(4)],))
    yield SampleInput(([x(2, 3), x(3, 4, noncontiguous=True), x(4, 5), x(5)],))
    yield SampleInput(([x(3), x(3, 0), x(0, 2)],))


def _multi_dot_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    yield ErrorInput(SampleInput(([x(3)],)), RuntimeError, "expected at least 2 tensors")
    yield ErrorInput(SampleInput(([x(3), x(4, 4), x(4)],)), RuntimeError, "tensors 0 and 1 with shapes")
    yield ErrorInput(SampleInput(([x(3, 2, 2), x(2, 4)],)), RuntimeError, "first tensor must be 1D or 2D")
    yield ErrorInput(SampleInput(([x(3, 2), x(2), x(2, 3)],)), RuntimeError, "tensor 1 must be 2D")
    yield ErrorInput(SampleInput(([x(3, 2), x(2, 3, dtype=torch.float64)],)), RuntimeError, "same dtype")


opinfos += [
    OpInfo("linalg_matmul", torch.linalg.matmul, _matmul_samples, FLOATING, symbol="torch.matmul"),
    OpInfo("multi_dot", torch.linalg.multi_dot, _multi_dot_samples, _MATMUL_DTYPES, error_inputs=_multi_dot_errors, symbol="torch.linalg.multi_dot", tolerances=_SMALL_BF16),
]


def _addr_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(3, 4), x(3), x(4)))
    yield SampleInput((x(4), x(3), x(4)), {"beta": 2, "alpha": 3})  # input broadcasts
    yield SampleInput((x(3, 4), x(3, noncontiguous=True), _t((4,), torch.float64, device)))  # promotes
    yield SampleInput((x(0, 4), x(0), x(4)))
    if dtype.is_floating_point:
        yield SampleInput((torch.full((3, 4), float("nan"), dtype=dtype), x(3), x(4)), {"beta": 0, "alpha": 0.5})


def _addr_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(3, 4), x(3, 1), x(4))), RuntimeError, "Expected 1-D argument self")
    yield ErrorInput(SampleInput((x(2, 4), x(3), x(4))), RuntimeError, "must match the size")


def _chain_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(2, 3), x(3, 4), x(4, 2)))
    yield SampleInput((x(2, 3, noncontiguous=True), x(3, 0)))


opinfos += [
    OpInfo("addr", torch.addr, _addr_samples, _MATMUL_DTYPES, error_inputs=_addr_errors, symbol="torch.addr", tolerances=_SMALL_BF16),
    OpInfo("chain_matmul", torch.chain_matmul, _chain_samples, _MATMUL_DTYPES, error_inputs=_chain_errors, symbol="torch.chain_matmul", tolerances=_SMALL_BF16),
]

