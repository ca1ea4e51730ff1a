"""The torch language: every torch call squall understands, written over proxies.

Each op is declared with `@torchsymbol(torch.x, torch.Tensor.x, ...)` in the module of
its family, and decomposes, recursively, into prims. `language()` builds the table
that routes torch callables to these ops while tracing.
"""
from __future__ import annotations

from collections.abc import Callable

from . import conversions, elementwise_binary, factories, indexing, matmul, resizing, convolution, losses, activations, normalization, reductions, shape, joins_and_splits, subscript, random_ops
# before the star imports below, which bind names like `matmul` to ops
FAMILIES = (elementwise_binary, conversions, factories, random_ops, reductions, shape, joins_and_splits, subscript, indexing, matmul, convolution, resizing, activations, normalization, losses)
from .base import DataDependentError, SquallWarning, TorchLanguage, TracingMode, qualified_name, torchsymbol
from .conversions import *  # noqa: F401,F403
from .elementwise_binary import *  # noqa: F401,F403
from .factories import *  # noqa: F401,F403
from .random_ops import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from .resizing import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .activations import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .joins_and_splits import *  # noqa: F401,F403
from .subscript import *  # noqa: F401,F403
from ..symbol import Symbol



def _ops() -> list:
    return [getattr(m, n) for m in FAMILIES for n in m.__all__ if hasattr(getattr(m, n), "torchfns")]


def all_symbols() -> dict[str, Symbol]:
    """Every ltorch op, by id."""
    return {op.id: op for op in _ops() if isinstance(op, Symbol)}


def torch_table() -> dict[Callable, Callable]:
    """torch callable -> the ltorch op (or in-place op) that traces it."""
    table: dict[Callable, Callable] = {}
    for op in _ops():
        for fn in op.torchfns:
            if fn in table and table[fn] is not op:
                raise RuntimeError(f"squall: {qualified_name(fn)} is claimed by two ltorch ops")
            table[fn] = op
    return table


def names_to_symbols() -> dict[str, Symbol]:
    """Every name a user may give an ltorch op ("torch.nn.functional.softmax", "torch.softmax", ...)."""
    names: dict[str, Symbol] = {}
    for op in _ops():
        if isinstance(op, Symbol):
            names[op.id] = op
            for fn in op.torchfns:
                names.setdefault(qualified_name(fn), op)
    return names


def language() -> TorchLanguage:
    """A dispatcher over the whole torch language."""
    return TorchLanguage(torch_table())
