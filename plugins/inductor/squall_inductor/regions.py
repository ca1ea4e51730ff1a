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

import functools
import io
import pickle
import sys
import threading
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from squall.extend import (
    GRADIENT_LOOSER,
    TORCH_KERNEL_IMPLS,
    TORCH_PRIM_IMPLS,
    BoundSymbol,
    FusionRegion,
    SquallWarning,
    SymInt,
    TensorProxy,
    ValuePrinter,
    concrete_shape,
    example_tensor,
    ill_conditioned,
    largest_difference,
    load_source,
    outputs_differ,
    rounding_change,
    stride_met,
    symbol_reads,
    symbols_of,
)
from squall_inductor.direct_load import memory_extent

__all__ = [
    "torch_callable", "size_reads", "region_function", "example_inputs", "compile_with_inductor", "views_as_reshapes", "CompiledRegion",
    "layout", "like", "Layout", "layout_of", "examples_for", "region_payload", "load_region", "output_layouts", "LAYOUT_FREE",
    "unlike_torch_calls", "checked", "OtherValues",
]

# one input's (sizes, strides, dtype, device): what a compilation in another process is specialised to
Layout = tuple[tuple[int, ...], tuple[int, ...], torch.dtype, torch.device]


def torch_callable(bsym: BoundSymbol) -> Callable:
    """The torch callable the built-in torch executor runs for this call (a backward kernel's, with
    the arguments its kernels misread copied first: a region's inputs are laid out as its fused
    neighbours' kernels chose, a layer norm's saved statistics channels-last)."""
    if bsym.sym.is_prim:
        return TORCH_PRIM_IMPLS[bsym.sym.id]
    return TORCH_KERNEL_IMPLS.get(bsym.sym.id) or bsym.sym.torchfns[0]


def size_reads(region: FusionRegion) -> tuple[dict[str, tuple[str, int]], set[str]]:
    """Where the region reads each size symbol its calls' arguments or its inputs' sizes use
    (`view(t, (s0, 64))`, an input `f32[2, (s0 - 1) // 2 + 1]`): symbol -> (input name,
    dimension) for each an input holds as a whole dimension, and the set of those none does
    (such a region cannot be made a function of its inputs alone: inductor binds a symbol only
    from a dimension that is that symbol)."""
    used = symbols_of([n for p in region.inputs for n in p.shape if type(n) is SymInt])
    for b in region.calls:
        leaves = tree_flatten((b.args, b.kwargs))[0]
        leaves += [bound for x in leaves if type(x) is slice for bound in (x.start, x.stop, x.step)]  # pytree keeps a slice whole
        used |= symbols_of([x for x in leaves if type(x) is SymInt])
    reads = {symbol: (region.inputs[i].name, d) for symbol, (i, d) in symbol_reads(region.inputs).items() if symbol in used}
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
    if region.layout_free:
        # a global, not an attribute: it travels with the function to the worker, and keys what is kept on disk
        printer.globals[LAYOUT_FREE] = (tuple(region.layout_free), len(region.outputs))
    source = "\n".join(lines) + "\n"
    # registered with linecache so dynamo's and Python's tracebacks show the region's source
    load_source(source, "inductor-region", printer.globals)
    return printer.globals["region"], source


def region_payload(fn: Callable, source: str) -> bytes:
    """A region function as bytes another process can rebuild it from (`load_region`): its source
    and its globals, with modules and the torch executor's prim callables sent by name.

    Raises pickle's errors where a global cannot be sent (a user's own callable defined in a
    function); the caller then compiles the region in this process.
    """
    names = {k: v for k, v in fn.__globals__.items() if k not in ("__builtins__", "region")}
    buffer = io.BytesIO()
    _RegionPickler(buffer).dump((source, names))
    return buffer.getvalue()


def load_region(payload: bytes) -> Callable:
    """The region function `region_payload` describes, rebuilt in this process."""
    source, names = _RegionUnpickler(io.BytesIO(payload)).load()
    load_source(source, "inductor-region", names)
    return names["region"]


