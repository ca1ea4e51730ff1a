"""The torch language's machinery: @torchsymbol, its errors, and the dispatcher.

`TorchLanguage` maps every torch callable squall knows (`torch.softmax`,
`torch.Tensor.softmax`, `torch.nn.functional.softmax`) to its ltorch op, or to a
`TorchForm` of one (in-place ops and other calls that are more than a plain call; see
`squall.ltorch.functionalization`). A call it
does not know runs as an *opaque* torch op, its output metadata found by running it
on the meta device, with one warning naming the op.
"""
from __future__ import annotations

import collections
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ..proxies import GRADIENT_NOT_MODELLED, TensorProxy, current_context, real_tensor
from ..proxy_methods import TENSOR_METHODS
from ..symbol import Symbol, Tags, running_inside, snapshot_call
from ..symbolic import SymInt, concrete_shape, concrete_value, guarded_int
from . import numbers
from .autocast import AutocastCasts, autocast_state
from .eager_identity import may_return_an_input, returned_inputs
from .functionalization import opaque_writes
from .inlined import INLINED
from .opaque_shapes import output_shapes
from .python_arguments import DATA_FACTORIES, numpy_scalars, plain_arguments, refuse_numpy_arrays
from .torchnames import TORCH_KEYWORD_ALIASES, qualified_name, torch_keywords
from .unmodelled import NotModelled, UndecidedOverlap, UnmodelledMode  # noqa: F401 - where squall.runtime and the frontend take them from

__all__ = [
    "torchsymbol",
    "qualified_name",
    "TorchLanguage",
    "DataDependentError",
    "NotInLanguage",
    "NotModelled",
    "SquallWarning",
]

_is_any_autocast_enabled = torch._C._is_any_autocast_enabled
_autocast_disabled = torch._C._DisableAutocast


class SquallWarning(UserWarning):
    """Warnings squall raises (opaque ops, recompilations, unavailable executors)."""


class DataDependentError(RuntimeError):
    """An operation whose output shape depends on tensor values, which tracing cannot know."""


class NotInLanguage(NotImplementedError):
    """A torch-language op's variant that squall does not model (`interpolate(antialias=True)`):
    raised by the op before it records anything; the program's call runs as an opaque torch call
    instead, with a warning, as an op outside the language does."""


def torchsymbol(*torchfns: Callable, id: str | None = None, tags: Iterable[str] = (), replayable: bool = True) -> Callable[[Callable], Symbol]:
    """Declare an ltorch op standing for `torchfns`; its Python body is its decomposition.

    `replayable=False` for a body that does more than record calls (it notes its result outside
    the trace, as the collectives do): a repeated call then runs its body, not a copy of the
    first call's decomposition (squall.replays).

    The op's signature must accept every call form of its first torch callable: the
    torch executor runs the op as that callable, with the arguments it was traced with.
    """

    def decorate(fn: Callable) -> Symbol:
        sid = id or (qualified_name(torchfns[0]) if torchfns else f"ltorch.{fn.__name__}")
        return Symbol(sid, fn.__name__, fn, is_prim=False, tags=tuple(tags), torchfns=tuple(torchfns), replayable=replayable)

    return decorate


# Ops whose output shape depends on the data: tracing cannot give them a shape.
_DATA_DEPENDENT = {
    "torch.nonzero",
    "torch.Tensor.nonzero",
    "torch.argwhere",
    "torch.Tensor.argwhere",
    "torch.masked_select",
    "torch.Tensor.masked_select",
    "torch.unique",
    "torch.Tensor.unique",
    "torch.unique_consecutive",
    "torch.Tensor.unique_consecutive",
    "torch.bincount",
    "torch.Tensor.bincount",
    "torch.repeat_interleave",  # only with a tensor of repeats; the ltorch op handles ints
}

# layout reads a proxy answers itself, as eager would (squall.frontend.layouts)
_LAYOUT_READS = frozenset({"stride", "is_contiguous", "storage_offset"})
# Calls that return a Python value read from tensor data -> the guard reader (squall.guards) that reads it
_VALUE_READS = {
    "torch.Tensor.item": "item",
    "torch.Tensor.tolist": "tolist",
    "torch.Tensor.__bool__": "bool",
    "torch.Tensor.__int__": "int",
    "torch.Tensor.__float__": "float",
    "torch.Tensor.__index__": "index",
    "torch.allclose": "torch.allclose",
    "torch.Tensor.allclose": "torch.allclose",
    "torch.equal": "torch.equal",
    "torch.Tensor.equal": "torch.equal",
    "torch.is_nonzero": "torch.is_nonzero",
    "torch.Tensor.is_nonzero": "torch.is_nonzero",
}


