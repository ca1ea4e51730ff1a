"""A tensor the program computed, made to require grad (`h.requires_grad = True`, `h.requires_grad_()`):
squall compiles and differentiates such programs as eager runs them (squall.frontend.grad_roots),
and runs eagerly, saying why, where a trace would differ from eager."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import squall


class SpeechStem(nn.Module):
    """As transformers' wav2vec2 and HuBERT feature encoders: in training, the input's view is made
    to require grad before the convolutions."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3)
        self.head = nn.Linear(4, 2)

    def forward(self, values):
        h = values[:, None]
        if self.training:
            h.requires_grad = True
        flag = h.requires_grad
        return self.head(self.conv(h).mean(-1)).sum() * (2.0 if flag else 1.0)


class FrozenWithInputGrads(nn.Module):
    """As PEFT sets a model up (`enable_input_require_grads`): a forward hook makes the input
    embeddings' output require grad; the embeddings are frozen, one layer trains."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.frozen = nn.Linear(8, 8)
        self.trained = nn.Linear(8, 8)
        self.embed.weight.requires_grad_(False)
        self.frozen.requires_grad_(False)
        self.embed.register_forward_hook(lambda module, args, output: output.requires_grad_(True))

    def forward(self, ids):
        h = self.embed(ids)
        return self.trained(torch.tanh(self.frozen(h))).pow(2).mean()


def _no_squall_warning(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        return fn(*args)


def _grads(model):
    return {name: p.grad for name, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("make, inputs", [
    (SpeechStem, lambda: (torch.randn(3, 16),)),
    (FrozenWithInputGrads, lambda: (torch.randint(0, 11, (2, 5)),)),
])
def test_a_computed_tensor_made_to_require_grad_is_compiled_and_differentiated_by_squall(make, inputs):
    torch.manual_seed(0)
    model = make().train()
    reference = copy.deepcopy(model)
    args = inputs()
    jitted = squall.jit(model)
    loss = _no_squall_warning(jitted, *args)
    loss.backward()
    expected = reference(*args)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(_grads(model), _grads(reference))
    traces = squall.last_traces(jitted)
    assert traces.backward is not None  # squall's own differentiation, not PyTorch's autograd
    assert "made to require grad by the program" in str(traces[0])  # shown in the trace (and explain)


class _LinearProgram(nn.Module):
    """A Linear(3, 3) whose forward is `body(self, x)`: each test's program around one module."""

    def __init__(self, body):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.body = body

    def forward(self, x):
        return self.body(self, x)


def test_a_result_computed_only_from_the_root_requires_grad_as_eagers():
    def body(self, x):
        h = x * 2
        h.requires_grad_()
        return self.lin(x).sum(), h.exp()

    model = _LinearProgram(body)
    x = torch.randn(2, 3)
    loss, side = _no_squall_warning(squall.jit(model), x)
    eager_loss, eager_side = model(x)
    assert side.requires_grad and eager_side.requires_grad and side.grad_fn is not None
    torch.testing.assert_close((loss, side), (eager_loss, eager_side))


def test_what_was_computed_from_the_tensor_before_its_flag_was_set_requires_no_grad_its_views_do_as_eagers():
    def body(self, x):
        h = x * 2
        before, view_before = h.exp(), h[0]
        h.requires_grad = True
        return self.lin(h).sum(), before * 3, view_before + 1, h.sin()

    model = _LinearProgram(body)
    x = torch.randn(2, 3)
    got = _no_squall_warning(squall.jit(model), x)
    expected = model(x)
    # (eager's view answers for its base's flag, set after the view was taken)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in expected] == [True, False, True, True]
    torch.testing.assert_close(got, expected)
    got[0].backward()
    weight_grad = model.lin.weight.grad.clone()
    model.lin.weight.grad = None
    expected[0].backward()
    torch.testing.assert_close(weight_grad, model.lin.weight.grad)


def test_setting_the_flag_inside_no_grad_changes_only_the_flag():
    def fn(x):
        h = x * 2
        h.requires_grad = True
        return h * 3, h.requires_grad

    x = torch.randn(4)
    with torch.no_grad():
        got, flag = _no_squall_warning(squall.jit(fn), x)
        expected, eager_flag = fn(x)
    assert flag is eager_flag is True
    assert not got.requires_grad and not expected.requires_grad
    torch.testing.assert_close(got, expected)


def _root_returned(self, x):
    h = x * 2
    h.requires_grad = True
    return self.lin(h).sum(), h


def _base_written_after(self, x):
    h = x[0]
    h.requires_grad = True
    out = self.lin(h).sum()
    x.add_(1)
    return out


def _no_input_requires_grad(self, x):  # (run on a frozen model)
    h = x * 2
    h.requires_grad = True
    return self.lin(h).sum()


@pytest.mark.parametrize("body, why", [
    (_root_returned, "and returns it"),
    (_base_written_after, "writes in place into it or a tensor it shares memory with"),
    (_no_input_requires_grad, "squall does not differentiate this program"),
])
def test_where_a_trace_would_differ_the_program_runs_eagerly_and_answers_as_eager(body, why):
    model = _LinearProgram(body).requires_grad_(body is not _no_input_requires_grad)
    x_eager, x_squall = torch.randn(2, 3), torch.randn(2, 3)
    x_squall.copy_(x_eager)
    expected = body(model, x_eager)
    with pytest.warns(squall.SquallWarning, match=why):
        got = squall.jit(model)(x_squall)
    expected, got = (expected if isinstance(expected, tuple) else (expected,)), (got if isinstance(got, tuple) else (got,))
    torch.testing.assert_close(got, expected)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in expected]
    assert [t.is_leaf for t in got] == [t.is_leaf for t in expected]
    torch.testing.assert_close(x_squall, x_eager)


@pytest.mark.parametrize("write", [lambda h: h.add_(1), lambda h: h[0].mul_(2)])
def test_writing_into_a_root_raises_eagers_error(write):
    def body(self, x):
        h = x * 2
        h.requires_grad = True
        write(h)
        return self.lin(h).sum()

    model = _LinearProgram(body)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        body(model, torch.randn(2, 3))
    with pytest.warns(squall.SquallWarning, match="writes in place into it"):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            squall.jit(model)(torch.randn(2, 3))


def test_an_integer_tensor_made_to_require_grad_raises_eagers_error():
    def body(self, x):
        ids = x.argmax(-1)
        ids.requires_grad = True
        return self.lin(x).sum() + ids.sum()

    model = _LinearProgram(body)
    with pytest.warns(squall.SquallWarning, match="torch.int64 tensor"):
        with pytest.raises(RuntimeError, match="only Tensors of floating point"):
            squall.jit(model)(torch.randn(2, 3))


def test_requires_grad_that_changes_nothing_is_no_opaque_call():
    def fn(x):
        return (x * 2).requires_grad_(False) * 3

    x = torch.randn(3)
    got = _no_squall_warning(squall.jit(fn), x)
    torch.testing.assert_close(got, fn(x))
