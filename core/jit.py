"""The front door: trace on a new input signature, plan, generate, cache, call.

The cache-hit path is the product's hot path: one key built from the inputs in a
single cheap pass, one dict lookup, one call of the generated function; the key and the
generated entry point that builds it are `squall.entry_point`'s.

The cache is bounded (`cache_size` entries per jitted function) and evicts the least
recently used entry when a new one is compiled into a full cache. Recency is read off
per-entry hit counters, which the hot path increments in place of the single global hit
counter it used to keep, so bounding the cache adds no work to a hit: at each compilation
an entry whose counter moved since the last one is stamped as used in that interval, and
the victim is the entry with the oldest stamp (the oldest inserted among ties). Recency is
thus exact to the resolution of one compilation, which is all eviction ever looks at.
"""
from __future__ import annotations

import functools
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import tiers
from .aliasing import AliasPattern, alias_guarded, describe_path, same_as_paths
from .checking import ExecutorFault, check_mode
from .config import ExecutorPriority, resolve_executors, resolve_wait
from .entry_point import DynamicNumbers, forget_recent, key_parts, make_entry_point
from .executor import Executor
from .ltorch.base import SquallWarning
from .pipeline import Compilation, compile_program
from .planner import PlanningError
from .proxies import current_context
from .rage import record_compilation
from .speculation import SPECULATION_LIMIT, Variants, guards_of, specialised_numbers
from .split import Split, SplitReport
from .state_guards import StateGuards, UnreplayableWrite, describe_global_hooks, global_hook_dicts, raised_by_users_code
from .symbol import user_stacklevel
from .tracing import argument_names, module_slots
from .wrappers import call_with_hooks, check_plain_parameters, check_wrapping, hook_dicts, original_attribute

__all__ = ["jit", "JittedFunction", "JittedModule", "CompiledEntry", "last_traces", "wait_for_upgrades", "upgrades"]

_GLOBAL_HOOK_DICTS = global_hook_dicts()


# --- compiled entries and the jitted callable ----------------------------------------------------

DEFAULT_CACHE_SIZE = 64  # compiled signatures kept per jitted function

@dataclass
class CompiledEntry:
    """One compiled signature: its compilation (traces, plan, generated function) and compile time."""

    compilation: Compilation
    compile_seconds: float
    # the background upgrade to fused regions this entry's first plan waits for (squall.tiers)
    upgrade: tiers.Upgrade | None = None

    @property
    def source(self) -> str:
        return self.compilation.source


