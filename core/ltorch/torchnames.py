"""The dotted names users know torch callables by ("torch.nn.functional.softmax", "torch.Tensor.add_"),
and the keyword names torch's argument parser accepts for a call's parameters."""
from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable

import torch

__all__ = ["qualified_name", "TORCH_KEYWORD_ALIASES", "torch_keywords"]


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


# torch's C argument parser (python_arg_parser.cpp, numpy_compatibility_arg_names) takes numpy's
# names for four parameters in every call it parses: `torch.cat(ts, axis=1)`, `x.sum(axis=0,
# keepdims=True)`. Functions written in Python (torch.nn.functional.softmax, Tensor.split) do not.
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input", "x1": "input", "x2": "other"}
# the keywords a call must have for torch_keywords to have anything to do (checked first, at no cost to other calls)
TORCH_KEYWORD_ALIASES = frozenset(_NUMPY_NAMES) | {"input"}
_C_BOUND = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)


@functools.cache
def _parameters(op: Callable) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(op).parameters)
    except (TypeError, ValueError):
        return ()


def torch_keywords(func: Callable, op: Callable, args: tuple, kwargs: dict) -> dict:
    """`kwargs` of a call of the torch callable `func`, named as the torch-language `op` that
    stands for it names its parameters. For a C-bound torch callable, numpy's names are torch's
    own (`axis` is `dim`), and `input`, the tensor a call is about, is the op's first parameter
    where the op names that `a`, `x` or `self` (`torch.sum(input=t)`). Names the op has, and calls
    of functions written in Python (whose names are their own), are left as given."""
    if not isinstance(func, _C_BOUND):
        return kwargs
    names = _parameters(op)
    renamed = {}
    for key, value in kwargs.items():
        if key not in names:
            torch_name = _NUMPY_NAMES.get(key, key)
            if torch_name in names:
                key = torch_name
            elif torch_name == "input" and not args and names and names[0] in ("a", "x", "self"):
                key = names[0]
        if key in renamed:
            return kwargs  # one parameter named twice (`axis=` and `dim=`): the op raises as torch does
        renamed[key] = value
    return renamed
