"""Python's number types given where torch takes a dtype (`dtype=bool`, `x.to(float)`) mean what
they mean to torch: bool, int64, float64, complex128 (they raised while tracing)."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall

PROGRAMS = {
    "ones_bool_mask": lambda x: x.masked_fill(torch.ones(3, dtype=bool), 1.5),
    "zeros_float": lambda x: torch.zeros(3, dtype=float) + x,
    "to_float_positional": lambda x: x.to(float),
    "to_int_keyword": lambda x: x.to(dtype=int),
    "sum_dtype_float": lambda x: x.sum(dtype=float),
    "new_zeros_int": lambda x: x.new_zeros(3, dtype=int),
    "arange_float": lambda x: torch.arange(3, dtype=float) + x,
    "full_complex": lambda x: torch.full((3,), 2, dtype=complex) * x,
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_python_type_as_dtype_is_torch_s(name):
    fn = PROGRAMS[name]
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        got = squall.jit(fn)(x)
    expected = fn(x)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)
