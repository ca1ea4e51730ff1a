"""Fusion benchmark on CPU: eager, torch.compile, squall (torch only), squall (inductor first).

    python bench/fusion.py                # with the caches a user has (inductor's, squall's choices)
    python bench/fusion.py --fresh-cache  # with empty inductor and squall caches: cold first calls

One thread, best of three rounds. Prints per-call times and ratios to eager, first-call
(compile) times, and squall-with-inductor compile time for 1, 4 and 16 stacked identical
GPT blocks (fresh executor, no remembered choices, inductor's graph cache off, so each
depth pays for its own compilations).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh-cache", action="store_true", help="empty inductor and squall caches (cold first calls)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-depth", action="store_true", help="skip the 1/4/16-block compile-time section")
    return parser.parse_args()


ARGS = _parse()
if ARGS.fresh_cache:
    # before torch is imported: inductor reads its cache folder from the environment
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inductor-")
    os.environ["SQUALL_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-squall-")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import squall  # noqa: E402
from squall.demo import Block, GPTConfig  # noqa: E402


def best_time(fn, args, rounds: int, budget_s: float = 0.6) -> float:
    start = time.perf_counter()
    fn(*args)
    once = time.perf_counter() - start
    number = max(1, min(500, int(budget_s / rounds / max(once, 1e-6))))
    best = math.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def first_call(fn, args) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def elementwise(x, w, b):
    return F.gelu(x * w + b) * torch.sigmoid(x)


def softmax(x):
    return F.softmax(x, dim=-1)


class MLP(torch.nn.Module):
    def __init__(self, n: int = 256):
        super().__init__()
        self.ln = torch.nn.LayerNorm(n)
        self.fc = torch.nn.Linear(n, 4 * n)
        self.proj = torch.nn.Linear(4 * n, n)

    def forward(self, x):
        return x + self.proj(F.gelu(self.fc(self.ln(x))))


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def workloads():
    torch.manual_seed(0)
    cfg = GPTConfig(n_embd=256, n_head=4, block_size=128, n_layer=1)
    yield "elementwise (64x1024)", elementwise, (torch.randn(64, 1024), torch.randn(1024), torch.randn(1024))
    yield "softmax (64x1024)", softmax, (torch.randn(64, 1024),)
    yield "layer_norm+gelu MLP (4x128x256)", MLP().eval(), (torch.randn(4, 128, 256),)
    yield "GPT block (4x128x256)", Block(cfg).eval(), (torch.randn(4, 128, 256),)
    yield "cross_entropy (4096x8192)", cross_entropy, (torch.randn(4096, 8192), torch.randint(0, 8192, (4096,)))


def run_workload(name, fn, args, rounds):
    row = {"name": name}
    row["eager"] = best_time(fn, args, rounds)
    expected = fn(*args)
    from squall_inductor import InductorExecutor

    # squall first: any one-time warm-up of dynamo and inductor in this process then favours torch.compile
    variants = {
        "squall(torch)": lambda: squall.jit(fn, executors=["torch"]),
        "squall(inductor)": lambda: squall.jit(fn, executors=["inductor", "torch"]),
        "squall(inductor+mm)": lambda: squall.jit(fn, executors=[InductorExecutor(include_matmuls=True), "torch"]),
        "torch.compile": lambda: torch.compile(fn),
    }
    for label, make in variants.items():
        compiled = make()
        row[f"{label} first"], out = first_call(compiled, args)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        row[label] = best_time(compiled, args, rounds)
        if label.startswith("squall(inductor"):
            row[f"{label} regions"] = len(squall.last_traces(compiled).plan.regions)
    return row


def depth_section(rounds):
    from squall_inductor import InductorExecutor

    import torch._inductor.config as inductor_config

    cfg = GPTConfig(n_embd=256, n_head=4, block_size=128)
    x = torch.randn(4, 128, 256)
    results = []
    with inductor_config.patch(fx_graph_cache=False):
        for depth in (1, 4, 16):
            torch.manual_seed(0)
            model = torch.nn.Sequential(*[Block(cfg) for _ in range(depth)]).eval()
            ex = InductorExecutor(choices_path=None)  # nothing remembered, nothing compiled yet
            jitted = squall.jit(model, executors=[ex, "torch"])
            seconds, out = first_call(jitted, (x,))
            torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-4)
            plan = squall.last_traces(jitted).plan
            reused = sum(r.reused for r in plan.regions)
            outcomes = {}
            for ops, outcome in ex.outcomes:
                outcomes[outcome.split(" (")[0]] = outcomes.get(outcome.split(" (")[0], 0) + 1
            results.append((depth, seconds, len(plan.regions), reused, outcomes))
    return results


def main() -> int:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, best of {ARGS.rounds} rounds, "
          f"{'fresh (cold) caches' if ARGS.fresh_cache else 'existing caches'}; times per call in ms\n")
    rows = []
    with torch.no_grad():
        for name, fn, args in workloads():
            rows.append(run_workload(name, fn, args, ARGS.rounds))
            print(f"  done {name}", file=sys.stderr)
    labels = ("torch.compile", "squall(torch)", "squall(inductor)", "squall(inductor+mm)")
    header = (f"{'workload':32} {'eager':>8} " + " ".join(f"{k:>19}" for k in labels)
              + f" {'vs best':>8} {'+mm vs best':>11}")
    print(header)
    print("-" * len(header))
    for r in rows:
        best = min(r["eager"], r["torch.compile"])
        cells = [f"{r[k] * 1e3:8.3f} ({r['eager'] / r[k]:4.2f}x)" for k in labels]
        print(f"{r['name']:32} {r['eager'] * 1e3:8.3f} " + " ".join(f"{c:>19}" for c in cells)
              + f" {r['squall(inductor)'] / best:7.2f}x {r['squall(inductor+mm)'] / best:10.2f}x")
    print("\n(x) = speed-up over eager; 'vs best' = squall time / min(eager, torch.compile), lower is better;")
    print("+mm = InductorExecutor(include_matmuls=True), i.e. SQUALL_INDUCTOR_MATMULS=1\n")
    print(f"{'first call (s)':32} {'compile':>8} {'squall(torch)':>14} {'squall(ind)':>12} {'ratio':>6} {'regions':>8}"
          f" {'squall(ind+mm)':>15} {'ratio':>6} {'regions':>8}")
    for r in rows:
        c = r["torch.compile first"]
        print(f"{r['name']:32} {c:8.2f} {r['squall(torch) first']:14.3f} {r['squall(inductor) first']:12.2f} "
              f"{r['squall(inductor) first'] / c:6.2f} {r['squall(inductor) regions']:8d} "
              f"{r['squall(inductor+mm) first']:15.2f} {r['squall(inductor+mm) first'] / c:6.2f} {r['squall(inductor+mm) regions']:8d}")
    if not ARGS.skip_depth:
        print("\ncompile time of squall.jit with inductor, stacked identical GPT blocks (no remembered choices, graph cache off):")
        with torch.no_grad():
            results = depth_section(ARGS.rounds)
        base = results[0][1]
        for depth, seconds, regions, reused, outcomes in results:
            print(f"  {depth:2d} blocks: {seconds:6.2f} s ({seconds / base:4.2f}x of 1 block), {regions} inductor regions, "
                  f"{reused} reusing a compilation; region outcomes: {outcomes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
