"""The device-transfer prim: the same values, shape and dtype on another device.

The torch language above resolves what users write (`"cuda"`, an index, `.cpu()`, a
legacy tensor type name) into one concrete `torch.device`; the prim takes only that.
It is no elementwise op: a fusion executor compiles code for one device, so none claims
it, and it marks where a program's work moves from one device to the next.
"""
from __future__ import annotations

import torch

from .base import PrimIDs, check, make_prim
from ..proxies import TensorProxy

__all__ = ["device_put"]


def _device_put_meta(a, device, *, non_blocking):
    check(isinstance(a, TensorProxy), lambda: f"device_put expects a tensor, got {type(a).__name__}", TypeError)
    check(isinstance(device, torch.device), lambda: f"device_put expects a torch.device, got {device!r}", TypeError)
    check(isinstance(non_blocking, bool), lambda: f"device_put expects non_blocking to be a bool, got {non_blocking!r}", TypeError)
    # "cuda" alone means the current device, which is state: the caller reads it and says which
    check(
        device.type != "cuda" or device.index is not None,
        lambda: f"device_put expects a device with an index, got {device} (resolve it to the current device first)",
        ValueError,
    )
    check(device != a.device, lambda: f"device_put moves a tensor between devices, and this one is on {device} already", ValueError)
    return TensorProxy(like=a, device=device)


# `non_blocking` is eager's flag of the same name: the copy may overlap host work (pinned memory, CUDA)
device_put = make_prim(PrimIDs.DEVICE_PUT, "device_put", meta=_device_put_meta)
