"""A tensor the program computed, made to require grad: `h.requires_grad = True` (or
`h.requires_grad_()`) on a value that requires none.

Eager makes such a tensor a leaf of the autograd graph: the ops after it carry a gradient back
to it, which lands in `h.grad`, a tensor's attribute that nothing reads once the call returns.
transformers' speech encoders do this to their input in training (wav2vec2, HuBERT: `hidden_states.requires_grad
= True`, for gradient checkpointing), and PEFT's `enable_input_require_grads` does it to the
input embeddings' output in a forward hook. squall models it: the value's name becomes a
*gradient root* (TracingContext.grad_roots), its proxy requires grad from there on (so do the
values computed from it afterwards, not those computed before, and reads of the flag answer as
eager's; its views, those taken before too, answer for its flag, as eager's do), and
differentiation starts a gradient there for the calls made after the flag was set
(squall.compiler.gradients); the gradient that reaches the root itself is dead code.

Everything else that changes the flag runs the call eagerly, with a warning, as before, where a
trace would differ from eager: an input's or a captured tensor's flag (the caller's tensor
changes), unsetting it, an integer tensor (eager raises), a root written in place or through a
view (eager refuses that under grad mode, and the write would replace the root's value), a root
returned (eager returns that leaf, whose `.grad` backward fills), and a program differentiated
by PyTorch's autograd or with no input that requires grad (its compiled results would not carry
the gradient eager's do: squall.compiler.pipeline asks `refuse_unmodelled_roots`).
"""
from __future__ import annotations

from typing import Any

import torch

from ..ltorch.base import UnmodelledMode
from ..proxies import TensorProxy
from ..symbol import flat_proxies

__all__ = ["set_requires_grad", "refuse_write_into_root", "refuse_unmodelled_roots"]

_CHANGES = "squall: the program changes whether a traced tensor requires grad"
_NOT_MODELLED = "eager's later ops and the caller's tensor see that change, squall's program would not"


def set_requires_grad(ctx: Any, x: TensorProxy, value: bool) -> TensorProxy:
    """`x.requires_grad = value` in the program being traced into `ctx`: `x`, its flag set where
    that is modelled (see the module's docstring); else the call runs eagerly (UnmodelledMode)."""
    value = bool(value)
    if value == x.requires_grad:
        return x
    if not value:
        raise UnmodelledMode(f"{_CHANGES} (to False): {_NOT_MODELLED}")
    if any(p is x for p in ctx.inputs) or x.name in ctx.constants:
        raise UnmodelledMode(f"{_CHANGES} (of {x.name}, an input or a tensor it captured): {_NOT_MODELLED}")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise UnmodelledMode(f"{_CHANGES} (of {x.name}, a {x.dtype} tensor, which eager refuses): {_NOT_MODELLED}")
    ctx.grad_roots.add(x.name)
    x._requires_grad = True
    # eager's views of x answer for x's flag, those taken before it was set too: a gradient
    # flows from them into the calls made from here on
    views = ctx.views
    for view in views.family_of(x)[1:]:
        if any(step.args[step.at] is x for step in views.steps.get(id(view), ())):
            ctx.grad_roots.add(view.name)
            view._requires_grad = True
    return x


def refuse_write_into_root(ctx: Any, family: Any) -> None:
    """Before an in-place write into a tensor whose family (its root and that root's views,
    squall.frontend.views) is `family`: where one of them is a gradient root, run eagerly."""
    if ctx.grad_roots and any(type(v) is TensorProxy and v.name in ctx.grad_roots for v in family):
        raise UnmodelledMode(f"{_CHANGES} and then writes in place into it or a tensor it shares memory with: "
                             "eager refuses that under grad mode, and a trace would replace the value the gradient starts at")


def refuse_unmodelled_roots(traced: Any, differentiated_by_squall: bool) -> None:
    """At compile time: run eagerly where the program's gradient roots would
    make the compiled program's results differ from eager's (a root returned as it is: eager returns
    that leaf; a result that requires grad from a program squall does not differentiate: it would
    not carry the gradient eager's does)."""
    roots = getattr(traced.context, "grad_roots", None)
    if not roots:
        return
    outputs = [p for p in flat_proxies(traced.output) if type(p) is TensorProxy]
    returned = sorted({p.name for p in outputs} & roots)
    if returned:
        raise UnmodelledMode(f"{_CHANGES} and returns it ({', '.join(returned)}): eager returns that leaf, "
                             "whose .grad backward fills; squall's result would be computed from it")
    if torch.is_grad_enabled() and not differentiated_by_squall and any(p.requires_grad for p in outputs):
        raise UnmodelledMode(f"{_CHANGES}, and squall does not differentiate this program (no input requires grad, "
                             "or PyTorch's autograd differentiates it): its results would not carry the gradient eager's do")
