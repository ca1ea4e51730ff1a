"""Changes a cached program's guards once missed, each found by a driver that calls a jitted
function, changes one thing, and calls it again beside eager: every later call must answer as
eager does (a new compile, or eager itself with a warning)."""
from __future__ import annotations

import functools
import types
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.ltorch.base import SquallWarning
from squall.runtime.jit import jitted_state


class _Outer(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x) + 1


@pytest.mark.parametrize("inner", [nn.ReLU, lambda: nn.Linear(4, 4)], ids=["relu", "linear"])
def test_forward_replaced_on_a_torch_submodule_after_compiling(inner):
    # wrapping libraries (accelerate's hooks) set `module.forward` on a built model's layers
    m = _Outer(inner())
    j = squall.jit(m)
    x = torch.randn(3, 4)
    assert_close(j(x), m(x))
    m.inner.forward = types.MethodType(lambda self, t: t.tanh() * 3, m.inner)
    assert_close(j(x), m(x))
    del m.inner.forward
    assert_close(j(x), m(x))
    assert jitted_state(j).stats.misses == 2, "the class's forward came back: the first program again"


def test_forward_of_a_torch_class_patched_after_compiling():
    m = _Outer(nn.Hardtanh())
    j = squall.jit(m)
    x = torch.randn(3, 4) * 3
    assert_close(j(x), m(x))
    original = nn.Hardtanh.forward
    nn.Hardtanh.forward = lambda self, t: t * 5
    try:
        assert_close(j(x), m(x))
    finally:
        nn.Hardtanh.forward = original
    assert_close(j(x), m(x))


def _scaled(x, s=2.0, *, shift=1.0):
    return x * s + shift


def _calls_scaled(x):
    return _scaled(x)


def _tripled(x, s=3.0, *, shift=1.0):
    return x * s - shift


@pytest.mark.parametrize("jitted", [_calls_scaled, _scaled], ids=["a helper's", "the jitted function's own"])
def test_code_and_defaults_changed_in_place(jitted):
    # IPython's autoreload sets an edited function's __code__ and __defaults__ on the function itself
    j = squall.jit(jitted)
    x = torch.randn(3)
    saved = (_scaled.__code__, _scaled.__defaults__, dict(_scaled.__kwdefaults__))
    try:
        assert_close(j(x), jitted(x))
        assert_close(j(x), jitted(x))
        assert jitted_state(j).stats.misses == 1, "no change: the cached program"
        _scaled.__defaults__ = (5.0,)
        assert_close(j(x), jitted(x))
        _scaled.__kwdefaults__["shift"] = -4.0  # the dict itself, changed in place
        assert_close(j(x), jitted(x))
        _scaled.__code__ = _tripled.__code__
        assert_close(j(x), jitted(x))
    finally:
        _scaled.__code__, _scaled.__defaults__, _scaled.__kwdefaults__ = saved
    assert_close(j(x), jitted(x))


def test_a_module_forward_s_defaults_changed_in_place():
    class Scale(nn.Module):
        def forward(self, x, s=2.0):
            return x * s

    m = Scale()
    j = squall.jit(m)
    x = torch.randn(3)
    assert_close(j(x), m(x))
    Scale.forward.__defaults__ = (7.0,)
    assert_close(j(x), m(x))


class _Scaling(torch.Tensor):
    """A subclass whose __torch_function__ changes what `*` computes."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.mul:
            args = (args[0], args[1] * 10)
        return super().__torch_function__(func, types, args, kwargs or {})


class _Marked(torch.Tensor):
    """A subclass with torch's default __torch_function__: results are _Marked too."""


