"""Replayed decompositions: a torch-language op called again in one trace with the same inputs'
metadata and the same other arguments gets a copy of the decomposition its first call recorded,
without running its Python body and its prims' meta functions again.

A transformer's layers call the same ops on the same shapes over and over (four projections of
one width per layer, every layer alike): most of a trace's ltorch calls repeat one made before.
A body is a function of what the key holds (its tensors' shapes, dtypes, devices and
requires_grad, which of them are the same tensor, every other argument's exact value and type,
grad mode, the default dtype and device), so its decomposition is too. A size comparison it made was
decided and recorded as a shape guard of this trace the first time; the same comparison of the
same sizes decides the same (`squall.symbolic`), so a copy needs no guard of its own. Replays
live in one trace's context and die with it: another trace has its own size symbols and guards.

A decomposition is replayed only where its first call did nothing but record calls: the trace's
context looked the same after it as before (no constant captured, no number recorded, no view
noted, no input rebound), every call in it reads only the op's inputs and what earlier calls in
it made, and it holds no random, opaque, side-effecting or guarding call. Anything else runs its
body at every call, as before.
"""
from __future__ import annotations

import threading
from typing import Any

import torch
from torch.utils._device import DeviceContext

from .checkpoint_regions import checkpoint_region, new_checkpoint_region
from .proxies import NumberProxy, TensorProxy
from .symbolic import SymInt

__all__ = ["call_key", "module_call_key", "Decomposition", "PendingCopy", "walk_values", "NOT_REPLAYED"]

# arguments keyed by their value as they are: none of them equals a value of another of these types
_KEYED_AS_IS = frozenset({int, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout, type(Ellipsis)})
# leaves a recorded call may hold (besides TensorProxy), shared by its copies
_SHARED_LEAVES = _KEYED_AS_IS | {float, bool, complex, SymInt, torch.Size}
_CONTAINERS = frozenset({TensorProxy, tuple, list, dict})  # what a copy maps (the rest it shares)
# tags of calls whose recording is more than a function of the op's inputs (a random op's is
# one, and a module's replay copies it: each copy draws its own numbers at run time, as a fresh
# trace's call would)
NOT_REPLAYED = frozenset({"random", "opaque", "side_effect", "barrier"})


def call_key(sym: Any, args: tuple, kwargs: dict) -> tuple[tuple, list[TensorProxy]] | None:
    """The key a call of `sym` replays a decomposition under, and the call's distinct tensor
    proxies in the order the key names them; None where the call cannot be keyed (a run-time
    number, an object squall does not know, no tensor at all: a factory reads global defaults)."""
    proxies: list[TensorProxy] = []
    # the global defaults a body may read (factory_device, the default float dtype)
    parts: list = [sym, torch.is_grad_enabled(), torch.get_default_dtype(), _default_device()]
    if not _key_into(args, parts, proxies):
        return None
    for name, value in kwargs.items():
        parts.append(name)
        if not _key_into(value, parts, proxies):
            return None
    return (tuple(parts), proxies) if proxies else None


_CPU = torch.device("cpu")
_DEVICE_CONTEXT = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)  # where torch.set_default_device keeps its device


def module_call_key(prefix: tuple, args: tuple, kwargs: dict) -> tuple[tuple, list[TensorProxy], list] | None:
    """`call_key` for a module's call (squall.frontend.module_replays): `prefix` (the module's
    class and forward, and the autocast state) first, the global defaults, and an argument squall does
    not key by value (an object, a view of one) keyed by identity; the objects so keyed are
    returned with the proxies, to be held while the key is. None where the call cannot be keyed
    (a run-time number, a real tensor)."""
    proxies: list[TensorProxy] = []
    objects: list = []
    parts: list = [*prefix, torch.is_grad_enabled(), torch.get_default_dtype(), _default_device()]
    if not _key_into(args, parts, proxies, objects):
        return None
    for name, value in kwargs.items():
        parts.append(name)
        if not _key_into(value, parts, proxies, objects):
            return None
    return tuple(parts), proxies, objects


