"""`isinstance` in a traced program answers for a proxy as for the value it stands for.

While a program is traced its tensors are `TensorProxy` objects and its run-time numbers
`NumberProxy` objects, neither of which is a torch.Tensor, int or float. Code that branches on
type (`isinstance(x, torch.Tensor)`, `torch.is_tensor(x)`, `isinstance(s, float)`, as
transformers does) would silently take the other branch. While tracing, `isinstance_traced()`
stands a function in front of the built-in `isinstance`: for a TensorProxy it answers as for a
torch.Tensor (a torch.nn.Parameter where the proxy stands for one), for a NumberProxy as for a
number of its `python_type`; any other object gets the built-in's answer. squall's own modules
still get the built-in's answer: there `isinstance(x, torch.Tensor)` means a real tensor.

This is the one process-wide change tracing still makes (issue 22; torch.Tensor's C methods
are no longer replaced: squall.frontend.unbound_methods). Giving only the program's own
code (its recording copies, squall.frontend.state_guards) a traced `isinstance` was tried and
is not enough: code reached otherwise (`super().forward(x)`, the `__init__` of a class the
program builds, a property getter) would silently take the other branch. The way out is a
TensorProxy that is a torch.Tensor (a wrapper subclass) and a NumberProxy whose `__class__`
is its `python_type`, which `isinstance` consults with no patch.

Why not a `__class__` property on the proxy: torch's C argument parser asks
`PyObject_IsInstance(obj, torch.Tensor)` (THPVariable_Check) and then reads the object's
memory as a tensor's, so a proxy that claims to be a torch.Tensor crashes the process
(`torch.where(mask, x, 0.0)` tries a Scalar overload with the proxy). C code calls
PyObject_IsInstance directly, never the built-in name, so it sees proxies as they are.

`type(x)` in the program's own code (a function squall runs as a recording copy) answers
torch.Tensor too (squall.frontend.state_views.traced_type). Not covered: `type(x)` in code squall does
not run as such a copy (torch's own), and code that saved the built-in `isinstance` under
another name before tracing.
"""
from __future__ import annotations

import builtins
import sys
from typing import Any

import torch

from ..proxies import NumberProxy, TensorProxy, WhileTracing

__all__ = ["isinstance_traced", "traced_isinstance"]

_builtin_isinstance = builtins.isinstance
_OWN_MODULES = "squall"  # squall (squall.frontend.tracing, ...) and its plugins (squall_nvfuser, ...)


def traced_isinstance(obj: Any, classinfo: Any, /) -> bool:
    """The built-in `isinstance`, answering for a proxy as for the value it stands for."""
    t = type(obj)
    if t is not TensorProxy and t is not NumberProxy:
        return _builtin_isinstance(obj, classinfo)
    if _builtin_isinstance(obj, classinfo):
        return True
    if sys._getframe(1).f_globals.get("__name__", "").startswith(_OWN_MODULES):
        return False  # squall's own code asks what the object is
    if t is NumberProxy:
        stands_for = obj.python_type
    else:
        stands_for = torch.nn.Parameter if getattr(obj, "_is_param", False) else torch.Tensor
    return issubclass(stands_for, classinfo)


def _install() -> None:
    builtins.isinstance = traced_isinstance


def _remove() -> None:
    builtins.isinstance = _builtin_isinstance


# the built-in `isinstance` is `traced_isinstance` within `with isinstance_traced():`
isinstance_traced = WhileTracing(_install, _remove)
