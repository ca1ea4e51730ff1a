"""Output structures: what a program returns comes back as eager returns it, with real tensors.

A program may return more than tensors in tuples and dicts: transformers' `ModelOutput`
dataclasses, named tuples, a KV-cache object whose layers hold tensors as attributes.
Eager returns a new such object at every call, holding that call's tensors. When tracing
ends, `capture_output` turns the value the program returned into a pytree in which every
tensor proxy is a leaf, so every later stage (dead code removal, gradients, code
generation) sees every tensor the caller will get:

- registered pytree nodes (tuples, lists, dicts, named tuples, `torch.return_types`,
  `ModelOutput`s, which transformers registers) stay nodes and are rebuilt by their own
  unflatten function;
- any other object holding a proxy is rebuilt the way `copy.copy` copies it, through the
  copy protocol (`__reduce_ex__`): an `ObjectNode` keeps the reduction's pieces (the
  constructor's arguments, the state — a plain object's `__dict__` and slots —, list and
  dict items) as its children, and unflattening it makes a new object of the original type
  from this call's values. Attributes that hold no tensor are shared with the traced object,
  as `copy.copy` shares them; containers are new at every call.

Anything else that holds a proxy (a generator, a closure, an object that cannot be copied, a
module) fails compilation with an `OutputError` naming where in the output it is: a proxy
never reaches the caller.
"""
from __future__ import annotations

import copyreg
import enum
import gc
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from ..proxies import NumberProxy, TensorProxy, real_tensor, size_leaf

__all__ = ["capture_output", "ObjectNode", "OutputError", "output_with_proxies_replaced"]


class OutputError(TypeError):
    """A value the program returns holds a traced tensor in a form squall cannot rebuild."""


class ObjectNode:
    """An object the program returned, as the pieces `copy.copy` rebuilds it from.

    A pytree node: its children are the pieces that may hold tensors (`args`, `state`,
    `listitems`, `dictitems`); unflattening builds a new object of the original type.
    """

    __slots__ = ("constructor", "args", "state", "listitems", "dictitems", "type_name")

    def __init__(self, constructor: Callable, args: tuple, state: Any, listitems: list | None, dictitems: list | None, type_name: str):
        self.constructor = constructor
        self.args = args
        self.state = state
        self.listitems = listitems
        self.dictitems = dictitems
        self.type_name = type_name

    def build(self) -> Any:
        """The object these pieces make, as `copy.copy` makes it (the copy module's `_reconstruct`)."""
        y = self.constructor(*self.args)
        state = self.state
        if state is not None:
            if hasattr(y, "__setstate__"):
                y.__setstate__(state)
            else:
                slotstate = None
                if isinstance(state, tuple) and len(state) == 2:
                    state, slotstate = state
                if state is not None:
                    y.__dict__.update(state)
                if slotstate is not None:
                    for key, value in slotstate.items():
                        setattr(y, key, value)
        if self.listitems is not None:
            for item in self.listitems:
                y.append(item)
        if self.dictitems is not None:
            for key, value in self.dictitems:
                y[key] = value
        return y

    def __repr__(self) -> str:
        return f"<ObjectNode {self.type_name}>"


def _flatten_object(node: ObjectNode):
    # constructor arguments without tensors (a plain object's: its class) stay in the spec
    if _holds_proxy(node.args):
        return [node.args, node.state, node.listitems, node.dictitems], (node.constructor, None, node.type_name)
    return [node.state, node.listitems, node.dictitems], (node.constructor, node.args, node.type_name)


def _unflatten_object(children, context) -> Any:
    constructor, args, type_name = context
    if args is None:
        args, *children = children
    return ObjectNode(constructor, args, *children, type_name).build()


def _flatten_object_with_keys(node: ObjectNode):
    children, context = _flatten_object(node)
    names = ("args", "state", "listitems", "dictitems")[-len(children):]
    return [(pytree.GetAttrKey(n), c) for n, c in zip(names, children)], context


def output_with_proxies_replaced(output: Any, replace: Callable[[Any], Any]) -> Any:
    """A traced output with each proxy `p` in it replaced by `replace(p)`, its structure kept:
    an ObjectNode stays one (`pytree.tree_map` would unflatten it into the user's object, whose
    proxies no later stage could then see)."""

    def leaf(x: Any) -> Any:
        if isinstance(x, ObjectNode):
            return ObjectNode(x.constructor, *(mapped(c) for c in (x.args, x.state, x.listitems, x.dictitems)), x.type_name)
        return replace(x) if isinstance(x, (TensorProxy, NumberProxy)) else x

    def mapped(tree: Any) -> Any:
        return pytree.tree_map(leaf, tree, is_leaf=lambda x: isinstance(x, ObjectNode) or size_leaf(x))

    return mapped(output)


# Unflattening an ObjectNode builds the user's object, not an ObjectNode: a compiled
# program's output spec holds ObjectNodes where the traced output held those objects.
pytree.register_pytree_node(
    ObjectNode,
    _flatten_object,
    _unflatten_object,
    serialized_type_name="squall.frontend.outputs.ObjectNode",
    flatten_with_keys_fn=_flatten_object_with_keys,
)


# values that are themselves, never holders of tensors
_ATOMS = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), enum.Enum, type,
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, types.ModuleType,
)  # fmt: skip


