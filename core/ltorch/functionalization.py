"""How in-place ops and views become functional.

A squall trace is functional: every recorded call makes new values and changes none.
Torch programs are not: `x.add_(1)`, `F.relu(x, inplace=True)`, `x[0] = 1` and
`F.batch_norm` in training (which updates the running statistics it is given) change
tensors the program holds, and a view shares memory with its base.

**In-place ops.** Each torch callable that changes an argument is declared as a
`TorchForm` of a functional ltorch op: `inplace(add, torch.Tensor.add_)`,
`inplace(relu, F.relu, flag="inplace")`, `TorchForm(batch_norm, F.batch_norm,
updates=(...))`. A form binds the call to its torch signature (`Symbol.normalize`,
defaults applied), calls the functional op, which is what the trace records, and
*writes back* its result: `rebind_inplace` makes the handle the program holds (the
`TensorProxy` object) stand for the new value (`TracingContext.rebind`). Calls recorded
earlier keep the old value under its old name, later calls see the new one, and a tensor
the caller passed in (or a captured constant) gets its final value copied back when the
program ends, as eager would have modified it. A form is never recorded itself; it may
also answer a call without recording anything (`x.to(x.dtype)` is `x`, as torch returns
`self`). Torch calls squall does not model (opaque ops) are written back the same way:
the dispatcher runs them on the meta device, and an argument whose version counter
moved was modified in place (`opaque_writes`).

**Views.** A view shares memory with its base: `squall.frontend.views.ViewTracker` records each
view's root and the view calls that lead to it, applies a write through a view to its
root (scattered back through each call's inverse), and regenerates the root's other views
from its newest value before their next use, as PyTorch's functionalization does.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable

import torch
from torch.utils._pytree import tree_flatten

from .. import prims
from .torchnames import qualified_name
from ..proxies import TensorProxy, current_context
from ..symbol import Symbol
from ..symbolic import concrete_shape
from .unmodelled import NotModelled

__all__ = ["TorchForm", "inplace", "rebind_inplace", "opaque_writes"]


class TorchForm(Symbol):
    """A torch callable that reaches the ltorch op `op` through more than a plain call.

    The one way squall declares in-place ops, `inplace=` flags, arguments an op updates
    and calls answered without recording. A form is never recorded: calling it binds the
    call to `signature` (by default the torch callable's own, or `op`'s when torch's has
    none in Python) with `Symbol.normalize`, then:

    - `before(*args, **kwargs)`, if given, sees the bound call first; a result other than
      None answers the call and nothing is recorded (a conversion that changes nothing
      returns its input);
    - `op` is called with the bound arguments, `flag` left out, and is recorded;
    - `writes`: the position of the parameter the op's result is written into; the form
      returns that tensor (`Tensor.add_`). With `flag`, only when that argument is true
      (`F.relu(x, inplace=True)`);
    - `updates`: parameters that receive an op's extra results: when the op returns a
      tuple it is (output, new value of updates[0], ...), and the form returns the output
      (`F.batch_norm` updating its running statistics);
    - `checks_overlap`: torch's call refuses an operand whose memory partly overlaps the tensor
      it writes (its TensorIterator's check: `x[1:] += x[:-1]`); so does the form, before the op
      (`ViewTracker.check_overlap`). An int: the position of the argument indexing the part of
      the tensor the op writes (`__setitem__`'s key), which is what torch checks.
    """

    __slots__ = ("op", "before", "flag", "writes", "updates", "checks_overlap", "_own", "_names", "_n", "_flag_at", "_update_at", "_by_name")

    def __init__(
        self,
        op: Callable,
        *torchfns: Callable,
        signature: Callable | None = None,
        before: Callable | None = None,
        flag: str | None = None,
        writes: int | None = None,
        updates: Iterable[str] = (),
        checks_overlap: bool | int = False,
    ):
        name = qualified_name(torchfns[0])
        op_signature = getattr(op, "meta", op)
        if signature is None:
            signature = torchfns[0] if _has_signature(torchfns[0]) else op_signature
        super().__init__(name, name.rsplit(".", 1)[-1], signature, is_prim=False, torchfns=torchfns)
        self.op, self.before, self.flag, self.writes, self.updates = op, before, flag, writes, tuple(updates)
        self.checks_overlap = checks_overlap
        # the op's own parameters: the caller's arguments go to the op as they are
        self._own = signature is op_signature and flag is None and not self.updates
        params = list(inspect.signature(signature).parameters.values())
        self._names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
        self._n = None if variadic else len(self._names)  # how many arguments a bound call has
        self._flag_at = self._names.index(flag) if flag is not None else None
        self._update_at = tuple(self._names.index(u) for u in self.updates)
        # the caller's keywords reach the op by name when the op's parameters share the names
        op_names = set(inspect.signature(op_signature).parameters)
        self._by_name = all(n in op_names for n in self._names if n != flag)

    def __call__(self, *args, **kwargs):
        if self._own:
            # the op binds the call itself; only the written tensor is needed here
            if self.before is not None:
                answer = self.before(*args, **kwargs)
                if answer is not None:
                    return answer
            if self.writes is None:
                return self.op(*args, **kwargs)
            target = args[self.writes] if len(args) > self.writes else self.normalize(args, kwargs)[0][self.writes]
            if self.checks_overlap is not False:
                _check_overlap(self, target, args, kwargs)
            return rebind_inplace(self.id, target, self.op(*args, **kwargs))
        named = kwargs.keys()
        bound, bound_kwargs = self.normalize(args, kwargs)
        if self._n is not None and len(bound) != self._n:
            # the signature does not take this call: Python's own message says why
            try:
                inspect.signature(self.meta).bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{self.name}(): {e}") from None
        if self.before is not None:
            answer = self.before(*bound, **bound_kwargs)
            if answer is not None:
                return answer
        if self.checks_overlap is not False and self.writes is not None and (self._flag_at is None or bound[self._flag_at]):
            _check_overlap(self, bound[self.writes], bound, bound_kwargs, bound=True)
        result = self.op(*self._op_args(bound, named), **self._op_kwargs(bound, bound_kwargs, named))
        if self.writes is not None:
            if self._flag_at is None or bound[self._flag_at]:
                return rebind_inplace(self.id, bound[self.writes], result)
            return result
        if self.updates and type(result) is tuple:
            for at, value in zip(self._update_at, result[1:]):
                rebind_inplace(f"{self.id} ({self._names[at]})", bound[at], value)
            return result[0]
        return result

    def _op_args(self, bound: tuple, named) -> list:
        # positional up to the first parameter the caller named (when the op has its names)
        out = []
        for name, value in zip(self._names, bound):
            if self._by_name and name in named:
                break
            if name != self.flag:
                out.append(value)
        return out

    def _op_kwargs(self, bound: tuple, bound_kwargs: dict, named) -> dict:
        if not self._by_name:
            return bound_kwargs
        out, by_name = {}, False
        for name, value in zip(self._names, bound):
            by_name = by_name or name in named
            if by_name and name != self.flag:
                out[name] = value
        out.update(bound_kwargs)
        return out

    def __repr__(self) -> str:
        return f"<TorchForm {self.id} -> {getattr(self.op, 'id', self.op)}>"


def _has_signature(fn: Callable) -> bool:
    try:
        inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin: its parameters are not visible from Python
        return False
    return True


def inplace(op: Callable, *torchfns: Callable, flag: str | None = None, checks_overlap: bool | int = False) -> TorchForm:
    """The in-place form of `op` (`torch.Tensor.add_` for `add`): its result is written
    into its first argument, or, with `flag`, only when that argument is true
    (`inplace(relu, F.relu, flag="inplace")`); `checks_overlap` where torch's call refuses an
    operand partly overlapping the tensor it writes (`TorchForm`)."""
    return TorchForm(op, *torchfns, writes=0, flag=flag, checks_overlap=checks_overlap)


def _check_overlap(form: TorchForm, target, args: tuple, kwargs: dict, bound: bool = False) -> None:
    """Eager's check, before in-place `form` writes `target`, of the call's other tensors (`bound`:
    `args` and `kwargs` are bound to the form's signature already)."""
    views = current_context().views
    if not isinstance(target, TensorProxy) or not views.has_views(target):
        return  # (the common case, before binding the call)
    if not bound:
        args, kwargs = form.normalize(args, kwargs)
    at = form.checks_overlap if type(form.checks_overlap) is int else None
    operands = tree_flatten([a for i, a in enumerate(args) if i != at] + list(kwargs.values()))[0]
    views.check_overlap(form.id, target, operands, key=args[at] if at is not None else None)


def rebind_inplace(name: str, a, value):
    """Give tensor `a` the result `value` of an in-place op, as torch would (no broadcast, safe casts)."""
    if not isinstance(a, TensorProxy):
        raise TypeError(f"{name} expects a tensor to modify, got {type(a).__name__}")
    if value is a:  # the op left its input as it was (dropout when not training)
        return a
    if value.shape != a.shape:
        raise RuntimeError(
            f"{name}: output with shape {list(a.shape)} doesn't match the broadcast shape {list(value.shape)}"
        )
    if value.dtype != a.dtype:
        if not torch.can_cast(value.dtype, a.dtype):
            raise RuntimeError(f"{name}: result type {value.dtype} can't be cast to the desired output type {a.dtype}")
        value = prims.convert_element_type(value, a.dtype)
    # a view's base and the base's other views follow the write (squall.frontend.views)
    return current_context().views.write(a, value)


# in-place calls that make their argument share another tensor's memory
_SHARES_STORAGE = frozenset({"torch.Tensor.set_"})


def opaque_writes(name: str, metas: list[tuple[TensorProxy, torch.Tensor, int]], meta_out, result):
    """Write back what an opaque torch call changed in place.

    `metas` pairs each tensor argument with the meta tensor the call ran on and that
    tensor's version before the call; a version that moved means the call wrote into it.
    A written argument that the call returned (an in-place method returns `self`) takes
    the call's result; any other write is one squall cannot follow, and is refused.
    """
    for proxy, meta, version in metas:
        if tuple(meta.shape) != concrete_shape(proxy.shape) or not meta.is_contiguous() or name in _SHARES_STORAGE:
            # each meta tensor was made contiguous, of its proxy's sizes: the call changed its metadata
            raise NotModelled(
                f"squall: {name} changes the shape, strides or storage of tensor {proxy.name} in place, which squall's "
                "traces do not model (a value has one layout). Use the out-of-place form (x = x.t(), x = x.unsqueeze(0), "
                "x = x.reshape(...)), or call it outside the compiled function"
            )
        if meta._version == version:
            continue
        if meta_out is not meta:
            raise NotModelled(
                f"squall: {name} modifies its argument {proxy.name} in place without returning it; "
                "squall cannot follow that write. Call it outside the compiled function."
            )
        return rebind_inplace(name, proxy, result)
    return result
