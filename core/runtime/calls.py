"""Call time of one jitted function: compile on a miss, and do what a failed check leads to.

The entry point (`squall.runtime.entry_point`) serves hits on its own; a miss comes to `compile_`.
Each cached entry's slot runs its runner (`squall.runtime.runner`): the entry's one check,
then its program. A rejected call is reported here as a `GuardFailure`, the policy
(`squall.runtime.policy.decide`) says what it leads to, and `Runtime` carries that out:
setting the entry aside and compiling again, compiling a variant, splitting a module,
running eagerly, replanning without an executor that failed (`squall.runtime.replans`). A new
0/1 variant of a symbolic entry may run eagerly a while before it compiles
(`squall.runtime.ski_rental`). Every change of an entry's program goes through `EntryCache.swap`.
"""
from __future__ import annotations

import functools
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..compiler.pipeline import Compilation, compile_program
from ..compiler.planner import PlanningError
from ..frontend.speculation import guards_of, specialised_numbers
from ..frontend.state_guards import StateGuards
from ..frontend.state_views import EagerFirst, UnreplayableWrite, raised_by_users_code
from ..frontend.tracing import argument_names, module_layout
from ..guard_set import ALIAS, GuardFailure
from ..ltorch.base import SquallWarning, UnmodelledMode
from ..market.config import ExecutorPriority
from ..proxies import BelowPythonAPI, current_context
from ..symbol import user_stacklevel
from . import dims_profile, tiers, upgrade_worker
from .aliasing import AliasPattern, alias_pattern, describe_path, input_tensors, same_as_paths, tensor_paths_of
from .cache import EntryCache
from .dynamic_dims import DynamicDims, admits_ones, has_shape_guards, one_variants, specialised_dims
from .entry import CacheEntry, CompiledEntry, entry_guards
from .entry_point import DynamicNumbers, ParameterKey, argument_leaves, key_parts, remember_own_code, training_reader
from .exclusions import excluding
from .policy import SPECULATION_LIMIT, Action, decide
from .rage import record_compilation
from .replans import Replans
from .runner import checked_first, guarded, holding
from .ski_rental import SkiRental
from .split import Split
from .stats import CacheStats
from .upgrades import Upgrades, heat, writes_held
from .variants import Variants
from .wrappers import check_plain_parameters, check_wrapping

__all__ = ["Runtime"]


def _raised_over(error: BaseException, kinds: tuple[type, ...]) -> BaseException | None:
    """The error of one of `kinds` that `error`, raised by a library or the program, was raised
    while handling (torch.vmap's cleanup raises its own error after a symbolic size reached C++;
    torch.testing.assert_close raises a RuntimeError over any error of a tensor's): None where
    there is none, or where squall raised `error` itself (its answer: a collective it does not trace)."""
    where = error.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    if where is not None and where.tb_frame.f_globals.get("__name__", "").startswith("squall"):
        return None
    error, seen = error.__cause__ or error.__context__, 0
    while error is not None and seen < 8:
        if isinstance(error, kinds):
            return error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


