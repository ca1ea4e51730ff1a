"""Primitives: the few, strict operations every torch-language op decomposes into.

A prim does not broadcast, promote types or fill in defaults; its meta function
checks its inputs, raising an error that names the problem, and returns proxies
for its outputs. Each family lives in its own module.
"""
from __future__ import annotations

from .base import PrimIDs, make_prim
from .devices import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .factories import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .numbers import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from . import devices, elementwise, factories, indexing, linalg, numbers, reductions, shape
from ..symbol import Symbol

_FAMILIES = (devices, elementwise, factories, indexing, linalg, numbers, reductions, shape)


def all_prims() -> dict[str, Symbol]:
    """Every prim, by id."""
    found = {}
    for module in _FAMILIES:
        for name in module.__all__:
            sym = getattr(module, name)
            if isinstance(sym, Symbol):
                found[sym.id] = sym
    return found
