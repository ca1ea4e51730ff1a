"""Torch-language ops: factories (zeros, full, arange, linspace, eye, tensor, *_like, new_*).

While tracing, factory calls with no tensor argument are routed here too (a
TorchFunctionMode is active), so `torch.arange(T, device=x.device)` inside a model
is traced. Every factory accepts its size as varargs or one sequence, and the
dtype=, device=, layout=, pin_memory=, requires_grad= keywords torch accepts.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch
from torch.utils._pytree import tree_flatten

from .. import prims
from .base import torchsymbol
from .unmodelled import NotModelled
from .helpers import cast_number, check, is_number, is_tensor, number_dtype, on_device, target_device
from ..proxies import TensorProxy, current_context
from ..symbol import Tags, called_from_torch
from ..prims.base import is_size
from ..symbolic import SymInt, concrete_value

__all__ = [
    "zeros", "ones", "empty", "full", "scalar_tensor", "zeros_like", "ones_like", "empty_like",
    "full_like", "new_zeros", "new_ones", "new_empty", "new_full", "tensor", "as_tensor",
    "new_tensor", "arange", "linspace", "eye",
]


# --- argument handling shared by every factory ---------------------------------------------


def parse_size(name: str, args: tuple, size=None) -> tuple[int, ...]:
    """A factory's size from varargs (`zeros(2, 3)`), one sequence (`zeros((2, 3))`) or size=."""
    if size is not None:
        check(not args, lambda: f"{name}() got multiple values for argument 'size'", TypeError)
        args = (size,)
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    for s in args:
        check(
            is_size(s),
            lambda: f"{name}(): argument 'size' must be tuple of ints, but found element of type {type(s).__name__}",
            TypeError,
        )
    check(all(s >= 0 for s in args), lambda: f"{name}: Dimension size must be non-negative.", RuntimeError)
    return tuple(args)


def factory_device(device) -> torch.device:
    """The device a factory makes its tensor on: device= or torch's default device."""
    if device is None:
        return torch.get_default_device()
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


def check_factory_kwargs(name: str, *, layout=None, out=None, pin_memory=False, generator=None, requires_grad=False) -> None:
    """Refuse, clearly, the factory arguments squall does not model."""
    # a new leaf autograd tracks (its .grad filled by a backward): squall's result would be none
    # (torch's own, a checkpoint's dummy leaf on torch 2.10, is traced as before)
    check(not requires_grad or called_from_torch(), lambda: f"squall: {name}(requires_grad=True) makes a leaf tensor autograd tracks, which a trace does not", NotModelled)
    check(layout in (None, torch.strided), lambda: f"squall: {name}() supports only layout=torch.strided, got {layout}", NotModelled)
    check(not pin_memory, lambda: f"squall: {name}(pin_memory=True) is not supported while tracing", NotModelled)
    check(generator is None, lambda: f"squall: {name}(generator=...) is not supported; seed torch's global generator instead", NotModelled)


def filled(shape: Sequence[int], value, *, device: torch.device, dtype: torch.dtype) -> TensorProxy:
    """A tensor of `shape` full of `value` (a number, or a 0-d tensor broadcast)."""
    if is_tensor(value):
        check(value.ndim == 0, lambda: f"full(): fill_value must be a number or a 0-d tensor, got shape {list(value.shape)}", RuntimeError)
        v = value if value.dtype == dtype else prims.convert_element_type(value, dtype)
        # eager reads a fill tensor on another device (a CPU scalar for a CUDA tensor) as its value
        return prims.broadcast_in_dim(on_device(v, device), tuple(shape), ())
    check(is_number(value), lambda: f"full(): fill_value must be a number, not {type(value).__name__}", TypeError)
    return prims.full(tuple(shape), cast_number(value, dtype), device=device, dtype=dtype)


def _fill_dtype(value) -> torch.dtype:
    if not is_tensor(value):
        return number_dtype(value)
    # a 0-d tensor fill is read as a Python scalar of its kind, as torch does
    if value.dtype == torch.bool:
        return torch.bool
    if value.dtype.is_complex:
        return number_dtype(0j)
    return torch.get_default_dtype() if value.dtype.is_floating_point else torch.int64


