"""Symbols (operations) and bound symbols (one call of an operation in a trace)."""
from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils._pytree import tree_flatten, tree_map

from .proxies import TensorProxy, current_context

__all__ = ["Symbol", "BoundSymbol", "Tags", "flat_proxies"]


class Tags:
    """Tags on symbols; planners and executors read them, nothing else does."""

    SIDE_EFFECT = "side_effect"  # never removed as dead code
    OPAQUE = "opaque"  # a torch call squall does not model; runs as itself
    RANDOM = "random"  # draws from a random number generator
    SHAPE_ONLY = "shape_only"  # changes metadata only (views, reshapes)
    REDUCTION = "reduction"
    ELEMENTWISE = "elementwise"


class Symbol:
    """An operation: a prim (with a meta function) or a torch-language op (with a decomposition).

    Calling a symbol while tracing runs its meta function (prims) or its Python body
    (ltorch ops, whose own symbol calls become its decomposition) and records the call
    as a `BoundSymbol`.
    """

    __slots__ = ("id", "name", "meta", "is_prim", "tags", "torchfns", "__wrapped__")

    def __init__(
        self,
        id: str,
        name: str,
        meta: Callable,
        *,
        is_prim: bool,
        tags: tuple[str, ...] = (),
        torchfns: tuple[Callable, ...] = (),
    ):
        self.id = id
        self.name = name
        self.meta = meta
        self.is_prim = is_prim
        self.tags = frozenset(tags)
        # the torch callables this symbol stands for; the first accepts the symbol's own signature
        self.torchfns = torchfns
        self.__wrapped__ = meta

    def __call__(self, *args, **kwargs):
        ctx = current_context()
        if ctx is None:
            raise RuntimeError(f"squall: {self.id} can only be called while tracing (use squall.jit)")
        ctx.scopes.append([])
        try:
            out = self.meta(*args, **kwargs)
        finally:
            subsymbols = ctx.scopes.pop()
        bsym = BoundSymbol(self, args, kwargs, out, tuple(subsymbols))
        if len(ctx.scopes) == 1:
            bsym.source = user_source()
        ctx.scopes[-1].append(bsym)
        return out

    def __repr__(self) -> str:
        return f"<Symbol {self.id}>"


class BoundSymbol:
    """One call of a symbol: its arguments, its output, and (for ltorch ops) its decomposition.

    After planning, `executor` names the executor that runs the call and `impl` is the
    callable the generated code invokes.
    """

    __slots__ = ("sym", "args", "kwargs", "output", "subsymbols", "source", "executor", "impl")

    def __init__(self, sym, args, kwargs, output, subsymbols=(), source=None, executor=None, impl=None):
        self.sym = sym
        self.args = args
        self.kwargs = kwargs
        self.output = output
        self.subsymbols = subsymbols
        self.source = source  # (filename, lineno, line) of the user's code, for explain
        self.executor = executor
        self.impl = impl

    def with_executor(self, executor, impl) -> BoundSymbol:
        return BoundSymbol(self.sym, self.args, self.kwargs, self.output, self.subsymbols, self.source, executor, impl)

    def input_proxies(self) -> list[TensorProxy]:
        return flat_proxies((self.args, self.kwargs))

    def output_proxies(self) -> list[TensorProxy]:
        return flat_proxies(self.output)

    def replace_proxies(self, mapping: dict[int, TensorProxy]) -> None:
        """Replace proxy objects (by identity) everywhere in this call and its decomposition."""
        swap = lambda x: mapping.get(id(x), x) if isinstance(x, TensorProxy) else x
        self.args = tree_map(swap, self.args)
        self.kwargs = tree_map(swap, self.kwargs)
        self.output = tree_map(swap, self.output)
        for sub in self.subsymbols:
            sub.replace_proxies(mapping)

    def walk(self) -> Iterator[BoundSymbol]:
        yield self
        for sub in self.subsymbols:
            yield from sub.walk()

    def __repr__(self) -> str:
        return f"<BoundSymbol {self.sym.id} -> {self.output!r}>"


def flat_proxies(tree: Any) -> list[TensorProxy]:
    """The tensor proxies in a pytree, in order."""
    return [x for x in tree_flatten(tree)[0] if isinstance(x, TensorProxy)]


_SQUALL_DIR = os.path.dirname(os.path.abspath(__file__))
# the files that run while a program is traced; any other frame is the program's own
_TRACING_MACHINERY = tuple(
    os.path.join(_SQUALL_DIR, part) for part in ("ltorch" + os.sep, "prims" + os.sep, "proxies.py", "symbol.py")
)


def user_source() -> tuple[str, int, str] | None:
    """The innermost frame of the traced program (not squall's tracing machinery, not torch)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        # "<stdin>", "<string>" and notebook cells are the program's; "<squall-...>" is generated code
        if not fn.startswith(_TRACING_MACHINERY) and f"{os.sep}torch{os.sep}" not in fn and not fn.startswith("<squall-"):
            return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return None
