"""The variants of one cache entry whose program has value guards (`squall.frontend.speculation`).

A program that branches on a tensor's value was traced for the value of the call it was
compiled on; the generated code checks the value again (a `squall.guard` call) and raises
`GuardFailed` where it differs. `Variants` is what the entry's slot holds then: the compiled
variants of the signature, most recently used first. A failed guard tries the other variants;
where none holds it reports the failure (`GuardFailure`: kind, site, what was read) and asks
the policy (`squall.runtime.policy.decide`) whether to compile a new variant, to read the
value at run time in the variants compiled from then on, or to stop compiling (the host's
`stop`: a module splits, a function runs eagerly).

A guard fails midway through a program, after the random numbers drawn before it (a dropout
before the branch on a mask): whatever runs the call then (another variant, a new one, eager)
draws them again from the state torch's generators had when the call began, as eager draws
them once, so the call's draws and every later one are eager's.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..frontend.random_state import restore_torch_generators, torch_generators
from ..frontend.speculation import dynamic_reads
from ..guard_set import NUMBER, SHAPE, VALUE, GuardFailure
from ..guards import GuardFailed
from .entry import CompiledEntry
from .policy import Action, decide

__all__ = ["Variants", "failure_of"]


def failure_of(failed: GuardFailed) -> GuardFailure:
    """A guard the program raised, in the form every check reports."""
    if failed.how == "shape":
        return GuardFailure(SHAPE, "the shape relations the trace relied on", failed.site, "one does not hold for this call", failed.how)
    kind = NUMBER if failed.on_number else VALUE
    return GuardFailure(kind, f"the value read at {failed.site} ({failed.how})", failed.site,
                        f"was {failed.got!r}, the trace assumed {failed.expected!r}", failed.how)


class Variants:
    """What the cache holds for an entry whose trace has guards: its compiled variants.

    `compile_variant(args, kwargs)` (args as the runner gets them) compiles one for a call and
    gives `[runner, CompiledEntry]`, or `[runner, None]` where the call cannot be compiled (it
    enables torch.autocast, or writes Python state squall cannot replay): that runner, eager,
    then runs every call; `stop(failure, action, args, kwargs)` gives the runner
    that takes over once the policy says to stop compiling (SPLIT or EAGER); `used(entry)` is
    told which variant ran; `failed()` counts each failed guard.
    """

    def __init__(
        self,
        variant: list,
        *,
        module: bool,
        compile_variant: Callable[[tuple, dict], list],
        stop: Callable[[GuardFailure, Action, tuple, dict], Callable],
        used: Callable[[CompiledEntry], None],
        failed: Callable[[], None],
    ):
        self.module = module
        self.compile_variant = compile_variant
        self.stop = stop
        self.used = used
        self.failed = failed
        # [runner, compiled entry] per variant, most recently used first; a checked runner
        # replaces itself in its list with the plain one after a clean call
        self.variants: list[list] = [variant]
        self.compiles_at: dict[str, int] = {}  # guard site -> variants it made this entry compile
        self.dynamic_sites: frozenset[str] = frozenset()  # value reads made at run time in new variants
        self.eager: Callable | None = None
        # whether a variant draws random numbers: then each call notes the generators' state first
        self.draws = _draws(variant)

    def __call__(self, *args, **kwargs):
        if self.eager is not None:
            return self.eager(*args, **kwargs)
        generators = torch_generators() if self.draws else None
        try:
            return self.variants[0][0](*args, **kwargs)
        except GuardFailed as failure:
            return self._recover(failure, args, kwargs, generators)

    def _recover(self, failed: GuardFailed, args: tuple, kwargs: dict, generators: tuple | None) -> Any:
        """Run a variant whose guards pass; else do what the policy says. Each run starts from
        the generators' state at the call (`generators`), drawing what the failed runs drew."""

        def run(runner: Callable) -> Any:
            if generators is not None:
                restore_torch_generators(generators)
            return runner(*args, **kwargs)

        self.failed()
        tried = {id(self.variants[0])}
        while True:
            for i, variant in enumerate(self.variants):
                if id(variant) in tried:
                    continue
                tried.add(id(variant))
                try:
                    out = run(variant[0])
                except GuardFailed as again:
                    failed = again
                    continue
                self.variants.insert(0, self.variants.pop(i))
                self.used(variant[1])
                return out
            failure = failure_of(failed)
            site = failure.site
            count = self.compiles_at[site] = self.compiles_at.get(site, 0) + 1
            action = decide(failure, module=self.module, compiles=count, dynamic=site in self.dynamic_sites)
            if action is Action.READ_AT_RUN_TIME:
                # a number read from a tensor that changes at every call: read it at run time
                self.dynamic_sites |= {site}
                self.compiles_at[site] = 0
            elif action is not Action.NEW_VARIANT:
                self.eager = self.stop(failure, action, args, kwargs)
                self.variants = []
                return run(self.eager)
            with dynamic_reads(self.dynamic_sites):
                variant = self.compile_variant(args, kwargs)
            if variant[1] is None:
                self.eager, self.variants = variant[0], []
                return run(self.eager)
            self.variants.insert(0, variant)
            self.draws = self.draws or _draws(variant)
            tried.add(id(variant))
            try:
                return run(variant[0])
            except GuardFailed as again:  # a value that differs between two reads (a random draw)
                failed = again


def _draws(variant: list) -> bool:
    entry: CompiledEntry | None = variant[1]
    return entry is not None and entry.compilation.draws_random_numbers
