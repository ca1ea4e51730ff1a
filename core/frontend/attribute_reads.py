"""Attribute reads: what a traced program reads of a module's or object's attributes, its class,
its slots, the global module hooks and its functions' globals, each read a guard.

Part of the state recorder (`squall.frontend.state_recorder.StateRecorder`, whose base this is);
what is recorded and why is in `squall.frontend.state_guards`.
"""
from __future__ import annotations

import copy
import keyword
import operator
import types
from typing import Any

import torch

from ..proxies import TensorProxy, current_context, real_tensor
from ..trace import plain_scalar
from .state_views import (
    describe_global_hooks,
    global_hook_dicts,
    _HOOK_DICTS,
    _MISSING,
    _MODULE_INTERNALS,
    _SCALARS,
    _slot_value,
    HooksWhileTracing,
    UnreplayableWrite,
    by_structure,
    _users_class,
    _ViewInfo,
)

__all__ = ["AttributeReads"]


# inner modules' hooks traced with the forward (when each is a Python function squall reads
# through); the dicts saying which of them take kwargs or always run; backward hooks never are
_TRACED_HOOKS = frozenset({"_forward_hooks", "_forward_pre_hooks"})
_HOOK_BOOKKEEPING = frozenset({"_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called"})


class AttributeReads:
    """How `StateRecorder` reads attributes and globals through its views (its base; it calls the
    recorder's `guards`, `view`, `_follow`, `_recorded`, `_tensor_attribute`,
    `_reached_through_arguments`, `tensor_input` and its tables of class readers)."""

    def note_class(self, cls: type, label: str) -> None:
        """The program reached class `cls` itself (a global, a closure variable, `type(self)`,
        `self.__class__`), whose attributes it reads straight off the class, no view between: a
        user's class has its numbers, strings and flags guarded as they are now, and is checked
        unchanged when the program ends (ClassState)."""
        if id(cls) in self._classes or not _users_class(cls):
            return
        self._classes[id(cls)] = ClassState(cls)
        if not cls.__module__.startswith(_LIBRARY_MODULES):
            self.guards.namespace["_class_scalars"] = class_scalars
            self.guards.add(f"_class_scalars({self.guards.bind(cls, 'c')}) == {self.guards.bind(class_scalars(cls), 'k')}",
                            f"the numbers, strings and flags of class {cls.__qualname__} ({label})")

    def _classes_changed(self) -> None:
        for state in self._classes.values():
            changed = state.changed()
            if changed:
                raise UnreplayableWrite(f"squall: the program changes class {state.cls.__qualname__} ({changed}); squall cannot "
                                        "replay changes to a class at every call")

    def _read_attribute(self, info: _ViewInfo, name: str, value: Any) -> Any:
        if name == "training" and not info.in_tree:
            return self._reached(value, f"{self._dict_expr(info)}['training']", f"the training flag of {info.label}")
        if name in _MODULE_INTERNALS or name == "__dict__":
            return value  # bookkeeping; the jitted tree's training flags are in the cache key
        kind = type(value)
        if kind is TensorProxy or (info.in_tree and kind not in _SCALARS and real_tensor(value)):
            return value  # a tensor attribute of the jitted tree: an input, read at every call
        if kind is torch.Tensor and self.tensor_input is not None and info.dict is not None and info.dict.get(name) is value:
            return self._tensor_attribute(info, name, value)
        if name in _HOOK_DICTS or name in ("_modules", "_parameters", "_buffers"):
            bound = self.guards.bind(value, "d")
        if name in _HOOK_DICTS:
            if info.is_root:
                return value  # the jitted module's own hooks: JittedModule's concern
            if value:
                self.guards.add(f"tuple({bound}) == {self.guards.bind(tuple(value), 'k')}", f"the hooks of {info.label}")
            else:
                self.guards.stays_empty(value, f"the hooks of {info.label}")
                if name in _TRACED_HOOKS:
                    empty = HooksWhileTracing()
                    empty.label = info.label
                    return empty  # a hook registered while tracing is one eager registers (EagerFirst)
            if value and name in _HOOK_BOOKKEEPING:
                return value  # which hooks take kwargs or always run: the keys, guarded above
            if value and name in _TRACED_HOOKS:
                # forward (pre-)hooks that are Python functions are traced with the forward, their
                # reads guarded and their writes replayed as the forward's are (transformers'
                # output-capture hooks append to a dict the traced forward made)
                recorded = {k: self._recorded(hook, f"{name.strip('_').replace('_', ' ')} hook of {info.label}") for k, hook in value.items()}
                if all(r is not hook for r, hook in zip(recorded.values(), value.values())):
                    return type(value)(recorded)
            if value:
                hook = next((h for h in value.values() if self._recorded(h, info.label) is h), next(iter(value.values())))
                code = getattr(hook, "__code__", None)
                where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
                self.guards.eager_because.append(
                    f"{info.label} has a {name.strip('_').replace('_', ' ')} hook {getattr(hook, '__qualname__', hook)!r}{where}, "
                    "whose Python side effects a compiled trace cannot replay at every call"
                )
                return type(value)()  # not run while tracing: the module runs eagerly instead
            return value
        if name == "_modules":
            # the same modules in the same order (a key renamed with its module kept is not seen)
            self.guards.add(f"list({bound}.values()) == {self.guards.bind(list(value.values()), 'k')}", f"the submodules of {info.label}")
            return {k: (self.view(m, f"{info.label}.{k}" if not info.is_root else f"submodule {k!r}") if m is not None else None) for k, m in value.items()}
        if name in ("_parameters", "_buffers") and not info.in_tree:
            # not inputs: each is a constant of the trace, so which tensor each is matters
            self.guards.same_dict(bound, value, f"the {name[1:]} of {info.label}")
            return value
        if name in ("_parameters", "_buffers"):
            present = [k for k, v in value.items() if v is not None]
            self.guards.add(f"[k for k, v in {bound}.items() if v is not None] == {self.guards.bind(present, 'k')}", f"the {name[1:]} of {info.label}")
            return value
        route = self.guards.route_of(info.real)
        if route is not None and type(value) is int:
            return self._routed_int(info, name, value, route)
        return self._reached(value, f"{self._dict_expr(info)}[{plain_scalar(name)!r}]", f"attribute {name!r} of {info.label}",
                             (*route, ("attr", name)) if route is not None else None)

    def _read_empty_hook_dicts(self, info: _ViewInfo, names: tuple[str, ...]) -> None:
        """The reads of a hookless module's hook dicts (each its own and empty: state_views._hookless_module_call)
        that nn.Module's call makes, recorded as `_read_attribute` records them, without what it
        would give the program (nothing takes it)."""
        label = f"the hooks of {info.label}"
        for name in names:
            value = info.dict[name]
            self.guards.bind(value, "d")  # (as _read_attribute binds it: the check's names are numbered in that order)
            if not info.is_root:
                self.guards.stays_empty(value, label)

    def _routed_int(self, info: _ViewInfo, name: str, value: int, route: tuple) -> Any:
        """An int an object reached through the call's arguments holds (a sliding-window KV
        cache's count of tokens seen, advanced at every step): noted (`routed_ints`, which
        `DynamicDims.note_state` compares with a later call's) and guarded by value; or, once it
        changed from call to call, a size symbol read from the call's object, guarded to be an
        int of 2 or more (`size_input`)."""
        expr, label = f"{self._dict_expr(info)}[{plain_scalar(name)!r}]", f"attribute {name!r} of {info.label}"
        self.routed_ints.setdefault((route, name), value)
        size = self.size_input(value, name, route) if self.size_input is not None else None
        if size is None:
            self.guards.watch(expr, value, label)
            return value
        self.guards.add(f"(type(_v := {expr}) is int and _v >= 2)", f"{label} (a size, 2 or more)")
        return size

    def _dict_expr(self, info: _ViewInfo) -> str:
        # an argument is reached through the call's arguments (another object may be equal to
        # it by the cache key); anything else is guarded by identity where it was reached
        rooted = self.guards.rooted(info.real)
        return f"{rooted}.__dict__" if rooted is not None else self.guards.bind(info.dict, "d")

    def _reached(self, value: Any, expr: str, label: str, route: tuple | None = None) -> Any:
        """A value read from an attribute or global: guarded; a list or object comes back as a
        recording copy or view so that what is done with it is seen too. Where it was reached
        through the call's arguments (`route`), a list, tuple, dict or `by_structure` object is
        guarded by its type (and length) and followed through the arguments, not by identity:
        a new KV cache of the same layout runs the same program."""
        if route is not None and (type(value) is list or type(value) is tuple or type(value) is dict or by_structure(value)):
            return self._reached_through_arguments(value, expr, label, route)
        if route is not None and type(value) is torch.Tensor and self.tensor_input is not None:
            return self._held_item(value, expr, label, route)  # (an item of a list or tuple reached so)
        self.guards.watch(expr, value, label)
        return self._follow(value, expr, label)

    def _read_member(self, info: _ViewInfo, name: str, member: Any, value: Any) -> Any:
        """A __slots__ slot read: guarded as an attribute in __dict__ is (_MISSING: unset), by
        identity; the value as the program is to use it (a list as a recording copy, so that an
        append is replayed on it, never made on it while tracing)."""
        rooted = self.guards.rooted(info.real)
        target = rooted if rooted is not None else self.guards.bind(info.real, "o")
        if "_slot_value" not in self.guards.namespace:
            self.guards.namespace.update(_slot_value=_slot_value, _MISSING=_MISSING)
        value_expr = f"_slot_value({self.guards.bind(member, 's')}, {target})"
        label = f"attribute {name!r} of {info.label}"
        if value is _MISSING:
            self.guards.add(f"{value_expr} is _MISSING", f"{label} (unset)")
            return value
        self.guards.watch(value_expr, value, label)
        return self._follow(value, value_expr, label)

    def _read_computed(self, info: _ViewInfo, name: str, value: Any) -> Any:
        rooted = self.guards.rooted(info.real)
        target = rooted if rooted is not None else self.guards.bind(info.real, "o")
        self.guards.namespace["_getattr"] = getattr
        expr, label = f"_getattr({target}, {plain_scalar(name)!r})", f"attribute {name!r} of {info.label}"
        if _plain_items(value) and type(info.real).__getattribute__(info.real, name) is not value:
            # built anew at each read (a transformers config maps `layer_types` to a property
            # making a list): no later read gives this object, so an identity guard failed at
            # every call. Guarded by what it holds; the program's changes to it, lost in eager
            # with the object, need no replay
            self.guards.add(f"(type(_v := {expr}) is {self.guards.bind(type(value), 'c')} and _v == {self.guards.bind(copy.copy(value), 'k')})", label)
            return value
        return self._reached(value, expr, label)

    def _read_class_attribute(self, info: _ViewInfo, name: str, owner: type, raw: Any, value: Any) -> Any:
        """An attribute found on the object's class (`scale = 2.0` in the class body, a method,
        a property): guarded as the class gives it now, and (at finish) that the object's own
        __dict__ still does not shadow it."""
        cls = type(info.real)
        if info.dict is not None:
            info.class_reads.add(name)
            if info not in self._class_readers:
                self._class_readers.append(info)
            if self.guards.logs:
                self.guards.log_class_read(info.real, name)  # (a module call's replay reads it again: squall.frontend.module_replays)
        if value is not raw and self._class_guarded.get((cls, name), _MISSING) is raw:
            # an earlier read of this class's attribute (a layer's modules alike) guarded the same
            # descriptor the class holds now: its guards are the ones already in the set
            return value
        label = f"attribute {name!r} of class {cls.__qualname__}"
        try:
            # the class's own lookup (its MRO, through the type's attribute cache) gives the
            # same object at every call for data, functions and properties
            resolved = getattr(cls, name)
            stable = getattr(cls, name) is resolved
        except Exception:  # noqa: BLE001 - a descriptor that refuses class access
            stable = False
        if stable:
            held = self.guards.bind(cls, "c")
            expr = f"{held}.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"_getattr({held}, {plain_scalar(name)!r})"
            self.guards.namespace["_getattr"] = getattr
        else:
            # a descriptor making a new object per access (a classmethod): the raw one where
            # the class holds it, and no class before it in the MRO shadowing it
            for klass in cls.__mro__:
                if klass is owner:
                    break
                self.guards.add(f"{plain_scalar(name)!r} not in {self.guards.bind(klass.__dict__, 'c')}", label)
            expr, resolved = f"{self.guards.bind(owner.__dict__, 'c')}[{plain_scalar(name)!r}]", raw
        if value is raw:  # plain data in the class body: guarded and followed as any attribute
            return self._reached(value, expr, label)
        self.guards.watch(expr, resolved, label)  # a function or descriptor: which one it is
        self._class_guarded[(cls, name)] = raw
        return value

    def _read_slot(self, info: _ViewInfo, name: str, value: Any) -> Any:
        d = info.dict
        for store in ("_parameters", "_buffers", "_modules"):
            held = d.get(store, {})
            if name not in held:
                continue
            # (bound at every read, as the check's names are numbered in the order first bound)
            held_name = self.guards.bind(held, "d")
            if store == "_modules":
                self.guards.watch(f"{held_name}[{plain_scalar(name)!r}]", held[name], f"module {name!r} of {info.label}")
                return self.view(value, f"{info.label}.{name}" if not info.is_root else f"submodule {name!r}") if value is not None else None
            if info.in_tree:
                # a parameter or buffer of the jitted tree is an input, read at every call, and
                # its removal is seen there; what is left to check is a None one being set
                if held[name] is None:
                    self.guards.add(f"{held_name}[{plain_scalar(name)!r}] is None", f"{store[1:-1]} {name!r} of {info.label}")
                ctx = current_context()
                if real_tensor(value) and ctx is not None and id(value) in ctx.substitutes:
                    # its input proxy, not the real tensor: torch's own argument parser refuses a size
                    # symbol in a real tensor's method (`self.cls_token.expand(x.shape[0], -1, -1)`)
                    # before the tracing mode would have swapped the proxy in
                    return ctx.constant(value)
            else:
                self.guards.watch(f"{held_name}[{plain_scalar(name)!r}]", held[name], f"{store[1:-1]} {name!r} of {info.label}")
            return value
        return value  # from a user class's own __getattr__

    def _read_absent(self, info: _ViewInfo, name: str) -> None:
        if info.dict is None:
            return  # an object of __slots__ only: its slots are read as such, nothing else can appear
        stores = [self.guards.bind(info.dict.get(s, {}), "d") for s in ("_parameters", "_buffers", "_modules")]
        d = self._dict_expr(info)
        self.guards.add(" and ".join(f"{plain_scalar(name)!r} not in {s}" for s in [d, *stores]), f"attribute {name!r} of {info.label} (absent)")

    def _global_hooks_run(self) -> bool:
        """A module is called: whether global module hooks (torch.nn.modules.module's
        register_module_forward_hook and kin), which eager runs at every module call, are
        registered. Then the program runs eagerly; else the check sees that none is registered."""
        if self._global_hooks is None:
            dicts = global_hook_dicts()
            self._global_hooks = any(dicts)
            if self._global_hooks:
                for d in dicts:
                    self.guards.add(f"tuple({self.guards.bind(d, 'd')}) == {self.guards.bind(tuple(d), 'k')}", "the global module hooks")
                self.guards.eager_because.append(
                    f"{describe_global_hooks()}, which eager runs at every module call and a compiled trace cannot replay"
                )
            else:
                for d in dicts:
                    self.guards.stays_empty(d, "the global module hooks")
        return self._global_hooks

    def _read_global(self, real: dict, name: str, value: Any, fn: types.FunctionType) -> Any:
        return self._reached(value, f"{self.guards.bind(real, 'g')}[{plain_scalar(name)!r}]", f"global {name!r} of {fn.__qualname__}")


