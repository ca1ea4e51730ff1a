"""What an executor is: the objects a plugin builds to put implementations on the market.

An `OperatorExecutor` maps symbol ids (ltorch ops, prims, or its own executor-level
symbols) to an `Implementation`: the callable run on real tensors, a checker run on
proxies at compile time, and optionally an execution transform that rewrites the call
into the executor's own symbols.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squall.symbol import Symbol, Tags

__all__ = ["Availability", "Implementation", "Executor", "OperatorExecutor", "FusionExecutor"]


@dataclass(frozen=True)
class Availability:
    """Whether an executor can run here, and if not, why (library missing, no device, ...)."""

    available: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.available


@dataclass(frozen=True)
class Implementation:
    """One executor's offer for one operation."""

    impl: Callable | None
    checker: Callable[..., bool] | None = None
    execution_transform: Callable | None = None


def _symbol_id(op: Symbol | str) -> str:
    return op.id if isinstance(op, Symbol) else op


class Executor:
    """An executor: a named vendor of implementations, with a rank and an availability."""

    def __init__(
        self,
        name: str,
        *,
        version: str = "",
        distribution: str = "",
        default_rank: int = 100,
        supports_autograd: bool = False,
    ):
        if not name.isidentifier():
            raise ValueError(f"executor name must be a Python identifier, got {name!r}")
        self.name = name
        self.version = version
        self.distribution = distribution
        # lower ranks are asked first; the built-in torch executor is always asked last
        self.default_rank = default_rank
        # whether PyTorch's autograd can differentiate through this executor's implementations
        self.supports_autograd = supports_autograd

    def is_available(self) -> Availability:
        """Whether this executor can run here; subclasses check libraries and devices."""
        return Availability(True)

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        """This executor's offer for `sym`, or None."""
        return None

    def claimed_ops(self) -> list[str]:
        """The ids of the operations this executor implements."""
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class OperatorExecutor(Executor):
    """An executor that implements operations one call at a time."""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.implementations: dict[str, Implementation] = {}
        self.operators: dict[str, Symbol] = {}

    def register_operator(self, name: str, *, meta: Callable, fn: Callable, tags: tuple[str, ...] = ()) -> Symbol:
        """Declare an executor-level symbol `<executor>.<name>` whose implementation is `fn`.

        Execution transforms call such symbols (with proxies) to spell a torch op in this
        executor's own operations; `meta` gives their outputs.
        """
        if not name.isidentifier():
            raise ValueError(f"operator name must be a Python identifier, got {name!r}")
        sym = Symbol(f"{self.name}.{name}", name, meta, is_prim=True, tags=tags)
        self.operators[name] = sym
        self.implementations[sym.id] = Implementation(fn)
        return sym

    def register_implementation(
        self,
        op: Symbol | str,
        impl: Callable | None = None,
        *,
        checker: Callable[..., bool] | None = None,
        execution_transform: Callable | None = None,
    ) -> None:
        """Offer `impl` (called with real tensors) for `op`, when `checker` (called with proxies) agrees.

        With an `execution_transform`, the call is instead rewritten by running the
        transform on proxies; it must call symbols this executor implements.
        """
        if impl is None and execution_transform is None:
            raise ValueError("register_implementation needs an impl or an execution_transform")
        self.implementations[_symbol_id(op)] = Implementation(impl, checker, execution_transform)

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        return self.implementations.get(sym.id)

    def claimed_ops(self) -> list[str]:
        return sorted(self.implementations)


class FusionExecutor(Executor):
    """An executor that claims operations and fuses runs of them into regions.

    Subclasses implement `fusion_pass`, which receives the planned calls in order and
    returns them with the claimed ones grouped into region calls.
    """

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.supported: dict[str, Callable[..., bool] | None] = {}

    def register_supported(self, op: Symbol | str, checker: Callable[..., bool] | None = None) -> None:
        """Declare that this executor can fuse `op` (when `checker`, given proxies, agrees)."""
        self.supported[_symbol_id(op)] = checker

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        if sym.id not in self.supported:
            return None
        return Implementation(None, self.supported[sym.id])

    def claimed_ops(self) -> list[str]:
        return sorted(self.supported)

    def fusion_pass(self, bsyms: list) -> list:
        """Group this executor's claimed calls into regions; the default fuses nothing."""
        return bsyms


def is_side_effect(sym: Symbol) -> bool:
    return Tags.SIDE_EFFECT in sym.tags
