"""A region with symbolic sizes compiled once by inductor for every value of its size symbols.

squall's trace has a symbolic size where a dimension changes between calls (`s0`: a batch's
length, squall.symbolic). Here such a region is traced to ATen on fake tensors whose sizes are
symbols of torch's own `ShapeEnv`, one per squall symbol (so two inputs of length `s0` share
one), and the graph goes to inductor with that shape environment: one compiled kernel serves
every length.

What the compile needs travels as a `SymbolicSpec` (plain data: each symbol's traced value,
each input's sizes as expressions over the symbols, dtype, device), so the compile can run in
squall_inductor's worker process (`worker_main`), whose torch.fx trace never patches the user's
process; `compile_in_process` is the fallback where the worker cannot serve.

inductor may assume more than squall guarded: a size bound (`s0 <= 4096`, its choice of
index width or reduction strategy), contiguous strides, equal sizes. Those assumptions are
its shape environment's guards; `produce_guards_expression` writes them, with every input's
sizes and strides, as one Python expression, checked at each call (a few microseconds). A
call where it fails runs a static compilation for its exact shapes and strides
(`CompiledRegion`), as Dynamo would recompile, never the symbolic kernel.

inductor's FX-graph and AOT caches are bypassed for these compilations (in the worker: a fresh,
empty cache folder for each): a cache hit returns the compiled graph without putting the guards
it was compiled under into the shape environment, so the check above would miss them.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from squall.extend import SymInt, TensorProxy, size_source, symbols_of

from squall_inductor.regions import CompiledRegion, layout, like

__all__ = [
    "SymbolicSpec", "symbolic_spec", "trace_symbolically", "compile_in_process", "guard_function", "SymbolicRegion",
]


class SymbolicSpec(NamedTuple):
    """What a symbolic compile needs, as plain data another process can take: each size symbol's
    value in the traced call, and each input's sizes (an int, or an expression over the symbols,
    `"2*s0"`), dtype and device."""

    hints: dict[str, int]
    inputs: list[tuple[tuple[int | str, ...], torch.dtype, torch.device]]


def symbolic_spec(proxies: Sequence[TensorProxy]) -> SymbolicSpec:
    """The spec of a region whose inputs are `proxies` (their sizes read without a guard)."""
    hints: dict[str, int] = {}
    inputs = []
    for p in proxies:
        dims: list[int | str] = []
        for n in p.shape:
            if type(n) is SymInt:
                for name in symbols_of(n):
                    hints.setdefault(name, n.env.symbols[name][0])  # the symbol's value in the traced call
                dims.append(size_source(n))
            else:
                dims.append(int(n))
        inputs.append((tuple(dims), p.dtype, p.device))
    return SymbolicSpec(hints, inputs)


def _fake_inputs(spec: SymbolicSpec, fake_mode, shape_env) -> list[torch.Tensor]:
    """Contiguous fake tensors with the spec's sizes, each squall size symbol one torch symbol."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    symbols: dict[str, torch.SymInt] = {}
    for name in sorted(spec.hints):
        hint = spec.hints[name]
        expr = shape_env.create_symbol(hint, source=ConstantSource(f"squall_{name}"), dynamic_dim=DimDynamic.DYNAMIC)
        symbols[name] = shape_env.create_symintnode(expr, hint=hint)

    def size(n: int | str):
        # an expression over the symbols, evaluated on torch's symbols (squall's own size source)
        return n if type(n) is int else eval(n, {"__builtins__": {}}, dict(symbols))  # noqa: S307

    with fake_mode:
        return [torch.empty([size(n) for n in dims], dtype=dtype, device=device) for dims, dtype, device in spec.inputs]


