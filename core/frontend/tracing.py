"""Tracing: running a program on proxies and recording what it calls into a Trace.

`TracingContext` is the state of one recording: the names handed out, the scopes that
collect each call's decomposition, the inputs and captured constants, and what the
functionalization of in-place ops and views needs (see `squall.ltorch.base`).
`trace_program` traces a function or an nn.Module on the inputs of one call.
"""
from __future__ import annotations

import collections
import functools
import inspect
import keyword
import re
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .. import ltorch
from ..ltorch import numbers
from ..ltorch.autocast import AutocastCasts
from ..ltorch.base import DataDependentError, NotModelled, TorchLanguage, TracingMode, UnmodelledMode
from ..prims import copy_
from ..proxies import NumberProxy, TensorProxy, size_leaf, tracing, real_tensor
from ..symbolic import ShapeEnv, SymInt
from ..trace import Trace, container_items, pytree_container, rebuilt_container
from .module_replays import ModuleReplays, replays_enabled
from .grad_roots import set_requires_grad
from .layouts import traced_is_contiguous, traced_storage_offset, traced_strides
from .outputs import capture_output
from .random_state import random_state_kept
from .recomputed_regions import refuse_recomputed_write
from .speculation import Speculation
from .state_recorder import StateRecorder
from .state_views import UnreplayableWrite
from .views import ViewTracker

__all__ = ["TracingContext", "InputBinding", "trace_program", "module_slots", "module_layout", "ModuleLayout", "argument_names", "ALL_DIMS", "NUMBER_SIZE", "state_dims_path"]

# `dims[("state",)]`: every dimension of every tensor read from an argument object is symbolic
# (unless `dims` holds that tensor's own path: then those dimensions only)
ALL_DIMS = frozenset(range(64))


