"""Torch-language ops: conversions of dtype and device (Tensor.to, Tensor.float, Tensor.cpu,
Tensor.cuda, type_as, Tensor.type, ...).

A conversion that changes nothing returns its input itself, as torch returns `self`, and
records nothing in the trace: each op has a `TorchForm` whose `before` answers such calls.
A change of device is `prims.device_put`; a change of dtype `prims.convert_element_type`.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import prims
from .base import qualified_name
from .functionalization import TorchForm
from .helpers import check, on_device, target_device
from ..proxies import TensorProxy, current_context
from ..symbol import Symbol, Tags

_T = torch.Tensor

__all__ = [
    "to", "to_if_changed", "to_float", "to_float_if_changed", "to_double", "to_double_if_changed",
    "to_half", "to_half_if_changed", "to_bfloat16", "to_bfloat16_if_changed", "to_int",
    "to_int_if_changed", "to_long", "to_long_if_changed", "to_short", "to_short_if_changed",
    "to_char", "to_char_if_changed", "to_byte", "to_byte_if_changed", "to_bool",
    "to_bool_if_changed", "to_cfloat", "to_cfloat_if_changed", "to_cdouble",
    "to_cdouble_if_changed", "type_as", "type_as_if_changed", "tensor_type",
    "tensor_type_if_changed", "to_cpu", "to_cpu_if_changed", "to_cuda", "to_cuda_if_changed",
    "to_memory_format",
]


def _check_tensor(name: str, a) -> None:
    check(isinstance(a, TensorProxy), lambda: f"{name}(): expected a Tensor as self, got {type(a).__name__}", TypeError)


def _check_bool(name: str, flag: str, value) -> None:
    check(isinstance(value, bool), lambda: f"{name}(): argument '{flag}' must be bool, not {type(value).__name__}", TypeError)


class _Plan(NamedTuple):
    """What a conversion call asks for: `a` in `dtype` on `device` (concrete), a new tensor even
    when nothing changes if `copy`; `non_blocking` is eager's flag, passed on to the move."""

    a: TensorProxy
    dtype: torch.dtype
    device: torch.device
    copy: bool = False
    non_blocking: bool = False
    memory_format: torch.memory_format = torch.preserve_format


def _convert(plan: _Plan) -> TensorProxy:
    a, dtype, device, copy, non_blocking, _ = plan
    if device == a.device:
        # a copy of the same dtype is still a new tensor: an in-place op on it must not reach `a`
        return prims.convert_element_type(a, dtype) if dtype != a.dtype or copy else a
    # the values are the same either way; convert where fewer bytes then cross the devices
    if dtype.itemsize < a.dtype.itemsize:
        return on_device(prims.convert_element_type(a, dtype), device, non_blocking=non_blocking)
    moved = on_device(a, device, non_blocking=non_blocking)
    return prims.convert_element_type(moved, dtype) if dtype != a.dtype else moved


def _plan_to(self, *args, **kwargs):
    """Tensor.to's three call forms: (dtype, ...), (device=None, dtype=None, ...), (other, ...)."""
    _check_tensor("to", self)
    args = list(args)
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    if args and isinstance(args[0], TensorProxy):
        other = args.pop(0)  # its device exactly, index included, as eager's to(other) moves
        device, dtype = other.device, other.dtype
    elif args and isinstance(args[0], torch.dtype):
        dtype = args.pop(0)
    elif args and (args[0] is None or isinstance(args[0], (str, torch.device, int))) and not isinstance(args[0], bool):
        device = args.pop(0)
        if args and (args[0] is None or isinstance(args[0], torch.dtype)):
            dtype = args.pop(0)
    flags = dict(zip(("non_blocking", "copy"), args))
    check(len(args) <= 2, lambda: f"to() received too many positional arguments: {tuple(args)}", TypeError)
    for name in ("non_blocking", "copy", "memory_format"):
        if name in kwargs:
            check(name not in flags, lambda: f"to() got multiple values for argument '{name}'", TypeError)
            flags[name] = kwargs.pop(name)
    check(not kwargs, lambda: f"to() got unexpected keyword arguments {sorted(kwargs)}", TypeError)
    for name in ("non_blocking", "copy"):
        check(isinstance(flags.get(name, False), bool), lambda: f"to(): argument '{name}' must be bool, not {type(flags[name]).__name__}", TypeError)
    memory_format = flags.get("memory_format", torch.preserve_format)
    check(isinstance(memory_format, torch.memory_format), lambda: f"to(): argument 'memory_format' must be torch.memory_format, not {type(memory_format).__name__}", TypeError)
    check(dtype is None or isinstance(dtype, torch.dtype), lambda: f"to(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}", TypeError)
    device = self.device if device is None else target_device(device)
    # a memory format changes no value; the torch executor passes it on with the call (its layout)
    return _Plan(self, dtype or self.dtype, device, flags.get("copy", False), flags.get("non_blocking", False), memory_format)


