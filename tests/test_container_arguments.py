"""Arguments in containers torch's pytree knows beyond list, tuple and dict: a namedtuple,
torch's structseq (what `torch.max(x, 0)` returns), an OrderedDict, a defaultdict, a deque.
Their tensors are inputs of the program, read at every call: they were constants of the trace,
so a second call with new values of the same shape silently got the first call's result."""
from __future__ import annotations

import collections
import warnings

import pytest
import torch

import squall

Pair = collections.namedtuple("Pair", "left right")

CONTAINERS = {
    "namedtuple": (lambda a, b: Pair(a, b), lambda c: c.left * c[1]),
    "structseq": (lambda a, b: torch.max(torch.stack([a, b]), 0), lambda c: c.values * c[1]),
    "OrderedDict": (lambda a, b: collections.OrderedDict(left=a, right=b), lambda c: c["left"] * c["right"]),
    "defaultdict": (lambda a, b: collections.defaultdict(list, left=a, right=b), lambda c: c["left"] * c["right"]),
    "deque": (lambda a, b: collections.deque([a, b], maxlen=4), lambda c: c[0] * c[1]),
}


@pytest.mark.parametrize("kind", sorted(CONTAINERS))
def test_a_container_argument_s_tensors_are_read_at_every_call(kind):
    make, fn = CONTAINERS[kind]
    jitted = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # none of these runs eagerly
        for value in (1.0, 5.0, -2.0):
            args = make(torch.full((3,), value), torch.arange(3.0))
            torch.testing.assert_close(jitted(args), fn(args))
    assert jitted.cache_info().misses == 1


@pytest.mark.parametrize("kind", sorted(CONTAINERS))
def test_a_container_argument_of_changing_length_compiles_at_most_twice(kind):
    make, fn = CONTAINERS[kind]
    jitted = squall.jit(fn)
    for n in (4, 6, 9, 13):
        args = make(torch.randn(2, n), torch.randn(2, n))
        torch.testing.assert_close(jitted(args), fn(args))
    assert jitted.cache_info().misses <= 2, jitted.cache_info()


def test_gradients_reach_tensors_in_a_namedtuple_argument():
    def fn(pair):
        return (pair.left.sin() * pair.right).sum()

    leaves = [torch.randn(4, requires_grad=True) for _ in range(2)]
    expected = torch.autograd.grad(fn(Pair(*leaves)), leaves)
    got = torch.autograd.grad(squall.jit(fn)(Pair(*leaves)), leaves)
    torch.testing.assert_close(got, expected)


def test_a_program_adding_to_an_ordered_dict_argument_runs_eagerly_as_eager_does():
    def fn(d):
        d["twice"] = d["x"] * 2
        return d["x"] + 1

    jitted = squall.jit(fn)
    given = collections.OrderedDict(x=torch.ones(3))
    with pytest.warns(squall.SquallWarning, match="writes into a OrderedDict argument"):
        torch.testing.assert_close(jitted(given), torch.full((3,), 2.0))
    torch.testing.assert_close(given["twice"], torch.full((3,), 2.0))  # the caller's dict got the item


def test_a_defaultdict_read_at_a_missing_key_inserts_into_the_caller_s_as_in_eager():
    def fn(d):
        return d["x"] * 2 + len(d["missing"])

    jitted = squall.jit(fn)
    given = collections.defaultdict(list, x=torch.ones(2))
    with pytest.warns(squall.SquallWarning, match="writes into a defaultdict argument"):
        torch.testing.assert_close(jitted(given), torch.full((2,), 2.0))
    assert given["missing"] == []
