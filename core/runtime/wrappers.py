"""How a compiled module composes with what wraps it: module hooks, DDP and FSDP2.

A compiled module's forward is generated code, but the hooks on the module a user handed
to `squall.jit` (its top level) and on the `JittedModule` that stands for it run eagerly,
around the compiled forward, at every call, as `nn.Module.__call__` would run them. That
is what lets PyTorch's own distributed wrappers work on compiled modules unchanged:

- `DDP(squall.jit(model))`: DDP calls the compiled module and reduces the gradients that
  its autograd node hands to each parameter.
- `fully_shard(squall.jit(block))` or `squall.jit(fully_shard(block))`: FSDP2's forward
  pre-hook all-gathers the parameters and puts the unsharded tensors in the module's
  parameter slots, which the compiled forward reads at every call; its post-hook puts the
  shards back. The trace only ever sees plain tensors.

The other attributes of the original are reached through the compiled module too
(`original_attribute`): `jitted.config` is the original's, and a method of the original's
class runs with the original as `self`, seen through a compiled call, so that
`jitted.generate(...)` (transformers' generation loop, which calls `self(...)` at every
step) runs the compiled forward; the original itself is never changed.

What cannot work is tracing *through* a wrapper: DDP's forward and FSDP2's hooks talk to
process groups, and a trace would record their work once instead of doing it every step.
`check_wrapping` refuses those programs with an error saying which order works.
"""
from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.modules import module as _nn_module

__all__ = ["hook_dicts", "call_with_hooks", "check_wrapping", "check_plain_parameters", "UnsupportedWrapping", "original_attribute"]


class UnsupportedWrapping(TypeError):
    """A compiled program would trace through a distributed wrapper (DDP, FSDP) instead of running it."""


def hook_dicts(module: torch.nn.Module, *, with_global: bool = True) -> tuple[dict, ...]:
    """The dicts holding the forward and backward hooks a call of `module` runs: its own, and
    (`with_global`) the global ones. A call has a hook to run exactly when one is not empty."""
    own = (module._forward_pre_hooks, module._forward_hooks, module._backward_pre_hooks, module._backward_hooks)
    if not with_global:
        return own
    return own + (
        _nn_module._global_forward_pre_hooks,
        _nn_module._global_forward_hooks,
        _nn_module._global_backward_pre_hooks,
        _nn_module._global_backward_hooks,
    )


