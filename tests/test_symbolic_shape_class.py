"""A symbolic shape is a torch.Size to the program, and its text is this call's.

Under dynamic shapes `x.shape` holds size symbols. It is a `SymShape`: `isinstance(s, torch.Size)`
holds, as in eager (code branches on it); `str`/`repr`/`format`/`hash` read this call's sizes,
guarded, so a program that keys a dict on `str(x.shape)` gets eager's keys at every length (it read
`(3, s0)`, one key for every length, before). Indexing, slicing, `+`, unpacking, `len`, `numel()`,
comparisons and passing the shape on to torch keep the symbols: one compile across lengths.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from squall.symbolic import ShapeEnv, source
from squall.symshape import SymShape, as_shape, shape_text

LENGTHS = [3, 5, 7, 5, 9]
MODES = pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic_dynamic"])


def _jit(fn, dynamic):
    return squall.jit(fn, dynamic=True) if dynamic else squall.jit(fn)


def _keyed_by_text(x):
    # a cache keyed by the shape's text (and by the shape itself): another key at each length
    cache: dict = {}
    for shape in (x.shape, x.size(), x.shape[1:]):
        cache.setdefault(str(shape), len(cache))
        cache.setdefault(shape, len(cache))
    return x * len(cache) + len(f"{x.shape}") + len(repr(x.shape)), str(x.shape), sorted(map(str, cache))


def _keyed_by_tuple_text(x):
    # a dict keyed by the text of the sizes as a tuple or list (`[3, s0]` at every length before)
    seen: dict = {}
    for key in (str(tuple(x.shape)), str(list(x.shape[1:])), repr(tuple(x.size())), f"{x.shape[1]!r}"):
        seen.setdefault(key, len(seen))
    return x * len(seen) + sum(len(k) for k in seen), sorted(seen)


def _shape_kept_symbolic(x):
    s = x.shape
    assert isinstance(s, torch.Size) and isinstance(x.size(), torch.Size) and isinstance(s[1:], torch.Size)
    assert isinstance(s + (1,), torch.Size) and isinstance((1,) + s, torch.Size)
    a, b = s
    y = x.view(s) + x.reshape(a, b) + x.new_zeros(s) + x.expand(*s) + x.view(s[:1] + (-1,))
    y = y + x.reshape(list(s)) + x.reshape(s.numel()).view(x.size())
    return y * len(s) + (s == (a, b)) + (s != torch.Size([1, 1])) + (s[-1] == b) + x.new_ones(s[1:] + (1,)).sum()


def _returns_shapes(x):
    return x.shape, x.size()[1:], (x * 2).shape + (4,), {"shape": [x.shape]}


@MODES
def test_text_and_hash_of_a_shape_are_eagers_at_every_length(dynamic):
    jfn = _jit(_keyed_by_text, dynamic)
    for n in LENGTHS:
        x = torch.randn(2, n)
        got, expected = jfn(x), _keyed_by_text(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]


@MODES
def test_text_of_sizes_in_a_tuple_or_list_is_eagers_at_every_length(dynamic):
    jfn = _jit(_keyed_by_tuple_text, dynamic)
    for n in LENGTHS:
        x = torch.randn(2, n)
        got, expected = jfn(x), _keyed_by_tuple_text(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1] == sorted({f"(2, {n})", f"[{n}]", f"{n}"})
    # the text read each length, guarded: the program is specialised on it, never a stale key
    assert squall.last_traces(jfn)[0].inputs[0].shape == (2, 9)


@MODES
def test_plain_use_of_a_shape_keeps_its_symbols(dynamic):
    jfn = _jit(_shape_kept_symbolic, dynamic)
    for n in LENGTHS:
        x = torch.randn(2, n)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)
            torch.testing.assert_close(jfn(x), _shape_kept_symbolic(x))
    # one compile across lengths under dynamic=True; automatic dynamic compiles static first
    assert jfn.cache_info().misses == (1 if dynamic else 2)
    trace = str(squall.last_traces(jfn)[0])
    assert "ltorch.view(x, (s0, s1))" in trace and "torch.Size([" not in trace


@MODES
def test_a_returned_shape_is_a_torch_size_of_the_calls_sizes(dynamic):
    jfn = _jit(_returns_shapes, dynamic)
    for n in LENGTHS:
        x = torch.randn(2, n)
        got, expected = jfn(x), _returns_shapes(x)
        assert got == expected
        assert [type(v) for v in got[:3]] == [torch.Size] * 3 and type(got[3]["shape"][0]) is torch.Size
    assert jfn.cache_info().misses == (1 if dynamic else 2)


def test_explain_prints_the_symbols():
    jfn = squall.jit(lambda x: x.view(x.shape[1:] + (-1,)) * isinstance(x.shape, torch.Size), dynamic=True)
    x = torch.randn(2, 5, 3)
    jfn(x)
    report = str(squall.explain(jfn, x))
    assert "cpu f32[s0, s1, s2]" in report and "Size" not in report
    assert "ltorch.view(x, (s1, s2, -1))" in str(squall.last_traces(jfn)[0])


def test_the_shape_class_reads_values_only_for_text_and_hash():
    env = ShapeEnv()
    s0, s1 = env.symbol(5, "x", 1), env.symbol(7, "x", 2)
    shape = as_shape((3, s0, s1))
    assert type(shape) is SymShape and isinstance(shape, torch.Size) and isinstance(shape, tuple)
    assert type(as_shape((3, 4))) is torch.Size
    # no value read: indexing, slicing, +, *, numel, len, unpacking, the shape text for messages
    assert shape[1] is s0 and type(shape[1:]) is SymShape and type(shape[:1]) is torch.Size
    assert type(shape + (2,)) is SymShape and type((2,) + shape) is SymShape and len(shape * 2) == 6
    assert source(shape.numel()) == "(3*s0*s1)" and len(shape) == 3
    assert shape_text(shape) == "torch.Size([3, 5, 7])"
    _, a, b = shape
    assert a is s0 and b is s1
    assert not env.specialised and not env.guards
    # comparisons decide on this call's values and guard the verdict, without specialising
    assert shape == (3, 5, 7) and shape != (3, 5, 8) and shape == torch.Size([3, 5, 7]) and shape != [3, 5, 7]
    assert not env.specialised
    # the program's text and hash: this call's sizes, read and guarded
    assert str(shape) == repr(shape) == f"{shape}" == "torch.Size([3, 5, 7])"
    assert f"{shape!s:>24}" == "   torch.Size([3, 5, 7])"
    assert hash(shape) == hash(torch.Size([3, 5, 7])) and {shape: 1}[torch.Size([3, 5, 7])] == 1
    assert env.specialised == {"s0", "s1"}


def test_shape_concatenation_refuses_what_torch_size_refuses():
    env = ShapeEnv()
    shape = as_shape((3, env.symbol(5, "x", 1)))
    with pytest.raises(TypeError):
        shape + [1]
    with pytest.raises(TypeError):
        [1] + shape
    with pytest.raises(TypeError):
        torch.Size([3, 5]) + [1]


def test_a_symbolic_size_is_an_int_to_isinstance_as_in_eager():
    """`isinstance(x.shape[1], int)` is True in eager; a program branching on it took the other
    branch, silently, once the size was symbolic."""

    def fn(x):
        n, m = x.shape[1], x.size(1) * 2
        return x * 2 if isinstance(n, int) and isinstance(m, int) else x * 3

    jitted = squall.jit(fn, dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(2, n)
        torch.testing.assert_close(jitted(x), fn(x))
    assert jitted.cache_info().misses == 1