def data_dependent_error(name: str) -> DataDependentError:
    """The error for `name`, an op whose output shape depends on tensor values, saying what to do instead."""
    return DataDependentError(
        f"squall: {name} returns a tensor whose shape depends on the values of its input, which "
        "tracing cannot know. Outside strict mode squall reads it from the call being compiled "
        "and guards it; here, call it outside the compiled function and pass its result in, "
        "or use a fixed-shape form (e.g. torch.where(mask, x, 0) instead of x[mask])."
    )


def _scan(values, has_proxy: bool, has_tensor: bool) -> tuple[bool, bool]:
    """Whether `values` (and the lists and tuples in them) hold proxies or real tensors."""
    for x in values:
        t = type(x)
        if t is TensorProxy:
            has_proxy = True
        elif t is list or t is tuple:
            has_proxy, has_tensor = _scan(x, has_proxy, has_tensor)
        elif real_tensor(x):
            has_tensor = True
    return has_proxy, has_tensor


_CALL_LEAVES = frozenset({TensorProxy, torch.Tensor, torch.nn.Parameter, int, float, bool, str, type(None), torch.dtype, torch.device})


def _sizes_read(tree: Any) -> Any:
    """`tree` (a call's arguments) with each symbolic size replaced by its value in this call,
    guarded; the same object where it holds none."""
    t = type(tree)
    if t is SymInt:
        return guarded_int(tree)
    if t is tuple or t is list or isinstance(tree, tuple) and any(type(v) is SymInt for v in tree):  # a SymShape, a torch.Size of sizes
        items = [_sizes_read(v) for v in tree]
        if all(a is b for a, b in zip(items, tree)):
            return tree
        return t(items) if t is tuple or t is list else torch.Size(items)
    if t is dict:
        return {k: _sizes_read(v) for k, v in tree.items()}
    return tree


def _map_call(fn: Callable, tree: Any) -> Any:
    """`tree_map(fn, tree)` over a call's arguments: the tuples, lists and dicts calls are made
    of walked directly (pytree's walk cost more than the op at every traced call that passes
    a parameter); any other node or leaf goes to pytree, which decides as before."""
    t = type(tree)
    if t is tuple:
        return tuple([_map_call(fn, v) for v in tree])
    if t is list:
        return [_map_call(fn, v) for v in tree]
    if t is dict:
        return {k: _map_call(fn, v) for k, v in tree.items()}
    if t in _CALL_LEAVES:
        return fn(tree)
    return tree_map(fn, tree)


def _tensor_attribute(func: Callable) -> tuple[str, bool] | None:
    """(name, is a getter) when `func` is a torch.Tensor method or property getter."""
    if getattr(func, "__name__", None) == "__get__":
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", None) or getattr(getattr(owner, "fget", None), "__name__", None)
        return (name, True) if name and torch.Tensor.__dict__.get(name, getattr(torch.Tensor, name, None)) is owner else None
    name = getattr(func, "__name__", None)
    method = getattr(torch.Tensor, name, None) if name else None
    return (name, False) if method is not None and method is func else None


