"""A write through `reshape`, `reshape_as` or `flatten` is decided by eager's layout, as eager
decides it (squall.frontend.views): the result is a view of its input exactly where `view` would
succeed for the input's sizes and strides (squall.frontend.layouts.view_strides), else a copy
the write never leaves. These were refused with a NotImplementedError."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.frontend.layouts import view_strides


def _contiguous():
    return torch.arange(12.0).reshape(3, 4)


def _transposed():
    return torch.arange(12.0).reshape(4, 3).t()


def _stepped():
    return torch.arange(24.0).reshape(3, 8)[:, ::2]


def _expanded():
    return torch.arange(4.0).reshape(1, 4).expand(3, 4)


LAYOUTS = {"contiguous": _contiguous, "transposed": _transposed, "stepped": _stepped, "expanded": _expanded}


def _matches_eager(fn, make, *others, jitted=None):
    """`fn` compiled gives eager's result on fresh inputs of `make`'s layout, and leaves them (and
    `others`' copies) as eager does; returns the jitted function."""
    eager_input, squall_input = make(), make()
    assert eager_input.stride() == squall_input.stride()
    jitted = jitted or squall.jit(fn)
    expected = fn(eager_input, *(o.clone() for o in others))
    squall_others = [o.clone() for o in others]
    got = jitted(squall_input, *squall_others)
    assert_close(got, expected)
    assert_close(squall_input, eager_input)
    return jitted


def _reshape_add(x):
    x.reshape(-1).add_(1)
    return x * 2


def _transpose_reshape_add(x):
    return x.t().reshape(-1).add_(1), x + 0


def _flatten_mul(x):
    return x.flatten().mul_(2), x + 0


def _reshape_slice_write(x):
    y = x.reshape(2, 6)
    y[0, 1:4] = -1.0
    return y * 1, x * 1


def _base_written_then_reshape_read(x):
    y = x.reshape(-1)
    x.add_(10)  # reaches y where y is a view, not where it is a copy
    return y * 1, y[2:] * 1


def _view_of_a_reshape_written_base_read(x):
    y = x.t().reshape(-1)
    y[:3].mul_(0)  # reaches x only where y is a view (x.t() laid out as one row)
    return x * 1, y * 1


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "fn",
    [_reshape_add, _transpose_reshape_add, _flatten_mul, _reshape_slice_write, _view_of_a_reshape_written_base_read],
    ids=lambda f: f.__name__,
)
def test_a_write_reaches_the_input_exactly_where_eager_s_reshape_is_a_view(fn, layout):
    if layout == "expanded" and fn is _reshape_slice_write:
        pytest.skip("eager's expanded reshape(2, 6) is a view that overlaps: covered below")
    _matches_eager(fn, LAYOUTS[layout])


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "stepped"])
def test_a_write_into_the_base_reaches_a_reshape_exactly_where_it_is_a_view(layout):
    _matches_eager(_base_written_then_reshape_read, LAYOUTS[layout])


def test_a_write_through_an_overlapping_reshape_raises_eager_s_error():
    def fn(x):
        return x.reshape(3, 4).add_(1)  # the same shape: a view of the expanded tensor

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory location"):
        fn(_expanded())
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory location"):
        squall.jit(fn)(_expanded())
    _matches_eager(_reshape_add, _expanded)  # reshape(-1) of it copies: the write stays in the copy


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "stepped"])
def test_flatten_with_start_and_end_dims(layout):
    def flatten_inner(x):
        y = x.unsqueeze(0).flatten(1)  # [1, 12]
        y[0, :5] = 0.5
        return y * 1, x * 1

    def flatten_nothing(x):
        x.flatten(1, 1).mul_(3)  # eager returns x itself
        return x * 1

    def flatten_leading(x):
        x.unsqueeze(-1).flatten(0, 1)[1:3].add_(7)
        return x * 1

    for fn in (flatten_inner, flatten_nothing, flatten_leading):
        _matches_eager(fn, LAYOUTS[layout])


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reshape_as(layout):
    def fn(x, other):
        y = x.reshape_as(other)
        y.sub_(other)
        return y * 1, x * 1

    _matches_eager(fn, LAYOUTS[layout], torch.randn(6, 2))


