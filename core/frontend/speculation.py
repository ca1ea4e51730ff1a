"""Speculation: tracing reads a tensor's value from the real inputs of the call it compiles.

A program that branches on data (`if mask.all():`, `n = int(t.sum())`, `x[mask]`) cannot be
traced on metadata alone. squall compiles on a real call, so it has the real inputs: to read
a proxy's value, `Speculation.value` runs the recorded calls that value depends on (each on
the torch executor, as the torch call it stands for) on the real inputs and constants,
remembering every value it computes. The value read goes into the trace as a constant, and
a guard (`squall.guards`) right after the read checks it at every call.

What a failed guard leads to is call time's (`squall.runtime.variants`, `squall.runtime.policy`):
the entry's other variants are tried, then a new one compiled for the call's inputs. A guard
site that keeps failing (a value that changes at every call) stops the speculating there: a `t.item()` read is then made
at run time (a recorded read whose result is a run-time number, `squall.ltorch.numbers`) in the
variants compiled from then on; any other read, or a run-time read that thrashes again where
its number is needed concretely, stops the compiling, with a SquallWarning naming the line:
a module's entry splits (`squall.runtime.split`: its forward runs eagerly, each submodule it calls
compiled); a plain function's entry runs the original function eagerly.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..guards import ABSENT, GUARD, READERS
from ..ltorch import numbers
from ..ltorch.base import DataDependentError
from ..ltorch.unmodelled import NotModelled
from ..market.torch_executor import TorchExecutor, make_executor
from ..proxies import NumberProxy, TensorProxy, size_leaf, real_tensor
from ..symbol import BoundSymbol, Symbol, Tags, user_source
from ..symbolic import SymInt, concrete_value, guarded_int
from .random_state import restore_torch_generators, torch_generators

__all__ = ["Speculation", "guards_of", "guard_input_paths", "inputs_reached", "specialised_numbers", "dynamic_reads", "SPECULATION_LIMIT", "RUNTIME_READS"]

# compilations a single guard site may cause in one cache entry before its value counts as dynamic
SPECULATION_LIMIT = 4

# the guard sites ("file:line") whose item() read runs at run time in the variant
# being compiled, instead of being speculated (set by `squall.runtime.variants` around its compile)
_dynamic_reads: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("squall_dynamic_reads", default=frozenset())


@contextlib.contextmanager
def dynamic_reads(sites: frozenset[str]):
    """Compile, within this block, with the value reads at `sites` made at run time."""
    token = _dynamic_reads.set(sites)
    try:
        yield
    finally:
        _dynamic_reads.reset(token)


@functools.cache
def _torch_executor() -> TorchExecutor:
    return make_executor()


def _site() -> tuple[str, str]:
    """(a short `file:line` for the trace and messages, the line's text) of the program's read."""
    found = user_source()
    if found is None:
        return "<unknown>", ""
    filename, lineno, line = found
    return f"{os.path.basename(filename)}:{lineno}", line


class Speculation:
    """The real values of one traced call: its inputs and constants, and what was computed from them."""

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.values: dict[str, torch.Tensor] = {}  # proxy name -> its value in this call
        self.inputs: dict[str, Any] = {}  # an input proxy's name -> what it stands for (a meta tensor too)
        self.dynamic_sites = _dynamic_reads.get()  # reads made at run time, not speculated

    def bind(self, proxy: TensorProxy, value: Any) -> None:
        """`proxy` stands for `value` in this call (a real tensor; a stand-in proxy has none)."""
        self.inputs[proxy.name] = value
        if real_tensor(value) and value.device.type != "meta":
            self.values[proxy.name] = value

    def attribute(self, proxy: TensorProxy, name: str) -> Any:
        """The Python attribute `name` the user set on the input tensor `proxy` stands for (`x.scale`,
        a parameter's `lr_scale`), or ABSENT where it has none, guarded in the trace; an
        intermediate's is ABSENT (one the program set is on its proxy)."""
        real = self.inputs.get(proxy.name)
        if not isinstance(real, torch.Tensor):
            return ABSENT
        value = real.__dict__.get(name, ABSENT)
        if not (value is ABSENT or value is None or type(value) in (bool, int, float, str)):
            raise NotModelled(f"squall: the program reads {name!r}, a Python attribute set on a tensor it takes, "
                              f"which holds a {type(value).__name__}: only numbers, strings and None are followed")
        if len(self.ctx.scopes) != 1:  # (inside an op's decomposition there is no place for a guard)
            raise NotModelled(f"squall: an operation's decomposition reads {name!r}, a Python attribute of a tensor")
        GUARD("attribute", (proxy, name), {}, value, _site()[0])
        return value

    def value(self, proxy: TensorProxy) -> torch.Tensor:
        """The real value of `proxy` in this call: the calls it depends on, run on the torch executor."""
        known = self.values.get(proxy.name)
        if known is not None:
            return known
        constant = self.ctx.constants.get(proxy.name)
        if real_tensor(constant):
            return constant
        producers: dict[str, BoundSymbol] = {}
        # an open op's pieces (its decomposition so far) after the program's own calls; the
        # program's own call wins where both made a value (it runs whole, as torch's call)
        for scope in reversed(self.ctx.scopes):
            for bsym in scope:
                if Tags.SIDE_EFFECT in bsym.sym.tags:
                    continue
                outputs = bsym.output_proxies()
                # a call that gives back its input (`m = m.expand(m.shape)`: `t1 = expand(t1, ...)`)
                # makes nothing: as its producer, it needed itself, and the value's search never ended
                taken = {p.name for p in bsym.input_proxies()} if outputs else ()
                for p in outputs:
                    if p.name not in taken:
                        producers[p.name] = bsym
        generators = torch_generators()
        try:
            # real torch calls, not the tracing mode's: it is active while the program is traced
            with torch.no_grad(), torch._C.DisableTorchFunction():
                self._compute(proxy, producers)
        finally:
            # values read for speculation must not move the generator the real run draws from
            restore_torch_generators(generators)
        return self.values[proxy.name]

    def _compute(self, target: TensorProxy, producers: dict[str, BoundSymbol]) -> None:
        stack = [target.name]
        while stack:
            name = stack[-1]
            if name in self.values:
                stack.pop()
                continue
            constant = self.ctx.constants.get(name)
            if real_tensor(constant):
                self.values[name] = constant
                stack.pop()
                continue
            bsym = producers.get(name)
            if bsym is None:
                raise DataDependentError(f"squall: the value of {name} is needed, and squall cannot compute it from this call's inputs")
            for p in bsym.input_proxies():
                if type(p) is NumberProxy:  # a run-time number carries its value in this call
                    self.values.setdefault(p.name, p.value)
            missing = [p.name for p in bsym.input_proxies() if p.name not in self.values]
            if missing:
                stack.extend(missing)
                continue
            self._run(bsym)
            stack.pop()

    def _run(self, bsym: BoundSymbol) -> None:
        """Run one recorded call on real values, as the generated code would on the torch executor."""
        impl = _torch_executor().implementation_for(bsym.sym)
        if impl is None or impl.impl is None:
            if not bsym.subsymbols:
                raise DataDependentError(f"squall: the value of a {bsym.sym.id} result is needed, and squall cannot run it while tracing")
            for sub in bsym.subsymbols:
                for p in sub.input_proxies():
                    if p.name not in self.values:
                        self.values[p.name] = self.value(p)
                self._run(sub)
            return
        args, kwargs = bsym.shortest_arguments()
        # an opaque torch call may write into its arguments: it must not touch the caller's tensors
        real = (lambda x: self.values[x.name].clone()) if Tags.OPAQUE in bsym.sym.tags else (lambda x: self.values[x.name])
        # a number or symbolic size computes with its value in this call (the trace stays symbolic)
        swap = lambda x: real(x) if isinstance(x, TensorProxy) else x.value if type(x) is NumberProxy else concrete_value(x)
        out = impl.impl(*tree_map(swap, args, is_leaf=size_leaf), **tree_map(swap, kwargs, is_leaf=size_leaf))
        self._remember(bsym.output, out)

    def _value_or_none(self, proxy: TensorProxy) -> torch.Tensor | None:
        try:
            return self.value(proxy)
        except DataDependentError:
            return None

    def _remember(self, proxies: Any, out: Any) -> None:
        if isinstance(proxies, (TensorProxy, NumberProxy)):
            source = self.ctx.written_layouts.get(proxies.name) if type(proxies) is TensorProxy else None
            self.values[proxies.name] = out if source is None else _laid_out_as(out, self._value_or_none(source))
        elif isinstance(proxies, (list, tuple)):
            for p, o in zip(proxies, out):
                self._remember(p, o)
        elif isinstance(proxies, dict):
            for k, p in proxies.items():
                self._remember(p, out[k])

    # --- what tracing asks for ---------------------------------------------------------------
    def read(self, how: str, args: tuple, kwargs: dict) -> Any:
        """The value `READERS[how](*args, **kwargs)` has in this call, guarded in the trace."""
        if len(self.ctx.scopes) != 1:
            # inside an op's own decomposition there is no place in the program for a guard
            raise DataDependentError(f"squall: {how} of a tensor's value inside an operation's decomposition cannot be traced")
        swap = self._real
        real_args, real_kwargs = tree_map(swap, args), tree_map(swap, kwargs)
        with torch._C.DisableTorchFunction():
            value = READERS[how](*real_args, **real_kwargs)
        site = _site()[0]
        if how in RUNTIME_READS and site in self.dynamic_sites:
            # a value that changed at every call: read at run time, a number the program computes with
            out = numbers.runtime_read(self.ctx, how, args, kwargs, value)
            if out is not None:
                return out
        GUARD(how, args, kwargs, value, site)
        return value

    def sizes(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """`args` and `kwargs` with each one-element integer tensor (also as a slice bound) read
        as the int it holds, guarded; None where there is none."""
        found = False

        def as_int(x):
            nonlocal found
            if isinstance(x, TensorProxy) and x.numel() == 1 and not x.dtype.is_floating_point and not x.dtype.is_complex:
                found = True
                return self.read("index", (x,), {})
            if type(x) is slice:
                return slice(as_int(x.start), as_int(x.stop), as_int(x.step))
            if type(x) in (tuple, list):
                return type(x)(as_int(v) for v in x)
            return x

        args, kwargs = tuple(as_int(a) for a in args), {k: as_int(v) for k, v in kwargs.items()}
        return (args, kwargs) if found else None

    def _real(self, x: Any) -> Any:
        """A traced argument as the real op takes it: a proxy's value; a size passed as a number
        (`minlength=x.shape[0]`) its value, guarded, as the op's output depends on it."""
        return self.value(x) if isinstance(x, TensorProxy) else guarded_int(x) if type(x) is SymInt else x

    def call(self, name: str, func: Callable, args: tuple, kwargs: dict, refused: DataDependentError) -> Any:
        """Record `func`, an op whose output shape depends on data, as one opaque torch call,
        its outputs shaped as they are in this call, each shape guarded. `refused` is the error
        that tracing it as ops raised: raised where it writes in place (squall can't follow that)."""
        if len(self.ctx.scopes) != 1:
            raise refused
        # on copies: an op that writes in place must not touch the caller's tensors
        swap = self._real
        real_args, real_kwargs = tree_map(swap, args, is_leaf=size_leaf), tree_map(swap, kwargs, is_leaf=size_leaf)
        with torch.no_grad(), torch._C.DisableTorchFunction():
            copy = lambda x: x.clone() if real_tensor(x) else x
            real_args, real_kwargs = tree_map(copy, real_args, is_leaf=size_leaf), tree_map(copy, real_kwargs, is_leaf=size_leaf)
            copies = [x for x in _leaves((real_args, real_kwargs)) if real_tensor(x)]
            versions = [x._version for x in copies]
            real_out = func(*real_args, **real_kwargs)
        if [x._version for x in copies] != versions or not _leaves(real_out):
            raise refused

        def proxy_for(x):
            if real_tensor(x):
                return TensorProxy(shape=x.shape, dtype=x.dtype, device=x.device, requires_grad=False)
            return x

        out = tree_map(proxy_for, real_out, is_leaf=size_leaf)
        sym = Symbol(f"opaque.{name}", name.rsplit(".", 1)[-1], lambda *a, **k: out, is_prim=True, tags=(Tags.OPAQUE,), torchfns=(func,))
        result = sym(*args, **kwargs)
        self._remember_tree(result, real_out)
        site = _site()[0]
        for p in _proxies(result):
            GUARD("shape", (p,), {}, tuple(p.shape), site)
        return result

    def _remember_tree(self, proxies: Any, out: Any) -> None:
        for p, o in zip(_proxies(proxies), [x for x in _leaves(out) if real_tensor(x)]):
            self.values[p.name] = o


def _leaves(tree: Any) -> list:
    return tree_flatten(tree)[0]


def _proxies(tree: Any) -> list[TensorProxy]:
    return [x for x in _leaves(tree) if isinstance(x, TensorProxy)]


def guards_of(compilation: Any) -> list[BoundSymbol]:
    """The guards of a compilation's traced program, in order."""
    return [b for b in compilation.traced.bsyms if b.sym is GUARD]


def guard_input_paths(compilation: Any) -> list[tuple]:
    """The paths (`InputBinding.path`) of the inputs whose values the program's guards read,
    directly or through what the program computes from them: a call with other values there may
    fail a guard, a call with the same values there passes every one (shapes aside)."""
    paths = {b.proxy.name: b.path for b in compilation.bindings}
    return list(inputs_reached(compilation.traced.bsyms, paths, [p.name for g in guards_of(compilation) for p in g.input_proxies()]).values())


def inputs_reached(bsyms: list[BoundSymbol], inputs: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The items of `inputs` (keyed by an input proxy's name) that the values named `names` are
    computed from through the calls `bsyms` record (a value that is an input: itself)."""
    producers = {p.name: b for b in bsyms for p in b.output_proxies()}
    found: dict[str, Any] = {}
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            found[name] = inputs[name]
        elif name in producers:
            stack.extend(p.name for p in producers[name].input_proxies())
    return found


def specialised_numbers(compilation: Any, hows: tuple[str, ...] | None = None) -> set[tuple]:
    """The paths of the dynamic number arguments whose exact value the program read (a guard on
    the number, or on one computed from it, that is not a comparison's truth: a shape, a dim,
    an op that takes only constants); with `hows`, only by those reads ("number": an op given it)."""
    inputs = {b.proxy.name: b.path for b in compilation.bindings if type(b.proxy) is NumberProxy}
    if not inputs:
        return set()
    sources = getattr(compilation.traced.context, "number_sources", {})
    found = set()
    for g in guards_of(compilation):
        how, read = g.args[0], g.args[1]
        if how != "bool" and (hows is None or how in hows) and len(read) == 1 and type(read[0]) is NumberProxy:
            # a value computed from number arguments (`n // 2` as a shape) specialises them all
            found.update(inputs[n] for n in sources.get(read[0].name, {read[0].name}) if n in inputs)
    return found


# the reads that may become run-time numbers: `t.item()` only, since Python requires int(t) and
# float(t) to return a real int or float (a NumberProxy cannot stand in for one there)
RUNTIME_READS = ("item",)


def _laid_out_as(value: torch.Tensor, like: torch.Tensor | None) -> torch.Tensor:
    """`value` (a tensor's value after an in-place write) laid out as `like` (its value before):
    eager's write keeps sizes, strides and storage offset, which a layout read of it then answers.
    `value` itself where they match already, where `like` is unknown, or where it overlaps itself
    (an expanded tensor: eager refuses to write into it)."""
    if like is None or not isinstance(value, torch.Tensor) or value.shape != like.shape or value.dtype != like.dtype:
        return value
    if value.stride() == like.stride() and value.storage_offset() == like.storage_offset():
        return value
    if value.numel() == 0 or any(st == 0 and n > 1 for n, st in zip(like.shape, like.stride())):
        return value
    extent = like.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(like.shape, like.stride()))
    out = torch.empty(extent, dtype=value.dtype, device=value.device).as_strided(like.shape, like.stride(), like.storage_offset())
    return out.copy_(value)
