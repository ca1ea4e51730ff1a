"""Running a planned region: CuPy kernels on PyTorch's memory and PyTorch's stream.

Tensors cross to CuPy through DLPack without copies (bool through a uint8 view, which
every DLPack version carries). Outputs are allocated by PyTorch, so its caching
allocator owns them, and each kernel is launched on PyTorch's current CUDA stream
(wrapped as a `cupy.cuda.ExternalStream`), so it is ordered with the surrounding work.
"""
from __future__ import annotations

import importlib
from typing import Any

import torch

from squall_cupy_ops.kernels import KernelSpec, RegionProgram
from squall_cupy_ops.translate import PREAMBLE

__all__ = ["CupyRegion", "KernelCache"]


class KernelCache:
    """ElementwiseKernel objects by kernel name (a hash of the source): identical kernels are built once."""

    def __init__(self) -> None:
        self.kernels: dict[str, Any] = {}

    def get(self, spec: KernelSpec) -> Any:
        kernel = self.kernels.get(spec.name)
        if kernel is None:
            cupy = importlib.import_module("cupy")
            # CuPy compiles on first launch for the argument dtypes, and caches the binary
            kernel = cupy.ElementwiseKernel(spec.in_params_decl, spec.out_params_decl, spec.operation, spec.name, preamble=PREAMBLE)
            self.kernels[spec.name] = kernel
        return kernel


def _broadcast_in_dim(a: torch.Tensor, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> torch.Tensor:
    view = [1] * len(shape)
    for d, n in zip(broadcast_dimensions, a.shape):
        view[d] = n
    return a.reshape(view).expand(shape)


class CupyRegion:
    """The callable squall's generated code calls for one region: inputs in, outputs (a tuple) out."""

    def __init__(self, program: RegionProgram, cache: KernelCache):
        self.program = program
        self.cache = cache
        self._streams: dict[tuple[int, int], Any] = {}

    def __repr__(self) -> str:
        return f"<CupyRegion: {len(self.program.kernels)} kernel(s)>"

    def _value(self, env: dict[str, torch.Tensor], name: str) -> torch.Tensor:
        name = self.program.aliases.get(name, name)
        found = env.get(name)
        if found is None:
            view = self.program.views[name]
            found = env[name] = _broadcast_in_dim(self._value(env, view.source), view.shape, view.broadcast_dimensions)
        return found

    def _stream(self, cupy, device: torch.device):
        index = device.index if device.index is not None else torch.cuda.current_device()
        ptr = torch.cuda.current_stream(index).cuda_stream
        stream = self._streams.get((index, ptr))
        if stream is None:
            stream = self._streams[(index, ptr)] = cupy.cuda.ExternalStream(ptr, index)
        return index, stream

    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cupy = importlib.import_module("cupy")
        env = dict(zip(self.program.inputs, args))
        for spec in self.program.kernels:
            outs = [torch.empty(spec.shape, dtype=dtype, device=spec.device) for _, dtype in spec.out_params]
            ins = [self._value(env, name) for name in spec.inputs]
            if outs and outs[0].numel():
                index, stream = self._stream(cupy, spec.device)
                with cupy.cuda.Device(index), stream:
                    arrays = [_as_cupy(cupy, t) for t in (*ins, *outs)]
                    self.cache.get(spec)(*arrays)
            env.update(zip(spec.outputs, outs))
        return tuple(self._value(env, name) for name in self.program.outputs)


def _as_cupy(cupy, t: torch.Tensor):
    # zero-copy; the import asks for the current (PyTorch's) stream, so no synchronisation
    t = t.detach()
    if t.dtype == torch.bool:
        return cupy.from_dlpack(t.view(torch.uint8)).view(cupy.bool_)
    return cupy.from_dlpack(t)