@dataclass
class CacheStats:
    """What `cache_info()` reports: calls served from the cache, compilations, evictions, the
    entries held and the most it holds (`None`: unbounded), and which inputs changed."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    replans: int = 0  # entries compiled again without an executor that failed its run-time check
    guard_failures: int = 0  # calls whose value guards failed (squall.speculation), variants compiled or not
    size: int = 0
    limit: int | None = None
    changes: dict[str, int] = field(default_factory=dict)  # input label -> times it changed
    # a module that runs its forward eagerly with compiled children: why, and the children (squall.split)
    split: SplitReport | None = None


class JittedFunction:
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
    ):
        if not callable(fn):
            raise TypeError(f"squall.jit expects a function or an nn.Module, got {type(fn).__name__}")
        self.fn = fn
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        # resolved once, when jit is called: names, +name/-name, env, pyproject (squall.config)
        self.executors = resolve_executors(executors)
        self.recompile_limit = recompile_limit
        if cache_size is not None and (type(cache_size) is not int or cache_size < 1):
            raise ValueError(f"squall.jit: cache_size must be a positive int or None (unbounded), got {cache_size!r}")
        self.cache_size = cache_size
        # compile and time fusion regions before the first call returns (True), or in the background
        self.wait = resolve_wait(wait)
        self._upgrades: dict[Any, tiers.Upgrade] = {}  # key -> its background upgrade
        self.strict = strict  # a read of a tensor's value while tracing is a DataDependentError
        # key -> [generated function, hits]: the hot path reads the one and bumps the other
        self._cache: dict[Any, list] = {}
        # the entry the entry point's fast path hit last, and its metadata check per key (squall.entry_point)
        self._last: list = [None]
        self._fast_checks: dict[Any, Callable] = {}
        self._entries: dict[Any, CompiledEntry] = {}
        # key -> (its hit count when last looked at, the compilation it was last seen used by)
        self._recency: dict[Any, tuple[int, int]] = {}
        self._compilations = 0
        self._evicted_hits = 0
        self.check = check_mode()  # $SQUALL_CHECK, read when jit is called: first, always or never
        # key -> (executor name, operation ids) kept apart after the executor failed there
        self._exclusions: dict[Any, list[tuple[str, tuple[str, ...]]]] = {}
        # key -> entries set aside when the state they read changed, newest first (squall.state_guards)
        self._set_aside: dict[Any, list[CompiledEntry]] = {}
        self._fresh: Any = None  # the key whose first call, right after tracing, is running
        self.last_entry: CompiledEntry | None = None
        self.stats = CacheStats()
        self._last_parts: dict[str, Any] | None = None
        self._warned = False
        self._slots: list[tuple[dict, str]] = []
        self._slot_names: list[str] = []  # "parameter 'lin.weight'", "buffer 'bn.running_mean'"
        self._slot_paths: list[str] = []  # "lin.weight", "bn.running_mean"
        self._submodules: list[torch.nn.Module] = []
        self._numbers = DynamicNumbers()  # the number arguments read at run time (squall.entry_point)
        self.split: Split | None = None  # the module's eager frame with compiled children, once it splits
        self._state_compiles: dict[tuple[Any, str], int] = {}  # (key, state label) -> compilations it caused
        self._split_keys: set[Any] = set()  # entries that split because their state kept changing
        self._eager_keys: dict[Any, str] = {}  # key -> why its calls run eagerly (an unreplayable write)
        # held while compiling (threads that miss on one signature compile it once) and around
        # calls that write module state (a module's buffers are updated as one step, as in eager)
        self._compile_lock = threading.RLock()
        self._state_lock = threading.Lock()
        if self.module is not None:
            check_wrapping(self.module)
            self._set_layout()
        self.entry_point = self._make_entry_point()

    def _set_layout(self) -> None:
        """Read where the module's parameters, buffers and tensor attributes are (in place: the
        entry point holds these lists)."""
        slots, paths = module_slots(self.module)
        kinds = lambda store, k: "parameter" if isinstance(store[k], torch.nn.Parameter) else "tensor attribute" if "_parameters" in store else "buffer"
        self._slots[:], self._slot_paths[:] = slots, paths
        self._slot_names[:] = [f"{kinds(store, k)} {name!r}" for (store, k), name in zip(slots, paths)]
        self._submodules[:] = list(self.module.modules())

    def _make_entry_point(self) -> Callable:
        """The function users call: the hot path, generated once, closed over this state."""
        compiled = make_entry_point(
            self.fn,
            module=self.module is not None,
            cache=self._cache,
            compile_=self._compile,
            slots=self._slots,
            submodules=self._submodules,
            relayout=self._relayout,
            dynamic=self._numbers.paths,
            last=self._last,
            checks=self._fast_checks,
        )
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
        if self.module is not None:
            # a wrapper applied after jit (fully_shard on a submodule) is seen here, before tracing it
            check_wrapping(self.module)
            check_plain_parameters(self._slot_paths, params)
        with self._compile_lock:
            exact, key = key, self._numbers.key_for(key, args, kwargs)  # a number that changed: dynamic (squall.entry_point)
            cached = self._cache.get(key)
            if cached is not None:  # another thread compiled this signature while we waited
                return cached[0]
            if self.module is not None and [(id(d), k) for d, k in module_slots(self.module)[0]] != [(id(d), k) for d, k in self._slots]:
                return lambda params, *a, **k: self._relayout(a, k)
            if key in self._eager_keys:
                return self._eager_runner(self._eager_keys[key])
            call_args = (params, *args) if params is not None else args
            for i, variant in enumerate(self._set_aside.get(key, ())):
                if state_guards(variant.compilation).holds(call_args, kwargs):
                    self._set_aside[key].pop(i)  # its state is back: cached again, not compiled
                    self._insert(key, variant)
                    return self._cache[key][0]
            start = time.perf_counter()
            self.stats.misses += 1
            self._note_changes(args, kwargs)
            executors = self._priority(key)
            try:
                with record_compilation(self, args, kwargs) as record:  # always on: squall.rage
                    compilation, tiered = self._compile_first_tier(args, kwargs, executors, on_traced=record.traced)
                    record.compiled(compilation)
            except UnreplayableWrite as write:
                return self._eager_for(key, str(write).removeprefix("squall: "))
            except Exception as error:  # noqa: BLE001 - only the user's own code raising is answered here
                if not raised_by_users_code(error):
                    raise
                return self._eager_after_error(key, error)
            guarded = specialised_numbers(compilation)
            if guarded:  # its dynamic trace needed the number's exact value: keyed by value again
                self._numbers.specialise(guarded)
                return self._compile(args, kwargs, exact, params)
            entry = CompiledEntry(compilation, time.perf_counter() - start)
            self._insert(key, entry)
            self.last_entry = entry
            if state_guards(compilation).eager:
                state_guards(compilation).warn_eager("the module's forward (each submodule it calls compiled)" if self.module is not None else "the function")
            # a split module runs its children compiled, each upgraded on its own: not the whole
            split = self.module is not None and state_guards(compilation).eager
            upgrade = self._upgrade_job(key, entry, executors, (params, args, kwargs)) if tiered and not split else None
            if upgrade is not None and self.wait:
                upgrade.run()  # the same upgrade, done before the first call returns
            runner = record.first_call(self._first_call(key, self._cache[key][0]))  # the cache holds the runner; this first call is recorded
        if upgrade is None or self.wait:
            return runner

        def first_call_then_upgrade(*args, **kwargs):
            # queued once the first call is done, so the worker does not compete with it
            try:
                return runner(*args, **kwargs)
            finally:
                tiers.default_worker().submit(upgrade)

        return first_call_then_upgrade

    def _eager_runner(self, reason: str) -> Callable:
        """A runner that calls the program eagerly (a module: its forward, each submodule it
        calls compiled)."""
        if self.module is not None:
            return self._split_runner(reason)
        fn = self.fn
        return lambda *a, **k: fn(*a, **k)

    def _eager_for(self, key: Any, reason: str) -> Callable:
        """The program writes Python state squall cannot replay: calls of signature `key` run
        eagerly from now on, with a warning naming the line."""
        self._eager_keys[key] = reason
        warnings.warn(f"squall: {reason}; {self._what()} runs eagerly for these inputs", SquallWarning, stacklevel=user_stacklevel())
        return self._eager_runner(reason)

    def _eager_after_error(self, key: Any, error: Exception) -> Callable:
        """The user's code raised while it was traced: this call runs eagerly, so that its
        effects up to the raise are eager's and the error (if eager raises it too) is eager's.
        If eager does not raise, squall could not trace what eager runs: calls of signature
        `key` run eagerly from now on, with a warning."""
        where = error.__traceback__
        while where.tb_next is not None:
            where = where.tb_next
        reason = f"tracing raised {type(error).__name__}: {error} ({where.tb_frame.f_code.co_filename}:{where.tb_lineno}), where eager does not"
        eager = self._eager_runner(reason) if self.module is None else (lambda params, *a, **k: self.module.forward(*a, **k))

        def run_eagerly(*args, **kwargs):
            out = eager(*args, **kwargs)  # an error here is the user's own, raised as eager raises it
            with self._compile_lock:
                self._eager_for(key, reason)
            return out

        return run_eagerly

    def _what(self) -> str:
        return f"{type(self.module).__name__}'s forward (each submodule it calls compiled)" if self.module is not None else "the function"

    def _priority(self, key: Any) -> ExecutorPriority:
        """The priority list entry `key` compiles under: an executor that failed this signature's
        checks before (then was replanned, or evicted) stays out where it failed."""
        exclusions = self._exclusions.get(key)
        return self._excluding(exclusions) if exclusions else self.executors

    def _compile_first_tier(self, args: tuple, kwargs: dict, executors: ExecutorPriority, **options) -> tuple[Compilation, bool]:
        """Compile for `executors` less the fusion executors that compile slowly (squall.tiers);
        also whether any were left out, for a background upgrade to bring them in."""
        options.setdefault("dynamic", frozenset(self._numbers.paths))
        first = tiers.background_priority(executors)
        if first is not None:
            try:
                return compile_program(self.fn, args, kwargs, executors=first, module=self.module, strict=self.strict, **options), True
            except PlanningError:
                pass  # only a fusion executor runs some operation: plan with it now
        return compile_program(self.fn, args, kwargs, executors=executors, module=self.module, strict=self.strict, **options), False

    def _first_call(self, key: Any, runner: Callable) -> Callable:
        """`runner` for the call the entry was traced for: a state check failing in it means the
        state changed during compilation (squall.state_guards)."""

        def first_call(*args, **kwargs):
            self._fresh = key
            try:
                return runner(*args, **kwargs)
            finally:
                self._fresh = None

        return first_call

    def _runner(self, key: Any, compilation: Compilation, slot: list | None = None) -> Callable:
        """What the cache holds for an entry: its generated function; or, while its non-torch
        calls are to be checked, the checked variant, which replans the entry on a fault and
        (unless $SQUALL_CHECK=always) hands the cache the unchecked one after a clean call.
        `slot`, a list whose first item holds the runner, is where that hand-over happens when
        it is not the cache's entry (a guarded entry's variants: squall.speculation).
        Either first checks the Python state the program read (squall.state_guards)."""
        checked, plain = compilation.checked, self._state_checked(key, compilation, self._guarded(key, compilation, compilation.fn))
        if checked is None or self.check == "never" or state_guards(compilation).eager:
            return plain
        always = self.check == "always"
        differentiated = compilation.backward is not None

        def checked_call(*args, **kwargs):
            user_args = args[1:] if self.module is not None else args  # a module's get params first
            if differentiated and compilation.on_backward_fault is None:
                # a fault in the checked backward comes after this call returns: replan then, for later calls
                compilation.on_backward_fault = lambda fault: self._replan_after_backward(key, fault, user_args, kwargs)
            try:
                out = checked.fn(*args, **kwargs)
            except ExecutorFault as fault:
                return self._replan(key, fault, user_args, kwargs)(*args, **kwargs)
            cached = slot if slot is not None else self._cache.get(key)
            if not always and cached is not None and cached[0] is runner:
                with self._compile_lock:  # not over an upgrade swapped in meanwhile (squall.tiers)
                    if cached[0] is runner:
                        cached[0] = plain  # checked once: later calls run the plain code
            return out

        runner = self._state_checked(key, compilation, self._guarded(key, compilation, checked_call))
        return runner

    def _cached_runner(self, key: Any, entry: CompiledEntry) -> Callable:
        """What the cache holds: the runner; for a trace with value guards, its variants."""
        if not guards_of(entry.compilation):
            return self._runner(key, entry.compilation)
        return Variants(self, key, self._variant(key, entry))

    def _variant(self, key: Any, entry: CompiledEntry) -> list:
        """[runner, entry] for one variant of a guarded entry; its runner may replace itself there."""
        variant = [None, entry]
        variant[0] = self._runner(key, entry.compilation, slot=variant)
        return variant

    def _compile_variant(self, key: Any, args: tuple, kwargs: dict) -> list:
        """Another variant of entry `key`, traced on this call's inputs after a value guard failed."""
        with self._compile_lock:
            start = time.perf_counter()
            with record_compilation(self, args, kwargs) as record:  # squall.rage sees variants too
                # a variant keeps to the first tier: no background upgrade comes for it
                compilation, _ = self._compile_first_tier(args, kwargs, self._priority(key), on_traced=record.traced)
                record.compiled(compilation)
            entry = CompiledEntry(compilation, time.perf_counter() - start)
            self.stats.misses += 1
            self.last_entry = entry
            return self._variant(key, entry)

    def _state_checked(self, key: Any, compilation: Compilation, runner: Callable) -> Callable:
        """`runner` behind the check of the Python state its trace read, replaying the writes it
        made (squall.state_guards): a failed check compiles again. Where an inner submodule has a
        hook, the module splits instead (squall.split); a function runs eagerly."""
        guards = state_guards(compilation)
        if guards.eager:
            runner = self._split_runner("; ".join(guards.eager_because)) if self.module is not None else self.fn
        return guards.runner(runner, lambda args, kwargs: self._stale(key, guards, args, kwargs))

    def _stale(self, key: Any, guards: StateGuards, args: tuple, kwargs: dict) -> Any:
        """A cached entry's state check failed: set it aside (it is picked again when its
        state comes back) and call again, which compiles for the state as it is now."""
        label = guards.failed(args, kwargs) or "the state the program read"
        user_args = args[1:] if self.module is not None else args
        if self._fresh == key:
            # changed between tracing and this first call (another thread, or code tracing ran
            # that squall does not see): this call runs eagerly, the next compiles again
            warnings.warn(
                f"squall: {label} changed while the program was being compiled; this call runs eagerly",
                SquallWarning,
                stacklevel=4,
            )
            self._stale_entry(key, label)
            return (self.module.forward if self.module is not None else self.fn)(*user_args, **kwargs)
        if self.module is not None and self._state_thrashes(key, label, args, kwargs):
            return self._split_entry(key, label)(*args, **kwargs)
        self._stale_entry(key, label)
        return self.entry_point(*user_args, **kwargs)

    def _state_thrashes(self, key: Any, label: str, args: tuple, kwargs: dict) -> bool:
        """Whether a change of `label` has now made entry `key` compile more than
        SPECULATION_LIMIT times (no entry set aside for it holds for this call)."""
        if any(state_guards(e.compilation).holds(args, kwargs) for e in self._set_aside.get(key, ())):
            return False  # a state seen before: its entry comes back, nothing compiles
        count = self._state_compiles[key, label] = self._state_compiles.get((key, label), 0) + 1
        return count > SPECULATION_LIMIT

    def _split_entry(self, key: Any, label: str) -> Callable:
        """Entry `key`'s state keeps changing: the module splits for it from now on (squall.split)."""
        reason = f"{label} changed at {SPECULATION_LIMIT + 1} calls of one input signature, each compiling the program again"
        runner = self._split_runner(reason)
        warnings.warn(
            f"squall: {reason}; {type(self.module).__name__}'s forward now runs eagerly for these calls, "
            "with each submodule it calls compiled (a split at module granularity)",
            SquallWarning,
            stacklevel=user_stacklevel(),
        )
        with self._compile_lock:
            cached = self._cache.get(key)
            if cached is not None:
                cached[0] = runner  # no state check: the eager frame reads the state as it is
                self._split_keys.add(key)  # and no background upgrade replaces it
        return runner

    def _split_runner(self, reason: str) -> Callable:
        """The runner of a module whose program cannot stay stable: its forward eagerly, each
        submodule it calls compiled (squall.split); `reason` is why."""
        with self._compile_lock:
            if self.split is None:
                self.split = Split(self.module, self._compiled_child)
            self.split.add_reason(reason)
        return self.split.runner()

    def _compiled_child(self, module: torch.nn.Module) -> Callable:
        """A submodule of a split module, compiled on its own with this function's options."""
        if isinstance(module, JittedModule):
            return module
        state = JittedFunction(module, recompile_limit=self.recompile_limit, cache_size=self.cache_size, wait=self.wait, strict=self.strict)
        state.executors = state.entry_point.executors = self.executors  # the parent's list, per-operation lists included
        state.check = self.check
        return JittedModule(module, state)

    def _stale_entry(self, key: Any, label: str) -> None:
        with self._compile_lock:
            self.stats.changes[label] = self.stats.changes.get(label, 0) + 1
            if key in self._cache and self._entries.get(key) is not None:
                self._evicted_hits += self._uncache(key)
                variants = self._set_aside.setdefault(key, [])
                variants.insert(0, self._entries.pop(key))
                del variants[self.recompile_limit :], self._recency[key]

    def _relayout(self, args: tuple, kwargs: dict) -> Any:
        """The module's parameters, buffers or tensor attributes changed place: every entry
        was compiled for the old layout, so all are dropped before the call compiles anew."""
        with self._compile_lock:
            self._set_layout()
            for k in list(self._cache):
                self._evicted_hits += self._uncache(k)
            self._entries.clear()
            self._recency.clear()
            self._set_aside.clear()
        return self.entry_point(*args, **kwargs)

    def _guarded(self, key: Any, compilation: Compilation, runner: Callable) -> Callable:
        """`runner` behind what a program that writes its inputs needs: module state written under
        a lock, and a look at whether the call's tensors share memory (`squall.aliasing`)."""
        if compilation.writes_module_state:
            runner = _holding(self._state_lock, runner)
        if compilation.writes_inputs:
            paths = [b.path for b in compilation.bindings]
            variant_for = functools.partial(self._alias_variant, key, compilation)
            runner = alias_guarded(runner, paths, self.module is not None, variant_for)
        return runner

    def _alias_variant(self, key: Any, compilation: Compilation, pattern: AliasPattern, args: tuple, kwargs: dict) -> Callable:
        """The runner for calls whose tensors share memory as `pattern` says: the program traced
        with one proxy for inputs that are the same tensor; eager, with a warning, for overlapping views."""
        paths = [b.path for b in compilation.bindings]
        user_args = args[1:] if self.module is not None else args
        if pattern[0] == "overlapping":
            fn = self.module.forward if self.module is not None else self.fn
            names = argument_names(fn, len(user_args))
            first, second = (describe_path(paths[i], names, self._slot_names) for i in pattern[1:])
            reason = (
                f"{first} and {second} share memory without being the same tensor (overlapping "
                "views of one tensor), and the program writes into its inputs in place; squall's "
                "compiled code cannot follow a write through one into the other"
            )
            warnings.warn(
                f"squall: {reason}, so calls like this one run "
                + ("the module's forward eagerly, with each submodule it calls compiled" if self.module is not None else "eagerly"),
                SquallWarning,
                stacklevel=4 if self.module is None else 5,
            )
            if self.module is not None:
                return self._split_runner(reason)
            return self.fn
        with self._compile_lock:
            start = time.perf_counter()
            variant, _ = self._compile_first_tier(user_args, kwargs, self._priority(key), same_as=same_as_paths(pattern, paths))
            self.last_entry = CompiledEntry(variant, time.perf_counter() - start)
        fn = variant.fn
        fn = self._state_checked(key, variant, _holding(self._state_lock, fn) if variant.writes_module_state else fn)
        if guards_of(variant):  # a value it read may differ at a later call: its variants, as for any entry
            entry = CompiledEntry(variant, 0.0)
            slot = [fn, entry]
            return Variants(self, key, slot, compile_variant=lambda a, k: [self._alias_variant(key, compilation, pattern, a, k), entry])
        return fn

    def _replan(self, key: Any, fault: ExecutorFault, args: tuple, kwargs: dict) -> Callable:
        """Compile the entry `key` again without the executor that failed, for the operations it
        failed on; warn; return the new runner (checked again, for the executors left)."""
        with self._compile_lock:
            return self._replan_locked(key, fault, args, kwargs)

    def _replan_locked(self, key: Any, fault: ExecutorFault, args: tuple, kwargs: dict) -> Callable:
        exclusions = self._exclusions.setdefault(key, [])
        ops = self._ops_to_exclude(key, fault)
        if (fault.executor, ops) in exclusions:
            ops = ()  # failed again where it was kept out: keep it out of the whole entry
            if (fault.executor, ops) in exclusions:
                raise fault
        exclusions.append((fault.executor, ops))
        what = f"for {', '.join(ops)}" if ops else "for every operation of this call"
        warnings.warn(
            f"squall: {fault}. The call is compiled again without {fault.executor!r} {what} "
            "and its result comes from the new plan; the executor's package has a bug to report.",
            SquallWarning,
            stacklevel=4,
        )
        start = time.perf_counter()
        compilation = compile_program(self.fn, args, kwargs, executors=self._excluding(exclusions), module=self.module, strict=self.strict,
                                      dynamic=frozenset(self._numbers.paths))
        entry = CompiledEntry(compilation, time.perf_counter() - start)
        self._entries[key] = entry
        self.last_entry = entry
        self.stats.replans += 1
        runner = self._cached_runner(key, entry)
        if key in self._cache:
            self._cache[key][0] = runner
        return runner

    def _upgrade_job(self, key: Any, entry: CompiledEntry, executors: ExecutorPriority, call: tuple) -> tiers.UpgradeJob:
        """The job that upgrades `entry` to the plan with every executor (squall.tiers)."""
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        entry.upgrade = self._upgrades[key] = tiers.Upgrade(name)
        layout = dict(takes_params=self.module is not None, nargs=len(call[1]), takes_kwargs=bool(call[2]))
        owner = weakref.ref(self)  # a queued upgrade does not keep the jitted function alive

        def install(compilation: Compilation, seconds: float) -> bool | None:
            state = owner()
            return None if state is None else state._install_upgrade(key, entry, compilation, seconds)

        return tiers.UpgradeJob(entry.upgrade, entry.compilation, layout, executors, tiers.call_specs(*call),
                                install, alive=lambda: owner() is not None)

    def _install_upgrade(self, key: Any, base: CompiledEntry, compilation: Compilation, seconds: float) -> bool:
        """Swap the entry `key` to the upgraded compilation, unless it was evicted or replanned since."""
        upgraded = CompiledEntry(compilation, base.compile_seconds + seconds, base.upgrade)
        with self._compile_lock:  # the lock eviction and replanning hold
            cached = self._cache.get(key)
            if cached is None or self._entries.get(key) is not base or key in self._split_keys:
                return False
            self._entries[key] = upgraded
            if self.last_entry is base:
                self.last_entry = upgraded
            cached[0] = self._cached_runner(key, upgraded)  # the hot path's next call runs the fused plan
        return True

    def _replan_after_backward(self, key: Any, fault: ExecutorFault, args: tuple, kwargs: dict) -> None:
        """A fault in the checked backward of `key`'s first call: that backward was computed on
        torch (squall.pipeline); later calls get a plan without the executor there."""
        compilation = self._entries[key].compilation if key in self._entries else None
        if compilation is not None:
            compilation.on_backward_fault = None  # the replan holds no reference to the first call's inputs
        with torch.enable_grad():  # a backward runs in no-grad mode; the entry was compiled for training
            self._replan(key, fault, args, kwargs)

    def _ops_to_exclude(self, key: Any, fault: ExecutorFault) -> tuple[str, ...]:
        """The program's operations the executor must not take: those it failed running, or
        where it ran its own operations (an execution transform's), the ones it took there."""
        own = [op for op in fault.ops if op.startswith(f"{fault.executor}.")]
        if not own:
            return fault.ops
        entry = self._entries.get(key)
        plan = entry.compilation.plan if entry is not None else None
        taken = [
            d.bsym.sym.id
            for d in (plan.decisions if plan is not None else ())
            if d.executor == fault.executor and (fault.source is None or d.bsym.source == fault.source)
        ]
        return tuple(dict.fromkeys([op for op in fault.ops if op not in own] + taken))

    def _excluding(self, exclusions: list[tuple[str, tuple[str, ...]]]) -> ExecutorPriority:
        """This function's priority list with each (executor, operations) pair kept apart."""
        everywhere = {name for name, ops in exclusions if not ops}
        base = [ex for ex in self.executors if ex.name not in everywhere]
        per_op = {op: list(exs) for op, exs in (getattr(self.executors, "per_op", None) or {}).items()}
        for name, ops in exclusions:
            for op in ops:
                per_op[op] = [ex for ex in per_op.get(op, base) if ex.name != name]
        per_op = {op: [ex for ex in exs if ex.name not in everywhere] for op, exs in per_op.items()}
        source = getattr(self.executors, "source", "jit(executors=...)")
        return ExecutorPriority(base, per_op=per_op, source=f"{source}, replanned after executor faults")

    def _insert(self, key: Any, entry: CompiledEntry) -> None:
        """Cache `entry`, first evicting the least recently used entry if the cache is full.

        Runs once per compilation, never on a hit: it looks at every entry's hit counter
        (at most `cache_size` of them, next to a compilation's milliseconds) to learn which
        were used since the last compilation.
        """
        self._compilations += 1
        now = self._compilations
        for k, (_, hits) in self._cache.items():
            seen, _ = self._recency[k]
            if hits != seen:
                self._recency[k] = (hits, now)
        while self.cache_size is not None and len(self._cache) >= self.cache_size:
            # dicts keep insertion order, so min() breaks ties toward the oldest entry
            victim = min(self._cache, key=lambda k: self._recency[k][1])
            self._evicted_hits += self._uncache(victim)
            del self._entries[victim], self._recency[victim]
            self._upgrades.pop(victim, None)
            self.stats.evictions += 1
        self._cache[key] = [self._cached_runner(key, entry), 0]
        self._split_keys.discard(key)
        self._entries[key] = entry
        self._recency[key] = (0, now)

    def _uncache(self, key: Any) -> int:
        """Drop entry `key` from the cache (and the fast path's memory of it); its hit count."""
        entry = self._cache.pop(key)
        forget_recent(self._last, self._fast_checks, key, entry)
        return entry[1]

    def _note_changes(self, args: tuple, kwargs: dict) -> None:
        fn = self.module.forward if self.module is not None else self.fn
        parts = key_parts(args, kwargs, argument_names(fn, len(args)))
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
                "requires_grad, or value). Each new signature is traced, planned and generated again"
                + (
                    f"; {self.stats.evictions} were evicted from the full cache (cache_size={self.cache_size}) "
                    "and compiled again when called again: a larger cache_size keeps them"
                    if self.stats.evictions
                    else "."
                ),
                SquallWarning,
                stacklevel=4,
            )

    def cache_info(self) -> CacheStats:
        """Hits, misses, evictions, entries held and the limit, and which inputs changed."""
        self.stats.hits = self._evicted_hits + sum(hits for _, hits in self._cache.values())
        if self.split is not None:
            self.stats.split = self.split.report(lambda child: jitted_state(child).cache_info())
        self.stats.size = len(self._cache)
        self.stats.limit = self.cache_size
        return self.stats


