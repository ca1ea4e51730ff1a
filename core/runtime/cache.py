"""The entries of one jitted function: the dict the hot path reads, the records behind it, one lock.

The hot path reads `slots` (key -> `[runner, hits]`) and nothing else: one key, one dict
lookup, one call. Behind each slot is its `CacheEntry` record (`entries`), which also outlives
the slot where there is something to remember (entries set aside, executors kept out).

`swap` is the one place an entry's runner (and the program it runs) changes, under the lock:
the first checked call handing over to the plain program, a replan after an executor's fault,
a background upgrade, a split.

The cache is bounded (`size` entries) and evicts the least recently used entry when a new one
is compiled into a full cache. Recency is read off per-entry hit counters, which the hot path
increments (no global counter), so bounding the cache adds no work to a hit: at each
compilation an entry whose counter moved since the last one is stamped as used in that
interval, and the victim is the entry with the oldest stamp (the oldest inserted among ties).
Recency is thus exact to the resolution of one compilation, which is all eviction looks at.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import tiers
from .entry import CacheEntry, CompiledEntry
from .entry_point import forget_recent

__all__ = ["EntryCache"]


class EntryCache:
    """The cache entries of one jitted function (`size`: the most it holds, None: no limit)."""

    def __init__(self, size: int | None):
        self.size = size
        self.slots: dict[Any, list] = {}  # key -> [runner, hits]: the entry point's dict
        self.entries: dict[Any, CacheEntry] = {}  # key -> its record, cached or remembered
        # the slot the entry point's fast paths hit last (positional tensors; keyword tensors), and
        # their C metadata check per key (squall.runtime.entry_point)
        self.last: list = [None, None]
        self.fast_checks: dict[Any, Callable] = {}
        # held while compiling (threads that miss on one signature compile it once) and around every swap
        self.lock = threading.RLock()
        self.evictions = 0
        self._compilations = 0
        self._evicted_hits = 0

    def entry(self, key: Any) -> CacheEntry:
        """The record of `key`, made empty if there is none."""
        found = self.entries.get(key)
        if found is None:
            found = self.entries[key] = CacheEntry(key)
        return found

    def compiled(self, key: Any) -> CompiledEntry | None:
        """The program entry `key` runs now (None: not cached)."""
        found = self.entries.get(key)
        return found.compiled if found is not None and found.slot is not None else None

    def insert(self, key: Any, compiled: CompiledEntry, runner_for: Callable[[CacheEntry], Callable]) -> CacheEntry:
        """Cache `compiled` under `key` (its runner made by `runner_for(record)`), first evicting
        the least recently used entry if the cache is full.

        Runs once per compilation, never on a hit: it looks at every entry's hit counter (at
        most `size` of them, next to a compilation's milliseconds) to learn which were used
        since the last compilation."""
        with self.lock:
            self._compilations += 1
            now = self._compilations
            for k, (_, hits) in self.slots.items():
                record = self.entries[k]
                if hits != record.recency[0]:
                    record.recency = (hits, now)
            while self.size is not None and len(self.slots) >= self.size:
                # dicts keep insertion order, so min() breaks ties toward the oldest entry
                victim = min(self.slots, key=lambda k: self.entries[k].recency[1])
                self.uncache(victim)
                record = self.entries[victim]
                record.compiled, record.upgrade = None, None
                self.evictions += 1
                self._drop_if_idle(victim)
            record = self.entry(key)
            record.compiled, record.split, record.waiting, record.recency = compiled, False, False, (0, now)
            record.slot = [None, 0]
            record.slot[0] = runner_for(record)
            self.slots[key] = record.slot
            return record

    def swap(self, record: CacheEntry | None, runner: Callable, *, compiled: CompiledEntry | None = None,
             slot: list | None = None, replacing: Any = None) -> bool:
        """Make `runner` what the entry's slot (or `slot`, a variant's `[runner, entry]`) runs,
        and `compiled` the entry's program if given; only where the slot still runs `replacing`
        when that is given. False (nothing changed) where the slot is gone or was swapped since
        (`record` None: the entry was evicted and forgotten)."""
        with self.lock:
            target = slot if slot is not None else record.slot if record is not None else None
            if compiled is not None and record is not None:
                record.compiled = compiled
            if target is None or (replacing is not None and target[0] is not replacing):
                return False
            target[0] = runner
            return True

    def uncache(self, key: Any) -> None:
        """Take entry `key` out of the hot path's dict (and the fast path's memory of it)."""
        with self.lock:
            slot = self.slots.pop(key)
            forget_recent(self.last, self.fast_checks, key, slot)
            record = self.entries[key]
            if not record.waiting:
                self._evicted_hits += slot[1]
            record.slot, record.waiting = None, False

    def set_aside(self, key: Any, keep: int) -> None:
        """Entry `key`'s state changed: it leaves the hot path and waits, newest first (at most
        `keep` of them), for its state to come back."""
        with self.lock:
            record = self.entries.get(key)
            if record is None or record.slot is None or record.compiled is None:
                return
            self.uncache(key)
            record.set_aside.insert(0, record.compiled)
            del record.set_aside[keep:]
            record.compiled = None

    def clear(self) -> None:
        """Drop every compiled program, cached or set aside (the module's layout changed); what
        is remembered of each key besides (executors kept out, upgrades) stays."""
        with self.lock:
            for k in list(self.slots):
                self.uncache(k)
            for k, record in list(self.entries.items()):
                record.compiled, record.recency = None, (0, 0)
                record.set_aside.clear()
                self._drop_if_idle(k)

    def hits(self) -> int:
        """Calls served from the cache, evicted entries' included (not the eager calls of a
        signature waiting for its compile: squall.runtime.ski_rental)."""
        return self._evicted_hits + sum(hits for key, (_, hits) in self.slots.items() if not self.entries[key].waiting)

    def upgrades(self) -> dict[Any, tiers.Upgrade]:
        """key -> the background upgrade of its entry (squall.runtime.tiers), oldest entry first;
        (key, "variant", i) -> the upgrade of the i-th variant compiled after a value guard failed."""
        found: dict[Any, tiers.Upgrade] = {}
        for k, e in self.entries.items():
            if e.upgrade is not None:
                found[k] = e.upgrade
            found.update(((k, "variant", i), u) for i, u in enumerate(e.variant_upgrades))
        return found

    def _drop_if_idle(self, key: Any) -> None:
        if self.entries[key].idle:
            del self.entries[key]