def trace_symbolically(fn: Callable, spec: SymbolicSpec) -> tuple[Any, list[torch.Tensor], Any]:
    """(graph, fakes, fake_mode): `fn` traced to ATen on fake inputs with the spec's symbolic sizes.
    torch.fx patches torch.nn.Module process-wide while it traces: the compile worker calls this."""
    # imported here: importing inductor's and fx's machinery costs seconds (see regions.compile_with_inductor)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv(duck_shape=False)  # equal sizes are the same symbol only where squall's are
    fake_mode = FakeTensorMode(shape_env=shape_env)
    fakes = _fake_inputs(spec, fake_mode, shape_env)
    with fake_mode:
        graph = make_fx(fn, tracing_mode="symbolic")(*fakes)
    return graph, fakes, fake_mode


def guards_source(fake_mode, fakes: Sequence[torch.Tensor]) -> str:
    """The guards inductor's compile left in the shape environment, over `L['t0']`, ..., as Python."""
    return fake_mode.shape_env.produce_guards_expression(list(fakes), ignore_static=False) or "True"


def compile_in_process(fn: Callable, spec: SymbolicSpec) -> tuple[Callable, str]:
    """(compiled, guard source): `fn` compiled by inductor in this process for the spec's
    symbolic sizes. Raises what inductor raises where it cannot compile `fn`."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    graph, fakes, fake_mode = trace_symbolically(fn, spec)
    context = torch._guards.TracingContext(fake_mode)
    with (
        torch._guards.tracing(context),
        inductor_config.patch(fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
    ):
        compiled = compile_fx(graph, fakes)
    return compiled, guards_source(fake_mode, fakes)


_READ = re.compile(r"L\['t(\d+)'\]\.(size|stride)\(\)")


def guard_function(source: str, count: int) -> Callable[[Sequence[torch.Tensor]], bool]:
    """torch's guard expression over `L['t0'].size()[0]`, ... as a function of the inputs that
    reads each input's sizes and strides once (torch builds a new tuple at every `.size()`)."""
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

    body = _READ.sub(lambda m: f"{m.group(2)}{m.group(1)}", source).replace("L['t", "t").replace("']", "")
    lines = ["def holds(args):", f"  {''.join(f't{i}, ' for i in range(count))}= args"]
    lines += [f"  size{i}, stride{i} = t{i}.shape, t{i}.stride()" for i in range(count)]
    lines.append(f"  return bool({body})")
    namespace = dict(SYMPY_INTERP)
    exec(compile("\n".join(lines) + "\n", "<squall-inductor-region-guards>", "exec"), namespace)  # noqa: S102 - torch's guard source
    holds = namespace["holds"]
    holds.source = source  # type: ignore[attr-defined] - shown by tests
    return holds


class SymbolicRegion:
    """A region compiled once for its symbolic sizes; a call its guards do not admit runs a
    static compilation for its own shapes and strides (compiled at its first such call).

    `compile(spec)` returns (compiled, guard source): `compile_in_process` by default, or
    squall_inductor.worker's RegionCompiler.symbolic, in its worker process; `compile_static`
    (CompiledRegion's `compile`) compiles the static fallbacks, in this process by default.
    """

    def __init__(self, fn: Callable, proxies: Sequence[TensorProxy], *,
                 compile: Callable[[SymbolicSpec], tuple[Callable, str]] | None = None,
                 compile_static: Callable[[Sequence[torch.Tensor]], Callable] | None = None):
        self.fn = fn
        self.compiled, source = (compile or (lambda spec: compile_in_process(fn, spec)))(symbolic_spec(proxies))
        self.holds = guard_function(source, len(proxies))
        self.compile_static = compile_static
        self.static: dict[tuple, CompiledRegion] = {}  # layout -> a static compilation, for calls the guards refuse
        self._lock = threading.Lock()

    def __call__(self, *args: torch.Tensor):
        if self.holds(args):
            return tuple(self.compiled(*args))  # inductor returns a list; squall's regions, a tuple
        shapes = layout(args)
        static = self.static.get(shapes)
        if static is None:
            with self._lock:
                static = self.static.get(shapes)
                if static is None:
                    static = self.static[shapes] = CompiledRegion(self.fn, [like(a) for a in args], compile=self.compile_static)
        return static(*args)