def test_a_second_call_with_the_other_layout_compiles_again_and_is_right():
    jitted = None
    for make in (_contiguous, _transposed, _contiguous, _transposed, _stepped):
        jitted = _matches_eager(_reshape_add, make, jitted=jitted)
    assert jitted.cache_info().misses == 3, jitted.cache_info()


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gradients_through_a_write_into_a_reshape(layout):
    def fn(w):
        y = w.t() * 1 if layout == "transposed" else w * 1  # an intermediate of eager's layout
        y.reshape(-1)[:4].mul_(3)
        return (y * y.detach().sin()).sum()

    w1 = torch.randn(3, 4, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    fn(w1).backward()
    squall.jit(fn)(w2).backward()
    assert_close(w2.grad, w1.grad)


def test_gradients_through_a_reshape_eager_copies():
    def fn(w):
        y = w * 1
        z = y.t().reshape(-1)  # a copy: the write stays in z
        z[:3].mul_(5)
        return (y * 2).sum() + (z * z).sum()

    w1 = torch.randn(3, 4, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    fn(w1).backward()
    squall.jit(fn)(w2).backward()
    assert_close(w2.grad, w1.grad)


def test_symbolic_sizes_compile_once_per_layout():
    def fn(x):
        x.reshape(-1).add_(1)  # (a write into a slice specialises its sizes, reshape or not)
        return x * 2

    jitted = squall.jit(fn, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no eager run, no opaque call
        for n, m in ((3, 4), (5, 2), (6, 7)):
            _matches_eager(fn, lambda: torch.arange(n * m * 1.0).reshape(n, m), jitted=jitted)
        assert jitted.cache_info().misses == 1, jitted.cache_info()
        # a transposed input's strides are guarded exactly (squall.frontend.layouts): a compile per size
        for n, m in ((3, 4), (5, 2)):
            _matches_eager(fn, lambda: torch.arange(n * m * 1.0).reshape(m, n).t(), jitted=jitted)
        assert jitted.cache_info().misses == 3, jitted.cache_info()


def test_a_decision_that_depends_on_sizes_is_guarded():
    # x.t() of a square tensor reshaped to its own shape is a view; of another shape, a copy
    def fn(x):
        y = x.t()
        y.reshape(x.shape[1], x.shape[0]).mul_(0)
        return x * 1

    jitted = squall.jit(fn, dynamic=True)
    for n, m in ((3, 3), (3, 5), (4, 4), (2, 6)):
        _matches_eager(fn, lambda: torch.arange(n * m * 1.0).reshape(n, m) + 1, jitted=jitted)


@pytest.mark.parametrize(
    "shape, strides, new_shape",
    [
        ((3, 4), (4, 1), (12,)), ((3, 4), (1, 3), (12,)), ((3, 4), (1, 3), (3, 4)), ((3, 4), (8, 2), (2, 6)),
        ((3, 4), (0, 1), (12,)), ((3, 4), (0, 1), (3, 2, 2)), ((2, 3, 4), (12, 1, 3), (6, 4)), ((2, 3, 4), (12, 1, 3), (2, 12)),
        ((1, 4), (99, 1), (2, 2)), ((3, 1, 4), (4, 7, 1), (12,)), ((), (), (1, 1)), ((0, 3), (3, 1), (3, 0)),
    ],
)  # fmt: skip
def test_view_strides_is_eager_s_rule(shape, strides, new_shape):
    base = torch.zeros(200)
    x = base.as_strided(shape, strides, 0)
    try:
        expected = x.view(new_shape).stride()
    except RuntimeError:
        expected = None
    got = view_strides(shape, strides, new_shape)
    assert (got is None) == (expected is None), (got, expected)
    if got is not None:
        assert all(g == e for g, e, n in zip(got, expected, new_shape) if n != 1), (got, expected)


@pytest.mark.parametrize("take", [lambda x: x.contiguous(), lambda x: x.reshape(-1), lambda x: x.flatten()[None]], ids=["contiguous", "reshape", "flatten"])
def test_an_opaque_write_into_a_copy_eager_made_never_reaches_its_input(take):
    # x written first is a contiguous value at run time, so there contiguous()/reshape() of it is
    # a view: zero_ and fill_ (opaque torch calls, run on the tensor itself) zeroed the caller's x
    def fn(x):
        x.mul_(-2)
        y = take(x)  # eager: a copy (x is a stepped slice)
        y.zero_()
        y.view(-1)[:3].fill_(5.0)
        return y * 1, x * 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # zero_ and fill_ run as opaque torch calls
        for make in (_stepped, _contiguous):
            _matches_eager(fn, make)


def test_an_opaque_write_into_the_input_never_reaches_a_copy_eager_made_of_it():
    # the other way: zero_ on x reached the copy, which at run time was a view of x's value
    def fn(x):
        x.mul_(-2)
        y = x.contiguous()  # eager: a copy (x is a stepped slice)
        x.zero_()
        y.add_(1)
        return y * 1, x * 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # zero_ runs as an opaque torch call
        for make in (_stepped, _contiguous):
            _matches_eager(fn, make)