# the region function's global naming (positions, count) of its outputs only the backward reads
# (squall.extend.FusionRegion.layout_free): `output_layouts` lets inductor lay those out as it prefers
LAYOUT_FREE = "_squall_layout_free_outputs"


def output_layouts(fn: Callable) -> dict[str, Any]:
    """The inductor settings that compile `fn` with its layout-free outputs in inductor's own layout
    ({} where it has none): every other output keeps eager's strides.

    compile_fx keeps every output of a graph compiled alone in its traced (eager's) strides
    (`keep_output_stride`: all of an inference graph's outputs are "user visible"); a forward
    region with a convolution then computes channels-last inside (`decide_layout_opt`) and converts
    each saved activation back at its edge, and the backward region reading it runs its
    convolution backwards contiguous. A post-grad pass, run after compile_fx marked the visible
    outputs and before the graph is lowered, takes the layout-free ones off that list (what
    AOTAutograd does for the activations a forward saves): inductor then returns them as it laid
    them out (channels-last where its layout plan prefers it, eager's strides elsewhere).
    """
    free = fn.__globals__.get(LAYOUT_FREE) if hasattr(fn, "__globals__") else None
    if not free:
        return {}
    from torch._inductor import config as inductor_config
    from torch._inductor.custom_graph_pass import get_custom_graph_passes

    others = get_custom_graph_passes(inductor_config.post_grad_custom_post_pass)
    return {"post_grad_custom_post_pass": [*others, _layout_free_outputs_pass()(*free)]}


@functools.cache
def _layout_free_outputs_pass() -> type:
    # a class made at first use: it derives from inductor's CustomGraphPass, whose import costs seconds
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class LayoutFreeOutputs(CustomGraphPass):
        """Takes the outputs at `positions` off the graph's user-visible outputs (see `output_layouts`)."""

        def __init__(self, positions: Sequence[int], count: int):
            self.positions, self.count = tuple(positions), count

        def __call__(self, graph: torch.fx.Graph) -> None:
            (node,) = graph.find_nodes(op="output")
            visible = node.meta.get("user_visible_output_idxs")
            outputs = tree_flatten(node.args)[0]
            if visible is None or len(outputs) != self.count:
                return  # not the region's outputs one to one (AOTAutograd added some): eager's strides for all
            node.meta["user_visible_output_idxs"] = [i for i in visible if i not in self.positions]

        def uuid(self) -> Any:
            return ("squall layout-free outputs", 1, self.positions, self.count)

    return LayoutFreeOutputs


# inductor settings every region compiles under, so that it rounds as eager does: by default a fused
# kernel keeps float32 values where eager rounds them to float16 or bfloat16 (an explicit
# `x.to(torch.bfloat16).float()` was dropped: off by 0.0018 against eager's rounding, 1.0 in a
# bfloat16 exp chain), and the judge, comparing one call's values, passes it where they round exactly
# (zeros, small integers) and refuses the fused plan elsewhere
EAGER_NUMERICS = {"emulate_precision_casts": True}

_PRIM_IDS = {id(fn): pid for pid, fn in TORCH_PRIM_IMPLS.items()}
_KERNEL_IDS = {id(fn): kid for kid, fn in TORCH_KERNEL_IMPLS.items()}


_METHOD_WRAPPER = type(torch.Tensor.T.__get__)


