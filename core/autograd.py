"""Running a differentiated compilation: generated forward and backward inside one autograd.Function.

PyTorch's autograd sees one node per call of the compiled program: its forward runs
the generated forward function (which returns the outputs and the tensors the
backward reads), its backward runs the generated backward function. So
`loss.backward()`, `torch.autograd.grad`, optimizers, `.grad` accumulation and hooks
on the inputs behave as in eager, whichever executors the two traces were planned on.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from .executor import Executor
from .gradients import Differentiated
from .proxies import NumberProxy, TensorProxy
from .symbol import BoundSymbol, Symbol, flat_proxies
from .trace import Trace

__all__ = ["autograd_function", "calling_trace"]

# the one call the program's generated function makes: the autograd.Function's apply
_APPLY = Symbol("squall.autograd_function", "autograd_function", lambda *inputs: None, is_prim=True)
_RUNNER = Executor("squall", default=False)


def autograd_function(diff: Differentiated, forward_fn: Callable, backward_fn: Callable, name: str) -> type[torch.autograd.Function]:
    """A torch.autograd.Function running `forward_fn` (inputs -> (outputs, saved)) and
    `backward_fn` (saved, cotangents -> gradients) for the traces in `diff`."""
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
    # run-time numbers the backward reads (the `s` of `x * s`) are kept beside the saved tensors
    numbers_at = [i for i, p in enumerate(diff.saved) if type(p) is NumberProxy]

    def forward(ctx, *args):
        outs, saved = forward_fn(*args)
        if numbers_at:
            ctx.saved_numbers = [saved[i] for i in numbers_at]
            saved = [v for i, v in enumerate(saved) if i not in numbers_at]
        ctx.save_for_backward(*saved)
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
        for positions in feeds:
            g = grads[positions[0]]
            for i in positions[1:]:
                g = g + grads[i]
            cotangents.append(g)
        saved = ctx.saved_tensors
        if numbers_at:
            saved = list(saved)
            for i, value in zip(numbers_at, ctx.saved_numbers):
                saved.insert(i, value)
        computed = backward_fn(*saved, *cotangents)
        result = [None] * n_inputs
        for position, g in zip(grad_positions, computed):
            result[position] = g
        return tuple(result)

    return type(f"SquallFunction_{name}", (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def calling_trace(traced: Trace, function: type[torch.autograd.Function]) -> Trace:
    """The program as one call of `function.apply` on its inputs, returning its output structure."""
    outputs = tuple(flat_proxies(traced.output))
    call = BoundSymbol(_APPLY, tuple(traced.inputs), {}, outputs, executor=_RUNNER, impl=function.apply)
    return Trace.from_trace(traced, bsyms=[call], provenance="the program: one torch.autograd.Function running the forward and backward traces")
