"""Compile time: the first call of a compiled nanoGPT block (trace + plan + generate + run).

Run: python bench/compile.py [--fresh N] [--only eager,"squall.jit (torch only)"] [--clock cpu]
Prints, side by side in one process, the first-call time and the cached per-call time of
squall.jit (torch executor only; the installed defaults, tiered: the first call runs the
torch plan and fusion regions are compiled in the background; the defaults with wait=True:
everything compiled, timed and judged before the first call returns) and torch.compile, as
ratios to eager. For the tiered contender it also prints the time to fused speed: the calls
a user's loop makes, and the wall time from the first call's start, until the background
upgrade is done; its per-call time is measured after that. Each contender compiles a fresh
copy of the block; inductor's and squall's caches are fresh temporary folders. With
`--fresh N`, the first call is the best of N fresh compiles of fresh copies (a later copy's
compile may find what an earlier one left in squall's in-process caches, e.g. compiled source
text; inductor's cache folder is not cleared between them), and `--only` picks contenders.
`--clock cpu` times first calls and per-call times on the calling thread's CPU time
(`time.thread_time`: steady on a loaded machine; a background upgrade's work in another thread
or process is not in it), the time to fused speed stays wall time.
"""
from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time

# before torch is imported: inductor reads its cache folder from the environment
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-inductor-"))
os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="bench-squall-"))

import torch  # noqa: E402

import squall  # noqa: E402
from squall.tools.demo import Block, GPTConfig  # noqa: E402


def first_and_cached(compile_fn, block, x, rounds: int = 3, number: int = 20, fresh: int = 1, clock=time.perf_counter) -> dict:
    firsts = []
    for _ in range(fresh):
        fn = compile_fn(copy.deepcopy(block))
        start = time.perf_counter()
        begun = clock()
        fn(x)
        firsts.append(clock() - begun)
    result = {"first": min(firsts)}
    if isinstance(fn, squall.JittedModule) and squall.upgrades(fn):
        calls = 1
        while not squall.upgrades(fn)[0].done.is_set():
            fn(x)  # a user's loop, running while the upgrade compiles
            calls += 1
        result.update(calls=calls, to_fused=time.perf_counter() - start, upgrade=str(squall.upgrades(fn)[0]))
    best = float("inf")
    for _ in range(rounds):
        begun = clock()
        for _ in range(number):
            fn(x)
        best = min(best, (clock() - begun) / number)
    result["call"] = best
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", type=int, default=1, help="the first call: best of this many fresh compiles")
    parser.add_argument("--only", default="", help="comma-separated contender names (default: all)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="cpu: the calling thread's CPU time")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    block = Block(GPTConfig(n_embd=256, n_head=4, block_size=128)).eval()
    x = torch.randn(4, 128, 256)
    contenders = {
        "eager": lambda m: m,
        "squall.jit (torch only)": lambda m: squall.jit(m, executors=["torch"]),
        "squall.jit (defaults)": squall.jit,
        "squall.jit (defaults, wait)": lambda m: squall.jit(m, wait=True),
        "torch.compile": torch.compile,
    }
    if opts.only:
        chosen = {name.strip() for name in opts.only.split(",")} | {"eager"}
        unknown = chosen - set(contenders)
        if unknown:
            parser.error(f"unknown contenders {sorted(unknown)}; known: {list(contenders)}")
        contenders = {name: fn for name, fn in contenders.items() if name in chosen}
    with torch.no_grad():
        results = {name: first_and_cached(fn, block, x, fresh=opts.fresh, clock=time.thread_time if opts.clock == "cpu" else time.perf_counter) for name, fn in contenders.items()}
    eager_call = results["eager"]["call"]
    load = os.getloadavg()
    print(f"nanoGPT block, batch 4, seq 128, n_embd 256, one thread, torch {torch.__version__}; "
          f"first call: best of {opts.fresh} fresh compiles; {opts.clock} time; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'':30}{'first call':>12}{'per call':>12}{'vs eager':>10}")
    for name, r in results.items():
        print(f"{name:30}{r['first'] * 1e3:>10.1f}ms{r['call'] * 1e3:>10.3f}ms{r['call'] / eager_call:>9.2f}x")
        if "calls" in r:
            print(f"{'':32}fused speed after {r['calls']} calls, {r['to_fused']:.2f} s: {r['upgrade']}")


if __name__ == "__main__":
    main()
