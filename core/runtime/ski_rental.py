"""The ski rental of a 0/1 variant: a new signature that differs from a symbolic entry's only by
a size of 0 or 1 (a batch of 1 in a stream of batch sizes; 0 and 1 stay keyed apart), in a
function whose sizes vary (they changed from call to call under the "auto" policy, or
`dynamic=True` said they would), runs eagerly until its eager calls have taken as much CPU time
as the function's last compile, then compiles. (A size of 1 that the symbolic entry's program
serves, `dynamic_dims.admits_ones`, runs that program instead and never waits.) A function's
first call always compiles (there
is no symbolic entry yet), and so does a step of a stateful loop (a call given a KV cache),
but for the step whose cache holds a tensor one long beside a longer one of its kind (an
encoder-decoder's after its first token, `waits_one_long`): it comes once per loop, and is
rented the same way. A stream that sends few such calls never pays for their compile; one that
sends many pays at most twice what compiling at once would have cost (bench/length_stream.py,
bench/encoder_decoder.py).

Each eager call is charged whole. Charging only what a compiled call would have saved (the
eager call less the compiled one) would compile later and pay less, but there is no cheap
estimate of the compiled call: the hot path counts calls and times none, the one compiled call
that is timed is an entry's first (its warm-up included), and it ran another batch size, so
the difference could come out at zero or below and the variant would never compile.

CPU time (`time.thread_time`) on both sides: the machine's load does not inflate one more than
the other.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .cache import EntryCache
from .dynamic_dims import DynamicDims, holds_state, one_long, zero_one_variant
from .stats import CacheStats

__all__ = ["SkiRental"]


class SkiRental:
    """Which new signatures of one jitted function run eagerly while they wait for their
    compile, and what each has spent so far."""

    def __init__(self, cache: EntryCache, stats: CacheStats, dims: DynamicDims):
        self.cache = cache
        self.stats = stats
        self.dims = dims
        self.last_compile_cpu_s: float | None = None  # what the function's last compile took
        self.spent: dict[Any, float] = {}  # key -> CPU time its eager calls took while it waited

    def compiled(self, key: Any, cpu_s: float) -> None:
        """Signature `key` was compiled, in `cpu_s` seconds of CPU time: the next rental is
        measured against this compile, and what `key` spent is forgotten."""
        self.last_compile_cpu_s = cpu_s
        self.spent.pop(key, None)

    def waits(self, key: Any, args: tuple, kwargs: dict) -> bool:
        """Whether this call (`args`, `kwargs`) of the new signature `key` runs eagerly instead of
        compiling: it is a 0/1 variant of a cached entry with symbolic sizes, in a function whose
        sizes vary (they changed from call to call, or `dynamic=True` said they would), its eager
        calls have not yet taken as much CPU time as the last compile, and it is not a step of a
        stateful loop (a call given a KV cache: a decoding step is called at every token, so
        renting would only put its compile off)."""
        if not (self.dims.sizes_vary and self.dims.zero_one_eagerly) or self.last_compile_cpu_s is None:
            return False
        if self.spent.get(key, 0.0) >= self.last_compile_cpu_s:
            return False
        return zero_one_variant(key, self.cache.slots) and not any(holds_state(a) for a in (*args, *kwargs.values()))

    def waits_one_long(self, key: Any, args: tuple, kwargs: dict) -> bool:
        """Whether this call, a step of a stateful loop that no variant of its signature `key`
        serves, runs eagerly instead of compiling: its state holds a tensor one long beside a
        longer one of its kind (`one_long`: an encoder-decoder's cache after its first token),
        a step that comes once per loop (at the next, that length is 2 or more, which a symbolic
        variant serves), and its eager calls have not yet taken as much CPU time as the last
        compile. A `generate` then compiles twice, the first step and the symbolic one; the
        step of one token compiles once it has cost a compile."""
        if not self.dims.zero_one_eagerly or self.last_compile_cpu_s is None or self.dims.mode is False:
            return False
        if self.spent.get(("one long", key), 0.0) >= self.last_compile_cpu_s:
            return False
        return any(one_long(a) for a in (*args, *kwargs.values()))

    def charged(self, key: Any, eager: Callable) -> Callable:
        """A runner for one call that `waits_one_long`: it calls `eager` and charges the CPU
        time that took to `key`'s one-long steps (not cached: each such call is a miss of
        the entry, which its variants' state checks decide)."""

        return self._charging(("one long", key), eager, lambda spent: None)

    def runner(self, key: Any, eager: Callable) -> Callable:
        """The runner of a signature that waits (`waits`): it calls `eager` and adds the CPU time
        that took to what `key` has spent. It is cached under `key` like a compiled entry's, so
        the calls that wait take the hot path, not a miss's (reading the module's layout, the
        key's dimensions: 0.4 ms on DistilBERT), and count in `eager_before_compile`, not in
        the cache's hits; once `key` has spent a compile's worth, it leaves the cache, and the
        next call compiles."""
        slot = [None, 0]

        def paid(spent: float) -> None:
            if spent >= self.last_compile_cpu_s and self.cache.slots.get(key) is slot:
                self.cache.uncache(key)

        slot[0] = run_eagerly = self._charging(key, eager, paid)
        record = self.cache.entry(key)
        record.waiting = True
        record.slot = self.cache.slots[key] = slot
        return run_eagerly

    def _charging(self, account: Any, eager: Callable, then: Callable[[float], None]) -> Callable:
        """`eager`, adding the CPU time each call takes to what `account` has spent, then calling
        `then` with the total (under the cache's lock: concurrent callers add up, none lost)."""

        def run_eagerly(*args, **kwargs):
            start = time.thread_time()
            try:
                return eager(*args, **kwargs)
            finally:
                took = time.thread_time() - start
                with self.cache.lock:
                    self.stats.eager_before_compile += 1
                    spent = self.spent[account] = self.spent.get(account, 0.0) + took
                    then(spent)

        return run_eagerly
