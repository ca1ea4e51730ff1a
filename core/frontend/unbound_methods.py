"""Unbound tensor methods called with a proxy: `torch.Tensor.cfloat(proxy)`, `torch.Tensor.__radd__(proxy, 1)`.

A `TensorProxy` is not a `torch.Tensor`. The methods torch.Tensor inherits from its C base
are descriptors that check their first argument's type before anything else sees the call,
so `torch.Tensor.cfloat(proxy)` was a TypeError ("descriptor 'cfloat' for
'torch._C.TensorBase' objects doesn't apply to a 'TensorProxy' object") where
`proxy.cfloat()` traces. While a program is traced, `unbound_methods_traced()` stands an
`UnboundMethod` in front of each of them on torch.Tensor: reached through a tensor (`t.add`)
it gives the very bound method it gave before; called unbound with a proxy first, it is
the proxy's own method (`torch.Tensor.f(proxy, ...)` is `proxy.f(...)`, as for a tensor);
any other call goes to the method itself. Leaving the outermost block takes them away, and
torch.Tensor's methods and operator slots are torch's own again. The C type slots
(`__getitem__`, `__setitem__`, `__delitem__`) get no stand-in on the class: CPython cannot
undo one there, so `torch.Tensor.__getitem__(proxy, i)` written out is torch's TypeError.

A method object taken from torch.Tensor before tracing began (`radd = torch.Tensor.__radd__`
at import, as op_db's OpInfos hold them) is torch's own descriptor, which no stand-in on the
class reaches. Tracing hands such an object its stand-in where it reaches it as a value
(`stand_in_for`): the function compiled itself (`squall.jit(torch.Tensor.cfloat)`), a global,
closure variable or default argument of a function it runs, an attribute it reads
(squall.frontend.state_guards). One held elsewhere (inside a `functools.partial`, a list) and called
with a proxy is still torch's TypeError: only a TensorProxy that is a torch.Tensor would take it.
"""
from __future__ import annotations

import threading
import types
from typing import Any

import torch

from ..proxies import TensorProxy, WhileTracing

__all__ = ["UnboundMethod", "unbound_methods_traced", "stand_in_for"]


class UnboundMethod:
    """A method of torch.Tensor's C base that also takes a proxy as its first argument."""

    __slots__ = ("__squall_method__", "name")

    def __init__(self, method: Any, name: str):
        self.__squall_method__ = method  # proxies.TensorProxy.__getattr__ unwraps it by this name
        self.name = name

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        return self if obj is None else self.__squall_method__.__get__(obj, cls)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args and type(args[0]) is TensorProxy:
            return getattr(args[0], self.name)(*args[1:], **kwargs)
        return self.__squall_method__(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<squall's stand-in for torch.Tensor.{self.name} while tracing>"


def _c_methods() -> dict[str, UnboundMethod]:
    # the methods torch.Tensor inherits from its C base; those torch.Tensor defines in Python
    # already honour __torch_function__, and so take a proxy
    own = vars(torch.Tensor)
    return {
        name: UnboundMethod(method, name)
        for name, method in vars(torch._C.TensorBase).items()
        if isinstance(method, _METHOD_TYPES) and name not in own
    }


_lock = threading.Lock()
_stand_ins: dict[str, UnboundMethod] = {}
_stand_in_of: dict[int, UnboundMethod] = {}  # id of torch's method object -> its stand-in
_METHOD_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)


def _built_stand_ins() -> dict[str, UnboundMethod]:
    global _stand_ins, _stand_in_of
    with _lock:
        if not _stand_ins:
            built = _c_methods()
            _stand_in_of = {id(s.__squall_method__): s for s in built.values()}  # class attributes: never freed
            _stand_ins = built
    return _stand_ins


def stand_in_for(value: Any) -> Any:
    """The stand-in of a torch.Tensor C method object (taken before tracing), else `value` itself."""
    if type(value) not in _METHOD_TYPES:
        return value
    _built_stand_ins()
    return _stand_in_of.get(id(value), value)


def _installable(stand_in: UnboundMethod) -> bool:
    # Setting and then deleting a name that a C type slot implements (`__getitem__`, a slot
    # wrapper) does not restore the slot: CPython leaves torch.Tensor's sq_item filled, and
    # eager `torch.tensor([a, a])` then takes a 1-element tensor for a sequence ("len() of a
    # 0-d tensor"). Those stay torch's own; a method object taken before tracing still gets
    # its stand-in through `stand_in_for`.
    return type(stand_in.__squall_method__) is not types.WrapperDescriptorType


def _install_stand_ins() -> None:
    for name, stand_in in _built_stand_ins().items():
        if _installable(stand_in):
            setattr(torch.Tensor, name, stand_in)


def _remove_stand_ins() -> None:
    for name, stand_in in _stand_ins.items():
        if _installable(stand_in):
            delattr(torch.Tensor, name)


# torch.Tensor's C methods take proxies within `with unbound_methods_traced():`
unbound_methods_traced = WhileTracing(_install_stand_ins, _remove_stand_ins)