class TracingContext:
    """What a trace is being recorded into: names, nested scopes, the language dispatcher."""

    def __init__(self, dispatch: Callable[[Callable, tuple, dict], Any] | None = None):
        self._counters: dict[str, int] = {}
        # scopes[0] collects the top-level bound symbols; a symbol being called
        # pushes a scope that collects its decomposition.
        self.scopes: list[list] = [[]]
        self.dispatch = dispatch
        self.constants: dict[str, Any] = {}
        self._constant_proxies: dict[int, TensorProxy] = {}
        self.substitutes: dict[int, torch.Tensor] = {}  # id -> a module's tensor an input proxy stands for
        self.inputs: list[TensorProxy] = []
        # an input or constant that an in-place op changed: its name -> (its proxy, the handle
        # that holds its newest value); the value is copied back when the program ends
        self.mutated_inputs: dict[str, tuple[TensorProxy, TensorProxy]] = {}
        # the name of a value an in-place op wrote under no_grad -> the value it replaced, which
        # the gradient reaching it passes to (as eager's autograd does)
        self.gradient_passes: dict[str, TensorProxy] = {}
        # the names of values the program computed and then made require grad (squall.frontend.grad_roots)
        self.grad_roots: set[str] = set()
        # whether the program is traced with grad mode on (a gradient may be taken of it); only
        # then does what a no_grad region inside it returns decide a gradient (squall.ltorch.eager_identity)
        self.traced_with_grad = torch.is_grad_enabled()
        # and in inference mode: a program that enters or leaves it is not modelled (squall.ltorch.base.UnmodelledMode)
        self.traced_in_inference = torch.is_inference_mode_enabled()
        # and under torch.autocast (the caller's): its program, which holds autocast's casts, runs with autocast off
        self.traced_under_autocast = torch._C._is_any_autocast_enabled()
        # views and what a write through one changes (squall.frontend.views)
        self.views = ViewTracker(self)
        # the real values of the call being traced, where tracing may read them (squall.frontend.speculation);
        # None in strict mode: reading a tensor's value is then a DataDependentError
        self.speculation: Speculation | None = None
        # a NumberProxy's name -> the numbers a read of it guards (squall.ltorch.numbers)
        self.number_roots: dict[str, tuple[NumberProxy, ...]] = {}
        # a NumberProxy's name -> the names of the number arguments it was computed from
        self.number_sources: dict[str, frozenset[str]] = {}
        # the size symbols of the inputs' symbolic dimensions, and the shape guards (squall.symbolic)
        self.shapes = ShapeEnv()
        # a torch-language call's key -> the decomposition its first call recorded, copied for a
        # later call with that key (squall.replays); None: every call runs its body
        self.decompositions: dict[tuple, Any] | None = {}
        self.rebinds = 0
        self.state: StateRecorder | None = None  # the Python state the program reads and writes (squall.frontend.state_guards)
        self.layouts_guarded: set = set()  # the inputs whose layout (and offset) a layout read guarded (squall.frontend.layouts)
        # the name of a value an in-place write gave a handle -> the handle's value before its first
        # write: eager's in-place ops keep a tensor's layout, so speculation lays the new value out as it
        self.written_layouts: dict[str, TensorProxy] = {}
        self._written_storages: set[int] = set()  # the memory of the captured tensors the program wrote

    def effects(self) -> tuple:
        """What a call may change in this context besides recording calls: where it differs after
        an op's body from before, the body did more (squall.replays), and is not replayed."""
        return (
            len(self.constants), len(self.number_roots), len(self.mutated_inputs), len(self.inputs), len(self.gradient_passes), len(self.grad_roots),
            len(self.substitutes), len(self.shapes.symbols), len(self.views.root), len(self.views.stale), self.rebinds,
        )

    def number_op(self, op: str, operands: tuple) -> NumberProxy:
        """Arithmetic or a comparison on a NumberProxy, recorded (squall.ltorch.numbers)."""
        return numbers.record(self, op, operands)

    def read_number(self, how: str, p: NumberProxy) -> Any:
        """The value of a Python read of a NumberProxy in the call being traced, guarded."""
        return numbers.read(self, how, p)

    def read_value(self, how: str, args: tuple, kwargs: dict | None = None, *, what: str) -> Any:
        """The value a Python read of a tensor (`bool(t)`, `t.item()`) has in the call being
        traced, guarded in the trace; `what` names the read for the strict-mode error."""
        if self.speculation is None:
            name = next((a.name for a in args if isinstance(a, TensorProxy)), "?")
            raise DataDependentError(
                f"squall: {what} needs the value of tensor {name}, which is not known while tracing "
                "in strict mode (squall.jit(..., strict=True)); control flow may depend on shapes and "
                "Python numbers, not on tensor data"
            )
        return self.speculation.read(how, args, kwargs or {})

    def strides(self, proxy: TensorProxy) -> tuple:
        """Eager's `proxy.stride()` in the call being traced, guarded (squall.frontend.layouts)."""
        return traced_strides(self, proxy)

    def storage_offset(self, proxy: TensorProxy) -> int:
        """Eager's `proxy.storage_offset()` in the call being traced, guarded (squall.frontend.layouts)."""
        return traced_storage_offset(self, proxy)

    def is_contiguous(self, proxy: TensorProxy, memory_format: torch.memory_format) -> bool:
        """Eager's `proxy.is_contiguous(memory_format)` in the call being traced, guarded (squall.frontend.layouts)."""
        return traced_is_contiguous(self, proxy, memory_format)

    def not_modelled(self, message: str) -> NoReturn:
        """Refuse what a proxy was asked (squall.proxies, which the torch language's errors come after):
        the call runs eagerly, saying `message`."""
        raise NotModelled(message)

    def rebind(self, handle: TensorProxy, value: TensorProxy) -> TensorProxy:
        """Make `handle` (a proxy the program holds) stand for `value` from now on.

        This is how in-place operations become functional: the calls recorded so far
        keep seeing the old value under its old name, and a tensor the caller passed in
        (or a captured constant) gets its final value written back when the program ends.
        """
        self.rebinds += 1
        old = TensorProxy(handle.name, like=handle)
        mapping = {id(handle): old}
        for scope in self.scopes:
            scope[:] = [bsym.swap_proxies(mapping) for bsym in scope]
        if any(x is handle for x in self.inputs) or handle.name in self.constants:
            refuse_recomputed_write(f"into tensor {handle.name}, an input or state it reads (a buffer: batch norm's running statistics)")
            if handle.name in self.constants:
                self._note_constant_written(self.constants[handle.name])
            # the real tensor (a captured constant, a module's parameter or buffer) keeps mapping
            # to `handle`, which holds its newest value from now on
            self.inputs = [old if x is handle else x for x in self.inputs]
            self.mutated_inputs[old.name] = (old, handle)
        # a handle rebound a second time keeps its write-back entry: it holds the newest value
        keeps_gradient = handle.requires_grad and not value.requires_grad and not torch.is_grad_enabled()
        if keeps_gradient:
            # eager's in-place write under no_grad leaves the tensor in the graph: a gradient
            # reaching its new value passes to its old one unchanged (squall.compiler.gradients)
            self.gradient_passes[value.name] = old
        if value.name not in self.constants and not any(p.name == value.name for p in self.inputs if type(p) is TensorProxy):
            self.written_layouts[value.name] = self.written_layouts.get(old.name, old)
        handle.name = value.name
        handle.shape = value.shape
        handle.dtype = value.dtype
        handle.device = value.device
        handle._requires_grad = value.requires_grad or keeps_gradient
        return handle

    def _note_constant_written(self, real: torch.Tensor) -> None:
        # captured tensors are separate inputs to the trace, so a write into one that shares memory
        # with another (`p.data.mul_(0.5)`, then `p` read; a view taken outside the program) would
        # not reach the other: eager runs such a program
        storage = _storage(real)
        if storage is not None:
            self._written_storages.add(storage)
            if any(c is not real and _storage(c) == storage for c in self.constants.values()):
                self.refuse(_SHARED_MEMORY)

    def set_requires_grad(self, proxy: TensorProxy, value: bool) -> TensorProxy:
        """`proxy.requires_grad = value` in the program (squall.frontend.grad_roots)."""
        return set_requires_grad(self, proxy, value)

    def refuse(self, why: str) -> None:
        """Stop the trace: the program does what squall's traces do not model, and runs eagerly (a
        proxy's own attribute found it; squall.ltorch.unmodelled)."""
        raise UnmodelledMode(why)

    def new_name(self, prefix: str = "t") -> str:
        n = self._counters.get(prefix, 0)
        self._counters[prefix] = n + 1
        return f"{prefix}{n}"

    def substitute(self, real: torch.Tensor, proxy: TensorProxy) -> None:
        """Let `proxy` (an input) stand for the real tensor `real` wherever the program uses it:
        how a module's parameters and buffers are traced without touching the module."""
        self._constant_proxies[id(real)] = proxy
        self.substitutes[id(real)] = real  # kept alive, so its id is not reused while tracing

    def constant(self, value: torch.Tensor) -> TensorProxy:
        """The proxy standing for a real tensor the program captured (a global, a default),
        or for a module's parameter or buffer (`substitute`)."""
        p = self._constant_proxies.get(id(value))
        if p is None:
            if self._written_storages and _storage(value) in self._written_storages:
                self.refuse(_SHARED_MEMORY)
            p = TensorProxy(
                self.new_name("c"),
                shape=value.shape,
                dtype=value.dtype,
                device=value.device,
                requires_grad=value.requires_grad,
            )
            self.constants[p.name] = value
            self._constant_proxies[id(value)] = p
        return p



