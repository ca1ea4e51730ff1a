"""Recording copies: the lists, dicts, sets, deques, functions and partials a traced program reaches
through its state, and what it reads of them.

Part of the state recorder (`squall.frontend.state_recorder.StateRecorder`, whose base this is);
what is recorded and why is in `squall.frontend.state_guards`. A Python function runs as a copy
whose globals note each global it looks up (its closure cells guarded as a whole); a list, deque,
dict or set reached from the program's state is a recording copy (squall.frontend.recorded_containers)
whose reads become guards and whose writes are replayed; a module or object becomes a view.
"""
from __future__ import annotations

import collections
import dis
import functools
import logging
import types
from typing import Any

import torch

from ..ltorch.unmodelled import UnmodelledMode
from ..trace import plain_scalar
from .autograd_functions import TracedAutogradFunction, is_autograd_function
from .python_effects import refuse_call_dependent, refuse_python_state_owner, traced_id, traced_print, TracedLogger
from .standard_modules import has_stand_in, standard_stand_in
from .recorded_containers import RECORDED_DICT_TYPES, _RecordedDeque, _RecordedList, _RecordedSet
from .state_views import (
    _cell_value,
    _MISSING,
    _LRU_CACHE,
    _ModuleReads,
    _recordable,
    SNAPSHOT_TYPES,
    same_contents,
    snapshot_of,
    _SCALARS,
    _user_function,
    _users_module,
    traced_type,
    viewable,
)

__all__ = ["RecordingCopies"]


