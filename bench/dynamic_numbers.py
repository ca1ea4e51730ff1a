"""Per-call time of a jitted `x * s + 1` whose Python number `s` changes at every call, next to
eager, in one process: with `s` a run-time number (dynamic, the default since it changed once),
and with `s` keyed by value (what squall did before dynamic numbers: trace, plan and generate
again at every call, bounded by the cache's LRU eviction).

A second table: a static KV cache written at an int `pos` (`cache[:, pos:pos+1] = kv`), one
decoding pass of --steps tokens: the first pass of a fresh jit (its compiles included) and the best
later pass, with `pos` a size symbol (tests/test_int_bounds.py) and keyed by value (before).

Measured 2026-11-28, 2-core CPU, torch 2.13.0, --calls 4000:
- default (upgrades in the background), load 4.6-5.5: first pass 117.0 ms (size, 4 compiles)
  against 1010.4 ms (keyed, 48 compiles), eager 11.1 ms; later passes are noisy here (background
  upgrades still running): 13.6 ms size, 3.5 ms keyed, 2.0 ms eager.
- SQUALL_WAIT=1 (every upgrade finished before its call returns), load 5.3 falling to 1.1,
  --rounds 5: first pass 18.1 s (size) against 244.1 s (keyed); later passes 4.43 ms (1.81x
  eager) size against 2.92 ms (1.19x eager) keyed, eager 2.44 ms: a program per position is
  faster per step once all are compiled, a symbolic one is 13x cheaper to get there.
- After the cache's write-back was folded into an in-place write (both contenders wrote the whole
  cache into a copy and back at every step before) and a call with a new `pos` took the entry
  point's fast path, SQUALL_WAIT=1, load 2.4-3.1, --calls 2000 --rounds 5: first pass 47.5 ms
  (size, 4 compiles) against 574.1 ms (keyed, 48), eager 2.6 ms; later passes 2.33 ms (1.32x
  eager) against 2.37 ms (1.35x), eager 1.76 ms: the symbolic program is now as fast per step.

A third: attention over a long preallocated cache (--cache-length positions, 8 heads of 64,
float32), written with `index_copy_` as transformers' StaticCache writes it, eager against
squall's torch plan. Measured 2026-11-28, load 2.6-3.0, --rounds 3, 48 steps of a 2048-position
cache: before the write-back was folded into an in-place `index_copy_` (each step copied both
4 MiB caches whole into new tensors and back) 352.65 ms a pass against eager's 7.32 (48.2x); after,
8.88 against 9.17 ms (0.97x). The small cache above: 1.78x eager before, 1.47x after (torch plan).

Run: python bench/dynamic_numbers.py [--calls N] [--rounds R] [--steps S]
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


def keyed_by_value(fn, position: int = 1):
    """`fn` jitted with its number argument (at `position`) kept out of the dynamic ones: keyed by value."""
    jf = squall.jit(fn)
    jitted_state(jf)._numbers.specialise({("args", position)})
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
    parser.add_argument("--steps", type=int, default=48, help="the static-cache decoding pass's tokens")
    parser.add_argument("--cache-length", type=int, default=2048, help="the long preallocated cache's positions")
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
    static_cache_rows(opts.steps, opts.rounds)
    long_cache_rows(opts.steps, opts.cache_length, opts.rounds)


def cache_step(cache, kv, pos):
    """One decoding step writing a preallocated (static) KV cache at `pos`, reading its filled part."""
    cache[:, pos : pos + 1] = kv
    return cache[:, : pos + 1].softmax(1).sum(1)


def decoding_pass(fn, steps: int) -> float:
    """Seconds for one generation of `steps` tokens through `fn` on a fresh cache."""
    cache = torch.zeros(4, steps, 64)
    kvs = [torch.randn(4, 1, 64) for _ in range(steps)]
    start = time.perf_counter()
    for pos, kv in enumerate(kvs):
        fn(cache, kv, pos)
    return time.perf_counter() - start


def static_cache_rows(steps: int, rounds: int) -> None:
    """A freshly jitted static-cache step's first generation (its compiles included), then its
    best later one, next to eager's: with `pos` a size symbol (an int a slice bound reads,
    tests/test_int_bounds.py) and keyed by value (a compile per position, as before 2026-11-28)."""
    makers = {"eager": lambda: cache_step, "squall.jit (pos a size)": lambda: squall.jit(cache_step), "squall.jit (pos keyed by value)": lambda: keyed_by_value(cache_step, 2)}
    fns = {name: make() for name, make in makers.items()}
    first = {name: decoding_pass(fn, steps) for name, fn in fns.items()}
    later = {name: min(decoding_pass(fn, steps) for _ in range(rounds)) for name, fn in fns.items()}
    print(f"{f'static cache, {steps} steps':32}{'1st pass':>12}{'vs eager':>10}{'later':>12}{'vs eager':>10}")
    for name in fns:
        print(f"  {name:30}{first[name] * 1e3:>10.1f}ms{first[name] / first['eager']:>9.1f}x{later[name] * 1e3:>10.2f}ms{later[name] / later['eager']:>9.2f}x")
    print("compilations:", {name: jitted_state(fn).cache_info().misses for name, fn in fns.items() if name != "eager"})


def attention_step(keys, values, q, k, v, pos):
    """One decoding step of attention over a preallocated cache, written as transformers'
    StaticCache writes it (`index_copy_` at the step's position), attending to the filled part."""
    at = torch.tensor([pos])
    keys.index_copy_(2, at, k)
    values.index_copy_(2, at, v)
    return torch.nn.functional.scaled_dot_product_attention(q, keys[:, :, : pos + 1], values[:, :, : pos + 1])


def long_cache_rows(steps: int, cache_length: int, rounds: int) -> None:
    """Decoding passes of `attention_step` over a cache of `cache_length` positions (8 heads of 64,
    float32: 4 MiB per tensor at 2048): eager against squall's torch plan, best pass of `rounds`."""
    contenders = {"eager": attention_step, "squall.jit (torch)": squall.jit(attention_step, executors=["torch"])}
    keys, values = torch.zeros(1, 8, cache_length, 64), torch.zeros(1, 8, cache_length, 64)
    steps_kv = [tuple(torch.randn(1, 8, 1, 64) for _ in range(3)) for _ in range(steps)]

    def one_pass(fn) -> float:
        start = time.perf_counter()
        for pos, (q, k, v) in enumerate(steps_kv):
            fn(keys, values, q, k, v, pos)
        return time.perf_counter() - start

    best = {name: min(one_pass(fn) for _ in range(rounds + 1)) for name, fn in contenders.items()}
    print(f"{f'attention over a {cache_length}-position cache, {steps} steps':52}{'per pass':>10}{'vs eager':>10}")
    for name, seconds in best.items():
        print(f"  {name:50}{seconds * 1e3:>8.2f}ms{seconds / best['eager']:>9.2f}x")


if __name__ == "__main__":
    main()
