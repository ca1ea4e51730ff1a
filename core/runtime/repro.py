"""Reproducers: a failed compilation as a standalone script a maintainer can run.

The script holds the failing program as its traced trace (ltorch calls and prims, looked
up by symbol id, opaque torch calls by their torch name), rebuilds the inputs and captured
constants from their metadata (random floats, zero integers: valid indices and class
targets), and compiles and runs it again with the recorded executor list and grad mode.
It exits 1 when the failure reproduces (an exception, or plugin errors while planning), 0
when it does not, 2 when an executor it names is not installed. Failures that depend on
tensor values may not reproduce; the user's model and data are never needed, nor included.
"""
from __future__ import annotations

import platform
import time
from importlib import metadata
from typing import Any

import torch

from .. import ltorch, prims
from ..proxies import NumberProxy, symbol_reads
from ..symbolic import concrete_shape, size_read, source
from ..trace import Trace, ValuePrinter

__all__ = ["reproducer", "program_source"]


def _callee(bsym: Any, known: set[str], unresolved: list[str]) -> str:
    sym_id = bsym.sym.id
    if sym_id.startswith("opaque."):
        return f"_torch({sym_id.removeprefix('opaque.')!r})"
    if sym_id in known:
        return f"OPS[{sym_id!r}]"
    unresolved.append(sym_id)  # an operation a plugin registered: the maintainer needs that plugin
    return "_missing"


def program_source(trace: Trace) -> tuple[str, dict[str, str]]:
    """`trace` as a Python function calling ops by id; and the globals it needs that have no
    literal form, name -> a note on what they were (captured tensors are rebuilt from metadata)."""
    printer = ValuePrinter()
    known = {*ltorch.all_symbols(), *prims.all_prims()}
    unresolved: list[str] = []
    lines = [f"def program({', '.join(p.name for p in trace.inputs)}):"]
    # the size symbols the body computes with (`view(x, s0, -1)`), read from the inputs that
    # carry them, as the generated function's prologue reads them
    for symbol, (i, dim) in sorted(symbol_reads(trace.inputs, sizes=True).items(), key=lambda kv: int(kv[0][1:])):
        lines.append(f"    {symbol} = {size_read(trace.inputs[i].name, dim)}")
    for bsym in trace.bsyms:
        target = printer.assignment(bsym.output)[0] + " = " if bsym.output is not None else ""
        extra = printer.assignment(bsym.output)[1] if bsym.output is not None else []
        outs = ", ".join(f'{p.name}: "{_metadata(p)}"' for p in bsym.output_proxies())
        lines.append(f"    {target}{printer.call(_callee(bsym, known, unresolved), bsym)}" + (f"  # {outs}" if outs else ""))
        lines.extend(f"    {s}" for s in extra)
    lines.append(f"    return {printer(trace.output)}")
    notes = {name: type(obj).__name__ for name, obj in printer.globals.items() if name != "torch"}
    if unresolved:
        notes["_missing"] = f"operation this script cannot look up ({', '.join(sorted(set(unresolved)))})"
    return "\n".join(lines), notes


def _metadata(p: Any) -> str:
    return p.python_type.__name__ if type(p) is NumberProxy else f"{p.device} {p.dtype} [{', '.join(map(source, p.shape))}]"  # sizes as expressions


def _input_literal(p: Any) -> str:
    """An input rebuilt: a tensor from its metadata, a run-time number as its value in that call."""
    if type(p) is NumberProxy:
        return ValuePrinter()(p.value)
    return _tensor_literal(p.shape, p.dtype, p.device, p.requires_grad)


def _tensor_literal(shape: Any, dtype: torch.dtype, device: Any, requires_grad: bool) -> str:
    # symbolic sizes as the failing call's values, read without a guard (the trace is done)
    return f"_tensor({list(concrete_shape(shape))!r}, {dtype}, {str(device)!r}, {requires_grad!r})"


_TEMPLATE = '''#!/usr/bin/env python3
"""squall reproducer for {function} ({what}).

Recorded {when} with squall {squall}, torch {torch_version}, Python {python}.
{error}
It rebuilds the program from its traced trace and its inputs from metadata (random values),
then compiles{and_runs} it with the recorded executors: {executors}.
Exit 1: reproduced; 0: did not reproduce; 2: an executor it names is not installed here.
"""
import sys
import traceback
import warnings

import torch

import squall
from squall import ltorch, prims

EXECUTORS = {executors!r}
GRAD_ENABLED = {grad!r}
DEFAULT_DTYPE = {default_dtype}
OPS = {{**ltorch.all_symbols(), **prims.all_prims()}}


def _torch(name):
    """A torch callable by its dotted name (for calls squall ran as opaque torch calls)."""
    obj = torch
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def _tensor(shape, dtype, device, requires_grad):
    """A tensor of the recorded metadata: random floats, zero integers (valid indices)."""
    if dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(shape, dtype=dtype, device=device)
    else:
        t = torch.zeros(shape, dtype=dtype, device=device)
    return t.requires_grad_(requires_grad)


# captured constants and values with no literal form
{constants}

{program}


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(DEFAULT_DTYPE)
    inputs = [
{inputs}
    ]
    try:
        fn = squall.jit(program, executors=EXECUTORS)
    except ValueError as e:  # an unknown executor: the plugin the user had is missing here
        print(f"cannot reproduce here: {{e}}", file=sys.stderr)
        return 2
    try:
        with torch.set_grad_enabled(GRAD_ENABLED), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*inputs)
{run_backward}
    except Exception:
        traceback.print_exc()
        print("reproduced: the compilation{or_call} failed (traceback above)")
        return 1
    traces = squall.last_traces(fn)
    errors = [e for t in traces if t.plan is not None for e in t.plan.errors]
    if errors:
        print("reproduced: planning met plugin errors:")
        for e in errors:
            print(f"  {{e}}")
        return 1
    print("did not reproduce: the program compiled and ran without errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def reproducer(trace: Trace, record: dict[str, Any], *, first_call: bool = False) -> str:
    """A standalone script that compiles `trace` again (see the module docstring)."""
    body, notes = program_source(trace)
    constants = []
    for name, value in trace.constants.items():
        if isinstance(value, torch.Tensor):
            constants.append(f"{name} = {_tensor_literal(value.shape, value.dtype, value.device, value.requires_grad)}")
    for name, what in notes.items():
        constants.append(f"{name} = None  # a {what} in the original program: it has no literal form, edit here if it matters")
    inputs = "\n".join(f"        {_input_literal(p)},  # {p.name}" for p in trace.inputs)
    error = record.get("error")
    needs_grad = record.get("grad_enabled") and any(p.requires_grad for p in trace.inputs)
    return _TEMPLATE.format(
        function=record.get("function"),
        what="its first call failed" if first_call else ("its compilation failed" if error else "planning met plugin errors"),
        when=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("time", time.time()))),
        squall=_version("squall"),
        torch_version=torch.__version__,
        python=platform.python_version(),
        error=f"It failed with {error['type']}: {error['message'].splitlines()[0] if error['message'] else ''}" if error else "",
        and_runs=" and runs",
        executors=list(record.get("executors", {}).get("order", ["torch"])),
        grad=bool(record.get("grad_enabled")),
        default_dtype=record.get("default_dtype", "torch.float32"),
        constants="\n".join(constants) or "# (none)",
        program=body,
        inputs=inputs,
        run_backward=(
            "            loss = sum(o.float().sum() for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad)\n"
            "            if isinstance(loss, torch.Tensor):\n"
            "                loss.backward()"
        ) if needs_grad else "            del out",
        or_call=" or its first call",
    )


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"
