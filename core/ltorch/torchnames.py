"""The dotted names users know torch callables by ("torch.nn.functional.softmax", "torch.Tensor.add_")."""
from __future__ import annotations

import functools
from collections.abc import Callable

import torch

__all__ = ["qualified_name"]


_NAMESPACES = (
    ("torch.nn.functional", torch.nn.functional),
    ("torch.special", torch.special),
    ("torch.linalg", torch.linalg),
    ("torch.fft", torch.fft),
    ("torch", torch),
)


@functools.cache
def _public_torch_names() -> dict[int, str]:
    """id of every public torch callable -> the dotted name users know it by."""
    names: dict[int, str] = {}
    for prefix, namespace in reversed(_NAMESPACES):  # later (more specific) namespaces win
        for attr in dir(namespace):
            if not attr.startswith("_"):
                obj = getattr(namespace, attr, None)
                if callable(obj):
                    names[id(obj)] = f"{prefix}.{attr}"
    return names


def qualified_name(fn: Callable) -> str:
    """The dotted name users know a torch callable by ("torch.nn.functional.softmax", "torch.Tensor.view")."""
    name = getattr(fn, "__name__", None)
    objclass = getattr(fn, "__objclass__", None)
    if (objclass is not None and issubclass(objclass, torch._C.TensorBase)) or (
        name is not None and getattr(torch.Tensor, name, None) is fn
    ):
        return f"torch.Tensor.{name}"
    owner = getattr(fn, "__self__", None)  # the __get__ of a Tensor property
    if type(owner).__name__ == "getset_descriptor":
        return f"torch.Tensor.{owner.__name__}"
    known = _public_torch_names().get(id(fn))
    if known is not None:
        return known
    module = getattr(fn, "__module__", None)
    if name is not None and module:
        return f"{module}.{name}"
    return repr(fn)
