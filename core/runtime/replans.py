"""Replans: an executor's fault in a checked call (squall.compiler.checking) compiles the entry
again without that executor, for the operations it failed on (or, failing again where it was
kept out, for the whole entry); the call that met the fault runs the new plan, and the cache
holds its runner from then on (`EntryCache.swap`). `squall.runtime.policy.decide_fault` says
when a fault raises instead.
"""
from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..compiler.checking import ExecutorFault
from ..compiler.pipeline import compile_program
from ..ltorch.autocast import autocast_entered
from ..ltorch.base import SquallWarning
from .entry import CompiledEntry
from .exclusions import excluding, ops_to_exclude
from .policy import Action, decide_fault
from .runner import checked_first

__all__ = ["Replans"]


class Replans:
    """How `squall.runtime.calls.Runtime` (whose base this is) replans an entry after an
    executor's fault; it reads the runtime's `cache`, `fn`, `module`, `executors`, `strict`,
    `stats`, `_numbers`, `_dims`, `_skip` and `_cached_runner`, and sets `last_entry`."""

    def _replanned_program(self, key: Any, fault: ExecutorFault, args: tuple, kwargs: dict) -> Callable:
        """What the call that met `fault` runs: the entry's new plan (`_replan`) as a program, not
        as its runner. The faulted program was called by the entry's runner, which has checked
        this call's guards and replays the program's writes from its result; the new runner would
        do both again (and take the runner's lock again) and return the bare result, which that
        runner would then unpack as a program's. Later calls get the new runner from the cache."""
        compilation = self._replan(key, fault, args, kwargs).compilation
        if compilation.checked is None:  # (with $SQUALL_CHECK=never no call is checked, so none faults)
            return compilation.fn
        return checked_first(compilation.checked.fn, skip=self._skip, always=True, on_fault=functools.partial(self._replanned_program, key),
                             arm_backward=None, hand_over=lambda: None)

    def _replan(self, key: Any, fault: ExecutorFault, args: tuple, kwargs: dict) -> CompiledEntry:
        """Compile the entry `key` again without the executor that failed, for the operations it
        failed on; warn; put its runner (checked again, for the executors left) in the cache;
        return the new entry."""
        with self.cache.lock:
            record = self.cache.entry(key)
            exclusions = record.exclusions
            ops = ops_to_exclude(record.compiled, fault)
            here = (fault.executor, ops) in exclusions
            if here:
                ops = ()  # failed again where it was kept out: keep it out of the whole entry
            if decide_fault(here, (fault.executor, ops) in exclusions) is Action.RAISE:
                raise fault
            exclusions.append((fault.executor, ops))
            what = f"for {', '.join(ops)}" if ops else "for every operation of this call"
            warnings.warn(
                f"squall: {fault}. The call is compiled again without {fault.executor!r} {what} "
                "and its result comes from the new plan; the executor's package has a bug to report.",
                SquallWarning,
                stacklevel=5,
            )
            start = time.perf_counter()
            with autocast_entered(self.autocast_state):  # the entry's autocast state (a backward's replan runs outside it)
                compilation = compile_program(self.fn, args, kwargs, executors=excluding(self.executors, exclusions), module=self.module,
                                              strict=self.strict, dynamic=frozenset(self._numbers.paths), dims=dict(self._dims.dims))
            entry = CompiledEntry(compilation, time.perf_counter() - start)
            self.last_entry = entry
            self.stats.replans += 1
            self.cache.swap(record, self._cached_runner(key, entry), compiled=entry)
            return entry

    def _replan_after_backward(self, key: Any, fault: ExecutorFault, args: tuple, kwargs: dict) -> None:
        """A fault in the checked backward of `key`'s first call: that backward was computed on
        torch (squall.compiler.pipeline); later calls get a plan without the executor there."""
        record = self.cache.entries.get(key)
        if record is not None and record.compiled is not None:
            record.compiled.compilation.on_backward_fault = None  # the replan holds no reference to the first call's inputs
        with torch.enable_grad():  # a backward runs in no-grad mode; the entry was compiled for training
            self._replan(key, fault, args, kwargs)
