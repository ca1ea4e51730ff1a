"""The cache key and the generated entry point: the hot path of every jitted function.

The entry point builds one flat key from the call's inputs in a single cheap pass, looks
it up once, and calls what the cache holds; a miss goes to the jitted function's compile.
`value_key` is the slow path's key for anything that is not a plain tensor or number.

A number argument is keyed by its value, until a call misses only because such a number
changed: `DynamicNumbers` then makes it dynamic, keyed by its type alone and passed to the
generated function at run time (`squall.ltorch.numbers`). The hot path looks the exact key up
first; only a miss, in a function that has dynamic numbers, builds the key with them.

A module's key also holds its parameters', buffers' and tensor attributes' metadata
(`ParameterKey`: found with one C check while it is the last call's) and every submodule's
training flag; a module whose forward takes a fixed number of tensors takes the fast path too.
"""
from __future__ import annotations

import inspect
import operator
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

try:  # torch's C check of tensor metadata (private; the fast path is skipped without it)
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:  # pragma: no cover - other torch builds
    _TensorGuards = None

from ..frontend.state_views import _SCALARS, by_structure, viewable
from ..sources import load_source
from ..trace import container_items, plain_scalar, pytree_container, scalar_key

__all__ = ["value_key", "key_parts", "make_entry_point", "forget_recent", "DynamicNumbers", "dynamic_key", "masked_shape", "DYNAMIC",
           "argument_leaves", "ParameterKey", "training_reader"]

# --- the cache key ------------------------------------------------------------------------------

_BUILTIN_SCALARS = (int, float, str, complex)
_Tensor = torch.Tensor
_is_grad_enabled = torch.is_grad_enabled
_is_any_autocast_enabled = torch._C._is_any_autocast_enabled
_get_default_dtype = torch.get_default_dtype


_KEYED_BY_EQUALITY = frozenset({int, bool, str, type(None)})  # the scalars whose == is their identity as a value


def value_key(x: Any, where: str) -> Any:
    """The key part of one argument: metadata for tensors, values for everything else."""
    t = type(x)
    if isinstance(x, _Tensor):
        # a Parameter or another subclass by its type too: eager's ops answer for a subclass's
        # tensors as its class says (squall.frontend.tracing refuses to trace one that overrides them)
        return (x.shape, x.dtype, x.device, x.requires_grad) if t is _Tensor else (x.shape, x.dtype, x.device, x.requires_grad, t)
    if t in _SCALARS:
        return (t, x if t in _KEYED_BY_EQUALITY else scalar_key(x))
    if isinstance(x, _BUILTIN_SCALARS):
        # an IntEnum, a float or str subclass: told apart by type and plain value, never by
        # the subclass's own __eq__/__hash__ (one that said "equal" would share an entry)
        x = plain_scalar(x)
        return (t, scalar_key(x) if isinstance(x, (float, complex)) else x)
    if t in (list, tuple):
        return (t, tuple(value_key(v, f"{where}[{i}]") for i, v in enumerate(x)))
    if t is dict:
        # a key by its own key: a str-Enum key and its plain value hash alike but are not alike
        return (t, tuple((value_key(k, where), value_key(v, f"{where}[{_label(k)}]")) for k, v in x.items()))
    if t is slice:
        # traced as a constant, so keyed by its values. A slice is unhashable before Python 3.12
        # and hashable (by its bounds) from 3.12 on: one rule for both, so a tensor bound is
        # refused on every Python rather than keyed by the tensor's identity
        if all(type(v) in _SCALARS for v in (x.start, x.stop, x.step)):
            return (t, tuple(value_key(v, where) for v in (x.start, x.stop, x.step)))
        return _unhashable_key(x, t, where)
    if pytree_container(x):
        # keyed as a dict is, by subscript (a namedtuple's, a ModelOutput's tensors are inputs of the program)
        return (t, tuple((value_key(k, where), value_key(v, f"{where}[{_label(k)}]")) for k, v in container_items(x)))
    if by_structure(x):
        # a plain object (a KV cache, made anew at every `generate`): keyed by its type; the
        # program reaches it through the call and guards what it read of it, its layout
        # included (squall.frontend.state_guards), so a new one of the same layout hits
        return (t, _BY_LAYOUT)
    leaves, spec = tree_flatten(x)
    if not (len(leaves) == 1 and leaves[0] is x):
        return (spec, tuple(value_key(v, where) for v in leaves))
    try:
        hash(x)
    except TypeError:
        return _unhashable_key(x, t, where)
    return (t, x)


