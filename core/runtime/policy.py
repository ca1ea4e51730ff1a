"""The policy: what a failed check leads to. One table, one function, no mechanism.

The runner (`squall.runtime.runner`) runs an entry's one check and its program; when a guard
fails it reports a `GuardFailure` (kind, label, site) and asks `decide` what to do. Executing
the answer (compiling, swapping, splitting) is the jitted function's; deciding it is only here:

| failed                                   | action                                             |
|------------------------------------------|----------------------------------------------------|
| a "check" guard (state, or a new kind),  | SET_ASIDE: set the entry aside (it comes back when |
|   on an entry's later call               |   its guards hold again) and compile for this call |
|   ... on the very call it was traced for | EAGER_ONCE: the state changed while compiling: run |
|                                          |   this call eagerly, the next compiles again       |
|   ... more than SPECULATION_LIMIT times  | SPLIT: a module's forward runs eagerly with its    |
|   for one label, in a module             |   submodules compiled (squall.runtime.split)               |
| "alias": storages shared, none the same  | RUN: a false alarm, the entry's program runs       |
|   the same tensor twice                  | NEW_VARIANT: traced with one proxy for both        |
|   overlapping views                      | SPLIT (a module) or EAGER (a function)             |
| "value"/"number" (a guard in the program)| NEW_VARIANT, after every variant held was tried    |
|   more than SPECULATION_LIMIT variants   | READ_AT_RUN_TIME for an `item()` read, once;       |
|   for one site                           |   then SPLIT (a module) or EAGER (a function)      |
| an executor's fault in a checked call    | REPLAN without it where it failed; everywhere if   |
|                                          |   it failed there again; RAISE if it failed even so|
"""
from __future__ import annotations

import enum

from ..frontend.speculation import RUNTIME_READS, SPECULATION_LIMIT
from ..guard_set import ALIAS, NUMBER, SHAPE, VALUE, GuardFailure

__all__ = ["Action", "decide", "decide_fault", "SPECULATION_LIMIT", "RUNTIME_READS"]

# SPECULATION_LIMIT: compilations one guard site (or state label) may cause in one cache entry
# before its value counts as dynamic; RUNTIME_READS: the reads that may become run-time numbers
# (squall.frontend.speculation, where tracing reads them)


class Action(enum.Enum):
    """What the jitted function does with a call that failed an entry's check."""

    RUN = "run the entry's program: the check's alarm was false"
    NEW_VARIANT = "compile another variant of the entry for this call"
    SET_ASIDE = "set the entry aside and compile for this call"
    EAGER_ONCE = "run this call eagerly and set the entry aside"
    READ_AT_RUN_TIME = "compile a variant that reads the value at run time"
    SPLIT = "run the module's forward eagerly, each submodule it calls compiled"
    EAGER = "run the original function eagerly"
    REPLAN = "compile the entry again without the executor that failed"
    RAISE = "raise the executor's fault"


def decide(
    failure: GuardFailure,
    *,
    module: bool,
    first_call: bool = False,
    compiles: int = 0,
    dynamic: bool = False,
    alias: str | None = None,
) -> Action:
    """What a call that failed `failure` leads to.

    `module`: the jitted callable is an nn.Module (it can split); `first_call`: the call the
    entry was traced for; `compiles`: how many compilations this guard's label or site has
    caused in the entry, this one included; `dynamic`: the site's read is already made at run
    time; `alias` (an "alias" failure): "same", "overlapping", or None when no two tensors
    share memory after all.
    """
    if failure.kind == ALIAS:
        if alias is None:
            return Action.RUN
        if alias == "same":
            return Action.NEW_VARIANT
        return _stop_compiling(module)
    if failure.kind in (VALUE, NUMBER, SHAPE):
        if compiles > SPECULATION_LIMIT and failure.read in RUNTIME_READS and not dynamic:
            return Action.READ_AT_RUN_TIME
        return _stop_compiling(module) if compiles > SPECULATION_LIMIT else Action.NEW_VARIANT
    # state, and any kind checked before the program that has no rule of its own
    if first_call:
        return Action.EAGER_ONCE
    if module and compiles > SPECULATION_LIMIT:
        return Action.SPLIT
    return Action.SET_ASIDE


def decide_fault(excluded_here: bool, excluded_everywhere: bool) -> Action:
    """What an executor's fault in a checked call leads to: a replan without it (where it failed,
    or for the whole entry if it was kept out there already), or, if even that failed, raising."""
    return Action.RAISE if excluded_here and excluded_everywhere else Action.REPLAN


def _stop_compiling(module: bool) -> Action:
    return Action.SPLIT if module else Action.EAGER
