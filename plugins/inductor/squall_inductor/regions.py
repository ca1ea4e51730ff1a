"""A fusion region as a plain Python function of torch calls, example inputs for it, and
its compilation by inductor without torch.compile's frontend.

The function is what the torch executor would run for the region's calls, one after
another (prims through `TORCH_PRIM_IMPLS`, torch-language ops through the torch callable
they stand for), so inductor sees the high-level ops (softmax, layer_norm, cross_entropy)
and eager and compiled runs of a region compute the same thing.

`compile_with_inductor` traces that function into an FX graph of ATen calls (make_fx, on
fake tensors) and hands it to inductor's own entry point (`compile_fx`, the compiler
torch.compile calls after Dynamo). squall's trace and guards already decided what the
region computes and when it is valid, so Dynamo's bytecode analysis, frame evaluation and
guard checks are not needed: calling the result costs a Python call into inductor's
wrapper, not a Dynamo frame (bench/region_call.py measures both).
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence

import torch
from torch.utils._pytree import tree_flatten

from squall.extend import (
    TORCH_PRIM_IMPLS,
    BoundSymbol,
    FusionRegion,
    SquallWarning,
    SymInt,
    TensorProxy,
    ValuePrinter,
    concrete_shape,
    example_tensor,
    load_source,
    lone_symbol,
    symbols_of,
)

__all__ = ["torch_callable", "size_reads", "region_function", "example_inputs", "compile_with_inductor", "CompiledRegion", "layout", "like"]


def torch_callable(bsym: BoundSymbol) -> Callable:
    """The torch callable the built-in torch executor runs for this call."""
    if bsym.sym.is_prim:
        return TORCH_PRIM_IMPLS[bsym.sym.id]
    return bsym.sym.torchfns[0]


def size_reads(region: FusionRegion) -> tuple[dict[str, tuple[str, int]], set[str]]:
    """Where the region reads each size symbol its calls' arguments use (`view(t, (s0, 64))`):
    symbol -> (input name, dimension) for each an input holds as a whole dimension, and the
    set of those none does (such a region cannot be made a function of its inputs alone)."""
    used: set[str] = set()
    for b in region.calls:
        used |= symbols_of([x for x in tree_flatten((b.args, b.kwargs))[0] if type(x) is SymInt])
    reads: dict[str, tuple[str, int]] = {}
    for p in region.inputs:
        for d, n in enumerate(p.shape):
            symbol = lone_symbol(n)
            if symbol in used:
                reads.setdefault(symbol, (p.name, d))
    return reads, used - set(reads)


def region_function(region: FusionRegion) -> tuple[Callable, str]:
    """(function, source): the region's calls as one function of its inputs returning a tuple of
    its outputs; the size symbols its calls use are read from its inputs' shapes (`size_reads`)."""
    reads, _ = size_reads(region)
    names = {p.name for p in region.inputs} | {p.name for b in region.calls for p in b.output_proxies()} | set(reads)
    printer = ValuePrinter({}, reserved=names)
    lines = [f"def region({', '.join(p.name for p in region.inputs)}):"]
    lines.extend(f"  {symbol} = {name}.shape[{dim}]" for symbol, (name, dim) in sorted(reads.items()))
    for b in region.calls:
        callee = printer.name_for(torch_callable(b), f"torch_{b.sym.name}")
        target, picks = printer.assignment(b.output) if b.output is not None else ("", [])
        lines.append(f"  {target + ' = ' if target else ''}{printer.call(callee, b)}")
        lines.extend(f"  {line}" for line in picks)
    lines.append(f"  return ({''.join(p.name + ', ' for p in region.outputs)})")
    source = "\n".join(lines) + "\n"
    # registered with linecache so dynamo's and Python's tracebacks show the region's source
    load_source(source, "inductor-region", printer.globals)
    return printer.globals["region"], source


def example_inputs(proxies: list[TensorProxy]) -> list[torch.Tensor]:
    """Real tensors with the proxies' metadata (a symbolic size at its traced value, read
    without a guard), drawn without touching the user's random stream."""
    return [example_tensor(concrete_shape(p.shape), p.dtype, p.device) for p in proxies]


def compile_with_inductor(fn: Callable, args: Sequence[torch.Tensor]) -> Callable:
    """`fn` compiled by inductor for inputs like `args` (their shapes, strides, dtypes, devices).

    The result takes the inputs positionally and returns a list of `fn`'s outputs; no
    Dynamo frame runs when it is called. Raises whatever inductor raises when it cannot
    compile `fn` (the caller falls back to the torch executor).
    """
    # imported here, not at the top: importing inductor costs seconds (it loads Dynamo), and the
    # plugin is imported by every squall.jit that merely asks which executors exist
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    graph = make_fx(fn, tracing_mode="fake")(*args)
    # the context torch._inductor.standalone_compile sets up for static shapes: a fake mode with
    # a shape environment, without which inductor bypasses its FX graph and AOTAutograd caches
    # (a region compiled by an earlier process is then loaded, not compiled again)
    context = torch._guards.TracingContext(FakeTensorMode(shape_env=ShapeEnv()))
    with torch._guards.tracing(context):
        return compile_fx(graph, list(args), ignore_shape_env=True)


class CompiledRegion:
    """A region compiled by inductor for its inputs' sizes and strides, compiled again for others.

    inductor's code checks its inputs' sizes and strides before it computes anything, and
    raises AssertionError on a mismatch. squall's plans do not key on strides (a region's input
    can be a transposed view an earlier call made), so a mismatch compiles the region for the
    new layout, as Dynamo's guards would recompile; from then on calls pick their compilation
    by their inputs' sizes and strides (a few hundred nanoseconds), not by catching the error.
    """

    def __init__(self, fn: Callable, args: Sequence[torch.Tensor]):
        self.fn = fn
        self.layout = layout(args)
        self.compiled = compile_with_inductor(fn, args)
        self.variants: dict[tuple, Callable] | None = None  # layout -> compilation, after a mismatch
        self._lock = threading.Lock()

    def __call__(self, *args: torch.Tensor):
        if self.variants is None:
            try:
                return tuple(self.compiled(*args))  # inductor returns a list; squall's regions, a tuple
            except AssertionError:
                if layout(args) == self.layout:
                    raise  # not a layout mismatch: inductor's own check of something else
            with self._lock:
                if self.variants is None:
                    self.variants = {self.layout: self.compiled}
        key = layout(args)
        compiled = self.variants.get(key)
        if compiled is None:
            with self._lock:
                examples = [like(a) for a in args]
                try:
                    compiled = compile_with_inductor(self.fn, examples)
                except Exception as e:  # noqa: BLE001 - the region's own torch calls compute the same thing
                    # (BLOOM: a view of a concatenated cache that inductor's decompositions lay out
                    # otherwise); the call must not fail where the torch plan would not
                    warnings.warn(f"squall-inductor: inductor could not compile a region for its inputs' strides "
                                  f"({type(e).__name__}); calls with those strides run its torch calls", SquallWarning, stacklevel=2)
                    compiled = self.fn
                self.variants[key] = compiled
        return tuple(compiled(*args))


def layout(args: Sequence[torch.Tensor]) -> tuple:
    """The inputs' sizes and strides: what one static compilation of a region is valid for."""
    return tuple((a.shape, a.stride()) for a in args)


def like(t: torch.Tensor) -> torch.Tensor:
    """An example tensor with `t`'s sizes, strides, dtype and device (its values drawn as example_inputs' are)."""
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(example_tensor(t.shape, t.dtype, t.device))