class _ByLayout:
    """What the key holds for an object told apart by type and guarded layout (one object)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<by layout>"


_BY_LAYOUT = _ByLayout()


class _Identity:
    """An unhashable object in a key: equal only to itself (held, so its id is never reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: Any) -> bool:
        return type(other) is _Identity and other.obj is self.obj


def _unhashable_key(x: Any, t: type, where: str) -> Any:
    """The key part of an unhashable object argument (a config, a dataclass with eq=True):
    by identity where the program reads it through a view, which guards each attribute it
    reads (squall.frontend.state_guards); a SimpleNamespace of plain values by those values."""
    if viewable(x):
        return (t, _Identity(x))
    if t is types.SimpleNamespace and not any(isinstance(v, _Tensor) for v in tree_flatten(vars(x))[0]):
        return (t, value_key(vars(x), where))
    raise TypeError(
        f"squall.jit: {where} is a {t.__name__}, which is neither a tensor, a number, nor a "
        "container of them, and is not hashable nor read through squall's state guards, so calls "
        "cannot be told apart by it"
    )


def _label(k: Any) -> str:
    """A dict key for a message, without running a user type's __repr__."""
    return repr(k) if type(k) in _SCALARS else f"<{type(k).__name__}>"


def key_parts(args: tuple, kwargs: dict, names: list[str]) -> dict[str, Any]:
    """The key, part by part, labelled with the input each part comes from (for warnings)."""
    parts = {f"argument {names[i]!r}": value_key(a, f"argument {names[i]!r}") for i, a in enumerate(args)}
    parts.update({f"keyword argument {k!r}": value_key(v, f"keyword argument {k!r}") for k, v in kwargs.items()})
    return parts


# The hot path, written once for functions and modules. One flat key: a tensor adds (shape,
# dtype, device, requires_grad), which starts with a torch.Size; a number adds (type, value),
# which starts with a type; anything else adds one nested tuple; so the groups cannot be
# confused. The executor configuration is fixed when jit is called and every jitted function
# has its own cache, so it needs no place in the key.
_ENTRY_POINT = """
def compiled(*args, **kwargs):
{module_state}
{fast_path}
{keyword_path}
{autocast_route}
    key = (_is_grad_enabled(), _get_default_dtype())
    for a in args:
        if type(a) is _Tensor:
            key += (a.shape, a.dtype, a.device, a.requires_grad)
        elif type(a) in _SCALARS:
            key += (type(a), a if type(a) in _KEYED_BY_EQUALITY or type(a) is float and a == a and a else _scalar_key(a))
        else:
            key += (value_key(a, "an argument"),)
    if kwargs:
        key += (tuple([(k, value_key(v, f"keyword argument {{k!r}}")) for k, v in kwargs.items()]),)
{state_key}
    found = key
    entry = cache.get(key)
    if entry is None and (dynamic or dims):
        found = dynamic_key(key, args, kwargs, dynamic, dims)
        entry = cache.get(found)
    if entry is None:
        return compile_(args, kwargs, key, {params})({params_arg}*args, **kwargs)
    entry[1] += 1
    if kwargs and not args:
        last[1] = _recent_keywords(cache, checks, entry, found, kwargs)
{positional_recent}
    return entry[0]({params_arg}*args, **kwargs)
"""

# A positional call of tensors and numbers (`f(cache, kv, pos)`) found by its key makes its entry
# the fast path's `recent`, its numbers checked as the key holds them (`_recent`)
_POSITIONAL_RECENT = """    elif len(args) == {n} and not kwargs:
        last[0] = _recent(cache, checks, entry, found, args, None, dynamic)"""

