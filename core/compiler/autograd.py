"""Running a differentiated compilation: generated forward and backward inside one autograd.Function.

PyTorch's autograd sees one node per call of the compiled program: its forward runs
the generated forward function (which returns the outputs and the tensors the
backward reads), its backward runs the generated backward function. So
`loss.backward()`, `torch.autograd.grad`, optimizers, `.grad` accumulation and hooks
on the inputs behave as in eager, whichever executors the two traces were planned on.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from ..market.executor import Executor
from ..proxies import NumberProxy, TensorProxy, symbol_reads
from ..symbol import BoundSymbol, Symbol, flat_proxies
from ..trace import Trace
from .gradients import Differentiated

__all__ = ["BackwardRun", "autograd_function", "calling_trace"]


class BackwardRun(NamedTuple):
    """What the first backward of one kind (which outputs got no gradient) met at run time."""

    outputs_without_gradient: frozenset[int]  # positions among the Function's outputs
    # each input of the backward trace that ran (saved values, then the cotangents given): its
    # tensor's strides, None for a number; a fusion executor compiles for these layouts
    input_strides: tuple[tuple[int, ...] | None, ...]


def _same_layout(shape: Sequence[int], strides: Sequence[int], others: Sequence[int]) -> bool:
    """Whether two strides lay a tensor of `shape` out alike: equal at every dimension of 2 or
    more elements (a dimension of size 1 is stepped over whatever its stride)."""
    return all(a == b for n, a, b in zip(shape, strides, others) if n > 1)


# the one call the program's generated function makes: the autograd.Function's apply
_APPLY = Symbol("squall.autograd_function", "autograd_function", lambda *inputs: None, is_prim=True)
_RUNNER = Executor("squall", default=False)


def autograd_function(
    diff: Differentiated,
    forward_fn: Callable,
    backward_fn: Callable,
    name: str,
    backward_without: Callable[[frozenset[str]], Callable | None] | None = None,
    backwards_run: dict[frozenset[str], BackwardRun] | None = None,
    gradient_layouts: Sequence[tuple[int, ...] | None] | None = None,
) -> type[torch.autograd.Function]:
    """A torch.autograd.Function running `forward_fn` (inputs -> (outputs, saved)) and
    `backward_fn` ((a list of the saved tensors, which it may empty), *cotangents -> gradients)
    for the traces in `diff`.

    With `backward_without` (names of the outputs that got no gradient -> a backward function
    taking the saved tensors and the other cotangents, or None where there is none), a call
    whose outputs did not all get a gradient (`logits, loss = model(...)`, then
    `loss.backward()`) runs that backward: no zeros are made for the missing cotangents and
    nothing is computed from them, as in eager's autograd. Without it, missing cotangents
    are zeros.

    `gradient_layouts` (strides per gradient, in `diff.grads_for`'s order; None: any) lays each
    gradient out so where the backward computed it otherwise (squall.compiler.pipeline's
    `_gradient_layouts`: after a forward region kept its saved values in its own layout).

    `backwards_run` (filled as backwards run) maps the names of the outputs each backward run so
    far found without a gradient (the empty set: the full backward) to what its first run met
    (`BackwardRun`): which backward the calls need, and its inputs' layouts (squall.runtime.tiers
    plans that one, for those)."""
    inputs = diff.forward.inputs
    outputs = flat_proxies(diff.forward.output[0])
    differentiable = {p.name for p in diff.differentiable_outputs}
    # each differentiable output's cotangent slot, and the output positions that feed it (an
    # output returned twice gets the sum of both gradients)
    cotangent_names = [p.name for p in diff.differentiable_outputs]
    feeds = [[i for i, p in enumerate(outputs) if p.name == n] for n in cotangent_names]
    non_differentiable = [i for i, p in enumerate(outputs) if p.name not in differentiable and type(p) is TensorProxy]
    grad_slot = {p.name: i for i, p in enumerate(inputs)}
    grad_positions = [grad_slot[n] for n in diff.grads_for]
    n_inputs = len(inputs)
    variants: dict[frozenset[str], Callable | None] = {}  # built at the first backward that needs each
    zeros_like = [(p.shape, p.dtype, p.device) for p in diff.differentiable_outputs]
    # a symbolic output's shape is known at run time only: the forward keeps the call's shapes,
    # for the zeros that stand in for an absent cotangent
    symbolic_shapes = any(any(type(n) is not int for n in p.shape) for p in diff.differentiable_outputs)
    # run-time numbers the backward reads (the `s` of `x * s`) are kept beside the saved tensors
    numbers_at = [i for i, p in enumerate(diff.saved) if type(p) is NumberProxy]
    run_so_far = {} if backwards_run is None else backwards_run
    full = frozenset()
    # by the outputs a backward runs without: the saved tensors it reads, and those it leaves unread.
    # A backward keeps the ones it leaves unread for a later backward of this call's other outputs,
    # as eager's autograd frees only the nodes its backward reached (`a, b = f(x)`, then `a.backward()`
    # and `b.backward()`, their graphs disjoint): that later backward runs where it reads none freed.
    # The saved tensors every backward reads its size symbols from (the first holding each) are kept
    # with them: a few tensors eager would have freed, in this case only
    tensor_positions = frozenset(range(len(diff.saved))) - set(numbers_at)
    sized = frozenset(i for i, _ in symbol_reads(diff.saved).values()) & tensor_positions
    reads: dict[frozenset[str], tuple[frozenset[int], frozenset[int]]] = {}

    def read_and_unread(key: frozenset[str]) -> tuple[frozenset[int], frozenset[int]]:
        found = reads.get(key)
        if found is None:
            # the backward that runs for `key`: its own where one was built, else the full one (absent
            # cotangents made zeros)
            own = diff.backward_without(key) if key and variants.get(key) is not None else None
            read = _saved_read(own or diff.backward, diff.saved) & tensor_positions
            # (the full backward reached every output: eager frees all, whatever it left unread)
            found = reads[key] = (read, tensor_positions - read if key else frozenset())
        return found

    def keep(ctx, values: dict[int, tuple[torch.Tensor, int]]) -> None:
        # each with its version when kept: a later write in place into it raises as eager's unpacking does
        ctx.kept = values if values.keys() - sized else None

    def forward(ctx, *args):
        if backward_without is not None:
            ctx.set_materialize_grads(False)
        outs, saved = forward_fn(*args)
        if numbers_at:
            ctx.saved_numbers = [saved[i] for i in numbers_at]
            saved = [v for i, v in enumerate(saved) if i not in numbers_at]
        ctx.save_for_backward(*saved)
        if symbolic_shapes:
            ctx.cotangent_shapes = [outs[positions[0]].shape for positions in feeds]
        if non_differentiable:
            ctx.mark_non_differentiable(*(outs[i] for i in non_differentiable))
        return tuple(outs)

    def backward(ctx, *grads):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "squall: double backward (create_graph=True, or a gradient of a gradient) through a compiled "
                "function is not supported; call the original function for higher-order gradients"
            )
        cotangents = []
        absent = []
        for slot, positions in enumerate(feeds):
            g = None
            for i in positions:
                if grads[i] is not None:
                    g = grads[i] if g is None else g + grads[i]
            if g is None:
                absent.append(slot)
            cotangents.append(g)
        run = backward_fn
        key = frozenset(cotangent_names[slot] for slot in absent) if absent else full
        first_of_its_kind = key not in run_so_far
        if absent:
            if key not in variants:
                variants[key] = backward_without(key)
            run = variants[key]
            if run is None:  # no backward for this case: the missing cotangents are zeros
                run = backward_fn
                for slot in absent:
                    shape, dtype, device = zeros_like[slot]
                    if symbolic_shapes:
                        shape = ctx.cotangent_shapes[slot]
                    cotangents[slot] = torch.zeros(shape, dtype=dtype, device=device)
            else:
                cotangents = [g for g in cotangents if g is not None]
        read, unread = read_and_unread(key)
        try:
            saved = list(ctx.saved_tensors)
        except RuntimeError:
            # freed by an earlier backward of this call: this one runs where that one left every
            # tensor it reads (else eager's error: its graph shared a node with the earlier one's)
            kept = getattr(ctx, "kept", None) or {}
            if not read | sized <= kept.keys():
                raise
            if any(kept[i][0]._version != kept[i][1] for i in read):
                raise RuntimeError("one of the variables needed for gradient computation has been modified by an inplace "
                                   "operation (a value a compiled call saved for its backward, written after an earlier backward "
                                   "of the call)") from None
            saved = [kept[i][0] if i in kept else None for i in range(len(diff.saved)) if i not in numbers_at]
            keep(ctx, {i: t for i, t in kept.items() if i not in read or i in sized})
        else:
            # as eager's autograd frees a node's saved tensors once it has run (unless retain_graph):
            # the backward then frees each after its last use, and its peak memory stays eager's
            ctx.maybe_clear_saved_tensors()
            kept = {i: saved[i - sum(1 for n in numbers_at if n < i)] for i in unread | sized} if unread else {}
            keep(ctx, {i: (t, t._version) for i, t in kept.items()})
        for i, value in zip(numbers_at, ctx.saved_numbers if numbers_at else ()):
            saved.insert(i, value)
        if first_of_its_kind:
            strides = tuple(tuple(v.stride()) if isinstance(v, torch.Tensor) else None for v in (*saved, *cotangents))
            run_so_far[key] = BackwardRun(frozenset(i for slot in absent for i in feeds[slot]), strides)
        if torch._C._is_any_autocast_enabled():
            # `loss.backward()` inside the autocast block: the backward trace holds its dtypes, and
            # autocast casting a call in it again would compute in another dtype than traced
            with torch._C._DisableAutocast():
                computed = run(saved, *cotangents)
        else:
            computed = run(saved, *cotangents)
        result = [None] * n_inputs
        for position, g in zip(grad_positions, computed):
            result[position] = g
        if gradient_layouts is not None:
            for position, strides in zip(grad_positions, gradient_layouts):
                g = result[position]
                if strides is not None and isinstance(g, torch.Tensor) and not _same_layout(g.shape, g.stride(), strides):
                    result[position] = torch.empty_strided(g.shape, strides, dtype=g.dtype, device=g.device).copy_(g)
        return tuple(result)

    # an input that requires grad, other than a parameter, which no differentiated call reads (a
    # tensor attribute the program overwrites unread, `self.aux_loss = ...`, or reads detached,
    # holding the last call's result): eager's graph has no edge to it, and one here would reach
    # the last call's graph, its backward running again (its saved tensors freed: it raised) and
    # kept alive by each call
    ungraded = tuple(grad_slot[n] for n in diff.unlinked if not getattr(inputs[grad_slot[n]], "_is_param", False))
    return type(f"SquallFunction_{name}", (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward), "inputs_cut_from_graph": ungraded,
    })


def _saved_read(backward: Trace, saved: Sequence[object]) -> frozenset[int]:
    """The positions in `saved` of the values the backward trace reads or returns."""
    used = {p.name for bsym in backward.bsyms for p in bsym.input_proxies()} | {p.name for p in flat_proxies(backward.output)}
    return frozenset(i for i, p in enumerate(saved) if getattr(p, "name", None) in used)


def calling_trace(traced: Trace, function: type[torch.autograd.Function]) -> Trace:
    """The program as one call of `function.apply` on its inputs, returning its output structure.

    An input the program returns as it is (`return x, y`) is the caller's tensor, as in eager
    (`out[0] is x`): the Function's output in its place, a new tensor aliasing it, goes unused."""
    inputs = {p.name for p in traced.inputs if type(p) is TensorProxy}
    outputs = tuple(flat_proxies(traced.output))
    if any(p.name in inputs for p in outputs):
        taken = inputs | {p.name for p in outputs}
        outputs = tuple(_unused_like(p, taken) if p.name in inputs else p for p in outputs)
    call = BoundSymbol(_APPLY, tuple(traced.inputs), {}, outputs, executor=_RUNNER, impl=_apply_cutting(function))
    return Trace.from_trace(traced, bsyms=[call], provenance="the program: one torch.autograd.Function running the forward and backward traces")


def _unused_like(p: TensorProxy, taken: set[str]) -> TensorProxy:
    """A proxy like `p` under a name not in `taken` (which it joins): an output slot nothing reads."""
    n = 0
    while f"{p.name}_unused{n}" in taken:
        n += 1
    taken.add(f"{p.name}_unused{n}")
    return TensorProxy(f"{p.name}_unused{n}", like=p)


def _apply_cutting(function: type[torch.autograd.Function]) -> Callable:
    """`function.apply`, given detached the inputs it names in `inputs_cut_from_graph`."""
    cut = function.inputs_cut_from_graph
    if not cut:
        return function.apply

    def apply(*args):
        args = list(args)
        for i in cut:
            args[i] = args[i].detach()
        return function.apply(*args)

    return apply