_SHARED_MEMORY = ("squall: the program writes into a tensor it captured that shares memory with another it uses (a "
                  "parameter's .data and the parameter, a view taken outside the program): squall's trace holds them "
                  "as separate tensors, so the write would not reach the other")


def _storage(t: Any) -> int | None:
    """Where a captured tensor's memory is (None for one with none: an empty tensor's is shared by many)."""
    if not isinstance(t, torch.Tensor) or t.device.type == "meta":
        return None
    storage = t.untyped_storage()
    return storage.data_ptr() if storage.nbytes() else None


@dataclass(frozen=True)
class InputBinding:
    """Where an input proxy comes from: a path of indexes into the function's arguments.

    The path starts at "params" (a module's parameters and buffers, a list),
    "args" (positional arguments, a tuple) or "kwargs" (a dict); or it is ("state", owner,
    key, route): a tensor an object reached from the arguments holds, read at every call where
    `route` reaches it through the call's arguments (squall.trace.route_value: an attribute of
    an object, an item of a list, tuple or dict it holds), or where there is no route, as
    `owner[key]` (the object's `__dict__`; squall.frontend.state_guards).
    """

    proxy: TensorProxy
    path: tuple  # e.g. ("args", 1, "k")


# `dims[state_dims_path(...)] is NUMBER_SIZE`: the int an argument object holds there is a size symbol
NUMBER_SIZE = frozenset({None})