class Runtime(Replans, Upgrades):
    """The call-time state of one jitted function (`squall.runtime.jit.JittedFunction` is its face).

    A subclass supplies `entry_point` (the callable users call) and `_compiled_child` (a
    submodule of a split module, compiled with the same options)."""

    entry_point: Callable

    def __init__(self, fn: Callable, *, executors: ExecutorPriority, recompile_limit: int, cache_size: int | None,
                 wait: bool, strict: bool, check: str, dynamic: bool | str = "auto"):
        self.fn = fn
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        self.executors = executors
        self.recompile_limit = recompile_limit
        self.cache_size = cache_size
        self.wait = wait  # compile and time fusion regions before the first call returns, or in the background
        self.strict = strict  # a read of a tensor's value while tracing is a DataDependentError
        self.check = check  # $SQUALL_CHECK: first, always or never
        self.cache = EntryCache(cache_size)
        self._fresh: Any = None  # the key whose first call, right after tracing, is running
        self.last_entry: CompiledEntry | None = None
        self.stats = CacheStats()
        self._last_parts: dict[str, Any] | None = None
        self._warned = False
        self._slots: list[tuple[dict, str]] = []
        self._ties: list[tuple[dict, str, int]] = []  # tied weights' other places (squall.frontend.tracing.ModuleLayout)
        self._slot_names: list[str] = []  # "parameter 'lin.weight'", "buffer 'bn.running_mean'"
        self._slot_paths: list[str] = []  # "lin.weight", "bn.running_mean"
        # how the entry point reads the submodules' training flags (squall.runtime.entry_point.training_reader)
        self._training_read: list[Callable] = [None]
        self._training_of: list[Any] = []
        self._parameter_key = ParameterKey()  # the key's part for the parameters' metadata
        self._numbers = DynamicNumbers()  # the number arguments read at run time (squall.runtime.entry_point)
        # the tensor dimensions traced as symbolic sizes (squall.runtime.dynamic_dims); with
        # $SQUALL_REMEMBER_DYNAMIC, starting from those earlier jits of this code learned (dims_profile)
        self._dims = DynamicDims(dynamic, code=dims_profile.program_code(fn) if dims_profile.remember_enabled() else None)
        self.autocast_state: tuple | None = None  # the torch.autocast state every call is made under, if one (squall.runtime.jit)
        self._eager_keys: dict[Any, str] = {}  # key -> why its calls run eagerly (an unreplayable write)
        self._set_up_eagerly: set[Any] = set()  # keys whose one-time setup eager made (EagerFirst)
        self.rental = SkiRental(self.cache, self.stats, self._dims)  # a new 0/1 variant of a symbolic entry runs eagerly a while
        self.split: Split | None = None  # the module's eager frame with compiled children, once it splits
        # around calls that write module state (a module's buffers are updated as one step, as in eager)
        self._state_lock = threading.Lock()
        self._skip = 1 if self.module is not None else 0  # a module's runners get its parameters first

    # what the entry point and the tools read (squall.runtime.entry_point, squall.runtime.tiers, tests)
    @property
    def _cache(self) -> dict[Any, list]:
        return self.cache.slots

    @property
    def _last(self) -> list:
        return self.cache.last

    @property
    def _fast_checks(self) -> dict[Any, Callable]:
        return self.cache.fast_checks

    @property
    def _upgrades(self) -> dict[Any, tiers.Upgrade]:
        return self.cache.upgrades()

    def _set_layout(self) -> None:
        """Read where the module's parameters, buffers and tensor attributes are (in place: the
        entry point holds these lists)."""
        layout = module_layout(self.module)
        slots, paths = layout.slots, layout.names
        self._ties[:] = layout.ties
        kinds = lambda store, k: "parameter" if isinstance(store[k], torch.nn.Parameter) else "tensor attribute" if "_parameters" in store else "buffer"
        self._slots[:], self._slot_paths[:] = slots, paths
        self._slot_names[:] = [f"{kinds(store, k)} {name!r}" for (store, k), name in zip(slots, paths)]
        self._training_read[0], self._training_of[:] = training_reader(list(self.module.modules()))
        self._parameter_key.forget()

    def _moved(self, layout: Any) -> bool:
        """Whether the module's parameters, buffers, tensor attributes or ties are no longer where
        `_set_layout` read them (`layout` is `module_layout`'s walk now)."""
        return ([(id(d), k) for d, k in layout.slots] != [(id(d), k) for d, k in self._slots]
                or [(id(d), k, i) for d, k, i in layout.ties] != [(id(d), k, i) for d, k, i in self._ties])

    def _compiled_child(self, module: torch.nn.Module) -> Callable:
        raise NotImplementedError

    # --- a miss --------------------------------------------------------------------------------

    def _compile(self, args: tuple, kwargs: dict, key: tuple, params: list | None) -> Callable:
        if current_context() is not None:
            # called from inside a program squall is tracing: trace through it, inline
            original = self.fn
            return (lambda params, *a, **k: original(*a, **k)) if params is not None else original
        if self.module is not None:
            # a wrapper applied after jit (fully_shard on a submodule) is seen here, before tracing it
            check_wrapping(self.module)
            check_plain_parameters(self._slot_paths, params)
        with self.cache.lock:
            exact, key = key, self._numbers.key_for(key, args, kwargs)  # a number that changed: dynamic (squall.runtime.entry_point)
            dims = dict(self._dims.dims)
            key = self._dims.key_for(key, args, kwargs, self._numbers.paths)  # a size that changed: symbolic (squall.runtime.dynamic_dims)
            cached = self.cache.slots.get(key)
            if cached is not None:  # another thread compiled this signature while we waited
                return cached[0]
            layout = module_layout(self.module) if self.module is not None else None  # (the trace reads this walk too)
            if layout is not None and self._moved(layout):
                return lambda params, *a, **k: self._relayout(a, k)
            if key in self._eager_keys:
                return self._eager_runner(self._eager_keys[key])
            call_args = (params, *args) if params is not None else args
            record = self.cache.entries.get(key)
            back = self._set_aside_holding(record, call_args, kwargs)
            if back is not None:  # its state is back: cached again, not compiled
                return self._bring_back(record, back)
            if record is None and dims == self._dims.dims:
                shared = self._shared_with_ones(key, call_args, args, kwargs)
                if shared is not None:  # a size of 1 its symbolic entry serves: that program, under this key too
                    return self.cache.insert(key, shared, self._runner_for).slot[0]
                if self.rental.waits(key, args, kwargs):
                    return self.rental.runner(key, self._eager_once())  # a new 0/1 variant of a symbolic entry, until it paid for a compile
            # a tensor an argument object holds (a KV cache) whose sizes changed since an entry read
            # it: those dimensions symbolic in this compile (squall.runtime.dynamic_dims)
            for held in self.cache.entries.values():
                for compiled in (held.compiled, *held.set_aside):
                    if compiled is not None:
                        self._dims.note_state(compiled.compilation, args, kwargs)
            start, start_cpu = time.perf_counter(), time.thread_time()
            self.stats.misses += 1
            self._note_changes(args, kwargs)
            executors = self._priority(key)
            try:
                with record_compilation(self, args, kwargs) as rec:  # always on: squall.runtime.rage
                    compilation, tiered = self._compile_first_tier(args, kwargs, executors, on_traced=rec.traced, layout=layout)
                    rec.compiled(compilation)
            except EagerFirst as setup:
                if key in self._set_up_eagerly:  # a change made at every call, not once: eager from now on
                    return self._eager_for(key, str(setup).removeprefix("squall: "))
                self._set_up_eagerly.add(key)
                return self._eager_once()
            except (UnreplayableWrite, UnmodelledMode) as write:
                return self._eager_for(key, str(write).removeprefix("squall: "))
            except Exception as error:  # noqa: BLE001 - only the user's own code raising is answered here
                refused = _raised_over(error, (UnreplayableWrite, UnmodelledMode))  # (as above, under another error)
                if refused is not None:
                    return self._eager_for(key, str(refused).removeprefix("squall: "))
                below = error if isinstance(error, BelowPythonAPI) else _raised_over(error, (BelowPythonAPI,))
                if not (raised_by_users_code(error) or below is not None):
                    raise
                return self._eager_after_error(key, below or error)
            guarded_numbers = specialised_numbers(compilation)
            if guarded_numbers:  # its dynamic trace needed the number's exact value: keyed by value again
                self._numbers.specialise(guarded_numbers)
                # an int an op was given (a slice bound, `arange(n)`; not `float(n)`, `range(n)`, which
                # need the value whatever it is) is tried as a size symbol first: keyed by value
                # only where that trace too reads its exact value (`specialised_dims`)
                ints = argument_leaves(args, kwargs, lambda x: x if type(x) is int else None)
                for path in specialised_numbers(compilation, hows=("number",)) & ints.keys():
                    self._dims.number_size(path)
                return self._compile(args, kwargs, exact, params)
            sized = specialised_dims(compilation)
            if sized:  # its trace needed a symbolic size's exact value: that dimension is keyed by value again
                for path, dim in sized:
                    self._dims.specialise(path, dim)
                return self._compile(args, kwargs, exact, params)
            entry = CompiledEntry(compilation, time.perf_counter() - start)
            record = self.cache.insert(key, entry, self._runner_for)
            self.last_entry = entry
            self.rental.compiled(key, time.thread_time() - start_cpu)
            guards = self._guards(compilation)
            if guards.eager:
                guards.warn_eager("the module's forward (each submodule it calls compiled)" if self.module is not None else "the function")
            # a split module runs its children compiled, each upgraded on its own: not the whole
            split = self.module is not None and guards.eager
            upgrade = self._upgrade_job(record, entry, executors, (params, args, kwargs)) if tiered and not split and not writes_held(compilation) else None
            if upgrade is not None and self.wait:
                upgrade.run()  # the same upgrade, done before the first call returns
            runner = rec.first_call(self._first_call(key, record.slot[0]))  # this first call is recorded
        if upgrade is None or self.wait:
            return runner

        def first_call_then_upgrade(*args, **kwargs):
            # watched once the first call is done: queued when the entry is hot (upgrade_worker.HOT_S)
            start = time.perf_counter()
            try:
                return runner(*args, **kwargs)
            finally:
                # (its heat counts no more than the time since this call started: not hot before start + HOT_S)
                upgrade_worker.default_worker().watch(upgrade, heat(record, entry, start, time.perf_counter() - start),
                                                      not_before=start + upgrade_worker.HOT_S)

        return first_call_then_upgrade

    def _shared_with_ones(self, key: Any, call_args: tuple, args: tuple, kwargs: dict) -> CompiledEntry | None:
        """The cached symbolic entry whose program serves this call of new signature `key`, which
        has a size of 1 where that entry's key holds a symbolic size: its trace never relied on
        that size being 2 or more (`dynamic_dims.admits_ones`) and all its guards hold. None
        where none does (the call rents or compiles as a 0/1 variant does)."""
        for other in one_variants(key, self.cache.slots):
            compiled = self.cache.compiled(other)
            if compiled is None or self.cache.entries[other].waiting:
                continue
            if admits_ones(compiled.compilation, args, kwargs) and self._guards(compiled.compilation).holds(call_args, kwargs):
                return compiled
        return None

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

    def _eager_once(self) -> Callable:
        """This call runs eagerly (a module: its forward) and caches nothing: the program made a
        one-time change eager makes (EagerFirst), and the next call compiles with it in place."""
        if self.module is None:
            return self.fn
        return lambda params, *a, **k: self.module.forward(*a, **k)

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
            with self.cache.lock:
                self._eager_for(key, reason)
            return out

        return run_eagerly

    def _what(self) -> str:
        return f"{type(self.module).__name__}'s forward (each submodule it calls compiled)" if self.module is not None else "the function"

    def _priority(self, key: Any) -> ExecutorPriority:
        """The priority list entry `key` compiles under: an executor that failed this signature's
        checks before (then was replanned, or evicted) stays out where it failed."""
        record = self.cache.entries.get(key)
        return excluding(self.executors, record.exclusions) if record is not None and record.exclusions else self.executors

    def _compile_first_tier(self, args: tuple, kwargs: dict, executors: ExecutorPriority, **options) -> tuple[Compilation, bool]:
        """Compile for `executors` less the fusion executors that compile slowly (squall.runtime.tiers);
        also whether any were left out, for a background upgrade to bring them in."""
        options.setdefault("dynamic", frozenset(self._numbers.paths))
        options.setdefault("dims", dict(self._dims.dims))
        first = tiers.background_priority(executors)
        if first is not None:
            try:
                return compile_program(self.fn, args, kwargs, executors=first, module=self.module, strict=self.strict, **options), True
            except PlanningError:
                pass  # only a fusion executor runs some operation: plan with it now
        return compile_program(self.fn, args, kwargs, executors=executors, module=self.module, strict=self.strict, **options), False

    def _first_call(self, key: Any, runner: Callable) -> Callable:
        """`runner` for the call the entry was traced for: a state check failing in it means the
        state changed during compilation (squall.frontend.state_guards)."""

        def first_call(*args, **kwargs):
            self._fresh = key
            try:
                return runner(*args, **kwargs)
            finally:
                self._fresh = None

        return first_call

    # --- runners -------------------------------------------------------------------------------

    def _guards(self, compilation: Compilation, alias: bool = True) -> StateGuards:
        """The compilation's one guard set (squall.guard_set), completed on first use."""
        done = compilation.__dict__.get("guard_set")
        if done is not None:
            return done
        names = argument_names(self.module.forward if self.module is not None else self.fn, len(compilation.bindings))
        state = getattr(compilation.traced.context, "state", None)
        eager = state is not None and state.guards.eager  # an eager program's check is of its state alone
        return entry_guards(compilation, alias=alias and not eager, takes_params=self.module is not None,
                            describe=lambda path: describe_path(path, names, self._slot_names))

    def _runner_for(self, record: CacheEntry) -> Callable:
        return self._cached_runner(record.key, record.compiled)

    def _cached_runner(self, key: Any, entry: CompiledEntry) -> Callable:
        """What the slot holds: the runner; for a trace with value guards, its variants."""
        if not guards_of(entry.compilation) and not has_shape_guards(entry.compilation):
            return self._runner(key, entry.compilation)
        return self._variants(key, self._variant(key, entry))

    def _runner(self, key: Any, compilation: Compilation, slot: list | None = None, alias: bool = True) -> Callable:
        """The entry's one check, then its program: the generated function; or, while its non-torch
        calls are to be checked, the checked one, which replans the entry on a fault and (unless
        $SQUALL_CHECK=always) swaps in the plain one after a clean call. `slot` is where that swap
        happens when it is not the entry's (a variant's `[runner, entry]`: squall.runtime.variants)."""
        guards = self._guards(compilation, alias)
        aliased: dict[AliasPattern, Callable] = {}  # the runner per pattern of shared input tensors

        def behind_check(program: Callable) -> Callable:
            if compilation.writes_module_state:
                program = holding(self._state_lock, program)
            if guards.eager:  # an inner hook: a module splits, a function runs eagerly (squall.runtime.split)
                program = self._split_runner("; ".join(guards.eager_because)) if self.module is not None else self.fn
            return guarded(guards, program, functools.partial(self._rejected, key, compilation, aliased, program))

        plain = behind_check(compilation.fn)
        checked = compilation.checked
        if checked is None or self.check == "never" or guards.eager:
            return plain

        def arm_backward(user_args: tuple, kwargs: dict) -> None:
            if compilation.on_backward_fault is None:
                # a fault in the checked backward comes after this call returns: replan then, for later calls
                compilation.on_backward_fault = lambda fault: self._replan_after_backward(key, fault, user_args, kwargs)

        def hand_over() -> None:
            self.cache.swap(self.cache.entries.get(key), plain, slot=slot, replacing=runner)

        runner = behind_check(checked_first(
            checked.fn,
            skip=self._skip,
            always=self.check == "always",
            on_fault=functools.partial(self._replanned_program, key),
            arm_backward=arm_backward if compilation.backward is not None else None,
            hand_over=hand_over,
        ))
        return runner

    def _variants(self, key: Any, first: list, compile_variant: Callable[[tuple, dict], list] | None = None) -> Variants:
        return Variants(
            first,
            module=self.module is not None,
            compile_variant=compile_variant or (lambda args, kwargs: self._compile_variant(
                key, args[self._skip:], kwargs, args[0] if self._skip else None)),
            stop=self._stop_compiling,
            used=lambda entry: setattr(self, "last_entry", entry),
            failed=self._count_guard_failure,
        )

    def _count_guard_failure(self) -> None:
        self.stats.guard_failures += 1

    def _variant(self, key: Any, entry: CompiledEntry) -> list:
        """[runner, entry] for one variant of a guarded entry; its runner may replace itself there."""
        variant = [None, entry]
        variant[0] = self._runner(key, entry.compilation, slot=variant)
        return variant

    def _compile_variant(self, key: Any, args: tuple, kwargs: dict, params: list | None = None) -> list:
        """Another variant of entry `key`, traced on this call's inputs after a value guard failed;
        upgraded as the entry's first variant is (judged on this call's values where its guards read)."""
        with self.cache.lock:
            start = time.perf_counter()
            executors = self._priority(key)
            try:
                with record_compilation(self, args, kwargs) as rec:  # squall.runtime.rage sees variants too
                    compilation, tiered = self._compile_first_tier(args, kwargs, executors, on_traced=rec.traced)
                    rec.compiled(compilation)
            except (UnreplayableWrite, UnmodelledMode) as refused:  # (EagerFirst too): eager from now on
                return [self._eager_for(key, str(refused).removeprefix("squall: ")), None]
            entry = CompiledEntry(compilation, time.perf_counter() - start)
            self.stats.misses += 1
            self.last_entry = entry
            variant = self._variant(key, entry)
            record = self.cache.entries.get(key)
            upgrade = None
            if tiered and record is not None and not record.split and not writes_held(compilation):
                upgrade = self._upgrade_job(record, entry, executors, (params, args, kwargs), variant=variant)
                if self.wait:
                    upgrade.run()  # installs into `variant`, which the caller runs next
        if upgrade is not None and not self.wait:
            upgrade_worker.default_worker().submit(upgrade)
        return variant

    # --- a rejected call: the policy's answer, carried out -------------------------------------

    def _rejected(self, key: Any, compilation: Compilation, aliased: dict, program: Callable,
                  failure: GuardFailure, args: tuple, kwargs: dict) -> Any:
        """A call entry `key`'s check rejected (`failure` says what failed)."""
        if failure.kind == ALIAS:
            return self._aliased(key, compilation, aliased, program, failure, args, kwargs)
        user_args = args[self._skip:]
        fresh = self._fresh == key
        if not fresh and self.rental.waits_one_long(key, user_args, kwargs):
            # a loop's step with a cache one token long, once per loop: eager until it paid for a
            # compile; the entry stays (the next step's), and no state change is counted against it
            return self.rental.charged(key, self._eager_once())(*args, **kwargs)
        back = None if fresh else self._set_aside_holding(self.cache.entries.get(key), args, kwargs)
        compiles = self._state_compiles(key, failure.label) if self.module is not None and not fresh and back is None else 0
        action = decide(failure, module=self.module is not None, first_call=fresh, compiles=compiles)
        if action is Action.EAGER_ONCE:
            # changed between tracing and this first call (another thread, or code tracing ran
            # that squall does not see): this call runs eagerly, the next compiles again
            warnings.warn(
                f"squall: {failure.label} changed while the program was being compiled; this call runs eagerly",
                SquallWarning,
                stacklevel=5,
            )
            self._stale_entry(key, failure.label)
            return (self.module.forward if self.module is not None else self.fn)(*user_args, **kwargs)
        if action is Action.SPLIT:
            return self._split_entry(key, failure.label)(*args, **kwargs)
        self._stale_entry(key, failure.label)  # SET_ASIDE: it comes back when its state does
        record = self.cache.entries.get(key)
        if back is not None and record is not None and record.slot is None:
            # one set aside for this key serves the call (a one-token prompt's prefill and decoding
            # step share a key and take turns at every generate): back in its place now, without
            # the dispatch and checks of a miss
            runner = self._bring_back(record, back)
            if runner is not None:
                return runner(*args, **kwargs)
        return self.entry_point(*user_args, **kwargs)

    def _set_aside_holding(self, record: CacheEntry | None, args: tuple, kwargs: dict) -> CompiledEntry | None:
        """The entry set aside in `record` whose guards all hold for this call (args as a runner
        gets them), newest first; None where none does."""
        for entry in record.set_aside if record is not None else ():
            if self._guards(entry.compilation).holds(args, kwargs):
                return entry
        return None

    def _bring_back(self, record: CacheEntry, entry: CompiledEntry) -> Callable | None:
        """Cache `entry`, set aside in `record`, again under its key; its runner. None where it
        is no longer set aside there (dropped past the limit, or taken back by another thread)."""
        with self.cache.lock:
            for i, e in enumerate(record.set_aside):
                if e is entry and record.slot is None:
                    del record.set_aside[i]
                    return self.cache.insert(record.key, entry, self._runner_for).slot[0]
        return None

    def _state_compiles(self, key: Any, label: str) -> int:
        """How many compilations a change of `label` has now caused in entry `key` (none set
        aside for it holds for this call: it compiles)."""
        record = self.cache.entry(key)
        count = record.state_compiles[label] = record.state_compiles.get(label, 0) + 1
        return count

    def _stale_entry(self, key: Any, label: str) -> None:
        with self.cache.lock:
            self.stats.changes[label] = self.stats.changes.get(label, 0) + 1
            self.cache.set_aside(key, self.recompile_limit)

    def _split_entry(self, key: Any, label: str) -> Callable:
        """Entry `key`'s state keeps changing: the module splits for it from now on (squall.runtime.split)."""
        reason = f"{label} changed at {SPECULATION_LIMIT + 1} calls of one input signature, each compiling the program again"
        runner = self._split_runner(reason)
        warnings.warn(
            f"squall: {reason}; {type(self.module).__name__}'s forward now runs eagerly for these calls, "
            "with each submodule it calls compiled (a split at module granularity)",
            SquallWarning,
            stacklevel=user_stacklevel(),
        )
        with self.cache.lock:
            record = self.cache.entries.get(key)
            # no state check: the eager frame reads the state as it is; and no background upgrade replaces it
            if record is not None and self.cache.swap(record, runner):
                record.split = True
        return runner

    def _split_runner(self, reason: str) -> Callable:
        """The runner of a module whose program cannot stay stable: its forward eagerly, each
        submodule it calls compiled (squall.runtime.split); `reason` is why."""
        with self.cache.lock:
            if self.split is None:
                self.split = Split(self.module, self._compiled_child)
            self.split.add_reason(reason)
        return self.split.runner()

    def _stop_compiling(self, failure: GuardFailure, action: Action, args: tuple, kwargs: dict) -> Callable:
        """A value guard's site keeps failing: a module splits, a function runs eagerly whole
        (the policy's SPLIT or EAGER); the runner that takes over, in the runner's convention."""
        reason = (
            f"the value read at {failure.site} ({failure.read}) changed at {SPECULATION_LIMIT + 1} calls "
            "of the same input signature, each compiling a new variant"
        )
        if action is Action.SPLIT:
            instead = (
                f"{type(self.module).__name__}'s forward now runs eagerly for this signature, with each "
                "submodule it calls compiled (a split at module granularity)"
            )
        else:
            instead = (
                "this signature now runs the original function eagerly (uncompiled) instead: only a "
                "module's forward can be split, at the submodules it calls"
            )
        warnings.warn(
            f"squall: {reason}; {instead}. Pass the value in as a Python number, or compute it outside "
            "the compiled program, to compile it.",
            SquallWarning,
            stacklevel=user_stacklevel(),
        )
        return self._split_runner(reason) if action is Action.SPLIT else self.fn

    def _aliased(self, key: Any, compilation: Compilation, aliased: dict, program: Callable,
                 failure: GuardFailure, args: tuple, kwargs: dict) -> Any:
        """The call's input tensors share memory: a false alarm runs `program`; a pattern of
        same tensors its own variant; overlapping views eagerly (squall.runtime.aliasing). A
        module whose tensors now share memory because it was tied (`m.b = m.a`) lays out anew."""
        if self.module is not None and self._moved(module_layout(self.module)):
            return self._relayout(args[self._skip:], kwargs)
        paths = tensor_paths_of(compilation.bindings)
        pattern = alias_pattern(input_tensors(paths, args, kwargs, self.module is not None), compilation.captured_tensors)
        if pattern is not None and pattern[0] not in ("overlapping", "captured"):
            # a module's parameter or buffer the same as another (`m.b = m.a[:]`) cannot share one
            # proxy (the program unpacks one per place): as overlapping views
            shared = next(((j, i) for i, j in enumerate(pattern) if i != j and paths[i][0] == "params"), None)
            pattern = ("overlapping", *shared) if shared is not None else pattern
        relation = None if pattern is None else "overlapping" if pattern[0] in ("overlapping", "captured") else "same"
        action = decide(failure, module=self.module is not None, alias=relation)
        if action is Action.RUN:
            return self._guards(compilation).replaying(program)(*args, **kwargs)
        runner = aliased.get(pattern)
        if runner is None:
            runner = aliased.setdefault(pattern, self._alias_variant(key, compilation, pattern, action, args, kwargs))
        return runner(*args, **kwargs)

    def _alias_variant(self, key: Any, compilation: Compilation, pattern: AliasPattern, action: Action,
                       args: tuple, kwargs: dict) -> Callable:
        """The runner for calls whose tensors share memory as `pattern` says: the program traced
        with one proxy for inputs that are the same tensor; eager, with a warning, for overlapping views."""
        paths = [b.path for b in compilation.bindings]
        user_args = args[self._skip:]
        if action is not Action.NEW_VARIANT:
            fn = self.module.forward if self.module is not None else self.fn
            names = argument_names(fn, len(user_args))
            first, second = (describe_path(paths[i], names, self._slot_names) for i in pattern[1:]) if pattern[0] == "overlapping" else (
                describe_path(paths[pattern[1]], names, self._slot_names), "a tensor the program captured (a global, a closure variable)")
            reason = (
                f"{first} and {second} share memory without being the same tensor (overlapping "
                "views of one tensor), and the program writes into its inputs in place; squall's "
                "compiled code cannot follow a write through one into the other"
            ) if pattern[0] == "overlapping" else (
                f"{first} shares memory with {second}, and the program writes into one of them in place; "
                "squall's compiled code holds the captured tensor apart from its inputs, so a write through one would not reach the other"
            )
            warnings.warn(
                f"squall: {reason}, so calls like this one run "
                + ("the module's forward eagerly, with each submodule it calls compiled" if self.module is not None else "eagerly"),
                SquallWarning,
                stacklevel=6 if self.module is None else 7,
            )
            return self._split_runner(reason) if action is Action.SPLIT else self.fn
        with self.cache.lock:
            start = time.perf_counter()
            variant, _ = self._compile_first_tier(user_args, kwargs, self._priority(key), same_as=same_as_paths(pattern, paths))
            self.last_entry = CompiledEntry(variant, time.perf_counter() - start)
        guards = self._guards(variant, alias=False)  # traced for this pattern: not checked for it again
        fn = holding(self._state_lock, variant.fn) if variant.writes_module_state else variant.fn
        fn = guarded(guards, fn, functools.partial(self._rejected, key, variant, {}, fn))
        if guards_of(variant) or has_shape_guards(variant):  # a value it read may differ at a later call: its variants, as for any entry
            entry = CompiledEntry(variant, 0.0)
            return self._variants(key, [fn, entry], lambda a, k: [self._alias_variant(key, compilation, pattern, action, a, k), entry])
        return fn

    def _relayout(self, args: tuple, kwargs: dict) -> Any:
        """The module's parameters, buffers or tensor attributes changed place: every entry
        was compiled for the old layout, so all are dropped before the call compiles anew."""
        with self.cache.lock:
            self._set_layout()
            self.cache.clear()
        return self.entry_point(*args, **kwargs)

    def _recode(self, args: tuple, kwargs: dict) -> Any:
        """The jitted function's own code or defaults were set anew (an edit reloaded in place):
        every entry was traced from the old ones, so all are dropped before the call compiles anew."""
        with self.cache.lock:
            remember_own_code(self.entry_point)
            self.cache.clear()
        return self.entry_point(*args, **kwargs)

    # --- what changed --------------------------------------------------------------------------

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
                    f"; {self.cache.evictions} were evicted from the full cache (cache_size={self.cache_size}) "
                    "and compiled again when called again: a larger cache_size keeps them"
                    if self.cache.evictions
                    else "."
                ),
                SquallWarning,
                stacklevel=4,
            )