_LIBRARY_MODULES = ("torch", "builtins", "transformers", "timm", "torchvision", "typing", "collections", "enum", "abc")
_CLASS_CONTAINERS = (list, dict, set)


def _contents(value: Any) -> Any:
    """What a list, dict or set a class holds has in it now: a list's items, a dict's keys and
    values (each compared by identity), a set's members."""
    if type(value) is dict:
        return list(value), list(value.values())
    return list(value) if type(value) is list else set(value)


def _same_contents(value: Any, then: Any) -> bool:
    now = _contents(value)
    if type(then) is set:
        return now == then
    if type(then) is tuple:  # a dict's (keys, values)
        return all(len(a) == len(b) and all(map(operator.is_, a, b)) for a, b in zip(now, then))
    return len(now) == len(then) and all(map(operator.is_, now, then))


class ClassState:
    """A user's class a traced program reached (`type(self)`, `self.__class__`, a class read as a
    global), as it was: a change the program makes to it (`type(self).count += 1`,
    `Registry.items.append(x)`) happens once, while traced, where eager makes it at every call,
    and the trace would keep the values it read. `changed()` says what changed, after putting
    it back (the call then runs eagerly, which makes the change itself)."""

    def __init__(self, cls: type):
        self.cls = cls
        self.attributes = dict(vars(cls))
        self.contents = {k: _contents(v) for k, v in self.attributes.items() if type(v) in _CLASS_CONTAINERS}

    def changed(self) -> str | None:
        now = vars(self.cls)
        names = [k for k in now.keys() | self.attributes.keys() if now.get(k, _MISSING) is not self.attributes.get(k, _MISSING)]
        names += [k for k, then in self.contents.items() if k not in names and not _same_contents(self.attributes[k], then)]
        for name in names:
            if name in self.contents:
                value, then = self.attributes[name], self.contents[name]
                value.clear()
                if type(value) is dict:
                    value.update(zip(*then))
                elif type(value) is list:
                    value.extend(then)
                else:
                    value.update(then)
            if name in self.attributes:
                type.__setattr__(self.cls, name, self.attributes[name])
            else:
                type.__delattr__(self.cls, name)
        return ", ".join(sorted(names)) or None


def class_scalars(cls: type) -> dict:
    """The numbers, strings, bools and Nones `cls` gives as class attributes (its user bases' too;
    a library's, such as torch.nn.Module's hundred, are not read at every call), each with its
    type (2 apart from 2.0 and True), as `cls.name` resolves them."""
    found = {}
    for c in reversed(cls.__mro__[:-1]):
        if c.__module__.startswith(_LIBRARY_MODULES):
            continue
        for k, v in vars(c).items():
            if v is None or type(v) in _SCALARS:
                found[k] = (type(v), v)
            else:
                found.pop(k, None)
    return found


_EQUAL_BY_VALUE = frozenset({str, int, bool, type(None)})  # == tells them apart as a program can (not -0.0 and 0.0)


def _plain_items(value: Any) -> bool:
    """Whether `value` is a list, tuple or dict of strings, ints, bools and None alone: equal
    contents then read the same to any program."""
    t = type(value)
    if t is dict:
        return all(type(k) in _EQUAL_BY_VALUE and type(v) in _EQUAL_BY_VALUE for k, v in value.items())
    return (t is list or t is tuple) and all(type(v) in _EQUAL_BY_VALUE for v in value)