class TorchLanguage:
    """Routes torch calls made while tracing to ltorch ops, or to opaque torch ops."""

    def __init__(self, table: dict[Callable, Callable], wrapped_results: Any = None, autocast_casts: AutocastCasts | None = None):
        """`wrapped_results`: how to read the results torch wraps in a tensor subclass from
        Python, where no torch call shows it (`collectives.WrappedResults`: PyTorch 2.10's
        AsyncCollectiveTensor), or None where this torch wraps none. `autocast_casts`: where
        torch's answers on autocast's casts are kept (shared by the traces that pass one)."""
        self.table = table
        self.wrapped_results = wrapped_results
        self._opaque_symbols: dict[Callable, Symbol] = {}
        self._by_code: dict[types.CodeType, Callable] | None = None  # the table's Python functions by their code (`_rebound`)
        self.warned: set[str] = set()
        self.autocast_casts = autocast_casts or AutocastCasts()  # what torch.autocast converts, per call signature

    def dispatch(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        attribute = getattr(func, "__self__", None)
        if attribute is _GRADIENT_ATTRIBUTE and args and _data_tensor(args[0]):
            # `p.grad` of a real tensor the program reached (a parameter of a module it was given):
            # backward replaces or accumulates it between calls, which a trace would not follow
            raise UnmodelledMode(GRADIENT_NOT_MODELLED)
        if attribute is _DATA_ATTRIBUTE and func.__name__ == "__set__" and args and _data_tensor(args[0]):
            raise UnmodelledMode("squall: the program sets the .data of a tensor it captured (`p.data = ...`), which "
                                 "squall's trace, holding that tensor as it was, does not model")
        if self.wrapped_results is not None:
            layout = self.wrapped_results.layout(func, args)
            if layout is not None:
                return layout
        op = self.table.get(func)
        if op is None and type(func) is types.FunctionType:
            func, op = self._rebound(func)
        if kwargs and op is not None and not TORCH_KEYWORD_ALIASES.isdisjoint(kwargs):
            kwargs = torch_keywords(func, op, args, kwargs)  # `axis=` for `dim=`, as torch's parser takes it
        # a list the program reached through its state (a recording copy, squall.frontend.state_views) is
        # read here as the plain list it holds now, so the scan below finds the tensors in it
        args, kwargs = snapshot_call(args, kwargs)
        args, kwargs = plain_arguments(func, args, kwargs)
        has_proxy, has_tensor = _scan(args, False, False)
        if kwargs:
            has_proxy, has_tensor = _scan(kwargs.values(), has_proxy, has_tensor)
        ctx = current_context()
        if torch.is_inference_mode_enabled() is not ctx.traced_in_inference:
            raise UnmodelledMode(f"squall: the program {'enters' if ctx.traced_in_inference is False else 'leaves'} "
                                 "torch.inference_mode, which squall's traces do not model")
        if has_proxy and not ctx.traced_with_grad and torch.is_grad_enabled() and _requires_grad((args, kwargs)):
            raise UnmodelledMode("squall: the program turns grad mode on (torch.enable_grad) in a call made without it, "
                                 "around tensors that require grad: eager records a graph there, squall's program would not")
        if has_proxy and func in _AUTOGRAD_GRAPH_CALLS:
            raise UnmodelledMode(f"squall: the program calls {qualified_name(func)} on a traced tensor: that belongs to eager's "
                                 "autograd graph, which squall's compiled program does not build tensor by tensor (jit the "
                                 "forward and call backward outside it to have squall differentiate it)")
        if func is torch.Tensor.requires_grad_ and args and type(args[0]) is TensorProxy:
            # modelled where it makes a computed value a leaf requiring grad (squall.frontend.grad_roots)
            return ctx.set_requires_grad(args[0], args[1] if len(args) > 1 else kwargs.get("requires_grad", True))
        if has_proxy and _detaches_in_place(func, args):
            raise UnmodelledMode(f"squall: the program changes whether a traced tensor requires grad ({qualified_name(func)}): "
                                 "eager's later ops and the caller's tensor see that change, squall's program would not")
        if has_proxy and ctx.traced_with_grad and not torch.is_grad_enabled() and _requires_grad((args, kwargs)) and _inside_function_apply():
            raise UnmodelledMode("squall: the program runs a torch.autograd.Function of torch's own on tensors that require grad "
                                 "(torch.utils.checkpoint with use_reentrant=True): its forward runs without grad, and only "
                                 "PyTorch's autograd links its outputs to its inputs and the parameters it reads")
        if has_tensor and self.wrapped_results is not None:
            has_proxy = self.read_through_wrapped(ctx, (args, kwargs.values())) or has_proxy
        if ctx.number_roots and not numbers.takes_numbers(op) and (numbers.has_numbers(args) or numbers.has_numbers(kwargs.values())):
            # an op that cannot take a run-time number gets its value in this call, guarded
            args, kwargs = numbers.specialised(ctx, args, kwargs)
        if has_proxy and ctx.views.stale:
            ctx.views.refresh((args, kwargs))  # views whose base changed since: regenerated first
        if (has_proxy or has_tensor) and _is_any_autocast_enabled():  # (`torch.autocast(..., enabled=False)` leaves it off)
            return self.under_autocast(ctx, func, args, kwargs)
        if op is not None:
            if has_tensor:
                as_proxy = lambda x: ctx.constant(x) if real_tensor(x) else x
                args, kwargs = _map_call(as_proxy, args), _map_call(as_proxy, kwargs)
                if ctx.views.stale:
                    ctx.views.refresh((args, kwargs))
            if kwargs.get("out") is not None:
                raise NotModelled(_writes_into_given(func))
            try:
                out = op(*args, **kwargs)
            except NotInLanguage as variant:
                if len(ctx.scopes) != 1:
                    raise  # inside another op's decomposition: that op fails as a whole
                return self.opaque(func, args, kwargs, unmodelled=str(variant))
            except DataDependentError as refused:
                # an op whose output shape depends on data, called by the program itself: it runs
                # whole as its torch call, shaped as in the call being compiled, and guarded
                if not isinstance(op, Symbol) or ctx.speculation is None or len(ctx.scopes) != 1:
                    raise
                return ctx.speculation.call(qualified_name(func), func, args, kwargs, refused)
            except TypeError as refused:
                refuse_numpy_arrays(qualified_name(func), args, kwargs, refused)
                if "out" in kwargs and "'out'" in str(refused):  # out=None to an op without the parameter
                    raise NotModelled(_writes_into_given(func)) from refused
                # torch takes a one-element integer tensor where it wants an int (a size, a
                # bound): read its value, guarded, and call again with the number; and numpy
                # scalars in a size as the numbers they are
                sized = numpy_scalars(args, kwargs) if func not in DATA_FACTORIES else None
                if sized is None and ctx.speculation is not None and len(ctx.scopes) == 1:
                    sized = ctx.speculation.sizes(args, kwargs)
                if sized is None:
                    if not (ctx.number_roots and numbers.has_numbers((args, kwargs))):
                        raise
                    # an op that takes a number only as a constant there: its value, guarded
                    sized = numbers.specialised(ctx, args, kwargs)
                args, kwargs = sized
                out = op(*args, **kwargs)
            if not torch.is_grad_enabled() and ctx.traced_with_grad and len(ctx.scopes) == 1:
                out = self.as_eager_returns(func, args, kwargs, out)
            ctx.views.note(op, args, kwargs, out)
            return out
        if has_tensor:
            if ctx.substitutes:
                # a module's parameter or buffer (real, the module is never touched): its input proxy
                swap = lambda x: ctx.constant(x) if real_tensor(x) and id(x) in ctx.substitutes else x
                args, kwargs = _map_call(swap, args), _map_call(swap, kwargs)
                attribute = _tensor_attribute(func) if args and type(args[0]) is TensorProxy else None
                if attribute is not None:
                    # what the proxy answers itself (`weight.shape`, `weight.size(0)`), or traces
                    name, is_getter = attribute
                    value = getattr(args[0], name)
                    return value if is_getter else value(*args[1:], **kwargs)
                has_proxy, _ = _scan((args, kwargs.values()), has_proxy, False)
                if has_proxy and ctx.views.stale:
                    ctx.views.refresh((args, kwargs))
        if not has_proxy and not (has_tensor and _computes_on_tensors(func, args, kwargs)):
            # A torch call on constants only (a property of a captured tensor, torch.finfo, ...);
            # a symbolic size among them is read, guarded: torch's C code takes it for its own
            # SymInt and fails on it (`torch.tril_indices(n, n)`)
            return func(*_sizes_read(args), **_sizes_read(kwargs))
        if func in INLINED:
            with TracingMode(self):  # (the mode is off while it handles a call: its body's calls are traced again)
                return INLINED[func](*args, **kwargs)
        return self.opaque(func, args, kwargs)

    def under_autocast(self, ctx: Any, func: Callable, args: tuple, kwargs: dict) -> Any:
        """A call of the program made while torch.autocast is on: the conversions autocast makes of
        its arguments (asked of torch: squall.ltorch.autocast) recorded as the program's own `.to`
        calls, then the call traced on the converted proxies with autocast off, as eager's autocast
        casts once, at the outermost op it lists. Its outputs' dtypes are checked against torch's."""
        name = qualified_name(func)
        if len(ctx.scopes) != 1:
            raise UnmodelledMode(f"squall: torch.autocast is on inside a call squall traces whole ({name} in an op's "
                                 "decomposition), where squall cannot place autocast's dtype casts")
        if name in _VALUE_READS or name in _DATA_DEPENDENT or getattr(func, "__name__", None) in _LAYOUT_READS:
            with _autocast_disabled():  # a value, a data-dependent shape or a layout read: nothing autocast converts
                return self.dispatch(func, args, kwargs)
        leaves, spec = tree_flatten((args, kwargs))
        casts, outputs = self.autocast_casts.casts(func, name, leaves, spec, autocast_state())
        with _autocast_disabled():
            if casts:
                converted: dict[int, Any] = {}
                for i, dtype in casts.items():
                    x = leaves[i]
                    if id(x) not in converted:
                        converted[id(x)] = self.dispatch(torch.Tensor.to, (ctx.constant(x) if real_tensor(x) else x, dtype), {})
                    leaves[i] = converted[id(x)]
                args, kwargs = tree_unflatten(leaves, spec)
            out = self.dispatch(func, args, kwargs)
        traced = tuple(o.dtype for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor))
        if traced != outputs and outputs:  # (a call torch answers with None, `x[i] = v`, returns what squall's form of it does)
            raise UnmodelledMode(f"squall: under torch.autocast, {name} traced on autocast's converted arguments returns "
                                 f"{[str(d) for d in traced]} where torch returns {[str(d) for d in outputs]}")
        return out

    def as_eager_returns(self, func: Callable, args: tuple, kwargs: dict, out: Any) -> Any:
        """`out`, a call's result under no_grad, holding eager's objects: the input itself where eager
        returns its input (a gradient still reaches it through the result), a new value where eager
        returns a new tensor (which carries no gradient) but the op returned its input proxy."""
        inputs = [x for x in tree_flatten((args, kwargs))[0] if type(x) is TensorProxy]
        if not any(p.requires_grad for p in inputs):
            return out  # no gradient to pass or to cut
        outputs, spec = tree_flatten(out)
        if not may_return_an_input(inputs, outputs):
            return out
        tensors = [i for i, o in enumerate(outputs) if type(o) is TensorProxy]
        if func is torch.Tensor.contiguous:
            # its input itself exactly where that is laid out as asked: the call's layout decides
            # (guarded), not a meta tensor's, which is contiguous whatever the input's layout
            bound = self.table[func].normalize(args, kwargs)[0]
            return bound[0] if current_context().is_contiguous(bound[0], bound[1]) else out
        eager = returned_inputs(func, args, kwargs, len(tensors))
        if eager is None:
            if any(outputs[i] is p for i in tensors for p in inputs):
                warnings.warn(
                    f"squall: {qualified_name(func)} returned its input under torch.no_grad(), and squall could not "
                    "ask eager (on the meta device) whether eager returns a new tensor; a gradient may pass through "
                    "it where eager's would not",
                    SquallWarning,
                    stacklevel=4,
                )
            return out
        detach = self.table[torch.detach]
        for i, same in zip(tensors, eager):
            if same is not None:
                outputs[i] = same
            elif any(outputs[i] is p for p in inputs):
                outputs[i] = detach(outputs[i])  # a new name, as eager's new tensor: no gradient through it
        return tree_unflatten(outputs, spec)

    def read_through_wrapped(self, ctx: Any, values: Any) -> bool:
        """Let each wrapped result in `values` stand for its proxy from its first use on (as a
        module's parameter stands for its input proxy); whether there was one."""
        found = False
        if self.wrapped_results is None:
            return found
        for x in tree_flatten(values)[0]:
            if type(x) is self.wrapped_results.wrapper:
                if id(x) not in ctx.substitutes:
                    proxy = self.wrapped_results.wait(x)
                    if proxy is None:
                        continue
                    ctx.substitute(x, proxy)
                found = True
        return found

    def _rebound(self, func: Callable) -> tuple[Callable, Any]:
        """(the torch function, its op or None) where the user replaced that function by `func`, a
        wrapper calling the original (`F.softmax = wrapped`, `torch.Tensor.split = wrapped`), and
        torch handed squall the wrapper for a call of the original: the Python body of a torch
        function hands over whatever its own name reaches now (`handle_torch_function`), and
        torch's C methods look themselves up on torch.Tensor by name. Eager never reaches those
        lines with plain tensors: the call is the original's. Else (`func`, None)."""
        frame = sys._getframe(2)
        for _ in range(8):  # (this dispatch sits a few frames below torch's handle_torch_function)
            if frame is None or frame.f_code is _HANDLE_TORCH_FUNCTION:
                break
            frame = frame.f_back
        else:
            frame = None
        caller = frame.f_back if frame is not None else None
        if caller is None:
            # a C method of torch.Tensor the wrapper called: the one its name had at import
            if any(m is func for m in TENSOR_METHODS.values()):
                return func, None  # (one of torch's own, unreplaced)
            original = next((m for name, m in TENSOR_METHODS.items() if m is not func and getattr(torch.Tensor, name, None) is func), None)
            return (original, self.table.get(original)) if original is not None else (func, None)
        if caller.f_code is func.__code__ or _named_now(caller) is not func:
            return func, None  # not a rebinding (a function handing over another one of torch's)
        if self._by_code is None:
            functions = [f for f in self.table if type(f) is types.FunctionType]
            shared = {c for c, n in collections.Counter(f.__code__ for f in functions).items() if n > 1}  # (boolean_dispatch's)
            self._by_code = {f.__code__: f for f in functions if f.__code__ not in shared}
        original = self._by_code.get(caller.f_code)
        if original is None:
            # run opaque, the wrapper would be applied twice: once traced, once inside the opaque call
            raise NotModelled(f"squall: {caller.f_globals.get('__name__')}.{caller.f_code.co_qualname} was replaced by "
                              f"{qualified_name(func)}, which calls it, and squall's torch language has no op for the original")
        return original, self.table[original]

    def opaque(self, func: Callable, args: tuple, kwargs: dict, unmodelled: str | None = None) -> Any:
        """`func` run as an opaque torch call (its output's metadata from the meta device), with
        one warning per op; `unmodelled`: why an op of the language runs so (`NotInLanguage`)."""
        name = qualified_name(func)
        if name in _VALUE_READS:
            return current_context().read_value(_VALUE_READS[name], args, kwargs, what=name)
        if name == "torch.Tensor.__contains__" and len(args) == 2 and not kwargs:
            return _contains(*args)
        if func in (torch.is_floating_point, torch.is_complex) and len(args) == 1 and type(args[0]) is TensorProxy:
            return args[0].dtype.is_floating_point if func is torch.is_floating_point else args[0].dtype.is_complex
        layout = getattr(func, "__name__", None)
        if layout in _LAYOUT_READS and args and type(args[0]) is TensorProxy and func in (getattr(torch.Tensor, layout), getattr(TensorProxy, layout)):
            # called unbound (`torch.Tensor.stride(x)`): the proxy's own answer, eager's (squall.frontend.layouts)
            return getattr(args[0], layout)(*args[1:], **kwargs)
        if name in _DATA_DEPENDENT:
            ctx = current_context()
            if ctx.speculation is None:
                raise data_dependent_error(name)
            return ctx.speculation.call(name, func, args, kwargs, data_dependent_error(name))
        # a real tensor among its arguments (a captured one, a parameter's gradient) is read at every
        # call, as for the ops of the language: what it holds then, not what it held when traced
        if any(map(_data_tensor, tree_flatten((args, kwargs))[0])):  # (mapped only then: a torch.Size stays one)
            as_constant = lambda x: current_context().constant(x) if _data_tensor(x) else x
            args, kwargs = _map_call(as_constant, args), _map_call(as_constant, kwargs)
        proxies = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, TensorProxy)]
        device = proxies[0].device

        # where squall knows the outputs' shapes as expressions of the inputs' (squall.ltorch.opaque_shapes),
        # the meta device runs at this call's sizes unread; else it learns the output shape at these
        # sizes, each read and guarded
        shapes = output_shapes(func, args, kwargs)
        size = concrete_value if shapes is not None else guarded_int

        def to_meta(x):
            if isinstance(x, TensorProxy):
                return torch.empty(tuple(map(size, x.shape)), dtype=x.dtype, device="meta")
            if real_tensor(x):
                return x.to("meta")
            if type(x) is SymInt:  # a size as a number argument (fill_(x.shape[1])): torch takes ints only
                return size(x)  # (unread where a rule gives the outputs' shapes, having guarded what it relies on: kthvalue's k)
            return x

        metas: list[tuple[TensorProxy, torch.Tensor, int]] = []

        def to_meta_noting(x):
            m = to_meta(x)
            if isinstance(x, TensorProxy):
                metas.append((x, m, m._version))  # a version that moves marks an in-place write
            return m

        try:
            # the tracing mode may be active (a method call on a proxy enters here directly)
            with torch._C.DisableTorchFunction():
                meta_out = func(*tree_map(to_meta_noting, args), **tree_map(to_meta_noting, kwargs))
        except Exception as e:  # noqa: BLE001 - any failure here means squall cannot model the op
            # valid or not, eager answers it: the call runs eagerly (an error is then eager's own)
            raise NotModelled(
                f"squall: {name} is not in squall's torch language, and running it on the meta "
                f"device to learn its output failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
            ) from e
        answers = [type(r).__name__ for r in tree_flatten(meta_out)[0] if type(r) in _PYTHON_ANSWERS]
        if answers:
            # a number or string read off the tensors (data_ptr, get_device): the meta device's
            # answer is not the call's, and a trace would keep it as a constant
            raise NotModelled(f"squall: {name} answers with a Python {answers[0]} read from its tensors, which squall's "
                              "trace cannot compute (not in its torch language)")
        if name not in self.warned:
            self.warned.add(name)
            warnings.warn(
                f"squall: {name} is not in squall's torch language; it runs as an opaque torch call"
                if unmodelled is None else f"squall: {name} runs as an opaque torch call ({unmodelled})",
                SquallWarning,
                stacklevel=4,
            )

        results = [r for r in tree_flatten(meta_out)[0] if isinstance(r, torch.Tensor)]
        if shapes is not None and (len(shapes) != len(results) or any(concrete_shape(s) != tuple(r.shape) for s, r in zip(shapes, results))):
            for x, _, _ in metas:  # (a rule that disagrees with torch: its sizes read and guarded, as without one)
                tuple(map(guarded_int, x.shape))
            shapes = None
        symbolic = {id(r): s for r, s in zip(results, shapes)} if shapes is not None else {}

        def from_meta(x):
            if real_tensor(x):
                return TensorProxy(shape=symbolic.get(id(x), x.shape), dtype=x.dtype, device=device, requires_grad=x.requires_grad)
            return x

        if all(m._version == version for _, m, version in metas):
            # eager returns its argument itself (atleast_1d of a matrix, real of a real tensor): so does the
            # program, and a gradient reaches the argument through it as in eager, whatever the grad mode
            argument = {id(m): x for x, m, _ in metas}
            if results and all(id(r) in argument for r in results):
                return tree_map(lambda r: argument[id(r)] if isinstance(r, torch.Tensor) else r, meta_out)

        written = [x for x, m, version in metas if m._version != version]
        if written:
            # the call writes into its argument's tensor at run time: a copy eager made on its way is made a tensor of its own first
            ctx = current_context()
            for x in written:
                ctx.views.before_opaque_write(x)
            if ctx.views.stale:
                ctx.views.refresh((args, kwargs))
        out = tree_map(from_meta, meta_out)
        # eager returns a view of an argument (x.imag, view_as_real): a write through it, or into
        # that argument, must reach the other (squall.frontend.views refuses what it cannot follow)
        viewed = {id(m) for _, m, _ in metas}
        views = any(isinstance(r, torch.Tensor) and r._is_view() and id(r._base) in viewed for r in tree_flatten(meta_out)[0])
        sym = Symbol(
            f"opaque.{name}",
            name.rsplit(".", 1)[-1],
            lambda *a, **k: out,
            is_prim=True,
            tags=(Tags.OPAQUE, Tags.OPAQUE_VIEW) if views else (Tags.OPAQUE,),
            torchfns=(func,),
        )
        result = opaque_writes(name, metas, meta_out, sym(*args, **kwargs))
        if views:
            current_context().views.note(sym, args, kwargs, result)
        return result


