"""Upgrades: a cached entry's background upgrade to the plan with every executor
(squall.runtime.tiers). `Upgrades._upgrade_job` makes the job; its `install` swaps the entry (and the
keys with a size of 1 that run the same program) to the upgraded plan under the cache's lock,
through `EntryCache.swap`, unless the entry was evicted, set aside, replanned or split since.
"""
from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

from ..compiler.pipeline import Compilation
from ..frontend.speculation import guard_input_paths
from ..market.config import ExecutorPriority
from . import tiers
from .entry import CacheEntry, CompiledEntry
from .variants import Variants

__all__ = ["Upgrades", "heat", "writes_held"]


class Upgrades:
    """How `squall.runtime.calls.Runtime` (whose base this is) upgrades its entries; it reads the
    runtime's `cache`, `fn`, `module`, `_runner` and `_cached_runner`, and sets `last_entry`."""

    def _upgrade_job(self, record: CacheEntry, entry: CompiledEntry, executors: ExecutorPriority, call: tuple,
                     *, variant: list | None = None) -> tiers.UpgradeJob:
        """The job that upgrades `entry` to the plan with every executor (squall.runtime.tiers): the
        entry's program, or a variant compiled after a value guard failed (`variant`, its [runner, entry])."""
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        entry.upgrade = tiers.Upgrade(name + (" (a variant)" if variant is not None else ""))
        if variant is not None:
            record.variant_upgrades.append(entry.upgrade)
        else:
            record.upgrade = entry.upgrade
        layout = dict(takes_params=self.module is not None, nargs=len(call[1]), takes_kwargs=bool(call[2]))
        owner = weakref.ref(self)  # a queued upgrade does not keep the jitted function alive
        key = record.key

        running = [entry]  # the entry in place: the first plan, then each offer installed over it

        def install(compilation: Compilation, seconds: float) -> bool | None:
            state = owner()
            if state is None:
                return None
            installed = state._install_upgrade(key, running[0], compilation, entry.compile_seconds + seconds, variant)
            if installed is None:
                return False
            running[0] = installed
            return True

        # the inputs its value guards read keep their values: the judge takes the call's branches
        specs = tiers.call_specs(*call, keep=guard_input_paths(entry.compilation), state=entry.compilation.state_bindings,
                                 written=entry.compilation.written_input_paths)
        return tiers.UpgradeJob(entry.upgrade, entry.compilation, layout, executors, specs,
                                install, alive=lambda: owner() is not None)

    def _install_upgrade(self, key: Any, base: CompiledEntry, compilation: Compilation, compile_seconds: float,
                         variant: list | None = None) -> CompiledEntry | None:
        """Swap the entry `key` (or its `variant`) from `base` to the upgraded compilation and return
        the new entry; None where it was evicted, set aside, replanned or split since `base` was installed."""
        upgraded = CompiledEntry(compilation, compile_seconds, base.upgrade)
        with self.cache.lock:
            if not self._swap_upgraded(key, base, upgraded, variant):
                return None
            # the keys with a size of 1 that run this entry's program (`_shared_with_ones`) run its
            # upgrade too: planned from the same trace, whose symbols that may be 1 every fusion
            # executor in it serves at 1 (one that is not known to declines them: FusionExecutor.symbolic_ones)
            for other, record in list(self.cache.entries.items()):
                if other != key and record.slot is not None:
                    self._swap_upgraded(other, base, upgraded)
            if self.last_entry is base:
                self.last_entry = upgraded
        return upgraded

    def _swap_upgraded(self, key: Any, base: CompiledEntry, upgraded: CompiledEntry, variant: list | None = None) -> bool:
        """Swap entry `key` (or its `variant`) from `base` to `upgraded`, under the cache's lock;
        False where it does not run `base` (evicted, set aside, replanned or split since)."""
        record = self.cache.entries.get(key)
        if record is None or record.slot is None or record.split:
            return False
        held = record.slot[0]
        if variant is not None or isinstance(held, Variants):
            # a guarded entry: the upgraded variant takes its own place, the other variants stay
            if variant is None:
                variant = next((v for v in held.variants if v[1] is base), None)
            if variant is None or variant[1] is not base:  # replanned, or stopped compiling, since
                return False
            variant[1] = upgraded
            variant[0] = self._runner(key, upgraded.compilation, slot=variant)
            if record.compiled is base:
                record.compiled = upgraded
        elif record.compiled is base:
            self.cache.swap(record, self._cached_runner(key, upgraded), compiled=upgraded)  # the hot path's next call runs the fused plan
        else:
            return False
        return True


def heat(record: CacheEntry, entry: CompiledEntry, started: float, first_call_s: float) -> Callable[[], float | None]:
    """How long the calls of `entry` have taken so far, estimated without timing them (the cached
    path only bumps its slot's hit counter): its first call's time (which `started`) for each call,
    but never more than the time since that call started (a first call slower than the later
    ones, as a model's often is, would make two calls hot); None once the record runs another
    program (evicted, set aside, replanned) or split."""

    def heat() -> float | None:
        slot = record.slot
        if record.compiled is not entry or record.split or slot is None:
            return None
        return min((1 + slot[1]) * first_call_s, time.perf_counter() - started)

    return heat


def writes_held(compilation: Compilation) -> bool:
    """Whether the program writes a tensor an argument object holds (a static KV cache): the upgrade
    times the program on example inputs, but such a tensor is read from the object itself, so it is not upgraded."""
    return compilation.writes_inputs and any(b.path[0] == "state" for b in compilation.bindings)
