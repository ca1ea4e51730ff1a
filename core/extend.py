"""The public face for plugin authors: everything an executor package imports from squall.

What an executor is lives in `executor` (`Executor`, `OperatorExecutor`, `Availability`,
`Implementation`), fusion in `fusion` (`FusionExecutor`, `FusionRegion`, `Declined`,
`form_regions`), custom operations in `operations`; this module gathers them with the
hook marker, the IR types checkers and transforms see (`TensorProxy`, `BoundSymbol`,
`Symbol`, `Tags`, `PrimIDs`), the built-in torch executor's prim table, the loader for
generated source, and three entry points of its own:

- `add_operator_executor` builds an operator executor from plain code, without a package;
- `register_executor` puts an executor built in plain code on the market;
- `assume_available` plans as on a machine where an executor is available.

Import from here, not from squall's internal modules: these names stay where they are.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping

from .compiler.checking import tensor_problem
from .compiler.gradients import GradCall, GradRule
from .frontend.tracing import trace_program
from .ltorch.base import SquallWarning
from .market.executor import (
    CHECKER_DECLINED,
    CHECKER_RAISED,
    NOT_IMPLEMENTED,
    UNAVAILABLE,
    Availability,
    Executor,
    Implementation,
    OperatorExecutor,
)
from .market.fusion import FUSION_REGION, LEFT_OUT, Declined, FusionExecutor, FusionRegion, compiling_stopped, example_tensor, form_regions, in_background_upgrade, stop_compiling, stride_met, note_strides, upgrades_are_awaited
from .market.hookspecs import hookimpl
from .market.operations import CustomOperation, OperationRegistry, resolve_operation
from .market.plugins import Marketplace, default_marketplace
from .market.torch_executor import KERNEL_IMPLS as TORCH_KERNEL_IMPLS, PRIM_IMPLS as TORCH_PRIM_IMPLS
from .prims import all_prims
from .prims.base import PrimIDs
from .proxies import NumberProxy, TensorProxy, current_context, symbol_reads, symbol_values
from .runtime.choices import ChoiceStore, timing_clock
from .runtime.judge_compare import GRADIENT_LOOSER, ill_conditioned, largest_difference, outputs_differ, rounding_change
from .sources import load_source
from .symbol import BoundSymbol, Symbol, Tags
from .symbolic import SymInt, concrete_shape, lone_symbol, source as size_source, symbols_of
from .trace import ValuePrinter

__all__ = [
    # executors
    "Availability",
    "Implementation",
    "Executor",
    "OperatorExecutor",
    "FusionExecutor",
    "ChoiceStore",
    "timing_clock",
    "in_background_upgrade",
    "upgrades_are_awaited",
    "FusionRegion",
    "example_tensor",
    "stride_met",
    "note_strides",
    "tensor_problem",
    "outputs_differ",
    "GRADIENT_LOOSER",
    "largest_difference",
    "rounding_change",
    "ill_conditioned",
    "Declined",
    "form_regions",
    "compiling_stopped",
    "stop_compiling",
    # operations
    "CustomOperation",
    "OperationRegistry",
    "resolve_operation",
    # putting executors on the market, and planning as elsewhere
    "hookimpl",
    "add_operator_executor",
    "register_executor",
    "assume_available",
    # what checkers, transforms and fusion passes see
    "TensorProxy",
    "NumberProxy",
    # symbolic sizes (squall.symbolic): what a region's shapes hold where a dimension changes
    "SymInt",
    "symbols_of",
    "concrete_shape",
    "size_source",
    "lone_symbol",
    "symbol_reads",
    "symbol_values",
    "BoundSymbol",
    "Symbol",
    "Tags",
    "PrimIDs",
    "all_prims",
    "TORCH_PRIM_IMPLS",
    "TORCH_KERNEL_IMPLS",
    "ValuePrinter",
    "load_source",
    "trace_program",
    # gradients: an executor's own forward and backward for an operation it takes
    "GradRule",
    "GradCall",
    "SquallWarning",
    # why an executor did not take an operation (reasons start with one of these)
    "NOT_IMPLEMENTED",
    "CHECKER_DECLINED",
    "CHECKER_RAISED",
    "UNAVAILABLE",
    "FUSION_REGION",
    "LEFT_OUT",
]


@contextlib.contextmanager
def assume_available(*executors: Executor | str, marketplace: Marketplace | None = None) -> Iterator[list[Executor]]:
    """Plan as on a machine where `executors` are available, whatever this one has.

        with squall.extend.assume_available("cupy"):
            report = squall.explain(fn, *cuda_stand_ins)

    For planning tests and ahead-of-time planning on a machine without the device or
    library: inside the block each executor (an object, or a name in `marketplace`, the
    default one when None) reports itself available, so priority lists keep it and the
    planner offers it every operation; its checkers and transforms run as they would
    there. Nothing is imported or run on its behalf: code that *calls* its implementations
    still needs the real thing. On exit each reports its real availability again (blocks
    nest). Yields the executors, resolved.
    """
    market = None
    resolved: list[Executor] = []
    for ex in executors:
        if isinstance(ex, str):
            market = market or marketplace or default_marketplace()
            found = market.get(ex)
            if found is None:
                raise KeyError(f"no executor named {ex!r}; installed: {', '.join(market.names())}")
            ex = found
        if not isinstance(ex, Executor):
            raise TypeError(f"assume_available takes executors or executor names, got {type(ex).__name__}")
        resolved.append(ex)
    previous = [ex._assumed for ex in resolved]
    assumed = Availability(True, "assumed available (squall.extend.assume_available)")
    for ex in resolved:
        ex._assumed = assumed
    try:
        yield resolved
    finally:
        for ex, before in zip(resolved, previous):
            ex._assumed = before


def _meta_like(sym: Symbol) -> Callable:
    """A meta function giving `sym`'s outputs, without recording its decomposition."""

    def meta(*args, **kwargs):
        ctx = current_context()
        ctx.scopes.append([])
        try:
            return sym.meta(*args, **kwargs)
        finally:
            ctx.scopes.pop()

    return meta


