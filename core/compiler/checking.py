"""Checked execution: the first call of a compiled entry watches every non-torch executor.

A plugin's implementation can be wrong in ways no checker sees at compile time: it returns
a tensor of another shape, dtype or device than the trace promised, returns None, writes
into a tensor it was handed to read, or raises. Code generated with `checked_call` wraps
each such call (`codegen.generate(..., wrap=checked_call)`): it compares what came back
with the trace's metadata and the inputs' version counters with what they were, and turns
any violation into an `ExecutorFault` naming the executor, the operation and the user's
source line. `squall.jit` then replans the entry without that executor for that operation
and runs the call again, so the caller still gets eager's result (see `JittedFunction`).
A differentiated program's forward and backward are checked the same way; a fault in the
backward is handled where it happens, in `loss.backward()` (`squall.compiler.pipeline`).

Only the first call of an entry is checked, by default: the check costs a version-counter
read and a metadata comparison per tensor of each non-torch call, and, so that a call can be
run again after an executor wrote into its input, a copy of that call's tensor arguments.
`SQUALL_CHECK=always` checks every call (that copy included: expect non-torch calls to cost
about twice their input's memory traffic more); `SQUALL_CHECK=never` checks none.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..proxies import TensorProxy, real_tensor, symbol_reads, symbol_values, type_string
from ..symbol import BoundSymbol, Tags
from ..symbolic import SymInt, source as size_source, symbols_of

__all__ = ["ExecutorFault", "CHECK_ENV", "check_mode", "needs_check", "checked_call", "tensor_problem"]

CHECK_ENV = "SQUALL_CHECK"
_MODES = ("first", "always", "never")
# executors whose calls are not checked: PyTorch itself, and squall's own autograd runner
_TRUSTED = frozenset({"torch", "squall"})


class ExecutorFault(RuntimeError):
    """An executor's implementation broke the trace's promise at run time (or raised)."""

    def __init__(self, executor: str, ops: tuple[str, ...], source: tuple[str, int, str] | None, problem: str):
        self.executor, self.ops, self.source, self.problem = executor, ops, source, problem
        where = f" (from {source[0]}:{source[1]}: {source[2].strip()})" if source is not None else ""
        super().__init__(f"executor {executor!r} {problem}, running {', '.join(ops)}{where}")


def check_mode(environ: Any = None) -> str:
    """"first" (the default: each entry's first call), "always" or "never", from $SQUALL_CHECK."""
    value = (os.environ if environ is None else environ).get(CHECK_ENV, "").strip().lower() or "first"
    if value not in _MODES:
        raise ValueError(f"squall: ${CHECK_ENV} must be one of {', '.join(_MODES)}, got {value!r}")
    return value


def needs_check(bsym: BoundSymbol) -> bool:
    """Whether a call of an execution trace runs a non-torch executor's code."""
    return bsym.executor is not None and bsym.executor.name not in _TRUSTED and bsym.impl is not None


def _ops(bsym: BoundSymbol) -> tuple[str, ...]:
    # a fusion region stands for its members: the operations a replan must keep from it
    if Tags.FUSION_REGION in bsym.sym.tags and bsym.subsymbols:
        return tuple(dict.fromkeys(m.sym.id for m in bsym.subsymbols))
    return (bsym.sym.id,)


def _source(bsym: BoundSymbol) -> tuple[str, int, str] | None:
    """The user's line that led to the call (a region's: its first member's)."""
    return next((b.source for b in bsym.walk() if b.source is not None), None)


def tensor_problem(value: Any, expected: TensorProxy, what: str, sizes: tuple[int | None, ...]) -> str | None:
    """What is wrong with `value` as the call's `expected` tensor, whose sizes in this call are
    `sizes` (None where a symbolic size cannot be read from the call's arguments); None where nothing is.
    (A fusion executor asks it of a compiled region's outputs too.)"""
    if value is None:
        return f"returned None for {what}, which should be a tensor ({type_string(expected)})"
    if not real_tensor(value):
        return f"returned a {type(value).__name__} for {what}, which should be a tensor ({type_string(expected)})"
    device_ok = value.device == expected.device or (expected.device.index is None and value.device.type == expected.device.type)
    shape = tuple(value.shape)
    shape_ok = len(shape) == len(sizes) and all(want is None or got == want for got, want in zip(shape, sizes))
    if not shape_ok or value.dtype != expected.dtype or not device_ok:
        got = f"{value.device} {value.dtype} {list(value.shape)}"
        want = f"{expected.device} {expected.dtype} [{', '.join(map(size_source, expected.shape))}]"  # run time: expressions, no value read
        bound = f" (here {list(sizes)})" if sizes != shape and any(type(n) is SymInt for n in expected.shape) else ""
        return f"returned {got} for {what}, where the trace says {want}{bound}"
    return None


def _size_reader(printed: list, expected: list) -> Callable[[list], dict[int, tuple[int | None, ...]]]:
    """A function of a call's flattened arguments giving each expected tensor's sizes in that
    call: a symbolic size is the trace's expression over the size symbols evaluated at the
    symbols' values in this call, read from the arguments that hold them (a tensor whose
    dimension is the symbol, or the size itself); never the traced call's values, which a
    later call of the same symbolic program does not share. A size whose symbols no argument
    holds is None (not compared)."""
    reads = symbol_reads(printed, sizes=True)
    plans: dict[int, list] = {}
    for k, e in enumerate(expected):
        if isinstance(e, TensorProxy):
            plans[k] = [(n, None) if type(n) is not SymInt else
                        (None, compile(size_source(n), "<squall-checked-size>", "eval") if symbols_of(n) <= set(reads) else None)
                        for n in e.shape]

    def sizes(leaves: list) -> dict[int, tuple[int | None, ...]]:
        values = symbol_values(reads, leaves)
        out = {}
        for k, plan in plans.items():
            dims = []
            for constant, code in plan:
                if code is None:
                    dims.append(constant)
                else:
                    names = code.co_names
                    known = all(values.get(name) is not None for name in names)
                    dims.append(eval(code, {"__builtins__": {}}, values) if known else None)  # noqa: S307 - squall's own size source
            out[k] = tuple(dims)
        return out

    return sizes


def checked_call(bsym: BoundSymbol) -> Callable | None:
    """`bsym.impl` wrapped in the checks above, for a non-torch call (None for the rest)."""
    if not needs_check(bsym):
        return None
    impl, executor, ops, source = bsym.impl, bsym.executor.name, _ops(bsym), _source(bsym)
    expected_leaves, expected_spec = tree_flatten(bsym.output)
    # the call's arguments as the generated code passes them, to tell inputs apart by name
    printed, _ = tree_flatten(bsym.shortest_arguments())
    expected_sizes = _size_reader(printed, expected_leaves)
    # a side-effecting op (copy_) is meant to write its first argument, in a region or alone
    writes = {b.args[0].name for b in bsym.walk() if Tags.SIDE_EFFECT in b.sym.tags and b.args and isinstance(b.args[0], TensorProxy)}

    def fault(problem: str) -> ExecutorFault:
        return ExecutorFault(executor, ops, source, problem)

    def call(*args: Any, **kwargs: Any) -> Any:
        leaves, _ = tree_flatten((args, kwargs))
        names = [p.name if isinstance(p, TensorProxy) else None for p in printed] if len(printed) == len(leaves) else [None] * len(leaves)
        watched = [(i, t, t._version, t.detach().clone()) for i, t in enumerate(leaves) if real_tensor(t) and names[i] not in writes]
        try:
            out = impl(*args, **kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - a plugin's implementation failing is reported and replanned
            _restore(watched)
            raise fault(f"raised {type(e).__name__}: {e}") from e
        changed = [i for i, t, version, _ in watched if t._version != version]
        if changed:
            _restore(watched)
            which = ", ".join(names[i] or f"argument {i}" for i in changed)
            raise (fault(f"modified its input {which} in place, which the operation does not write"))
        got_leaves, got_spec = tree_flatten(out)
        if got_spec != expected_spec and not (len(expected_leaves) == 1 and isinstance(expected_leaves[0], TensorProxy)):
            raise (fault(f"returned {got_spec.num_leaves} values where the trace expects {expected_spec.num_leaves}"))
        if len(expected_leaves) == 1 and got_spec != expected_spec:
            got_leaves = [out]
        sizes = expected_sizes(leaves if len(printed) == len(leaves) else [])
        for k, (expected, got) in enumerate(zip(expected_leaves, got_leaves)):
            if isinstance(expected, TensorProxy):
                problem = tensor_problem(got, expected, expected.name, sizes[k])
                if problem is not None:
                    raise (fault(problem))
        return out

    call.__wrapped__ = impl
    return call


def _restore(watched: list) -> None:
    # the entry is run again after a replan: an input the faulty call wrote into gets its values back
    with torch.no_grad():
        for _, t, version, saved in watched:
            if t._version != version:
                t.copy_(saved)

