"""Views squall does not model run eagerly, with a warning saying why, never answered differently
from eager (squall.frontend.views.OpaqueView, squall.ltorch.functionalization.opaque_writes,
squall.ltorch.unmodelled.NotModelled); and indexing is a view exactly where eager's is. Each case
here was silently unlike eager."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from eager_answers import runs_eagerly_saying


def _matches_eager(fn, make):
    eager_input, squall_input = make(), make()
    expected = fn(eager_input)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # opaque calls
        got = squall.jit(fn)(squall_input)
    assert_close(got, expected)
    assert_close(squall_input, eager_input)


def _square():
    return torch.arange(16.0).reshape(4, 4)


def test_a_zero_dim_integer_tensor_index_is_a_view_as_in_eager():
    # eager takes x[t] for a 0-dim integer t as x[int(t)], a view (squall gathered: a copy)
    def write_through(x):
        x[torch.tensor(1)].mul_(2)
        x[:, torch.tensor(2, dtype=torch.int32)].add_(100)
        return x * 1

    def base_written(x):
        row = x[torch.tensor(3)]
        x.add_(1)
        return row * 1

    _matches_eager(write_through, _square)
    _matches_eager(base_written, _square)


def test_a_bool_index_is_a_copy_as_in_eager():
    # eager's x[True] indexes with a tensor: a copy (squall took it as a view and wrote into x)
    def fn(x):
        x[True].mul_(2)
        x[0, True].add_(5)
        x[torch.tensor(1, dtype=torch.uint8)].add_(7)  # a 0-dim uint8 tensor is a mask too
        return x * 1

    _matches_eager(fn, _square)


def test_a_write_through_select_is_eagers():
    # select was an opaque call, so a write through it was refused; it is a modelled view now
    def write_through(x):
        x.select(1, 2).mul_(2)
        torch.select(x, 0, -1).add_(1)
        return x * 1

    def base_written(x):
        y = x.select(1, 2)
        x.add_(1)
        return y * 1

    for fn in (write_through, base_written):
        _matches_eager(fn, _square)


OPAQUE_VIEWS = {
    "adjoint": lambda x: x.adjoint(),
    "as_strided": lambda x: x.as_strided((2, 2), (4, 1)),
    "split_with_sizes": lambda x: x.split_with_sizes([1, 3], 1)[1],
    "ravel": lambda x: x.ravel(),
    "atleast_3d": lambda x: torch.atleast_3d(x),
}


@pytest.mark.parametrize("view", OPAQUE_VIEWS, ids=str)
def test_a_write_through_a_view_squall_does_not_model_runs_eagerly(view):
    take = OPAQUE_VIEWS[view]

    def write_through(x):
        take(x).mul_(2)  # eager writes into x
        return x * 1

    def base_written(x):
        y = take(x)
        x.add_(1)  # eager's y sees it
        return y * 1

    for fn in (write_through, base_written):
        runs_eagerly_saying(fn, lambda: (_square(),), rf"{view}\(\.\.\.\).*runs as an opaque torch call")

    def read_only(x):  # nothing written: no sharing to model
        return take(x) * 2, x + 1

    _matches_eager(read_only, _square)


def test_a_write_through_a_complex_tensor_s_real_part_runs_eagerly():
    def fn(z):
        z.real.mul_(2)
        return z * 1

    z = torch.randn(3, dtype=torch.complex64)
    runs_eagerly_saying(fn, lambda: (z.clone(),), r"torch\.Tensor\.real\(\.\.\.\) of a tensor: that op is not in squall's torch language")


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.t_(),
        lambda x: x.transpose_(0, 1),
        lambda x: x.unsqueeze_(0),
        lambda x: x[:, :1].squeeze_(1),
        lambda x: x.resize_(2, 8),
        lambda x: x.as_strided_((4, 4), (1, 4)),
        lambda x: x.set_(torch.zeros(4, 4)),
    ],
    ids=["t_", "transpose_", "unsqueeze_", "squeeze_", "resize_", "as_strided_", "set_"],
)
def test_an_in_place_change_of_shape_strides_or_storage_runs_eagerly(call):
    # x.t_() of a square x passed the shape check and wrote transposed values into x's memory:
    # a view of x taken before then read the wrong elements
    def fn(x):
        row = x[0]
        call(x)
        x[0].zero_()
        return row * 1, x * 1

    runs_eagerly_saying(fn, lambda: (_square(),), r"changes the shape, strides or storage of tensor \w+ in place")


def test_in_place_metadata_calls_that_change_nothing_run():
    def fn(x):
        x.squeeze_()  # no dimension of size 1
        x.resize_(4, 4)
        return x * 2

    _matches_eager(fn, _square)


def test_an_out_argument_runs_eagerly_saying_why():
    def fn(x, y):
        torch.add(x, 1, out=y)
        return y * 2

    x = torch.randn(3)
    runs_eagerly_saying(fn, lambda: (x.clone(), torch.empty(3)), r"torch\.add\(\.\.\., out=\.\.\.\) writes its result into a tensor given")
