"""squall-cupy-ops: fusion regions of elementwise work on CUDA tensors as CuPy kernels.

The fusion executor `cupy` claims elementwise prims (and `broadcast_in_dim`, which
becomes a zero-copy view) on CUDA tensors of the dtypes in `translate.C_TYPES`; each
region becomes generated `cupy.ElementwiseKernel`s (usually one), built once per
region signature. CuPy is an optional extra (`squall-cupy-ops[cuda12]` or
`[cuda13]`): without it, or without a CUDA device, the executor is listed as
unavailable with the reason and the planner passes it over.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable

import torch

from squall.extend import Availability, FusionExecutor, FusionRegion, NumberProxy, PrimIDs, TensorProxy, hookimpl

from squall_cupy_ops.kernels import NothingToCompute, RegionProgram, plan_region
from squall_cupy_ops.runtime import CupyRegion, KernelCache
from squall_cupy_ops.translate import C_TYPES, TRANSLATIONS, translation_key

__all__ = ["CupyExecutor", "make_executor", "availability_from", "claimed_prims", "squall_register_executors"]

INSTALL_HINT = "pip install 'squall-cupy-ops[cuda12]' (or [cuda13]) to get CuPy"
_INT64 = (-(2**63), 2**63 - 1)


def availability_from(*, has_cupy: bool, has_cuda: bool) -> Availability:
    """Whether the executor can run, from what is installed here (a pure decision, so it is testable)."""
    if not has_cupy:
        return Availability(False, f"cupy is not installed; {INSTALL_HINT}")
    if not has_cuda:
        return Availability(False, "CUDA is not available (no CUDA device)")
    return Availability(True)


def claimed_prims() -> list[str]:
    """The prims this executor fuses: every prim with a translation, and broadcast_in_dim."""
    return sorted({key.split("/")[0] for key in TRANSLATIONS} | {PrimIDs.BROADCAST_IN_DIM})


def _fits(x) -> bool:
    if isinstance(x, TensorProxy):
        return x.device.type == "cuda" and x.dtype in C_TYPES
    if type(x) is NumberProxy:
        # a kernel is generated with its numbers as literals: a number known only at run time
        # (its __class__ says float or int) stays with torch, as inductor and nvFuser leave it
        return False
    if isinstance(x, bool) or isinstance(x, float):
        return True
    if isinstance(x, int):
        return _INT64[0] <= x <= _INT64[1]
    return False


def _checker_for(prim_id: str) -> Callable[..., bool]:
    """The checker for an elementwise prim: CUDA tensors of translated dtypes, and a translation for this call."""

    def checker(*args) -> bool:
        # squall binds every call to the prim's signature: convert_element_type(a, dtype) and
        # div(a, b, rounding_mode) always arrive with all their arguments, by position
        operands, kwargs = args, {}
        if prim_id == PrimIDs.CONVERT_ELEMENT_TYPE:
            operands = args[:1]
            if args[1] not in C_TYPES:
                return False
        elif prim_id == PrimIDs.DIV:
            operands, kwargs = args[:2], {"rounding_mode": args[2]}
        if not all(_fits(x) for x in operands):
            return False
        tensors = [x for x in operands if isinstance(x, TensorProxy)]
        if not tensors:
            return False
        dtype = tensors[-1].dtype if prim_id == PrimIDs.WHERE else tensors[0].dtype
        entry = TRANSLATIONS.get(translation_key(prim_id, kwargs))
        return entry is not None and entry.template(dtype) is not None

    checker.__name__ = f"_{prim_id.removeprefix('prims.')}_checker"
    return checker


def _broadcast_in_dim_checker(a, shape, broadcast_dimensions) -> bool:
    return isinstance(a, TensorProxy) and _fits(a)


class CupyExecutor(FusionExecutor):
    """Fuses elementwise prims on CUDA tensors into generated CuPy ElementwiseKernels."""

    # Its regions are planned in squall.runtime.tiers' background upgrade and the fused program
    # is kept only where it beats the torch plan in context: each region costs tens of
    # microseconds of Python (DLPack exchange, launch), so many small regions (LLaMA's norms
    # and rotary, at bf16 8x512 on an H100) made a whole model 1.6x slower than eager when
    # every region was taken untimed. `judge_in_context=False` keeps every region, untimed.
    compiles_in_background = True

    # one op alone is as fast in PyTorch's own kernel; fusing starts paying at two
    min_region_size = 2

    def __init__(self, *, judge_in_context: bool = True) -> None:
        super().__init__("cupy", default_rank=60, supports_autograd=False)
        self.judge_in_context = judge_in_context
        self.kernel_cache = KernelCache()
        self.programs: list[RegionProgram] = []  # what compile_region produced, for explain and tests
        for prim in claimed_prims():
            checker = _broadcast_in_dim_checker if prim == PrimIDs.BROADCAST_IN_DIM else _checker_for(prim)
            self.register_supported(prim, checker)

    def is_available(self) -> Availability:
        try:
            has_cupy = importlib.util.find_spec("cupy") is not None
        except (ImportError, ValueError):
            has_cupy = False
        return availability_from(has_cupy=has_cupy, has_cuda=torch.cuda.is_available())

    def compile_region(self, region: FusionRegion) -> CupyRegion | None:
        """The region's kernels (built on first launch); None for a region with nothing to compute."""
        try:
            program = plan_region(region)
        except NothingToCompute:
            return None
        self.programs.append(program)
        return CupyRegion(program, self.kernel_cache)


def make_executor(*, judge_in_context: bool = True) -> CupyExecutor:
    """A fresh cupy executor; `judge_in_context=False` keeps every region it compiles, untimed."""
    return CupyExecutor(judge_in_context=judge_in_context)


@hookimpl
def squall_register_executors() -> list[CupyExecutor]:
    """The cupy executor (returned even where CuPy or CUDA is missing)."""
    return [make_executor()]
