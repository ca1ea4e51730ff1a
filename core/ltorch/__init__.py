"""The torch language: every torch call squall understands, written over proxies.

Each op is declared with `@torchsymbol(torch.x, torch.Tensor.x, ...)` in the module of
its topic (softmax.py, convolution.py, pooling.py, ...) and decomposes, recursively,
into prims. Every op module lists its ops, and nothing else, in `__all__`; the tables
below are built from those lists. `language()` builds the dispatcher that routes torch
callables to these ops while tracing.
"""
from __future__ import annotations

from collections.abc import Callable

from types import ModuleType

from . import activations, attention, collectives, conversions, convolution, einsum, elementwise_binary, elementwise_unary, factories, flips, grouped, histograms, indexing, joins_and_splits, linear, losses, matmul, normalization, overwrites, padding, pooling, random_ops, reductions, resizing, shape, softmax, sorting, subscript, vector_norms
from .base import DataDependentError, SquallWarning, TorchLanguage, TracingMode, qualified_name, torchsymbol
from .functionalization import TorchForm
from ..symbol import Symbol

# bound before the star imports below, which rebind names like `softmax` and `matmul` to ops
MODULES: tuple[ModuleType, ...] = (
    elementwise_unary, elementwise_binary, conversions, factories, random_ops, reductions, sorting,
    vector_norms, shape, joins_and_splits, overwrites, flips, padding, subscript, indexing, matmul, grouped, histograms, einsum, linear,
    convolution, pooling, resizing, attention, activations, softmax, normalization, losses, collectives,
)  # fmt: skip

from .activations import *  # noqa: E402,F401,F403
from .attention import *  # noqa: E402,F401,F403
from .collectives import *  # noqa: E402,F401,F403
from .conversions import *  # noqa: E402,F401,F403
from .convolution import *  # noqa: E402,F401,F403
from .einsum import *  # noqa: E402,F401,F403
from .elementwise_binary import *  # noqa: E402,F401,F403
from .elementwise_unary import *  # noqa: E402,F401,F403
from .factories import *  # noqa: E402,F401,F403
from .flips import *  # noqa: E402,F401,F403
from .grouped import *  # noqa: E402,F401,F403
from .histograms import *  # noqa: E402,F401,F403
from .indexing import *  # noqa: E402,F401,F403
from .joins_and_splits import *  # noqa: E402,F401,F403
from .linear import *  # noqa: E402,F401,F403
from .losses import *  # noqa: E402,F401,F403
from .matmul import *  # noqa: E402,F401,F403
from .normalization import *  # noqa: E402,F401,F403
from .overwrites import *  # noqa: E402,F401,F403
from .padding import *  # noqa: E402,F401,F403
from .pooling import *  # noqa: E402,F401,F403
from .random_ops import *  # noqa: E402,F401,F403
from .reductions import *  # noqa: E402,F401,F403
from .resizing import *  # noqa: E402,F401,F403
from .shape import *  # noqa: E402,F401,F403
from .softmax import *  # noqa: E402,F401,F403
from .sorting import *  # noqa: E402,F401,F403
from .subscript import *  # noqa: E402,F401,F403
from .vector_norms import *  # noqa: E402,F401,F403


def _ops() -> list:
    return [getattr(m, n) for m in MODULES for n in m.__all__]


def all_symbols() -> dict[str, Symbol]:
    """Every ltorch op, by id (the ops traces record; not the `TorchForm`s that reach them)."""
    return {op.id: op for op in _ops() if not isinstance(op, TorchForm)}


def all_forms() -> list[TorchForm]:
    """Every `TorchForm`: in-place ops, `inplace=` flags and the other calls that reach an op indirectly."""
    return [op for op in _ops() if isinstance(op, TorchForm)]


def torch_table() -> dict[Callable, Symbol]:
    """torch callable -> what traces it: a `TorchForm` where one claims it, else the ltorch op."""
    table: dict[Callable, Symbol] = {}
    for ops in (list(all_symbols().values()), all_forms()):
        claimed: dict[Callable, Symbol] = {}
        for op in ops:
            for fn in op.torchfns:
                if claimed.setdefault(fn, op) is not op:
                    raise RuntimeError(f"squall: {qualified_name(fn)} is claimed by two ltorch ops")
        table.update(claimed)  # forms last: a conversion's form stands in front of its op
    return table


def names_to_symbols() -> dict[str, Symbol]:
    """Every name a user may give an ltorch op ("torch.nn.functional.softmax", "torch.softmax", ...)."""
    names: dict[str, Symbol] = {}
    for op in all_symbols().values():
        names[op.id] = op
        for fn in op.torchfns:
            names.setdefault(qualified_name(fn), op)
    return names


def language() -> TorchLanguage:
    """A dispatcher over the whole torch language."""
    return TorchLanguage(torch_table(), collectives.WRAPPED_RESULTS)
