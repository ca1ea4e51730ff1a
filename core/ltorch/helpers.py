"""Helpers shared by torch-language ops (broadcasting, type promotion, argument checks); never seen in traces."""
from __future__ import annotations

import enum
from collections.abc import Sequence

import torch

from .. import prims
from ..prims.base import canonical_dim, canonical_dims, check, dtype_category, is_number, number_type
from ..proxies import NumberProxy, TensorProxy
from ..symbolic import SymInt, concrete_shape, concrete_value, same_shape, same_size

__all__ = [
    "Promotion",
    "result_dtype",
    "promote",
    "broadcast_shapes",
    "broadcast_to",
    "broadcast",
    "to_dtype",
    "canonical_dim",
    "canonical_dims",
    "check",
    "is_number",
    "is_tensor",
    "computation_dtype",
    "number_dtype",
    "cast_number",
    "check_input",
    "check_tensors",
    "upcast",
    "expand_reduced",
    "transpose_if_needed",
    "reshape_if_needed",
    "target_device",
    "on_device",
    "count_operand",
    "times_ratio",
]


def is_tensor(x) -> bool:
    return isinstance(x, TensorProxy)


def number_dtype(x) -> torch.dtype:
    """The dtype torch infers for a tensor filled with the Python number `x` (by its type only)."""
    t = number_type(x)
    if issubclass(t, bool):
        return torch.bool
    if issubclass(t, int):
        return torch.int64
    if issubclass(t, complex):
        return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64
    return torch.get_default_dtype()


def cast_number(x, dtype: torch.dtype):
    """`x` as torch stores it in a `dtype` tensor (C++ static_cast: truncation toward zero).
    A run-time number stays one where no truncation can happen (else its value is read)."""
    if type(x) is NumberProxy and (dtype == torch.bool or dtype_category(dtype) >= dtype_category(number_dtype(x))):
        return _number_to_dtype(x, dtype)
    if type(x) is SymInt and dtype != torch.bool:
        # a size (`torch.full(shape, x.shape[1])`): filled at run time with this call's value, which
        # torch converts to `dtype` as eager's call does, not read and guarded (a compile per size)
        return x
    if dtype == torch.bool:
        return bool(x)
    if dtype.is_complex:
        return complex(x)
    if dtype.is_floating_point:
        return float(x.real if isinstance(x, complex) else x)
    return int(x.real if isinstance(x, complex) else x)


def _promote(a: torch.dtype | None, b: torch.dtype | None) -> torch.dtype | None:
    if a is None:
        return b
    if b is None:
        return a
    return torch.promote_types(a, b)


