"""torch.Tensor's methods called unbound with a traced tensor (`torch.Tensor.cfloat(x)`), as op_db and some libraries call them:
a TensorProxy is a torch.Tensor, so torch's own methods take it, with nothing on torch.Tensor replaced."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall


def _no_opaque(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        return squall.jit(fn)(*args)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.Tensor.__radd__(x, 1.5),
        lambda x: torch.Tensor.__rmul__(x, 3),
        lambda x: torch.Tensor.cfloat(x),
        lambda x: torch.Tensor.cdouble(x),
        lambda x: torch.Tensor.add(x, x, alpha=2),
        lambda x: torch.Tensor.softmax(x, -1),
        lambda x: torch.Tensor.__eq__(x, 0.5),
    ],
    ids=["radd", "rmul", "cfloat", "cdouble", "add", "softmax", "eq"],
)
def test_unbound_method_with_a_proxy_matches_eager(fn):
    x = torch.randn(3, 4)
    assert_close(_no_opaque(fn, x), fn(x))


def test_unbound_in_place_method_writes_back():
    def f(x):
        x[0] = 7.0
        return torch.Tensor.mul_(x, 2)

    x, y = torch.randn(3), None
    y = x.clone()
    out = squall.jit(f)(x)
    assert_close(out, f(y))
    assert_close(x, y)


def test_method_of_a_captured_tensor_on_a_proxy_is_traced_not_opaque():
    scale = torch.tensor([1.0, 2.0, 3.0])
    x = torch.randn(3)
    assert_close(_no_opaque(lambda x: scale.mul(x) + torch.Tensor.sub(scale, x), x), scale.mul(x) + scale.sub(x))


def test_torch_tensor_is_its_own_again_after_tracing_even_when_it_fails():
    def broken(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        squall.jit(broken)(torch.randn(2))
    squall.jit(lambda x: torch.Tensor.add(x, 1))(torch.randn(2))
    assert "add" not in vars(torch.Tensor) and "__getitem__" not in vars(torch.Tensor)
    assert torch.Tensor.add is torch._C.TensorBase.add
    with pytest.raises(TypeError, match="doesn't apply to a 'str' object"):
        torch.Tensor.add("not a tensor", 1)


def _observable_tensor_type() -> tuple:
    a = torch.tensor([1.0])
    return (
        dict(vars(torch.Tensor)),
        torch.tensor([a, a]).tolist(),  # a 1-element tensor is no sequence: failed once tracing had filled sq_item
        torch.tensor([[a]]).shape,
        (a + 1).tolist(), (1 - a).tolist(), (a * a).tolist(), bool(a == 1.0), a[0].item(),
    )


def test_torch_tensor_behaves_as_before_after_a_compile():
    before = _observable_tensor_type()
    squall.jit(lambda x: x[0] + torch.Tensor.add(x, 1) * 2)(torch.randn(3))
    after = _observable_tensor_type()
    assert before[0].keys() == after[0].keys()
    assert all(after[0][k] is v for k, v in before[0].items())
    assert before[1:] == after[1:]


def test_a_slot_method_named_on_torch_tensor_with_a_proxy_traces():
    """`torch.Tensor.__getitem__` is a C type slot, which takes a proxy as it takes any tensor."""
    x = torch.randn(3, 4)
    assert_close(_no_opaque(lambda x: torch.Tensor.__getitem__(x, (0, slice(1, None))), x), x[0, 1:])


def test_metadata_methods_of_a_parameter_are_answered_not_run_opaque():
    """A module's parameter is real while traced; `w.size(1)` is answered from its proxy, with no opaque call."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 4)

        def forward(self, x):
            return self.lin(x) * self.lin.weight.size(1) + self.lin.weight.dim()

    module, x = Scaled(), torch.randn(2, 3)
    assert_close(_no_opaque(module, x), module(x))


_RADD, _GETITEM = torch.Tensor.__radd__, torch.Tensor.__getitem__  # taken before any tracing, as op_db holds them


def _closure_over(op):
    return lambda x, *args: op(x, *args)


@pytest.mark.parametrize(
    "name, args",
    [("__radd__", (1.5,)), ("__rmul__", (3,)), ("__getitem__", ((0, slice(1, None)),)), ("cfloat", ()), ("cdouble", ())],
)
def test_a_method_object_taken_before_tracing_traces_as_a_closure_variable(name, args):
    op = getattr(torch.Tensor, name)
    x = torch.randn(3, 4)
    assert_close(_no_opaque(_closure_over(op), x, *args), op(x, *args))


def test_a_method_object_taken_before_tracing_traces_as_a_global_a_default_or_the_function_itself():
    def f(x, cast=torch.Tensor.cfloat, *, scale=torch.Tensor.__rmul__):
        return cast(scale(_GETITEM(x, 0), 2)) + _RADD(x, 1)[0]

    x = torch.randn(3, 4)
    assert_close(_no_opaque(f, x), f(x))
    assert_close(_no_opaque(torch.Tensor.cdouble, x), x.cdouble())


def test_a_closure_variable_the_function_rebinds_keeps_its_own_cell():
    op = torch.Tensor.__radd__

    def f(x):
        nonlocal op
        out = torch.Tensor.__radd__(x, 1)
        op = torch.Tensor.add  # rebinds the caller's variable, as eager does
        return out

    # refused before anything ran twice: the eager call rebinds it, once
    with pytest.warns(squall.SquallWarning, match="assigns the closure variable 'op'"):
        squall.jit(f)(torch.randn(2))
    assert op is torch._C.TensorBase.add
    with pytest.raises(TypeError, match="doesn't apply to a 'str' object"):
        op("not a tensor", 1)  # torch's own method again, not a stand-in, after tracing
