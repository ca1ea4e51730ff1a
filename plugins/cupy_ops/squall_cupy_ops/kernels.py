"""A fusion region as CuPy ElementwiseKernels: planning (pure Python) and launching (CuPy).

A region's calls are prims, already broadcast and converted by the planner's
decomposition, so every elementwise call's operands share its output's shape. The
calls are grouped by that shape; each group becomes one ElementwiseKernel. A
`broadcast_in_dim` is not computed in a kernel: it becomes a zero-copy PyTorch view
(`expand`, stride 0 where it broadcasts) of its operand, passed to the kernel as a
strided input, which ElementwiseKernel indexes correctly. A group that needs another
group's result through such a view runs after it. Most regions are one kernel.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from squall.extend import FusionRegion, PrimIDs, TensorProxy

from squall_cupy_ops.translate import C_TYPES, CUPY_TYPES, literal, translate

__all__ = ["KernelSpec", "RegionProgram", "plan_region", "UnsupportedRegion", "NothingToCompute"]


class UnsupportedRegion(ValueError):
    """The region holds a call the translation table does not cover (the region then runs unfused)."""


class NothingToCompute(UnsupportedRegion):
    """The region only broadcasts: PyTorch's views do that without a kernel."""


@dataclass
class KernelSpec:
    """One generated ElementwiseKernel: typed parameters, body, and which values it reads and writes."""

    name: str
    in_params: list[tuple[str, torch.dtype]]  # (C name, dtype)
    out_params: list[tuple[str, torch.dtype]]
    body: list[str]
    inputs: list[str]  # value names, in in_params order
    outputs: list[str]  # value names, in out_params order
    shape: tuple[int, ...]
    device: torch.device

    @property
    def in_params_decl(self) -> str:
        return ", ".join(f"{CUPY_TYPES[d]} {n}" for n, d in self.in_params)

    @property
    def out_params_decl(self) -> str:
        return ", ".join(f"{CUPY_TYPES[d]} {n}" for n, d in self.out_params)

    @property
    def operation(self) -> str:
        return "\n".join(self.body)

    def standalone_source(self) -> str:
        """The kernel as a plain CUDA __global__ function over contiguous arrays (for checking with nvcc)."""
        params = [f"const {C_TYPES[d]}* __restrict__ {n}_ptr" for n, d in self.in_params]
        params += [f"{C_TYPES[d]}* __restrict__ {n}_ptr" for n, d in self.out_params]
        lines = [f'extern "C" __global__ void {self.name}({", ".join(params + ["long long n"])}) {{',
                 "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
                 "  if (i >= n) return;"]
        lines += [f"  const {C_TYPES[d]} {n} = {n}_ptr[i];" for n, d in self.in_params]
        lines += [f"  {C_TYPES[d]}& {n} = {n}_ptr[i];" for n, d in self.out_params]
        lines += ["  " + line for line in self.body] + ["}"]
        return "\n".join(lines)


@dataclass
class _View:
    source: str  # the value it views
    shape: tuple[int, ...]
    broadcast_dimensions: tuple[int, ...]


@dataclass
class RegionProgram:
    """How to run one region: views to make, kernels to launch in order, values to return."""

    inputs: list[str]
    views: dict[str, _View]
    kernels: list[KernelSpec]
    outputs: list[str]
    aliases: dict[str, str] = field(default_factory=dict)  # value -> the value it is (identity broadcasts)


def _store(expr: str, dtype: torch.dtype) -> str:
    # float16 goes through float, as c10::Half converts (so double -> half rounds like torch)
    if dtype == torch.float16:
        return f"float16((float)({expr}))"
    return f"(({C_TYPES[dtype]})({expr}))"


def _load(name: str, dtype: torch.dtype) -> str:
    return f"((float){name})" if dtype == torch.float16 else name


def _operand_dtype(call) -> torch.dtype:
    tensors = [a for a in call.args if isinstance(a, TensorProxy)]
    if call.sym.id == PrimIDs.WHERE:
        tensors = [a for a in call.args[1:] if isinstance(a, TensorProxy)] or tensors
    return tensors[0].dtype


