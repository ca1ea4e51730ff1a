"""A traced call's Python and numpy arguments as torch reads them: Python's number types where it
takes a dtype, numpy scalars where it takes a number (or data), and a clear refusal of numpy
arrays (squall.ltorch.base's dispatch calls these)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import torch
from torch.utils._pytree import tree_flatten

__all__ = ["DATA_FACTORIES", "plain_arguments", "numpy_scalars", "refuse_numpy_arrays"]


# Python's number types where torch takes a dtype (`torch.ones(3, dtype=bool)`, `x.to(float)`)
_PYTHON_DTYPES: dict[type, torch.dtype] = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


# numpy's scalar types: torch reads one where it wants a number as the Python number of its kind
# (`x * numpy.float32(2)` promotes as `x * 2.0`; a numpy bool or complex as a float, as eager's
# argument parser does), except where it takes data (`torch.tensor(numpy.float16(1))` keeps float16)
_NUMPY_SCALARS = frozenset(t for t in numpy.sctypeDict.values() if issubclass(t, (numpy.number, numpy.bool_)))
DATA_FACTORIES = frozenset({torch.tensor, torch.as_tensor, torch.asarray, torch.Tensor.new_tensor})


def _numpy_scalar_as_python(x: Any) -> Any:
    # float() of a numpy complex drops its imaginary part with numpy's ComplexWarning, as eager does
    return int(x) if isinstance(x, numpy.integer) else float(x)


def plain_arguments(func: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call with Python's number types given as the dtypes torch reads them as (and a data
    factory's numpy scalars as Python numbers of numpy's dtype, `_numpy_data`); the call itself
    where there is none (the usual case: two scans, nothing copied). Other numpy scalars are
    read where an op refuses them (`numpy_scalars`), which costs the common call nothing."""
    for a in args:  # a plain loop: this runs for every traced call
        if type(a) is type:
            break
    else:
        for v in kwargs.values():
            if type(v) is type:
                break
        else:
            return _numpy_data(func, args, kwargs) if func in DATA_FACTORIES else (args, kwargs)
    args = tuple(_PYTHON_DTYPES.get(a, a) if type(a) is type else a for a in args)
    kwargs = {k: _PYTHON_DTYPES.get(v, v) if type(v) is type else v for k, v in kwargs.items()}
    return _numpy_data(func, args, kwargs) if func in DATA_FACTORIES else (args, kwargs)


def numpy_scalars(args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """The call with its numpy scalars, alone or in a list or tuple (a size), as the Python
    numbers torch reads them as, or None where it has none: for an op that refused the call."""
    def plain(v: Any) -> Any:
        t = type(v)
        if t in _NUMPY_SCALARS:
            return _numpy_scalar_as_python(v)
        if (t is tuple or t is list) and not _NUMPY_SCALARS.isdisjoint(map(type, v)):
            return t(_numpy_scalar_as_python(i) if type(i) in _NUMPY_SCALARS else i for i in v)
        return v

    new_args, new_kwargs = tuple(plain(a) for a in args), {k: plain(v) for k, v in kwargs.items()}
    changed = any(x is not y for x, y in zip(new_args, args)) or any(new_kwargs[k] is not kwargs[k] for k in kwargs)
    return (new_args, new_kwargs) if changed else None


def _python_data(data: Any) -> Any:
    """`data` (a number, or lists and tuples of them) with each numpy scalar as a Python number."""
    t = type(data)
    if t in _NUMPY_SCALARS:
        return _numpy_scalar_as_python(data)
    if t is list or t is tuple:
        items = [_python_data(v) for v in data]
        return data if all(a is b for a, b in zip(items, data)) else t(items)
    return data


def _numpy_data(func: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A data factory's call with numpy scalars in its data (at any depth) as Python numbers,
    and the dtype eager makes of them (`torch.tensor(numpy.float64(2.5))` is float64) given
    where none is: the trace prints its data as Python literals, which torch reads as Python
    numbers (float32). The call itself where its data holds no numpy scalar."""
    at = 1 if func is torch.Tensor.new_tensor else 0  # new_tensor's dtype is its tensor's, not the data's
    if len(args) <= at:
        return args, kwargs
    data = args[at]
    plain = _python_data(data)
    if plain is data:
        return args, kwargs
    if kwargs.get("dtype") is None and at == 0 and len(args) == 1 and not any(isinstance(v, torch.Tensor) for v in tree_flatten(plain)[0]):
        with torch._C.DisableTorchFunction():
            kwargs = {**kwargs, "dtype": torch.tensor(data).dtype}
    return (*args[:at], plain, *args[at + 1:]), kwargs


def refuse_numpy_arrays(name: str, args: tuple, kwargs: dict, refused: TypeError) -> None:
    """Raise a TypeError saying what to do where an op refused a numpy array operand: eager's
    `tensor * array` is computed by numpy on the tensor's data (numpy's promotion, its result
    wrapped as a tensor), which a trace cannot do; most torch functions refuse one in eager too."""
    if any(type(v) is numpy.ndarray for v in (*args, *kwargs.values())):
        raise TypeError(
            f"squall: {name} got a numpy array operand, which squall cannot trace (eager computes "
            "`tensor * array` in numpy on the tensor's data); convert it first with "
            "torch.as_tensor(array), outside the compiled function or inside it"
        ) from refused
