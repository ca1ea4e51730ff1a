"""What an executor is: a named vendor of implementations, with a rank and an availability.

An `OperatorExecutor` maps symbol ids (ltorch ops, prims, custom operations, or its own
executor-level symbols) to an `Implementation`: the callable run on real tensors, a
checker run on proxies at compile time, and optionally an execution transform that
rewrites the call into the executor's own symbols. Fusion executors are in `fusion`;
plugin authors import all of it from `squall.extend`.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..symbol import BoundSymbol, Symbol
from .operations import CustomOperation, symbol_id

__all__ = [
    "Availability",
    "GradRule",
    "Implementation",
    "InPlaceForm",
    "Executor",
    "OperatorExecutor",
    "NOT_IMPLEMENTED",
    "CHECKER_DECLINED",
    "CHECKER_RAISED",
    "UNAVAILABLE",
]

# why an executor did not take an operation; reasons start with one of these
NOT_IMPLEMENTED = "not implemented"
CHECKER_DECLINED = "checker declined"
CHECKER_RAISED = "checker raised"
UNAVAILABLE = "unavailable"


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:4])


@dataclass(frozen=True)
class Availability:
    """Whether an executor can run here, and if not, why (library missing, no device, ...)."""

    available: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.available

    @classmethod
    def of_library(cls, module: str, min_version: str = "", *, distribution: str | None = None) -> Availability:
        """Available when `module` is importable and (its distribution's) version is at least `min_version`."""
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return cls(False, f"library {module!r} is not installed")
        if min_version:
            try:
                version = importlib.metadata.version(distribution or module)
            except importlib.metadata.PackageNotFoundError:
                version = str(getattr(importlib.import_module(module), "__version__", ""))
            if _version_tuple(version) < _version_tuple(min_version):
                return cls(False, f"{module} {version or '(unknown version)'} is older than the required {min_version}")
        return cls(True)

    @classmethod
    def of_cuda(cls) -> Availability:
        """Available when PyTorch sees a CUDA device."""
        return cls(True) if torch.cuda.is_available() else cls(False, "no CUDA device")


@dataclass(frozen=True)
class GradRule:
    """How one operation is differentiated (see `squall.compiler.gradients`): a `backward` over a `GradCall`.

    Defined here, beside the offer it is part of (`Implementation.grad_transform`), so the
    market does not import the differentiation that uses it."""

    backward: Callable[..., Any]  # (GradCall) -> one gradient (or None) per input proxy
    # (*args, **kwargs) -> (output, residuals); None: the operation itself, no residuals
    forward: Callable[..., tuple[Any, tuple]] | None = None


@dataclass(frozen=True)
class Implementation:
    """One executor's offer for one operation."""

    impl: Callable | None
    checker: Callable[..., bool] | None = None
    execution_transform: Callable | None = None
    # how this executor differentiates the operation when it takes it in a program that
    # needs gradients (forward and backward, usually in its own operations); None: the default rule
    grad_transform: GradRule | None = None


@dataclass(frozen=True)
class InPlaceForm:
    """How an executor runs an operation writing some of its results into its own arguments,
    where a program's write-back of those results (`copy_(argument, result)`) follows it:
    what eager does (batch norm updates its running statistics inside the kernel).

    `sym` names the call in the trace (tagged SIDE_EFFECT), `impl` runs it with the
    operation's arguments and returns its other results; `writes` maps each written result's
    index to the index of the argument it is written into (a single result is index 0).
    `fresh`: the operation's result is a copy of the argument it writes (its layout included)
    with the write applied, so the form may also run on an intermediate the call is the last
    to read, writing it where the copy would have been made (`x = y.roll(1); x[0] = v`)."""

    sym: Symbol
    impl: Callable
    writes: dict[int, int]
    fresh: bool = False


def _run_checker(impl: Implementation, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
    if impl.checker is None:
        return impl, ""
    try:
        accepted = impl.checker(*bsym.args, **bsym.kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a plugin's fault (even sys.exit) must not break compilation
        return None, f"{CHECKER_RAISED} {type(e).__name__}: {e}"
    return (impl, "") if accepted else (None, CHECKER_DECLINED)


class Executor:
    """An executor: a named vendor of implementations, with a rank and an availability.

    `requires` lists libraries it needs ("apex", "triton>=2.1"); `needs_cuda` a CUDA
    device; `default=False` keeps it out of the default list (used only when named).
    """

    # set by `squall.extend.assume_available` to plan as on another machine; wins over the real check
    _assumed: Availability | None = None

    def __init__(
        self,
        name: str,
        *,
        version: str = "",
        distribution: str = "",
        default_rank: int = 100,
        supports_autograd: bool = False,
        default: bool = True,
        requires: Sequence[str] = (),
        needs_cuda: bool = False,
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
        self.default = default
        self.requires = tuple(requires)
        self.needs_cuda = needs_cuda
        self._availability: Availability | None = None
        self._release: str | None = None

    def release(self) -> str:
        """Its `version` and the installed release of the distribution that provides it (the
        plugin's own, found once): what choices remembered on disk are keyed by, since a new
        release may compile or plan otherwise."""
        if self._release is None:
            installed = ""
            if self.distribution:
                try:
                    installed = importlib.metadata.version(self.distribution)
                except importlib.metadata.PackageNotFoundError:
                    pass
            self._release = f"{self.version} {self.distribution}=={installed}" if self.distribution else self.version
        return self._release

    def is_available(self) -> Availability:
        """Whether this executor can run here; the default checks `requires` and `needs_cuda`."""
        for requirement in self.requires:
            module, _, min_version = requirement.partition(">=")
            found = Availability.of_library(module.strip(), min_version.strip())
            if not found:
                return found
        return Availability.of_cuda() if self.needs_cuda else Availability(True)

    def availability(self) -> Availability:
        """`is_available()`, asked once; one that raises makes the executor unavailable.

        Inside `squall.extend.assume_available(self)`, the assumed availability instead.
        """
        if self._assumed is not None:
            return self._assumed
        if self._availability is None:
            try:
                found = self.is_available()
                if type(found) is bool:  # a plain answer, without a reason
                    found = Availability(found, "" if found else "is_available() returned False")
                elif not isinstance(found, Availability):
                    found = Availability(False, f"is_available() returned a {type(found).__name__}, not an Availability")
                self._availability = found
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - a plugin's fault (even sys.exit) must not break compilation
                self._availability = Availability(False, f"is_available() raised {type(e).__name__}: {e}")
        return self._availability

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        """This executor's offer for `sym`, or None."""
        return None

    def offer(self, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
        """The implementation for this call, or None and why not (a dict lookup and a checker call)."""
        impl = self.implementation_for(bsym.sym)
        if impl is None:
            return None, NOT_IMPLEMENTED
        return _run_checker(impl, bsym)

    def claimed_ops(self) -> list[str]:
        """The ids of the operations this executor implements."""
        return []

    def in_place_form(self, bsym: BoundSymbol) -> InPlaceForm | None:
        """How this executor runs `bsym` (a call it took) writing results into arguments, or None
        (see `InPlaceForm` and `squall.compiler.passes.write_backs_folded`)."""
        return None

    def describe_op(self, op: str) -> str:
        """A short note on how this executor runs the claimed `op` (shown by `squall executors --ops`)."""
        return ""

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
        op: Symbol | CustomOperation | str,
        impl: Callable | None = None,
        *,
        checker: Callable[..., bool] | None = None,
        execution_transform: Callable | None = None,
        grad_transform: GradRule | None = None,
    ) -> None:
        """Offer `impl` (called with real tensors) for `op`, when `checker` (called with proxies) agrees.

        `op` is a symbol, a custom operation, or a name (a torch name such as "torch.exp", or
        an id). With an `execution_transform`, the call is instead rewritten by running the
        transform on proxies; it must call symbols this executor implements. With a
        `grad_transform` (a `GradRule`), a call this executor takes in a program that needs
        gradients is differentiated by it: its `forward` and `backward` run on proxies and
        usually call this executor's own operations (`register_operator`).
        """
        if impl is None and execution_transform is None:
            raise ValueError("register_implementation needs an impl or an execution_transform")
        if grad_transform is not None and not isinstance(grad_transform, GradRule):
            raise TypeError(f"grad_transform must be a squall.extend.GradRule, got {type(grad_transform).__name__}")
        self.implementations[symbol_id(op)] = Implementation(impl, checker, execution_transform, grad_transform)

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        return self.implementations.get(sym.id)

    def claimed_ops(self) -> list[str]:
        return sorted(self.implementations)
