"""Python attributes users set on tensors (`x.scale = 2.0`, a parameter's `lr_scale`, a buffer's
tag): a traced program reads them as eager does, guarded present or absent, and a program that
sets one on a tensor it takes or returns runs eagerly (squall does not replay it)."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall


def _scaled(x):
    return x * getattr(x, "scale", 1.0)


def _tagged(x):
    return x + 1 if hasattr(x, "tag") else x - 1


@pytest.mark.parametrize("program", [_scaled, _tagged], ids=["getattr_with_default", "hasattr"])
def test_an_argument_tensors_attribute_is_read_as_eager_reads_it_at_every_call(program):
    """Before, the proxy had no such attribute: getattr gave its default and hasattr False, silently."""
    jitted = squall.jit(program)
    for attributes in ({"scale": 2.0, "tag": "a"}, {"scale": 3.0, "tag": None}, {}, {"scale": 2.0}, {"tag": 1}):
        x, y = torch.ones(3), torch.ones(3)
        for t in (x, y):
            t.__dict__.update(attributes)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)  # followed in the trace, not run eagerly
            assert_close(jitted(x), program(y))


class _Tagged(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.lin.weight.lr_scale = 0.5
        self.register_buffer("counts", torch.ones(2))
        self.counts.offset = 3

    def forward(self, x):
        return self.lin(x) * getattr(self.lin.weight, "lr_scale", 1.0) + self.counts.offset + hasattr(self.lin.bias, "flag")


def test_a_parameters_and_a_buffers_attributes_are_guarded():
    """Before, a changed `weight.lr_scale` or `counts.offset` left the cached program's old value."""
    model = _Tagged()
    jitted = squall.jit(model)
    x = torch.ones(1, 2)

    def changes():
        yield
        model.lin.weight.lr_scale = 4.0
        yield
        model.counts.offset = 7
        yield
        model.lin.bias.flag = True
        yield
        del model.lin.bias.flag
        yield

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # compiled, not run eagerly
        for _ in changes():
            assert_close(jitted(x), model(x))
    assert jitted.cache_info().misses == 4  # each change compiled anew, but the last: back to an earlier variant


def test_an_attribute_holding_an_object_runs_the_call_eagerly():
    x = torch.ones(2)
    x.config = {"scale": 2.0}
    with pytest.warns(squall.SquallWarning, match=r"'config', a Python attribute set on a tensor it takes, which holds a dict"):
        got = squall.jit(lambda x: x * x.config["scale"])(x)
    assert_close(got, x * 2.0)


def test_setting_an_attribute_on_an_argument_or_a_result_runs_the_call_eagerly():
    """Before, `x.seen = True` stayed on the proxy (the caller's tensor never had it) and a
    result's attribute was missing from squall's result."""

    def marks_input(x):
        x.seen = True
        return x * 2

    def marks_result(x):
        y = x * 2
        y.note = "doubled"
        return y

    for program, pattern in ((marks_input, r"sets 'seen' on tensor x it takes"), (marks_result, r"returns a tensor carrying the Python attribute\(s\) 'note'")):
        x, y = torch.ones(2), torch.ones(2)
        with pytest.warns(squall.SquallWarning, match=pattern):
            got = squall.jit(program)(x)
        expected = program(y)
        assert_close(got, expected)
        assert x.__dict__ == y.__dict__ and got.__dict__ == expected.__dict__


def test_an_attribute_the_program_sets_on_its_own_intermediate_is_traced():
    def local(x):
        y = x * 2
        y.k = 3
        return y * y.k

    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        assert_close(squall.jit(local)(torch.ones(2)), torch.full((2,), 6.0))


def _bases(x):
    v = x[:2]
    w = x * 2
    return x + 1, v._base is x, w._base is None, w[:1].t()._base is w, x._base is None


def test_a_views_base_is_eagers():
    """Before, `x[:2]._base` of a traced tensor was None where eager's is `x`."""
    x = torch.randn(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        assert squall.jit(_bases)(x)[1:] == _bases(x)[1:] == (True, True, True, True)
    view = torch.randn(4, 3)[1:]  # its base is outside the program: the call runs eagerly
    with pytest.warns(squall.SquallWarning, match=r"reads the base of a view of tensor x, a view it takes"):
        assert squall.jit(_bases)(view)[1:] == _bases(view)[1:]


_GLOBAL_WEIGHT = torch.ones(3)


def _scaled_by_a_global(x):
    return x * _GLOBAL_WEIGHT * getattr(_GLOBAL_WEIGHT, "scale", 1.0)


def test_a_global_tensors_attribute_is_guarded():
    """An attribute of a tensor the program captured (a global, not an input) was read once, at
    trace time: changed, added or removed later, the first call's value stayed in the trace."""
    jitted = squall.jit(_scaled_by_a_global)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for scale in (None, 2.0, 3.0, None, 2.0):
            if scale is None:
                _GLOBAL_WEIGHT.__dict__.pop("scale", None)
            else:
                _GLOBAL_WEIGHT.scale = scale
            assert_close(jitted(torch.ones(3)), torch.full((3,), scale or 1.0))
    assert jitted.cache_info().misses == 3
