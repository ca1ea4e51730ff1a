"""OpInfos for the ops of squall.ltorch.einsum."""
from __future__ import annotations

import torch

from opinfos import FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor


_MATMUL_DTYPES = NUMERIC  # torch has no bool matrix products


def _t(shape, dtype, device, **kw):
    # small values keep integer products exact and bf16 sums well inside tolerance
    return make_tensor(shape, dtype, device, low=-3, high=3, **kw)


_EINSUM = [
    ("ij,jk->ik", ((3, 4), (4, 5))),
    ("ij,jk", ((3, 4), (4, 5))),
    ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
    ("i,i->", ((5,), (5,))),
    ("i,j->ij", ((3,), (4,))),
    ("ij->ji", ((3, 4),)),
    ("ij->", ((3, 4),)),
    ("ii->i", ((3, 3),)),
    ("iij->ji", ((3, 3, 2),)),
    ("...ij,...jk", ((2, 3, 4), (4, 5))),
    ("i...j,j...->...", ((2, 7, 3), (3, 7))),
    ("...ij->ij", ((2, 3, 4),)),
    ("bhqd,bhkd->bhqk", ((2, 3, 4, 5), (2, 3, 6, 5))),
    ("ij,jk,kl->il", ((2, 3), (3, 4), (4, 5))),
    ("ab,bc,ca->", ((2, 3), (3, 4), (4, 2))),
    ("ij,ij->ij", ((3, 1), (1, 3))),
    ("Ba,aB", ((2, 3), (3, 2))),
    ("ij,jk->ik", ((0, 4), (4, 5))),
    ("ij,jk->ik", ((3, 0), (0, 5))),
]


def _einsum_samples(dtype, device):
    for eq, shapes in _EINSUM:
        yield SampleInput((eq, *(_t(s, dtype, device) for s in shapes)))
    yield SampleInput(("ij,jk", [_t((3, 4), dtype, device, noncontiguous=True), _t((4, 2), dtype, device)]))
    yield SampleInput((_t((2, 3), dtype, device), [0, 1], _t((3, 4), dtype, device), [1, 2], [0, 2]))
    yield SampleInput((_t((5, 2, 3), dtype, device), [Ellipsis, 1], _t((3, 4), dtype, device), [1, 2]))
    # one operand, nothing contracted or moved: the identity
    yield SampleInput(("ijk->ijk", _t((2, 3, 4), dtype, device)))
    yield SampleInput(("...->...", _t((2, 3), dtype, device)))


def _einsum_errors(device):
    f = torch.float32

    def s(eq, *shapes, dtype=f):
        return SampleInput((eq, *(make_tensor(x, dtype, device) for x in shapes)))

    yield ErrorInput(s("ij,jk", (2, 3)), RuntimeError, "fewer operands")
    yield ErrorInput(s("ij", (2, 3), (2,)), RuntimeError, "more operands")
    yield ErrorInput(s("ijk", (2, 3)), RuntimeError, r"subscripts in the equation \(3\) does not match the number of dimensions \(2\)")
    yield ErrorInput(s("ij->k", (2, 3)), RuntimeError, "output subscript k does not appear")
    yield ErrorInput(s("ij->ii", (2, 3)), RuntimeError, "output subscript i appears more than once")
    yield ErrorInput(s("i1->i", (2, 3)), RuntimeError, "invalid subscript given at index 1")
    yield ErrorInput(s("ij,ij->ij", (2, 3), (3, 3)), RuntimeError, "subscript i has size 3 for operand 1")
    yield ErrorInput(s("ii", (2, 3)), RuntimeError, "subscript i is repeated for operand 0")
    yield ErrorInput(s("ij.k", (2, 3, 4)), RuntimeError, "not part of any ellipsis")
    yield ErrorInput(s("ij,jk", (2, 3), (3, 4), dtype=torch.bool), NotImplementedError, "Bool")
    yield ErrorInput(SampleInput(("ij,jk", make_tensor((2, 3), f, device), make_tensor((3, 4), torch.float64, device))), RuntimeError, "one dtype")


