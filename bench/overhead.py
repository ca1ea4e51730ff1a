"""Per-call overhead next to eager, in one process: a jitted `a + b` on 1-element CPU tensors,
and a module of 30 parameters (15 small Linear layers) whose every call checks the state the
trace read (squall.frontend.state_guards).

Run: python bench/overhead.py [--calls N] [--rounds R]
Prints each contender's best per-call time over R rounds (contenders measured in turn within
each round, so load on the machine falls on all alike) and its ratio to eager.
torch.compile and Lightning Thunder are measured for `a + b` when importable.
"""
from __future__ import annotations

import argparse
import time

import torch

import squall


def add(a, b):
    return a + b


def thirty_parameters() -> torch.nn.Module:
    """15 Linear layers with ReLUs between them: 30 parameters, 15 submodules to guard."""
    layers = []
    for _ in range(15):
        layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def best_per_call(contenders: dict, args: tuple, calls: int, rounds: int) -> dict[str, float]:
    for fn in contenders.values():
        for _ in range(100):  # warm up (and compile)
            fn(*args)
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for name, fn in contenders.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn(*args)
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
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


def report(title: str, times: dict[str, float]) -> None:
    eager = times["eager"]
    print(f"{title:28}{'per call':>12}{'vs eager':>10}")
    for name, t in times.items():
        print(f"  {name:26}{t * 1e6:>10.2f}us{t / eager:>9.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    a, b = torch.randn(1), torch.randn(1)
    report("a + b", best_per_call(contenders(), (a, b), opts.calls, opts.rounds))
    module, x = thirty_parameters(), torch.randn(4, 16)
    module_calls = max(opts.calls // 100, 10)
    for mode, grad in (("training (grad on)", True), ("inference (no_grad)", False)):
        with torch.set_grad_enabled(grad):
            times = best_per_call({"eager": module, "squall.jit": squall.jit(module)}, (x,), module_calls, opts.rounds)
        report(f"30 parameters, {mode}", times)


if __name__ == "__main__":
    main()
