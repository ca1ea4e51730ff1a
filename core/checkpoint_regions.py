"""Which `torch.utils.checkpoint` call the program is running, while it is traced.

A non-reentrant checkpoint (the default of transformers' and timm's gradient checkpointing) saves
its function's inputs and recomputes the rest in the backward: a user turns it on to trade compute
for memory. The tracer notes the call each top-level operation was recorded in
(`BoundSymbol.checkpoint_region`), and squall's gradient transform recomputes those values in the
backward as eager does (squall.compiler.gradients)."""
from __future__ import annotations

import itertools
import weakref

import torch

__all__ = ["checkpoint_region", "new_checkpoint_region"]

_CHECKPOINT_REGIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a checkpoint call's pack hook -> its number


def checkpoint_region() -> int:
    """The non-reentrant `torch.utils.checkpoint` call running now, as a number of its own (0 where
    none runs, or where grad mode is off inside it: eager then saves nothing to recompute). Such a
    call pushes saved-tensor hooks of its own (`_checkpoint_hook`), one pair per call, for as long
    as its function runs; a hook pair pushed inside it (the user's own) hides it: 0, values saved."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)
    if hooks is None or not torch.is_grad_enabled():
        return 0
    pack = hooks[0]
    if getattr(pack, "__module__", None) != "torch.utils.checkpoint" or not getattr(pack, "__qualname__", "").startswith("_checkpoint_hook."):
        return 0
    region = _CHECKPOINT_REGIONS.get(pack)
    if region is None:
        region = _CHECKPOINT_REGIONS[pack] = new_checkpoint_region()
    return region


def new_checkpoint_region() -> int:
    """A region number no call has had (a module replay's copy of a checkpointed call: squall.replays)."""
    return next(_REGION_NUMBERS)


_REGION_NUMBERS = itertools.count(1)