def register_executor(ex: Executor, *, add_to_default_executors: bool = True, marketplace: Marketplace | None = None) -> Executor:
    """Put an executor built in plain code on the (default) market."""
    (marketplace or default_marketplace()).add_executor(ex, default=add_to_default_executors)
    return ex


def add_operator_executor(
    name: str,
    op_map: Mapping[str, tuple],
    *,
    add_to_default_executors: bool = True,
    default_rank: int = 0,
    marketplace: Marketplace | None = None,
) -> OperatorExecutor:
    """Build an operator executor from a map and put it on the market, first in the defaults.

        add_operator_executor("apex_xentropy", {
            "torch.nn.functional.cross_entropy": ("apex_xentropy", checker, impl)})

    The key names a torch operation (or an ltorch, prim or custom-op id); `checker` has
    the torch op's signature and is called with proxies at compile time (None: always
    accept); `impl` has the same signature and is called with real tensors at run time,
    as the executor-level operation `<name>.<op name>` shown in the execution trace.
    A fourth entry, a `GradRule`, differentiates the operation where this executor takes
    it in a program that needs gradients (see `register_implementation`'s grad_transform).
    With `add_to_default_executors=False` it is used only where named in a priority list.
    """
    market = marketplace or default_marketplace()
    ex = OperatorExecutor(name, default_rank=default_rank, default=add_to_default_executors)
    for key, entry in op_map.items():
        sym = resolve_operation(key, market.operations)
        if not (isinstance(entry, tuple) and len(entry) in (3, 4) and isinstance(entry[0], str) and callable(entry[2])):
            raise TypeError(
                f"op_map[{key!r}] must be (operator name, checker or None, implementation[, grad rule]), got {entry!r}"
            )
        op_name, checker, impl = entry[:3]
        grad = entry[3] if len(entry) == 4 else None
        operator = ex.register_operator(op_name, meta=_meta_like(sym), fn=impl)
        ex.register_implementation(sym, checker=checker, execution_transform=functools.partial(_call, operator), grad_transform=grad)
    market.add_executor(ex, default=add_to_default_executors)
    return ex


def _call(operator: Symbol, *args, **kwargs):
    return operator(*args, **kwargs)
