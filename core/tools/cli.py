"""The `squall` command line (also `python -m squall`).

    squall executors [--json]                  what is installed, available or why not
    squall executors --ops NAME [--json]       the operations executor NAME claims, with notes
    squall explain [--executors a,b] [--json]  how the demo model is planned
    squall demo [--executors a,b]              compile and run the demo model
    squall ops NAME                            where an op is defined, its decomposition, who claims it
    squall rage [N | --last | --failed]        list compile records; bundle one run for a bug report

Exit codes: 0 success, 1 the command ran but found a problem (a plugin failed to
load, results differ from eager), 2 usage or configuration error.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .bundle import add_arguments as add_rage_arguments
from .bundle import rage_command

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="squall", description="squall: compile PyTorch programs onto a marketplace of executors.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("executors", help="list installed executors: version, distribution, availability, ops claimed, rank")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.add_argument("--ops", metavar="NAME", help="list the operations executor NAME claims, one per line")

    p = sub.add_parser("explain", help="show which executor takes each operation of the demo model")
    p.add_argument("--executors", metavar="LIST", help="priority list, e.g. 'my_kernels,torch' or '+my_kernels,-other'")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.add_argument("--batch", type=int, default=2, help="batch size of the demo input (default 2)")
    p.add_argument("--seq", type=int, default=16, help="sequence length of the demo input (default 16)")

    p = sub.add_parser("demo", help="compile the demo GPT, compare with eager, time both")
    p.add_argument("--executors", metavar="LIST", help="priority list, e.g. 'my_kernels,torch'")

    p = sub.add_parser("ops", help="show an op: where it is defined, its torch names, signature, decomposition, executors")
    p.add_argument("name", metavar="NAME", help="a torch name (torch.nn.functional.softmax, softmax, Tensor.softmax) or a symbol id")

    p = sub.add_parser("rage", help="list recent compile records; bundle one run (--last, --failed, N) for a bug report")
    add_rage_arguments(p)
    return parser


def _executor_list(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def _cmd_executors(args: argparse.Namespace) -> int:
    import squall

    if args.ops:
        return _print_ops(args.ops, as_json=args.json)
    table = squall.executors()
    print(json.dumps(table.to_dict(), indent=2) if args.json else table)
    return 1 if table.load_errors else 0


def _print_ops(name: str, *, as_json: bool) -> int:
    from ..market.plugins import default_marketplace

    market = default_marketplace()
    ex = market.get(name)
    if ex is None:
        raise ValueError(f"no executor named {name!r}; installed: {', '.join(market.names())}")
    rows = [(op, ex.describe_op(op)) for op in ex.claimed_ops()]
    if as_json:
        print(json.dumps({"executor": name, "ops": [{"op": op, "note": note} for op, note in rows]}, indent=2))
    else:
        width = max((len(op) for op, _ in rows), default=0)
        print("\n".join(f"{op.ljust(width)}  {note}".rstrip() for op, note in rows))
    return 0


def _demo_model(batch: int, seq: int):
    import torch

    from .demo import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig()).eval()
    idx = torch.randint(0, model.cfg.vocab_size, (batch, seq))
    targets = torch.randint(0, model.cfg.vocab_size, (batch, seq))
    return model, (idx, targets)


def _cmd_explain(args: argparse.Namespace) -> int:
    import torch

    import squall

    model, inputs = _demo_model(args.batch, args.seq)
    jitted = squall.jit(model, executors=_executor_list(args.executors))
    with torch.no_grad():
        report = squall.explain(jitted, *inputs)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    return int(demo.main(_executor_list(args.executors)) or 0)


def _cmd_ops(args: argparse.Namespace) -> int:
    """Describe every op NAME stands for (exit 2, with close matches, when it names none)."""
    import difflib
    import inspect
    import os
    import warnings

    import torch

    import squall

    from .. import ltorch, prims
    from ..ltorch.functionalization import TorchForm
    from ..market.plugins import default_marketplace

    # every name an op answers to: ids, torch names, and both for the forms that reach ops
    names: dict[str, list] = {}
    for sym in [*prims.all_prims().values(), *ltorch.all_symbols().values(), *ltorch.all_forms()]:
        for key in (sym.id, *(ltorch.qualified_name(fn) for fn in sym.torchfns)):
            if sym not in names.setdefault(key, []):
                names[key].append(sym)
    table = ltorch.torch_table()
    wanted = "torch.nn.functional." + args.name[2:] if args.name.startswith("F.") else args.name
    prefixes = ("", "torch.", "torch.nn.functional.", "torch.Tensor.", "torch.special.", "torch.linalg.", "ltorch.", "prims.")
    found = [sym for prefix in prefixes for sym in names.get(prefix + wanted, ())]
    found = list(dict.fromkeys(found))
    if not found:
        close = difflib.get_close_matches(args.name, list(names), n=5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        print(f"squall ops: error: {args.name!r} names no ltorch op or prim{hint}", file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(squall.__file__)))
    market = default_marketplace()
    for i, sym in enumerate(found):
        if i:
            print()
        if isinstance(sym, TorchForm):
            print(f"{sym.id}: {_form_summary(sym)}")
            print(f"  defined at    {_form_location(sym, ltorch.MODULES, root)}")
            print(f"  signature     {sym.name}{inspect.signature(sym.meta)}")
            print(f"  records       {sym.op.id} (below)")
            print()
            sym = sym.op
        kind = "prim" if sym.is_prim else "ltorch op"
        print(f"{sym.id}: {kind} {sym.name}")
        print(f"  defined at    {_location(sym.meta, root)}")
        # the private eager functions some ops run as are not names a program uses
        direct = [n for fn, op in table.items() if op is sym and not (n := ltorch.qualified_name(fn)).startswith("squall.")]
        through = [ltorch.qualified_name(fn) for fn, op in table.items() if isinstance(op, TorchForm) and op.op is sym]
        print(f"  torch names   {', '.join(direct) if direct else '(none)'}")
        if through:
            print(f"  via forms     {', '.join(through)}")
        print(f"  signature     {sym.name}{_signature(sym.meta)}")
        claims = []
        for ex in market.executors():
            if ex.implementation_for(sym) is not None:
                available = ex.availability()
                note = ex.describe_op(sym.id)
                claims.append(ex.name + (f" ({note})" if note else "") + ("" if available else f" [unavailable here: {available.reason}]"))
        print(f"  executors     {', '.join(claims) if claims else '(none: it runs as its decomposition)'}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = _trace_example(sym, squall, torch)
        if trace is not None:
            print("  decomposition, traced on example inputs:")
            print("\n".join("    " + line for line in trace.splitlines()))
        else:
            print("  source (no example inputs to trace it on):")
            try:
                print("\n".join("    " + line for line in inspect.getsource(sym.meta).rstrip().splitlines()))
            except (OSError, TypeError):
                print("    (not available)")
    return 0


def _location(fn, root: str) -> str:
    import inspect
    import os

    try:
        path = inspect.getsourcefile(fn) or "?"
        line = inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return "(unknown)"
    return f"{os.path.relpath(path, root) if path.startswith(root) else path}:{line}"


def _form_location(form, modules, root: str) -> str:
    """The line of the ltorch module that declares `form` (a form has no function of its own)."""
    import inspect
    import os
    import re

    for module in modules:
        for name in module.__all__:
            if getattr(module, name) is form:
                lines, _ = inspect.getsourcelines(module)
                at = next((i for i, line in enumerate(lines, 1) if re.match(rf"^(\w+, )?{name}\b.* = ", line)), 1)
                return f"{os.path.relpath(module.__file__, root)}:{at}"
    return "(unknown)"


def _form_summary(form) -> str:
    if form.writes is not None:
        when = f" when {form.flag}=True" if form.flag else ""
        return f"writes the result of {form.op.id} into its argument '{form._names[form.writes]}'{when}"
    if form.updates:
        return f"{form.op.id}, then writes its extra results into {', '.join(form.updates)}"
    return f"reaches {form.op.id}, answering some calls without recording anything"


def _signature(fn) -> str:
    import inspect

    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


# parameter names that take a tensor in ltorch ops and prims; any other required parameter ends the attempt
_TENSOR_PARAMS = frozenset("input a b self x x1 x2 other tensor tensor1 tensor2 end weight query key value target input1 input2".split())


def _trace_example(sym, squall, torch) -> str | None:
    """`sym` called on small example tensors and traced, as Python; None where that is not practical."""
    import inspect

    try:
        params = list(inspect.signature(sym.meta).parameters.values())
    except (TypeError, ValueError):
        return None
    tensors, call = [], []  # call: ("tensor", i) or ("value", v), positionally
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        if p.name in _TENSOR_PARAMS and p.default is p.empty:
            call.append(("tensor", len(tensors)))
            tensors.append(torch.randn(2, 3))
        elif p.name == "dim":
            call.append(("value", -1))
        elif p.default is not p.empty:
            call.append(("value", p.default))
        else:
            return None
    if not tensors:
        return None

    def program(*x):
        return sym(*(x[v] if kind == "tensor" else v for kind, v in call))

    try:
        jitted = squall.jit(program, executors=["torch"])
        jitted(*tensors)
        traced = next(iter(squall.last_traces(jitted)))
    except Exception:  # noqa: BLE001 - these inputs do not suit the op: show its source instead
        return None
    return str(traced)


def _cmd_rage(args: argparse.Namespace) -> int:
    return rage_command(args)


_COMMANDS = {"executors": _cmd_executors, "explain": _cmd_explain, "demo": _cmd_demo, "ops": _cmd_ops, "rage": _cmd_rage}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    from ..market.config import UnknownExecutorError

    try:
        return _COMMANDS[args.command](args)
    except (UnknownExecutorError, ValueError) as e:
        print(f"squall {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