def capture_output(output: Any, constant: Callable[[torch.Tensor], TensorProxy], existing: Callable[[Any], bool] = lambda x: False) -> Any:
    """`output` as a pytree whose leaves are proxies and values that hold none.

    Real tensors become proxies through `constant` (a captured tensor the program returns);
    objects holding proxies become `ObjectNode`s. An object for which `existing` is true (one
    the program was given or reached, not made: a KV cache passed in and updated) is returned
    as itself, as eager returns it; its changes are the program's side effects, replayed on it
    (squall.frontend.state_guards). Raises `OutputError` naming the place of a proxy that cannot be rebuilt.
    """
    return _Capture(constant, existing).capture(output, "output")


class _Capture:
    def __init__(self, constant: Callable[[torch.Tensor], TensorProxy], existing: Callable[[Any], bool]):
        self.constant = constant
        self.existing = existing
        self.in_progress: dict[int, str] = {}  # id of an object being captured -> its path
        self.cycles: set[int] = set()  # objects some value inside them refers back to

    def capture(self, x: Any, path: str) -> Any:
        t = type(x)
        if t is TensorProxy:
            return x
        if real_tensor(x):
            return self.constant(x)
        if isinstance(x, _ATOMS) or self.existing(x):
            return x
        if not pytree.tree_is_leaf(x):
            return self._node(x, path)
        if isinstance(x, torch.nn.Module):
            # a module is returned as itself: squall does not copy it (a proxy left in one is the
            # business of the program's side effects, not of its output)
            return x
        if isinstance(x, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.GeneratorType, types.CoroutineType)):
            return self._opaque(x, path, "a function, method or generator")
        return self._object(x, path)

    def _node(self, x: Any, path: str) -> Any:
        try:
            keyed, spec = pytree.tree_flatten_with_path(x, is_leaf=lambda y: y is not x)
            labelled = [(pytree.keystr(k), v) for k, v in keyed]
        except ValueError:  # a node registered without keys
            leaves, spec = pytree.tree_flatten(x, is_leaf=lambda y: y is not x)
            labelled = [(f"[{i}]", v) for i, v in enumerate(leaves)]
        captured = [self.capture(v, path + label) for label, v in labelled]
        if all(c is v for c, (_, v) in zip(captured, labelled)):
            return x
        return pytree.tree_unflatten(captured, spec)

    def _object(self, x: Any, path: str) -> Any:
        key = id(x)
        if key in self.in_progress:
            self.cycles.add(key)
            return x
        reductor = copyreg.dispatch_table.get(type(x))
        try:
            reduced = reductor(x) if reductor is not None else x.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - whatever stops copying stops rebuilding too
            return self._opaque(x, path, "an object that cannot be copied")
        if isinstance(reduced, str) or not isinstance(reduced, tuple) or len(reduced) < 2:
            return self._opaque(x, path, "an object copied by reference")
        constructor, args, state, listitems, dictitems = (*reduced, None, None, None)[:5]
        self.in_progress[key] = path
        try:
            args = tuple(self.capture(a, f"{path} (constructor argument {i})") for i, a in enumerate(args))
            state = self._state(state, path)
            listitems = None if listitems is None else [self.capture(v, f"{path}[{i}]") for i, v in enumerate(listitems)]
            dictitems = None if dictitems is None else [(k, self.capture(v, f"{path}[{k!r}]")) for k, v in dictitems]
        finally:
            del self.in_progress[key]
        pieces = (args, state, listitems, dictitems)
        if not any(_holds_proxy(p) for p in pieces):
            return x
        if key in self.cycles:
            raise OutputError(
                f"squall: the value the program returns at {path} ({type(x).__qualname__}) holds tensors the "
                "program computed and refers back to itself; squall cannot rebuild such an object at every "
                "call. Return the tensors, or an object without a reference cycle."
            )
        return ObjectNode(constructor, args, state, listitems, dictitems, type(x).__qualname__)

    def _state(self, state: Any, path: str) -> Any:
        # a plain object's state is its __dict__, or (its __dict__, its slots): attributes by name
        if type(state) is dict:
            return {k: self.capture(v, f"{path}.{k}") for k, v in state.items()}
        if type(state) is tuple and len(state) == 2 and all(s is None or type(s) is dict for s in state):
            return tuple(self._state(s, path) for s in state)
        return self.capture(state, f"{path} (state)")

    def _opaque(self, x: Any, path: str, what: str) -> Any:
        if _reaches_proxy(x):
            raise OutputError(
                f"squall: the value the program returns at {path} is {what} ({type(x).__qualname__}) that holds "
                "a tensor the program computed; squall can rebuild pytree nodes, dataclasses and objects whose "
                "tensors are attributes, not this. Return the tensors themselves (or such an object) instead."
            )
        return x


def _holds_proxy(tree: Any) -> bool:
    return any(isinstance(v, TensorProxy) for v in pytree.tree_leaves(tree))


def _reaches_proxy(x: Any, limit: int = 10_000) -> bool:
    """Whether a proxy is reachable from `x` through the references the garbage collector sees
    (closure cells, bound arguments, a generator's frame), without entering modules, classes
    or a function's globals."""
    seen: set[int] = set()
    stack = [x]
    while stack and len(seen) < limit:
        y = stack.pop()
        if id(y) in seen or isinstance(y, (type, types.ModuleType)):
            continue
        seen.add(id(y))
        if type(y) is TensorProxy:
            return True
        if isinstance(y, types.FunctionType):
            stack.extend(c.cell_contents for c in (y.__closure__ or ()) if _cell_filled(c))
            stack.extend(y.__defaults__ or ())
            stack.extend((y.__kwdefaults__ or {}).values())
            continue
        if real_tensor(y):
            continue
        stack.extend(gc.get_referents(y))
    return False


def _cell_filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True
