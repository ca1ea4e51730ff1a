"""A list (or dict) the program reaches through an argument object — an attribute in `__dict__`,
a `__slots__` slot, a `SimpleNamespace`'s attribute — is the caller's own: appends land on it at
every call (never a traced tensor left in it), and one the program returns is that very list."""
from __future__ import annotations

import types
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall


class _Plain:
    def __init__(self, items):
        self.items = items


class _Slotted:
    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items


_HOLDERS = {
    "attribute": _Plain,
    "slot": _Slotted,
    "namespace": lambda items: types.SimpleNamespace(items=items, scale=2),
}


def _appends_and_returns(x, holder):
    holder.items.append(x + 1)
    return x * 2, holder.items


def _returns(x, holder):
    return x * len(holder.items), holder.items


@pytest.mark.parametrize("make", _HOLDERS.values(), ids=_HOLDERS.keys())
@pytest.mark.parametrize("program", [_appends_and_returns, _returns])
def test_a_list_reached_through_an_argument_object_is_the_callers_own(make, program):
    jf = squall.jit(program)
    for step in range(3):
        x = torch.randn(2)
        ours, theirs = make([2, 3]), make([2, 3])  # (a SimpleNamespace holding a tensor is refused)
        out, expected = jf(x, ours), program(x, theirs)
        assert_close(out[0], expected[0])
        assert out[1] is ours.items  # as eager returns `theirs.items`
        assert expected[1] is theirs.items
        assert len(ours.items) == len(theirs.items)
        assert all(type(v) is type(w) for v, w in zip(ours.items, theirs.items))  # no proxy left in it
        assert_close(ours.items[2:], theirs.items[2:])


def test_a_namespace_argument_returned_is_the_callers_and_its_dict_writes_land():
    def program(x, ns):
        ns.cache["last"] = x + 1
        ns.inner.items.append(x * 3)
        return x * ns.scale, ns

    jf = squall.jit(program)
    for step in range(3):
        x = torch.randn(2)
        ns = types.SimpleNamespace(scale=2, cache={}, inner=types.SimpleNamespace(items=[]))
        out, same = jf(x, ns)
        assert same is ns
        assert_close(out, x * 2)
        assert_close(ns.cache["last"], x + 1)
        assert len(ns.inner.items) == 1
        assert_close(ns.inner.items[0], x * 3)
    assert jf.cache_info().misses == 1


def test_setting_a_namespace_argument_attribute_runs_eagerly_with_a_warning():
    def program(x, ns):
        ns.seen = x.sum()
        return x * 2

    ns = types.SimpleNamespace(scale=2)
    with pytest.warns(squall.SquallWarning, match="sets or deletes attributes of argument 1, a SimpleNamespace"):
        out = squall.jit(program)(torch.ones(3), ns)
    assert_close(out, torch.full((3,), 2.0))
    assert_close(ns.seen, torch.tensor(3.0))  # eager's write, with a real tensor
