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
call where it fails runs another compilation, never the symbolic kernel: a symbolic one for
its inputs' memory order, or with the symbols that are 1 in it the constant 1 (inductor
specialises a size of 1: a batch of 1 at every length is one more compilation), else a static
one for its exact shapes and strides (`CompiledRegion`), as Dynamo would recompile.

inductor's FX-graph and AOT caches are bypassed for these compilations (in the worker: a fresh,
empty cache folder for each): a cache hit returns the compiled graph without putting the guards
it was compiled under into the shape environment, so the check above would miss them.
"""
from __future__ import annotations

import atexit
import re
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

import torch

from squall.extend import SquallWarning, SymInt, compiling_stopped, stop_compiling, TensorProxy, example_tensor, size_source, symbol_reads, symbols_of

from squall_inductor.wrappers import first_that_compiles, wrapper_attempts
from squall_inductor.regions import EAGER_NUMERICS, CompiledRegion, OtherValues, checked, examples_for, layout, layout_of, output_layouts, views_as_reshapes

__all__ = [
    "SYMBOLIC_CONFIG", "wait_for_variants", "SymbolicSpec", "symbolic_spec", "memory_order", "memory_orders", "spec_examples", "trace_symbolically", "compile_in_process", "compile_symbolically", "guard_function",
    "output_shape_check", "SymbolicRegion",
]

T = TypeVar("T")


# inductor settings for a symbolic compile: its code's own checks of each input's sizes and
# strides (`assert_size_stride`, 31 a llama decoding step) repeat what the guard function has
# checked before every call of it (sizes, strides, storage offset)
SYMBOLIC_CONFIG = {"size_asserts": False}
# a symbolic region compiles at most this many static fallbacks (calls no guards admit), the later
# layouts run its torch calls: a batch of 1 its guards refuse, at a new length each call, was a
# static compile per length (49 queued in the worker behind a 200-batch DistilBERT stream, each
# seconds of compiler CPU beside the user's calls, and threads left waiting as the interpreter exits)
MAX_STATIC_LAYOUTS = 4
# and at most this many later symbolic compilations (other memory orders, symbols at 1): past them,
# a call no compilation admits takes the static fallbacks' way
MAX_SYMBOLIC_VARIANTS = 8
# what each size symbol is moved by for a symbolic compilation's second check, at sizes it was
# not traced at (a kernel right at its traced sizes can be wrong at others: a vector loop's tail):
# the first move whose sizes inductor's guards admit and the region's torch calls take is run
OTHER_SIZES_BY = (3, 1, 2)
# at exit the later compilations still under way are stopped and waited for this long at most: a
# thread left in them as the interpreter finalises aborted it ("terminate called without an active exception")
EXIT_JOIN_S = 5.0
_under_way: set[threading.Thread] = set()
_join_registered = threading.Event()


def _join_at_exit() -> None:
    stop_compiling()  # a request to the worker in flight declines within its poll
    deadline = time.monotonic() + EXIT_JOIN_S
    for thread in list(_under_way):
        thread.join(max(0.0, deadline - time.monotonic()))


def wait_for_variants(timeout: float | None = None) -> bool:
    """Wait for the later compilations under way in the background (a symbolic region's
    compilations for calls its guards refuse, every region's); whether none is left. For
    benchmarks and tests that time what those compilations serve."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for thread in list(_under_way):
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not _under_way


class SymbolicSpec(NamedTuple):
    """What a symbolic compile needs, as plain data another process can take: each size symbol's
    value in the traced call, and each input's sizes (an int, or an expression over the symbols,
    `"2*s0"`), dtype, device and memory order (its dimensions from the outermost in memory to
    the innermost: `(0, 1, 2)` is contiguous, `(0, 2, 1, 3)` a transposed view's)."""

    hints: dict[str, int]
    inputs: list[tuple[tuple[int | str, ...], torch.dtype, torch.device, tuple[int, ...]]]

    @property
    def on_cpu(self) -> bool:
        """Whether every input is on the CPU."""
        return all(torch.device(device).type == "cpu" for _, _, device, _ in self.inputs)

    def with_orders(self, orders: Sequence[tuple[int, ...]]) -> SymbolicSpec:
        """The same sizes with each input laid out in memory in the given order."""
        return SymbolicSpec(self.hints, [(dims, dtype, device, order) for (dims, dtype, device, _), order in zip(self.inputs, orders)])

    def with_ones(self, names: frozenset[str]) -> SymbolicSpec:
        """The same spec with the size symbols `names` the constant 1 (a batch of 1 at every length:
        inductor specialises a size of 1, so the symbolic compilation's guards refuse it)."""
        if not names:
            return self
        left = {name: hint for name, hint in self.hints.items() if name not in names}
        ones, others = _names_pattern(names), _names_pattern(left)

        def size(n: int | str) -> int | str:
            if type(n) is int:
                return n
            text = ones.sub("1", n)
            # an expression of no symbol left is a constant: an int, as the spec writes constants
            # (every symbol of the sizes has a hint)
            return text if left and others.search(text) else int(eval(text, {"__builtins__": {}}, {}))  # noqa: S307 - squall's own size source

        return SymbolicSpec(left, [(tuple(size(n) for n in dims), dtype, device, order) for dims, dtype, device, order in self.inputs])

    def moved(self, by: int) -> SymbolicSpec:
        """The same spec with each size symbol's value `by` more than its traced one."""
        return SymbolicSpec({name: hint + by for name, hint in self.hints.items()}, self.inputs)


def _names_pattern(names: Any) -> re.Pattern:
    """A pattern matching any of the symbol `names` as a whole word in a size expression."""
    return re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")


def memory_order(t: torch.Tensor) -> tuple[int, ...]:
    """`t`'s dimensions from the largest stride to the smallest (ties in dimension order)."""
    stride = t.stride()
    return tuple(sorted(range(len(stride)), key=lambda d: (-stride[d], d)))


def memory_orders(args: Sequence[torch.Tensor]) -> tuple[tuple[int, ...], ...]:
    """Each input's `memory_order`: which symbolic compilation of a region can take them."""
    return tuple(memory_order(a) for a in args)


def symbolic_spec(proxies: Sequence[TensorProxy]) -> SymbolicSpec:
    """The spec of a region whose inputs are `proxies` (their sizes read without a guard)."""
    hints: dict[str, int] = {}
    inputs = []
    for p in proxies:
        dims: list[int | str] = []
        for n in p.shape:
            if type(n) is SymInt:
                for name in symbols_of(n):
                    # the symbol's value in the traced call; one traced at 1 (a KV cache one token
                    # long: squall.symbolic.ShapeEnv.traced_at_one) is compiled for 2 or more, since
                    # torch's shape environment makes a hint of 1 the constant 1 (a kernel for that
                    # size alone): the guards then send a call of size 1 to a static compilation
                    hints.setdefault(name, max(n.env.symbols[name][0], 2))
                dims.append(size_source(n))
            else:
                dims.append(int(n))
        inputs.append((tuple(dims), p.dtype, p.device, tuple(range(len(dims)))))  # squall's values are contiguous
    return SymbolicSpec(hints, inputs)


def _fake_inputs(spec: SymbolicSpec, fake_mode, shape_env) -> list[torch.Tensor]:
    """Dense fake tensors with the spec's sizes and memory orders, each squall size symbol one torch symbol."""
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

    fakes = []
    with fake_mode:
        for dims, dtype, device, order in spec.inputs:
            sizes = [size(n) for n in dims]
            # laid out outermost-first in `order`, then viewed in the input's own dimension order
            laid = torch.empty([sizes[d] for d in order], dtype=dtype, device=device)
            fakes.append(laid.permute([order.index(d) for d in range(len(order))]))
    return fakes


def spec_examples(spec: SymbolicSpec) -> list[torch.Tensor]:
    """Real example tensors at the symbols' traced values, laid out in the spec's memory orders
    (values drawn as squall_inductor.regions.example_inputs draws them)."""
    out = []
    for dims, dtype, device, order in spec.inputs:
        sizes = [n if type(n) is int else eval(n, {"__builtins__": {}}, dict(spec.hints)) for n in dims]  # noqa: S307 - squall's own size source
        laid = example_tensor([sizes[d] for d in order], dtype, device)
        out.append(laid.permute([order.index(d) for d in range(len(order))]))
    return out


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
        graph = views_as_reshapes(make_fx(fn, tracing_mode="symbolic")(*fakes))
    return graph, fakes, fake_mode


def guards_source(fake_mode, fakes: Sequence[torch.Tensor]) -> str:
    """The guards inductor's compile left in the shape environment, over `L['t0']`, ..., as Python."""
    return fake_mode.shape_env.produce_guards_expression(list(fakes), ignore_static=False) or "True"


def compile_symbolically(fn: Callable, spec: SymbolicSpec, one_unit: bool, compile: Callable[..., T], *, split_build: bool = True) -> T:
    """`compile(graph, fakes, fake_mode, settings)` for `fn` traced at the spec's symbolic sizes,
    with the first of the wrapper attempts (squall_inductor.wrappers) that compiles. The first attempt
    takes the first trace; a later one traces again, in a fresh shape environment (a failed compile
    leaves its guards in the one it used)."""
    traced = [trace_symbolically(fn, spec)]

    def attempt(settings: dict) -> T:
        return compile(*(traced.pop() if traced else trace_symbolically(fn, spec)), settings)

    return first_that_compiles(wrapper_attempts(traced[0][0], one_unit, spec.on_cpu, split_build=split_build), attempt)


def compile_in_process(fn: Callable, spec: SymbolicSpec, *, one_unit: bool = False) -> tuple[Callable, str]:
    """(compiled, guard source): `fn` compiled by inductor in this process for the spec's
    symbolic sizes; with `one_unit`, a CPU region with matmuls as one C++ unit (squall_inductor.wrappers).
    Raises what inductor raises where it cannot compile `fn`."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    def compile(graph: torch.fx.GraphModule, fakes: list, fake_mode: Any, settings: dict) -> tuple[Callable, str]:
        context = torch._guards.TracingContext(fake_mode)
        with (
            torch._guards.tracing(context),
            inductor_config.patch(fx_graph_cache=False, **EAGER_NUMERICS, **SYMBOLIC_CONFIG, **settings),
            torch._functorch.config.patch(enable_autograd_cache=False),
            inductor_config.patch(output_layouts(fn)),
        ):
            compiled = compile_fx(graph, fakes)
        return compiled, guards_source(fake_mode, fakes)

    return compile_symbolically(fn, spec, one_unit, compile, split_build=False)


_READ = re.compile(r"L\['t(\d+)'\]\.(size|stride)\(\)")
_CONSTANT_DIM = re.compile(r"L\['t(\d+)'\]\.(size|stride)\(\)\[(\d+)\] == (\d+)")


def _whole_tuples(source: str, ranks: Sequence[int]) -> str:
    """The guard source with an input's per-dimension size (or stride) equalities to constants,
    where they cover every dimension, as one comparison of the whole tuple: a weight's
    `size()[0] == 32 and size()[1] == 32` becomes `size()== (32, 32)`, one C comparison where
    there were four steps of Python. Only where the source is one conjunction (no `or`, `not`,
    or parenthesised `and`), so every conjunct stands alone."""
    parts = source.split(" and ")
    if " or " in source or "not " in source or any(p.count("(") != p.count(")") for p in parts):
        return source
    constant: dict[tuple[str, str], dict[int, str]] = {}
    for part in parts:
        m = _CONSTANT_DIM.fullmatch(part.strip())
        if m:
            constant.setdefault((m.group(1), m.group(2)), {})[int(m.group(3))] = m.group(4)
    whole = {key: dims for key, dims in constant.items() if sorted(dims) == list(range(ranks[int(key[0])]))}
    kept, placed = [], set()
    for part in parts:
        m = _CONSTANT_DIM.fullmatch(part.strip())
        key = (m.group(1), m.group(2)) if m else None
        if key not in whole:
            kept.append(part)
        elif key not in placed:  # the tuple comparison stands where the first of its dimensions stood
            placed.add(key)
            dims = whole[key]
            kept.append(f"L['t{key[0]}'].{key[1]}() == ({''.join(dims[d] + ', ' for d in range(len(dims)))})")
    return " and ".join(kept)


def guard_function(source: str, ranks: Sequence[int]) -> Callable[[Sequence[torch.Tensor]], bool]:
    """torch's guard expression over `L['t0'].size()[0]`, ... as a function of the inputs (of
    these ranks) that reads each input's sizes and strides once (torch builds a new tuple at
    every `.size()`) and compares a constant shape as one tuple (`_whole_tuples`)."""
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

    count = len(ranks)
    body = _READ.sub(lambda m: f"{m.group(2)}{m.group(1)}", _whole_tuples(source, ranks)).replace("L['t", "t").replace("']", "")
    lines = ["def holds(args):", f"  {''.join(f't{i}, ' for i in range(count))}= args"]
    lines += [f"  size{i}, stride{i} = t{i}.shape, t{i}.stride()" for i in range(count)]
    lines.append(f"  return bool({body})")
    namespace = dict(SYMPY_INTERP)
    exec(compile("\n".join(lines) + "\n", "<squall-inductor-region-guards>", "exec"), namespace)  # noqa: S102 - torch's guard source
    holds = namespace["holds"]
    holds.source = source  # type: ignore[attr-defined] - shown by tests
    return holds


def output_shape_check(inputs: Sequence[TensorProxy], outputs: Sequence[Any]) -> Callable[[Sequence[torch.Tensor], Sequence[Any]], bool]:
    """A function of a call's inputs and a region's results saying whether each result tensor
    has the sizes the trace gives it, with its symbolic sizes evaluated at this call's values of
    the symbols (read from the inputs that hold them as a dimension). A few hundred nanoseconds:
    one tuple comparison per output. A size whose symbols no input holds is not compared."""
    reads = symbol_reads(inputs)
    checks, used = [], set()
    for k, out in enumerate(outputs):
        if not isinstance(out, TensorProxy):
            continue
        if all(type(n) is not SymInt or symbols_of(n) <= set(reads) for n in out.shape):
            used |= symbols_of([n for n in out.shape if type(n) is SymInt])
            checks.append(f"outs[{k}].shape == ({''.join(size_source(n) + ', ' for n in out.shape)})")
        else:  # some sizes cannot be known from the inputs: compare the rank and the rest
            checks.append(f"len(outs[{k}].shape) == {len(out.shape)}")
            checks.extend(f"outs[{k}].shape[{d}] == {size_source(n)}" for d, n in enumerate(out.shape)
                          if type(n) is not SymInt or symbols_of(n) <= set(reads))
            used |= {s for n in out.shape if type(n) is SymInt and symbols_of(n) <= set(reads) for s in symbols_of(n)}
    lines = ["def fits(args, outs):", f"  if len(outs) != {len(outputs)}:", "    return False"]
    lines += [f"  {symbol} = args[{reads[symbol][0]}].shape[{reads[symbol][1]}]" for symbol in sorted(used)]
    lines.append(f"  return {' and '.join(checks) or 'True'}")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines) + "\n", "<squall-inductor-region-output-shapes>", "exec"), namespace)  # noqa: S102 - squall's own size source
    return namespace["fits"]


class SymbolicRegion:
    """A region compiled once for its symbolic sizes, and once more for each other memory order
    of its inputs it is called with (a decoding step's first cache is a transposed view, later
    ones are contiguous) and for each set of its symbols a call has at 1 (a batch of 1, which
    inductor specialises: that compilation serves it at every length); a call no such
    compilation's guards admit (a bound inductor assumed, a strided view) runs a static
    compilation for its own shapes and strides, for the first MAX_STATIC_LAYOUTS such layouts;
    the later ones run the region's torch calls.

    `compile(spec)` returns (compiled, guard source): `compile_in_process` by default, or
    squall_inductor.worker's RegionCompiler.symbolic, in its worker process; `compile_ordered`
    does the same for other memory orders (`compile` by default), and `compile_static`
    (CompiledRegion's `compile`) compiles the static fallbacks, in this process by default.
    With `background`, those later compilations run in a thread (they wait on the worker
    process) while the calls that need them run the region's torch calls, so a user's call
    never waits seconds for inductor.

    Each compilation is run once beside the region's torch calls on examples like the inputs it
    is for, before it serves a call (squall_inductor.regions.checked): one that computes other
    values serves none, its calls run the torch calls, with a warning.

    With `outputs` (the region's output proxies), every call compares its results' sizes with
    the trace's, evaluated for the call (`output_shape_check`): a compilation whose result
    disagrees (its guards admitted a call it cannot serve) is never returned; the call, and
    every later one it would have served, runs the region's torch calls, with a warning.
    """

    def __init__(self, fn: Callable, proxies: Sequence[TensorProxy], *, outputs: Sequence[Any] | None = None,
                 compile: Callable[[SymbolicSpec], tuple[Callable, str]] | None = None,
                 compile_ordered: Callable[[SymbolicSpec], tuple[Callable, str]] | None = None,
                 compile_static: Callable[[Sequence[torch.Tensor]], Callable] | None = None,
                 background: bool = False):
        self.fn = fn
        self.spec = symbolic_spec(proxies)
        compile = compile or (lambda spec: compile_in_process(fn, spec))
        self.compile_ordered = compile_ordered or compile
        self.compile_static = compile_static
        self.background = background
        self.compiled, self.holds = self._checked(self._guarded(compile(self.spec)), self.spec)
        # (memory orders, symbols at 1) -> (compiled, holds): the symbolic compilations for other
        # memory orders, and for sizes of 1 (a batch of 1, every length one compilation)
        self.ordered: dict[tuple, tuple[Callable, Callable[[Sequence[torch.Tensor]], bool]]] = {}
        self.static: dict[tuple, Callable] = {}  # layout -> a static compilation, for calls no guards admit
        self._pending: set[tuple] = set()  # the compilations under way in the background
        self._lock = threading.Lock()
        self.fits = output_shape_check(proxies, outputs) if outputs is not None else None
        # where a call's inputs hold each size symbol as a dimension: which of them are 1 in a call
        self._lone = [(name, i, d) for name, (i, d) in symbol_reads(proxies).items() if name in self.spec.hints and d is not None]

    def _guarded(self, compiled_and_source: tuple[Callable, str]) -> tuple[Callable, Callable[[Sequence[torch.Tensor]], bool]]:
        compiled, source = compiled_and_source
        return compiled, guard_function(source, [len(dims) for dims, *_ in self.spec.inputs])

    def _checked(self, guarded: tuple[Callable, Callable[[Sequence[torch.Tensor]], bool]], spec: SymbolicSpec) -> tuple[Callable, Callable[[Sequence[torch.Tensor]], bool]]:
        """A symbolic compilation for `spec`, having run it beside the region's torch calls on
        examples in the spec's memory orders, at the spec's sizes and at other sizes (each symbol
        moved by the first of OTHER_SIZES_BY its guards admit), where its guards admit them
        (squall_inductor.regions.checked: raises OtherValues where they differ): it serves every
        length, and the judge compares a plan at one call's lengths only."""
        compiled, holds = guarded
        examples = spec_examples(spec)
        if holds(examples):
            checked(compiled, self.fn, examples)
        if spec.hints:
            for by in OTHER_SIZES_BY:
                examples = spec_examples(spec.moved(by))
                if holds(examples):
                    _checked_where_torch_runs(compiled, self.fn, examples)
                    break
        return guarded

    def __call__(self, *args: torch.Tensor):
        run = self.compiled if self.holds(args) else self._other(args)
        out = tuple(run(*args))  # inductor returns a list; squall's regions, a tuple
        if self.fits is None or run is self.fn or self.fits(args, out):
            return out
        return self._distrusted(run, args, out)

    def _distrusted(self, run: Callable, args: Sequence[torch.Tensor], out: tuple) -> tuple:
        """The call's result from the region's torch calls, where the compilation `run` returned
        sizes the trace does not give (never silently wrong); `run` serves no later call."""
        got = [list(o.shape) if isinstance(o, torch.Tensor) else type(o).__name__ for o in out]
        warnings.warn(f"squall-inductor: a symbolic region's compilation returned sizes {got} for inputs of sizes "
                      f"{[list(a.shape) for a in args]}, which its trace does not give; it and the calls it would serve "
                      "run the region's torch calls (a bug to report to squall-inductor)", SquallWarning, stacklevel=2)
        with self._lock:
            if self.compiled is run:
                self.compiled = self.fn
            for key, (compiled, holds) in list(self.ordered.items()):
                if compiled is run:
                    self.ordered[key] = (self.fn, holds)
            for key, compiled in list(self.static.items()):
                if compiled is run:
                    self.static[key] = self.fn
        return tuple(self.fn(*args))

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background compilations under way; whether none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._pending and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.01)
        return not self._pending

    def _other(self, args: Sequence[torch.Tensor]) -> Callable:
        """What runs a call the first symbolic compilation's guards refuse."""
        for compiled, holds in tuple(self.ordered.values()):  # a later symbolic compilation whose guards admit it
            if holds(args):
                return compiled
        orders = memory_orders(args)
        ones = frozenset(name for name, i, d in self._lone if args[i].shape[d] == 1)
        key = (orders, ones)
        if (ones or any(order != tuple(range(len(order))) for order in orders)) and (key in self.ordered or self._count(static=False) < MAX_SYMBOLIC_VARIANTS):
            spec = self.spec.with_orders(orders).with_ones(ones)
            what = "memory order" if not ones else f"sizes of 1 ({', '.join(sorted(ones))})"
            ordered = self._get(self.ordered, key, lambda: self._checked(self._guarded(self.compile_ordered(spec)), spec), (self.fn, _never), what)
            if ordered is None:
                return self.fn  # its compilation is under way
            if ordered[1](args):
                return ordered[0]
        shapes = layout(args)
        if shapes not in self.static and self._count(static=True) >= MAX_STATIC_LAYOUTS:
            return self.fn
        layouts = layout_of(args)  # not the tensors: a background compile makes its own examples

        def compile_static() -> Callable:
            examples = examples_for(layouts)
            return checked(CompiledRegion(self.fn, examples, compile=self.compile_static), self.fn, examples)

        static = self._get(self.static, shapes, compile_static, self.fn, "shapes and strides")
        return self.fn if static is None else static

    def _count(self, static: bool) -> int:
        """The static fallbacks (or the later symbolic compilations) compiled or under way."""
        pending = sum(1 for what, _ in list(self._pending) if (what == "shapes and strides") == static)
        return len(self.static if static else self.ordered) + pending

    def _get(self, table: dict, key: tuple, build: Callable[[], Any], torch_calls: Any, what: str) -> Any:
        """table[key], compiled by `build` where missing: now, or in the background (None meanwhile)."""
        found = table.get(key)
        if found is not None:
            return found
        with self._lock:
            found = table.get(key)
            if found is not None or (what, key) in self._pending:
                return found
            if not self.background:
                table[key] = self._compiled_or_torch(build, torch_calls, what)
                return table[key]
            self._pending.add((what, key))

        def run() -> None:
            try:
                table[key] = self._compiled_or_torch(build, torch_calls, what)
            finally:
                self._pending.discard((what, key))
                _under_way.discard(threading.current_thread())

        thread = threading.Thread(target=run, name="squall-inductor-region-variant", daemon=True)
        if not _join_registered.is_set():
            _join_registered.set()
            atexit.register(_join_at_exit)  # after the worker's own exit hook: it runs first
        _under_way.add(thread)
        thread.start()
        return None

    def _compiled_or_torch(self, compile: Callable[[], Any], torch_calls: Any, what: str) -> Any:
        # the call must not fail where the torch plan would not: the region's own torch calls compute the same thing
        try:
            return compile()
        except Exception as e:  # noqa: BLE001
            if compiling_stopped():  # the interpreter is exiting: nothing to say
                return torch_calls
            warnings.warn(f"squall-inductor: inductor could not compile a symbolic region for its inputs' {what} "
                          f"({_first_line(e)}); calls with them run its torch calls", SquallWarning, stacklevel=4)
            return torch_calls


def _checked_where_torch_runs(compiled: Callable, fn: Callable, examples: Sequence[torch.Tensor]) -> None:
    """`checked(compiled, fn, examples)` where the torch calls `fn` take these examples (sizes a
    symbolic region was not traced at may break a relation its trace relied on: nothing to
    compare there); a compilation that raises where they run raises OtherValues."""
    try:
        expected = tuple(fn(*examples))
    except Exception:  # noqa: BLE001 - sizes no call of the program has
        return
    try:
        checked(compiled, fn, examples, expected)
    except OtherValues:
        raise
    except Exception as e:  # noqa: BLE001 - a call its guards admit would raise where the torch calls do not
        raise OtherValues(f"inductor's compilation raised {_first_line(e)} at sizes "
                          f"{[list(a.shape) for a in examples]} its guards admit, where its torch calls run") from e


def _never(args: Sequence[torch.Tensor]) -> bool:
    return False


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"