# A call of keyword tensors alone (a transformers model's `model(input_ids=..., attention_mask=...)`)
# tries the entry it last found by its key (`last[1]`) the same way: the same names in the same
# order, then one C check of the tensors (`_recent`), grad mode, the default dtype and a module's
# state (a call under torch.autocast fails that check, as the positional one's does, and goes
# on to `under_autocast`); anything else goes on to the key.
_KEYWORD_PATH = """    if kwargs and not args:
        recent = last[1]
        if recent is not None and recent[5] == tuple(kwargs) and recent[1](*kwargs.values()) and _is_grad_enabled() is recent[2] and _get_default_dtype() is recent[3]{state_check}:
            entry = recent[0]
            entry[1] += 1
            return entry[0]({params_arg}**kwargs)"""
_FUNCTION_PARTS = {"module_state": "", "state_key": "", "state_check": "", "params": "None", "params_arg": ""}
# A call made while torch.autocast is enabled goes to `under_autocast`, which compiles it for that
# autocast state apart (squall.runtime.jit): its key never meets a call's made without autocast.
# That function's own entry point, always called under its state, leaves this out.
_AUTOCAST_ROUTE = """    if _is_any_autocast_enabled():
        return under_autocast(*args, **kwargs)"""

# A plain function's own code and positional defaults are the ones its entries were traced with
# (IPython's autoreload sets an edited function's on the function object): two identity checks,
# and where either changed every entry is dropped (`recode`) and the call compiles anew.
_OWN_CODE = """    if own.__code__ is not own_code or own.__defaults__ is not own_defaults:
        return recode(args, kwargs)"""


def remember_own_code(compiled: Callable) -> None:
    """The entry point's function runs the code and defaults it holds now: checked against these."""
    space = compiled.__globals__
    space["own_code"], space["own_defaults"] = space["own"].__code__, space["own"].__defaults__


# For a function of a fixed number of positional parameters, the call with that many plain
# tensors builds the same key in one tuple display, without the loop. Before that, the entry
# this fast path last hit (`recent`) is tried with one C call (`_metadata_check`): it holds
# every tensor to the exact type, dispatch keys, dtype, device, requires_grad, sizes and
# strides of that entry's first such call, which is all its key holds of them and more, and
# grad mode and the default dtype are compared to the entry's key; anything else goes on to
# the key. Reading shape, dtype and device attribute by attribute is most of a hit's cost.
# torch.autocast adds its dispatch keys to every tensor's as the C check reads them: a call under
# it fails that check, and goes to `under_autocast` (its state's own jitted function) before any
# key is looked up.
_FAST_PATH = """    if len(args) == {n} and not kwargs:
        {names}, = args
        recent = last[0]
        if recent is not None and recent[1]({names}) and _is_grad_enabled() is recent[2] and _get_default_dtype() is recent[3]{state_check}:
            entry = recent[0]
            entry[1] += 1
            return entry[0]({params_arg}{names})
{autocast_route_fast}
        if {tensor_checks}:
            key = (_is_grad_enabled(), _get_default_dtype(), {metadata}){state_key_inline}
            entry = cache.get(key)
            if entry is not None:
                entry[1] += 1
                last[0] = _recent(cache, checks, entry, key, ({names},))
                return entry[0]({params_arg}{names})
            if dims:
                key = dynamic_key(key, args, kwargs, dynamic, dims)
                entry = cache.get(key)
                if entry is not None:
                    entry[1] += 1
                    last[0] = _recent(cache, checks, entry, key, ({names},))
                    return entry[0]({params_arg}{names})"""


