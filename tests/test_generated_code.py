"""Generated-code hygiene: no object's own repr and no user or plugin text becomes source.

A constant reaches generated code only as a literal of an exact built-in type or as a name
squall generated, bound in the generated function's globals. The hostile values below carry
a `__repr__`/`__str__` that is a Python expression recording that it ran: if any of it were
pasted into source and executed, `RAN` would not be empty.
"""
from __future__ import annotations

import ast
import enum

import pytest
import torch
from torch.testing import assert_close

import squall

RAN: list[str] = []
# an expression that, if it were ever executed as code, would record itself in RAN
_PAYLOAD = f"__import__('sys').modules[{__name__!r}].RAN.append('executed')"


class _Hostile:
    def __repr__(self) -> str:
        return _PAYLOAD

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return _PAYLOAD


class HostileInt(_Hostile, int):
    pass


class HostileFloat(_Hostile, float):
    pass


class HostileStr(_Hostile, str):
    pass


class HostileObject(_Hostile):
    """A hashable non-scalar constant that a program passes through."""


class Dim(enum.IntEnum):
    rows = 0
    cols = 1


class Key(str, enum.Enum):
    weight = "w"


@pytest.fixture(autouse=True)
def nothing_ran():
    RAN.clear()
    yield
    assert RAN == [], "text from an object's repr was executed as generated code"


def _sources(jf) -> str:
    return squall.last_traces(jf).source + "\n" + "\n".join(str(t) for t in squall.last_traces(jf))


def test_hostile_scalar_subclasses_become_plain_values():
    def f(x, y, dim, scale, mode):
        return torch.div(x.sum(dim) * scale, y.sum(dim) + 1, rounding_mode=mode)

    x, y = torch.randn(3, 4), torch.rand(3, 4)
    args = (x, y, HostileInt(1), HostileFloat(2.5), HostileStr("floor"))
    jf = squall.jit(f)
    assert_close(jf(*args), f(*args))
    source = _sources(jf)
    assert "RAN" not in source and "__import__" not in source
    # printed as the plain values they stand for
    assert "2.5" in squall.last_traces(jf).source and "'floor'" in squall.last_traces(jf).source


def test_hostile_constants_and_keys_are_referenced_by_name_and_returned_as_themselves():
    token = HostileObject()
    key = HostileStr("k")

    def f(x, table):
        return {key: table[key] * 2, "token": token, "scale": HostileFloat(0.5)}

    x = torch.randn(2)
    jf = squall.jit(f)
    out = jf(x, {key: x})
    expected = f(x, {key: x})
    assert_close(out[key], expected[key])
    assert out["token"] is token
    assert type(out["scale"]) is HostileFloat and out["scale"] == 0.5
    assert type(next(iter(out))) is HostileStr
    assert "__import__" not in _sources(jf)


def test_hostile_type_names_are_sanitized_into_identifiers():
    evil = type(f"x); {_PAYLOAD}; (", (), {"__repr__": lambda self: _PAYLOAD})()

    def f(x):
        return x + 1, evil

    jf = squall.jit(f)
    out, same = jf(torch.ones(2))
    assert same is evil
    assert_close(out, torch.full((2,), 2.0))
    assert "__import__(" not in squall.last_traces(jf).source


def test_names_that_python_folds_to_the_same_identifier_stay_distinct():
    # Python reads a fullwidth "ｔｏｒｃｈ" in source as `torch`: a name built from it must not
    # alias another input or a global of the generated code
    def f(table):
        return table["ｔｏｒｃｈ"] * 10 + table["torch"]

    table = {"ｔｏｒｃｈ": torch.ones(2), "torch": torch.full((2,), 3.0)}
    jf = squall.jit(f)
    assert_close(jf(table), f(table))
    tree = ast.parse(squall.last_traces(jf).generated.source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    assert all(name.isascii() for name in names), names


def test_keyword_names_that_are_not_identifiers_are_passed_as_a_dict():
    from squall.trace import ValuePrinter  # noqa: PLC0415 - the unit under test

    class Call:  # the two things ValuePrinter.call reads
        def shortest_arguments(self):
            return (), {"ok": 1, f"x=1); {_PAYLOAD}; f(y": 2, "class": 3}

    text = ValuePrinter().call("g", Call())  # type: ignore[arg-type]
    assert text.startswith("g(ok=1, **{")
    got = {}
    eval(text, {"g": lambda **kw: got.update(kw)})  # noqa: S307 - the generated call itself
    assert got == {"ok": 1, f"x=1); {_PAYLOAD}; f(y": 2, "class": 3}


def test_intenum_dim_and_str_enum_dict_key_match_eager():
    def f(x, table, dim):
        return {Key.weight: table[Key.weight].sum(dim) + x.sum(dim)}

    x = torch.randn(3, 4)
    table = {Key.weight: torch.randn(3, 4)}
    jf = squall.jit(f)
    for dim in (Dim.rows, Dim.cols):
        out, expected = jf(x, table, dim), f(x, table, dim)
        assert list(out) == list(expected) and type(next(iter(out))) is Key
        assert_close(out[Key.weight], expected[Key.weight])
    assert "Dim" not in squall.last_traces(jf).source  # the dim is printed as its int


def test_cache_tells_apart_what_eager_tells_apart():
    def f(x, table):
        (k,) = table
        return x + 1, k

    jf = squall.jit(f)
    x = torch.zeros(1)
    _, k1 = jf(x, {"w": x})
    _, k2 = jf(x, {Key.weight: x})  # equal and hashing alike as keys, but another type
    assert type(k1) is str and type(k2) is Key

    def g(x, n):
        return x * n, n

    jg = squall.jit(g)
    _, n1 = jg(x, 2)
    _, n2 = jg(x, Dim.cols)  # IntEnum 1 is not the int 2, and not the int 1 either
    _, n3 = jg(x, 1)
    assert (type(n1), type(n2), type(n3)) == (int, Dim, int)
    assert jg.cache_info().misses == 3


class AlwaysEqual(str):
    """A str subclass whose __eq__ and __hash__ cannot tell values apart."""

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def test_a_subclass_that_claims_equality_does_not_share_a_cache_entry():
    def f(x, mode):
        return torch.div(x, 3.0, rounding_mode=mode)

    jf = squall.jit(f)
    x = torch.tensor([-5.0, 5.0])
    assert_close(jf(x, AlwaysEqual("floor")), f(x, "floor"))
    assert_close(jf(x, AlwaysEqual("trunc")), f(x, "trunc"))
    assert jf.cache_info().misses == 2

