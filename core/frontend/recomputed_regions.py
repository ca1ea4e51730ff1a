"""Code eager runs twice: the function given to `torch.utils.checkpoint.checkpoint` (non-reentrant,
the default of transformers' and timm's gradient checkpointing) runs in the forward and again in
the backward, where its saved-tensor hooks recompute what it did not keep. squall differentiates
the traced program itself, so its compiled program runs that function once. A value it computes
is the same either way; state it writes is not: batch norm's running statistics in training
mode, a counter on a module. Such a write in a checkpointed function runs the call eagerly."""
from __future__ import annotations

import inspect

import torch.utils.checkpoint

from ..ltorch.unmodelled import UnmodelledMode
from ..symbol import running_inside

__all__ = ["refuse_recomputed_write"]

_CHECKPOINT = inspect.unwrap(torch.utils.checkpoint.checkpoint).__code__


def _inside_checkpoint() -> bool:
    """Whether the program is now running a checkpointed function with grad mode on (under
    no_grad eager saves nothing, so nothing is recomputed)."""
    if not torch.is_grad_enabled():
        return False
    return running_inside(_CHECKPOINT)


def refuse_recomputed_write(what: str) -> None:
    """Raise UnmodelledMode where the program writes `what` (state that outlives the call) inside
    a checkpointed function: eager's backward writes it a second time."""
    if _inside_checkpoint():
        raise UnmodelledMode(f"squall: the program writes {what} inside torch.utils.checkpoint: eager's backward runs the "
                             "checkpointed function again and writes it a second time, which squall's program, "
                             "differentiated as a whole, would not")