# what an opaque call's answer may not hold: a number or string computed from its tensors
_PYTHON_ANSWERS = frozenset({int, float, bool, complex, str})


def _requires_grad(tree: Any) -> bool:
    return any(type(x) is TensorProxy and x.requires_grad for x in tree_flatten(tree)[0])


# a hook on an intermediate's gradient, its gradient kept (`y.retain_grad()`), a backward inside the program
_AUTOGRAD_GRAPH_CALLS = frozenset({
    torch.Tensor.register_hook, torch.Tensor.retain_grad, torch.Tensor.register_post_accumulate_grad_hook,
    torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad,
})

# (the getters and setters of these attributes are method-wrappers of their descriptors)
_GRADIENT_ATTRIBUTE, _DATA_ATTRIBUTE = torch.Tensor.grad, torch.Tensor.data


def _data_tensor(x: Any) -> bool:
    """A real tensor holding data: not a proxy, nor one of squall's own meta tensors (its bookkeeping)."""
    return real_tensor(x) and x.device.type != "meta"


def _computes_on_tensors(func: Callable, args: tuple, kwargs: dict) -> bool:
    """Whether an opaque call on real tensors only (captured ones: `torch._foreach_norm(grads)`)
    makes tensors or writes into them, asked on the meta device: it then runs at every call on
    what they hold then. A query of their metadata (a size, a dtype) answers at tracing."""
    if getattr(func, "__name__", None) in ("__get__", "__set__"):
        return False  # an attribute (`t._base`, `t.real`): read or set as it is
    metas: list[tuple[torch.Tensor, int]] = []

    def to_meta(x):
        if _data_tensor(x):
            m = x.to("meta")
            metas.append((m, m._version))
            return m
        return x

    if not any(map(_data_tensor, tree_flatten((args, kwargs))[0])):
        return False
    try:
        with torch._C.DisableTorchFunction():
            out = func(*_map_call(to_meta, args), **_map_call(to_meta, kwargs))
    except Exception:  # noqa: BLE001 - not on the meta device: answered at tracing, as before
        return False
    return any(isinstance(r, torch.Tensor) for r in tree_flatten(out)[0]) or any(m._version != v for m, v in metas)


