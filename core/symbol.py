"""Symbols (operations) and bound symbols (one call of an operation in a trace)."""
from __future__ import annotations

import inspect
import linecache
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .checkpoint_regions import checkpoint_region
from .proxies import NumberProxy, TensorProxy, current_context, size_leaf
from .replays import Decomposition, PendingCopy, call_key
from .symshape import SymShape

__all__ = ["Symbol", "BoundSymbol", "Tags", "flat_proxies", "snapshot", "snapshot_call", "DEL"]


class Tags:
    """Tags on symbols; planners and executors read them, nothing else does."""

    SIDE_EFFECT = "side_effect"  # never removed as dead code
    OPAQUE = "opaque"  # a torch call squall does not model; runs as itself
    OPAQUE_VIEW = "opaque_view"  # an opaque call that returned a view of its input (squall.frontend.views)
    RANDOM = "random"  # draws from a random number generator
    SHAPE_ONLY = "shape_only"  # changes metadata only (views, reshapes)
    REDUCTION = "reduction"
    ELEMENTWISE = "elementwise"
    NUMBER_OPERANDS = "number_operands"  # takes run-time numbers as fill values (squall.ltorch.numbers)
    STOPS_GRADIENT = "stops_gradient"  # detach: its output never carries a gradient back
    METADATA_OPERANDS = "metadata_operands"  # view_as: reads operands it does not compute with for their metadata only, so they get no gradient
    FUSION_REGION = "fusion_region"  # a fusion executor's region call; its members are its subsymbols
    BARRIER = "barrier"  # every later call runs after it, and no region spans it (a guard)


