"""The front door: trace on a new input signature, plan, generate, cache, call.

The cache-hit path is the product's hot path: one key built from the inputs in a
single cheap pass, one dict lookup, one call of the generated function.
"""
from __future__ import annotations

import functools
import inspect
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from .config import resolve_executors
from .executor import Executor
from .ltorch.base import SquallWarning
from .pipeline import Compilation, compile_program
from .proxies import current_context
from .rage import record_compilation
from .sources import load_source
from .tracing import argument_names, module_slots

__all__ = ["jit", "JittedFunction", "JittedModule", "CompiledEntry", "last_traces"]


# --- the cache key ------------------------------------------------------------------------------

_SCALARS = frozenset({int, float, bool, str, complex, type(None)})
_Tensor = torch.Tensor
_is_grad_enabled = torch.is_grad_enabled
_get_default_dtype = torch.get_default_dtype


def _value_key(x: Any, where: str) -> Any:
    """The key part of one argument: metadata for tensors, values for everything else."""
    if isinstance(x, _Tensor):
        return (x.shape, x.dtype, x.device, x.requires_grad)
    t = type(x)
    if t in _SCALARS:
        return (t, x)
    if t in (list, tuple):
        return (t, tuple(_value_key(v, f"{where}[{i}]") for i, v in enumerate(x)))
    if t is dict:
        return (t, tuple((k, _value_key(v, f"{where}[{k!r}]")) for k, v in x.items()))
    leaves, spec = tree_flatten(x)
    if not (len(leaves) == 1 and leaves[0] is x):
        return (spec, tuple(_value_key(v, where) for v in leaves))
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"squall.jit: {where} is a {t.__name__}, which is neither a tensor, a number, nor a "
            "container of them, and is not hashable, so calls cannot be told apart by it"
        ) from None
    return (t, x)


def _key_parts(args: tuple, kwargs: dict, names: list[str]) -> dict[str, Any]:
    """The key, part by part, labelled with the input each part comes from (for warnings)."""
    parts = {f"argument {names[i]!r}": _value_key(a, f"argument {names[i]!r}") for i, a in enumerate(args)}
    parts.update({f"keyword argument {k!r}": _value_key(v, f"keyword argument {k!r}") for k, v in kwargs.items()})
    return parts


# --- compiled entries and the jitted callable ----------------------------------------------------

# The hot path, written once for functions and modules. One flat key: a tensor adds (shape,
# dtype, device, requires_grad), which starts with a torch.Size; a number adds (type, value),
# which starts with a type; anything else adds one nested tuple; so the groups cannot be
# confused. The executor configuration is fixed when jit is called and every jitted function
# has its own cache, so it needs no place in the key.
_ENTRY_POINT = """
def compiled(*args, **kwargs):
{fast_path}
    key = (_is_grad_enabled(), _get_default_dtype())
    for a in args:
        if type(a) is _Tensor:
            key += (a.shape, a.dtype, a.device, a.requires_grad)
        elif type(a) in _SCALARS:
            key += (type(a), a)
        else:
            key += (_value_key(a, "an argument"),)
    if kwargs:
        key += (tuple([(k, _value_key(v, f"keyword argument {{k!r}}")) for k, v in kwargs.items()]),)
{params_key}
    fn = cache.get(key)
    if fn is None:
        fn = compile_(args, kwargs, key, {params})
    else:
        hits[0] += 1
    return fn({params_arg}*args, **kwargs)
"""
_FUNCTION_PARTS = {"params_key": "", "params": "None", "params_arg": ""}

# For a function of a fixed number of positional parameters, the call with that many plain
# tensors builds the same key in one tuple display, without the loop.
_FAST_PATH = """    if len(args) == {n} and not kwargs:
        {names}, = args
        if {tensor_checks}:
            fn = cache.get((_is_grad_enabled(), _get_default_dtype(), {metadata}))
            if fn is not None:
                hits[0] += 1
                return fn({names})"""