def _combine_categories(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    # PyTorch's rule (c10 ResultTypeState): operands of lower priority (0-d tensors, then
    # Python numbers) only matter when they are of a higher category.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        if higher.is_floating_point:
            return higher.to_complex()
        return lower
    if higher.is_floating_point:
        return higher
    if higher == torch.bool or lower.is_floating_point:
        return _promote(higher, lower)
    return higher


def result_dtype(*operands) -> torch.dtype:
    """The dtype torch gives an elementwise op over these tensors and numbers."""
    dim_result = zero_result = number_result = None
    for x in operands:
        if isinstance(x, TensorProxy):
            if x.ndim > 0:
                dim_result = _promote(dim_result, x.dtype)
            else:
                zero_result = _promote(zero_result, x.dtype)
        elif is_number(x):
            number_result = _promote(number_result, number_dtype(x))
        elif x is not None:
            raise TypeError(f"expected a tensor or a number, got {type(x).__name__}")
    out = _combine_categories(dim_result, _combine_categories(zero_result, number_result))
    if out is None:
        raise TypeError("type promotion needs at least one tensor or number")
    return out


class Promotion(enum.Enum):
    """How an elementwise op's result dtype follows from the promoted dtype."""

    DEFAULT = "default"  # the promoted dtype
    INT_TO_FLOAT = "int_to_float"  # bool and integer results become the default float dtype
    ALWAYS_BOOL = "always_bool"  # comparisons
    COMPLEX_TO_FLOAT = "complex_to_float"  # abs: complex results become real
    BOOL_TO_LONG = "bool_to_long"  # sum-like: bool becomes int64


def promote(*operands, kind: Promotion = Promotion.DEFAULT) -> tuple[torch.dtype, torch.dtype]:
    """(computation dtype, result dtype) for operands under `kind`."""
    dtype = result_dtype(*operands)
    if kind is Promotion.INT_TO_FLOAT and dtype_category(dtype) < 2:
        dtype = torch.get_default_dtype()
    if kind is Promotion.BOOL_TO_LONG and dtype_category(dtype) < 2:
        dtype = torch.int64
    result = dtype
    if kind is Promotion.ALWAYS_BOOL:
        result = torch.bool
    elif kind is Promotion.COMPLEX_TO_FLOAT and dtype.is_complex:
        result = dtype.to_real()
    return dtype, result


def computation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Low-precision floats are computed in float32, as PyTorch's kernels do (its opmath type)."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if dtype == torch.complex32:
        return torch.complex64
    return dtype


def to_dtype(x, dtype: torch.dtype):
    """`x` converted to `dtype`: a tensor gets a convert_element_type, a number a Python cast."""
    if isinstance(x, TensorProxy):
        return x if x.dtype == dtype else prims.convert_element_type(x, dtype)
    if x is None:
        return x
    if type(x) is NumberProxy:
        return _number_to_dtype(x, dtype)
    if type(x) is SymInt and dtype != torch.bool:
        return x  # a symbolic size stays one: the op is run with its value at each call (an exact integer in any dtype's number)
    if dtype == torch.bool:
        return bool(x)
    if dtype.is_complex:
        return complex(x)
    if dtype.is_floating_point:
        return float(x)
    if isinstance(x, (float, complex)):
        # e.g. an int tensor and a float number whose promoted type is integral cannot happen,
        # but truncation would be silent: refuse it.
        raise TypeError(f"cannot convert {x!r} to {dtype} without losing its value")
    return int(x)


def _number_to_dtype(x: NumberProxy, dtype: torch.dtype):
    """A run-time number as the Python type of `dtype`'s category: itself where it is one
    already, else a recorded conversion (its value is never read while tracing)."""
    category = dtype_category(dtype)
    if category == dtype_category(number_dtype(x)):
        return x
    if category < dtype_category(number_dtype(x)) and category != 0:
        # as for a plain number: truncation would be silent
        raise TypeError(f"cannot convert a {x.python_type.__name__} number to {dtype} without losing its value")
    return prims.convert_number(x, ("bool", "int", "float", "complex")[category])


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The broadcast of shapes, with torch's error message when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            # a constant 1 and an equal size change nothing, whatever the sizes' values: asked
            # first, so a symbolic size is asked whether it is 1 only where the answer matters
            if same_size(n, out[j]) or (type(n) is int and n == 1):
                continue
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(  # eager's text of this call's sizes, read without a guard
                    f"The size of tensor a ({concrete_value(out[j])}) must match the size of tensor b ({concrete_value(n)}) at "
                    f"non-singleton dimension {i}; shapes {[list(concrete_shape(x)) for x in shapes]} do not broadcast"
                )
    return tuple(out)


def broadcast_to(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    """`a` broadcast to `shape` (right-aligned, as torch does)."""
    shape = tuple(shape)
    if same_shape(a.shape, shape):
        return a  # else broadcast, which is a no-op where the sizes turn out equal
    offset = len(shape) - a.ndim
    check(offset >= 0, lambda: f"cannot broadcast shape {list(a.shape)} to {list(shape)}", RuntimeError)
    for i, n in enumerate(a.shape):
        check(
            same_size(n, shape[offset + i]) or n == 1 or n == shape[offset + i],
            lambda: f"The expanded size of the tensor ({shape[offset + i]}) must match the existing size ({n}) at non-singleton dimension {offset + i}.  Target sizes: {list(shape)}.  Tensor sizes: {list(a.shape)}",
            RuntimeError,
        )
    return prims.broadcast_in_dim(a, shape, tuple(range(offset, len(shape))))


def broadcast(*operands):
    """Tensors among `operands` broadcast to one shape (and device: see `with_cpu_scalars_moved`);
    numbers pass through."""
    shapes = [x.shape for x in operands if isinstance(x, TensorProxy)]
    if not shapes:
        return operands
    operands = with_cpu_scalars_moved(operands)
    shape = broadcast_shapes(*shapes)
    return tuple(broadcast_to(x, shape) if isinstance(x, TensorProxy) else x for x in operands)


def target_device(device) -> torch.device:
    """The concrete device a move names, as eager resolves it: torch's own parse (and its error
    for an unknown name or a missing accelerator), a CUDA device without an index taken as the
    current one (read while tracing: a later `torch.cuda.set_device` is not guarded)."""
    check(
        isinstance(device, (str, torch.device, int)) and not isinstance(device, bool),
        lambda: f"expected a device as a str, torch.device or int, not {type(device).__name__}",
        TypeError,
    )
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def on_device(a: TensorProxy, device: torch.device, *, non_blocking: bool = False) -> TensorProxy:
    """`a` moved to the concrete `device` (prims.device_put); `a` itself when it is there."""
    return a if a.device == device else prims.device_put(a, device, non_blocking=non_blocking)


def with_cpu_scalars_moved(operands: Sequence) -> tuple:
    """`operands` with each CPU 0-d tensor moved to the one device the other tensors share: eager
    reads such a tensor as a number beside tensors of any device. Tensors of two other devices are
    left for the prim to refuse, as eager refuses them."""
    tensors = [x for x in operands if isinstance(x, TensorProxy)]
    devices = {t.device for t in tensors if t.ndim != 0 or t.device.type != "cpu"}
    if len(devices) != 1 or all(t.device in devices for t in tensors):
        return tuple(operands)
    (device,) = devices
    return tuple(on_device(x, device) if isinstance(x, TensorProxy) else x for x in operands)


def check_tensors(name: str, **tensors) -> None:
    """TypeError, as torch's argument parser raises it, for each named argument that is not a tensor."""
    for arg, t in tensors.items():
        check(is_tensor(t), lambda: f"{name}(): argument '{arg}' must be Tensor, not {type(t).__name__}", TypeError)


def transpose_if_needed(a: TensorProxy, perm) -> TensorProxy:
    """prims.transpose, left out of the trace when it would not move anything."""
    return a if list(perm) == list(range(a.ndim)) else prims.transpose(a, perm)


def reshape_if_needed(a: TensorProxy, shape) -> TensorProxy:
    """prims.reshape, left out of the trace when the shape does not change."""
    return a if same_shape(shape, a.shape) else prims.reshape(a, shape)


def check_input(name: str, a, what: str = "input") -> None:
    """torch's TypeError for a non-tensor where a tensor is required."""
    check(is_tensor(a), lambda: f"{name}(): argument '{what}' must be Tensor, not {type(a).__name__}", TypeError)


def upcast(a: TensorProxy) -> TensorProxy:
    """`a` in its computation dtype (float32 for bf16/f16), as torch's kernels compute."""
    return to_dtype(a, computation_dtype(a.dtype))


def expand_reduced(r: TensorProxy, shape, dims) -> TensorProxy:
    """A reduction's result `r` (dims removed) broadcast back to `shape`."""
    return prims.broadcast_in_dim(r, tuple(shape), tuple(i for i in range(len(shape)) if i not in dims))


_TYPE_NAMES = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int16: "Short",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
}


def torch_type_name(dtype: torch.dtype) -> str:
    """The scalar type name torch's C++ messages use (Float, Long, ...)."""
    return _TYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def count_operand(n: int | SymInt) -> float | SymInt:
    """A count of elements (a product of sizes) as a number to divide by: a float where it is a
    constant, the size expression itself where symbolic, so the program divides by this call's
    count (a batch norm's, a mean's) rather than guard the count's value (a compile per batch)."""
    return n if type(n) is SymInt else float(n)


def times_ratio(t: TensorProxy, numerator: int | SymInt, denominator: int | SymInt) -> TensorProxy:
    """`t * (numerator / denominator)`: one factor where both are constants; where a size is
    symbolic, `t * numerator / denominator` computed by the program at this call's sizes."""
    if type(numerator) is not SymInt and type(denominator) is not SymInt:
        return prims.mul(t, numerator / denominator)
    return prims.div(prims.mul(t, numerator), denominator)