class _RegionPickler(pickle.Pickler):
    # prim callables are lambdas and closures: they travel as their prim id (the torch executor's
    # backward kernels, closures too, as their kernel id), modules as their name,
    # aten operators (a training program's backward calls them: torch._ops.OpOverload, which
    # pickle cannot take) as their namespace, name and overload, a property's getter as its
    # class and name, and a function made inside
    # another that its module holds under its own name (torch's F.max_pool2d, made by
    # boolean_dispatch) as that module and name
    def persistent_id(self, obj: Any) -> tuple[str, ...] | None:
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        if isinstance(obj, torch._ops.OpOverload):
            return ("operator", obj.namespace, obj._opname, obj._overloadname)
        pid = _PRIM_IDS.get(id(obj))
        if pid is not None and TORCH_PRIM_IMPLS[pid] is obj:
            return ("prim", pid)
        kid = _KERNEL_IDS.get(id(obj))
        if kid is not None and TORCH_KERNEL_IMPLS[kid] is obj:
            return ("kernel", kid)
        if type(obj) is _METHOD_WRAPPER and type(getattr(obj, "__self__", None)) is types.GetSetDescriptorType:
            # a tensor property's getter (`torch.Tensor.T.__get__`, how the torch executor reads `x.T`)
            owner = obj.__self__.__objclass__
            return ("getter", owner.__module__, owner.__qualname__, obj.__self__.__name__)
        if isinstance(obj, types.FunctionType) and "<locals>" in obj.__qualname__:
            module = sys.modules.get(obj.__module__)
            if module is not None and getattr(module, obj.__name__, None) is obj:
                return ("attribute", obj.__module__, obj.__name__)
        return None


class _RegionUnpickler(pickle.Unpickler):
    def persistent_load(self, ref: tuple[str, ...]) -> Any:
        kind, name = ref[0], ref[1]
        if kind == "module":
            return __import__(name, fromlist=["_"])
        if kind == "attribute":
            return getattr(__import__(name, fromlist=["_"]), ref[2])
        if kind == "operator":
            return getattr(getattr(getattr(torch.ops, name), ref[2]), ref[3])
        if kind == "getter":
            owner = __import__(name, fromlist=["_"])
            for part in ref[2].split("."):
                owner = getattr(owner, part)
            return vars(owner)[ref[3]].__get__
        if kind == "kernel":
            return TORCH_KERNEL_IMPLS[name]
        return TORCH_PRIM_IMPLS[name]


def example_inputs(proxies: list[TensorProxy]) -> list[torch.Tensor]:
    """Real tensors with the proxies' metadata (a symbolic size at its traced value, read
    without a guard), drawn without touching the user's random stream; laid out as the program's
    calls met them where that is known (squall.market.fusion.stride_met), else contiguous."""
    examples = []
    for p in proxies:
        stride = stride_met(p)
        shape = concrete_shape(p.shape)
        examples.append(example_tensor(shape, p.dtype, p.device) if stride is None else strided_example(shape, stride, p.dtype, p.device))
    return examples


def compile_with_inductor(fn: Callable, args: Sequence[torch.Tensor], *, one_unit: bool = False) -> Callable:
    """`fn` compiled by inductor for inputs like `args` (their shapes, strides, dtypes, devices);
    with `one_unit`, a CPU region with matmuls as one C++ unit (squall_inductor.wrappers).

    The result takes the inputs positionally and returns a list of `fn`'s outputs; no
    Dynamo frame runs when it is called. Raises whatever inductor raises when it cannot
    compile `fn` (the caller falls back to the torch executor).
    """
    # imported here, not at the top: importing inductor costs seconds (it loads Dynamo), and the
    # plugin is imported by every squall.jit that merely asks which executors exist
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from squall_inductor.wrappers import first_that_compiles, wrapper_attempts

    graph = views_as_reshapes(make_fx(fn, tracing_mode="fake")(*args))
    # the fake mode make_fx traced in, as the context: it has a shape environment (static sizes), without
    # which inductor bypasses its FX graph and AOTAutograd caches (a region compiled by an earlier process
    # is then loaded, not compiled again), and its C++ wrapper takes the placeholders' fake values, which
    # must come from the context's mode (torch 2.10 asserts it)
    fake_mode = (torch._guards.detect_fake_mode([n.meta.get("val") for n in graph.graph.nodes if n.op == "placeholder"])
                 or FakeTensorMode(shape_env=ShapeEnv()))  # (a region without inputs)

    def compile(settings: dict) -> Callable:
        context = torch._guards.TracingContext(fake_mode)
        with torch._guards.tracing(context), inductor_config.patch({**EAGER_NUMERICS, **output_layouts(fn), **settings}):
            return compile_fx(graph, list(args), ignore_shape_env=True)

    on_cpu = all(a.device.type == "cpu" for a in args)
    return first_that_compiles(wrapper_attempts(graph, one_unit, on_cpu, split_build=False), compile)