def _if_changed(plan):
    """A form's `before`: the tensor itself when the conversion `plan` describes changes nothing."""

    def unchanged(*args, **kwargs):
        a, dtype, device, copy, _, memory_format = plan(*args, **kwargs)
        if dtype != a.dtype or device != a.device or copy:
            return None
        if memory_format != torch.preserve_format:
            kwargs = {"memory_format": memory_format}
            out = to_memory_format(a, **kwargs)
            # eager's result is `a` itself or a copy, by `a`'s layout: a view where a write decides
            current_context().views.note(to_memory_format, (a,), kwargs, out)
            return out
        return a

    return unchanged


def _conversion(name: str, fn, plan, torchfn) -> tuple[Symbol, TorchForm]:
    """The op that converts (recorded when it changes something) and the form torch calls reach."""
    # a tensor operand other than self (type_as, to(other)) lends its dtype and device only
    op = Symbol(qualified_name(torchfn), name, fn, is_prim=False, tags=(Tags.ELEMENTWISE, Tags.METADATA_OPERANDS), torchfns=(torchfn,))
    return op, TorchForm(op, torchfn, before=_if_changed(plan))


def _to(self, *args, **kwargs):
    return _convert(_plan_to(self, *args, **kwargs))


def _to_memory_format(self, *, memory_format):
    # A value under a new name, as contiguous(memory_format) is: eager returns `self` itself where
    # its layout already suggests that format, else a copy laid out so; the trace notes it as a
    # view whose writes are decided by eager's layout (squall.frontend.views). The torch executor
    # runs torch's `to`, which lays the result out as asked.
    return prims.convert_element_type(self, self.dtype)


def _torch_to_memory_format(self, *, memory_format):
    """Eager's `self.to(memory_format=memory_format)`: what the torch executor runs."""
    return self.to(memory_format=memory_format)


# `x.to(memory_format=...)` that changes nothing else: recorded (never answered with `x` itself,
# whose layout eager's result need not keep) under an id of its own, its torch call a function of
# its own (Tensor.to is claimed by `to`)
to_memory_format = Symbol("torch.Tensor.to.memory_format", "to", _to_memory_format, is_prim=False, tags=(Tags.ELEMENTWISE,), torchfns=(_torch_to_memory_format,))


to, to_if_changed = _conversion("to", _to, _plan_to, _T.to)


def _method(name: str, dtype: torch.dtype) -> tuple[Symbol, TorchForm]:
    """Tensor.float, Tensor.long, ...: conversion to one dtype."""
    torchfn = getattr(_T, name)

    def plan(self, memory_format=torch.preserve_format):
        _check_tensor(name, self)
        _check_memory_format(name, memory_format)
        return _Plan(self, dtype, self.device, memory_format=memory_format)

    def op(self, memory_format=torch.preserve_format):
        return _convert(plan(self, memory_format))

    return _conversion(name, op, plan, torchfn)


to_float, to_float_if_changed = _method("float", torch.float32)
to_double, to_double_if_changed = _method("double", torch.float64)
to_half, to_half_if_changed = _method("half", torch.float16)
to_bfloat16, to_bfloat16_if_changed = _method("bfloat16", torch.bfloat16)
to_int, to_int_if_changed = _method("int", torch.int32)
to_long, to_long_if_changed = _method("long", torch.int64)
to_short, to_short_if_changed = _method("short", torch.int16)
to_char, to_char_if_changed = _method("char", torch.int8)
to_byte, to_byte_if_changed = _method("byte", torch.uint8)
to_bool, to_bool_if_changed = _method("bool", torch.bool)
to_cfloat, to_cfloat_if_changed = _method("cfloat", torch.complex64)
to_cdouble, to_cdouble_if_changed = _method("cdouble", torch.complex128)


def _plan_type_as(self, other):
    _check_tensor("type_as", self)
    check(isinstance(other, TensorProxy), lambda: f"type_as(): argument 'other' must be Tensor, not {type(other).__name__}", TypeError)
    # eager's type_as is to(other's dtype and device)
    return _Plan(self, other.dtype, other.device)


def _type_as(self, other):
    return _convert(_plan_type_as(self, other))


type_as, type_as_if_changed = _conversion("type_as", _type_as, _plan_type_as, _T.type_as)