@pytest.mark.parametrize("cls", [_Scaling, _Marked])
def test_a_tensor_subclass_input_runs_eagerly_and_is_keyed_by_its_type(cls):
    def f(x):
        return x * 2

    j = squall.jit(f)
    p = nn.Parameter(torch.randn(3))
    assert_close(j(p), f(p))  # a Parameter is traced as its tensor
    t = torch.randn(3).as_subclass(cls)
    with pytest.warns(SquallWarning, match=f"{cls.__name__}, a tensor subclass"):
        got = j(t)  # the same metadata as the Parameter: another key all the same
    want = f(t)
    assert type(got) is type(want) is cls
    assert_close(got.as_subclass(torch.Tensor), want.as_subclass(torch.Tensor))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(j(p), f(p))  # the Parameter's program still


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 4, bias=False)
        self.head = nn.Linear(4, 4, bias=False)
        self.head.weight = self.embed.weight  # tied, as a language model's embeddings and head

    def forward(self, x):
        return self.head(self.embed(x).relu())


def test_tied_weights_untied_after_compiling():
    m = _Tied()
    j = squall.jit(m)
    x = torch.randn(3, 4, requires_grad=True)
    assert_close(j(x), m(x))
    m.head.weight = nn.Parameter(m.embed.weight.detach() * -2)  # untied: a parameter of its own
    got, want = j(x), m(x)
    assert_close(got, want)
    got.sum().backward()
    grad, x.grad = x.grad, None
    want.sum().backward()
    assert_close(grad, x.grad)
    m.head.weight = m.embed.weight  # tied again
    assert_close(j(x), m(x))


@pytest.mark.filterwarnings("ignore:.*require grad without taking them as arguments")
def test_a_torch_module_s_bound_forward_jitted_reads_the_module_at_every_call():
    # `model.forward = compile(model.forward)`, as transformers' docs show for torch.compile
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    j = squall.jit(m.forward)
    x = torch.randn(3, 4)
    assert_close(j(x), m(x))
    m[1] = nn.Tanh()
    assert_close(j(x), m(x))
    m[0].weight = nn.Parameter(torch.ones(4, 4))
    assert_close(j(x), m(x))


class _Affine:
    def __init__(self):
        self.k = 2.0

    def __call__(self, x):
        return x * self.k


def test_a_callable_object_jitted_is_read_through_its_attributes_and_class():
    obj = _Affine()
    j = squall.jit(obj)
    x = torch.randn(3)
    assert_close(j(x), obj(x))
    obj.k = 5.0
    assert_close(j(x), obj(x))
    original = _Affine.__call__
    _Affine.__call__ = lambda self, x: x - self.k
    try:
        assert_close(j(x), obj(x))
    finally:
        _Affine.__call__ = original


def test_a_partial_jitted_sees_its_keywords_change_in_place():
    def scaled(x, s, t=1.0):
        return x * s + t

    p = functools.partial(scaled, s=2.0)
    j = squall.jit(p)
    x = torch.randn(3)
    assert_close(j(x), p(x))
    p.keywords["s"] = 3.0
    assert_close(j(x), p(x))
    assert_close(j(x, t=5.0), p(x, t=5.0))


def test_reading_is_leaf_grad_fn_or_an_input_s_grad_answers_as_eager():
    # the key holds requires_grad, not whether a tensor is a leaf: such reads were answered
    # as for a new leaf (True, None, None) whatever the caller's tensor was
    def leafy(x):
        return x * 2 if x.is_leaf else x - 1

    def has_history(x):
        return x * 2 if x.grad_fn is not None else x - 1

    def steps(p):
        return p.detach() - 0.1 * p.grad if p.grad is not None else p.detach()

    leaf = torch.randn(3, requires_grad=True)
    for f in (leafy, has_history):
        j = squall.jit(f)
        assert_close(j(leaf), f(leaf))
        made = leaf * 1  # not a leaf, the same key
        assert_close(j(made), f(made))
        plain = torch.randn(3)
        assert_close(j(plain), f(plain))
    j = squall.jit(steps)
    p = nn.Parameter(torch.randn(3))
    assert_close(j(p), steps(p))
    p.grad = torch.ones(3)
    assert_close(j(p), steps(p))
