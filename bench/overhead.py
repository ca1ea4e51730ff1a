"""Per-call overhead: a jitted `a + b` on 1-element CPU tensors next to eager, in one process.

Run: python bench/overhead.py [--calls N] [--rounds R]
Prints each contender's best per-call time over R rounds and its ratio to eager.
torch.compile and Lightning Thunder are measured when importable.
"""
from __future__ import annotations

import argparse
import time

import torch

import squall


def add(a, b):
    return a + b


def per_call_seconds(fn, a, b, calls: int, rounds: int) -> float:
    for _ in range(100):  # warm up (and compile)
        fn(a, b)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn(a, b)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def contenders() -> dict:
    found = {"eager": add, "squall.jit": squall.jit(add)}
    try:
        found["torch.compile"] = torch.compile(add)
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"torch.compile unavailable: {e}")
    try:
        import thunder  # noqa: PLC0415 - optional peer

        found["thunder.jit"] = thunder.jit(add)
    except ImportError:
        print("Lightning Thunder is not installed: skipped (pip install lightning-thunder to compare)")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    a, b = torch.randn(1), torch.randn(1)
    times = {}
    for name, fn in contenders().items():
        times[name] = per_call_seconds(fn, a, b, opts.calls, opts.rounds)
    eager = times["eager"]
    print(f"{'':16}{'per call':>12}{'vs eager':>10}")
    for name, t in times.items():
        print(f"{name:16}{t * 1e6:>10.2f}us{t / eager:>9.2f}x")


if __name__ == "__main__":
    main()
