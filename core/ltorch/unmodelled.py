"""Programs squall's traces do not model, refused while tracing: the call runs eagerly instead,
with a warning saying why (squall.runtime.calls), so its answer is eager's."""
from __future__ import annotations

__all__ = ["UnmodelledMode", "NotModelled", "UndecidedOverlap"]


class UnmodelledMode(RuntimeError):
    """While traced, the program entered a mode squall's traces do not model: torch.autocast
    (its dtype casts), grad mode turned on in a call made without it around tensors that require
    grad (`torch.enable_grad()` under the caller's no_grad: eager records a graph there), or
    inference mode entered or left. Such a program runs eagerly (squall.runtime.calls)."""


class NotModelled(UnmodelledMode, NotImplementedError):
    """The program uses something valid in PyTorch that squall's traces do not model (an `out=`
    tensor, a generator, a write through a view an opaque call returned, an in-place change of a
    tensor's layout): raised while tracing, before the call is compiled. Like an unmodelled mode,
    the call runs eagerly from then on (a module: splits), with a warning saying why, so the
    program's answer is eager's."""


class UndecidedOverlap(UnmodelledMode):
    """An in-place op whose operand is a view of the tensor it writes (or of its base) and may
    share its elements where eager does not raise (views that are not dense: eager's answer is its
    loop order's), or where the call's layouts are unknown: the program runs eagerly."""
