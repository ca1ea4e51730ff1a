"""Argument objects: what a traced program reads through the call's own arguments is reached
there again at every call, not by the identity it had when traced.

Part of the state recorder (`squall.frontend.state_recorder.StateRecorder`, whose base this is):

- a list, deque or dict passed as an argument is a recording copy whose writes (appends, items
  set) are replayed on the caller's object at every call; one the program returns is the
  caller's object (its contents are in the cache key, so reads of it need no guard);
- an object argument the cache key keys by its type (`by_structure`: a KV cache), its own
  equality or its identity is *routed*: the generated check and program reach it, and everything
  read of it, through the call's arguments (`args[1].__dict__['layers'][0]`), so a new object of
  the same layout runs the same program. Two objects of one type reached so are guarded to be
  distinct, or the same object, as when traced;
- a list, tuple or `by_structure` object reached through a routed object's attributes is guarded
  by its type (and length), its items followed through the arguments in turn;
- a tensor such an object holds (a KV cache's keys, replaced at every step), or a list, tuple or
  dict reached so holds (a Mamba cache's states), is an input of the program read from the
  object at each call, guarded by its metadata, not its identity.
"""
from __future__ import annotations

import collections
import types
from typing import Any

import torch

from ..proxies import TensorProxy
from ..symbolic import lone_symbol
from ..trace import plain_scalar, pytree_container
from .state_guards import ONE_OR_MORE
from .python_effects import refuse_python_state_owner
from .recorded_containers import RECORDED_CONTAINERS, _RecordedList
from .state_views import _SCALARS, _ViewInfo, by_structure

__all__ = ["ArgumentRoutes"]


