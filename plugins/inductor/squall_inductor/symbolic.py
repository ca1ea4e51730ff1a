"""A region with symbolic sizes compiled once by inductor for every value of its size symbols.

squall's trace has a symbolic size where a dimension changes between calls (`s0`: a batch's
length, squall.symbolic). Here such a region is traced to ATen on fake tensors whose sizes are
symbols of torch's own `ShapeEnv`, one per squall symbol (so two inputs of length `s0` share
one), and the graph goes to `compile_fx` with that shape environment: one compiled kernel
serves every length.

inductor may assume more than squall guarded: a size bound (`s0 <= 4096`, its choice of
index width or reduction strategy), contiguous strides, equal sizes. Those assumptions are
its shape environment's guards; `produce_guards_expression` writes them, with every input's
sizes and strides, as one Python expression, checked at each call (a few microseconds). A
call where it fails runs a static compilation for its exact shapes and strides
(`CompiledRegion`), as Dynamo would recompile, never the symbolic kernel.

inductor's FX-graph and AOT caches are bypassed for these compilations: a cache hit returns
the compiled graph without putting the guards it was compiled under into the shape
environment, so the check above would miss them.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence

import torch

from squall.extend import SymInt, TensorProxy, size_source, symbols_of

from squall_inductor.regions import CompiledRegion, layout, like

__all__ = ["compile_symbolically", "guard_function", "SymbolicRegion"]


def _fake_inputs(proxies: Sequence[TensorProxy], fake_mode, shape_env) -> list[torch.Tensor]:
    """Contiguous fake tensors with the proxies' sizes, each squall size symbol one torch symbol."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    symbols: dict[str, torch.SymInt] = {}

    def size(n):
        if type(n) is not SymInt:
            return n
        for name in sorted(symbols_of(n)):
            if name not in symbols:
                hint = n.env.symbols[name][0]  # the symbol's value in the traced call
                expr = shape_env.create_symbol(hint, source=ConstantSource(f"squall_{name}"), dynamic_dim=DimDynamic.DYNAMIC)
                symbols[name] = shape_env.create_symintnode(expr, hint=hint)
        # the size's expression over the symbols, evaluated on torch's symbols
        return eval(size_source(n), {"__builtins__": {}}, dict(symbols))  # noqa: S307 - squall's own size source

    fakes = []
    with fake_mode:
        for p in proxies:
            fakes.append(torch.empty([size(n) for n in p.shape], dtype=p.dtype, device=p.device))
    return fakes


def compile_symbolically(fn: Callable, proxies: Sequence[TensorProxy]) -> tuple[Callable, Callable[[Sequence[torch.Tensor]], bool]]:
    """(compiled, holds): `fn` compiled by inductor for the proxies' symbolic sizes, and the
    check that a call's inputs are ones it was compiled for (sizes, strides, the bounds
    inductor assumed). Raises what inductor raises where it cannot compile `fn`."""
    # imported here: importing inductor costs seconds (see regions.compile_with_inductor)
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP, ShapeEnv

    shape_env = ShapeEnv(duck_shape=False)  # equal sizes are the same symbol only where squall's are
    fake_mode = FakeTensorMode(shape_env=shape_env)
    fakes = _fake_inputs(proxies, fake_mode, shape_env)
    with fake_mode:
        graph = make_fx(fn, tracing_mode="symbolic")(*fakes)
    context = torch._guards.TracingContext(fake_mode)
    with (
        torch._guards.tracing(context),
        inductor_config.patch(fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
    ):
        compiled = compile_fx(graph, fakes)
    source = shape_env.produce_guards_expression(fakes, ignore_static=False) or "True"
    return compiled, guard_function(source, len(fakes), SYMPY_INTERP)


_READ = re.compile(r"L\['t(\d+)'\]\.(size|stride)\(\)")


def guard_function(source: str, count: int, interp: dict) -> Callable[[Sequence[torch.Tensor]], bool]:
    """torch's guard expression over `L['t0'].size()[0]`, ... as a function of the inputs that
    reads each input's sizes and strides once (torch builds a new tuple at every `.size()`)."""
    body = _READ.sub(lambda m: f"{m.group(2)}{m.group(1)}", source).replace("L['t", "t").replace("']", "")
    lines = [f"def holds(args):", f"  {''.join(f't{i}, ' for i in range(count))}= args"]
    lines += [f"  size{i}, stride{i} = t{i}.shape, t{i}.stride()" for i in range(count)]
    lines.append(f"  return bool({body})")
    namespace = dict(interp)
    exec(compile("\n".join(lines) + "\n", "<squall-inductor-region-guards>", "exec"), namespace)  # noqa: S102 - torch's guard source
    holds = namespace["holds"]
    holds.source = source  # type: ignore[attr-defined] - shown by tests
    return holds


class SymbolicRegion:
    """A region compiled once for its symbolic sizes; a call its guards do not admit runs a
    static compilation for its own shapes and strides (compiled at its first such call)."""

    def __init__(self, fn: Callable, proxies: Sequence[TensorProxy]):
        self.fn = fn
        self.compiled, self.holds = compile_symbolically(fn, proxies)
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
                    static = self.static[shapes] = CompiledRegion(self.fn, [like(a) for a in args])
        return static(*args)