def _default_device() -> torch.device:
    """torch.get_default_device(), without its generator over the mode stack in the common case:
    no `with torch.device(...)` on the torch function mode stack and no default device set is
    the CPU, as torch answers then."""
    # (the thread's own dict of the thread-local: getattr of an unset name raises inside, 10x slower)
    if _DEVICE_CONTEXT is None or _DEVICE_CONTEXT.__dict__.get("device_context") is not None:
        return torch.get_default_device()
    for i in range(torch._C._len_torch_function_stack()):
        if isinstance(torch._C._get_function_stack_at(i), DeviceContext):
            return torch.get_default_device()
    return _CPU


def _key_into(x: Any, parts: list, proxies: list, objects: list | None = None) -> bool:
    t = type(x)
    if t is TensorProxy:
        for i, p in enumerate(proxies):
            if p is x:
                parts.append(("same", i))  # the same tensor again: the copy must alias as the original
                return True
        proxies.append(x)
        shape = x.shape
        if type(shape) is not torch.Size:
            # a symbolic size by its polynomial: SymInt's own == would record a shape guard
            shape = tuple(("sym", d.poly) if type(d) is SymInt else d for d in shape)
        parts.append((shape, x.dtype, x.device, x.requires_grad))
        return True
    if t in _KEYED_AS_IS:
        parts.append(x)
        return True
    if t is tuple or t is list or t is torch.Size:
        parts.append((t, len(x)))
        for v in x:  # (a plain loop, ints kept inline: sizes are most of what calls pass)
            if type(v) is int:
                parts.append(v)
            elif not _key_into(v, parts, proxies, objects):
                return False
        return True
    if t is float:
        parts.append(("float", x.hex()))  # -0.0 is not 0.0, and 1.0 is not 1 (the body promotes by type)
        return True
    if t is bool:
        parts.append(("bool", x))
        return True
    if t is SymInt:
        parts.append(("sym", x.poly))
        return True
    if t is complex:
        parts.append(("complex", x.real.hex(), x.imag.hex()))
        return True
    if t is slice:
        parts.append(slice)
        return all(_key_into(v, parts, proxies, objects) for v in (x.start, x.stop, x.step))
    if t is dict:
        parts.append((dict, tuple(x)))
        return all(type(k) is str for k in x) and all(_key_into(v, parts, proxies, objects) for v in x.values())
    if objects is None or isinstance(x, (torch.Tensor, NumberProxy)):
        return False
    # (an object's reads are its guards, which a replay checks again: the same object is enough)
    parts.append(("object", id(x)))
    objects.append(x)
    return True


