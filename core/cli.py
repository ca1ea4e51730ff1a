"""The `squall` command line (also `python -m squall`).

    squall executors [--json]                  what is installed, available or why not
    squall executors --ops NAME [--json]       the operations executor NAME claims, with notes
    squall explain [--executors a,b] [--json]  how the demo model is planned
    squall demo [--executors a,b]              compile and run the demo model

Exit codes: 0 success, 1 the command ran but found a problem (a plugin failed to
load, results differ from eager), 2 usage or configuration error.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

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
    from .plugins import default_marketplace

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


_COMMANDS = {"executors": _cmd_executors, "explain": _cmd_explain, "demo": _cmd_demo}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    from .config import UnknownExecutorError

    try:
        return _COMMANDS[args.command](args)
    except (UnknownExecutorError, ValueError) as e:
        print(f"squall {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