def _container_stand_in(container: Any, items: list, children: list, records: list) -> Any:
    """A `pytree_container` argument (its `container_items` are `items`) as the traced program
    gets it: one like it holding `children` (its own, tensors as their proxies), noted in
    `records` with what it holds, to be checked unwritten after the trace."""
    if all(c is v for c, (_, v) in zip(children, items)):
        return container
    try:
        copy = rebuilt_container(container, children)
    except TypeError as e:
        raise UnreplayableWrite(f"squall: a {type(container).__name__} argument cannot be remade from its items ({e}), so squall cannot trace the program with it") from e
    records.append((copy, container_items(copy), list(getattr(copy, "__dict__", {}).items())))
    return copy


def _as_eager_returns(ctx: TracingContext, x: TensorProxy, written: dict[int, TensorProxy]) -> TensorProxy:
    """The output `x` as eager returns it, where the program wrote an input in place (`written`:
    each written input's handle -> the input): that input itself, or a view taken of it."""
    if id(x) in written:
        return written[id(x)]
    view = ctx.views.taken_of(x, written)
    return x if view is None else view


def _refuse_written_records(records: list) -> None:
    """The program ran on stand-ins of its container arguments (`_container_stand_in`): one it
    wrote into (an item set or added, an attribute set) would leave the caller's unchanged,
    unlike eager, so it is refused (the calls of its signature run eagerly, with a warning)."""
    for copy, items, attributes in records:
        # compared by identity: a tensor's == would be an op of the program
        if not (_same_items(container_items(copy), items) and _same_items(getattr(copy, "__dict__", {}).items(), attributes)):
            raise UnreplayableWrite(f"squall: the program writes into a {type(copy).__name__} argument, which squall does not replay on the caller's")


def _refuse_tensor_attributes(inputs: list, result: Any) -> None:
    """A Python attribute the program set on a tensor it takes (`x.cache = y`) would stay on the
    proxy, and one on a tensor it returns would not reach the caller's result, unlike eager:
    refused (the calls of its signature run eagerly, with a warning)."""
    for p in inputs:
        if type(p) is TensorProxy and p.__dict__:
            raise UnreplayableWrite(f"squall: the program sets {', '.join(map(repr, p.__dict__))} on tensor {p.name} it takes, "
                                    "a Python attribute squall does not replay on the caller's tensor")
    for x in tree_flatten(result)[0]:
        if type(x) is TensorProxy and x.__dict__:
            raise UnreplayableWrite(f"squall: the program returns a tensor carrying the Python attribute(s) "
                                    f"{', '.join(map(repr, x.__dict__))}, which squall's result would not carry")


def _same_items(now: Any, before: list) -> bool:
    now = list(now)
    return len(now) == len(before) and all((a is b or type(a) is int and a == b) and v is w for (a, v), (b, w) in zip(now, before))


def _refuse_tensor_subclass(x: Any, label: str) -> None:
    """Refuse an input of a tensor subclass whose ops eager answers as its class says (its own
    `__torch_function__` or `__torch_dispatch__`, or torch's default one, which makes every result
    an instance of it): a trace records torch's ops on plain tensors. nn.Parameter and nn.Buffer
    turn that handling off, so they are traced as their tensors."""
    cls = type(x)
    if cls is torch.Tensor or cls is TensorProxy:
        return
    if cls.__torch_function__ is not torch._C._disabled_torch_function_impl or cls.__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        raise NotModelled(f"squall: {label} is a {cls.__qualname__}, a tensor subclass whose handling of torch's ops squall's traces do not model")


