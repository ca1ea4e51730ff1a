"""Per-call time of a jitted `x * s + 1` whose Python number `s` changes at every call, next to
eager, in one process: with `s` a run-time number (dynamic, the default since it changed once),
and with `s` keyed by value (what squall did before dynamic numbers: trace, plan and generate
again at every call, bounded by the cache's LRU eviction).

Run: python bench/dynamic_numbers.py [--calls N] [--rounds R]
Contenders are measured in turn within each round (load on the machine falls on all alike);
each prints its best per-call time over R rounds and its ratio to eager. Every call gets a value
it has not had before.
"""
from __future__ import annotations

import argparse
import itertools
import time
import warnings

import torch

import squall
from squall.runtime.jit import jitted_state


def scale_shift(x, s):
    return x * s + 1


def keyed_by_value(fn):
    """`fn` jitted with its number argument kept out of the dynamic ones: keyed by value."""
    jf = squall.jit(fn)
    jitted_state(jf)._numbers.specialise({("args", 1)})
    return jf


def best_per_call(contenders: dict, x: torch.Tensor, calls: dict[str, int], rounds: int) -> dict[str, float]:
    values = itertools.count(1)
    for fn in contenders.values():
        for _ in range(3):  # warm up: the compilations a changing number costs once
            fn(x, next(values) * 0.5)
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for name, fn in contenders.items():
            n = calls[name]
            ss = [next(values) * 0.5 for _ in range(n)]  # a value not seen before, at every call
            start = time.perf_counter()
            for s in ss:
                fn(x, s)
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", squall.SquallWarning)  # the keyed-by-value contender warns of its recompiles
    x = torch.randn(8)
    contenders = {"eager": scale_shift, "squall.jit (dynamic s)": squall.jit(scale_shift), "squall.jit (s keyed by value)": keyed_by_value(scale_shift)}
    calls = {name: opts.calls for name in contenders}
    calls["squall.jit (s keyed by value)"] = max(opts.calls // 200, 20)  # milliseconds a call
    times = best_per_call(contenders, x, calls, opts.rounds)
    eager = times["eager"]
    print(f"{'x * s + 1, new s every call':32}{'per call':>12}{'vs eager':>10}")
    for name, t in times.items():
        print(f"  {name:30}{t * 1e6:>10.2f}us{t / eager:>9.2f}x")
    compiles = {name: jitted_state(fn).cache_info().misses for name, fn in contenders.items() if name != "eager"}
    print("compilations:", compiles)


if __name__ == "__main__":
    main()
