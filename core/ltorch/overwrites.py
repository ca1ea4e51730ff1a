"""Torch-language ops that overwrite a tensor whole: `Tensor.copy_`, `fill_` and `zero_`.

Each in-place call is the functional value the tensor holds afterwards (`copy`: the source
broadcast to the tensor's shape, in its dtype, on its device; `fill`: one value everywhere),
written back by `inplace` as `add_` is: a view's base sees the write, a caller's tensor gets
it when the program ends, and a gradient reaches the source, never the old value.
"""
from __future__ import annotations

import torch

from .. import prims
from .base import torchsymbol
from .factories import filled, zeros_like
from .functionalization import inplace
from .helpers import broadcast_to, check, check_input, is_number, is_tensor, on_device

__all__ = ["copy", "copy_", "fill", "fill_", "zero_"]


def _torch_copy(self: torch.Tensor, src, non_blocking: bool = False) -> torch.Tensor:
    """The torch executor's functional copy: a new tensor laid out like `self`, holding `src`."""
    return torch.empty_like(self).copy_(src, non_blocking)


@torchsymbol(_torch_copy, id="ltorch.copy")
def copy(self, src, non_blocking=False):
    """The value `self` has after `self.copy_(src)`."""
    check_input("copy_", self, "self")
    if not is_tensor(src):  # torch takes a number as a 0-d source
        check(is_number(src), lambda: f"copy_(): argument 'other' (position 1) must be Tensor, not {type(src).__name__}", TypeError)
        return filled(self.shape, src, device=self.device, dtype=self.dtype)
    check(
        src.ndim <= self.ndim,
        lambda: f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(src.shape)}",
        RuntimeError,
    )
    value = src if src.dtype == self.dtype else prims.convert_element_type(src, self.dtype)
    return broadcast_to(on_device(value, self.device), self.shape)


@torchsymbol(torch.fill)
def fill(input, value):
    """`input`'s shape, dtype and device, full of `value` (a number or a 0-d tensor)."""
    check_input("fill", input)
    check(
        not is_tensor(value) or value.ndim == 0,
        lambda: f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.",
        RuntimeError,
    )
    return filled(input.shape, value, device=input.device, dtype=input.dtype)


copy_ = inplace(copy, torch.Tensor.copy_, checks_overlap=True)
fill_ = inplace(fill, torch.fill_, torch.Tensor.fill_)
zero_ = inplace(zeros_like, torch.zero_, torch.Tensor.zero_)