def _holding(lock: threading.Lock, fn: Callable) -> Callable:
    """`fn`, called while holding `lock`."""

    def locked(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    locked.__wrapped__ = fn
    return locked


class JittedModule(torch.nn.Module):
    """An nn.Module whose forward runs compiled; parameters and buffers stay the original's.

    Hooks on it and on the original's top level run eagerly around the compiled forward at
    every call, as `nn.Module.__call__` runs them (`squall.wrappers`): that is how DDP and
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
        # what the original has and this module has not (`config`, `generate`): squall.wrappers
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
) -> Any:
    """Compile `fn` (a function or an nn.Module); the result is called like the original.

    It keeps up to `cache_size` compiled signatures (`None`: no limit), evicting the least
    recently used; a warning names the input that changes after `recompile_limit` compilations.
    A new signature's first call runs a plan without the fusion executors that compile slowly
    (inductor), which compile and time their regions in the background and take over when
    faster (squall.tiers); `wait=True` (or `wait = true` under [tool.squall], or SQUALL_WAIT=1)
    compiles and times them before the first call returns.
    Where the program reads a tensor's value (`if t.any():`, `t.item()`) or calls an op whose
    output shape depends on data (`x[mask]`, `nonzero`), the value is read from the call being
    compiled and guarded: a call where it differs runs (or compiles) another variant; a value
    that changes at every call makes a module split (`squall.split`: its forward runs eagerly,
    each submodule it calls compiled) and a plain function run eagerly. With `strict=True`
    such a program raises `DataDependentError` instead.
    """
    state = JittedFunction(
        fn, executors=executors, recompile_limit=recompile_limit, cache_size=cache_size, wait=wait, strict=strict
    )
    if isinstance(fn, torch.nn.Module):
        return JittedModule(fn, state)
    return state.entry_point


def state_guards(compilation: Compilation) -> StateGuards:
    """What the compilation's trace read of Python state, and the writes it replays."""
    state = getattr(compilation.traced.context, "state", None)
    return state.guards if state is not None else _NO_GUARDS


_NO_GUARDS = StateGuards()


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
    """Block until `jfn`'s background upgrades (squall.tiers) are done; False if `timeout` seconds pass first."""
    return tiers.wait_for_upgrades(jitted_state(jfn), timeout)


def upgrades(jfn: Any) -> list[tiers.Upgrade]:
    """`jfn`'s background upgrades, one per compiled signature: status ("pending", "upgraded",
    "kept the torch plan", "nothing to fuse", ...), why, and the in-context timings."""
    return tiers.upgrades(jitted_state(jfn))
