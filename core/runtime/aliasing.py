"""Inputs that share memory: found at call time, traced as eager would run them.

A compiled program is functional: it reads its inputs, computes, and copies the final
value of each input it modified back at the end. That is eager's result only when the
inputs it modified share no memory with the inputs it reads: in `f(t, t)`, where `f`
does `a.add_(1); return b * 2`, eager's `b` sees the update. So an entry whose program
writes into an input (`Compilation.writes_inputs`) has an "alias" guard in its guard set
(`squall.runtime.entry`), which looks at the storages of the call's tensors in the entry's
one check; where it fails, `squall.runtime` finds the pattern (`alias_pattern`):

- all distinct (the usual case): the entry's own code runs; the check reads one storage
  address per tensor (about 0.3 us each), and only programs that write an input pay it;
- some are the *same* tensor (same storage, offset, shape, strides, dtype): the call runs a
  variant traced with one input proxy bound to each of their places (`same_as`), so an
  update through one is seen through the others, as in eager;
- some overlap without being the same (views of one tensor): the call runs eagerly, with a
  `SquallWarning` naming the inputs; torch then raises its own error where eager does (an
  in-place op between partly overlapping tensors);
- one shares memory with a tensor the program captured (`f(acc)` where `f` adds into the global
  `acc`), which its code holds as a constant apart from its inputs: eagerly, as overlapping
  views. So a program that writes a captured tensor has the check too, over the captured ones.

Variants are kept per pattern (`AliasPattern`), so each compiles once.
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..proxies import TensorProxy
from ..trace import route_value

__all__ = ["AliasPattern", "alias_pattern", "input_tensors", "tensor_paths_of", "tensors_at", "storage_key", "same_as_paths", "describe_path"]

# For each tensor input (in binding order), the index of the first input it is the same
# tensor as (its own index when none); or ("overlapping", i, j) when inputs i and j share
# memory without being the same tensor; or ("captured", i) when input i shares memory with a
# tensor the program captured (a global, a closure variable).
AliasPattern = tuple


def tensor_paths_of(bindings: Sequence[Any]) -> list[tuple]:
    """The paths of the input bindings that are tensors (not a dynamic number, nor an int an
    argument object holds as a size): those the check of shared memory reads."""
    return [b.path for b in bindings if type(b.proxy) is TensorProxy]


def input_tensors(paths: Sequence[tuple], args: tuple, kwargs: dict, takes_params: bool) -> list:
    """The tensors at `paths` (input bindings' paths) in a call of a generated function."""
    return list(tensors_at(paths, takes_params)(args, kwargs))


def _tuple_getter(indices: list[int]) -> Callable[[Sequence], tuple]:
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    if indices:
        i = indices[0]
        return lambda seq: (seq[i],)
    return lambda seq: ()


def tensors_at(paths: Sequence[tuple], takes_params: bool) -> Callable[[tuple, dict], Sequence]:
    """A function of a generated function's (args, kwargs) giving the tensors at `paths`;
    two `itemgetter` calls where they are all parameters and positional arguments (the usual case)."""
    offset = 1 if takes_params else 0
    if all(len(p) == 2 and p[0] in ("params", "args") for p in paths):
        # bindings list parameters first, then arguments
        from_params = _tuple_getter([p[1] for p in paths if p[0] == "params"])
        from_args = _tuple_getter([p[1] + offset for p in paths if p[0] == "args"])
        if not any(p[0] == "params" for p in paths):
            return lambda args, kwargs: from_args(args)
        return lambda args, kwargs: from_params(args[0]) + from_args(args)

    def pick(args: tuple, kwargs: dict) -> list:
        out = []
        for root, *keys in paths:
            if root == "state":  # a tensor an argument object holds: through the call's own object where routed
                owner, key, route = keys
                out.append(route_value(route, args, kwargs, offset) if route is not None else owner[key])
                continue
            if root == "params":
                x = args[0]
            elif root == "args":
                x, keys[0] = args, keys[0] + offset
            else:
                x = kwargs
            for k in keys:
                x = x[k]
            out.append(x)
        return out

    return pick


# a tensor's storage, by the address of its StorageImpl (where this torch has the function)
storage_key = getattr(torch._C, "_storage_address", None) or (lambda t: t.untyped_storage()._cdata)


def alias_pattern(tensors: Sequence[torch.Tensor], captured: Sequence[torch.Tensor] = ()) -> AliasPattern | None:
    """None when no two of `tensors` share a storage, nor one of them with a tensor the program
    `captured` (one pointer read each); else the pattern."""
    keys = {storage_key(t) for t in tensors}
    if len(keys) == len(tensors) and keys.isdisjoint([storage_key(c) for c in captured]):
        return None
    for i, t in enumerate(tensors):
        # the program holds a captured tensor as a constant of its own, apart from its inputs
        if any(_same_storage(c, t) and _relation(c, t) != "disjoint" for c in captured):
            return ("captured", i)
    pattern = list(range(len(tensors)))
    for i, t in enumerate(tensors):
        for j in range(i):
            if pattern[j] != j or not _same_storage(tensors[j], t):
                continue
            relation = _relation(tensors[j], t)
            if relation == "same":
                pattern[i] = j
                break
            if relation == "overlapping":
                return ("overlapping", j, i)
    return tuple(pattern) if pattern != list(range(len(tensors))) else None


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return storage_key(a) == storage_key(b)


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    start = t.storage_offset() * t.element_size()
    span = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1
    return start, start + span * t.element_size()


def _relation(a: torch.Tensor, b: torch.Tensor) -> str:
    """"same", "disjoint" or "overlapping", for two tensors on one storage."""
    if a.numel() == 0 or b.numel() == 0:
        return "disjoint"
    if (
        a.storage_offset() == b.storage_offset()
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.dtype == b.dtype
        # two tensor objects over the same memory are two autograd nodes: one proxy cannot stand for both
        and (a is b or not (a.requires_grad or b.requires_grad))
    ):
        return "same"
    (a0, a1), (b0, b1) = _byte_range(a), _byte_range(b)
    # ranges that meet may still interleave without sharing an element (x[::2], x[1::2]): overlapping, to be safe
    return "disjoint" if a1 <= b0 or b1 <= a0 else "overlapping"


def same_as_paths(pattern: AliasPattern, paths: Sequence[tuple]) -> dict[tuple, tuple]:
    """For a pattern of same tensors: each later place -> the first place of the same tensor."""
    return {paths[i]: paths[j] for i, j in enumerate(pattern) if i != j}


def describe_path(path: tuple, arg_names: Sequence[str], module_tensors: Sequence[str]) -> str:
    """An input's place in words: argument 'x', argument 'xs'[1], buffer 'bn.running_mean'
    (`module_tensors` names a module's parameters and buffers, in their order)."""
    root, first, *rest = path
    if root == "params":
        return module_tensors[first]
    if root == "state":
        return f"the tensor an argument object holds as {rest[0]!r}"  # (owner dict, key, route): squall.frontend.state_guards
    head = f"argument {arg_names[first]!r}" if root == "args" and first < len(arg_names) else f"argument {first!r}"
    if root == "kwargs":
        head = f"keyword argument {first!r}"
    return head + "".join(f"[{k!r}]" for k in rest)
