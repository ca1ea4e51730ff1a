"""The torch language's machinery: @torchsymbol, in-place ops, and the dispatcher.

`TorchLanguage` maps every torch callable squall knows (`torch.softmax`,
`torch.Tensor.softmax`, `torch.nn.functional.softmax`) to its ltorch op. A call it
does not know runs as an *opaque* torch op, its output metadata found by running it
on the meta device, with one warning naming the op.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from .. import prims
from ..proxies import TensorProxy, current_context
from ..symbol import Symbol, Tags

__all__ = [
    "torchsymbol",
    "torch_inplace",
    "qualified_name",
    "TorchLanguage",
    "DataDependentError",
    "SquallWarning",
]


class SquallWarning(UserWarning):
    """Warnings squall raises (opaque ops, recompilations, unavailable executors)."""


class DataDependentError(RuntimeError):
    """An operation whose output shape depends on tensor values, which tracing cannot know."""


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


def torchsymbol(*torchfns: Callable, id: str | None = None, tags: Iterable[str] = ()) -> Callable[[Callable], Symbol]:
    """Declare an ltorch op standing for `torchfns`; its Python body is its decomposition.

    The op's signature must accept every call form of its first torch callable: the
    torch executor runs the op as that callable, with the arguments it was traced with.
    """

    def decorate(fn: Callable) -> Symbol:
        sid = id or (qualified_name(torchfns[0]) if torchfns else f"ltorch.{fn.__name__}")
        return Symbol(sid, fn.__name__, fn, is_prim=False, tags=tuple(tags), torchfns=tuple(torchfns))

    return decorate


class InplaceOp:
    """An in-place torch method, traced functionally: `op` computes the value, the handle is rebound."""

    __slots__ = ("op", "torchfns", "name")

    def __init__(self, op: Callable, torchfns: tuple[Callable, ...]):
        self.op = op
        self.torchfns = torchfns
        self.name = qualified_name(torchfns[0])

    def __call__(self, a, *args, **kwargs):
        value = self.op(a, *args, **kwargs)
        return rebind_inplace(self.name, a, value)


def rebind_inplace(name: str, a, value):
    """Give tensor `a` the result `value` of an in-place op, as torch would (no broadcast, safe casts)."""
    if not isinstance(a, TensorProxy):
        raise TypeError(f"{name} expects a tensor to modify, got {type(a).__name__}")
    if value.shape != a.shape:
        raise RuntimeError(
            f"{name}: output with shape {list(a.shape)} doesn't match the broadcast shape {list(value.shape)}"
        )
    if value.dtype != a.dtype:
        if not torch.can_cast(value.dtype, a.dtype):
            raise RuntimeError(f"{name}: result type {value.dtype} can't be cast to the desired output type {a.dtype}")
        value = prims.convert_element_type(value, a.dtype)
    ctx = current_context()
    root = ctx.view_base.get(id(a), a)
    for other in ctx.view_family.get(id(root), ()):
        if other is not a:
            ctx.stale[id(other)] = (
                f"{name} modified {'its base' if other is root else 'another view of the same tensor'} in place"
            )
    return ctx.rebind(a, value)


# ltorch ops whose torch counterparts return views sharing memory with their input.
VIEW_OPS = frozenset(
    f"torch.{name}"
    for name in """Tensor.view Tensor.view_as Tensor.reshape Tensor.reshape_as Tensor.flatten Tensor.unflatten
    Tensor.squeeze Tensor.unsqueeze Tensor.permute Tensor.expand Tensor.expand_as Tensor.split Tensor.unfold
    Tensor.T Tensor.mT Tensor.H Tensor.mH Tensor.__getitem__ transpose swapaxes swapdims t movedim diagonal
    narrow split chunk unbind tensor_split broadcast_to broadcast_tensors""".split()
)


def note_views(ctx, op, args: tuple, out) -> None:
    """Record that the tensors `op` returned view its first tensor argument."""
    base = next((x for x in args if isinstance(x, TensorProxy)), None)
    if base is None:
        return
    root = ctx.view_base.get(id(base), base)
    family = ctx.view_family.setdefault(id(root), [root])
    for view in tree_flatten(out)[0]:
        if isinstance(view, TensorProxy) and view is not base:
            ctx.view_base[id(view)] = root
            family.append(view)


def check_not_stale(ctx, name: str, values) -> None:
    """Refuse a tensor whose value an in-place op through an aliasing view has changed."""
    for x in tree_flatten(values)[0]:
        why = ctx.stale.get(id(x)) if isinstance(x, TensorProxy) else None
        if why is not None:
            raise NotImplementedError(
                f"squall: {name} uses tensor {x.name}, but {why}; in eager PyTorch the two share "
                "memory, which squall's functional traces do not model. Write the in-place op out of "
                "place (y = y.add(1)), or apply it to the tensor you read afterwards."
            )


def torch_inplace(op: Callable, *torchfns: Callable) -> InplaceOp:
    """The in-place form of `op` (`torch.Tensor.add_` for `add`)."""
    return InplaceOp(op, torchfns)


# Ops whose output shape depends on the data: tracing cannot give them a shape.
_DATA_DEPENDENT = {
    "torch.nonzero",
    "torch.Tensor.nonzero",
    "torch.argwhere",
    "torch.Tensor.argwhere",
    "torch.masked_select",
    "torch.Tensor.masked_select",
    "torch.unique",
    "torch.Tensor.unique",
    "torch.unique_consecutive",
    "torch.Tensor.unique_consecutive",
    "torch.bincount",
    "torch.Tensor.bincount",
    "torch.repeat_interleave",  # only with a tensor of repeats; the ltorch op handles ints
    "torch.Tensor.item",
    "torch.Tensor.tolist",
}


def data_dependent_error(name: str) -> DataDependentError:
    return DataDependentError(
        f"squall: {name} returns a tensor whose shape depends on the values of its input, which "
        "tracing cannot know. Call it outside the compiled function and pass its result in, "
        "or use a fixed-shape form (e.g. torch.where(mask, x, 0) instead of x[mask])."
    )


def _scan(values, has_proxy: bool, has_tensor: bool) -> tuple[bool, bool]:
    """Whether `values` (and the lists and tuples in them) hold proxies or real tensors."""
    for x in values:
        t = type(x)
        if t is TensorProxy:
            has_proxy = True
        elif t is list or t is tuple:
            has_proxy, has_tensor = _scan(x, has_proxy, has_tensor)
        elif isinstance(x, torch.Tensor):
            has_tensor = True
    return has_proxy, has_tensor


class TorchLanguage:
    """Routes torch calls made while tracing to ltorch ops, or to opaque torch ops."""

    def __init__(self, table: dict[Callable, Callable]):
        self.table = table
        self._opaque_symbols: dict[Callable, Symbol] = {}
        self.warned: set[str] = set()

    def dispatch(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        op = self.table.get(func)
        has_proxy, has_tensor = _scan(args, False, False)
        if kwargs:
            has_proxy, has_tensor = _scan(kwargs.values(), has_proxy, has_tensor)
        if op is not None:
            ctx = current_context()
            if has_tensor:
                as_proxy = lambda x: ctx.constant(x) if isinstance(x, torch.Tensor) else x
                args, kwargs = tree_map(as_proxy, args), tree_map(as_proxy, kwargs)
            if ctx.stale:
                check_not_stale(ctx, qualified_name(func), (args, kwargs))
            out = op(*args, **kwargs)
            if getattr(op, "id", None) in VIEW_OPS:
                note_views(ctx, op, args, out)
            return out
        if not has_proxy:
            # A torch call on constants only (a property of a captured tensor, torch.finfo, ...)
            return func(*args, **kwargs)
        return self.opaque(func, args, kwargs)

    def opaque(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        name = qualified_name(func)
        if name in _DATA_DEPENDENT:
            raise data_dependent_error(name)
        ctx = current_context()
        proxies = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, TensorProxy)]
        device = proxies[0].device

        def to_meta(x):
            if isinstance(x, TensorProxy):
                return torch.empty(x.shape, dtype=x.dtype, device="meta")
            if isinstance(x, torch.Tensor):
                return x.to("meta")
            return x

        try:
            # the tracing mode may be active (a method call on a proxy enters here directly)
            with torch._C.DisableTorchFunction():
                meta_out = func(*tree_map(to_meta, args), **tree_map(to_meta, kwargs))
        except Exception as e:  # noqa: BLE001 - any failure here means squall cannot model the op
            raise RuntimeError(
                f"squall: {name} is not in squall's torch language, and running it on the meta "
                f"device to learn its output failed ({type(e).__name__}: {e}). If its output shape "
                "depends on tensor values, call it outside the compiled function."
            ) from e
        if name not in self.warned:
            self.warned.add(name)
            warnings.warn(
                f"squall: {name} is not in squall's torch language; it runs as an opaque torch call",
                SquallWarning,
                stacklevel=4,
            )

        def from_meta(x):
            if isinstance(x, torch.Tensor):
                return TensorProxy(shape=x.shape, dtype=x.dtype, device=device, requires_grad=x.requires_grad)
            return x

        out = tree_map(from_meta, meta_out)
        sym = Symbol(
            f"opaque.{name}",
            name.rsplit(".", 1)[-1],
            lambda *a, **k: out,
            is_prim=True,
            tags=(Tags.OPAQUE,),
            torchfns=(func,),
        )
        result = sym(*args, **kwargs)
        if name.startswith("torch.Tensor.") and name.endswith("_") and not name.endswith("__"):
            # an in-place method: the tensor it was called on holds the result from now on
            return rebind_inplace(name, args[0], result)
        return result


class TracingMode(TorchFunctionMode):
    """Routes every torch call made while tracing, factories included, to the language."""

    def __init__(self, language: TorchLanguage):
        super().__init__()
        self.language = language

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.language.dispatch(func, args, kwargs or {})
