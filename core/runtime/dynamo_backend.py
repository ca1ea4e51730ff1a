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

Shapes: with `torch.compile(..., dynamic=True)` Dynamo passes the sizes it made symbolic as
int inputs beside the tensors. Each one that is a tensor input's size is read from that
tensor's shape inside the compiled program, so squall's automatic dynamic makes it a symbolic
size at the first change: one squall compilation serves every later length.
"""
from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .jit import JittedModule, jit

__all__ = ["squall_backend", "compiled_graphs", "sizes_read_from_shapes", "BACKEND_OPTIONS"]

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
    derived = sizes_read_from_shapes(graph)
    program = _SizesFromShapes(graph, derived) if derived else graph
    compiled = jit(program, **settings)
    with _compiled_lock:
        _compiled[:] = [ref for ref in _compiled if ref() is not None]
        _compiled.append(weakref.ref(compiled))
    if not derived:
        return compiled
    kept = program.kept

    def call(*args: Any) -> Any:
        return compiled(*[args[i] for i in kept])

    return call


def sizes_read_from_shapes(graph: torch.fx.GraphModule) -> dict[int, tuple[int, int]]:
    """The graph's int inputs that are a tensor input's size under `dynamic=True`: position ->
    (that tensor's position, the dimension). Dynamo passes such a size as a separate int; read
    from the tensor's shape instead, squall traces it as a size (symbolic once it changes) rather
    than as a number it must key by value wherever a shape needs it."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    where: dict[Any, tuple[int, int]] = {}
    for i, node in enumerate(placeholders):
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            for d, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt):
                    where.setdefault(size.node.expr, (i, d))
    return {
        i: where[node.meta["example_value"].node.expr]
        for i, node in enumerate(placeholders)
        if isinstance(node.meta.get("example_value"), torch.SymInt) and node.meta["example_value"].node.expr in where
    }


class _SizesFromShapes(torch.nn.Module):
    """A Dynamo graph called with its tensor inputs only: the sizes Dynamo passes beside them are
    read from their shapes (`sizes_read_from_shapes`)."""

    def __init__(self, graph: torch.fx.GraphModule, derived: dict[int, tuple[int, int]]):
        super().__init__()
        self.graph_module = graph
        arity = sum(1 for n in graph.graph.nodes if n.op == "placeholder")
        self.kept = tuple(i for i in range(arity) if i not in derived)
        self.derived = tuple(sorted(derived.items()))

    def forward(self, *kept: Any) -> Any:
        args: list[Any] = [None] * (len(kept) + len(self.derived))
        for position, value in zip(self.kept, kept):
            args[position] = value
        for position, (tensor, dim) in self.derived:
            args[position] = args[tensor].shape[dim]
        return self.graph_module(*args)


def compiled_graphs() -> list[JittedModule]:
    """The graphs compiled through the backend in this process and still in use, oldest first.

    Each is the `squall.jit` of one Dynamo graph: `squall.last_traces(g)` gives its traces,
    `squall.explain(g)` its plan, `g.cache_info()` its cache.
    """
    with _compiled_lock:
        return [g for g in (ref() for ref in _compiled) if g is not None]
