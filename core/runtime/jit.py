"""The front door: `squall.jit` and the callable it returns.

`JittedFunction` is the user-facing surface: options checked when jit is called, the
generated entry point (`squall.runtime.entry_point`: the hot path, one key and one dict lookup),
`cache_info()`. What happens at call time after a miss or a failed check is
`squall.runtime`'s: the entry records and their one lock (`runtime.cache`), the runner that
runs an entry's one guard check and its program (`runtime.runner`), the policy that maps a
failed guard to an action (`runtime.policy`), and carrying the action out (`runtime.calls`).
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..compiler.checking import check_mode
from ..compiler.pipeline import Compilation
from ..frontend.state_views import describe_global_hooks, global_hook_dicts
from ..ltorch.autocast import autocast_state as current_autocast_state
from ..ltorch.base import SquallWarning
from ..market.config import AUTOMATIC, resolve_dynamic, resolve_executors, resolve_wait
from ..market.executor import Executor
from ..symbol import user_stacklevel
from . import tiers, upgrade_worker
from .calls import Runtime
from .entry import CompiledEntry
from .entry_point import make_entry_point
from .stats import CacheStats
from .wrappers import call_with_hooks, check_wrapping, hook_dicts, original_attribute

__all__ = ["jit", "JittedFunction", "JittedModule", "CompiledEntry", "CacheStats", "last_traces", "wait_for_upgrades", "upgrades"]

_GLOBAL_HOOK_DICTS = global_hook_dicts()

DEFAULT_CACHE_SIZE = 64  # compiled signatures kept per jitted function


class JittedFunction(Runtime):
    """A compiled function: calls with a known input signature go straight to generated code."""

    def __init__(
        self,
        fn: Callable,
        *,
        executors: Sequence[Executor] | None = None,
        recompile_limit: int = 8,
        cache_size: int | None = DEFAULT_CACHE_SIZE,
        wait: bool | None = None,
        strict: bool = False,
        dynamic: bool | None = None,
        autocast_state: tuple | None = None,
    ):
        """`autocast_state` (squall.ltorch.autocast.autocast_state): this compiles a jitted
        function's calls made under that torch.autocast state (its `_under_autocast`)."""
        if not callable(fn):
            raise TypeError(f"squall.jit expects a function or an nn.Module, got {type(fn).__name__}")
        if cache_size is not None and (type(cache_size) is not int or cache_size < 1):
            raise ValueError(f"squall.jit: cache_size must be a positive int or None (unbounded), got {cache_size!r}")
        # executors resolved once, when jit is called: names, +name/-name, env, pyproject (squall.market.config)
        super().__init__(fn, executors=resolve_executors(executors), recompile_limit=recompile_limit, cache_size=cache_size,
                         wait=resolve_wait(wait), strict=strict, check=check_mode(), dynamic=resolve_dynamic(dynamic))
        self.autocast_state = autocast_state  # (Runtime's: a replan traces under it)
        self._under_autocast_states: dict[tuple, JittedFunction] = {}
        tiers.prepare_background(self.executors)  # inductor's worker starts now, not when the first upgrade asks
        if self.module is not None:
            check_wrapping(self.module)
            self._set_layout()
        self.entry_point = self._make_entry_point()

    def _make_entry_point(self) -> Callable:
        """The function users call: the hot path, generated once, closed over this state."""
        compiled = make_entry_point(
            self.fn,
            module=self.module is not None,
            cache=self.cache.slots,
            compile_=self._compile,
            slots=self._slots,
            ties=self._ties,
            training_read=self._training_read,
            training_of=self._training_of,
            parameter_key=self._parameter_key,
            relayout=self._relayout,
            recode=self._recode,
            dynamic=self._numbers.paths,
            last=self.cache.last,
            checks=self.cache.fast_checks,
            under_autocast=self._under_autocast if self.autocast_state is None else None,
            dims=self._dims.dims,
        )
        compiled.__squall__ = self
        compiled.cache_info = self.cache_info
        compiled.executors = self.executors  # the priority list in force
        functools.update_wrapper(compiled, self.fn if self.module is None else type(self.fn).forward, updated=())
        return compiled

    def __call__(self, *args, **kwargs):
        return self.entry_point(*args, **kwargs)

    def _compiled_child(self, module: torch.nn.Module) -> Callable:
        """A submodule of a split module, compiled on its own with this function's options."""
        if isinstance(module, JittedModule):
            return module
        state = JittedFunction(module, recompile_limit=self.recompile_limit, cache_size=self.cache_size, wait=self.wait, strict=self.strict,
                               dynamic=self._dims.mode if self._dims.mode is not AUTOMATIC else None)
        state.executors = state.entry_point.executors = self.executors  # the parent's list, per-operation lists included
        state.check = self.check
        return JittedModule(module, state)

    def _under_autocast(self, *args, **kwargs) -> Any:
        """A call made while torch.autocast is enabled: compiled by a jitted function of its own for
        that autocast state (same options), whose traces hold autocast's casts (squall.ltorch.autocast),
        so calls under autocast and without it, or under two states, never share an entry."""
        state = current_autocast_state()
        jitted = self._under_autocast_states.get(state)
        if jitted is None:
            jitted = JittedFunction(self.fn, recompile_limit=self.recompile_limit, cache_size=self.cache_size, wait=self.wait,
                                    strict=self.strict, dynamic=self._dims.mode if self._dims.mode is not AUTOMATIC else None,
                                    autocast_state=state)
            jitted.executors = jitted.entry_point.executors = self.executors  # this function's list, per-operation lists included
            jitted.check = self.check
            self._under_autocast_states[state] = jitted
        compiled_before = jitted.last_entry
        out = jitted.entry_point(*args, **kwargs)
        if jitted.last_entry is not compiled_before:  # what last_traces shows: the latest compile, under autocast or not
            self.last_entry = jitted.last_entry
        return out

    def cache_info(self) -> CacheStats:
        """Hits, misses, evictions, entries held and the limit, and which inputs changed."""
        self.stats.hits = self.cache.hits()
        self.stats.evictions = self.cache.evictions
        if self.split is not None:
            self.stats.split = self.split.report(lambda child: jitted_state(child).cache_info())
        self.stats.size = len(self.cache.slots)
        self.stats.limit = self.cache_size
        if self._under_autocast_states:
            self.stats.autocast = {state: jitted.cache_info() for state, jitted in list(self._under_autocast_states.items())}
        return self.stats

    def with_autocast_states(self) -> list[JittedFunction]:
        """This jitted function and those that compile its calls made under torch.autocast."""
        return [self, *list(self._under_autocast_states.values())]


