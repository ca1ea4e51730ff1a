"""`x.stride()` while a program is traced answers as eager does (squall.frontend.layouts).

It ran as an opaque torch call on a contiguous stand-in: every symbolic size was read and
guarded (one compile per length), and a transposed view or a non-contiguous input got a
contiguous tensor's strides, silently unlike eager."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall


def _stream(fn, tensors, dynamic=None):
    jitted = squall.jit(fn, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no opaque call, no eager run
        for x in tensors:
            torch.testing.assert_close(jitted(x), fn(x))
    return jitted


def _scaled_by_strides(x):
    return x * x.stride(0) + x.stride()[-1]


def _transposed_strides(x):
    y = x.transpose(0, 1)
    return y.stride(), y * y.stride(1)


def _reshaped_strides(x):
    y = x.view(x.shape[0], -1)
    return y.stride(0) * y, y.unsqueeze(1).stride()


def _permuted_result_strides(x):
    y = x.permute(2, 0, 1) + 1  # eager lays the sum out as its permuted operand
    return y.stride(), y


STREAMS = [_scaled_by_strides, _transposed_strides, _reshaped_strides, _permuted_result_strides]


@pytest.mark.parametrize("fn", STREAMS, ids=lambda f: f.__name__)
def test_strides_of_changing_lengths_compile_at_most_twice(fn):
    jitted = _stream(fn, [torch.randn(n, 4, 3) for n in (3, 5, 7, 9, 12)])
    assert jitted.cache_info().misses <= 2, jitted.cache_info()


@pytest.mark.parametrize("fn", STREAMS, ids=lambda f: f.__name__)
def test_strides_under_dynamic_true_compile_once(fn):
    jitted = _stream(fn, [torch.randn(n, 4, m) for n, m in ((3, 2), (5, 6), (8, 3))], dynamic=True)
    assert jitted.cache_info().misses == 1, jitted.cache_info()


def test_the_strides_of_a_symbolic_length_are_expressions_of_it():
    jitted = squall.jit(lambda x: x.transpose(0, 1).stride(), dynamic=True)
    assert jitted(torch.randn(5, 3)) == (1, 3)
    assert jitted(torch.randn(7, 6)) == (1, 6)
    assert jitted.cache_info().misses == 1


def test_a_non_contiguous_input_s_strides_are_its_own():
    # the same function given a contiguous input, then a transposed one: each answered as in eager
    fn = _scaled_by_strides
    jitted = squall.jit(fn)
    for x in (torch.randn(3, 4), torch.randn(4, 3).t(), torch.randn(3, 8)[:, ::2], torch.randn(3, 4)):
        torch.testing.assert_close(jitted(x), fn(x))


def test_a_slice_s_strides_hold_for_every_width():
    # x[:, :4] is contiguous only while x has 4 columns: answered with this call's numbers, guarded
    def fn(x):
        return x[:, :4] * x[:, :4].stride(0)

    _stream(fn, [torch.randn(3, m) for m in (4, 6, 9, 4)])


def test_strides_with_gradients_match_eager():
    def fn(x):
        return (x.t() * x.t().stride(0)).sum()

    for n in (3, 6):
        x = torch.randn(n, 5, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        squall.jit(fn)(x).backward()
        fn(x_eager).backward()
        torch.testing.assert_close(x.grad, x_eager.grad)


@pytest.mark.parametrize(("shape", "dim", "message"), [((3, 4), 2, "out of range"), ((3, 4), -3, "out of range"), ((), 0, "no dimensions")])
def test_a_stride_out_of_range_raises_eager_s_error(shape, dim, message):
    x = torch.randn(shape)
    with pytest.raises(IndexError, match=message):
        x.stride(dim)
    with pytest.raises(IndexError, match=message):
        squall.jit(lambda x: x * x.stride(dim))(x)


def _contiguity_branch(x):
    y = x.transpose(0, 1)
    # a common guard in library code: copy only where the layout needs it
    return (y if y.is_contiguous() else y.contiguous() * 2) + x.is_contiguous()


def test_is_contiguous_answers_as_eager_for_inputs_and_views():
    fn = _contiguity_branch
    jitted = squall.jit(fn)
    for x in (torch.randn(3, 4), torch.randn(4, 3).t(), torch.randn(5, 4), torch.randn(2, 1, 3)):
        torch.testing.assert_close(jitted(x), fn(x))


def test_is_contiguous_of_changing_lengths_compiles_at_most_twice():
    jitted = _stream(_contiguity_branch, [torch.randn(n, 4) for n in (3, 5, 7, 9)])
    assert jitted.cache_info().misses <= 2, jitted.cache_info()


def test_unbound_layout_reads_answer_as_the_methods_do():
    def fn(x):
        y = x.t()
        return y * torch.Tensor.stride(y, 0) + torch.Tensor.is_contiguous(y) + torch.Tensor.stride(x)[0]

    jitted = _stream(fn, [torch.randn(n, 4) for n in (3, 5, 7)])
    assert jitted.cache_info().misses <= 2, jitted.cache_info()


def test_storage_offsets_answer_as_eager():
    # it was 0 for every tensor (a contiguous stand-in's): a slice's and an offset input's too
    def fn(x):
        return x * x[1:].storage_offset() + x.storage_offset()

    jitted = squall.jit(fn)
    for x in (torch.randn(3, 4), torch.randn(5, 4), torch.randn(8, 4)[2:], torch.randn(6, 4)[1:]):
        torch.testing.assert_close(jitted(x), fn(x))


def test_a_new_tensor_s_storage_offset_pins_no_size():
    jitted = _stream(lambda x: (x + 1) * ((x * 2).storage_offset() + 1), [torch.randn(n, 4) for n in (3, 5, 7, 9)])
    assert jitted.cache_info().misses <= 2, jitted.cache_info()


def _stepped():
    return torch.arange(24.0).reshape(3, 8)[:, ::2]


def _row_slice():
    return torch.arange(24.0).reshape(6, 4)[2:5]


def _transposed():
    return torch.arange(24.0).reshape(6, 4).t()


@pytest.mark.parametrize("make", [_stepped, _row_slice, _transposed], ids=["stepped", "row_slice", "transposed"])
def test_a_tensor_written_in_place_keeps_its_layout_as_in_eager(make):
    # eager's in-place ops keep a tensor's sizes, strides and offset; squall's layout read of the
    # value a write gave it answered the functional result's (contiguous, offset 0)
    def written(x):
        x.mul_(2)
        x[0] = 1.0
        return x.stride(), x.is_contiguous(), x.storage_offset(), x.t().stride(), x[1].storage_offset(), x * 1

    def a_view_written(x):
        y = x.t()
        y.add_(1)
        return y.stride(), x.stride(), y * 1

    def reshape_after_a_write(x):
        x.add_(1)
        x.reshape(-1).mul_(3)  # a view exactly where x's eager layout allows one
        return x * 1

    def a_stale_view_written(x):
        y = x[1:]
        x[0] = 7.0  # y is regenerated from x's new value when next used
        y.add_(1)
        return y.stride(), y.storage_offset(), y * 1

    for fn in (written, a_view_written, reshape_after_a_write, a_stale_view_written):
        eager_input, squall_input = make(), make()
        expected = fn(eager_input)
        got = squall.jit(fn)(squall_input)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(squall_input, eager_input)


def _size_one_strides(x):
    return x.stride(), (x + 1).stride(), x.unsqueeze(0).stride()


def test_a_size_one_dimension_s_stride_answers_as_eager():
    # `is_contiguous()` ignores a size-1 dimension's stride (and all of an empty tensor's), so an
    # input that differed only there passed the trace's contiguity guard and got the compiled
    # call's strides: torch.empty(1, 1)'s are (1, 1), a stepped slice's (4, 2)
    jitted = squall.jit(_size_one_strides)
    inputs = [torch.empty(1, 1), torch.empty(2, 2)[::2, ::2], torch.empty(0, 3), torch.empty(4, 5)[:0, :3]]
    for x in inputs + inputs:
        assert x.is_contiguous()
        assert jitted(x) == _size_one_strides(x)


def test_a_reshape_view_of_a_size_one_dimension_takes_its_stride_as_in_eager():
    # the view keeps the size-1 dimension's stride (4 for the transposed slice, 1 for a new tensor)
    def fn(x):
        y = x.reshape(2, 2, 1)
        y.mul_(2)
        return y.stride(), y.is_contiguous(), x * 1

    jitted = squall.jit(fn)
    for make in (lambda: torch.arange(4.0).reshape(4, 1), lambda: torch.arange(12.0).reshape(3, 4).t()[:, :1]) * 2:
        eager_input, squall_input = make(), make()
        expected = fn(eager_input)
        got = jitted(squall_input)
        assert got[:2] == expected[:2]
        torch.testing.assert_close(got[2], expected[2])
        torch.testing.assert_close(squall_input, eager_input)


def test_new_tensors_of_one_row_keep_one_program_for_every_length():
    # a new (1, n) tensor's strides are (n, 1) at every length: its guard names no length
    jitted = _stream(_size_one_strides, [torch.randn(1, n) for n in (3, 5, 7, 9)])
    assert jitted.cache_info().misses <= 2 and jitted.cache_info().guard_failures == 0, jitted.cache_info()


def test_a_program_that_reads_no_layout_guards_no_size_one_stride():
    jitted = _stream(lambda x: x.reshape(-1) * 2 + x.t(), [torch.empty(1, 1).fill_(1.0), torch.ones(2, 2)[::2, ::2]])
    assert jitted.cache_info().misses == 1 and jitted.cache_info().guard_failures == 0, jitted.cache_info()