# torch's global settings a program may ask for and branch on, whose answers no trace records;
# (grad mode and the default dtype are in every call's key, autocast sends the call to eager)
_SETTING_QUERIES = {
    name: getattr(module, name)
    for module, names in (
        (torch, ("get_num_threads", "get_num_interop_threads", "are_deterministic_algorithms_enabled",
                 "is_deterministic_algorithms_warn_only_enabled", "get_deterministic_debug_mode",
                 "get_float32_matmul_precision", "is_inference_mode_enabled", "get_default_device",
                 "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "is_warn_always_enabled")),
        (getattr(torch.backends, "mha", None), ("get_fastpath_enabled",)),
        (getattr(torch.backends, "cuda", None), ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled")),
    )
    for name in names
    if module is not None and hasattr(module, name)
}


# torch's global defaults a program may set while it runs: its factories' dtype or device would
# be the trace's, the compiled call's those of the call
_SETTING_WRITES = frozenset({"set_default_dtype", "set_default_tensor_type", "set_default_device"})


def _backend_flags() -> dict[str, list[tuple[str, Any]]]:
    """torch's backend flags a program may read and branch on (`torch.backends.cudnn.deterministic`,
    `torch.backends.mkldnn.enabled`), by flag name: the (name, object) of each module holding one."""
    flags: dict[str, list[tuple[str, Any]]] = {}
    holders = [(name, getattr(torch.backends, name, None)) for name in ("cudnn", "mkldnn", "miopen")]
    for name, holder in holders:
        for flag, prop in vars(type(holder)).items() if holder is not None else ():
            if isinstance(prop, torch.backends.ContextProp):
                flags.setdefault(flag, []).append((name, holder))
    matmul = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
    opt_einsum = getattr(torch.backends, "opt_einsum", None)
    for holder_name, holder, names in (("matmul", matmul, ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")),
                                       ("opt_einsum", opt_einsum, ("enabled", "strategy"))):
        for flag in names if holder is not None else ():
            flags.setdefault(flag, []).append((holder_name, holder))
    return flags


_BACKEND_FLAGS = _backend_flags()


# builtins a traced program's own code gets a stand-in for: `type` and `id` answer for the object a
# view or copy stands for, as eager's do; `print`, and `id` of a traced tensor, run the call eagerly
_TRACED_BUILTINS = {"type": traced_type, "id": traced_id, "print": traced_print}


class _RecordingGlobals(dict):
    """A recorded function's globals: a copy of its module's, whose reads its recorder sees
    (one class for all: a class made per function cost more than the function's trace)."""

    __slots__ = ("recorder", "real", "fn", "builtins_read")

    def __getitem__(self, name):
        if not dict.__contains__(self, name):
            # a builtin (`abs`, `len`) is read next: guarded against the module gaining a global
            # of its name (one check per function, of all the builtins it reads: a set filled as read)
            if not self.builtins_read:
                guards = self.recorder.guards
                guards.add(f"{guards.bind(self.real, 'g')}.keys().isdisjoint({guards.bind(self.builtins_read, 'k')})",
                           f"the builtins {self.fn.__qualname__} reads (no global of their names)")
            self.builtins_read.add(name)
            stand_in = _TRACED_BUILTINS.get(name)
            if stand_in is not None:
                return stand_in
            raise KeyError(name)
        value = dict.__getitem__(self, name)
        return self.recorder._read_global(self.real, name, value, self.fn)


# loading a name that another comparison operand follows: `x is name` or `name is x`
_SIMPLE_LOADS = frozenset({"LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_CONST", "LOAD_NAME"})


@functools.lru_cache(maxsize=None)
def _only_compared(code: types.CodeType, name: str) -> bool:
    """Whether `code` uses its closure variable `name` (a function) only in identity comparisons with
    another plain name (`type(self).forward is forward_with_checkpointing`: transformers' layers ask
    whether they are the outermost wrapper so). Such a function is compared with what a class holds,
    the original, never called: it stays the original (a recording copy compared unequal, and
    transformers' gradient checkpointing never checkpointed)."""
    ops = [(ins.opname, ins.argval) for ins in dis.get_instructions(code)]
    uses = [i for i, (op, arg) in enumerate(ops) if op == "LOAD_DEREF" and arg == name]
    for i in uses:
        following = [op for op, _ in ops[i + 1:i + 3]]
        if not (following[:1] == ["IS_OP"] or (len(following) == 2 and following[0] in _SIMPLE_LOADS and following[1] == "IS_OP")):
            return False
    return bool(uses) and not any(op in ("LOAD_CLOSURE", "STORE_DEREF", "DELETE_DEREF") and arg == name for op, arg in ops)


class RecordingCopies:
    """How `StateRecorder` follows what it reaches (its base; it calls the recorder's `guards`,
    `view`, `_read_global`, `_reached`, and its tables of copies made)."""

    def _recording_function(self, fn: types.FunctionType, *, jitted: bool = False) -> types.FunctionType:
        copy = self._functions.get(id(fn))
        if copy is None:
            real = fn.__globals__
            watched = _RecordingGlobals(real)
            watched.recorder, watched.real, watched.fn, watched.builtins_read = self, real, fn, set()
            # a module, object or function in a closure cell is read through a view or recording
            # copy, in a cell of the copy's own (filled once the copy is known: it may be itself;
            # a nonlocal assignment to such a cell is refused at finish)
            cells = list(fn.__closure__ or ())
            recorded_cells = [i for i, cell in enumerate(cells) if (_recordable(v := _cell_value(cell)) or has_stand_in(v)
                              or type(v) is torch.Tensor or type(v) is torch.nn.Parameter)
                              and not (type(v) is types.FunctionType and _only_compared(fn.__code__, fn.__code__.co_freevars[i]))]
            for i in recorded_cells:
                cells[i] = types.CellType()
            # any other filled cell: a copy too (one per cell, shared by the copies of the functions
            # that close over it), so that a `nonlocal count; count += 1` while traced leaves the
            # caller's variable as it was; assigning it is refused at finish, before anything ran twice
            for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())):
                value = _cell_value(cell)
                if i in recorded_cells or value is _MISSING:
                    continue
                copied = self._plain_cells.get(id(cell))
                if copied is None:
                    copied = self._plain_cells[id(cell)] = types.CellType(value)
                    self._cells.append((copied, value, name, fn))
                cells[i] = copied
            copy = types.FunctionType(fn.__code__, watched, fn.__name__, self._followed_defaults(fn), tuple(cells) if fn.__closure__ else None)
            copy.__kwdefaults__ = self._followed_kwdefaults(fn)
            copy.__qualname__ = fn.__qualname__
            # the function's own attributes (`f.calls`, functools.wraps' `__wrapped__`) as the copy's,
            # guarded; one the program sets on it (a call counter) is refused at finish
            attributes = dict(fn.__dict__)
            copy.__dict__.update(attributes)
            self._function_attributes.append((copy, attributes, fn))
            if attributes:
                self.guards.same_dict(f"{self.guards.bind(fn, 'fn')}.__dict__", attributes, f"the attributes of {fn.__qualname__}")
            self._functions[id(fn)] = self._standing_for(copy, fn)
            self._guard_settings_read(fn.__code__)
            if not jitted or fn.__kwdefaults__:
                # (the jitted function's own code and positional defaults are checked by its entry
                # point, two identity checks; keyword-only defaults, a dict changed in place, here)
                self._guard_code_and_defaults(fn)
            for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())):
                value = _cell_value(cell)
                if value is _MISSING:
                    continue
                label = f"closure variable {name!r} of {fn.__qualname__}"
                refuse_call_dependent(value, label)  # (an iterator kept in a cell: `next(it)` at every call)
                expr = f"{self.guards.bind(cell, 'cell')}.cell_contents"
                self.guards.watch(expr, value, label)
                if isinstance(value, type):
                    self.note_class(value, label)
                if i in recorded_cells:
                    cells[i].cell_contents = self._follow(value, expr, label)
                    self._cells.append((cells[i], cells[i].cell_contents, name, fn))
            self._wrote.append((dict(real), fn, watched))
        return copy

    def _guard_settings_read(self, code: types.CodeType) -> None:
        """Guard each of torch's global settings `code` names a query of (`torch.get_num_threads()`,
        `torch.are_deterministic_algorithms_enabled()`, `torch.is_anomaly_enabled()`) or a backend flag
        of (`torch.backends.cudnn.deterministic`): called or read at trace time, its answer would
        be baked into the program (not seen by a trace, which records tensor operations only)."""
        names, codes = set(), [code]
        while codes:  # a comprehension's or lambda's code inside too
            c = codes.pop()
            names.update(c.co_names)
            codes.extend(k for k in c.co_consts if type(k) is types.CodeType)
        for name in names & _SETTING_WRITES:
            raise UnmodelledMode(f"squall: the program calls torch.{name} ({code.co_qualname}), which changes the default its "
                                 "torch calls run under; squall's compiled calls run under the defaults of the call")
        for name in names & _SETTING_QUERIES.keys():
            query = _SETTING_QUERIES[name]
            self.guards.watch(f"{self.guards.bind(query, 'q')}()", query(), f"torch.{name}()")
        # a backend flag, read as an attribute: where the code names the flag and its module (or
        # `backends`: `torch.backends.cudnn.deterministic`, `from torch.backends import cudnn`)
        for flag in names & _BACKEND_FLAGS.keys():
            for holder_name, holder in _BACKEND_FLAGS[flag]:
                if holder_name in names or "backends" in names:
                    try:
                        value = getattr(holder, flag)
                    except Exception:  # noqa: BLE001 - a flag this build cannot read: the program cannot either
                        continue
                    self.guards.watch(f"{self.guards.bind(holder, 'q')}.{flag}", value, f"torch.backends.{holder_name}.{flag}")

    def _guard_code_and_defaults(self, fn: types.FunctionType) -> None:
        """Guard that `fn` still runs the code and takes the defaults it was traced with: the
        same objects (IPython's autoreload sets an edited function's `__code__` and `__defaults__`
        on the function object itself)."""
        held = self.guards.bind(fn, "fn")
        parts = [f"{held}.__code__ is {self.guards.bind(fn.__code__, 'k')}"]
        for name in ("__defaults__", "__kwdefaults__"):
            value = getattr(fn, name)
            parts.append(f"{held}.{name} is {self.guards.bind(value, 'k') if value is not None else None}")
        if fn.__kwdefaults__ and all(type(v) in _SCALARS for v in fn.__kwdefaults__.values()):
            # a dict, which may be changed in place: its numbers and strings too (others are followed)
            parts.append(f"{held}.__kwdefaults__ == {self.guards.bind(dict(fn.__kwdefaults__), 'k')}")
        self.guards.add(f"({' and '.join(parts)})", f"the code and defaults of {fn.__qualname__}")

    def _followed_defaults(self, fn: types.FunctionType) -> tuple | None:
        """`fn`'s default values as its copy is to hold them: a mutable one (`acc=[]`, which eager
        keeps between calls) followed as a recording copy, so reading it guards and writing it
        replays, as for a global; numbers, strings and None as they are."""
        defaults = fn.__defaults__
        if not defaults or all(type(v) in _SCALARS for v in defaults):
            return defaults
        label = f"the defaults of {fn.__qualname__}"
        return self._follow(defaults, f"{self.guards.bind(fn, 'fn')}.__defaults__", label)

    def _followed_kwdefaults(self, fn: types.FunctionType) -> dict | None:
        """`fn`'s keyword-only defaults, followed as `_followed_defaults` follows its defaults."""
        defaults = fn.__kwdefaults__
        if not defaults or all(type(v) in _SCALARS for v in defaults.values()):
            return defaults
        held = self.guards.bind(fn, "fn")
        return {k: self._follow(v, f"{held}.__kwdefaults__[{k!r}]", f"the default of {fn.__qualname__}'s parameter {k!r}")
                for k, v in defaults.items()}

    def _follow(self, value: Any, expr: str, label: str) -> Any:
        """`value`, reached as `expr`, as the program is to use it: a list or dict as a
        recording copy, and its items (a tuple's too) as `_recorded` gives them, so that a
        layer in a plain list or a function in a dict is read through as well."""
        if type(value) in _SCALARS:
            return value  # given as it is, no view, copy or recording function made (as `_recorded` gives it: most attributes a forward reads are numbers and flags)
        if type(value) is tuple and all(type(v) in _SCALARS for v in value):
            return value  # (a LayerNorm's normalized_shape: each item as it is, so the tuple itself)
        if type(value) is list:
            copy = self._list_copies.get(id(value))
            if copy is None:
                copy = self._list_copies[id(value)] = _RecordedList()
                copy.items_read, copy.label, copy.real, copy.target = False, label, value, None
                self._lists.append((value, copy, label, expr))
                list.extend(copy, [self._follow(v, f"{expr}[{i}]", f"item {i} of {label}") for i, v in enumerate(value)])
                copy.initial = list.copy(copy)
            return copy
        if type(value) is collections.deque:
            copy = self._list_copies.get(id(value))
            if copy is None:
                items = [self._follow(v, f"{expr}[{i}]", f"item {i} of {label}") for i, v in enumerate(value)]
                copy = self._list_copies[id(value)] = self._deque_copy(value, items, label, expr, target=None)
            return copy
        if type(value) in SNAPSHOT_TYPES:
            # a mutable sequence of numbers or bytes (array.array, bytearray, a numpy array): its
            # contents guarded; a change the program makes is found when it ends, undone and refused
            snapshot = snapshot_of(value)
            self._snapshots.append((value, snapshot, label))
            self.guards.namespace["_same_contents"] = same_contents
            self.guards.add(f"_same_contents({expr}, {self.guards.bind(snapshot, 'k')})", f"the items of {label}")
            return value
        if type(value) in RECORDED_DICT_TYPES:
            copy = self._dict_copies.get(id(value))
            if copy is None:
                held = self.guards.bind(value, "d")
                items = {k: self._follow(v, f"{held}[{plain_scalar(k)!r}]", f"item {plain_scalar(k)!r} of {label}") if type(k) in _SCALARS else v for k, v in value.items()}
                copy = self._dict_copies[id(value)] = self._dict_copy(type(value), value, label, items)
                if type(value) is collections.defaultdict:
                    self.guards.watch(f"{held}.default_factory", value.default_factory, f"the default factory of {label}")
                    copy.default_factory = self._recorded(value.default_factory, f"the default factory of {label}")
            return copy
        if type(value) is set:
            copy = self._set_copies.get(id(value))
            if copy is None:
                copy = self._set_copies[id(value)] = _RecordedSet(value)
                copy.recorder, copy.real, copy.label, copy.whole_read, copy.added, copy.target = self, value, label, False, [], None
            return copy
        if type(value) is tuple:
            items = tuple(self._follow(v, f"{expr}[{i}]", f"item {i} of {label}") for i, v in enumerate(value))
            return value if all(a is b for a, b in zip(items, value)) else self._standing_for(items, value)
        return self._recorded(value, label)

    def _deque_copy(self, real: collections.deque, items: list, label: str, expr: str, *, target: str | None) -> _RecordedDeque:
        """A recording copy (squall.frontend.state_views) of deque `real`, holding `items`."""
        copy = _RecordedDeque(maxlen=real.maxlen)
        collections.deque.extend(copy, items)  # (not recorded as the program's appends)
        copy.items_read, copy.label, copy.real, copy.target, copy.appended = False, label, real, target, []
        self._deques.append((copy, expr))
        return copy

    def _dict_copy(self, cls: type, real: Any, label: str, items: dict) -> Any:
        """A recording copy (squall.frontend.state_views) of dict-like `real`, holding `items`."""
        copy = RECORDED_DICT_TYPES[cls]()
        copy.recorder, copy.real, copy.label, copy.whole_read, copy.keys_set, copy.target = self, real, label, False, {}, None
        copy.routed = False  # its route where reached through an argument object, its reads guarded through `target`
        for k, v in items.items():
            cls.__setitem__(copy, k, v)  # (not recorded as the program's writes)
        return copy

    def _standing_for(self, copy: Any, original: Any) -> Any:
        """Note that `copy` stands for `original` while tracing: an output or a value set that
        is the copy is the original."""
        self._originals[id(copy)] = (copy, original)
        return copy

    def _read_item(self, recorded: Any, key: Any, value: Any) -> Any:
        if recorded.target is not None and not recorded.routed:
            return value  # an argument's items are in the cache key
        if type(key) not in _SCALARS:
            recorded.whole_read = True  # a key the check cannot name: all items are checked
            return value
        expr = f"{self._dict_where(recorded)}[{plain_scalar(key)!r}]"
        real, label = dict.__getitem__(recorded.real, key), f"item {plain_scalar(key)!r} of {recorded.label}"
        if recorded.routed and type(real) is torch.Tensor and value is real and self.tensor_input is not None:
            # held by a dict an argument object holds (a Mamba cache's `conv_states`): an input, as its attributes' tensors are
            return self._held_item(real, expr, label, (*recorded.routed, ("item", key)))
        self.guards.watch(expr, real, label)
        return value  # (followed when the copy was made)

    def _read_key(self, recorded: Any, key: Any, found: bool) -> None:
        if recorded.target is not None and not recorded.routed:
            return
        if type(key) not in _SCALARS:
            recorded.whole_read = True
            return
        self.guards.add(f"({plain_scalar(key)!r} in {self._dict_where(recorded)}) is {found}", f"key {plain_scalar(key)!r} of {recorded.label}")

    def _dict_where(self, recorded: Any) -> str:
        """Where the check reads a recorded dict: through the call's arguments where it was
        reached so (an argument object's dict: a new cache's own), else the very dict traced."""
        return recorded.target if recorded.routed else self.guards.bind(recorded.real, "d")

    def _recorded(self, value: Any, label: str) -> Any:
        """`value` (already guarded where it was reached) as the program is to use it: a user
        function as a copy recording its global reads, a partial of one likewise, a module or
        object as a view, anything else as it is."""
        refuse_python_state_owner(value, label)
        refuse_call_dependent(value, label)
        stand_in = standard_stand_in(value, self.guards, label)
        if stand_in is not None:
            return self._standing_for(stand_in, value)
        if isinstance(value, type):
            self.note_class(value, label)
        if _user_function(value) or type(value) is torch.Tensor or type(value) is torch.nn.Parameter:
            # read as an object, the Python attributes set on it (`f.mode`, a global tensor's `scale`,
            # read as they are) are guarded, none included: one changed or set later is seen
            self.guards.same_dict(f"{self.guards.bind(value, 'o')}.__dict__", dict(value.__dict__), f"the attributes of {label}")
        if _user_function(value):
            return self._recording_function(value)  # a helper's own global reads are seen too
        if type(value) is _LRU_CACHE:
            return self._standing_for(self._recorded(value.__wrapped__, label), value)
        if type(value) is functools.partial:
            return self._recording_partial(value, label)
        if type(value) is types.MethodType and _user_function(value.__func__) and viewable(value.__self__):
            # a bound method: its object is read like a module's attributes
            owner = self.view(value.__self__, f"{type(value.__self__).__name__} object of {label}")
            return self._standing_for(types.MethodType(self._recording_function(value.__func__), owner), value)
        viewed = self._views.get(id(value))  # (a view holds its object: the id is this object's)
        if viewed is not None:
            return viewed  # viewable when first viewed: asked once (a transformers config answers its isinstance checks in Python)
        if viewable(value):
            return self.view(value, label)
        if is_autograd_function(value):
            # `MyFn.apply(proxy)`: its forward traced, or the whole Function opaque (squall.frontend.autograd_functions)
            forward = value.forward
            traced = TracedAutogradFunction(value, self._recording_function(forward) if _user_function(forward) else forward)
            return self._standing_for(traced, value)
        if isinstance(value, logging.Logger):
            return self._standing_for(TracedLogger(value, self.guards, label), value)
        if _users_module(value):
            reads = self._module_reads.get(id(value))
            if reads is None:
                reads = self._module_reads[id(value)] = _ModuleReads(value.__name__)
                types.ModuleType.__getattribute__(reads, "__dict__")["_squall_module"] = (value, self)
                self._standing_for(reads, value)
            return reads
        return value

    def _recording_partial(self, p: functools.partial, label: str) -> functools.partial:
        """A copy of partial `p` whose function records; its keywords (the one part of a partial
        that can change in place) are guarded."""
        held = self.guards.bind(p, "o")
        self.guards.add(f"len({held}.keywords) == {len(p.keywords)}", f"the keywords of {label}")
        keywords = {}
        for k, v in p.keywords.items():
            self.guards.watch(f"{held}.keywords[{plain_scalar(k)!r}]", v, f"keyword {k!r} of {label}")
            keywords[k] = self._recorded(v, f"keyword {k!r} of {label}")
        args = [self._recorded(a, f"argument {i} of {label}") for i, a in enumerate(p.args)]
        return self._standing_for(functools.partial(self._recorded(p.func, label), *args, **keywords), p)