def _recent_keywords(cache: dict, checks: dict, entry: list, key: tuple, kwargs: dict) -> tuple | None:
    """`_recent` for a call of keyword tensors alone (`key`: the key its entry was found under,
    whose third part holds (name, tensor metadata) per keyword), with the names in their order
    last; None where a value is not a plain tensor."""
    tensors = tuple(kwargs.values())
    for t in tensors:
        if type(t) is not _Tensor:
            return None
    recent = _recent(cache, checks, entry, key, tensors, shapes=[part[1][0] for part in key[2]])
    return recent + (tuple(kwargs),) if recent is not None else None


def _recent(cache: dict, checks: dict, entry: list, key: tuple, values: tuple, shapes: list | None = None,
            number_paths: set | frozenset = frozenset()) -> tuple | None:
    """What the fast path keeps of the entry it hit: the entry, a check of the call's values against
    these (built once per key, kept in `checks`), its grad mode and its default dtype; None if
    another thread took the entry out of the cache meanwhile, or a value is neither a plain tensor
    nor an int, float or bool.

    The check of the tensors is torch's C check of their metadata. Where the key holds symbolic
    sizes (DYNAMIC: any of 2 or more), it leaves those sizes and the strides of those tensors open,
    and a generated check of each such size being 2 or more completes it: a call of new lengths
    takes this path too, not the key's. A positional number (`values` of a call by position, with
    `shapes` None) is checked as its key part holds it: its exact type, and its value, or for a
    dynamic number (at a path in `number_paths`) nothing more, for a size symbol that it is 2 or
    more, or -2 or less for a negated one (`dynamic_key`): a call of `f(cache, kv, pos)` with a new `pos` takes this path too."""
    if _TensorGuards is None or cache.get(key) is not entry:
        return None
    if key in checks:  # (None: a key no check can be built for, remembered so)
        check = checks[key]
    else:
        check = checks[key] = _recent_check(key, values, shapes, number_paths)
    return (entry, check, key[0], key[1], key[-1]) if check is not None else None  # (the last item: a module's state, for its fast path)


def _recent_check(key: tuple, values: tuple, shapes: list | None, number_paths: set | frozenset) -> Callable | None:
    """The check `_recent` keeps for `key` (see there), or None where a value is not one it checks."""
    tensors, conditions, at = [], [], 2  # key: grad mode, default dtype, then each value's part
    names = [f"a{i}" for i in range(len(values))]
    for i, (name, value) in enumerate(zip(names, values)):
        t = type(value)
        if t is _Tensor:
            shape = shapes[len(tensors)] if shapes is not None else key[at]
            tensors.append((name, value, shape))
            conditions.extend(f"{name}.shape[{d}] >= 2" for d, n in enumerate(shape) if n is DYNAMIC)
            at += 4
        elif t in (int, float, bool) and shapes is None:
            kind, part = key[at], key[at + 1]
            conditions.append(f"type({name}) is {kind.__name__}")
            if part is DYNAMIC_NEGATIVE:
                conditions.append(f"{name} <= -2")  # a negated size symbol
            elif type(part) is _Dynamic and part is not DYNAMIC or part is not DYNAMIC and kind is float:
                return None  # (a float keyed by value: -0.0 and nan keyed apart, `scalar_key`)
            elif part is not DYNAMIC:
                conditions.append(f"{name} == {part!r}")
            elif kind is int and ("args", i) not in number_paths:
                conditions.append(f"{name} >= 2")  # a size symbol
            at += 2
        else:
            return None
    sizes = [[None if n is DYNAMIC else n for n in shape] for _, _, shape in tensors]
    strides = [[None] * t.dim() if DYNAMIC in shape else list(t.stride()) for _, t, shape in tensors]
    check = _metadata_check([t for _, t, _ in tensors], sizes, strides)
    if not conditions and len(tensors) == len(values):
        return check
    namespace = {"_metadata_check": check}
    load_source(f"def check({', '.join(names)}):\n    return _metadata_check({', '.join(n for n, _, _ in tensors)}) and {' and '.join(conditions)}\n",
                "fast-check", namespace)
    return namespace["check"]