class Decomposition:
    """One call's decomposition, held to be copied for later calls with its key."""

    __slots__ = ("inputs", "output", "subsymbols", "made")

    def __init__(self, inputs: list[TensorProxy], output: Any, subsymbols: tuple, made: dict[int, tuple]):
        self.inputs = inputs  # the first call's proxies, in its key's order
        self.output = output
        self.subsymbols = subsymbols  # the recorded calls as `_step` gives them
        # id(proxy) -> (name prefix, shape, its traced sizes, dtype, device, requires_grad) of each
        # proxy the decomposition made, as it was made (a later in-place op rebinds the object itself)
        self.made = made

    @classmethod
    def record(cls, inputs: list[TensorProxy], output: Any, subsymbols: tuple, refused: frozenset[str] = NOT_REPLAYED) -> Decomposition | None:
        """The decomposition of a call with these inputs, or None where it is more than a
        function of them (see the module's docstring) or holds a call tagged as in `refused`."""
        known = {id(p) for p in inputs}
        made: dict[int, tuple] = {}
        steps = []
        for b in subsymbols:
            step = _step(b, known, made, refused)
            if step is None:
                return None
            steps.append(step)
        returned: list[TensorProxy] = []
        if not walk_values(output, returned):
            return None
        for p in returned:
            if id(p) not in known:  # a proxy the body made itself, not through a call
                known.add(id(p))
                made[id(p)] = _meta(p)
        return cls(list(inputs), output, tuple(steps), made)

    def replay(self, inputs: list[TensorProxy], new_name: Any) -> tuple[Any, PendingCopy]:
        """(output, its subsymbols to come) for a call whose proxies, in key order, are `inputs`:
        the output now, with fresh proxies for what the decomposition made named now (by
        `new_name(prefix)`, in the order its first call made them, so the trace prints as if
        copied at once); the recorded calls are copied only when something reads the call's
        decomposition (most calls are run whole by an executor, and nothing does)."""
        mapping = {id(t): p for t, p in zip(self.inputs, inputs)}
        names = {key: new_name(meta[0]) for key, meta in self.made.items()}
        copy = _Copier(mapping, self.made, names)
        return copy.value(self.output), PendingCopy(copy, self.subsymbols)

    def replay_calls(self, mapping: dict[int, TensorProxy], new_name: Any) -> tuple[Any, list, Any]:
        """A module call's replay (squall.frontend.module_replays): (output, the recorded calls as
        the new call's own, each decomposition copied when first read, a function mapping a value
        the first call held to the new call's), `mapping` taking id of each input proxy of the
        first call to the new call's. Fresh proxies are named as in `replay`."""
        names = {key: new_name(meta[0]) for key, meta in self.made.items()}
        copy = _Copier(dict(mapping), self.made, names)
        calls = [copy.bsym(step, lazily=True) for step in self.subsymbols]
        return copy.value(self.output), calls, copy.value


class PendingCopy:
    """A replayed call's decomposition, not copied yet: `BoundSymbol.subsymbols` copies it the
    first time it is read, and every copy of that call shares the result."""

    __slots__ = ("copier", "steps", "done")

    def __init__(self, copier: _Copier, steps: tuple):
        self.copier = copier
        self.steps = steps
        self.done: tuple | None = None

    def may_hold(self, tag: str) -> bool:
        """Whether a call in the decomposition, at any depth, has `tag` (a copy has its
        recording's symbols), read from the recording without copying it."""
        steps = self.steps
        return steps is None or _steps_hold(steps, tag)  # (None: copied already, by another thread too)

    def __call__(self) -> tuple:
        with _COPYING:  # a background upgrade may read it while the caller's thread does
            if self.done is None:
                self.done = tuple([self.copier.bsym(step) for step in self.steps])
                self.copier = self.steps = None
            return self.done


_COPYING = threading.Lock()


def _steps_hold(steps: tuple, tag: str) -> bool:
    return any(tag in b.sym.tags or _steps_hold(substeps, tag) for b, _, substeps in steps)


def _meta(p: TensorProxy) -> tuple:
    shape = p.shape
    sizes = shape if type(shape) is torch.Size else [v.value if type(v) is SymInt else v for v in shape]
    return p.name.rstrip("0123456789"), shape, sizes, p.dtype, p.device, p.requires_grad


def _step(bsym: Any, known: set[int], made: dict[int, tuple], refused: frozenset[str] = frozenset()) -> tuple | None:
    """`bsym` as `_Copier.bsym` copies it: (the call, whether its args (1) and kwargs (2) name a
    proxy (the others are shared: a recorded call's arguments are never changed), its
    decomposition's steps); None where it reads a proxy not in `known` or holds a value a copy
    cannot rebuild or share. The proxies it makes join `known` and `made`."""
    if bsym.sym.tags & refused or not (bsym.sym.is_prim or bsym.sym.replayable):
        return None  # (an op declared not replayable, such as a collective, inside another op too)
    read_args: list[TensorProxy] = []
    read_kwargs: list[TensorProxy] = []
    returned: list[TensorProxy] = []
    if not (walk_values(bsym.args, read_args) and walk_values(bsym.kwargs, read_kwargs) and walk_values(bsym.output, returned)):
        return None
    for p in read_args:
        if id(p) not in known:
            return None
    for p in read_kwargs:
        if id(p) not in known:
            return None
    steps = []
    for sub in bsym.subsymbols:
        step = _step(sub, known, made, refused)
        if step is None:
            return None
        steps.append(step)
    for p in returned:
        if id(p) not in known:
            known.add(id(p))
            made[id(p)] = _meta(p)
    return bsym, (1 if read_args else 0) | (2 if read_kwargs else 0), tuple(steps)


