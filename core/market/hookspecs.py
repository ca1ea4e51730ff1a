"""The plugin contract: the hooks an executor package implements.

A plugin is a module (or any object) with functions marked `@hookimpl`, found through
the entry-point group `squall`:

    [project.entry-points.squall]
    my_kernels = "squall_my_kernels"

Hooks are called once each, when the marketplace is built (the first compilation, or
`squall executors`), never while planning: hooks register, dictionary lookups plan.
Calls are keyword-only, so an implementation may accept any subset of the arguments
a spec names, and a spec can grow an argument without breaking existing plugins.
Each plugin's implementation is called on its own: one that raises (any `BaseException`
but `KeyboardInterrupt`, so a `sys.exit()` too) is recorded in the marketplace's load
errors and skipped, and the others still register. A plugin
with an `@hookimpl` that matches no spec here (a misspelled hook name) is recorded as
a load error and left out, rather than silently never called.

Plugins import `hookimpl` (and everything else they use) from `squall.extend`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .executor import Executor
    from .operations import OperationRegistry

__all__ = ["hookspec", "hookimpl", "squall_register_operations", "squall_register_executors"]

hookspec = pluggy.HookspecMarker("squall")
hookimpl = pluggy.HookimplMarker("squall")


@hookspec
def squall_register_operations(operations: OperationRegistry) -> None:
    """Add new operations (custom ops) that user code can call and executors can implement.

    Called once per marketplace, for every plugin, before any `squall_register_executors`,
    so every executor may register implementations for every plugin's operations.
    Define an operation with `operations.define(id, meta=..., reference=...)`: `meta`
    receives proxies and returns output proxies; `reference`, a torch function with the
    same signature, runs it eagerly outside squall and is what the built-in torch
    executor uses when no other executor takes it. The return value is ignored.
    """


@hookspec
def squall_register_executors(operations: OperationRegistry) -> list[Executor]:
    """Return the executors this plugin puts on the market.

    Called once per marketplace, for every plugin, after all operations are defined
    (`operations` is the same registry `squall_register_operations` filled: look up
    custom-op symbols with `operations.get(id)`). Results from all plugins are
    collected; executor names must be unique across plugins (a duplicate is recorded
    as a load error and skipped), and anything that is not an `Executor`, or an executor
    that breaks the contract (a name that is not an identifier, a `default_rank` that is
    not an int, a missing method: `squall.market.plugins.executor_problem`), is recorded with this
    plugin and its distribution and skipped alone. An executor's `is_available()` is asked later, when priority lists
    are resolved, so return executors even if their library or device is missing
    here: users then see why they are unavailable.
    """
