"""Modes squall's traces do not model: grad mode turned on inside a call made without it, inference
mode entered or left inside the program: such a program runs eagerly (saying so) and answers as eager
does. torch.autocast is modelled (tests/test_autocast.py); its cases that touch these modes are here."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import squall


class RMSNormed(nn.Module):
    """As transformers' RMSNorm: it reads its input's dtype and casts its result back to it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.weight = nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        h = self.lin(x)
        dtype = h.dtype
        h32 = h.to(torch.float32)
        h32 = h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h32.to(dtype), dtype


def _same(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_a_call_under_autocast_compiles_with_the_casts_and_rounds_as_eager():
    torch.manual_seed(0)
    m = RMSNormed()
    jm = squall.jit(m)
    x = torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = m(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)
            out = jm(x)
            again = jm(x)
    # the linear's result is bfloat16 there, and the cast back to it rounds (a trace made in float32 left it out)
    assert expected[1] == out[1] == torch.bfloat16
    assert out[0].dtype == expected[0].dtype == torch.float32
    torch.testing.assert_close(out[0], expected[0], rtol=1.6e-2, atol=1e-2)
    _same(again[0], out[0])
    assert jm.cache_info().misses == 0  # compiled by the autocast state's own jitted function
    # outside autocast the module compiles as ever
    _same(jm(x)[0], m(x)[0])
    assert jm.cache_info().misses == 1


def _autocast_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.t()
    return y, y.dtype


def test_a_program_that_enables_autocast_compiles():
    f = squall.jit(_autocast_inside)
    x = torch.randn(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        out = f(x)
    expected = _autocast_inside(x)
    assert out[1] == expected[1] == torch.bfloat16
    _same(out[0], expected[0])
    _same(f(x)[0], expected[0])
    assert f.cache_info().misses == 1


def test_autocast_disabled_inside_the_program_compiles():
    # transformers' rotary embeddings turn autocast off for their float32 math
    def f(x):
        with torch.autocast("cpu", enabled=False):
            return torch.sin(x) * 2

    jf = squall.jit(f)
    x = torch.randn(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        _same(jf(x), f(x))
    assert jf.cache_info().misses == 1


@pytest.mark.parametrize("dynamic", [None, True])
def test_autocast_enabled_by_a_condition_the_trace_reads(dynamic):
    # enabled for some shapes only: each compiles with its casts or without (a new variant included)
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=x.shape[0] > 2):
            return x @ x.t()

    jf = squall.jit(f, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for n in (3, 2, 5, 2, 4):
            x = torch.randn(n, 4)
            out, expected = jf(x), f(x)
            assert out.dtype == expected.dtype
            _same(out, expected)


def _grad_inside(x):
    with torch.enable_grad():
        y = (x * 2).sum()
    return y


def test_grad_mode_turned_on_inside_a_no_grad_call_runs_eagerly_and_keeps_the_graph():
    f = squall.jit(_grad_inside)
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        with pytest.warns(squall.SquallWarning, match="turns grad mode on.*runs eagerly for these inputs"):
            y = f(x)
    assert y.requires_grad  # as eager's: a graph was recorded inside the block
    y.backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    # with grad on around the call, nothing changes mode: it compiles
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        _same(f(x), _grad_inside(x))


def test_grad_mode_turned_on_inside_around_no_tensor_requiring_grad_compiles():
    f = squall.jit(_grad_inside)
    x = torch.randn(3)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        _same(f(x), _grad_inside(x))


def test_inference_mode_entered_inside_the_program_runs_eagerly():
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y, y.is_inference()

    with pytest.warns(squall.SquallWarning, match="enters torch.inference_mode"):
        out = squall.jit(f)(torch.randn(3))
    assert out[1] is True and out[0].is_inference()


def test_a_program_changing_whether_a_traced_tensor_requires_grad_runs_eagerly():
    """`x.requires_grad_()` on an input or an intermediate: eager's results and the caller's tensor
    require grad from there on; squall's compiled program decided its results' flags when traced."""
    def make_leaf(x):
        y = x.clone().requires_grad_()
        return y * 2, y

    def mark_input(x):
        x.requires_grad_(True)
        return x * 2

    def set_on_new_leaf(x):  # the attribute form, as transformers' and users' code writes it
        z = torch.zeros(3)
        z.requires_grad = True
        return z * x, z

    def set_on_input(x):
        x.requires_grad = True
        return x * 2

    for fn in (make_leaf, mark_input, set_on_new_leaf, set_on_input):
        eager_input, squall_input = torch.randn(3), torch.randn(3)
        expected = fn(eager_input)
        with pytest.warns(squall.SquallWarning, match=r"changes whether a traced tensor requires grad.*runs eagerly"):
            got = squall.jit(fn)(squall_input)
        expected, got = (expected if isinstance(expected, tuple) else (expected,)), (got if isinstance(got, tuple) else (got,))
        assert [t.requires_grad for t in got] == [t.requires_grad for t in expected] == [True] * len(expected)
        assert squall_input.requires_grad == eager_input.requires_grad  # (the caller's x marked by mark_input)


def test_unsetting_requires_grad_on_a_computed_tensor_raises_eagers_error():
    def fn(x):
        y = x * 2
        y.requires_grad = False
        return y

    with pytest.warns(squall.SquallWarning, match="changes whether a traced tensor requires grad"):
        with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
            squall.jit(fn)(torch.randn(3, requires_grad=True))


def test_detaching_a_traced_tensor_in_place_runs_eagerly():
    """`h.detach_()` cuts h from the graph where it stands: eager's later ops on h pass no gradient
    back (a truncated backpropagation through time), and an input detached so stops requiring grad
    for the caller. squall's trace kept h's name and passed the gradient through (twice w's)."""
    def truncated(x, w):
        h = x * w
        h.detach_()
        return (h * w).sum()

    def detach_input(x, w):
        w.detach_()
        return x * w

    x = torch.randn(3, 4)
    for fn in (truncated, detach_input):
        w, ws = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
        with torch.no_grad():
            ws.copy_(w)
        expected = fn(x, w)
        with pytest.warns(squall.SquallWarning, match=r"changes whether a traced tensor requires grad \(torch.Tensor.detach_\).*runs eagerly"):
            got = squall.jit(fn)(x, ws)
        torch.testing.assert_close(got, expected)
        assert (got.requires_grad, ws.requires_grad) == (expected.requires_grad, w.requires_grad)
        if expected.requires_grad:
            expected.backward()
            got.backward()
            torch.testing.assert_close(ws.grad, w.grad)


def test_detaching_in_place_a_tensor_that_requires_no_grad_compiles():
    def fn(x):
        h = x * 2
        h.detach_()
        return h + 1

    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = squall.jit(fn)(x)
    assert not any("runs eagerly" in str(w.message) for w in caught)
    torch.testing.assert_close(got, x * 2 + 1)


def test_requires_grad_that_changes_nothing_compiles():
    def fn(x):
        x.requires_grad_(False)  # already False
        x.requires_grad = False
        return x * 2

    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = squall.jit(fn)(x)
    assert not any("runs eagerly" in str(w.message) for w in caught)
    torch.testing.assert_close(got, x * 2)