def forget_recent(last: list, checks: dict, key: Any, entry: list) -> None:
    """Entry `key` left the cache: the fast paths stop going to it."""
    checks.pop(key, None)
    for i, recent in enumerate(last):
        if recent is not None and recent[0] is entry:
            last[i] = None


def _fixed_arity(fn: Callable) -> int:
    """How many positional parameters `fn` takes, where every one is required and there are no
    others and 1 to 8 of them (the calls a fast path serves); else 0."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return 0
    fixed = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)
    return len(params) if fixed and 1 <= len(params) <= 8 else 0


def _fast_path(arity: int, parts: dict[str, str]) -> str:
    """The fast path of the entry point, for functions (and module forwards) of a fixed positional
    `arity` (`_fixed_arity`; none for 0); `parts` are the function's or the module's (`_FUNCTION_PARTS`, `_MODULE_PARTS`)."""
    if not arity:
        return ""
    names = [f"a{i}" for i in range(arity)]
    return _FAST_PATH.format(
        n=len(names),
        names=", ".join(names),
        tensor_checks=" and ".join(f"type({a}) is _Tensor" for a in names),
        metadata=", ".join(f"{a}.shape, {a}.dtype, {a}.device, {a}.requires_grad" for a in names),
        state_check=parts["state_check"],
        state_key_inline=" + (state,)" if parts["state_key"] else "",
        params_arg=parts["params_arg"],
        autocast_route_fast=_indented(parts["autocast_route"]),
    )


def _indented(lines: str) -> str:
    return "\n".join("    " + line for line in lines.splitlines())


# A module's parameters, buffers and tensor attributes are read at every call, so optimizer
# steps and load_state_dict are seen. Their metadata and the submodules' training flags are the
# key's last item (`state`); the metadata is found with one C check while it is the last call's.
_MODULE_PARTS = {
    "module_state": """    try:
        params = [store[k] for store, k in slots]
        for store, k, i in ties:
            if store[k] is not params[i]:  # a tied weight untied
                return relayout(args, kwargs)
        training = tuple(map(training_read[0], training_of))
        known = parameter_key.last
        if known is None or not known[0](*params):
            known = parameter_key.find(params)
    except (KeyError, AttributeError, TypeError):
        # a parameter, buffer or tensor attribute was removed or set to None (or, in another
        # thread, the layout was being read again): the module's layout is read again
        return relayout(args, kwargs)
    state = (known[1], training)""",
    "state_key": "    key += (state,)",
    "state_check": " and state == recent[4]",
    "params": "params",
    "params_arg": "params, ",
}


class _Metadata:
    """The metadata of a module's parameters, buffers and tensor attributes as its key holds
    them: (shape, dtype, device, requires_grad) per tensor in one flat tuple, hashed once.
    Equal to another that holds equal metadata."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple):
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return other is self or (type(other) is _Metadata and other._hash == self._hash and other.parts == self.parts)

    def __repr__(self) -> str:
        return f"<metadata of {len(self.parts) // 4} tensors>"


def _never(*tensors: Any) -> bool:
    return False


class ParameterKey:
    """What a module's key holds of its parameters, buffers and tensor attributes: their
    metadata (`_Metadata`). `last` is the (C check, metadata) pair of the last call's
    tensors: the check (torch's TensorGuards, as the function fast path's: exact type,
    dispatch keys, dtype, device, requires_grad and sizes of every tensor) holding means the
    metadata is the same; where it fails, `find` reads the metadata attribute by attribute."""

    _KEEP = 8  # metadata remembered with its check; forgetting one costs only building its check again

    def __init__(self):
        self.last: tuple[Callable[..., bool], _Metadata] | None = None
        self._known: dict[tuple, tuple[Callable[..., bool], _Metadata]] = {}

    def find(self, params: list) -> tuple[Callable[..., bool], _Metadata]:
        """The (check, metadata) of `params`, made `last`."""
        parts = tuple([m for p in params for m in (p.shape, p.dtype, p.device, p.requires_grad)])
        found = self._known.get(parts)
        if found is None or not found[0](*params):  # new metadata, or a check built under other dispatch state
            if len(self._known) >= self._KEEP:
                self._known.clear()
            # sizes as the key holds them, strides left open (the key does not hold them)
            check = _metadata_check(params, [list(p.shape) for p in params], [[None] * p.dim() for p in params])
            found = self._known[parts] = (check, found[1] if found is not None else _Metadata(parts))
        self.last = found
        return found

    def forget(self) -> None:
        """The module's layout changed: nothing of the old one is checked against."""
        self.last = None
        self._known.clear()


