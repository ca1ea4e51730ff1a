"""In-place writes through views give eager's results, inputs' storage included (squall.frontend.views)."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from eager_answers import runs_eagerly_saying


def _matches_eager(fn, *inputs):
    """`fn` compiled gives eager's result on copies of `inputs`, and leaves them as eager does."""
    eager_inputs = [x.clone() for x in inputs]
    squall_inputs = [x.clone() for x in inputs]
    expected = fn(*eager_inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # fill_, zero_, copy_ run as opaque torch calls
        got = squall.jit(fn)(*squall_inputs)
    assert_close(got, expected)
    for mine, theirs in zip(squall_inputs, eager_inputs):
        assert_close(mine, theirs)
    return got


def add_to_first_row(x):
    x[0] += 5
    return x * 1


def double_last_column(x):
    x[..., -1] *= 2
    return x.sum(0)


def write_slice_then_read_base(x):
    v = x[1:3]
    v[0] = 7.0
    return x + 1


def setitem_base_then_read_view(x):
    v = x[1:]
    x[1:3] = 7.0
    return v * 1


def base_update_seen_by_view(x):
    v = x[0]
    x.add_(1)
    return v + 0


def two_views_of_one_row(x):
    a = x[0]
    b = x[0:1]
    a.mul_(3)
    return b + 0


def view_of_a_view(x):
    row = x[1:]
    cell = row[0, 1:]
    cell.add_(10)
    return row * 1


def through_a_transpose(x):
    x.t()[0].fill_(3.0)
    return x * 1


def intermediate_base(x):
    y = x * 2
    y[:, 0] = 0.0
    y.t()[1] += 1
    return y


CASES = {
    "x[0] += 5": add_to_first_row,
    "x[..., -1] *= 2": double_last_column,
    "slice written, base read": write_slice_then_read_base,
    "base written, slice read": setitem_base_then_read_view,
    "base update seen by view": base_update_seen_by_view,
    "two views of one row": two_views_of_one_row,
    "view of a view": view_of_a_view,
    "through a transpose": through_a_transpose,
    "intermediate base": intermediate_base,
    "view(-1)": lambda x: x.view(-1).add_(1) * 1,
    "transpose": lambda x: x.transpose(0, 1).mul_(2) + 0,
    "permute": lambda x: x.permute(1, 0)[2].sub_(1) + x.sum(),
    "T": lambda x: x.T[0].add_(1) + x.sum(),
    "mT": lambda x: x.mT[1].mul_(0) + x.sum(),
    "unsqueeze": lambda x: x.unsqueeze(0).sub_(1) + 0,
    "squeeze": lambda x: x[0:1].squeeze(0).add_(4) + x.sum(),
    "narrow": lambda x: x.narrow(1, 1, 2).mul_(2) + x.sum(),
    "narrow negative start": lambda x: x.narrow(1, -2, 2).add_(1) + x.sum(),
    "split": lambda x: x.split(1)[1].add_(1) + x.sum(),
    "split sizes": lambda x: torch.split(x, [1, 2], dim=1)[1].mul_(3) + x.sum(),
    "chunk": lambda x: x.chunk(2, dim=1)[1].add_(2) + x.sum(),
    "tensor_split": lambda x: torch.tensor_split(x, (1,), dim=1)[1].add_(2) + x.sum(),
    "unbind": lambda x: x.unbind(1)[2].mul_(-1) + x.sum(),
    "diagonal": lambda x: x.diagonal().add_(1) + x.sum(),
    "diagonal offset": lambda x: x.diagonal(1).zero_() + x.sum(),
    "diagonal negative offset": lambda x: torch.diagonal(x, -1).add_(5) + x.sum(),
    "movedim": lambda x: x.movedim(0, 1)[0].add_(1) + x.sum(),
    "swapaxes": lambda x: x.swapaxes(0, 1)[2].add_(1) + x.sum(),
    "detach": lambda x: x.detach().add_(1) + 0,
    "expand without broadcasting": lambda x: x.expand(2, 3).add_(1) + 0,
    "copy_ into a view": lambda x: x[1].copy_(torch.arange(3.0)) + x.sum(),
}


@pytest.mark.parametrize("fn", CASES.values(), ids=CASES.keys())
def test_inplace_through_views_matches_eager(fn):
    _matches_eager(fn, torch.randn(2, 3))


def test_batched_diagonal_and_3d_views():
    def f(x):
        torch.diagonal(x, 0, 1, 2).mul_(10)
        x[:, 1:, ::2] += 1
        return x.transpose(0, 2)[1] + 0

    _matches_eager(f, torch.randn(2, 3, 3))


def test_advanced_indexing_is_a_copy():
    def f(x):
        x[[0, 1]].add_(100)  # a gather: eager leaves x as it was
        return x * 1

    _matches_eager(f, torch.randn(3, 2))


def test_a_buffer_updated_through_a_view():
    class Counts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("hits", torch.zeros(2, 3))

        def forward(self, x):
            self.hits[0] += 1
            self.hits[1, :2] += x.sum()
            return x * self.hits.sum()

    eager, compiled = Counts(), Counts()
    x = torch.randn(4)
    expected = [eager(x), eager(x)]
    jm = squall.jit(compiled)
    got = [jm(x), jm(x)]
    assert_close(got, expected)
    assert_close(compiled.hits, eager.hits)


def test_gradients_through_a_write_into_a_view():
    def f(x):
        y = x * 2
        y[0] *= 3
        return (y * y).sum()

    x = torch.randn(2, 3, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        squall.jit(f)(x2).backward()
    f(x).backward()
    assert_close(x2.grad, x.grad)


def test_write_through_an_expanded_view_raises_eagers_error():
    def f(x):
        x.expand(3, 3).add_(1)
        return x

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory location"):
        f(torch.zeros(1, 3))
    with pytest.warns(squall.SquallWarning, match="an in-place write through an expanded view.*runs eagerly"):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory location"):
            squall.jit(f)(torch.zeros(1, 3))


@pytest.mark.parametrize("write", [lambda v: v.fill_(2.0), lambda v: v.zero_()], ids=["fill_", "zero_"])
def test_a_fill_through_an_expanded_view_writes_as_eager_does(write):
    # eager takes these (every element written gets the same value); squall raised eager's error for add_
    def f(x):
        write(x[:, :1].expand(3, 4))
        return x * 1

    x = torch.randn(3, 4)
    runs_eagerly_saying(f, lambda: (x.clone(),), "an in-place write through an expanded view")


def test_a_layout_dependent_view_of_a_value_read_no_more_is_written_freely():
    def f(x):
        y = (x * 2).reshape(-1)
        y.add_(1)
        return y.contiguous().mul_(3)

    _matches_eager(f, torch.randn(2, 3))


def test_a_write_into_contiguous_of_a_tensor_eager_copies_stays_in_the_copy():
    # x.t() is not contiguous: eager's contiguous() copies, and the write never reaches x
    # (squall's trace once held one value for both and wrote into the caller's x)
    def f(x):
        y = x.t().contiguous()
        y.add_(1)
        return y

    def views_of_the_copy(x):
        y = x.t().contiguous()
        y[0].mul_(2)
        return y, x

    _matches_eager(f, torch.randn(4, 5))
    _matches_eager(views_of_the_copy, torch.randn(4, 5))


def test_a_write_into_contiguous_of_a_contiguous_tensor_reaches_it_as_in_eager():
    # eager's contiguous() returns x itself: the caller's tensor is modified
    def f(x):
        y = x.contiguous()
        y.mul_(2)
        return y

    _matches_eager(f, torch.randn(4, 5))
    _matches_eager(f, torch.randn(5, 4).t())  # not contiguous: a copy, x unchanged


def test_the_layout_of_contiguous_of_a_view_is_eagers():
    # this traced forever: the value of contiguous()'s result was computed from itself
    def f(x):
        y = x.t().contiguous()
        return y * (2 if y.is_contiguous() else 3), y.stride()

    _matches_eager(f, torch.randn(4, 5))


def test_write_through_unfold_runs_eagerly():
    def f(x):
        x.unfold(0, 2, 1).add_(1)
        return x

    runs_eagerly_saying(f, lambda: (torch.zeros(4),), r"torch\.Tensor\.unfold")


@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
def test_contiguous_under_no_grad_is_eager_s_object_for_the_call_s_layout(transposed):
    # under no_grad with an input that requires grad, squall asked eager on a meta tensor (always
    # contiguous) which object contiguous() returns: for a transposed w it answered w itself, so a
    # write into the copy reached w and `is` answered True
    def fn(w):
        with torch.no_grad():
            y = w.contiguous()
            y.add_(1)
        return (y * w).sum(), y is w

    def make():
        base = torch.arange(12.0).reshape(4, 3).t() if transposed else torch.arange(12.0).reshape(3, 4)
        return base.clone(memory_format=torch.preserve_format).requires_grad_(True)

    w_eager, w_squall = make(), make()
    expected = fn(w_eager)
    got = squall.jit(fn)(w_squall)
    assert got[1] is expected[1]
    assert_close(got[0], expected[0])
    expected[0].backward()
    got[0].backward()
    assert_close(w_squall.grad, w_eager.grad)
    assert_close(w_squall.detach(), w_eager.detach())
