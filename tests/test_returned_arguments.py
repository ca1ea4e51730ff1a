"""A program that returns an argument returns the caller's own object, as eager does
(`f(d) is d`): a tuple, a namedtuple, torch's structseq, an OrderedDict, a defaultdict, a deque,
a list, a dict, a tensor. They came back as rebuilt copies (equal values, another object) for
tuples and the pytree containers, and for a tensor that needs gradients."""
from __future__ import annotations

import collections
import warnings

import pytest
import torch

import squall

Pair = collections.namedtuple("Pair", "left right")

CONTAINERS = {
    "tuple": lambda a, b: (a, b),
    "list": lambda a, b: [a, b],
    "dict": lambda a, b: {"left": a, "right": b},
    "namedtuple": lambda a, b: Pair(a, b),
    "structseq": lambda a, b: torch.max(torch.stack([a, b]), 0),
    "OrderedDict": lambda a, b: collections.OrderedDict(left=a, right=b),
    "defaultdict": lambda a, b: collections.defaultdict(list, left=a, right=b),
    "deque": lambda a, b: collections.deque([a, b], maxlen=4),
}


def _first(c):
    return c["left"] if isinstance(c, dict) else c[0]


def _returns_it(c):
    return c


def _returns_it_in_a_tuple(c):
    return c, _first(c) * 2


def _returns_it_in_a_dict(c):
    return {"arg": c, "twice": [_first(c) * 2]}


def _returns_it_in_a_namedtuple(c):
    return Pair(c, _first(c) * 2)


def _returns_it_in_an_ordered_dict(c):
    return collections.OrderedDict(arg=c, twice=_first(c) * 2)


@pytest.mark.parametrize("fn", [_returns_it, _returns_it_in_a_tuple, _returns_it_in_a_dict, _returns_it_in_a_namedtuple, _returns_it_in_an_ordered_dict], ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", sorted(CONTAINERS))
def test_a_returned_container_argument_is_the_caller_s_object(kind, fn):
    make = CONTAINERS[kind]
    jitted = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # none of these runs eagerly
        for value in (1.0, 5.0, -2.0):
            args = make(torch.full((3,), value), torch.arange(3.0))
            got, expected = jitted(args), fn(args)
            torch.testing.assert_close(got, expected)
            if fn is _returns_it:
                assert got is args
            elif fn in (_returns_it_in_a_tuple, _returns_it_in_a_namedtuple):
                assert type(got) is type(expected) and got[0] is args
            else:
                assert type(got) is type(expected) and got["arg"] is args
    assert jitted.cache_info().misses == 1


def test_a_returned_namedtuple_of_numbers_is_the_caller_s_on_a_later_call():
    # keyed by its values: the second call's equal namedtuple must come back, not the first's
    jitted = squall.jit(lambda p, x: (p, x * p.left))
    for _ in range(2):
        p = Pair(2, 3)
        out = jitted(p, torch.ones(2))
        assert out[0] is p
        torch.testing.assert_close(out[1], torch.full((2,), 2.0))
    assert jitted.cache_info().misses == 1


def test_a_container_the_program_makes_anew_is_not_the_argument():
    # as in eager: an equal namedtuple built inside the program is another object
    def fn(p):
        return Pair(p.left, p.right)

    p = Pair(torch.ones(2), torch.zeros(2))
    got = squall.jit(fn)(p)
    assert got is not p and type(got) is Pair
    torch.testing.assert_close(got, fn(p))


def test_a_returned_input_tensor_that_needs_gradients_is_the_caller_s_tensor():
    def fn(x, w):
        return x, (x * w).sum()

    jitted = squall.jit(fn)
    for value in (1.0, 3.0):
        x, w = torch.full((3,), value, requires_grad=True), torch.arange(3.0, requires_grad=True)
        x_eager, w_eager = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        got, expected = jitted(x, w), fn(x_eager, w_eager)
        assert got[0] is x and expected[0] is x_eager
        (got[0].sum() + got[1]).backward()
        (expected[0].sum() + expected[1]).backward()
        torch.testing.assert_close((x.grad, w.grad), (x_eager.grad, w_eager.grad))


def test_a_returned_tuple_argument_needing_gradients_is_the_caller_s():
    def fn(pair):
        return pair, (pair[0] * pair[1]).sum()

    leaves = (torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True))
    got = squall.jit(fn)(leaves)
    assert got[0] is leaves
    got[1].backward()
    torch.testing.assert_close(leaves[0].grad, leaves[1].detach())


def test_a_returned_argument_with_symbolic_sizes_is_the_caller_s():
    jitted = squall.jit(lambda d: (d, d["x"].sum(-1)), dynamic=True)
    for n in (3, 5, 8):
        d = collections.OrderedDict(x=torch.randn(2, n))
        got = jitted(d)
        assert got[0] is d
        torch.testing.assert_close(got[1], d["x"].sum(-1))
    assert jitted.cache_info().misses == 1