def _metadata_check(tensors: Any, sizes: list, strides: list) -> Callable[..., bool]:
    """torch's C check (TensorGuards) that tensors have the type, dispatch keys, dtype, device and
    requires_grad these have, and the `sizes` and `strides` given per tensor (None: left open);
    one that always fails where torch's check is missing or refuses a tensor (then every call
    reads the metadata)."""
    if _TensorGuards is None:
        return _never
    try:
        return _TensorGuards(*tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides).check
    except Exception:  # noqa: BLE001 - a tensor torch's check does not take: the attribute-by-attribute key
        return _never


_TRAINING_IN_DICT = operator.itemgetter("training")
_TRAINING_ATTRIBUTE = operator.attrgetter("training")


def training_reader(modules: list) -> tuple[Callable[[Any], bool], list]:
    """How the entry point reads the modules' training flags, and from what: each module's own
    `__dict__` (a C itemgetter, twice as fast as the attribute) where every one holds a bool
    there, as nn.Module.__init__ puts it, and no class defines it; else each module's attribute."""
    if all(type(m.__dict__.get("training")) is bool and not hasattr(type(m), "training") for m in modules):
        return _TRAINING_IN_DICT, [m.__dict__ for m in modules]
    return _TRAINING_ATTRIBUTE, list(modules)


def make_entry_point(fn: Callable, *, module: bool, cache: dict, compile_: Callable, relayout: Callable, dynamic: set, last: list,
                     checks: dict, under_autocast: Callable, dims: dict | None = None, slots: list | None = None, ties: list | None = None,
                     training_read: list | None = None, recode: Callable | None = None,
                     training_of: list | None = None, parameter_key: ParameterKey | None = None) -> Callable:
    """The entry point of a jitted function or module (`module`): generated once, closed over
    its cache, its compile, the set of its dynamic number arguments' paths
    (`DynamicNumbers.paths`, filled in place), and `last`, whose items are the entries its fast
    paths (positional tensors; keyword tensors) hit last, with `checks`, their metadata check per key (`forget_recent` when
    an entry leaves the cache). `dims` maps a tensor argument's path to its symbolic dimensions
    (`squall.runtime.dynamic_dims`, filled in place): the key holds DYNAMIC there for a size of
    2 or more. A module's entry point also reads its parameters through `slots` (checking that each tied
    weight's other place in `ties` still holds it), its training
    flags with `training_read[0]` from `training_of` (`training_reader`; lists filled in place
    when its layout changes) and keys their metadata with its `parameter_key`. A call made while
    torch.autocast is enabled goes to `under_autocast` (None: this entry point is that state's own,
    always called under it).
    A plain function's entry point goes to `recode` where its code or defaults changed (`_OWN_CODE`)."""
    namespace = {
        "dims": {} if dims is None else dims,
        "last": last,
        "checks": checks,
        "_recent": _recent,
        "_recent_keywords": _recent_keywords,
        "dynamic": dynamic,
        "dynamic_key": dynamic_key,
        "cache": cache,
        "compile_": compile_,
        "slots": slots,
        "ties": ties,
        "training_read": training_read,
        "training_of": training_of,
        "parameter_key": parameter_key,
        "relayout": relayout,
        "_is_grad_enabled": _is_grad_enabled,
        "_is_any_autocast_enabled": _is_any_autocast_enabled,
        "under_autocast": under_autocast,
        "_get_default_dtype": _get_default_dtype,
        "_Tensor": _Tensor,
        "_SCALARS": _SCALARS,
        "_KEYED_BY_EQUALITY": _KEYED_BY_EQUALITY,
        "_scalar_key": scalar_key,
        "value_key": value_key,
    }
    parts = _MODULE_PARTS if module else _FUNCTION_PARTS
    parts = {**parts, "autocast_route": _AUTOCAST_ROUTE if under_autocast is not None else ""}
    own = fn if not module and type(fn) is types.FunctionType else None  # (a bound method's function is traced as a helper's: guarded there)
    if own is not None:
        parts = {**parts, "module_state": _OWN_CODE}
        namespace.update(own=own, own_code=own.__code__, own_defaults=own.__defaults__, recode=recode)
    keyword_path = _KEYWORD_PATH.format(state_check=parts["state_check"], params_arg=parts["params_arg"])
    arity = _fixed_arity(fn.forward if module else fn)
    fast_path = _fast_path(arity, parts)
    positional_recent = _POSITIONAL_RECENT.format(n=arity) if fast_path else ""
    source = _ENTRY_POINT.format(fast_path=fast_path, keyword_path=keyword_path, positional_recent=positional_recent, **parts)
    load_source(source, "entry-point", namespace)
    return namespace["compiled"]


