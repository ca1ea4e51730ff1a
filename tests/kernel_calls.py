"""Counting the aten ops a step calls, by name, and which of them launch kernels: shared by
tests/test_kernel_counts.py and bench/kernel_counts.py."""
from __future__ import annotations

import collections

from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["LAUNCHES_NOTHING", "AtenCalls", "launching"]

# aten ops that make a view or read metadata: no kernel on any device
LAUNCHES_NOTHING = frozenset({
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "as_strided", "slice", "select",
    "unsqueeze", "squeeze", "detach", "alias", "split", "split_with_sizes", "unbind", "chunk", "narrow",
    "view_as_real", "view_as_complex", "_reshape_alias", "unfold", "diagonal", "numpy_T", "mT", "lift_fresh",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
    "empty", "empty_like", "empty_strided", "new_empty_strided",  # an allocation, no kernel
})


class AtenCalls(TorchDispatchMode):
    """Counts the aten ops called while it is active, by name (`aten.addmm`, overloads merged)."""

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func._schema.name.split("::")[-1]] += 1
        return func(*args, **(kwargs or {}))


def launching(calls: collections.Counter) -> collections.Counter:
    """`calls` less the ops that launch no kernel."""
    return collections.Counter({name: n for name, n in calls.items() if name not in LAUNCHES_NOTHING})