class Symbol:
    """An operation: a prim (with a meta function) or a torch-language op (with a decomposition).

    Calling a symbol while tracing runs its meta function (prims) or its Python body
    (ltorch ops, whose own symbol calls become its decomposition) and records the call
    as a `BoundSymbol`.
    """

    __slots__ = ("id", "name", "meta", "is_prim", "tags", "torchfns", "replayable", "__wrapped__", "_binder")

    def __init__(
        self,
        id: str,
        name: str,
        meta: Callable,
        *,
        is_prim: bool,
        tags: tuple[str, ...] = (),
        torchfns: tuple[Callable, ...] = (),
        replayable: bool = False,
    ):
        self.id = id
        self.name = name
        self.meta = meta
        self.is_prim = is_prim
        self.tags = frozenset(tags)
        # the torch callables this symbol stands for; the first accepts the symbol's own signature
        self.torchfns = torchfns
        # a body that is a function of its call's key alone (the torch language's): a later call
        # with the same key in one trace copies its first call's decomposition (squall.replays)
        self.replayable = replayable
        self.__wrapped__ = meta
        self._binder: _Binder | None = None

    def normalize(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The one form of a call: arguments bound to the meta function's signature, defaults applied.

        Parameters that can be passed by position come back positionally (a `*args`
        parameter spread out); keyword-only ones (and `**kwargs`) by keyword. A call the
        signature does not accept comes back as it was, so the meta function raises
        Python's own error for it.
        """
        binder = self._binder
        if binder is None:
            binder = self._binder = _Binder(self.meta)
        return binder(args, kwargs)

    def shortest(self, args: tuple, kwargs: dict, keywords: frozenset[str] = frozenset()) -> tuple[tuple, dict]:
        """A normalized call with the arguments that equal their defaults left out, and the
        ones the caller named (`keywords`) passed by name: how a call prints, and the form
        an implementation written against torch's own signature accepts."""
        binder = self._binder
        if binder is None:
            binder = self._binder = _Binder(self.meta)
        return binder.shortest(args, kwargs, keywords)

    def __call__(self, *args, **kwargs):
        ctx = current_context()
        if ctx is None:
            raise RuntimeError(f"squall: {self.id} can only be called while tracing (use squall.jit)")
        keywords = frozenset(kwargs) if kwargs else _NO_KEYWORDS
        binder = self._binder
        if binder is None:
            binder = self._binder = _Binder(self.meta)
        # the call as it is now: a list the program changes later (DenseNet appends to the list
        # it concatenates) must not change what this call read
        args, kwargs = snapshot_call(*binder(args, kwargs))
        top = len(ctx.scopes) == 1
        # (a top-level call only: an op inside a replayed one is copied with it)
        replays = ctx.decompositions if top and self.replayable else None
        keyed = call_key(self, args, kwargs) if replays is not None else None
        recorded = replays.get(keyed[0], _UNSEEN) if keyed is not None else None
        if recorded is not None and recorded is not _UNSEEN:
            out, subsymbols = recorded.replay(keyed[1], ctx.new_name)
        else:
            effects = ctx.effects() if recorded is _UNSEEN else None
            ctx.scopes.append([])
            try:
                out = self.meta(*args, **kwargs)
            finally:
                subsymbols = tuple(ctx.scopes.pop())
        grad_enabled = torch.is_grad_enabled()
        if not grad_enabled or Tags.STOPS_GRADIENT in self.tags:
            _mark_requires_grad(out, args, False)
        elif _requires_grad(args) or _requires_grad(kwargs.values()):
            _mark_requires_grad(out, args, True)
        bsym = BoundSymbol(self, args, kwargs, out, subsymbols, call_keywords=keywords, grad_enabled=grad_enabled)
        if recorded is _UNSEEN:
            # held only where the body did nothing but record calls (None: it runs at every call)
            replays[keyed[0]] = Decomposition.record(keyed[1], out, bsym.subsymbols) if ctx.effects() == effects else None
        if top:
            bsym.source = user_source()
            bsym.checkpoint_region = checkpoint_region()
        ctx.scopes[-1].append(bsym)
        return out

    def __repr__(self) -> str:
        return f"<Symbol {self.id}>"


_UNSEEN = object()  # a call key no call has had yet
_NO_KEYWORDS: frozenset[str] = frozenset()


def _requires_grad(values) -> bool:
    """Whether a tensor among `values` (or in a list or tuple among them) requires grad."""
    for v in values:
        if isinstance(v, TensorProxy):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def _mark_requires_grad(out: Any, args: tuple, value: bool) -> None:
    """Set the flag on the outputs this call made, as eager would: outputs computed from a tensor
    that requires grad do too (floating and complex ones; metas give their outputs `like=` one
    input, which would miss the others), and nothing made under no_grad or by detach does."""
    if isinstance(out, TensorProxy):
        if out.requires_grad != value and not any(out is a for a in args):
            if not value or out.dtype.is_floating_point or out.dtype.is_complex:
                out._requires_grad = value  # a proxy this call's meta made a moment ago
    elif isinstance(out, (list, tuple)):
        for o in out:
            _mark_requires_grad(o, args, value)


class _Binder:
    """Binds calls to one signature; the common call (positional arguments only) skips inspect."""

    __slots__ = ("signature", "n_positional", "positional_names", "positional_only", "positional_defaults", "keyword_defaults", "simple",
                 "keywords_required", "by_name", "spread")

    def __init__(self, fn: Callable):
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without a signature: calls stay as made
            self.signature = None
            return
        params = list(self.signature.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.n_positional = len(positional)
        self.positional_names = tuple(p.name for p in positional)
        self.positional_only = tuple(p.kind is p.POSITIONAL_ONLY for p in positional)
        self.positional_defaults = tuple(p.default for p in positional)
        self.keyword_defaults = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
        # no *args, **kwargs; a keyword-only parameter without a default (`var(a, dims, *, correction)`)
        # is bound here too where the call names it
        self.simple = all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)
        self.keywords_required = any(d is inspect.Parameter.empty for d in self.keyword_defaults.values())
        # the positional parameters a call may also name: name -> position
        self.by_name = {p.name: i for i, p in enumerate(positional) if p.kind is p.POSITIONAL_OR_KEYWORD}
        # a `*args` parameter (`reshape(a, *shape)`), no `**kwargs`, a default for every keyword-only one
        self.spread = any(p.kind is p.VAR_POSITIONAL for p in params) and all(p.kind is not p.VAR_KEYWORD for p in params) and all(
            d is not inspect.Parameter.empty for d in self.keyword_defaults.values()
        )

    def __call__(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if self.signature is None:
            return args, kwargs
        if self.simple and len(args) <= self.n_positional:
            if not kwargs:
                missing = self.positional_defaults[len(args):]
                if inspect.Parameter.empty not in missing and not self.keywords_required:
                    return args + missing, dict(self.keyword_defaults)
            else:
                bound = self._bind_named(args, kwargs)
                if bound is not None:
                    return bound
        elif self.spread and not kwargs and len(args) >= self.n_positional:
            # every positional parameter given, the rest spread into `*args`: as Signature.bind binds it
            return args, dict(self.keyword_defaults)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return args, kwargs
        bound.apply_defaults()
        return bound.args, bound.kwargs

    def _bind_named(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """`Signature.bind` + `apply_defaults` for a call that names some parameters, without
        inspect (a fifth of the binding cost of a traced program); None where the call is not
        plainly bindable (a name given twice, unknown or missing), for inspect to answer."""
        values = list(args) + list(self.positional_defaults[len(args):])
        keywords = dict(self.keyword_defaults)
        for name, value in kwargs.items():
            i = self.by_name.get(name)
            if i is not None:
                if i < len(args):
                    return None  # given by position and by name
                values[i] = value
            elif name in keywords:
                keywords[name] = value
            else:
                return None
        if any(v is inspect.Parameter.empty for v in values):
            return None
        if self.keywords_required and any(v is inspect.Parameter.empty for v in keywords.values()):
            return None
        return tuple(values), keywords

    def shortest(self, args: tuple, kwargs: dict, keywords: frozenset[str]) -> tuple[tuple, dict]:
        if self.signature is None:
            return args, kwargs
        kept = {k: v for k, v in kwargs.items() if not _is_default(v, self.keyword_defaults.get(k, inspect.Parameter.empty))}
        if len(args) > self.n_positional:  # a *args parameter took the rest: keep them as they are
            return args, kept
        # by position up to the first parameter the caller named, by name from there on: the
        # form torch accepted when the program ran eagerly (its overloads tell the two apart)
        n = next((i for i, name in enumerate(self.positional_names) if name in keywords), len(args))
        n = min(n, len(args))
        while n and _is_default(args[n - 1], self.positional_defaults[n - 1]):
            n -= 1
        named = {
            self.positional_names[i]: args[i]
            for i in range(n, len(args))
            if not _is_default(args[i], self.positional_defaults[i])
        }
        return args[:n], {**named, **kept}


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    # equal plain values (not 1 == 1.0 == True, which torch tells apart)
    return type(value) is type(default) and type(value) in (int, float, bool, str) and value == default


class BoundSymbol:
    """One call of a symbol: its arguments, its output, and (for ltorch ops) its decomposition.

    After planning, `executor` names the executor that runs the call and `impl` is the
    callable the generated code invokes.
    """

    __slots__ = (
        "sym", "args", "kwargs", "output", "_subsymbols", "source", "executor", "impl", "call_keywords", "grad_enabled",
        "checkpoint_region", "_inputs", "_outputs",
    )

    def __init__(
        self,
        sym,
        args,
        kwargs,
        output,
        subsymbols=(),
        source=None,
        executor=None,
        impl=None,
        *,
        call_keywords: frozenset[str] = frozenset(),
        grad_enabled: bool = True,
        checkpoint_region: int = 0,
    ):
        self.sym = sym
        self.args = args  # normalized: see Symbol.normalize
        self.kwargs = kwargs
        self.output = output
        self._subsymbols = subsymbols  # a tuple, or a replayed call's PendingCopy (squall.replays)
        self.source = source  # (filename, lineno, line) of the user's code, for explain
        self.executor = executor
        self.impl = impl
        self.call_keywords = call_keywords  # the parameters the program passed by name
        self.grad_enabled = grad_enabled  # False: recorded under torch.no_grad(), no gradient flows through it
        # the torch.utils.checkpoint call a top-level call was recorded in (0: none): what the
        # backward reads of it is recomputed there, not saved (squall.compiler.gradients)
        self.checkpoint_region = checkpoint_region
        # a bound symbol is never edited after it is made (passes copy it), so these are computed once
        self._inputs: list[TensorProxy] | None = None
        self._outputs: list[TensorProxy] | None = None

    @property
    def subsymbols(self) -> tuple:
        """The calls this one decomposes into (a replayed call's are copied on first read)."""
        subsymbols = self._subsymbols
        if type(subsymbols) is PendingCopy:
            subsymbols = self._subsymbols = subsymbols()
        return subsymbols

    def from_bsym(self, **changes: Any) -> BoundSymbol:
        """A copy with some fields changed; passes build these instead of editing a recorded call."""
        fields = {
            "sym": self.sym, "args": self.args, "kwargs": self.kwargs, "output": self.output,
            "subsymbols": self._subsymbols,  # a pending copy stays pending, shared
            "source": self.source, "executor": self.executor, "impl": self.impl, "call_keywords": self.call_keywords,
            "grad_enabled": self.grad_enabled, "checkpoint_region": self.checkpoint_region,
        }  # fmt: skip
        fields.update(changes)
        return BoundSymbol(**fields)

    def with_executor(self, executor, impl) -> BoundSymbol:
        """This call, run by `executor` as `impl` (the planner's copy of each call it places)."""
        copy = BoundSymbol(self.sym, self.args, self.kwargs, self.output, self._subsymbols, self.source, executor, impl,
                           call_keywords=self.call_keywords, grad_enabled=self.grad_enabled, checkpoint_region=self.checkpoint_region)
        copy._inputs, copy._outputs = self._inputs, self._outputs  # the same arguments and output: the same proxies
        return copy

    def shortest_arguments(self) -> tuple[tuple, dict]:
        """The call's arguments as printed and as passed to an implementation (see Symbol.shortest)."""
        return self.sym.shortest(self.args, self.kwargs, self.call_keywords)

    def input_proxies(self) -> list[TensorProxy]:
        if self._inputs is None:
            self._inputs = flat_proxies((self.args, self.kwargs))
        return self._inputs

    def output_proxies(self) -> list[TensorProxy]:
        if self._outputs is None:
            self._outputs = flat_proxies(self.output)
        return self._outputs

    def swap_proxies(self, mapping: dict[int, TensorProxy]) -> BoundSymbol:
        """A copy with proxy objects replaced (by identity) in this call and its decomposition;
        the call itself where it names none of them (calls are never edited, so sharing is safe)."""
        if not self.mentions(mapping):
            return self
        swap = lambda x: mapping.get(id(x), x) if isinstance(x, TensorProxy) else x
        return self.from_bsym(
            args=tree_map(swap, self.args, is_leaf=size_leaf),
            kwargs=tree_map(swap, self.kwargs, is_leaf=size_leaf),
            output=tree_map(swap, self.output, is_leaf=size_leaf),
            subsymbols=tuple(sub.swap_proxies(mapping) for sub in self.subsymbols),
        )

    def mentions(self, ids: dict[int, Any] | set[int]) -> bool:
        """Whether this call or its decomposition names a proxy whose id is in `ids`. A replayed
        call's decomposition not copied yet is not read (nor copied): it reads only the call's
        inputs and returns its outputs, and the proxies it makes between are its own."""
        return (
            any(id(p) in ids for p in self.input_proxies())
            or any(id(p) in ids for p in self.output_proxies())
            or (type(self._subsymbols) is not PendingCopy and any(sub.mentions(ids) for sub in self._subsymbols))
        )

    def walk(self) -> Iterator[BoundSymbol]:
        yield self
        for sub in self.subsymbols:
            yield from sub.walk()

    def tagged(self, tag: str) -> Iterator[BoundSymbol]:
        """This call and the calls in its decomposition, at any depth, whose symbol has `tag`, as
        `walk` orders them; a replayed decomposition not copied yet is copied only where its
        recording holds such a call (a DistilBERT trace's copies cost more than the question)."""
        if tag in self.sym.tags:
            yield self
        pending = self._subsymbols
        if type(pending) is PendingCopy and not pending.may_hold(tag):
            return
        for sub in self.subsymbols:
            yield from sub.tagged(tag)

    def __repr__(self) -> str:
        return f"<BoundSymbol {self.sym.id} -> {self.output!r}>"


def _del_meta(*names: TensorProxy) -> None:
    return None


# Frees the tensors it names: the execution trace says where each intermediate dies
DEL = Symbol("python.del", "del", _del_meta, is_prim=True, tags=(Tags.SIDE_EFFECT,))


_LEAVES = (int, float, bool, str, complex, type(None), torch.dtype, torch.device, slice, type(Ellipsis))
# the values a snapshot keeps as they are, by exact type (the common case, one set lookup)
_SNAPSHOT_KEEPS = frozenset(_LEAVES) | {TensorProxy, NumberProxy, torch.Size}
_KEPT_ITEMS = _SNAPSHOT_KEEPS - {torch.Size}  # kept whatever they hold (a torch.Size may hold symbolic sizes)


def snapshot(value: Any) -> Any:
    """`value` with every list and dict in it (at any depth, inside tuples too) copied: what
    a recorded call holds, so that a later change to a container the program still has does
    not change what the call read. Tensors, numbers and other objects are kept as they are
    (a proxy's identity is what in-place ops rebind); a tuple holding no container is itself.
    Subclasses of list and dict (a state recorder's copies among them) become plain ones,
    which print as literals."""
    t = type(value)
    if t in _SNAPSHOT_KEEPS:
        if t is torch.Size and not all(type(v) is int for v in value):
            # `torch.Size(x.shape)` holds the symbolic sizes themselves (torch takes them as its
            # SymInts): recorded as a SymShape is, as the tuple of their expressions
            return tuple(value)
        return value
    if t is tuple:
        for i, v in enumerate(value):
            if type(v) in _KEPT_ITEMS:
                continue  # (snapshot(v) is v: this runs for every argument of every traced call)
            copied = snapshot(v)
            if copied is not v:
                return value[:i] + (copied,) + tuple(snapshot(w) for w in value[i + 1:])
        return value
    if t is SymShape:
        # a shape holding symbolic sizes, passed on (`x.view(y.shape)`): recorded as the tuple of
        # sizes it is, which prints as their expressions (its str would read their values)
        return tuple(value)
    if isinstance(value, list):
        return [snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    if isinstance(value, tuple):
        # a named tuple (or a torch.return_types result) holding a list: rebuilt, its type kept
        items = [snapshot(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        if hasattr(value, "_make"):
            return value._make(items)
        try:
            return t(items)
        except TypeError:  # a tuple type that cannot be rebuilt from its items: held as before
            return value
    return value


def snapshot_call(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A call's arguments, snapshotted (see `snapshot`); `kwargs` is a dict made for this call,
    kept where it holds nothing mutable."""
    args = snapshot(args)
    for v in kwargs.values():
        if type(v) not in _SNAPSHOT_KEEPS:
            return args, {k: snapshot(v) for k, v in kwargs.items()}
    return args, kwargs


def flat_proxies(tree: Any) -> list[TensorProxy | NumberProxy]:
    """The proxies in a pytree, in order: tensors, and numbers known only at run time."""
    found: list[TensorProxy] = []
    _collect(tree, found)
    return found


def _collect(x: Any, found: list[TensorProxy]) -> None:
    # the containers calls are made of, walked directly: compile time calls this for every
    # call a pass looks at; other pytree nodes (named tuples, return types) go to pytree
    t = type(x)
    if t is TensorProxy or t is NumberProxy:
        found.append(x)
    elif t is tuple or t is list:
        for v in x:
            _collect(v, found)
    elif t is dict:
        for v in x.values():
            _collect(v, found)
    elif t in _LEAVES or isinstance(x, _LEAVES):
        return
    else:
        found.extend(v for v in tree_flatten(x)[0] if isinstance(v, (TensorProxy, NumberProxy)))


_SQUALL_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# squall's own files run around a traced program; the demo's model is a program like a user's
# (named by module, not by file, so it holds wherever in core/ the demo lives)
_DEMO = "squall.tools.demo"
_TORCH_DIR = f"{os.sep}torch{os.sep}"


def user_stacklevel() -> int:
    """The `stacklevel` that makes a warning issued by the caller point at the user's code: the
    first frame outside squall's files and its generated code (the demo's model is user code)."""
    level, f = 1, sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if (not fn.startswith(_SQUALL_DIR) or f.f_globals.get("__name__") == _DEMO) and not fn.startswith("<squall-"):
            return level
        level, f = level + 1, f.f_back
    return 1


def running_inside(code: types.CodeType) -> bool:
    """Whether a frame of `code` is on the stack below the caller (torch.utils.checkpoint's,
    torch.autograd.Function.apply's)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def called_from_torch() -> bool:
    """Whether the innermost frame outside squall is torch's own (torch.utils.checkpoint making its
    dummy leaf), not the program's."""
    f = sys._getframe(1)
    while f is not None:
        module = f.f_globals.get("__name__") or ""
        if not (module.startswith("squall") or f.f_code.co_filename.startswith("<squall-")):
            return module == "torch" or module.startswith("torch.")
        f = f.f_back
    return False


def user_source() -> tuple[str, int, str] | None:
    """The innermost frame of the traced program (not squall's tracing machinery, not torch)."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        # (each code object's answer kept: this walks several frames for every call a trace records)
        known = _MACHINERY.get(id(code))
        if known is not None and known[0] is code:
            machinery = known[1]
        else:
            machinery = _machinery(code.co_filename, f.f_globals.get("__name__"))
            if not code.co_filename.startswith("<squall-"):  # generated code is made per compile: not kept
                if len(_MACHINERY) >= _MACHINERY_KEPT:
                    _MACHINERY.clear()  # code made at run time (exec'd, dataclasses') would pile up
                _MACHINERY[id(code)] = (code, machinery)
        if not machinery:
            fn = code.co_filename
            return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return None


def _machinery(filename: str, module: str | None) -> bool:
    # "<stdin>", "<string>" and notebook cells are the program's; "<squall-...>" is generated code
    return not ((not filename.startswith(_SQUALL_DIR) or module == _DEMO) and _TORCH_DIR not in filename and not filename.startswith("<squall-"))


# id(code object) -> (it, whether user_source passes over its frames); by id, as code objects
# compare by contents, not by file (a plain dict: a weak one's lookup cost as much as the checks)
_MACHINERY: dict[int, tuple[Any, bool]] = {}
_MACHINERY_KEPT = 4096