# --- dynamic numbers ----------------------------------------------------------------------------


class _Dynamic:
    """What a dynamic number's key holds in place of its value (one object, compared by identity)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


DYNAMIC = _Dynamic("<dynamic>")
# an int argument made a size whose value is -2 or less (`x[:, :n]` with n = -3): traced as the
# negation of a size symbol, so keyed apart from its values of 2 or more (and from -1, 0 and 1)
DYNAMIC_NEGATIVE = _Dynamic("<dynamic negative>")


def _sized_int(a: int) -> _Dynamic | None:
    """What an int at a size symbol's path (`DynamicDims.number_size`) is keyed as: None where by its value."""
    return DYNAMIC if a >= 2 else DYNAMIC_NEGATIVE if a <= -2 else None
_DYNAMIC_TYPES = (int, float)  # not bool: a flag picks a program, it is not data


def dynamic_key(key: tuple, args: tuple, kwargs: dict, paths: set | frozenset, dims: dict | None = None) -> tuple:
    """`key` (the entry point's exact key for this call) with the value of each int or float
    argument at one of `paths` replaced by `DYNAMIC`, and each size of 2 or more of a tensor's
    dimension named in `dims` (path -> dimensions) too. A path is ("args", i) or ("kwargs",
    name), followed by indexes into the plain lists, tuples and dicts the argument nests."""
    parts = list(key)
    at = 2  # after grad mode and the default dtype
    dims = dims or {}
    for i, a in enumerate(args):
        t = type(a)
        if t is _Tensor:
            if ("args", i) in dims:
                parts[at] = masked_shape(a.shape, dims[("args", i)])
            at += 4
        elif t in _SCALARS:
            if (t is int or t is float) and ("args", i) in paths:
                parts[at + 1] = DYNAMIC
            elif t is int and ("args", i) in dims and _sized_int(a) is not None:
                parts[at + 1] = _sized_int(a)  # (an int at a path of `dims`: a size symbol, `DynamicDims.number_size`)
            at += 2
        else:
            if t is list or t is tuple or t is dict or isinstance(a, _Tensor) or pytree_container(a):
                parts[at] = _masked(parts[at], a, ("args", i), paths, dims)
            at += 1
    if kwargs:
        parts[at] = tuple((k, _masked(part, v, ("kwargs", k), paths, dims)) for (k, part), v in zip(parts[at], kwargs.values()))
    return tuple(parts)


def masked_shape(shape: tuple, dims: frozenset[int]) -> tuple:
    """A tensor's shape as a key holds it where the dimensions `dims` are symbolic: DYNAMIC for
    each of those of 2 or more (0 and 1 stay sizes of their own)."""
    return tuple(DYNAMIC if d in dims and n >= 2 else n for d, n in enumerate(shape))