def _fast_path(fn: Callable) -> str:
    """The fast path of the entry point, for functions whose positional arity is fixed."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ""
    fixed = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)
    if not fixed or not 1 <= len(params) <= 8:
        return ""
    names = [f"a{i}" for i in range(len(params))]
    return _FAST_PATH.format(
        n=len(names),
        names=", ".join(names),
        tensor_checks=" and ".join(f"type({a}) is _Tensor" for a in names),
        metadata=", ".join(f"{a}.shape, {a}.dtype, {a}.device, {a}.requires_grad" for a in names),
    )
_MODULE_PARTS = {
    # parameters and buffers are read at every call, so optimizer steps and load_state_dict are seen
    "params_key": """    params = [store[k] for store, k in slots]
    for p in params:
        key += (p.shape, p.dtype, p.device, p.requires_grad)
    key += (tuple([m.training for m in submodules]),)""",
    "params": "params",
    "params_arg": "params, ",
}


@dataclass
class CompiledEntry:
    """One compiled signature: its compilation (traces, plan, generated function) and compile time."""

    compilation: Compilation
    compile_seconds: float

    @property
    def source(self) -> str:
        return self.compilation.source


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    changes: dict[str, int] = field(default_factory=dict)  # input label -> times it changed


class JittedFunction:
    """A compiled function: calls with a known input signature go straight to generated code."""

    def __init__(
        self,
        fn: Callable,
        *,
        executors: Sequence[Executor] | None = None,
        recompile_limit: int = 8,
    ):
        if not callable(fn):
            raise TypeError(f"squall.jit expects a function or an nn.Module, got {type(fn).__name__}")
        self.fn = fn
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        # resolved once, when jit is called: names, +name/-name, env, pyproject (squall.config)
        self.executors = resolve_executors(executors)
        self.recompile_limit = recompile_limit
        self._cache: dict[Any, Callable] = {}
        self._entries: dict[Any, CompiledEntry] = {}
        self.last_entry: CompiledEntry | None = None
        self.stats = CacheStats()
        self._last_parts: dict[str, Any] | None = None
        self._warned = False
        self._slots: list[tuple[dict, str]] = []
        self._submodules: list[torch.nn.Module] = []
        if self.module is not None:
            self._slots, _ = module_slots(self.module)
            self._submodules = list(self.module.modules())
        self.entry_point = self._make_entry_point()

    def _make_entry_point(self) -> Callable:
        """The function users call: the hot path, generated once, closed over this state."""
        namespace = {
            "cache": self._cache,
            "compile_": self._compile,
            "hits": [0],
            "slots": self._slots,
            "submodules": self._submodules,
            "_is_grad_enabled": _is_grad_enabled,
            "_get_default_dtype": _get_default_dtype,
            "_Tensor": _Tensor,
            "_SCALARS": _SCALARS,
            "_value_key": _value_key,
        }
        if self.module is not None:
            source = _ENTRY_POINT.format(fast_path="", **_MODULE_PARTS)
        else:
            source = _ENTRY_POINT.format(fast_path=_fast_path(self.fn), **_FUNCTION_PARTS)
        load_source(source, "entry-point", namespace)
        compiled = namespace["compiled"]
        self._hits = lambda: namespace["hits"][0]
        compiled.__squall__ = self
        compiled.cache_info = self.cache_info
        compiled.executors = self.executors  # the priority list in force
        functools.update_wrapper(compiled, self.fn if self.module is None else type(self.fn).forward, updated=())
        return compiled

    def __call__(self, *args, **kwargs):
        return self.entry_point(*args, **kwargs)

    def _compile(self, args: tuple, kwargs: dict, key: tuple, params: list | None) -> Callable:
        if current_context() is not None:
            # called from inside a program squall is tracing: trace through it, inline
            original = self.fn
            return (lambda params, *a, **k: original(*a, **k)) if params is not None else original
        start = time.perf_counter()
        self.stats.misses += 1
        self._note_changes(args, kwargs)
        with record_compilation(self, args, kwargs) as record:  # always on: squall.rage
            compilation = compile_program(self.fn, args, kwargs, executors=self.executors, module=self.module, on_traced=record.traced)
            record.compiled(compilation)
        entry = CompiledEntry(compilation, time.perf_counter() - start)
        self._entries[key] = entry
        self._cache[key] = compilation.fn
        self.last_entry = entry
        return record.first_call(compilation.fn)  # the cache holds the plain function

    def _note_changes(self, args: tuple, kwargs: dict) -> None:
        fn = self.module.forward if self.module is not None else self.fn
        parts = _key_parts(args, kwargs, argument_names(fn, len(args)))
        if self._last_parts is not None:
            for label, part in parts.items():
                if self._last_parts.get(label) != part:
                    self.stats.changes[label] = self.stats.changes.get(label, 0) + 1
        self._last_parts = parts
        if self.stats.misses > self.recompile_limit and not self._warned:
            self._warned = True
            culprit = max(self.stats.changes.items(), key=lambda kv: kv[1], default=("its inputs", 0))[0]
            warnings.warn(
                f"squall.jit({getattr(self.fn, '__name__', type(self.fn).__name__)}) has compiled "
                f"{self.stats.misses} times; {culprit} keeps changing (shape, dtype, device, "
                "requires_grad, or value). Each new signature is traced, planned and generated again.",
                SquallWarning,
                stacklevel=4,
            )

    def cache_info(self) -> CacheStats:
        """Hits, misses, and which inputs changed between compilations."""
        self.stats.hits = self._hits()
        return self.stats


class JittedModule(torch.nn.Module):
    """An nn.Module whose forward runs compiled; parameters and buffers stay the original's."""

    def __init__(self, module: torch.nn.Module, jitted: JittedFunction):
        super().__init__()
        self._orig_mod = module
        self._jitted = jitted

    def forward(self, *args, **kwargs):
        return self._jitted(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        # skips nn.Module.__call__'s hook machinery: the hot path
        return self._jitted(*args, **kwargs)


def jit(fn: Callable, *, executors: Sequence[Executor] | None = None, recompile_limit: int = 8) -> Any:
    """Compile `fn` (a function or an nn.Module); the result is called like the original."""
    state = JittedFunction(fn, executors=executors, recompile_limit=recompile_limit)
    if isinstance(fn, torch.nn.Module):
        return JittedModule(fn, state)
    return state.entry_point


def jitted_state(jfn: Any) -> JittedFunction:
    """The compilation state behind a function or module returned by squall.jit."""
    if isinstance(jfn, JittedModule):
        return jfn._jitted
    if isinstance(jfn, JittedFunction):
        return jfn
    state = getattr(jfn, "__squall__", None)
    if isinstance(state, JittedFunction):
        return state
    raise TypeError(f"expected a function returned by squall.jit, got {type(jfn).__name__}")


def last_traces(jfn: Any) -> Compilation:
    """The traces of `jfn`'s most recent compilation, in order (as traced, as planned, as
    executed); `.plan` has the planner's decisions and `.source` the generated Python."""
    entry = jitted_state(jfn).last_entry
    if entry is None:
        raise RuntimeError("this function has not been compiled yet: call it first")
    return entry.compilation