def _has_lazy_state(module: torch.nn.Module) -> bool:
    # each module's own dicts (what `parameters()` and `buffers()` walk, without their
    # generators and duplicate sets: a fifth of a `squall.jit` of a 2-layer DistilBERT)
    is_lazy = torch.nn.parameter.is_lazy
    return any(is_lazy(t) for m in module.modules() for store in (m._parameters, m._buffers) for t in store.values())


class JittedModule(torch.nn.Module):
    """An nn.Module whose forward runs compiled; parameters and buffers stay the original's.

    Hooks on it and on the original's top level run eagerly around the compiled forward at
    every call, as `nn.Module.__call__` runs them (`squall.runtime.wrappers`): that is how DDP and
    FSDP2 wrap compiled modules. Without hooks a call goes straight to the compiled code.
    While a global module hook is registered (`register_module_forward_hook`), which eager
    runs at every module call, the original runs eagerly inside this module's own hooks.
    """

    def __init__(self, module: torch.nn.Module, jitted: JittedFunction):
        super().__init__()
        self._orig_mod = module
        self._jitted = jitted
        self._entry_point = jitted.entry_point
        # every hook dict a call may have to run (torch fills them in place), for one any() per call
        self._hook_dicts = hook_dicts(self) + hook_dicts(module, with_global=False)
        if _has_lazy_state(module):
            self._entry_point = self._eagerly_until_materialized

    def _eagerly_until_materialized(self, *args, **kwargs):
        """A module with lazy parameters (`nn.LazyLinear`) learns their shapes at its first call:
        eager makes that call (and any before they all are materialized), then calls compile."""
        if _has_lazy_state(self._orig_mod):
            warnings.warn(f"squall: {type(self._orig_mod).__name__} has parameters or buffers not yet materialized (a lazy module): "
                          "this call runs eagerly, which materializes them; later calls are compiled", SquallWarning, stacklevel=3)
            return self._orig_mod.forward(*args, **kwargs) if any(self._hook_dicts) else self._orig_mod(*args, **kwargs)
        self._entry_point = self._jitted.entry_point
        return self._entry_point(*args, **kwargs)

    def forward(self, *args, **kwargs):
        orig = self._orig_mod
        if any(hook_dicts(orig, with_global=False)):
            return call_with_hooks(orig, self._entry_point, args, kwargs)
        return self._entry_point(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        # the hot path: nn.Module.__call__'s hook machinery only where there is a hook to run
        if any(self._hook_dicts):
            if any(_GLOBAL_HOOK_DICTS):
                return self._call_eagerly(args, kwargs)
            return self._call_impl(*args, **kwargs)
        return self._entry_point(*args, **kwargs)

    def cache_info(self) -> CacheStats:
        """The compiled forward's cache statistics (`JittedFunction.cache_info`), split included."""
        return self._jitted.cache_info()

    def _call_eagerly(self, args: tuple, kwargs: dict):
        """While a global module hook is registered, eager runs it at every module call, with
        that module: the original runs eagerly (its own hooks and the global ones around each
        of its modules), inside this module's own hooks."""
        warnings.warn(
            f"squall: {describe_global_hooks()} is registered, which eager runs at every module call: "
            "the module runs eagerly while it is registered",
            SquallWarning,
            stacklevel=user_stacklevel(),
        )
        return call_with_hooks(self, self._orig_mod, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # what the original has and this module has not (`config`, `generate`): squall.runtime.wrappers
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__") or "_orig_mod" not in self.__dict__.get("_modules", ()):
                raise
        return original_attribute(self, self._orig_mod, name)


def jit(
    fn: Callable,
    *,
    executors: Sequence[Executor] | None = None,
    recompile_limit: int = 8,
    cache_size: int | None = DEFAULT_CACHE_SIZE,
    wait: bool | None = None,
    strict: bool = False,
    dynamic: bool | None = None,
) -> Any:
    """Compile `fn` (a function or an nn.Module); the result is called like the original.

    It keeps up to `cache_size` compiled signatures (`None`: no limit), evicting the least
    recently used; a warning names the input that changes after `recompile_limit` compilations.
    A new signature's first call runs a plan without the fusion executors that compile slowly
    (inductor), which compile and time their regions in the background and take over when
    faster (squall.runtime.tiers); `wait=True` (or `wait = true` under [tool.squall], or SQUALL_WAIT=1)
    compiles and times them before the first call returns.
    Where the program reads a tensor's value (`if t.any():`, `t.item()`) or calls an op whose
    output shape depends on data (`x[mask]`, `nonzero`), the value is read from the call being
    compiled and guarded: a call where it differs runs (or compiles) another variant; a value
    that changes at every call makes a module split (`squall.runtime.split`: its forward runs eagerly,
    each submodule it calls compiled) and a plain function run eagerly. With `strict=True`
    such a program raises `DataDependentError` instead.
    `dynamic` says which tensor dimensions are traced as symbolic sizes (`squall.runtime.dynamic_dims`):
    None (the default: $SQUALL_DYNAMIC, else `dynamic` under [tool.squall], else "auto": a
    dimension that changes between calls becomes symbolic at the recompile), True (every
    dimension of 2 or more from the first call) or False (every size a constant).
    """
    state = JittedFunction(
        fn, executors=executors, recompile_limit=recompile_limit, cache_size=cache_size, wait=wait, strict=strict, dynamic=dynamic
    )
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


def wait_for_upgrades(jfn: Any, timeout: float | None = None) -> bool:
    """Block until `jfn`'s background upgrades (squall.runtime.tiers) are done; False if `timeout` seconds pass first."""
    return all([upgrade_worker.wait_for_upgrades(state, timeout) for state in jitted_state(jfn).with_autocast_states()])


def upgrades(jfn: Any) -> list[tiers.Upgrade]:
    """`jfn`'s background upgrades, one per compiled signature: status ("pending", "upgraded",
    "kept the torch plan", "nothing to fuse", ...), why, and the in-context timings."""
    return [u for state in jitted_state(jfn).with_autocast_states() for u in upgrade_worker.upgrades(state)]