def _masked(part: Any, x: Any, path: tuple, paths: set | frozenset, dims: dict) -> Any:
    """`value_key(x)` (`part`) with the numbers at `paths` and the tensor dimensions in `dims`
    masked, walking x's plain containers."""
    t = type(x)
    if t is int or t is float:
        if path in paths:
            return (t, DYNAMIC)
        return (t, _sized_int(x)) if t is int and path in dims and _sized_int(x) is not None else part
    if isinstance(x, _Tensor):
        return (masked_shape(x.shape, dims[path]), *part[1:]) if path in dims else part
    if (t is list or t is tuple or t is dict or pytree_container(x)) and (any(p[: len(path)] == path and len(p) > len(path) for p in paths)
                                                    or any(p[: len(path)] == path and len(p) > len(path) for p in dims)):
        items = enumerate(x) if t is list or t is tuple else x.items() if t is dict else container_items(x)
        inner = part[1]
        if t is not list and t is not tuple:
            return (t, tuple((kp, _masked(vp, v, (*path, k), paths, dims)) for (kp, vp), (k, v) in zip(inner, items)))
        return (t, tuple(_masked(vp, v, (*path, k), paths, dims) for vp, (k, v) in zip(inner, items)))
    return part


def argument_leaves(args: tuple, kwargs: dict, pick: Callable[[Any], Any]) -> dict[tuple, Any]:
    """The call's arguments, also in plain lists, tuples and dicts, for which `pick(x)` is not
    None: path -> what `pick` gave. A path is ("args", i) or ("kwargs", name), then indexes."""
    found: dict[tuple, Any] = {}

    def walk(x: Any, path: tuple) -> None:
        t = type(x)
        if t is list or t is tuple:
            for i, v in enumerate(x):
                walk(v, (*path, i))
        elif t is dict or pytree_container(x):
            for k, v in (x.items() if t is dict else container_items(x)):
                walk(v, (*path, k))
        else:
            picked = pick(x)
            if picked is not None:
                found[path] = picked

    for i, a in enumerate(args):
        walk(a, ("args", i))
    for k, v in kwargs.items():
        walk(v, ("kwargs", k))
    return found


def _number_value(x: Any) -> Any:
    # an int or float as keys tell values apart (None: not a number argument)
    t = type(x)
    return (scalar_key(x) if t is float else x) if t is int or t is float else None


def _number_paths(args: tuple, kwargs: dict) -> dict[tuple, Any]:
    """The call's int and float arguments, also in plain lists, tuples and dicts: path -> value
    as keys tell values apart."""
    return argument_leaves(args, kwargs, _number_value)


class DynamicNumbers:
    """Which number arguments of one jitted function are dynamic (read at run time).

    A number becomes dynamic when a call misses the cache only because it changed: the
    call's key with every number masked matches an earlier call's whose numbers differ
    there. One whose dynamic trace still needed its exact value (a guard on it: a shape, a
    dim) goes back to being keyed by value, for good (`specialise`).
    """

    def __init__(self):
        self.paths: set[tuple] = set()  # the entry point reads this very set
        self._static: set[tuple] = set()
        self._seen: dict[tuple, dict[tuple, Any]] = {}  # masked key -> the numbers of its first call

    def key_for(self, key: tuple, args: tuple, kwargs: dict) -> tuple:
        """The key to compile this call under: `key`, or with its dynamic numbers masked,
        after making dynamic the numbers in which it differs from an earlier call."""
        numbers = _number_paths(args, kwargs)
        if not numbers:
            return key
        masked = dynamic_key(key, args, kwargs, numbers)
        earlier = self._seen.setdefault(masked, numbers)
        changed = {p for p, v in numbers.items() if earlier.get(p) != v} - self._static
        self.paths |= changed
        return dynamic_key(key, args, kwargs, self.paths) if self.paths & numbers.keys() else key

    def specialise(self, paths: set[tuple]) -> None:
        """Key the numbers at `paths` by value again, for good."""
        self.paths -= paths
        self._static |= paths