class ArgumentRoutes:
    """How `StateRecorder` follows the call's arguments (its base; it calls the recorder's
    `guards`, `_recorded`, `_reached`, `_deque_copy`, `_dict_copy`, `_dict_expr`,
    `_standing_for`, its recording-copy lists and `tensor_input`)."""

    def _init_routes(self) -> None:
        self._argument_copies: list[Any] = []  # recording copies of dicts passed as arguments
        self._namespaces: dict[int, tuple[types.SimpleNamespace, dict, str, str]] = {}  # id(copy) -> (copy, its items, label, where)
        # id(what the program got) -> (it, where the call has it): tuples and pytree containers
        # (namedtuples, OrderedDicts, ModelOutputs) passed in; one the program returns is the caller's own
        self._passed_as_is: dict[int, tuple[Any, str]] = {}
        self._routed_by_type: dict[type, list[tuple[Any, str]]] = {}  # objects reached through the arguments
        self._metadata_guarded: set[str] = set()  # the expressions of the held tensors whose metadata is guarded
        self._held_at: dict[int, str] = {}  # id(a held tensor's proxy) -> the expression it is read from
        self.routed_ints: dict[tuple, int] = {}  # (the holder's route, attribute) -> the int read there first

    def _argument(self, value: Any, expr: str, label: str, route: tuple) -> Any:
        t = type(value)
        if t in _SCALARS or isinstance(value, TensorProxy):
            return value
        refuse_python_state_owner(value, label)
        if t is tuple:
            items = [self._argument(v, f"{expr}[{i}]", f"{label}[{i}]", (*route, ("item", i))) for i, v in enumerate(value)]
            passed = t(items) if any(a is not b for a, b in zip(items, value)) else value
            self._passed_as_is[id(passed)] = (passed, expr)
            return passed
        if t is list:
            # a copy that records appends, replayed on the caller's list at every call (its items
            # are in the cache key: its reads need no guard)
            copy = _RecordedList(self._argument(v, f"{expr}[{i}]", f"{label}[{i}]", (*route, ("item", i))) for i, v in enumerate(value))
            copy.items_read, copy.label, copy.real, copy.target, copy.initial = False, label, value, expr, list.copy(copy)
            self._lists.append((value, copy, label, expr))
            return copy
        if t is collections.deque:
            return self._deque_copy(value, [self._argument(v, f"{expr}[{i}]", f"{label}[{i}]", (*route, ("item", i))) for i, v in enumerate(value)], label, expr, target=expr)
        if t is dict:
            # (a key that is not a plain number or string is not followed into); a copy that
            # records writes, replayed on the caller's dict at every call (its keys and values
            # are in the cache key: its reads need no guard)
            items = {k: self._argument(v, f"{expr}[{plain_scalar(k)!r}]", f"{label}[{plain_scalar(k)!r}]", (*route, ("item", k))) if type(k) in _SCALARS else v for k, v in value.items()}
            copy = self._dict_copy(dict, value, label, items)
            copy.target = expr
            self._argument_copies.append(copy)
            return copy
        if t is types.SimpleNamespace:
            # keyed by its attributes' values (squall.runtime.entry_point), not read through: a
            # copy whose lists and dicts are recording copies reached through the call's own
            # namespace, so appends land on the caller's list and a returned one is the caller's;
            # a write to the namespace itself is refused when the program ends (StateRecorder.finish)
            items = {k: self._argument(v, f"{expr}.__dict__[{plain_scalar(k)!r}]", f"{label}.{k}", (*route, ("attr", k))) for k, v in vars(value).items()}
            copy = types.SimpleNamespace(**items)
            self._namespaces[id(copy)] = (copy, items, label, expr)
            return copy
        recorded = self._recorded(value, label)
        if pytree_container(value):
            # (its tensors are inputs read from the call's own: squall.frontend.tracing; a write
            # into it runs the call eagerly, so returned unchanged, it is the caller's object)
            self._passed_as_is[id(recorded)] = (recorded, expr)
        elif recorded is not value:
            # the cache key holds it (by its type where `by_structure`, by its own equality, or by
            # identity): reached through the call, as is everything the program reads of it
            self._route(value, expr, route)
        return recorded

    def _route(self, obj: Any, expr: str, route: tuple) -> None:
        """`obj` is reached at call time as `expr` (`route` through the call's arguments). Two
        objects of one type reached so are guarded to be distinct, or the same, as when traced."""
        first = self.guards.rooted(obj)
        if first is not None:
            if first != expr:
                self.guards.add(f"{expr} is {first}", f"{expr} is the object at {first}")
            return
        for other, other_expr in self._routed_by_type.get(type(obj), ()):
            self.guards.add(f"{expr} is not {other_expr}", f"{expr} is not the object at {other_expr}")
        self._routed_by_type.setdefault(type(obj), []).append((obj, expr))
        self.guards.root(obj, expr, route)

    def _reached_through_arguments(self, value: Any, expr: str, label: str, route: tuple) -> Any:
        """A list, tuple, dict or `by_structure` object read (as `expr`) from an object reached through
        the call's arguments (`route`): guarded by its type (and length) and followed through
        the arguments, not by identity: a new KV cache of the same layout runs the same program."""
        t = type(value)
        layout = f" and len({expr}) == {len(value)}" if t is list or t is tuple else ""
        self.guards.add(f"type({expr}) is {self.guards.bind(t, 'c')}{layout}", label)
        if t is list or t is tuple:
            return self._follow_routed(value, expr, label, route)
        if t is dict:
            return self._follow_routed_dict(value, expr, label, route)
        self._route(value, expr, route)
        return self._recorded(value, label)

    def _follow_routed(self, value: list | tuple, expr: str, label: str, route: tuple) -> Any:
        """A list or tuple reached through the call's arguments: each item guarded as `_reached`
        guards it, through the arguments; a list as a recording copy (its appends replayed on
        the call's own list)."""
        items = [self._reached(v, f"{expr}[{i}]", f"item {i} of {label}", (*route, ("item", i))) for i, v in enumerate(value)]
        if type(value) is tuple:
            return value if all(a is b for a, b in zip(items, value)) else self._standing_for(tuple(items), value)
        copy = self._list_copies.get(id(value))
        if copy is None:
            # reached as `expr` at every call (its length and items guarded there): appends replayed on it
            copy = self._list_copies[id(value)] = _RecordedList()
            copy.items_read, copy.label, copy.real, copy.target = False, label, value, expr
            self._lists.append((value, copy, label, expr))
            list.extend(copy, items)
            copy.initial = list.copy(copy)
        return copy

    def _follow_routed_dict(self, value: dict, expr: str, label: str, route: tuple) -> Any:
        """A plain dict reached through the call's arguments (an `EncoderDecoderCache`'s
        `is_updated`, made anew with each cache): a recording copy whose reads are guarded, and
        whose writes are replayed, through the arguments (`expr`), not on the dict traced; its
        items followed as `_reached` follows them."""
        copy = self._dict_copies.get(id(value))
        if copy is None:
            items = {k: self._routed_item(v, f"{expr}[{plain_scalar(k)!r}]", f"item {plain_scalar(k)!r} of {label}", (*route, ("item", k)))
                     if type(k) in _SCALARS else v for k, v in value.items()}
            copy = self._dict_copies[id(value)] = self._dict_copy(dict, value, label, items)
            copy.target, copy.routed = expr, route  # (a tensor item read is an input: `_read_item`)
        return copy

    def _routed_item(self, value: Any, expr: str, label: str, route: tuple) -> Any:
        # a list, tuple or cache-like object in it followed through the arguments; anything
        # else as any dict's item (guarded when the program reads it)
        if type(value) is list or type(value) is tuple or by_structure(value):
            return self._reached_through_arguments(value, expr, label, route)
        return self._follow(value, expr, label)

    def _tensor_attribute(self, info: _ViewInfo, name: str, value: torch.Tensor) -> TensorProxy:
        """A tensor an object holds as an attribute (a KV cache's keys): `_held_tensor`."""
        route = self.guards.route_of(info.real)
        return self._held_tensor(value, info.dict, name, f"{self._dict_expr(info)}[{plain_scalar(name)!r}]",
                                 f"attribute {name!r} of {info.label}", (*route, ("attr", name)) if route is not None else None)

    def _held_item(self, value: torch.Tensor, expr: str, label: str, route: tuple) -> TensorProxy:
        """A tensor a list, tuple or dict reached through the call's arguments holds (a Mamba
        cache's `conv_states[0]`, made at the prompt and written in place at every step):
        `_held_tensor`. It was guarded by identity, so every new cache compiled the step again."""
        steps = route[2:]
        named = next((i for i in range(len(steps) - 1, -1, -1) if steps[i][0] == "attr"), 0)
        hint = "_".join(str(plain_scalar(k)) for _, k in steps[named:])
        return self._held_tensor(value, None, hint, expr, label, route)

    def _held_tensor(self, value: torch.Tensor, owner: dict | None, key: str, expr: str, label: str, route: tuple | None) -> TensorProxy:
        """A tensor an object holds (a KV cache's keys, which the model replaces at every step):
        an input of the program read from the object at each call (where `route` reaches it
        through the call's arguments, else as `owner[key]`), guarded by its metadata (its
        symbolic dimensions by "2 or more") at `expr` rather than by identity, so a new tensor of
        the same kind in its place runs the same compiled program."""
        proxy = self.tensor_input(value, owner, key, label, route)
        first = self._held_at.setdefault(id(proxy), expr)
        if first != expr:
            # one tensor held in two places (is one input, read from the first): so at every call
            self.guards.add(f"{expr} is {first}", f"{label} is the tensor at {first}")
        if expr not in self._metadata_guarded:  # (read again, as a KV cache's keys are: one guard)
            self._metadata_guarded.add(expr)
            # (a size traced at 1 stays 1 or more: squall.symbolic.ShapeEnv.traced_at_one)
            pattern = (proxy.dtype, proxy.device, proxy.requires_grad,
                       tuple(n if type(n) is int else ONE_OR_MORE if lone_symbol(n) in n.env.traced_at_one else None for n in proxy.shape))
            self.guards.add(f"_same_metadata({expr}, {self.guards.bind(pattern, 'k')})", label)
        return proxy

    def _return_arguments_as_themselves(self, result: Any) -> None:
        """A list, dict, tuple, pytree container (a namedtuple, an OrderedDict, a ModelOutput) or
        SimpleNamespace passed in and returned (in `result`, through plain tuples, lists and dicts)
        is the caller's own object, its writes replayed on it first, as in eager (where a rebuilt
        one would be equal but not `is` the argument)."""
        passed = {k: where for k, (_, _, _, where) in self._namespaces.items()}
        passed.update((k, where) for k, (_, where) in self._passed_as_is.items())
        for path, target in _argument_containers(result, (), passed):
            self.guards.namespace["_put"] = _put
            self.guards.effects.append(f"out = _put(out, {self.guards.bind(path, 'k')}, {target})")


