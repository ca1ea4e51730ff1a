"""Output structures: a compiled function returns what eager returns, type, fields and fresh objects included."""
from __future__ import annotations

import dataclasses
from collections import OrderedDict, namedtuple
from typing import NamedTuple

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.frontend.outputs import OutputError


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


@dataclasses.dataclass
class Result:
    value: torch.Tensor
    label: str
    extras: list


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    value: torch.Tensor
    scale: float


@dataclasses.dataclass
class DictOutput(OrderedDict):
    """A ModelOutput-like dataclass that is also a dict, not registered with pytree."""

    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is not None:
                self[f.name] = getattr(self, f.name)


class Layer:
    def __init__(self, keys, values):
        self.keys, self.values = keys, values
        self.dtype = keys.dtype


class Cache:
    """A KV-cache-like object: tensors as attributes of objects in a list attribute."""

    def __init__(self):
        self.layers = []
        self.offloading = False

    def update(self, k, v):
        self.layers.append(Layer(k, v))


def _same_structure(actual, expected):
    assert type(actual) is type(expected)
    if isinstance(expected, torch.Tensor):
        assert_close(actual, expected)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same_structure(a, e)
    elif isinstance(expected, dict):
        assert list(actual.keys()) == list(expected.keys())
        for k in expected:
            _same_structure(actual[k], expected[k])
    if hasattr(expected, "__dict__") and not isinstance(expected, torch.Tensor):
        assert vars(actual).keys() == vars(expected).keys()
        for k in vars(expected):
            _same_structure(vars(actual)[k], vars(expected)[k])


def _check(fn, *args):
    expected = fn(*args)
    jitted = squall.jit(fn)
    first, second = jitted(*args), jitted(*args)
    _same_structure(first, expected)
    _same_structure(second, expected)
    return first, second


def test_named_tuples_come_back_as_their_type():
    first, _ = _check(lambda x: Pair(x + 1, x * 2), torch.randn(3))
    assert first.first is first[0]
    point = namedtuple("Point", "a b")
    first, _ = _check(lambda x: point(x.sin(), 3), torch.randn(3))
    assert first.b == 3


def test_dataclass_is_rebuilt_with_real_tensors_at_every_call():
    first, second = _check(lambda x: Result(x.exp(), "exp", [x + 1, 2]), torch.randn(4))
    assert first is not second and first.extras is not second.extras
    assert type(first.value) is torch.Tensor


def test_frozen_slotted_dataclass():
    first, second = _check(lambda x: Frozen(x * 3, 3.0), torch.randn(2, 2))
    assert first is not second
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.scale = 1.0


def test_unregistered_dict_dataclass_keeps_its_type_and_keys():
    first, _ = _check(lambda x: DictOutput(logits=x @ x.T, hidden=None), torch.randn(3, 2))
    assert list(first.keys()) == ["logits"] and first.hidden is None
    assert_close(first["logits"], first.logits)


def test_cache_object_comes_back_with_tensors_not_proxies():
    def f(x):
        cache = Cache()
        for i in range(2):
            cache.update(x * i, x + i)
        return x.sum(), cache

    (_, first), (_, second) = _check(f, torch.randn(2, 3))
    assert first is not second and first.layers is not second.layers
    for layer in first.layers:
        assert type(layer.keys) is torch.Tensor and type(layer.values) is torch.Tensor
        assert layer.dtype is torch.float32


def test_a_cache_passed_in_is_updated_in_place_and_returned_as_itself():
    """As a decoder's KV cache is at each generation step: the layers in its list are extended
    with this call's tensors, and the cache given is the cache returned."""

    def step(x, cache):
        for layer in cache.layers:
            layer.keys = torch.cat([layer.keys, x], dim=0)
        return cache.layers[0].keys.sum(), cache

    def fresh():
        cache = Cache()
        cache.update(torch.ones(1, 3), torch.ones(1, 3))
        cache.update(torch.zeros(1, 3), torch.zeros(1, 3))
        return cache

    jitted = squall.jit(step)
    expected_cache, actual_cache = fresh(), fresh()
    for i in range(3):
        x = torch.full((1, 3), float(i))
        total, returned = jitted(x, actual_cache)
        expected_total, _ = step(x, expected_cache)
        assert returned is actual_cache
        assert_close(total, expected_total)
        for a, e in zip(actual_cache.layers, expected_cache.layers):
            assert type(a.keys) is torch.Tensor
            assert_close(a.keys, e.keys)


def test_gradients_flow_through_tensors_inside_objects():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        cache = Cache()
        cache.update(x * w, x.exp())
        return cache

    x = torch.randn(3)
    out = squall.jit(f)(x)
    (out.layers[0].keys * out.layers[0].values).sum().backward()
    expected = torch.autograd.grad((f(x).layers[0].keys * f(x).layers[0].values).sum(), w)[0]
    assert_close(w.grad, expected)


def test_a_tensor_in_a_closure_is_an_error_naming_its_place():
    def f(x):
        y = x + 1
        return {"fn": lambda: y}

    with pytest.raises(OutputError, match=r"output\['fn'\].*function"):
        squall.jit(f)(torch.randn(2))


def test_a_tensor_in_a_generator_is_an_error():
    def f(x):
        return x, (t for t in [x * 2])

    with pytest.raises(OutputError, match=r"output\[1\]"):
        squall.jit(f)(torch.randn(2))


def test_an_object_that_refers_to_itself_is_an_error():
    def f(x):
        cache = Cache()
        cache.update(x + 1, x)
        cache.layers[0].owner = cache
        return cache

    with pytest.raises(OutputError, match="refers back to itself"):
        squall.jit(f)(torch.randn(2))


def test_objects_without_tensors_are_returned_as_they_are():
    marker = object()
    out = squall.jit(lambda x: (x + 1, marker))(torch.randn(2))
    assert out[1] is marker


def test_a_torch_size_comes_back_as_a_torch_size():
    x = torch.randn(2, 3)
    for fn in (lambda x: x.shape, lambda x: (x.size(), x + 1), lambda x: {"shape": x.shape, "y": x * 2}):
        out, expected = squall.jit(fn)(x), fn(x)
        flat = [out] if isinstance(out, torch.Size) else list(out.values() if isinstance(out, dict) else out)
        sizes = [v for v in flat if isinstance(v, tuple)]
        assert sizes and all(type(v) is torch.Size for v in sizes), out
        assert str(out) == str(expected)


def test_new_with_a_torch_size_makes_a_tensor_of_that_shape():
    x = torch.randn(2, 3)
    for fn in (lambda x: x.new(x.shape), lambda x: x.new(torch.Size([4, 5])).fill_(1.0) + 0):
        out = squall.jit(fn)(x)
        assert out.shape == fn(x).shape
