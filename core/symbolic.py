"""Symbolic sizes: a tensor dimension that stays a variable in the trace.

A `SymInt` stands for a size that changes from call to call (a sequence length, a batch, a
KV cache's length). It is an integer polynomial over the program's *size symbols* (`s0`,
`s1`: each read from an input tensor's `.shape` when the generated function starts), with
floor division and remainder as opaque terms, and it carries its value in the call being
traced, since squall compiles on a real call.

- Arithmetic (`s0 * 2`, `s0 + s1 - 1`, `n // 4`) gives another `SymInt` (or a plain int when
  the symbols cancel), so a shape computed from sizes prints as the expression it is:
  `view(t3, (2, s0, 4, 8))`, `# t5: "cpu f32[2, 2*s0]"`.
- A comparison the program or a meta function makes (`s0 == s1`, `s0 > 128`) is decided on
  the values of this call and recorded as a *shape guard* in the `ShapeEnv`, unless it holds
  for every value the symbols may take (`s0 > 0` and `2*s0 >= s0` need no guard). Size 0 is
  never symbolic. A tensor argument's symbol may be 1 (`ShapeEnv.ones`) until a comparison
  that only "2 or more" decides (`s0 != 1`, a broadcast or a squeeze asking) is made: that
  answers as for 2 or more and guards `s0 >= 2`, so a call of size 1 runs this program only
  where nothing in it depended on the size being 2 or more. The generated function checks the guards, all in
  one expression, before it runs anything.
- Where a concrete int is needed (`int(s)`, `range(s)`, an op that takes only constants,
  `torch.Size`), the value is read and guarded as `s == value`: the program is then
  specialised on it, correct for every call it accepts (`ShapeEnv.specialised` names the
  symbols this happened to, so the jitted function keys them by value from then on).
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from . import size_polynomials as polynomials
from .size_polynomials import Poly

__all__ = ["BelowPythonAPI", "SizeBelowPythonAPI", "SymInt", "ShapeEnv", "is_symbolic", "source", "symbols_of", "concrete_shape", "concrete_value", "slice_indices", "guarded_int", "guarded_residue", "same_shape", "same_size", "lone_symbol", "size_read"]


def size_read(input_name: str, dim: int | None, negated: bool = False) -> str:
    """The Python that reads a size symbol's value from where `ShapeEnv.symbols` says it is
    (`negated`: one of `ShapeEnv.negated`)."""
    return (f"-{input_name}" if negated else input_name) if dim is None else f"{input_name}.shape[{dim}]"


class ShapeEnv:
    """The size symbols of one trace and the shape guards it relies on.

    `symbols` maps a symbol's name to its value in the traced call and where it is read from
    (an input proxy's name and a dimension; dimension None: the input is the size itself, an int
    an argument object holds, `squall.frontend.argument_routes`); `aliases` are the other input
    dimensions that had the same value and share its symbol (each checked equal at call time);
    `guards` maps each relation's source to the truth it had.
    """

    def __init__(self):
        self.symbols: dict[str, tuple[int, str, int | None]] = {}
        self.aliases: list[tuple[str, int | None, str]] = []  # (input name, dim, symbol)
        self.guards: dict[str, bool] = {}
        self.specialised: set[str] = set()  # symbols whose exact value was read
        # symbols that may be 1 (no guard says 2 or more): see `symbol` and `SymInt._compare`
        self.ones: frozenset[str] = frozenset()
        # of those, the symbols whose value in the traced call is 1 (a KV cache one token long):
        # always in `ones`; a comparison that 1 and "2 or more" answer apart is answered for 1
        self.traced_at_one: frozenset[str] = frozenset()
        # symbols read as the negation of the int input they come from (an int argument made a
        # size whose value is -2 or less: `x[:, :n]` with n = -3 is `x[:, :-s0]`)
        self.negated: set[str] = set()
        self._by_value: dict[int, str] = {}

    def symbol(self, value: int, input_name: str, dim: int | None, *, share: bool = True, may_be_one: bool = False, negated: bool = False) -> SymInt:
        """The size symbol for dimension `dim` of the input `input_name` (None: the input itself,
        an int an argument object holds), whose value is `value` (>= 2, or 1 with `may_be_one`
        and not `share`: `traced_at_one`); inputs' dimensions of
        one value share one symbol (checked equal). With `share` False the dimension gets a
        symbol of its own, which no other takes: a relation the program relies on is then a
        shape guard, and an equal value by chance (a KV cache's length and its head size, at
        one step) is not.

        With `may_be_one` (a tensor argument's dimension) the symbol stands for a size of 1 or
        more until the trace relies on it being 2 or more (`SymInt._compare`), so a call of size
        1 can run this program where nothing in it depends on that; else 2 or more (0 and 1 are
        keyed apart).

        A symbol whose value is 1 stands for 1 or more from this call on: the trace answers
        every comparison as it holds at 1, guarded where 2 or more would answer otherwise, so
        the program serves the later sizes wherever nothing in it depended on this one being 1
        (a decoding step traced with a cache one token long serves the longer ones).

        With `negated` (an int input, `dim` None, not shared) the symbol is read as the negation
        of that input, whose value is then -`value`."""
        if value < 2 and not (value == 1 and may_be_one and not share):
            raise ValueError(f"squall: a size symbol of value {value} (sizes 0 and 1 are constants but for a tensor's own symbol that may be 1)")
        name = self._by_value.get(value) if share else None
        if name is None:
            name = f"s{len(self.symbols)}"
            if share:
                self._by_value[value] = name
            self.symbols[name] = (value, input_name, dim)
            if negated:
                self.negated.add(name)
            if may_be_one:
                self.ones = self.ones | {name}
            if value == 1:
                self.traced_at_one = self.traced_at_one | {name}
        else:
            self.aliases.append((input_name, dim, name))
            if not may_be_one and name in self.ones:
                self.at_least_two({name})  # a dimension keyed as 2 or more shares it
        return SymInt(((((("s", name),), 1),)), value, self)

    def size(self, name: str) -> SymInt:
        """The symbol `name` alone, as a size (with its value in the traced call)."""
        return SymInt(((((("s", name),), 1),)), self.symbols[name][0], self)

    def at_least_two(self, names: set[str]) -> None:
        """The trace relies on each of the symbols `names` being 2 or more: guarded so (a call of
        size 1 then misses this program), and decided so from here on. One traced at 1
        (`traced_at_one`) is guarded as 1 instead (the program then serves that size only) and
        stays among `ones`, since 1 is the value it has."""
        for name in sorted(names & self.traced_at_one):
            self.note(f"{name} == 1", True)
        for name in sorted((names & self.ones) - self.traced_at_one):
            self.note(f"{name} >= 2", True)
        self.ones = self.ones - (names - self.traced_at_one)

    def note(self, text: str, holds: bool) -> None:
        """Record the shape relation `text` (Python over the size symbols) and its truth."""
        if text not in self.guards:
            self.guards[text] = holds

    def check_source(self) -> str:
        """One Python expression that is true where every guard holds as it did when traced
        (the aliases included); "" where there is nothing to check."""
        parts = [f"{size_read(name, dim)} == {symbol}" for name, dim, symbol in self.aliases]
        parts += [f"({text})" if holds else f"not ({text})" for text, holds in self.guards.items()]
        return " and ".join(parts)

    def describe(self) -> list[str]:
        """The guards as a reader sees them: `s0 == s1 + 1`, `not (s0 > 128)`."""
        return [f"{size_read(name, dim)} == {symbol}" for name, dim, symbol in self.aliases] + [
            text if holds else f"not ({text})" for text, holds in self.guards.items()
        ]


class BelowPythonAPI(RuntimeError):
    """A torch call below torch's Python API (from C++, which squall's tracing does not see) reached
    a traced tensor: squall cannot trace the program, and the call runs eagerly (squall.runtime)."""


class SizeBelowPythonAPI(BelowPythonAPI, AttributeError):
    """torch's C++ read a symbolic size's `node` (torch.vmap's batch size): it has none. Also an
    AttributeError, so that `hasattr(n, "node")` stays False for Python code that asks."""


class SymbolicInt(int, torch.SymInt):
    """What a size known only at run time answers to `isinstance`: an int, as the size it stands
    for is in eager (`isinstance(x.shape[0], int)` branches as eager does), and a torch.SymInt,
    which torch's argument parser takes where a size goes without reading its value. Never
    instantiated; `type(n)` is SymInt."""

    __slots__ = ()


class SymInt:
    """A size known only at run time: a polynomial over size symbols, with its traced value."""

    __slots__ = ("poly", "value", "env")

    @property
    def __class__(self):
        # torch's argument parser takes a torch.SymInt where a size or a number goes without
        # reading its value (an int-like object it probes with __index__, which would guard it),
        # and only torch.SymInt lets a size first in varargs (`torch.ones(n, 4)`) parse; the
        # tracing mode then receives the size itself; `isinstance(n, int)` is True, as in eager.
        # `type(n)` is still SymInt.
        return SymbolicInt

    @property
    def node(self):
        # what torch's C++ reads off a torch.SymInt it is handed (torch.vmap's batch size): squall's
        # size has no SymNode, and what C++ does with it is not traced: the call runs eagerly
        raise SizeBelowPythonAPI(f"squall: symbolic size {polynomials.poly_text(self.poly)} reached torch below its Python API, where squall cannot trace it")

    def __init__(self, poly: Poly, value: int, env: ShapeEnv):
        self.poly = poly
        self.value = value
        self.env = env

    # --- building new sizes -------------------------------------------------------------------
    def _new(self, poly: Poly, value: int) -> int | SymInt:
        return _sized(poly, value, self.env)

    def _operand(self, other: Any) -> tuple[Poly, int] | None:
        if type(other) is SymInt:
            return other.poly, other.value
        if type(other) is int or type(other) is bool:
            return polynomials.constant(int(other)), int(other)
        if issubclass(type(other), int):  # an IntEnum: its plain value (not a run-time number, whose
            # __class__ says int: it returns NotImplemented here and computes in its own operator)
            return polynomials.constant(int.__int__(other)), int.__int__(other)
        return None

    def __add__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.add, self, other)
        return self._new(polynomials.add(self.poly, o[0]), self.value + o[1])

    def __radd__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.add, other, self)
        return self._new(polynomials.add(self.poly, o[0]), self.value + o[1])

    def __sub__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.sub, self, other)
        return self._new(polynomials.add(self.poly, o[0], -1), self.value - o[1])

    def __rsub__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.sub, other, self)
        return self._new(polynomials.add(o[0], self.poly, -1), o[1] - self.value)

    def __mul__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.mul, self, other)
        return self._new(polynomials.mul(self.poly, o[0]), self.value * o[1])

    def __rmul__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.mul, other, self)
        return self._new(polynomials.mul(self.poly, o[0]), self.value * o[1])

    def __neg__(self):
        return self._new(polynomials.mul(self.poly, polynomials.constant(-1)), -self.value)

    def __pos__(self):
        return self

    def __abs__(self):
        return self if self >= 0 else -self

    def __pow__(self, other):
        if type(other) is int and other >= 0:
            out: int | SymInt = 1
            for _ in range(other):
                out = out * self
            return out
        return int(self) ** other

    def __rpow__(self, other):
        return _with_value(operator.pow, other, self)

    def __floordiv__(self, other):
        o = self._operand(other)
        if o is None:
            return int(self) // other
        return _divide(self.poly, self.value, o[0], o[1], self.env, "//")

    def __rfloordiv__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.floordiv, other, self)
        return _divide(o[0], o[1], self.poly, self.value, self.env, "//")

    def __mod__(self, other):
        o = self._operand(other)
        if o is None:
            return int(self) % other
        return _divide(self.poly, self.value, o[0], o[1], self.env, "%")

    def __rmod__(self, other):
        o = self._operand(other)
        if o is None:
            return _with_value(operator.mod, other, self)
        return _divide(o[0], o[1], self.poly, self.value, self.env, "%")

    # shifts by a constant stay sizes (n >> k is n // 2**k, floored as Python floors); the bitwise
    # operators read the value
    def __rshift__(self, other):
        if type(other) is int and other >= 0:
            return self // (1 << other)
        return _with_value(operator.rshift, self, other)

    def __lshift__(self, other):
        if type(other) is int and other >= 0:
            return self * (1 << other)
        return _with_value(operator.lshift, self, other)

    def __rrshift__(self, other):
        return _with_value(operator.rshift, other, self)

    def __rlshift__(self, other):
        return _with_value(operator.lshift, other, self)

    def __and__(self, other):
        return _with_value(operator.and_, self, other)

    def __rand__(self, other):
        return _with_value(operator.and_, other, self)

    def __or__(self, other):
        return _with_value(operator.or_, self, other)

    def __ror__(self, other):
        return _with_value(operator.or_, other, self)

    def __xor__(self, other):
        return _with_value(operator.xor, self, other)

    def __rxor__(self, other):
        return _with_value(operator.xor, other, self)

    def __invert__(self):
        return -self - 1

    # an integer rounds, floors, ceils and truncates to itself
    def __round__(self, ndigits=None):
        return self if ndigits is None or ndigits >= 0 else round(int(self), ndigits)

    def __trunc__(self):
        return self

    __floor__ = __ceil__ = __trunc__

    def bit_length(self) -> int:
        return int(self).bit_length()

    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __truediv__(self, other):
        return int(self) / other

    def __rtruediv__(self, other):
        return other / int(self)

    # --- comparisons: decided on this call's values, recorded as shape guards ---------------------
    def _compare(self, other: Any, op: str) -> bool:
        if type(other) is SymInt and other.poly == self.poly:
            return polynomials.COMPARE[op](0, 0)  # the same size (shape checks compare a dim with itself): no guard
        o = self._operand(other)
        if o is None:
            return polynomials.COMPARE[op](int(self), other)
        ones = self.env.ones
        decided = polynomials.decided_between(self.poly, o[0], op, ones)
        if decided is not None:
            return decided
        if ones and not (self.env.traced_at_one and (symbols_of(self) | symbols_of(other)) & self.env.traced_at_one):
            # undecided where a symbol may be 1, decided where it is 2 or more (`s0 == 1`, a
            # broadcast or a squeeze asking): answered so, and the symbols guarded as 2 or more
            # (not where a symbol is 1 in this call: answered by the values below, guarded)
            decided = polynomials.decided_between(self.poly, o[0], op)
            if decided is not None:
                self.env.at_least_two(symbols_of(self) | symbols_of(other))
                return decided
        holds = polynomials.COMPARE[op](self.value, o[1])
        self.env.note(f"{source(self)} {op} {polynomials.poly_text(o[0])}", holds)
        return holds

    def __eq__(self, other):
        if self._operand(other) is None and not isinstance(other, float):
            return NotImplemented
        return self._compare(other, "==")

    def __ne__(self, other):
        if self._operand(other) is None and not isinstance(other, float):
            return NotImplemented
        return self._compare(other, "!=")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __bool__(self):
        return self._compare(0, "!=")

    def __hash__(self):
        # equal to an int of its value, so it hashes as that int (`n in {6, 7}`, a dict keyed by
        # sizes): the lookup decides on the value, so the value is guarded
        return hash(int(self))

    # --- the concrete value: read and guarded ----------------------------------------------------
    def __index__(self) -> int:
        self.env.note(f"{source(self)} == {self.value}", True)
        self.env.specialised.update(symbols_of(self))
        return self.value

    __int__ = __index__

    def __float__(self) -> float:
        return float(int(self))

    def __repr__(self) -> str:
        # repr(n), f"{n!r}", and the text of any container holding it (`str(list(x.shape))`): the
        # program sees digits, as eager's int gives, read and guarded as str(n) is; squall's own
        # printers (traces, generated code, keys, messages) print the expression with `source`
        return str(int(self))

    def __str__(self) -> str:
        # str(n), f"{n}": the program sees digits, as eager's int gives (a name built from a
        # size, a key); traces and messages print sizes with `source`, never str or repr
        return str(int(self))

    def __format__(self, spec: str) -> str:
        return format(int(self), spec)


def _with_value(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """`op(a, b)` where one operand is a SymInt and the other no size (a float, `x.shape[1] * 0.5`):
    computed with the size's value, read and guarded, so a call at another size recompiles rather
    than reuse this result. A run-time number (whose class says int or float) or any other type
    answers NotImplemented, so its own operator computes."""
    other = b if type(a) is SymInt else a
    if type(other) not in (float, complex, int, bool):
        return NotImplemented
    return op(int(a) if type(a) is SymInt else a, int(b) if type(b) is SymInt else b)


def _divide(a: Poly, av: int, b: Poly, bv: int, env: ShapeEnv, op: str) -> int | SymInt:
    """`a // b` or `a % b`: exact where b is a constant dividing every coefficient of a, an
    opaque term otherwise."""
    quotient = polynomials.exact_quotient(a, b)
    if quotient is not None:
        return 0 if op == "%" else _sized(quotient, av // bv, env)
    if op == "//" and len(b) == 1 and b[0][0] and b[0][1] > 0:
        # (4*s0*s1 + 2*s0) // (8*s0) is (2*s1 + 1) // 4: the common symbols cancel (sizes are positive)
        reduced = polynomials.exact_quotient(a, polynomials.make_poly({b[0][0]: 1}))
        if reduced is not None:
            a, b = reduced, polynomials.constant(b[0][1])
    value = av // bv if op == "//" else av % bv
    return _sized(polynomials.make_poly({((op, a, b),): 1}), value, env)


def _sized(poly: Poly, value: int, env: ShapeEnv) -> int | SymInt:
    c = polynomials.as_constant(poly)
    return c if c is not None else SymInt(poly, value, env)


def is_symbolic(x: Any) -> bool:
    """Whether `x` is a symbolic size, or a shape (a sequence) holding one."""
    if type(x) is SymInt:
        return True
    return isinstance(x, (tuple, list)) and any(type(v) is SymInt for v in x)


def source(x: int | SymInt) -> str:
    """Python source for a size: an int's digits, a SymInt's expression over the symbols
    (parenthesized where it has more than one term)."""
    if type(x) is not SymInt:
        return str(int(x))
    text = polynomials.poly_text(x.poly)
    return text if len(x.poly) == 1 and x.poly[0][1] == 1 else f"({text})"


def symbols_of(x: Any) -> set[str]:
    """The names of the size symbols `x` (a SymInt, or a shape) is computed from."""
    found: set[str] = set()

    def walk(p: Poly) -> None:
        for atoms, _ in p:
            for a in atoms:
                if a[0] == "s":
                    found.add(a[1])
                else:
                    walk(a[1])
                    walk(a[2])

    for v in (x if isinstance(x, (tuple, list)) else (x,)):
        if type(v) is SymInt:
            walk(v.poly)
    return found


def lone_symbol(n: Any) -> str | None:
    """The name of the size symbol `n` is, where it is one symbol alone (`s0`, not `2*s0`)."""
    if type(n) is not SymInt or len(n.poly) != 1:
        return None
    atoms, coefficient = n.poly[0]
    return atoms[0][1] if coefficient == 1 and len(atoms) == 1 and atoms[0][0] == "s" else None


def same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are the same for every value of their symbols (equal ints, or the same
    expression), decided without a guard: where they are, a broadcast or a reshape between them
    needs no answer about either being 1."""
    if type(a) is SymInt or type(b) is SymInt:
        return type(a) is type(b) and a.poly == b.poly
    return a == b


def same_shape(a: Any, b: Any) -> bool:
    """Whether two shapes are the same sizes for every value of their symbols: equal ints, the
    same expressions; decided without a guard (`tuple(a) == tuple(b)` compares a symbol with a
    constant, recording a guard on it, and tuples compare item by item whatever their lengths)."""
    if len(a) != len(b):
        return False
    return all(same_size(x, y) for x, y in zip(a, b))


def concrete_shape(shape: Any) -> tuple[int, ...]:
    """The shape's values in the call being traced, without guarding them (for example tensors
    and estimates, never for what the program computes)."""
    return tuple(v.value if type(v) is SymInt else v for v in shape)


def slice_indices(item: slice, length: int | SymInt) -> tuple:
    """`item.indices(length)` for a positive step, where the length and the bounds may be
    symbolic: Python's clamping, each comparison decided or guarded, never a read of a value."""
    step = 1 if item.step is None else item.step

    def clamp(bound, default):
        if bound is None:
            return default
        if type(bound) is not SymInt:
            bound = operator.index(bound)
        if bound < 0:
            bound = bound + length
            return 0 if bound < 0 else bound
        return length if bound > length else bound

    return clamp(item.start, 0), clamp(item.stop, length), step


def concrete_value(x: Any) -> Any:
    """`x` with each symbolic size in it (a SymInt, a slice bound) replaced by its value in
    the call being traced, unguarded: for running a traced call on this call's tensors."""
    t = type(x)
    if t is SymInt:
        return x.value
    if t is slice:
        return slice(concrete_value(x.start), concrete_value(x.stop), concrete_value(x.step))
    if (t is tuple or t is list) and any(type(v) in (SymInt, slice, tuple, list) for v in x):
        return t(concrete_value(v) for v in x)
    return x


def guarded_int(x: Any) -> Any:
    """`x`, or a symbolic size's value, read and guarded (the program is specialised on it): for
    an op whose meta needs the number itself (how many pieces a split makes, a convolution's
    padding)."""
    return operator.index(x) if type(x) is SymInt else x


def guarded_residue(x: Any) -> Any:
    """`x`, or a symbolic size's value, guarded as the relation `x == value` (a shape guard)
    rather than by keying its symbols by value: for a number that takes a few values whatever
    the sizes (a remainder: the rows a strided window leaves over), which `guarded_int` would
    make compile a variant for every size instead of one per value."""
    if type(x) is not SymInt:
        return x
    value = x.value
    if not x == value:  # (the comparison records the guard)
        raise AssertionError(f"squall: {source(x)} is not its own value {value}")
    return value
