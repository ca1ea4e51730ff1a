"""The runner: what an entry's slot calls. It runs the entry's one check, then its program.

`guarded(guards, program, rejected)` puts `program` behind the guard set's one generated check
(`squall.guard_set`): a call the check rejects is explained — a `GuardFailure` saying which
guard failed, of what kind, where — and handed to `rejected(failure, args, kwargs)`, which
asks the policy and acts. The runner decides nothing.

`checked_first(...)` is the program while its non-torch calls are to be checked
(`squall.compiler.checking`): an executor's fault goes to `on_fault`, and after a clean call (unless
$SQUALL_CHECK=always) `hand_over` swaps the plain program in.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..compiler.checking import ExecutorFault
from ..frontend.random_state import restore_torch_generators, torch_generators
from ..guard_set import STATE, GuardFailure, GuardSet

__all__ = ["guarded", "holding", "checked_first", "UNEXPLAINED"]

# a check that failed and then held when explained (another thread changed the state back)
UNEXPLAINED = GuardFailure(STATE, "the state the program read")


def guarded(guards: GuardSet, program: Callable, rejected: Callable[[GuardFailure, tuple, dict], Any]) -> Callable:
    """`program` behind `guards`' one check; a rejected call goes to `rejected` with what failed."""

    def failed(args: tuple, kwargs: dict) -> Any:
        return rejected(guards.explain(args, kwargs) or UNEXPLAINED, args, kwargs)

    return guards.runner(program, failed)


def holding(lock: threading.Lock, fn: Callable) -> Callable:
    """`fn`, called while holding `lock` (a program that writes module state writes it as one step)."""

    def locked(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    locked.__wrapped__ = fn
    return locked


def checked_first(
    checked: Callable,
    *,
    skip: int,
    always: bool,
    on_fault: Callable[[ExecutorFault, tuple, dict], Callable],
    arm_backward: Callable[[tuple, dict], None] | None,
    hand_over: Callable[[], None],
) -> Callable:
    """The checked program (`checked`, taking the runner's arguments; the first `skip` of them
    are not the user's). A fault in it: the call runs what `on_fault(fault, user_args, kwargs)`
    gives, a program in `checked`'s form (the runner's arguments in, the program's result out). `arm_backward(user_args, kwargs)`, called before each call of a differentiated
    program, lets a fault in its checked backward (heard after the call returns) be acted on.
    After a clean call, `hand_over()` (unless `always`)."""

    def checked_call(*args, **kwargs):
        user_args = args[skip:]
        if arm_backward is not None:
            arm_backward(user_args, kwargs)
        generators = torch_generators()
        try:
            out = checked(*args, **kwargs)
        except ExecutorFault as fault:
            program = on_fault(fault, user_args, kwargs)
            # the program that runs the call instead draws what the faulted run drew before it
            # stopped, from the same state, as eager draws them once (squall.runtime.variants)
            restore_torch_generators(generators)
            return program(*args, **kwargs)
        if not always:
            hand_over()
        return out

    return checked_call