def views_as_reshapes(graph: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`graph` with each `aten.view` a `aten.reshape` (in place; returned for chaining).

    make_fx records a `reshape` as a `view` where its fake input was laid out so that a view
    works, but inductor's decompositions may lay that input out otherwise (BLOOM: a `cat` of an
    empty cache and a transposed key, then `reshape`), and the view then fails to compile. A
    reshape is a view wherever one works, and a copy elsewhere, which is what the region's torch
    calls (reshape, or view of a layout that allows it) compute.
    """
    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    changed = False
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target is view:
            node.target = reshape
            changed = True
    if changed:
        graph.recompile()
    return graph


def layout_of(args: Sequence[torch.Tensor]) -> list[Layout]:
    """Each input's sizes, strides, dtype and device."""
    return [(tuple(a.shape), tuple(a.stride()), a.dtype, a.device) for a in args]


def examples_for(layouts: Sequence[Layout]) -> list[torch.Tensor]:
    """Example tensors with these sizes, strides, dtypes and devices (values as example_inputs draws them)."""
    return [strided_example(*layout) for layout in layouts]


def unlike_torch_calls(eager: Callable, args: list[torch.Tensor], outputs: Any, expected: Sequence[Any] | None = None) -> str:
    """How a compiled region's outputs on its example inputs differ in value from its own torch
    calls' beyond a fused kernel's rounding ("" where they agree): the judge's check of a whole
    plan, made of each region as it is compiled, so that a region installed where the judge does
    not compare (a program drawing random numbers, judged in the background; inputs too large to
    draw) was still seen to compute what its calls do; and of each later compilation of a region
    (for other strides, sizes of 1), before it serves a call (`checked`). Regions draw no random
    numbers (not claimed).

    Drawn values overflow in a long backward region (efficientvit's: NaN in most of its gradients,
    in both runs, in a few more places in one): an output the torch calls make NaN or infinite
    somewhere is compared where both runs are finite. And they make a long chain ill-conditioned
    (biogpt's 127-op backward region: gradients of 8e13, 0.13% apart): where the torch calls, run again on
    the inputs changed by a few rounding errors, move their own results by a tenth of the distance,
    rounding explains it (the judge's rule, squall.extend.ill_conditioned). `expected`: the torch
    calls' results on `args`, where the caller has them."""
    computed = list(eager(*args) if expected is None else expected)
    expected, actual = list(computed), list(outputs)
    for k, (e, a) in enumerate(zip(expected, actual)):
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and e.shape == a.shape \
                and (e.is_floating_point() or e.is_complex()) and not torch.isfinite(e).all():
            both = torch.isfinite(e) & torch.isfinite(a)
            expected[k], actual[k] = e[both], a[both]
    why = outputs_differ(expected, actual, looser=GRADIENT_LOOSER)
    if why and len(expected) == len(actual):
        # (each input changed otherwise: the difference of two equal-sized ones moves too)
        rounded = [a * rounding_change(a, seed=k) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for k, a in enumerate(args)]
        moved = list(eager(*rounded))
        # each output that differs by its own movement: one ill-conditioned output excuses no other
        if all(not outputs_differ([e], [a], looser=GRADIENT_LOOSER) or ill_conditioned(largest_difference(e, a), largest_difference(c, m))
               for e, a, c, m in zip(expected, actual, computed, moved, strict=True)):
            return ""
    return f"computes other values than its torch calls on example inputs ({why})" if why else ""


class OtherValues(RuntimeError):
    """A compilation of a region computed other values than the region's torch calls on example inputs."""


