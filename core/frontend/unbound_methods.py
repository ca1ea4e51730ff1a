"""torch.Tensor's C methods held as values and called with a proxy: `op = torch.Tensor.__radd__`.

A `TensorProxy` is not a `torch.Tensor`. The methods torch.Tensor inherits from its C base
are descriptors that check their first argument's type before anything else sees the call,
so `torch._C.TensorBase.cfloat(proxy)` is a TypeError ("descriptor 'cfloat' for
'torch._C.TensorBase' objects doesn't apply to a 'TensorProxy' object") where
`proxy.cfloat()` traces. Nothing on torch.Tensor is replaced to change that (a class
attribute would change every thread's tensors while any program is traced). Instead, where
tracing hands a user's code a value (`stand_in_for`): the function compiled itself
(`squall.jit(torch.Tensor.cfloat)`), a global, closure variable or default argument of a
function it runs as a recording copy, an attribute it reads (squall.frontend.state_guards),
such a method object is given as its `UnboundMethod` stand-in: called with a proxy first, it
is the proxy's own method (`torch.Tensor.f(proxy, ...)` is `proxy.f(...)`, as for a tensor);
any other call goes to torch's method itself.

Not covered: the method named in place in the program's code (`torch.Tensor.cfloat(x)`
written out: an attribute of the class, which tracing does not see being read), and a method
object held elsewhere (inside a list or a `functools.partial` of torch's). Those are torch's
TypeError while tracing, and squall then runs the call eagerly with a warning saying so
(squall.jit); only a TensorProxy that is a torch.Tensor would take them. The methods
torch.Tensor defines in Python (`__rmatmul__`, `__rsub__`, `__format__`) honour
`__torch_function__` and trace however they are reached.
"""
from __future__ import annotations

import threading
import types
from typing import Any

import torch

from ..proxies import TensorProxy

__all__ = ["UnboundMethod", "stand_in_for"]


class UnboundMethod:
    """A method of torch.Tensor's C base that also takes a proxy as its first argument."""

    __slots__ = ("method", "name")

    def __init__(self, method: Any, name: str):
        self.method = method
        self.name = name

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        return self if obj is None else self.method.__get__(obj, cls)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args and type(args[0]) is TensorProxy:
            return getattr(args[0], self.name)(*args[1:], **kwargs)
        return self.method(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<squall's stand-in for torch.Tensor.{self.name} while tracing>"


_METHOD_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)
_lock = threading.Lock()
_stand_in_of: dict[int, UnboundMethod] = {}  # id of torch's method object -> its stand-in


def _built_stand_ins() -> dict[int, UnboundMethod]:
    # the methods torch.Tensor inherits from its C base; those torch.Tensor defines in Python
    # already honour __torch_function__, and so take a proxy
    global _stand_in_of
    with _lock:
        if not _stand_in_of:
            own = vars(torch.Tensor)
            _stand_in_of = {  # torch's class attributes: never freed, so their ids stay theirs
                id(method): UnboundMethod(method, name)
                for name, method in vars(torch._C.TensorBase).items()
                if isinstance(method, _METHOD_TYPES) and name not in own
            }
    return _stand_in_of


def stand_in_for(value: Any) -> Any:
    """The stand-in of a torch.Tensor C method object, else `value` itself."""
    if type(value) not in _METHOD_TYPES:
        return value
    return _built_stand_ins().get(id(value), value)