def state_dims_path(owner: dict | None, key: str, route: tuple | None) -> tuple:
    """The path `DynamicDims` keys a tensor an argument object holds by: its route through the
    call's arguments (the same for every KV cache of one layout), else its owner's identity."""
    return ("state", route, key) if route is not None else ("state", id(owner), key)


@functools.cache
def _torch_table() -> dict:
    return ltorch.torch_table()


# --- input names ------------------------------------------------------------------------------

_RESERVED = {"torch", "params", "args", "kwargs"}
_AUTOCAST_CASTS = AutocastCasts()  # torch's answers on autocast's casts, for every trace
_GENERATED = re.compile(r"^[tcn]\d+$")  # tensors, constants, numbers


def _local_name(hint: str, taken: set[str]) -> str:
    """A local variable name for an input, derived from a user's name but never clashing."""
    base = _name_base(hint)
    name, n = base, 1
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name


@functools.lru_cache(maxsize=4096)
def _name_base(hint: str) -> str:
    # (kept per hint: a module's parameters get the same names at every compile)
    # ASCII only: Python folds other identifier characters (NFKC), so "ｔｏｒｃｈ" would be `torch`
    base = re.sub(r"[^0-9A-Za-z_]", "_", hint).lstrip("_") or "a"
    if base[0].isdigit():
        base = "a" + base
    if keyword.iskeyword(base) or base in _RESERVED or _GENERATED.match(base):
        base += "_"
    return base


def argument_names(fn: Callable, nargs: int) -> list[str]:
    """Names for the first `nargs` positional arguments of `fn` (a0, a1, ... where it has none)."""
    # a function's signature is read once per function (inspect follows a decorated forward's
    # wrappers: 0.1 ms, three times per compile); a method's under its function, bound or not
    target, bound = (fn.__func__, True) if type(fn) is types.MethodType else (fn, False)
    try:
        known = _ARGUMENT_NAMES.get(target)
    except TypeError:  # not weakly referenceable (a builtin, a callable object of __slots__)
        return _argument_names(fn, nargs)
    if known is None:
        known = _ARGUMENT_NAMES[target] = {}
    names = known.get((bound, nargs))
    if names is None:
        names = known[(bound, nargs)] = _argument_names(fn, nargs)
    return list(names)


_ARGUMENT_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _argument_names(fn: Callable, nargs: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(nargs):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}{i}")
        else:
            names.append(f"a{i}")
    return names


# --- tracing ----------------------------------------------------------------------------------


_NEVER_TENSORS = frozenset({bool, int, float, str, type(None), dict, set, list, tuple, collections.OrderedDict})


class ModuleLayout(NamedTuple):
    """One walk of a module tree: its modules as `named_modules(remove_duplicate=False)` gives
    them, and one (owner dict, key) slot and one dotted name per distinct parameter, buffer or
    tensor attribute (`module_slots`). A compile walks the tree once: the cache's layout check,
    the trace's inputs, the state recorder and the module replays all read this walk."""

    modules: list[tuple[str, torch.nn.Module]]
    slots: list[tuple[dict, str]]
    names: list[str]
    # every other place holding a tensor that has a slot (a tied weight): (owner dict, key, its
    # slot's index); the entry point checks each still holds it, or the layout is read again
    ties: list[tuple[dict, str, int]]


def module_layout(module: torch.nn.Module) -> ModuleLayout:
    """The module tree's walk and its tensors' slots (see `ModuleLayout`, `module_slots`)."""
    modules = list(module.named_modules(remove_duplicate=False))
    slots: list[tuple[dict, str]] = []
    names: list[str] = []
    ties: list[tuple[dict, str, int]] = []
    seen: dict[int, int] = {}  # a tensor's id -> its slot's index
    for prefix, sub in modules:
        for store in (sub._parameters, sub._buffers, sub.__dict__):
            for key, value in store.items():
                # (a module's __dict__ is mostly its bookkeeping: told apart by type, without a call)
                if type(value) in _NEVER_TENSORS or not real_tensor(value):
                    continue
                if id(value) in seen:
                    ties.append((store, key, seen[id(value)]))
                    continue
                seen[id(value)] = len(slots)
                slots.append((store, key))
                names.append(f"{prefix}.{key}" if prefix else key)
    return ModuleLayout(modules, slots, names, ties)