def call_with_hooks(module: torch.nn.Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
    """`forward(*args, **kwargs)` with `module`'s own hooks around it, as `module(...)` would run
    them (forward pre-hooks, forward hooks, full and legacy backward hooks); the global hooks
    are left to the caller, which runs them once per call."""
    for hook_id, hook in tuple(module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    full = list(module._backward_hooks.values()) if module._is_full_backward_hook is True else []
    legacy = list(module._backward_hooks.values()) if module._is_full_backward_hook is False else []
    backward_pre = list(module._backward_pre_hooks.values())
    bw_hook = None
    if full or backward_pre:
        bw_hook = torch.utils.hooks.BackwardHook(module, full, backward_pre)
        args = bw_hook.setup_input_hook(args)
    called: set[int] = set()
    try:
        result = forward(*args, **kwargs)
        for hook_id, hook in tuple(module._forward_hooks.items()):
            called.add(hook_id)
            if hook_id in module._forward_hooks_with_kwargs:
                out = hook(module, args, kwargs, result)
            else:
                out = hook(module, args, result)
            if out is not None:
                result = out
    except Exception:
        # the hooks registered with always_call=True run even when the forward raised
        for hook_id, hook in tuple(module._forward_hooks.items()):
            if hook_id in module._forward_hooks_always_called and hook_id not in called:
                try:
                    if hook_id in module._forward_hooks_with_kwargs:
                        hook(module, args, kwargs, None)
                    else:
                        hook(module, args, None)
                except Exception:  # noqa: BLE001 - the forward's own error is the one to raise
                    pass
        raise
    if bw_hook is not None:
        result = bw_hook.setup_output_hook(result)
    if legacy:
        var = result
        while not isinstance(var, torch.Tensor):
            var = next(v for v in var.values() if isinstance(v, torch.Tensor)) if isinstance(var, dict) else var[0]
        if var.grad_fn is not None:
            for hook in legacy:
                var.grad_fn.register_hook(_nn_module._WrappedHook(hook, module))
    return result


def _distributed_wrappers() -> tuple[tuple[type, bool, str], ...]:
    """The wrapper classes a trace must not go through: (class, fine at the top level, what to do instead)."""
    if not torch.distributed.is_available():
        return ()
    from torch.nn.parallel import DistributedDataParallel

    wrappers = ((DistributedDataParallel, False, "wrap the compiled module instead: DDP(squall.jit(model))"),)
    if "torch.distributed.fsdp" not in sys.modules:
        # no module is an FSDP one before FSDP is imported, and importing it costs a second and
        # a half at the first squall.jit of a process
        return wrappers
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    return wrappers + (
        (FullyShardedDataParallel, False, "use FSDP2 (fully_shard) on compiled blocks: fully_shard(squall.jit(block))"),
        (FSDPModule, True, "compile each sharded block (squall.jit(block) before or after fully_shard(block)), not the model around them"),
    )


def check_wrapping(module: torch.nn.Module) -> None:
    """Raise `UnsupportedWrapping` where compiling `module` would trace through DDP's forward, an
    FSDP1 module, or the hooks of an FSDP2 module below the top level (the top level's hooks run
    eagerly around the compiled forward, so `squall.jit(fully_shard(block))` is fine)."""
    wrappers = _distributed_wrappers()
    classes = tuple(cls for cls, _, _ in wrappers)  # (one isinstance per module: this runs at every compile)
    for name, sub in module.named_modules():
        if not isinstance(sub, classes):
            continue
        for cls, fine_at_top, advice in wrappers:
            if isinstance(sub, cls) and not (fine_at_top and not name):
                where = f"its submodule {name!r}" if name else "it"
                raise UnsupportedWrapping(
                    f"squall.jit({type(module).__name__}): {where} is a {cls.__name__}, whose forward "
                    f"communicates across processes at every step and cannot be traced; {advice}"
                )


def check_plain_parameters(names: list[str], tensors: list[torch.Tensor]) -> None:
    """Raise where a parameter is a DTensor when a program is compiled: squall traces plain
    tensors, and FSDP2 hands the compiled forward its unsharded parameters only when its
    hooks ran (they do when it wraps the module, or is the module, that squall.jit compiled)."""
    if not torch.distributed.is_available() or "torch.distributed.tensor" not in sys.modules:
        return  # (no tensor is a DTensor before DTensor's module is imported)
    from torch.distributed.tensor import DTensor

    for name, t in zip(names, tensors):
        if isinstance(t, DTensor):
            raise UnsupportedWrapping(
                f"squall.jit: parameter {name!r} is a sharded DTensor when the module is called; squall compiles "
                "plain tensors. Shard the compiled module with fully_shard (its hooks unshard the parameters "
                "before each compiled forward), or compile the fully_shard-ed block itself."
            )


def original_attribute(jitted: torch.nn.Module, original: torch.nn.Module, name: str) -> Any:
    """Attribute `name` of the original module, reached through its compiled module `jitted`:
    a method of the original's class comes bound to the original as seen through a compiled
    call, so that where it calls `self(...)` or `self.__call__` the compiled forward runs."""
    value = getattr(original, name)
    if type(value) is types.MethodType and value.__self__ is original and not isinstance(value.__func__, types.BuiltinFunctionType):
        if getattr(torch.nn.Module, name, None) is not getattr(type(original), name, None):  # the model's own, not nn.Module's
            return types.MethodType(value.__func__, _compiled_view(jitted, original))
    return value


_COMPILED_VIEW_CLASSES: dict[type, type] = {}


def _compiled_view(jitted: torch.nn.Module, original: torch.nn.Module) -> torch.nn.Module:
    """The original module, sharing its `__dict__` (its attributes, parameters and submodules
    are the original's), as an instance of a subclass of its class whose calls run `jitted`."""
    view = jitted.__dict__.get("_squall_compiled_view")
    if view is None:
        cls = type(original)
        view_class = _COMPILED_VIEW_CLASSES.get(cls)
        if view_class is None:
            namespace = {
                "__slots__": ("_squall_compiled",),  # its own: the shared __dict__ is the original's
                "__call__": lambda self, *args, **kwargs: self._squall_compiled(*args, **kwargs),
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
            }
            view_class = _COMPILED_VIEW_CLASSES[cls] = type(cls.__name__, (cls,), namespace)
        view = object.__new__(view_class)
        object.__setattr__(view, "__dict__", original.__dict__)
        object.__setattr__(view, "_squall_compiled", jitted)  # the slot: nn.Module.__setattr__ would register it
        jitted.__dict__["_squall_compiled_view"] = view  # not a submodule of jitted
    return view
