"""A user's `torch.autograd.Function` in a traced program (`MyFn.apply(x)`, as BLOOM's GeLU).

`Function.apply` hands its arguments to torch's C autograd machinery, which takes only real
tensors: called with a proxy it failed ("unwrap_if_dead(): incompatible function arguments").
While tracing, the program reaches such a class (a global, attribute or closure variable:
squall.frontend.state_guards) as a `TracedAutogradFunction`, whose `apply`:

- where no gradient is needed (no traced input requires grad, or grad mode is off) traces
  the Function's `forward` as ordinary torch ops, which squall compiles and fuses like the
  rest of the program (its `ctx` takes what forward saves, and nothing reads it);
- where a gradient may flow runs the Function whole as one opaque torch call (with a
  SquallWarning saying so): at call time it is `MyFn.apply` on real tensors, so PyTorch's
  autograd records it and the user's own `backward` computes its gradient, as in eager.

Anything else read from the class (`MyFn.forward`, a class attribute) is the class's own.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..proxies import TensorProxy, current_context

__all__ = ["TracedAutogradFunction", "is_autograd_function"]


def is_autograd_function(value: Any) -> bool:
    """A user's subclass of torch.autograd.Function (not torch's own base classes)."""
    return (
        isinstance(value, type)
        and issubclass(value, torch.autograd.Function)
        and not (value.__module__ or "").startswith("torch.")
    )


class _ForwardContext:
    """The `ctx` a traced forward gets: it keeps what forward puts there, which no backward reads
    (a traced forward is only used where no gradient is needed). Its `needs_input_grad` is
    eager's: whether each argument is a tensor that requires grad, in grad mode or not (under
    no_grad it said False for a parameter, and a forward that reads it answered otherwise)."""

    def __init__(self, args: tuple):
        self.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        self.saved_tensors: tuple = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class TracedAutogradFunction:
    """Stands for a user's autograd.Function class while a program is traced (see the module)."""

    def __init__(self, cls: type, forward: Callable):
        self._cls = cls
        self._forward = forward  # cls.forward, as a recording copy where it is the user's

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)

    def __repr__(self) -> str:
        return f"<squall's traced {self._cls.__qualname__}>"

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        ctx = current_context()
        proxies = [x for x in tree_flatten((args, kwargs))[0] if type(x) is TensorProxy]
        if ctx is None or not proxies:
            return self._cls.apply(*args, **kwargs)
        if torch.is_grad_enabled() and any(p.requires_grad for p in proxies):
            # one opaque call of the real apply: autograd records it, the user's backward runs
            return ctx.dispatch(self._cls.apply, args, kwargs)
        with torch.no_grad():  # as eager runs forward
            if _separate_setup(self._cls):
                return self._forward(*args, **kwargs)
            return self._forward(_ForwardContext(args), *args, **kwargs)


def _separate_setup(cls: type) -> bool:
    # a Function written with a separate setup_context (forward takes no ctx)
    return any("setup_context" in vars(klass) for klass in cls.__mro__ if is_autograd_function(klass))
