"""An in-place op whose operand partly overlaps the tensor it writes raises eager's error.

Eager's TensorIterator refuses `x[1:] += x[:-1]` and `x.add_(x.t())` (its loop would read
elements it has already written); squall answered as if the operand had been read first, silently
unlike eager. The same tensor, disjoint views and views that are not dense are allowed, as in
eager (squall.frontend.views.ViewTracker.check_overlap)."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall

_MESSAGE = "some elements of the input tensor and the written-to tensor refer to a single memory location"

REFUSED = {
    "shifted_slices": lambda x: x[1:].__iadd__(x[:-1]),
    "transposed": lambda x: x.add_(x.t()),
    "broadcast_row": lambda x: x.mul_(x[0]),
    "zero_dim_element": lambda x: x.sub_(x[0, 0]),
    "setitem_shifted": lambda x: x.__setitem__(slice(1, None), x[:-1]),
    "setitem_transposed": lambda x: x.__setitem__(slice(None), x.t()),
    "lerp_weight": lambda x: x[1:].lerp_(torch.ones(2, 3), x[:-1]),
    "clamp_bound": lambda x: x[1:].clamp_(min=x[:-1]),
    "index_add_source": lambda x: x[1:].index_add_(0, torch.tensor([0, 1]), x[:-1]),
    "after_a_write": lambda x: (lambda a, b: (x.mul_(2), a.add_(b)))(x[1:], x[:-1]),
}

ALLOWED = {
    "same_tensor": lambda x: x.add_(x),
    "same_elements_viewed_alike": lambda x: x.add_(x.view(3, 3)),
    "disjoint_rows": lambda x: x[0].__iadd__(x[1]),
    "disjoint_broadcast_row": lambda x: x[1:].mul_(x[0]),
    "not_dense_columns": lambda x: x[:, ::2].add_(x[:, 1::2]),
    "setitem_disjoint": lambda x: x.__setitem__(0, x[1]),
    "setitem_itself": lambda x: x.__setitem__(slice(None), x),
    "setitem_row_into_column": lambda x: x.__setitem__((slice(None), 0), x[0]),
    "masked_fill_element": lambda x: x.masked_fill_(x > 3, x[0, 0]),  # eager reads the value as a number
    "disjoint_after_a_write": lambda x: (lambda a, b: (x.mul_(2), a.add_(b)))(x[2:], x[:1]),
}


def _program(op):
    def program(x):
        op(x)
        return x * 1

    return program


@pytest.mark.parametrize("op", REFUSED.values(), ids=REFUSED.keys())
def test_a_partly_overlapping_operand_raises_eager_s_error(op):
    with pytest.raises(RuntimeError, match=_MESSAGE):
        _program(op)(torch.arange(9.0).reshape(3, 3))
    with pytest.raises(RuntimeError, match=_MESSAGE):
        squall.jit(_program(op))(torch.arange(9.0).reshape(3, 3))


@pytest.mark.parametrize("op", ALLOWED.values(), ids=ALLOWED.keys())
def test_operands_eager_accepts_answer_as_eager(op):
    eager_input, squall_input = torch.arange(9.0).reshape(3, 3), torch.arange(9.0).reshape(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # compiled, not run eagerly
        got = squall.jit(_program(op))(squall_input)
    torch.testing.assert_close(got, _program(op)(eager_input))
    torch.testing.assert_close(squall_input, eager_input)


def test_whether_slices_overlap_is_decided_for_each_length():
    # x[1:] and x[:-1] are disjoint rows for 2 rows, overlapping from 3
    program = _program(REFUSED["shifted_slices"])
    for dynamic in (None, True):
        jitted = squall.jit(program, dynamic=dynamic)
        for n in (2, 3, 2, 4):
            eager_input, squall_input = torch.arange(3.0 * n).reshape(n, 3), torch.arange(3.0 * n).reshape(n, 3)
            if n == 2:
                torch.testing.assert_close(jitted(squall_input), program(eager_input))
                torch.testing.assert_close(squall_input, eager_input)
            else:
                with pytest.raises(RuntimeError, match=_MESSAGE):
                    jitted(squall_input)


def test_an_input_s_layout_decides_as_in_eager():
    # slices of a stepped input are not dense: eager does not check them
    program = _program(REFUSED["shifted_slices"])
    jitted = squall.jit(program)
    with pytest.raises(RuntimeError, match=_MESSAGE):
        jitted(torch.arange(9.0).reshape(3, 3))
    # eager's answer is its loop's order: rows read after being written (the program runs eagerly)
    eager_input, squall_input = torch.arange(18.0).reshape(3, 6)[:, ::2], torch.arange(18.0).reshape(3, 6)[:, ::2]
    with pytest.warns(squall.SquallWarning, match="may share its elements"):
        torch.testing.assert_close(jitted(squall_input), program(eager_input))
    torch.testing.assert_close(squall_input, eager_input)
    with pytest.raises(RuntimeError, match=_MESSAGE):
        jitted(torch.arange(9.0).reshape(3, 3))


def test_a_view_written_then_assigned_back_compiles():
    # `x[0] += 1` writes the view x[0], then assigns it to x[0]: the same elements, laid out alike
    def fn(x):
        x[0] += 1
        x[1, :2] += x[2, 0]
        x.t()[1:].mul_(2)
        return x * 1

    eager_input, squall_input = torch.arange(9.0).reshape(3, 3), torch.arange(9.0).reshape(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        got = squall.jit(fn)(squall_input)
    torch.testing.assert_close(got, fn(eager_input))
    torch.testing.assert_close(squall_input, eager_input)


def test_a_reshape_eager_copied_shares_no_memory():
    # x.t().reshape(-1) is a copy in eager: writing x while reading it is allowed
    def fn(x):
        y = x.t().reshape(9)[:8]
        x.view(9)[1:].add_(y)  # as views of x they would overlap in part
        return x * 1

    eager_input, squall_input = torch.arange(9.0).reshape(3, 3), torch.arange(9.0).reshape(3, 3)
    torch.testing.assert_close(squall.jit(fn)(squall_input), fn(eager_input))
    torch.testing.assert_close(squall_input, eager_input)


def test_augmented_assignments_into_views_answer_as_eager_at_every_length():
    # `x[:, 0] += 1` assigns the view it wrote back to x[:, 0], the same elements laid out alike
    def fn(x):
        x[:, 0] += 1
        x[1:] *= 2
        return x * 1

    jitted = squall.jit(fn)
    for n in (3, 5, 7, 9):
        eager_input, squall_input = torch.arange(4.0 * n).reshape(n, 4), torch.arange(4.0 * n).reshape(n, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)
            got = jitted(squall_input)
        torch.testing.assert_close(got, fn(eager_input))
        torch.testing.assert_close(squall_input, eager_input)
