"""The nvFuser fusion executor: regions of prims -> one nvFuser FusionDefinition each.

squall forms the regions (`FusionExecutor.fusion_pass`) and compiles identical regions
once (by `FusionRegion.signature()`: ops, arguments, input shapes and dtypes). For each
region, `compile_region` returns a `RegionRunner`, which keeps one definition per input
stride layout (nvFuser specializes on contiguity and stride order, as Thunder's nvFuser
executor does) and runs it with `fd.execute(inputs)`. The contiguous layout is defined
at compile time, so a region nvFuser cannot define is declined there and runs unfused.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from squall.extend import Availability, FusionExecutor, FusionRegion
from squall_nvfuser.checkers import make_checker
from squall_nvfuser.translate import TRANSLATORS, translate_region

__all__ = ["NvFuserExecutor", "RegionRunner", "contiguous_strides", "DEFAULT_RANK"]

# ahead of operator executors of general reach, behind kernel libraries that claim single ops
DEFAULT_RANK = 40
LEGACY_FRONTEND_LAST = "0.2.35"  # the last nvFuser release with nvfuser.FusionDefinition


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides of a contiguous (row-major) tensor of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class RegionRunner:
    """Runs one region with nvFuser: a FusionDefinition per input stride layout, built on demand."""

    def __init__(self, region: FusionRegion):
        self.calls = list(region.calls)
        self.inputs = list(region.inputs)
        self.outputs = list(region.outputs)
        self.definitions: dict[tuple, Any] = {}  # input strides -> nvfuser.FusionDefinition

    def define(self, strides: tuple[tuple[int, ...], ...]) -> Any:
        """Build (and keep) the definition for inputs with these strides."""
        import nvfuser  # optional: only a runner for an available executor gets here

        descriptors = []
        for p, stride in zip(self.inputs, strides, strict=True):
            contiguity, stride_order = nvfuser.compute_tensor_descriptor(list(p.shape), list(stride))
            descriptors.append((tuple(p.shape), contiguity, stride_order))
        fd = nvfuser.FusionDefinition()
        with fd:
            translate_region(self.calls, self.inputs, self.outputs, fd, data_type=nvfuser.DataType, descriptors=descriptors)
        self.definitions[strides] = fd
        return fd

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        strides = tuple(t.stride() for t in tensors)
        fd = self.definitions.get(strides)
        if fd is None:
            fd = self.define(strides)
        return tuple(fd.execute(list(tensors)))


class NvFuserExecutor(FusionExecutor):
    """Fuses regions of the prims in `translate.TRANSLATORS` on CUDA tensors into nvFuser kernels."""

    def __init__(self, name: str = "nvfuser", *, default_rank: int = DEFAULT_RANK):
        super().__init__(
            name,
            distribution="squall-nvfuser",
            default_rank=default_rank,
            requires=("nvfuser",),
            needs_cuda=True,
        )
        for prim_id, translator in TRANSLATORS.items():
            self.register_supported(prim_id, make_checker(prim_id, translator))

    def is_available(self) -> Availability:
        """Needs nvFuser's Python frontend (`nvfuser.FusionDefinition`) and a CUDA device."""
        found = super().is_available()  # the library first, then the device
        if not found:
            return found
        import nvfuser

        if not hasattr(nvfuser, "FusionDefinition"):
            version = getattr(nvfuser, "__version__", "(unknown version)")
            return Availability(
                False,
                f"nvfuser {version} has no nvfuser.FusionDefinition (the frontend this executor uses; "
                f"last shipped in {LEGACY_FRONTEND_LAST})",
            )
        return found

    def describe_op(self, op: str) -> str:
        translator = TRANSLATORS.get(op)
        if translator is None:
            return ""
        note = ", ".join(f"fd.ops.{name}" for name in translator.ops)
        return f"{note}  (only: {translator.limits})" if translator.limits else note

    def compile_region(self, region: FusionRegion) -> RegionRunner:
        runner = RegionRunner(region)
        # defining the contiguous layout now turns a translation error into an unfused region
        runner.define(tuple(contiguous_strides(p.shape) for p in region.inputs))
        return runner
