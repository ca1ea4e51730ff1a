"""A torch function or tensor method the user replaced by a wrapper that calls the original
(`F.softmax = wrapped`, `torch.Tensor.split = wrapped`: profilers, patching libraries). Inside the
original, torch hands over whatever its name reaches now (a Python function's
`handle_torch_function`, a C method's lookup on torch.Tensor), the wrapper, so squall saw the
wrapper as an unknown torch call and ran it opaque: the wrapper's work was done twice (once
traced, once inside the opaque call) and the answer was not eager's. A proxy's methods skipped a
replaced method altogether."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from squall.ltorch import torch_table

F = torch.nn.functional


def test_a_wrapped_function_of_the_language_is_traced_as_the_original(monkeypatch):
    softmax = F.softmax
    monkeypatch.setattr(F, "softmax", lambda x, dim, **kw: softmax(2 * x, dim, **kw))
    fn = lambda x: F.softmax(x, -1).sum(0)
    x = torch.randn(3, 5, requires_grad=True)
    expected = fn(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # traced, not opaque
        actual = squall.jit(fn)(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(torch.autograd.grad(actual.square().sum(), x), torch.autograd.grad(expected.square().sum(), x))


def test_a_wrapped_function_outside_the_language_runs_eagerly_and_says_why(monkeypatch):
    rrelu = F.rrelu
    assert rrelu not in torch_table()  # (the case this test is about: no op to trace the original as)
    monkeypatch.setattr(F, "rrelu", lambda x, *a, **kw: rrelu(x + 1, *a, **kw))
    fn = lambda x: F.rrelu(x, training=False) * 3
    x = torch.randn(4, 6)
    with pytest.warns(squall.SquallWarning, match="rrelu was replaced by"):
        actual = squall.jit(fn)(x)
    torch.testing.assert_close(actual, fn(x))


def test_a_function_handing_over_another_of_torchs_is_no_rebinding():
    # F.fractional_max_pool2d's body is `_fractional_max_pool2d`'s, which hands over the public
    # function: nothing was replaced, it runs as the opaque torch call it always was
    fn = lambda x, samples: F.fractional_max_pool2d(x, 2, output_size=(2, 2), _random_samples=samples)
    x, samples = torch.randn(1, 2, 5, 5), torch.rand(1, 2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = squall.jit(fn)(x, samples)
    assert not any("replaced" in str(w.message) for w in caught)
    torch.testing.assert_close(actual, fn(x, samples))


def _wrapping(name, change):
    original = getattr(torch.Tensor, name)
    return lambda self, *args, **kwargs: original(change(self), *args, **kwargs)


@pytest.mark.parametrize("name, program", [
    ("split", lambda x: x.split(2)[0] + 1),  # a method torch writes in Python
    ("add", lambda x: x.add(1)),  # one in C, which looks itself up on torch.Tensor by name
    ("__matmul__", lambda x: x @ x.T),  # an operator
])
def test_a_wrapped_tensor_method_runs_the_users_wrapper_once(monkeypatch, name, program):
    monkeypatch.setattr(torch.Tensor, name, _wrapping(name, lambda t: t + 3))
    x = torch.arange(12.0).reshape(4, 3).requires_grad_()
    expected = program(x)
    jitted = squall.jit(program)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        actual = jitted(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(torch.autograd.grad(actual.sum(), x), torch.autograd.grad(expected.sum(), x))
    monkeypatch.undo()  # the wrapper taken away: the program is guarded on it, and compiles anew
    torch.testing.assert_close(jitted(x), program(x))


@pytest.mark.parametrize("name", ["__mul__", "__add__", "__sub__", "__truediv__", "__gt__"])
def test_a_wrapped_tensor_operator_is_not_called_by_squalls_own_kernels(monkeypatch, name):
    # the backward's (and the torch plan's own) elementwise kernels call torch's C operators, as
    # eager's C++ derivative formulas do, never the user's replacement on torch.Tensor
    original = getattr(torch.Tensor, name)
    monkeypatch.setattr(torch.Tensor, name, lambda a, b: original(original(a, b), 2))

    def program(x, y):
        return ((x * y).sin() / (y - x) + (x > 0.5)).sum()

    x, y = torch.randn(6, requires_grad=True), torch.randn(6, requires_grad=True)
    expected = program(x, y)
    expected_grads = torch.autograd.grad(expected, (x, y))
    actual = squall.jit(program, executors=["torch"])(x, y)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(torch.autograd.grad(actual, (x, y)), expected_grads)
