"""numpy scalars and arrays as operands of traced torch calls, against eager.

torch reads a numpy scalar where it wants a number as the Python number of its kind: a numpy
integer as an int, a numpy float, bool or complex as a float (`int_tensor * numpy.bool_(True)`
is float32 in eager), while a data factory (`torch.tensor(numpy.float16(1))`) keeps numpy's
dtype. A numpy array operand (`x * array`) is computed by numpy in eager, on the tensor's data,
which a trace cannot do: squall refuses it with a TypeError saying what to do.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import squall

SCALARS = [np.float16(2.5), np.float32(2.5), np.float64(2.5), np.int8(3), np.int32(3), np.int64(3), np.uint8(3), np.bool_(True)]
DTYPES = [torch.float16, torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool]


def _same(fn, *args):
    expected = fn(*args)
    got = squall.jit(fn)(*args)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numpy_scalar_operand_promotes_as_eager(dtype, scalar):
    x = torch.arange(1, 5).to(dtype)
    _same(lambda x: x * scalar, x)
    _same(lambda x: scalar + x, x)


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_numpy_scalar_in_factories_keywords_and_sizes(scalar):
    x = torch.randn(2, 3)
    _same(lambda x: torch.full((2, 3), scalar), x)
    _same(lambda x: torch.add(x, x, alpha=scalar) if not isinstance(scalar, np.bool_) else x.clamp(min=scalar), x)
    _same(lambda x: torch.where(x > 0, x, scalar), x)
    _same(lambda x: x.new_full((3,), scalar), x)
    # data factories keep numpy's dtype (torch.tensor(numpy.float16(2.5)) is float16)
    _same(lambda x: torch.tensor(scalar), x)
    _same(lambda x: x.new_tensor(scalar), x)


def test_numpy_scalars_as_tensor_data_keep_numpy_dtypes():
    x = torch.randn(2)
    _same(lambda x: torch.tensor([np.float16(1.5), np.float16(2.5)]), x)
    _same(lambda x: torch.as_tensor(np.int32(4)), x)
    _same(lambda x: torch.tensor(np.float64(2.5), dtype=torch.float32), x)
    _same(lambda x: x + torch.tensor(np.float64(2.5)), x)


def test_numpy_integers_as_sizes():
    x = torch.randn(2, 6)
    _same(lambda x: x.view(np.int64(3), -1), x)
    _same(lambda x: x + torch.zeros((np.int32(2), np.int64(6))), x)
    _same(lambda x: x.reshape([np.int64(12)]), x)


def test_numpy_complex_scalar_drops_its_imaginary_part_as_eager():
    x = torch.randn(3)
    with pytest.warns(np.exceptions.ComplexWarning):
        _same(lambda x: x * np.complex64(2 + 1j), x)


def test_numpy_array_operand_is_refused_clearly():
    x = torch.randn(3)
    with pytest.raises(TypeError, match="numpy array operand.*torch.as_tensor"):
        squall.jit(lambda x: x * np.array([1.0, 2.0, 3.0]))(x)
    # torch.add refuses one in eager already (torch's argument parser, before any tracing)
    with pytest.raises(TypeError, match="must be Tensor, not numpy.ndarray"):
        torch.add(x, np.array(2.0))
    with pytest.raises(TypeError, match="must be Tensor, not numpy.ndarray"):
        squall.jit(lambda x: torch.add(x, np.array(2.0)))(x)
    # converted inside the program, as the message says, it traces and matches eager
    _same(lambda x: x * torch.as_tensor(np.array([1.0, 2.0, 3.0])), x)


def test_numpy_float64_data_in_lists_keeps_its_dtype():
    x = torch.randn(2)
    _same(lambda x: torch.tensor([np.float64(1.5), np.float64(2.5)]), x)
    _same(lambda x: torch.tensor([[np.float64(1.5)], [np.float64(2.5)]], dtype=float), x)
    _same(lambda x: x + torch.tensor([np.int64(1), np.int64(2)]), x)