_SMALL_BF16 = {torch.bfloat16: (3e-2, 5e-2)}


def _tensordot_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(2, 3, 4), x(3, 4, 5)))
    yield SampleInput((x(2, 3, 4), x(4, 5)), {"dims": 1})
    yield SampleInput((x(2, 3), x(4,)), {"dims": 0})
    yield SampleInput((x(2, 3, 4), x(3, 2, 5)), {"dims": ([0, 1], [1, 0])})
    yield SampleInput((x(2, 3, 4, noncontiguous=True), x(3, 4)), {"dims": [[-1], [-1]]})
    yield SampleInput((x(0, 3), x(3, 2)), {"dims": 1})
    # a contracted dimension of size 1 broadcasts against the other side's
    yield SampleInput((x(1, 1, 1), x(2, 1, 2)), {"dims": ([0, 1], [2, 0])})
    yield SampleInput((x(2, 3, 4), x(1, 5)), {"dims": ([2], [0])})


def _tensordot_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    yield ErrorInput(SampleInput((x(2, 3, 4), x(5, 5)), {"dims": 1}), RuntimeError, "contracted dimensions need to match")
    yield ErrorInput(SampleInput((x(2, 3, 4), x(4, 5, dtype=torch.float64)), {"dims": 1}), RuntimeError, "same dtype")
    yield ErrorInput(SampleInput((x(2, 3, 4), x(3, 2, 5)), {"dims": ([0, 1], [1])}), RuntimeError, "same length")
    yield ErrorInput(SampleInput((x(2, 3), x(3, 4)), {"dims": -1}), RuntimeError, "dims >= 0")
    yield ErrorInput(SampleInput((x(2, 3), x(3, 4)), {"dims": 3}), RuntimeError, "dims < ndim_a or ndim_b")


def _inner_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(2, 3, 4), x(5, 4)))
    yield SampleInput((x(4), x(4)))
    yield SampleInput((x(2, 3), x(2, 3, noncontiguous=True)))
    yield SampleInput((x(2, 3), _t((), torch.float64, device)))  # 0-d: a promoting multiply
    yield SampleInput((x(0, 3), x(2, 3)))


def _inner_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(2, 3, 4), x(5, 3))), RuntimeError, "the last dimension must match")


def _vecdot_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(2, 3, 4), x(4)))
    yield SampleInput((x(2, 3, 4), x(3, 1)), {"dim": -2})
    yield SampleInput((x(5), x(5, noncontiguous=True)))
    yield SampleInput((x(2, 0), x(2, 0)))


def _vecdot_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    yield ErrorInput(SampleInput((x(2, 4), x(4, dtype=torch.float64))), RuntimeError, "same dtype")
    yield ErrorInput(SampleInput((x(2, 4, dtype=torch.int64), x(4, dtype=torch.int64))), RuntimeError, "floating point or complex")
    yield ErrorInput(SampleInput((x(2, 4), x(5))), RuntimeError, "must match the size")


opinfos = [
    OpInfo("einsum", torch.einsum, _einsum_samples, _MATMUL_DTYPES, error_inputs=_einsum_errors, symbol="torch.einsum", tolerances=_SMALL_BF16),
    OpInfo("tensordot", torch.tensordot, _tensordot_samples, _MATMUL_DTYPES, error_inputs=_tensordot_errors, symbol="torch.tensordot"),
    OpInfo("inner", torch.inner, _inner_samples, _MATMUL_DTYPES, error_inputs=_inner_errors, symbol="torch.inner"),
    OpInfo("vecdot", torch.linalg.vecdot, _vecdot_samples, FLOATING, error_inputs=_vecdot_errors, symbol="torch.linalg.vecdot"),
]
