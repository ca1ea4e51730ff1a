"""Operations by name: custom operations plugins add, and how a name resolves to a symbol.

A `CustomOperation` is an operation a plugin (or user) defines with a meta function; an
`OperationRegistry` holds one marketplace's custom operations. `resolve_operation` turns
what a user or plugin writes ("torch.nn.functional.softmax", "prims.exp",
"example.scaled_tanh") into the symbol executors register implementations for.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator

from .. import ltorch, prims
from ..proxies import current_context
from ..symbol import Symbol

__all__ = ["CustomOperation", "OperationRegistry", "resolve_operation", "symbol_id"]


class CustomOperation:
    """An operation a plugin (or user) adds: a symbol with a meta function, callable from user code.

    Called while squall traces, it records a call of `symbol`, which executors implement by
    its id; called outside squall, it runs `reference` (a torch function of the same signature).
    """

    def __init__(self, id: str, *, meta: Callable, reference: Callable | None = None, tags: Iterable[str] = ()):
        namespace, _, name = id.rpartition(".")
        if not namespace or not all(part.isidentifier() for part in id.split(".")):
            raise ValueError(f"a custom operation's id is '<namespace>.<name>' of identifiers, got {id!r}")
        torchfns = (reference,) if reference is not None else ()
        self.symbol = Symbol(id, name, meta, is_prim=True, tags=tuple(tags), torchfns=torchfns)
        self.reference = reference

    @property
    def id(self) -> str:
        """The operation's id, "<namespace>.<name>"."""
        return self.symbol.id

    def __call__(self, *args, **kwargs):
        if current_context() is not None:
            return self.symbol(*args, **kwargs)
        if self.reference is None:
            raise RuntimeError(f"{self.id} has no reference implementation: call it inside a squall.jit function")
        return self.reference(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<CustomOperation {self.id}>"


class OperationRegistry:
    """The custom operations defined in one marketplace, by id."""

    def __init__(self) -> None:
        self._ops: dict[str, CustomOperation] = {}

    def define(self, id: str, *, meta: Callable, reference: Callable | None = None, tags: Iterable[str] = ()) -> CustomOperation:
        """Create and add the operation `id` ("<namespace>.<name>"); see `CustomOperation`."""
        return self.add(CustomOperation(id, meta=meta, reference=reference, tags=tags))

    def add(self, op: CustomOperation) -> CustomOperation:
        """Add an operation built elsewhere (e.g. at a plugin module's top level)."""
        known = self._ops.get(op.id)
        if known is not None and known is not op:
            raise ValueError(f"operation {op.id!r} is already defined")
        self._ops[op.id] = op
        return op

    def get(self, id: str) -> CustomOperation | None:
        """The operation `id`, or None."""
        return self._ops.get(id)

    def __contains__(self, id: object) -> bool:
        return id in self._ops

    def __iter__(self) -> Iterator[CustomOperation]:
        return iter(list(self._ops.values()))

    def __len__(self) -> int:
        return len(self._ops)


@functools.cache
def _known_symbols() -> dict[str, Symbol]:
    return {**prims.all_prims(), **ltorch.names_to_symbols()}


def resolve_operation(name: str, operations: OperationRegistry | None = None) -> Symbol:
    """The symbol a name stands for: a torch name ("torch.nn.functional.softmax"), an ltorch or
    prim id, or a custom operation's id in `operations`. An unknown name is a `KeyError`."""
    sym = _known_symbols().get(name)
    if sym is not None:
        return sym
    if operations is not None and name in operations:
        return operations.get(name).symbol
    import difflib  # only on the error path

    close = difflib.get_close_matches(name, list(_known_symbols()) + [op.id for op in operations or ()], n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise KeyError(f"{name!r} names no operation squall knows (torch ops, prims, custom operations){hint}")


def symbol_id(op: Symbol | CustomOperation | str) -> str:
    """The id executors key their tables by: a symbol's or custom operation's id, a torch name's symbol id,
    or the string itself (an id squall does not know yet, e.g. another plugin's operation)."""
    if isinstance(op, (Symbol, CustomOperation)):
        return op.id
    sym = _known_symbols().get(op)
    return sym.id if sym is not None else op