def _writes_into_given(func) -> str:
    # out=: eager writes into (and may resize) the tensor given; a trace's results are new tensors
    return (f"squall: {qualified_name(func)}(..., out=...) writes its result into a tensor given, which squall does not "
            "support; assign the result (y = torch.add(a, b)) or copy it in (y.copy_(torch.add(a, b)))")


def _detaches_in_place(func: Callable, args: tuple) -> bool:
    """Whether the call is `x.detach_()` of a traced tensor that requires grad: it cuts x from the
    graph, so eager's later ops on x pass no gradient back, where squall's, which kept x's name,
    would pass it."""
    return func in (torch.Tensor.detach_, torch.detach_) and bool(args) and type(args[0]) is TensorProxy and args[0].requires_grad


_FUNCTION_APPLY = torch.autograd.Function.apply.__func__.__code__
_HANDLE_TORCH_FUNCTION = torch.overrides.handle_torch_function.__code__


def _named_now(frame: types.FrameType) -> Any:
    """What the name of `frame`'s function (`softmax`, `Tensor.split`) reaches now in its module."""
    parts = frame.f_code.co_qualname.split(".")
    found = frame.f_globals.get(parts[0])
    for part in parts[1:]:
        found = getattr(found, part, None)  # (`<locals>` reaches nothing)
    return found


def _inside_function_apply() -> bool:
    """Whether this op runs inside the forward of a torch.autograd.Function applied by torch's C
    machinery (a user's Function is traced through squall.frontend.autograd_functions instead,
    never applied to proxies): the forward runs without grad, and the C machinery, which sees no
    proxy requiring grad, records no node, so the outputs would silently carry no gradient."""
    return running_inside(_FUNCTION_APPLY)


def _contains(tensor: TensorProxy, element: Any) -> bool:
    """`element in tensor` as eager computes it (`(element == tensor).any()`, read as a bool):
    traced, the value read guarded (transformers' `pad_token_id in input_ids`)."""
    if not isinstance(element, (TensorProxy, int, float, bool, complex, SymInt)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}.")
    return bool((element == tensor).any())


class TracingMode(TorchFunctionMode):
    """Routes every torch call made while tracing, factories included, to the language."""

    def __init__(self, language: TorchLanguage):
        super().__init__()
        self.language = language

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.language.dispatch(func, args, kwargs or {})