def walk_values(x: Any, found: list) -> bool:
    """Collect the proxies in `x` into `found`; whether `x` is made of tuples, lists and
    str-keyed dicts of proxies and shared leaves (a slice of plain numbers too), which a copy
    rebuilds or shares."""
    t = type(x)
    if t is TensorProxy:
        found.append(x)
        return True
    if t in _SHARED_LEAVES:
        return True
    if t is tuple or t is list:
        for v in x:
            if not walk_values(v, found):
                return False
        return True
    if t is dict:
        for k, v in x.items():
            if type(k) is not str or not walk_values(v, found):
                return False
        return True
    if t is slice:
        return all(type(v) in _SHARED_LEAVES for v in (x.start, x.stop, x.step))
    return False


class _Copier:
    """Copies recorded calls, mapping the recorded proxies to the new call's and to fresh ones
    (named as `names` says: id of the recorded proxy -> the name its copy was given)."""

    __slots__ = ("mapping", "made", "names", "regions")

    def __init__(self, mapping: dict[int, TensorProxy], made: dict[int, tuple], names: dict[int, str]):
        self.mapping = mapping
        self.made = made
        self.names = names
        self.regions: dict[int, int] = {}  # a checkpoint region of the recording -> this replay's

    def value(self, x: Any) -> Any:
        t = type(x)
        if t is TensorProxy:
            p = self.mapping.get(id(x))
            if p is None:
                _, shape, sizes, dtype, device, requires_grad = self.made[id(x)]
                p = self.mapping[id(x)] = TensorProxy.like_recorded(self.names[id(x)], shape, sizes, dtype, device, requires_grad)
            return p
        if t is tuple:
            return tuple([self.value(v) if type(v) in _CONTAINERS else v for v in x])
        if t is list:
            return [self.value(v) if type(v) in _CONTAINERS else v for v in x]
        if t is dict:
            return {k: self.value(v) if type(v) in _CONTAINERS else v for k, v in x.items()}
        return x

    def _region(self, recorded: int) -> int:
        """The checkpoint region of a replayed top-level call: the one running now (a module replayed
        inside a checkpointed function); where the recording's call ran its own checkpoint (the
        module's forward checkpoints, and the replay runs none of its Python), a new one per region."""
        running = checkpoint_region()
        if not recorded:
            return running
        region = self.regions.get(recorded)
        if region is None:
            region = self.regions[recorded] = running or new_checkpoint_region()
        return region

    def bsym(self, step: tuple, lazily: bool = False) -> Any:
        # reads first (known already), then the decomposition (which makes what it returns), then
        # the outputs (their names were given at the replay, in the order the body made them);
        # `lazily`: a top-level call of a module's replay, its decomposition copied when first
        # read (every proxy it makes was named already) and its source line kept
        b, reads, steps = step
        args = self.value(b.args) if reads & 1 else b.args
        kwargs = self.value(b.kwargs) if reads & 2 else b.kwargs
        if lazily:
            subsymbols = PendingCopy(self, steps) if steps else ()
        else:
            subsymbols = tuple([self.bsym(sub) for sub in steps])
        copy = type(b)(b.sym, args, kwargs, self.value(b.output), subsymbols, call_keywords=b.call_keywords,
                       grad_enabled=b.grad_enabled)
        if lazily:
            copy.source = b.source
            copy.checkpoint_region = self._region(b.checkpoint_region)
        return copy

