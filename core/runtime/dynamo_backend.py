"""`torch.compile(model, backend="squall")`: Dynamo as a second frontend, squall's market as the backend.

Dynamo reads the program's bytecode, breaks the graph where it must (a `print`, a branch on a
tensor's value inside a plain function), guards the Python state it read and keeps the side
effects; each graph it captures — an FX `GraphModule` of torch calls whose inputs are the
program's tensors and, with the module's parameters lifted to inputs, its weights — comes here.
squall compiles that graph as it compiles any module (`squall.jit`): traced into the torch
language, planned on the marketplace under the user's priority list, generated into one Python
function, which is what Dynamo then calls.

Gradients go through squall's own differentiation. The backend is registered as a plain Dynamo
backend, not wrapped in `aot_autograd`, so the graph arrives before AOTAutograd would trace its
backward: a graph whose inputs require grad is differentiated by squall's grad rules, its forward
and backward planned on the same marketplace and run inside one `torch.autograd.Function`. One
autograd layer, squall's, rather than AOTAutograd's joint graph re-traced by squall.

The backend is found by name through the `torch_dynamo_backends` entry point group (see
pyproject.toml), so `pip install squall` is the whole setup. `options=` takes the keyword
arguments of `squall.jit` (`executors`, `wait`, `cache_size`, ...). Every graph compiled here is
kept (weakly) in `compiled_graphs()`, in the order compiled, for `squall.last_traces` and
`squall.explain`.
"""
from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .jit import JittedModule, jit

__all__ = ["squall_backend", "compiled_graphs", "BACKEND_OPTIONS"]

# the keyword arguments of squall.jit that torch.compile's options= may pass through
BACKEND_OPTIONS = tuple(name for name in inspect.signature(jit).parameters if name != "fn")

_compiled: list[weakref.ref] = []
_compiled_lock = threading.Lock()


def squall_backend(
    graph: torch.fx.GraphModule, example_inputs: Sequence[Any], *, options: dict[str, Any] | None = None
) -> Callable:
    """Compile one graph Dynamo captured; Dynamo calls the result with the graph's inputs.

    `example_inputs` are not run: a graph may update its inputs in place (a BatchNorm's running
    statistics), so squall compiles on the first real call, as `squall.jit` always does.
    """
    if not isinstance(graph, torch.fx.GraphModule):
        raise TypeError(f"squall's Dynamo backend expects a torch.fx.GraphModule, got {type(graph).__name__}")
    settings = dict(options or {})
    unknown = sorted(set(settings) - set(BACKEND_OPTIONS))
    if unknown:
        raise TypeError(
            f"torch.compile(backend='squall'): unknown option(s) {', '.join(map(repr, unknown))}; "
            f"squall takes {', '.join(BACKEND_OPTIONS)}"
        )
    compiled = jit(graph, **settings)
    with _compiled_lock:
        _compiled[:] = [ref for ref in _compiled if ref() is not None]
        _compiled.append(weakref.ref(compiled))
    return compiled


def compiled_graphs() -> list[JittedModule]:
    """The graphs compiled through the backend in this process and still in use, oldest first.

    Each is the `squall.jit` of one Dynamo graph: `squall.last_traces(g)` gives its traces,
    `squall.explain(g)` its plan, `g.cache_info()` its cache.
    """
    with _compiled_lock:
        return [g for g in (ref() for ref in _compiled) if g is not None]
