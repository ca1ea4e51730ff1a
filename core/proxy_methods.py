"""torch.Tensor's methods and operators on a TensorProxy: each traces as the torch method it
names, straight to the tracing context (not through torch's argument parser, which takes no
NumberProxy where it wants a size: `x.expand(n, 12)`), or, where the user replaced the method
on torch.Tensor since squall was imported (a wrapper calling the original), as the user's."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["TENSOR_METHODS", "install_tensor_methods"]

# torch.Tensor's methods and operators as they were when squall was imported, by name: a proxy's own
TENSOR_METHODS: dict[str, Any] = {}


def install_tensor_methods(proxy_class: type, require_context: Callable[[], Any]) -> None:
    """Give `proxy_class` (TensorProxy, which calls this as squall.proxies loads) torch.Tensor's
    operators and public methods, each dispatched to the context `require_context` returns."""
    _install_operators(proxy_class, require_context)
    _install_methods(proxy_class, require_context)


def _replaced_method(require_context: Callable[[], Any], name: str, method: Any) -> Any:
    """torch.Tensor's method `name`, which the user replaced since squall was imported (a wrapper
    calling the original): eager's call runs theirs, traced here as the program's own Python, and
    the program is guarded on it staying in place."""
    state = require_context().state
    if state is not None:
        state.guards.watch(f"{state.guards.bind(torch.Tensor, 'cls')}.{name}", method, f"torch.Tensor.{name}")
    return method


def _install_operators(proxy_class: type, require_context: Callable[[], Any]) -> None:
    # Python operators are torch.Tensor's own dunder methods, dispatched like any call.
    names = """add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow
        matmul rmatmul and rand or ror xor rxor lshift rlshift rshift rrshift neg pos abs invert
        eq ne lt le gt ge getitem iadd isub imul itruediv ifloordiv imod ipow iand ior ixor
        imatmul""".split()
    for n in names:
        dunder = f"__{n}__"
        method = getattr(torch.Tensor, dunder, None)
        if method is None:
            continue

        def op(self, *args, _method=method, _name=dunder):
            now = getattr(torch.Tensor, _name)
            if now is not _method:  # replaced by the user since (see `_install_methods`)
                return _replaced_method(require_context, _name, now)(self, *args)
            return require_context().dispatch(_method, (self, *args), {})

        op.__name__ = dunder
        setattr(proxy_class, dunder, op)
        TENSOR_METHODS[dunder] = method

    def __setitem__(self, key, value):  # as eager's, it returns None (`x.__setitem__(k, v) or x`)
        require_context().dispatch(torch.Tensor.__setitem__, (self, key, value), {})

    proxy_class.__setitem__ = __setitem__


def _install_methods(proxy_class: type, require_context: Callable[[], Any]) -> None:
    # torch.Tensor's public methods (see the module's note)
    own = vars(proxy_class)
    for name in dir(torch.Tensor):
        method = getattr(torch.Tensor, name)
        if name.startswith("_") or name in own or not callable(method) or isinstance(method, (property, type)):
            continue

        def call(self, *args, _method=method, _name=name, **kwargs):
            now = getattr(torch.Tensor, _name)
            if now is not _method:
                return _replaced_method(require_context, _name, now)(self, *args, **kwargs)
            return require_context().dispatch(_method, (self, *args), kwargs)

        call.__name__ = name
        setattr(proxy_class, name, call)
        TENSOR_METHODS[name] = method
