"""squall-nvfuser: fuses regions of prims on CUDA tensors into nvFuser kernels.

Installed, it puts the fusion executor `nvfuser` on squall's market through the entry
point `nvfuser = "squall_nvfuser"` (group `squall`). Without nvFuser or a CUDA device it is
still listed, as unavailable with the reason, and the planner passes it over.
See README.md for what it covers and what has been executed.
"""
from __future__ import annotations

from squall.extend import hookimpl
from squall_nvfuser.executor import NvFuserExecutor

__all__ = ["NvFuserExecutor", "make_executor", "squall_register_executors"]
__version__ = "0.1.0"


def make_executor(*, judge_in_context: bool = True) -> NvFuserExecutor:
    """A fresh nvFuser executor (tests build their own; the hook builds the market's);
    `judge_in_context=False` keeps every region it compiles, untimed."""
    return NvFuserExecutor(judge_in_context=judge_in_context)


@hookimpl
def squall_register_executors() -> list[NvFuserExecutor]:
    """The nvFuser fusion executor, available or not (`squall executors` says why not)."""
    return [make_executor()]
