"""Integer polynomials over size symbols: what a symbolic size (`squall.symbolic.SymInt`) is.

A polynomial is a tuple of terms `(atoms, coefficient)`; an atom is ("s", name) for a size symbol,
or ("//", a, b) / ("%", a, b) for an opaque floor division or remainder of two polynomials. Here:
building them, adding and multiplying, their text as Python source over the symbols (the
generated code's and the guards'), exact division where it is one, and the bounds a
comparison may be decided on without a guard (a size symbol is 2 or more, or 1 or more where
it may be 1).
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["Poly", "make_poly", "constant", "add", "mul", "as_constant", "poly_text", "atom_text", "operand_text",
           "lower_bound", "upper_bound", "decided", "decided_between", "exact_quotient", "COMPARE"]

# A term's atoms: ("s", name) for a size symbol, ("//", a, b) or ("%", a, b) for an opaque
# floor division or remainder of two polynomials. A polynomial: ((atoms, coefficient), ...).
Poly = tuple


def atom_text(atom: tuple) -> str:
    if atom[0] == "s":
        return atom[1]
    return f"({operand_text(atom[1])} {atom[0]} {operand_text(atom[2])})"


def operand_text(p: Poly) -> str:
    # bare only where it is one symbol, one opaque term or a constant: a product as the right
    # operand of // or % would bind wrongly (`1 % s0*s1` is `(1 % s0) * s1`)
    text = poly_text(p)
    bare = not p or (len(p) == 1 and ((p[0][1] == 1 and len(p[0][0]) == 1) or p[0][0] == ()))
    return text if bare and not text.startswith("-") else f"({text})"


def make_poly(terms: dict) -> Poly:
    if len(terms) <= 1:  # a constant or one term (most sizes): nothing to order
        return tuple((m, c) for m, c in terms.items() if c)
    return tuple(sorted(((m, c) for m, c in terms.items() if c), key=lambda t: (len(t[0]), [atom_text(a) for a in t[0]])))


def constant(c: int) -> Poly:
    return (((), c),) if c else ()


def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    terms = dict(a)
    for m, c in b:
        terms[m] = terms.get(m, 0) + sign * c
    return make_poly(terms)


def mul(a: Poly, b: Poly) -> Poly:
    if len(b) == 1 and b[0][0] == ():  # by a constant (most products of sizes): the same terms, scaled
        c = b[0][1]
        return tuple((m, ca * c) for m, ca in a) if c else ()
    if len(a) == 1 and a[0][0] == ():
        return mul(b, a)
    terms: dict = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb, key=atom_text))
            terms[m] = terms.get(m, 0) + ca * cb
    return make_poly(terms)


def as_constant(p: Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and p[0][0] == ():
        return p[0][1]
    return None


def poly_text(p: Poly) -> str:
    """The polynomial as Python source over the size symbols, e.g. `2*s0*s1 + s0 - 3`."""
    if not p:
        return "0"
    out = []
    for i, (atoms, c) in enumerate(sorted(p, key=lambda t: (-len(t[0]), [atom_text(a) for a in t[0]]))):
        body = "*".join(atom_text(a) for a in atoms)
        magnitude = abs(c)
        text = body if magnitude == 1 and body else f"{magnitude}*{body}" if body else str(magnitude)
        if i == 0:
            out.append(f"-{text}" if c < 0 else text)
        else:
            out.append(f" - {text}" if c < 0 else f" + {text}")
    return "".join(out)


def atom_lower_bound(atom: tuple, ones: frozenset) -> int | None:
    if atom[0] == "s":
        return 1 if atom[1] in ones else 2  # size 0 is never symbolic; 1 only for the symbols in `ones`
    num_lb, den_lb = lower_bound(atom[1], ones), lower_bound(atom[2], ones)
    if num_lb is not None and num_lb >= 0 and den_lb is not None and den_lb > 0:
        return 0
    return None


def lower_bound(p: Poly, ones: frozenset = frozenset()) -> int | None:
    """A bound the polynomial never goes below, where its terms are all non-negative (each
    symbol 2 or more, but those in `ones`, 1 or more)."""
    total = 0
    for atoms, c in p:
        if not atoms:
            total += c
            continue
        bounds = [atom_lower_bound(a, ones) for a in atoms]
        if c < 0 or any(b is None or b < 0 for b in bounds):
            return None
        prod = c
        for b in bounds:
            prod *= b
        total += prod
    return total


def upper_bound(p: Poly, ones: frozenset = frozenset()) -> int | None:
    lb = lower_bound(tuple((m, -c) for m, c in p), ones)  # -p: its terms in the same order
    return None if lb is None else -lb


@functools.lru_cache(maxsize=4096)
def decided_between(a: Poly, b: Poly, op: str, ones: frozenset = frozenset()) -> bool | None:
    """Whether `a op b` holds for every value of the symbols, each 2 or more but those in
    `ones`, 1 or more (None: it depends on them); pure, so remembered (a trace compares the
    same sizes over and over: every meta checks its shapes)."""
    return decided(add(a, b, -1), op, ones)


def decided(diff: Poly, op: str, ones: frozenset = frozenset()) -> bool | None:
    """Whether `diff op 0` holds for every value of the symbols (None: it depends on them)."""
    c = as_constant(diff)
    if c is not None:
        return COMPARE[op](c, 0)
    lb, ub = lower_bound(diff, ones), upper_bound(diff, ones)
    positive = lb is not None and lb > 0
    nonneg = lb is not None and lb >= 0
    negative = ub is not None and ub < 0
    nonpos = ub is not None and ub <= 0
    if op == "==":
        return False if positive or negative else None
    if op == "!=":
        return True if positive or negative else None
    if op == ">":
        return True if positive else False if nonpos else None
    if op == ">=":
        return True if nonneg else False if negative else None
    if op == "<":
        return True if negative else False if nonneg else None
    if op == "<=":
        return True if nonpos else False if positive else None
    return None


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def exact_quotient(a: Poly, b: Poly) -> Poly | None:
    """a / b where b is one term (`8*s0`) dividing every term of a (`32*s0*s1`), or where a is
    one term times b (`(64*s0*n + 64*s0) / (4*n + 4)`, as a view's -1 computes `numel // known`
    from sizes with opaque atoms), else None."""
    if len(b) > 1:
        # a is q*b for a one-term q: q divides a's term that b's first term multiplies into
        for term in a:
            q = exact_quotient((term,), (b[0],))
            if q is not None and mul(q, b) == a:
                return q
        return None
    if len(b) != 1 or b[0][1] <= 0:
        return None
    (db, cb), = b
    terms = {}
    for atoms, coef in a:
        rest = list(atoms)
        for atom in db:
            if atom not in rest:
                return None
            rest.remove(atom)
        if coef % cb:
            return None
        terms[tuple(rest)] = coef // cb
    return make_poly(terms)