def checked(compiled: Callable, fn: Callable, examples: Sequence[torch.Tensor], expected: Sequence[Any] | None = None) -> Callable:
    """`compiled` (a later compilation of the region whose torch calls are `fn`, for inputs like
    `examples`), having run it on `examples` beside `fn` (whose results there are `expected`, where
    given); raises OtherValues where they differ (`unlike_torch_calls`): the caller then runs the
    torch calls for the calls it would serve."""
    why = unlike_torch_calls(fn, list(examples), tuple(compiled(*examples)), expected)
    if why:
        raise OtherValues(f"inductor's compilation {why}")
    return compiled


def strided_example(shape, stride, dtype: torch.dtype, device) -> torch.Tensor:
    """Example values laid out with these sizes and strides: a view of the memory the strides
    reach, so that strides which overlap work too (a gradient `expand` made, stride 0, as a sum's
    backward hands it on, cannot be copied into)."""
    return example_tensor((memory_extent(shape, stride),), dtype, device).as_strided(tuple(shape), tuple(stride))


class CompiledRegion:
    """A region compiled by inductor for its inputs' sizes and strides, compiled again for others.

    inductor's code checks its inputs' sizes and strides before it computes anything, and
    raises on a mismatch (AssertionError from its Python wrapper, RuntimeError from a one-unit
    C++ wrapper's). squall's plans do not key on strides (a region's input
    can be a transposed view an earlier call made), so a mismatch compiles the region for the
    new layout, as Dynamo's guards would recompile; from then on calls pick their compilation
    by their inputs' sizes and strides (a few hundred nanoseconds), not by catching the error.

    `compile(args)` compiles the region for inputs like `args`: `compile_with_inductor` of `fn`
    in this process by default, or squall_inductor.worker's compile in its worker process.
    """

    def __init__(self, fn: Callable, args: Sequence[torch.Tensor], compile: Callable[[Sequence[torch.Tensor]], Callable] | None = None):
        self.fn = fn
        self.compile = compile if compile is not None else (lambda examples: compile_with_inductor(fn, examples))
        self.layout = layout(args)
        self.compiled = self.compile(args)
        self.variants: dict[tuple, Callable] | None = None  # layout -> compilation, after a mismatch
        self._lock = threading.Lock()

    def __call__(self, *args: torch.Tensor):
        if self.variants is None:
            try:
                return tuple(self.compiled(*args))  # inductor returns a list; squall's regions, a tuple
            except (AssertionError, RuntimeError):  # Python wrapper's check; a one-unit C++ wrapper's
                if layout(args) == self.layout:
                    raise  # not a layout mismatch: inductor's own check of something else, or a real error
            with self._lock:
                if self.variants is None:
                    self.variants = {self.layout: self.compiled}
        key = layout(args)
        compiled = self.variants.get(key)
        if compiled is None:
            with self._lock:
                examples = [like(a) for a in args]
                try:
                    compiled = checked(self.compile(examples), self.fn, examples)
                except Exception as e:  # noqa: BLE001 - the region's own torch calls compute the same thing
                    # (BLOOM: a view of a concatenated cache that inductor's decompositions lay out
                    # otherwise); the call must not fail where the torch plan would not
                    what = str(e) if isinstance(e, OtherValues) else type(e).__name__
                    warnings.warn(f"squall-inductor: inductor could not compile a region for its inputs' strides "
                                  f"({what}); calls with those strides run its torch calls", SquallWarning, stacklevel=2)
                    compiled = self.fn
                self.variants[key] = compiled
        return tuple(compiled(*args))


def layout(args: Sequence[torch.Tensor]) -> tuple:
    """The inputs' sizes and strides: what one static compilation of a region is valid for."""
    return tuple((a.shape, a.stride()) for a in args)


def like(t: torch.Tensor) -> torch.Tensor:
    """An example tensor with `t`'s sizes, strides, dtype and device (its values drawn as example_inputs' are)."""
    return strided_example(t.shape, t.stride(), t.dtype, t.device)
