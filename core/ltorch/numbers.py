"""Dynamic numbers while tracing: recording arithmetic on them, and reading their values.

A `NumberProxy` (`squall.proxies`) stands for a Python number known only at run time: a
number argument `squall.jit` made dynamic (its value changed between calls), or a tensor
value read (`.item()`) that kept changing from call to call (`squall.frontend.speculation`).

- Arithmetic on it is recorded as number prims (`squall.prims.numbers`).
- Elementwise torch-language ops (those tagged ELEMENTWISE: `x * s`, `torch.add(x, s,
  alpha=s)`, `torch.clamp(x, min=s)`, `torch.where(c, x, s)`) take it as a run-time scalar.
  Every other op, and every torch call squall runs as an opaque call, gets its value of
  this call instead, guarded (`specialised`): correctness never depends on an op
  supporting run-time numbers.
- A Python read of its value (`bool(s > 0)`, `int(s)` for a shape, `range(s)`, `str(s)`)
  returns the value of the call being traced and records a guard (`squall.guards`) that
  checks the same read at every call; a failed guard runs or compiles another variant,
  as for a tensor's value. A read inside an op's own decomposition cannot place a guard
  there: it guards the numbers the value was computed from (each equal to its value in
  this call), at the program's level, before the op.
"""
from __future__ import annotations

import os
from typing import Any

from torch.utils._pytree import tree_map

from ..guards import GUARD, READ, READERS
from ..prims import numbers as number_prims
from ..proxies import NumberProxy, size_leaf
from ..symbol import Tags, user_source

__all__ = ["record", "read", "specialised", "has_numbers", "takes_numbers", "number_input", "runtime_read"]


def _site() -> str:
    found = user_source()
    return "<unknown>" if found is None else f"{os.path.basename(found[0])}:{found[1]}"


def number_input(ctx: Any, name: str, value: int | float) -> NumberProxy:
    """The proxy for a dynamic number argument `value`, an input of the program."""
    p = NumberProxy(name, type(value), value)
    ctx.number_roots[p.name] = (p,)
    ctx.number_sources[p.name] = frozenset({p.name})
    return p


def record(ctx: Any, op: str, operands: tuple) -> NumberProxy:
    """`op` (a NumberProxy dunder's name: "add", "lt", ...) over `operands`, recorded."""
    out = number_prims.BY_OPERATOR[op](*operands)
    _note_roots(ctx, out, operands)
    return out


def _note_roots(ctx: Any, out: NumberProxy, operands: tuple) -> None:
    # the number arguments it was computed from: a guard on its exact value specialises them
    ctx.number_sources[out.name] = frozenset().union(*(ctx.number_sources.get(x.name, ()) for x in operands if type(x) is NumberProxy))
    # a number computed at the program's level can be guarded itself; one computed inside an
    # op's decomposition exists only there, so a read of it guards what it was computed from
    if len(ctx.scopes) == 1:
        ctx.number_roots[out.name] = (out,)
    else:
        roots = {}
        for x in operands:
            if type(x) is NumberProxy:
                roots.update((r.name, r) for r in ctx.number_roots.get(x.name, (x,)))
        ctx.number_roots[out.name] = tuple(roots.values())


def read(ctx: Any, how: str, p: NumberProxy) -> Any:
    """The value `READERS[how](p)` has in the call being traced, guarded."""
    value = READERS[how](p.value)  # raises as the plain number would (a float used as an index)
    if len(ctx.scopes) == 1:
        GUARD(how, (p,), {}, value, _site())
        return value
    scopes = ctx.scopes
    ctx.scopes = [scopes[0]]  # the guards go to the program's level, before the open op
    try:
        for root in ctx.number_roots.get(p.name, (p,)):
            GUARD("number", (root,), {}, root.value, _site())
    finally:
        ctx.scopes = scopes
    return value


def specialised(ctx: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` and `kwargs` with every NumberProxy replaced by its value in this call, guarded:
    what an op that cannot take a run-time number is called with."""
    def swap(x):
        if type(x) is NumberProxy:
            return read(ctx, "number", x)
        if type(x) is slice:
            return slice(swap(x.start), swap(x.stop), swap(x.step))
        return x

    return tree_map(swap, args, is_leaf=size_leaf), tree_map(swap, kwargs, is_leaf=size_leaf)


def has_numbers(values) -> bool:
    """Whether `values` (and the lists, tuples and dicts in them) hold a NumberProxy."""
    for x in values:
        t = type(x)
        if t is NumberProxy:
            return True
        if (t is list or t is tuple) and has_numbers(x):
            return True
        if t is dict and has_numbers(x.values()):
            return True
        if t is slice and has_numbers((x.start, x.stop, x.step)):
            return True
    return False


def takes_numbers(op: Any) -> bool:
    """Whether the ltorch op (or form of one) `op` takes run-time numbers: the elementwise ops,
    and those whose numbers are fill values (`full`, `full_like`, `masked_fill`)."""
    tags = getattr(getattr(op, "op", op), "tags", ())
    return Tags.ELEMENTWISE in tags or Tags.NUMBER_OPERANDS in tags


def runtime_read(ctx: Any, how: str, args: tuple, kwargs: dict, value: Any) -> Any:
    """A tensor value read (`t.item()`) made at run time instead of speculated: a recorded
    read whose result is a NumberProxy (`value`, its value in this call, for speculation).
    Values other than Python ints, floats and bools stay speculated: None."""
    if type(value) not in (bool, int, float):
        return None
    out = READ(how, args, kwargs, type(value).__name__)
    out.value = value
    ctx.number_roots[out.name] = (out,)
    return out

