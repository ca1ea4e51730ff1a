"""squall-apex-xentropy: torch.nn.functional.cross_entropy on NVIDIA apex's fused kernel.

The executor `apex_xentropy` takes cross_entropy calls on CUDA (2-D logits, int64
class indices, no class weights) and rewrites each into its own operations:
`apex_xentropy.xentropy_forward` (apex's kernel, ignored rows zeroed) and
`apex_xentropy.reduce_loss`. `apex_xentropy.xentropy_backward` is declared for
gradient work. Without apex's `xentropy_cuda` extension or a CUDA device it is
listed as unavailable, with the reason, and the planner passes it over.
"""
from __future__ import annotations

from squall.extend import OperatorExecutor, hookimpl

from squall_apex_xentropy.executor import (
    EXTENSION,
    KERNEL_DTYPES,
    availability_from,
    cross_entropy_checker,
    make_executor,
)

__all__ = ["make_executor", "cross_entropy_checker", "availability_from", "EXTENSION", "KERNEL_DTYPES", "squall_register_executors"]


@hookimpl
def squall_register_executors() -> list[OperatorExecutor]:
    """The apex_xentropy executor (returned even where apex or CUDA is missing)."""
    return [make_executor()]