def module_slots(module: torch.nn.Module) -> tuple[list[tuple[dict, str]], list[str]]:
    """One (owner dict, key) slot and one dotted name per distinct parameter, buffer or tensor
    attribute: a plain tensor attribute (`self.mask = ...`) is an input like a buffer, read at
    every call, so a program that sets it (`self.count = self.count + 1`) sees the new value."""
    layout = module_layout(module)
    return layout.slots, layout.names


def trace_program(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    *,
    module: torch.nn.Module | None = None,
    name: str = "computation",
    same_as: dict[tuple, tuple] | None = None,
    strict: bool = False,
    dynamic: frozenset[tuple] = frozenset(),
    dims: dict[tuple, frozenset[int]] | None = None,
    layout: ModuleLayout | None = None,
) -> tuple[Trace, list[InputBinding]]:
    """Trace `fn(*args, **kwargs)` (or `module(...)`) into a Trace of ltorch calls.

    Tensors in the arguments become input proxies; so do TensorProxy stand-ins, which
    let a plugin trace a program for a device this machine lacks. A module's parameters
    and buffers become input proxies through the tracing context (`TracingContext.substitute`):
    the module itself is never changed, so other threads may call it while it is traced.
    `same_as` maps an input's path to the path of an earlier input that is the same tensor
    (`squall.runtime.aliasing`): both get one proxy, so an in-place update through one is seen
    through the other, as in eager. Unless `strict`, a read of a tensor's value is
    speculated from the real inputs and guarded (`squall.frontend.speculation`); with `strict` it is a
    DataDependentError. An int or float argument whose path is in `dynamic` is an input
    too, a NumberProxy read at run time (`squall.ltorch.numbers`), not a constant of the trace.
    `dims` maps a tensor argument's path to its dimensions whose sizes are symbolic
    (`squall.symbolic`): each one of 2 or more becomes a size symbol, read from the input at
    every call; sizes 0 and 1 stay concrete. Such a symbol may stand for 1 at a later call until
    the trace relies on it being 2 or more (`squall.symbolic.ShapeEnv.ones`). `layout` is the
    module's walk where the caller just made it (`module_layout`).
    """
    language = TorchLanguage(_torch_table(), ltorch.collectives.WRAPPED_RESULTS, _AUTOCAST_CASTS)
    ctx = TracingContext(language.dispatch)
    taken: set[str] = set()
    paths: list[tuple] = []
    same_as = same_as or {}
    by_path: dict[tuple, TensorProxy] = {}

    records: list[tuple[Any, list, list]] = []  # container arguments as the program gets them (_container_stand_in)

    def proxify(x, path: tuple, hint: str):
        # a TensorProxy given as an input stands in for a tensor of its metadata (and name):
        # it lets a program be traced for a device this machine lacks
        if isinstance(x, (torch.Tensor, TensorProxy)):
            _refuse_tensor_subclass(x, hint)
            if path in same_as:
                return by_path[same_as[path]]
            name = _local_name(x.name if isinstance(x, TensorProxy) else hint, taken)
            shape = x.shape
            symbolic = dims.get(path) if dims else None
            if symbolic:
                shape = tuple(ctx.shapes.symbol(n, name, d, may_be_one=True) if d in symbolic and type(n) is int and n >= 2 else n for d, n in enumerate(shape))
            device = x.device
            if type(shape) is torch.Size and type(device) is torch.device:
                # (a module's parameters, most inputs: already in the forms TensorProxy makes)
                p = TensorProxy.like_recorded(name, shape, shape, x.dtype, device, bool(x.requires_grad))
            else:
                p = TensorProxy(name, shape=shape, dtype=x.dtype, device=device, requires_grad=x.requires_grad)
            if isinstance(x, torch.nn.Parameter):
                p._is_param = True  # `isinstance(p, torch.nn.Parameter)` answers as in eager (torch's _ParameterMeta reads it)
            ctx.inputs.append(p)
            paths.append(path)
            by_path[path] = p
            if ctx.speculation is not None:
                ctx.speculation.bind(p, x)
            return p
        if type(x) is int and (x >= 2 or x <= -2) and dims and dims.get(path) is NUMBER_SIZE:
            # an int argument whose run-time number was read as a size (a slice bound, `arange(n)`):
            # a size symbol read from it at every call (-1, 0 and 1 are keyed apart, as sizes are);
            # a negative one (`x[:, :n]` with n = -3, keyed apart) the negation of a symbol read as -n
            name = _local_name(hint, taken)
            ctx.inputs.append(NumberProxy(name, int, x))
            paths.append(path)
            if x < 0:
                return -ctx.shapes.symbol(-x, name, None, share=False, negated=True)
            return ctx.shapes.symbol(x, name, None, share=False)
        if path in dynamic and type(x) in (int, float):
            p = numbers.number_input(ctx, _local_name(hint, taken), x)
            ctx.inputs.append(p)
            paths.append(path)
            return p
        if type(x) in (list, tuple):
            return type(x)(proxify(v, (*path, i), f"{hint}_{i}") for i, v in enumerate(x))
        if type(x) is dict:
            # a key's own str() is not called: only plain names and numbers make the hint
            return {k: proxify(v, (*path, k), f"{hint}_{k if type(k) in (str, int) else i}") for i, (k, v) in enumerate(x.items())}
        if pytree_container(x):
            # a namedtuple, an OrderedDict, a ModelOutput (a decoder's `encoder_outputs`): one like
            # it, its tensors inputs read at every call by subscript (kept, they were constants of the trace)
            items = container_items(x)
            return _container_stand_in(x, items, [proxify(v, (*path, k), f"{hint}_{k if type(k) in (str, int) else i}")
                                                  for i, (k, v) in enumerate(items)], records)
        return x

    state_proxies: dict[int, TensorProxy] = {}

    def state_input(value: torch.Tensor, owner: dict, key: str, label: str, route: tuple | None = None) -> TensorProxy:
        # a tensor an argument object (or one reached from it) holds: an input read at every call
        # from the call's own object where it is reached through the arguments (`route`, to the
        # tensor itself: an attribute, or an item of a list or dict the object holds), else
        # from `owner[key]`; its dimensions symbolic as `dims` says for `state_dims_path`
        p = state_proxies.get(id(value))
        if p is None:
            _refuse_tensor_subclass(value, label)
            dims_path = state_dims_path(owner, key, route)
            symbolic = dims[dims_path] if dims and dims_path in dims else (dims or {}).get(("state",)) or frozenset()
            marked = getattr(value, "_dynamo_dynamic_indices", None)  # torch._dynamo.mark_dynamic
            symbolic = symbolic | frozenset(marked) if marked and symbolic is not ALL_DIMS else symbolic
            shape = tuple(value.shape)
            name = _local_name(f"{key}", taken)
            if symbolic:
                # every dimension of a held tensor may be symbolic (which one grows is not known
                # at the first compile): each gets its own symbol, so a value it shares with another
                # size at this call only (cache length 8, head size 8) is no guard. A size of 1 past
                # the first dimension (a cache one token long, after a one-token prompt) is a symbol
                # traced at 1 (`ShapeEnv.traced_at_one`), so the next step, two tokens long, runs
                # this program rather than compile another; the first (the batch) stays a constant
                shape = tuple(ctx.shapes.symbol(n, name, d, share=False, may_be_one=n == 1)
                              if (d in symbolic or symbolic is ALL_DIMS) and (n >= 2 or (n == 1 and d >= 1)) else n for d, n in enumerate(shape))
            p = state_proxies[id(value)] = TensorProxy(name, shape=shape, dtype=value.dtype, device=value.device, requires_grad=value.requires_grad)
            ctx.inputs.append(p)
            # (the object's own dict is not held where the route reaches it: a KV cache is freed)
            paths.append(("state", owner if route is None else None, key, route))
            if ctx.speculation is not None:
                ctx.speculation.bind(p, value)
        return p

    state_sizes: dict[tuple, SymInt] = {}

    def state_size(value: int, key: str, route: tuple) -> SymInt | None:
        # an int an argument object holds (a sliding-window KV cache's count of tokens seen) that
        # `DynamicDims` made a size (`dims[path] is NUMBER_SIZE`): an input read from the call's own
        # object at every call, traced as a size symbol; None where it stays a constant
        route = (*route, ("attr", key))  # (`route` reaches its holder)
        path = state_dims_path(None, key, route)
        if not dims or dims.get(path) is not NUMBER_SIZE or value < 2:
            return None
        size = state_sizes.get(path)
        if size is None:
            name = _local_name(key, taken)
            ctx.inputs.append(NumberProxy(name, int, value))
            paths.append(("state", None, key, route))
            # a symbol of its own, as a held tensor's sizes have: its relation to them (a sliding
            # window's count equal to its keys' length until the window fills) is a shape guard
            size = state_sizes[path] = ctx.shapes.symbol(value, name, None, share=False)
        return size

    if not strict:
        ctx.speculation = Speculation(ctx)
    with tracing(ctx):
        if module is not None:
            layout = layout or module_layout(module)
            for i, ((store, key), dotted) in enumerate(zip(layout.slots, layout.names)):
                real = store[key]
                # every slot holding this tensor (tied weights) is the same object, so one proxy
                ctx.substitute(real, proxify(real, ("params", i), "p_" + dotted))
        arg_names = argument_names(module.forward if module is not None else fn, len(args))
        p_args = tuple(proxify(a, ("args", i), arg_names[i]) for i, a in enumerate(args))
        p_kwargs = {k: proxify(v, ("kwargs", k), k) for k, v in kwargs.items()}
        # what the program reads and writes besides its inputs (squall.frontend.state_guards): ctx.state
        ctx.state = StateRecorder(module, arg_offset=int(module is not None), tree=layout.modules if module is not None else None)
        ctx.state.tensor_input = state_input
        ctx.state.size_input = state_size
        if module is not None and replays_enabled():
            ctx.state.module_replays = ModuleReplays(module, layout.modules)
        target, p_args, p_kwargs = ctx.state.entry(fn, p_args, p_kwargs)
        with TracingMode(language):
            # a module's own hooks are not traced: they run eagerly around the compiled forward (squall.runtime.wrappers)
            try:
                with random_state_kept(ctx.state.code_objects):
                    result = target(*p_args, **p_kwargs)
                result = ctx.state.finish(result)
                _refuse_written_records(records)
                _refuse_tensor_attributes(ctx.inputs, result)
            except (TypeError, RuntimeError) as error:
                untraced = ltorch.collectives.untraced_c10d_error(error)
                if untraced is None:
                    raise
                raise untraced from error
            language.read_through_wrapped(ctx, result)  # a collective's result returned unread: its wait
            result = capture_output(result, ctx.constant, ctx.state.existing)
            if ctx.views.stale:
                ctx.views.refresh(result)  # a view of a tensor changed since it was taken
                ctx.views.refresh((ctx.inputs, list(ctx._constant_proxies.values())))
            for original, handle in ctx.mutated_inputs.values():
                copy_(original, handle)
            # an output that is a tensor passed in and written in place is that tensor, as in eager
            # (`x.mul_(2); return x`), and a view of one a view of it (`return x[0]`); where gradients
            # flow the autograd runner returns new tensors
            itself = {id(handle): original for original, handle in ctx.mutated_inputs.values() if not handle.requires_grad}
            if itself:
                result = tree_map(lambda x: _as_eager_returns(ctx, x, itself) if type(x) is TensorProxy else x, result, is_leaf=size_leaf)
    ctx.speculation = None  # the trace keeps its context: it must not keep this call's tensors
    ctx.decompositions = None  # replays are this trace's alone (its size symbols and guards)
    ctx.state.module_replays = None
    bindings = [InputBinding(p, path) for p, path in zip(ctx.inputs, paths)]
    traced = module if module is not None else fn
    what = getattr(traced, "__qualname__", None) or type(traced).__qualname__
    trace = Trace(name, list(ctx.inputs), ctx.scopes[0], result, constants=ctx.constants, context=ctx, provenance=f"traced from {what}")
    return trace, bindings
