"""Which calls nvFuser takes: the rules every prim shares, then each translator's own.

Called with proxies at compile time. They judge fitness, not validity (the prims' meta
functions already checked that): every tensor on a CUDA device, of a dtype in
`translate.NV_DTYPES`, of rank at most `MAX_RANK`; numbers real (bool, int, float);
dtype arguments translatable; then the translator's `accepts` rule, if it has one.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from squall.extend import NumberProxy, TensorProxy
from squall_nvfuser.translate import NV_DTYPES, Translator

__all__ = ["MAX_RANK", "why_not", "fits", "make_checker"]

# nvFuser's kernels index tensors of up to 8 dimensions (Thunder's nvFuser executor uses the same bound)
MAX_RANK = 8


def why_not(*args: Any, **kwargs: Any) -> str:
    """Why nvFuser would not take a call with these arguments ("" when it would)."""
    leaves, _ = tree_flatten((args, kwargs))
    saw_tensor = False
    for x in leaves:
        if isinstance(x, TensorProxy):
            saw_tensor = True
            if x.device.type != "cuda":
                return f"a tensor is on {x.device}, not CUDA"
            if x.dtype not in NV_DTYPES:
                return f"dtype {x.dtype} is not supported"
            if x.ndim > MAX_RANK:
                return f"rank {x.ndim} is above {MAX_RANK}"
        elif type(x) is NumberProxy:
            # a region is defined for constant scalars: a number read at run time stays with torch
            return "a number known only at run time (a dynamic Python number)"
        elif isinstance(x, complex):
            return "complex numbers are not supported"
        elif isinstance(x, torch.dtype) and x not in NV_DTYPES:
            return f"dtype {x} is not supported"
    return "" if saw_tensor else "no tensor operand"


def fits(*args: Any, **kwargs: Any) -> bool:
    """Whether the common rules (device, dtype, rank, numbers) allow a call with these arguments."""
    return not why_not(*args, **kwargs)


def make_checker(prim_id: str, translator: Translator) -> Callable[..., bool]:
    """The checker for `prim_id`: the common rules, then the translator's `accepts`."""
    accepts = translator.accepts

    def checker(*args: Any, **kwargs: Any) -> bool:
        return fits(*args, **kwargs) and (accepts is None or bool(accepts(*args, **kwargs)))

    checker.__name__ = f"_{prim_id.rpartition('.')[2]}_checker"
    return checker
