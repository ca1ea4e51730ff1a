"""squall: compile PyTorch programs onto a marketplace of executors.

    import squall
    fast = squall.jit(model)          # a function or an nn.Module
    fast(x)                           # traced, planned and generated on the first call
    squall.wait_for_upgrades(fast)    # fusion regions compile in the background; wait for them
    squall.last_traces(fast)          # as traced, as planned, as executed
    squall.executors()                # what is installed: availability, rank, ops claimed
    squall.set_logs("plan,fusion")    # compile records, live, through logging (or SQUALL_LOGS=...)

Plugin authors import from `squall.extend`.
"""
from __future__ import annotations

from . import extend
from .compiler.planner import PlanningError
from .ltorch.base import DataDependentError, SquallWarning
from .runtime.jit import JittedFunction, JittedModule, jit, last_traces, upgrades, wait_for_upgrades
from .runtime.logs import set_logs
from .tools.explain import executors, explain

__version__ = "0.1.0"

__all__ = [
    "jit",
    "last_traces",
    "wait_for_upgrades",
    "upgrades",
    "extend",
    "explain",
    "executors",
    "JittedFunction",
    "JittedModule",
    "SquallWarning",
    "DataDependentError",
    "PlanningError",
    "set_logs",
]