# --- zeros, ones, full, empty ---------------------------------------------------------------


def _constant_factory(name: str, value, *torchfns):
    def op(*size_args, size=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None, names=None):
        check_factory_kwargs(name, layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad)
        shape = parse_size(name, size_args, size)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        return filled(shape, value, device=factory_device(device), dtype=dtype)

    op.__name__ = name
    op.__doc__ = f"torch.{name}: a tensor of the given size full of {value} (empty's values are zeros)."
    return torchsymbol(*torchfns)(op)


zeros = _constant_factory("zeros", 0, torch.zeros)
ones = _constant_factory("ones", 1, torch.ones)
# empty's values are unspecified: zeros are as good as any, and deterministic
empty = _constant_factory("empty", 0, torch.empty)


@torchsymbol(torch.full, tags=(Tags.NUMBER_OPERANDS,))
def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, names=None):
    """A tensor of `size` full of `fill_value`; its dtype follows the value's kind by default."""
    check_factory_kwargs("full", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad)
    shape = parse_size("full", (size,))
    dtype = _fill_dtype(fill_value) if dtype is None else dtype
    return filled(shape, fill_value, device=factory_device(device), dtype=dtype)


@torchsymbol(torch.scalar_tensor)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """A 0-d tensor holding the number `s` (default dtype unless dtype= is given)."""
    check_factory_kwargs("scalar_tensor", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    return filled((), s, device=factory_device(device), dtype=dtype)


# --- *_like and new_* ---------------------------------------------------------------------


# a tensor made from another's metadata carries no gradient back to it (eager: requires_grad False)
_NO_GRADIENT = (Tags.STOPS_GRADIENT,)


def _like_factory(name: str, value, *torchfns):
    def op(input, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
        check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
        check_factory_kwargs(name, layout=layout, pin_memory=pin_memory, requires_grad=requires_grad)
        dtype = input.dtype if dtype is None else dtype
        device = input.device if device is None else factory_device(device)
        return filled(input.shape, value, device=device, dtype=dtype)

    op.__name__ = name
    op.__doc__ = f"torch.{name}: a tensor shaped like the input, full of {value}."
    return torchsymbol(*torchfns, tags=_NO_GRADIENT)(op)


zeros_like = _like_factory("zeros_like", 0, torch.zeros_like)
ones_like = _like_factory("ones_like", 1, torch.ones_like)
empty_like = _like_factory("empty_like", 0, torch.empty_like)


@torchsymbol(torch.full_like, tags=(Tags.NUMBER_OPERANDS, *_NO_GRADIENT))
def full_like(input, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
    """A tensor shaped like `input` full of `fill_value`, of input's dtype unless dtype= is given."""
    check(is_tensor(input), lambda: f"full_like(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    check_factory_kwargs("full_like", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad)
    dtype = input.dtype if dtype is None else dtype
    device = input.device if device is None else factory_device(device)
    return filled(input.shape, fill_value, device=device, dtype=dtype)


def _new_factory(name: str, value, *torchfns):
    def op(self, *size_args, size=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
        check_factory_kwargs(name, layout=layout, pin_memory=pin_memory, requires_grad=requires_grad)
        shape = parse_size(name, size_args, size)
        dtype = self.dtype if dtype is None else dtype
        device = self.device if device is None else factory_device(device)
        return filled(shape, value, device=device, dtype=dtype)

    op.__name__ = name
    op.__doc__ = f"Tensor.{name}: a tensor of the given size full of {value}, of self's dtype and device by default."
    return torchsymbol(*torchfns, tags=_NO_GRADIENT)(op)


new_zeros = _new_factory("new_zeros", 0, torch.Tensor.new_zeros)
new_ones = _new_factory("new_ones", 1, torch.Tensor.new_ones)
new_empty = _new_factory("new_empty", 0, torch.Tensor.new_empty)


@torchsymbol(torch.Tensor.new_full, tags=_NO_GRADIENT)
def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """A tensor of `size` full of `fill_value`, of self's dtype and device by default."""
    check_factory_kwargs("new_full", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad)
    shape = parse_size("new_full", (size,))
    dtype = self.dtype if dtype is None else dtype
    device = self.device if device is None else factory_device(device)
    return filled(shape, fill_value, device=device, dtype=dtype)


# --- tensors from Python data ---------------------------------------------------------------


def _constant_from_data(name: str, data, *, dtype, device) -> TensorProxy:
    """Python data becomes a trace-time constant; data holding traced tensors cannot."""
    if any(isinstance(x, TensorProxy) for x in tree_flatten(data)[0]):
        raise TypeError(
            f"squall: {name}() was given data containing traced tensors; its values are not known "
            "while tracing. Use torch.stack / torch.cat (or .to(dtype)) to build a tensor from tensors."
        )
    flat = tree_flatten(data)[0]
    if any(type(x) is SymInt for x in flat):
        # a symbolic size in the data (torch.tensor(n), torch.tensor([pos]) with an int argument
        # made a size, `DynamicDims.number_size`): filled at run time, not a constant of its value
        with torch._C.DisableTorchFunction():
            like = torch.tensor(concrete_value(data), dtype=dtype, device=device)
        items = [prims.full((1,), x, device=like.device, dtype=like.dtype) for x in flat]
        return prims.reshape(items[0] if len(items) == 1 else prims.cat(items, 0), tuple(like.shape))
    with torch._C.DisableTorchFunction():
        t = torch.tensor(data, dtype=dtype, device=device)
    return current_context().constant(t)


@torchsymbol(torch.tensor)
def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """torch.tensor of Python data: a constant of the trace."""
    check_factory_kwargs("tensor", pin_memory=pin_memory, requires_grad=requires_grad)
    return _constant_from_data("tensor", data, dtype=dtype, device=device)


@torchsymbol(torch.as_tensor)
def as_tensor(data, dtype=None, device=None):
    """A tensor given as is (converted if dtype/device ask), or Python data as a constant."""
    if is_tensor(data):
        converted = data if dtype is None or dtype == data.dtype else prims.convert_element_type(data, dtype)
        return converted if device is None else on_device(converted, target_device(factory_device(device)))
    return _constant_from_data("as_tensor", data, dtype=dtype, device=device)


@torchsymbol(torch.Tensor.new_tensor)
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """Python data as a constant of self's dtype and device unless told otherwise."""
    check_factory_kwargs("new_tensor", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad)
    dtype = self.dtype if dtype is None else dtype
    device = self.device if device is None else factory_device(device)
    return _constant_from_data("new_tensor", data, dtype=dtype, device=device)


# --- ranges -------------------------------------------------------------------------------


def _scalar_arg(name: str, what: str, x):
    check(is_number(x) and not isinstance(x, complex), lambda: f"{name}(): argument '{what}' must be a real number, not {type(x).__name__}", TypeError)
    return x


@torchsymbol(torch.arange)
def arange(start=None, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """[start, end) by step; int64 when every bound is an int, the default float dtype otherwise."""
    # start's default is None, not torch's 0: a call that leaves an argument at its default
    # prints without it, and `arange(0)` printed as `arange()` is no call torch accepts
    check_factory_kwargs("arange", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad)
    check(start is not None or end is not None, lambda: "arange() missing 1 required positional arguments: \"end\"", TypeError)
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    for what, x in (("start", start), ("end", end), ("step", step)):
        _scalar_arg("arange", what, x)
    if dtype is None:
        dtype = torch.int64 if all(map(is_size, (start, end, step))) else torch.get_default_dtype()
    device = factory_device(device)
    if dtype == torch.int64:
        # torch computes an int64 range from the bounds truncated to integers
        check(step != 0, lambda: "step must be nonzero", RuntimeError)
        start, end, step = (x if type(x) is SymInt else int(x) for x in (start, end, step))  # a symbolic bound stays one
        check(step != 0, lambda: "step must be nonzero", ValueError)
        check((end - start) * step >= 0, lambda: "upper bound and lower bound inconsistent with step sign", RuntimeError)
        sign = (step > 0) - (step < 0)
        length = max((end - start + step - sign) // step, 0)
        return prims.iota(length, start=start, step=step, device=device, dtype=dtype)
    check(step != 0, lambda: "step must be nonzero", RuntimeError)
    check((end - start) * step >= 0, lambda: "upper bound and lower bound inconsistent with step sign", RuntimeError)
    if all(map(is_size, (start, end, step))):  # `arange(n, dtype=torch.float32)`: the int64 length, n symbolic or not
        length = max((end - start + step - ((step > 0) - (step < 0))) // step, 0)
    else:
        length = max(math.ceil((float(end) - float(start)) / float(step)), 0)
    if dtype.is_floating_point:
        return prims.iota(length, start=float(start), step=float(step), device=device, dtype=dtype)
    check(dtype != torch.bool and not dtype.is_complex, lambda: f"arange() does not support dtype {dtype}", RuntimeError)
    return prims.iota(length, start=int(start), step=int(step), device=device, dtype=dtype)


@torchsymbol(torch.linspace)
def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """`steps` evenly spaced values from start to end, computed like torch's kernel (from both ends)."""
    check_factory_kwargs("linspace", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad)
    _scalar_arg("linspace", "start", start)
    _scalar_arg("linspace", "end", end)
    check(isinstance(steps, int) and not isinstance(steps, bool), lambda: f"linspace(): argument 'steps' must be int, not {type(steps).__name__}", TypeError)
    check(steps >= 0, lambda: "number of steps must be non-negative", RuntimeError)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    device = factory_device(device)
    if steps <= 1:
        return prims.full((steps,), cast_number(start, dtype), device=device, dtype=dtype)
    # torch's kernel: start + step * i for the first half, end - step * (steps - 1 - i) for the rest,
    # in float64 for integer results and float32 for low-precision ones
    compute = torch.float64 if not dtype.is_floating_point else (torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype)
    if not dtype.is_floating_point:
        start, end = int(start), int(end)  # torch truncates the bounds to the integer dtype first
    last = steps - 1
    if type(steps) is SymInt:
        # a size: the program computes the step at this call's steps, in `compute` as the kernel
        # does, rather than read and guard it (a compile per length)
        bound = functools.partial(prims.full, (), device=device, dtype=compute)
        step = prims.broadcast_in_dim(prims.div(prims.sub(bound(float(end)), bound(float(start))), last), (steps,), ())
    else:
        step, last = (float(end) - float(start)) / last, float(last)
    idx = prims.iota(steps, start=0, step=1, device=device, dtype=torch.int64)
    fidx = prims.convert_element_type(idx, compute)
    from_start = prims.add(prims.mul(fidx, step), float(start))
    from_end = prims.sub(float(end), prims.mul(prims.sub(last, fidx), step))
    values = prims.where(prims.lt(idx, steps // 2), from_start, from_end)
    return values if values.dtype == dtype else prims.convert_element_type(values, dtype)


@torchsymbol(torch.eye)
def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """An n x m tensor with ones on the diagonal."""
    check_factory_kwargs("eye", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad)
    m = n if m is None else m
    check(n >= 0, lambda: f"n must be greater or equal to 0, got {n}", RuntimeError)
    check(m >= 0, lambda: f"m must be greater or equal to 0, got {m}", RuntimeError)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    device = factory_device(device)
    rows = prims.broadcast_in_dim(prims.iota(n, start=0, step=1, device=device, dtype=torch.int64), (n, m), (0,))
    cols = prims.broadcast_in_dim(prims.iota(m, start=0, step=1, device=device, dtype=torch.int64), (n, m), (1,))
    return prims.convert_element_type(prims.eq(rows, cols), dtype)