# the legacy tensor type names Tensor.type speaks
_TYPE_NAMES = {
    torch.float32: "FloatTensor",
    torch.float64: "DoubleTensor",
    torch.float16: "HalfTensor",
    torch.bfloat16: "BFloat16Tensor",
    torch.int64: "LongTensor",
    torch.int32: "IntTensor",
    torch.int16: "ShortTensor",
    torch.int8: "CharTensor",
    torch.uint8: "ByteTensor",
    torch.bool: "BoolTensor",
    torch.complex64: "ComplexFloatTensor",
    torch.complex128: "ComplexDoubleTensor",
}
_DTYPES_BY_NAME = {n: d for d, n in _TYPE_NAMES.items()}


def _type_name(a: TensorProxy) -> str:
    prefix = "torch." if a.device.type == "cpu" else f"torch.{a.device.type}."
    return prefix + _TYPE_NAMES.get(a.dtype, str(a.dtype))


def _plan_type(self, dtype=None, non_blocking=False, **kwargs):
    _check_tensor("type", self)
    _check_bool("type", "non_blocking", non_blocking)
    device = self.device
    if dtype is None:
        return _Plan(self, self.dtype, device)
    if isinstance(dtype, type):  # torch.FloatTensor and friends
        dtype = f"{dtype.__module__}.{dtype.__name__}"
    if isinstance(dtype, str):
        module, _, name = dtype.rpartition(".")
        check(module in ("torch", "torch.cuda") and name in _DTYPES_BY_NAME, lambda: f"invalid type: '{dtype}'", ValueError)
        # a type of another device type moves the tensor there (CUDA: the current device)
        kind = "cpu" if module == "torch" else "cuda"
        device = device if device.type == kind else target_device(kind)
        dtype = _DTYPES_BY_NAME[name]
    check(isinstance(dtype, torch.dtype), lambda: f"type(): argument 'dtype' must be torch.dtype or str, not {type(dtype).__name__}", TypeError)
    return _Plan(self, dtype, device, non_blocking=non_blocking)


def _type(self, dtype=None, non_blocking=False, **kwargs):
    return _convert(_plan_type(self, dtype, non_blocking, **kwargs))


_type_unchanged = _if_changed(_plan_type)


def _type_or_unchanged(self=None, dtype=None, *args, **kwargs):
    """Tensor.type(): with no dtype, the tensor's type name (a string); else as any conversion."""
    if dtype is None:
        _check_tensor("type", self)
        return _type_name(self)
    return _type_unchanged(self, dtype, *args, **kwargs)


tensor_type = Symbol(qualified_name(_T.type), "type", _type, is_prim=False, tags=(Tags.ELEMENTWISE,), torchfns=(_T.type,))
tensor_type_if_changed = TorchForm(tensor_type, _T.type, before=_type_or_unchanged)


def _check_memory_format(name: str, memory_format) -> None:
    check(
        isinstance(memory_format, torch.memory_format),
        lambda: f"{name}(): argument 'memory_format' must be torch.memory_format, not {type(memory_format).__name__}",
        TypeError,
    )


def _plan_cpu(self, *, memory_format=torch.preserve_format):
    _check_tensor("cpu", self)
    _check_memory_format("cpu", memory_format)
    return _Plan(self, self.dtype, torch.device("cpu"), memory_format=memory_format)


def _cpu(self, *, memory_format=torch.preserve_format):
    return _convert(_plan_cpu(self, memory_format=memory_format))


to_cpu, to_cpu_if_changed = _conversion("cpu", _cpu, _plan_cpu, _T.cpu)


def _plan_cuda(self, device=None, non_blocking=False, *, memory_format=torch.preserve_format):
    _check_tensor("cuda", self)
    _check_memory_format("cuda", memory_format)
    check(
        device is None or (isinstance(device, (str, torch.device, int)) and not isinstance(device, bool)),
        lambda: f"cuda(): argument 'device' (position 1) must be torch.device, not {type(device).__name__}",
        TypeError,
    )
    _check_bool("cuda", "non_blocking", non_blocking)
    # no device: the current CUDA device; an index: that CUDA device
    device = target_device("cuda" if device is None else torch.device("cuda", device) if isinstance(device, int) else device)
    check(device.type == "cuda", lambda: "Invalid device, must be cuda device", RuntimeError)
    return _Plan(self, self.dtype, device, non_blocking=non_blocking, memory_format=memory_format)


def _cuda(self, device=None, non_blocking=False, *, memory_format=torch.preserve_format):
    return _convert(_plan_cuda(self, device, non_blocking, memory_format=memory_format))


to_cuda, to_cuda_if_changed = _conversion("cuda", _cuda, _plan_cuda, _T.cuda)

# module names avoid the builtins (float, int, bool, type) that `from ... import *` would shadow