def plan_region(region: FusionRegion) -> RegionProgram:
    """Group the region's calls into kernels and generate each kernel's body (no CuPy needed)."""
    aliases: dict[str, str] = {}
    views: dict[str, _View] = {}
    group_of: dict[str, tuple] = {}  # value computed in a kernel -> its group (by shape)
    groups: dict[tuple, list] = {}
    root = lambda name: aliases.get(name, name)
    for call in region.calls:
        out = call.output
        if call.sym.id == PrimIDs.BROADCAST_IN_DIM:
            a, shape, dims = call.args[0], tuple(call.args[1]), tuple(call.args[2])
            if shape == tuple(a.shape) and dims == tuple(range(len(shape))):
                aliases[out.name] = root(a.name)
            else:
                views[out.name] = _View(root(a.name), shape, dims)
            continue
        if not isinstance(out, TensorProxy):
            raise UnsupportedRegion(f"{call.sym.id} does not return one tensor")
        key = (tuple(out.shape), out.device)
        groups.setdefault(key, []).append(call)
        group_of[out.name] = key
    if not groups:
        raise NothingToCompute("the region computes nothing (only broadcasts)")

    def producer(name: str):
        # a view of a kernel's result needs that kernel first
        return group_of.get(_view_root(root(name), views, root))

    needed_outside: set[str] = set()
    for p in region.outputs:
        needed_outside |= {root(p.name), _view_root(root(p.name), views, root)}
    deps: dict[tuple, set] = {k: set() for k in groups}
    for key, calls in groups.items():
        for call in calls:
            for p in call.input_proxies():
                name = root(p.name)
                src = producer(name)
                if src is None or (src == key and name in group_of):
                    continue
                if src == key:
                    raise UnsupportedRegion(f"{name} views a value computed in the same kernel")
                deps[key].add(src)
                needed_outside.add(_view_root(name, views, root))
    order: list[tuple] = []
    while len(order) < len(groups):
        ready = [k for k in groups if k not in order and deps[k] <= set(order)]
        if not ready:
            raise UnsupportedRegion("the region's shape groups depend on each other in a cycle")
        order.append(ready[0])

    kernels = [_kernel(groups[key], key, needed_outside, root) for key in order]
    return RegionProgram([p.name for p in region.inputs], views, kernels, [p.name for p in region.outputs], aliases)


def _view_root(name: str, views: dict[str, _View], root: Callable[[str], str]) -> str:
    while name in views:
        name = root(views[name].source)
    return name


def _kernel(calls: list, key: tuple, needed_outside: set[str], root: Callable[[str], str]) -> KernelSpec:
    local: dict[str, str] = {}  # value -> its C variable in this kernel
    params: dict[str, tuple[str, torch.dtype]] = {}
    body: list[str] = []

    def operand(x, dtype: torch.dtype) -> str:
        if not isinstance(x, TensorProxy):
            return literal(x, dtype)
        name = root(x.name)
        if name in local:
            return _load(local[name], x.dtype)
        if name not in params:
            params[name] = (f"in{len(params)}", x.dtype)
        return _load(params[name][0], x.dtype)

    for call in calls:
        dtype = _operand_dtype(call)
        args = call.args[:1] if call.sym.id == PrimIDs.CONVERT_ELEMENT_TYPE else call.args
        kwargs = {}
        if call.sym.id == PrimIDs.DIV:  # normalized: div(a, b, rounding_mode)
            kwargs["rounding_mode"] = call.args[2]
            args = call.args[:2]
        expr = translate(call.sym.id, [operand(a, dtype) for a in args], dtype, kwargs)
        if expr is None:
            raise UnsupportedRegion(f"no translation for {call.sym.id} on {dtype}")
        out = call.output
        var = f"v{len(local)}"
        local[out.name] = var
        body.append(f"{C_TYPES[out.dtype]} {var} = {_store(expr, out.dtype)};")
    dtype_of = {c.output.name: c.output.dtype for c in calls}
    outputs = [name for name in local if name in needed_outside]
    out_params = [(f"out{k}", dtype_of[name]) for k, name in enumerate(outputs)]
    body += [f"{n} = {local[name]};" for (n, _), name in zip(out_params, outputs)]
    in_params = list(params.values())
    source_key = repr((in_params, out_params, body)).encode()
    name = "squall_cupy_" + hashlib.sha1(source_key).hexdigest()[:16]
    return KernelSpec(name, in_params, out_params, body, list(params), outputs, key[0], key[1])