def _argument_containers(x: Any, path: tuple, passed: dict[int, str]) -> list[tuple[tuple, str]]:
    """(path, call-time expression) of each list or dict argument's recording copy in output `x`,
    and of each other argument the program got as it is returned (`passed`: id -> expression:
    a SimpleNamespace's copy, a tuple, a pytree container), reached through tuples, named tuples,
    lists, dicts and the dicts torch's pytree knows (an OrderedDict, a ModelOutput)."""
    t = type(x)
    if t in RECORDED_CONTAINERS and getattr(x, "target", None) is not None:
        return [(path, x.target)]
    if id(x) in passed:  # (each held by the recorder while it runs: an id is never reused)
        return [(path, passed[id(x)])]
    if t is tuple or t is list or t is _RecordedList or _namedtuple(x):
        return [found for i, v in enumerate(list.__iter__(x) if t is _RecordedList else x) for found in _argument_containers(v, (*path, i), passed)]
    if t is dict or (isinstance(x, dict) and pytree_container(x)):  # (an OrderedDict, a ModelOutput the program made)
        return [found for k, v in x.items() for found in _argument_containers(v, (*path, k), passed)]
    return []


def _namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and type(x) is not tuple and hasattr(type(x), "_fields") and hasattr(x, "_replace")


def _put(out: Any, path: tuple, value: Any) -> Any:
    """`out` with `value` at `path` (tuples and named tuples rebuilt, lists and dicts set in place)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if type(out) is tuple:
        return (*out[:head], _put(out[head], rest, value), *out[head + 1 :])
    if _namedtuple(out):
        return out._replace(**{out._fields[head]: _put(out[head], rest, value)})
    out[head] = _put(out[head], rest, value)
    return out
