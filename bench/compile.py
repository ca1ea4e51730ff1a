"""Compile time: the first call of a compiled nanoGPT block (trace + plan + generate + run).

Run: python bench/compile.py
Prints, side by side in one process, the first-call time and the cached per-call time of
squall.jit (torch executor only, and the installed defaults) and torch.compile, as ratios
to eager. Each contender compiles a fresh copy of the block, so no cache is shared.
"""
from __future__ import annotations

import copy
import time

import torch

import squall
from squall.demo import Block, GPTConfig


def first_and_cached(compile_fn, block, x, rounds: int = 3, number: int = 20) -> tuple[float, float]:
    fn = compile_fn(copy.deepcopy(block))
    start = time.perf_counter()
    fn(x)
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn(x)
        best = min(best, (time.perf_counter() - start) / number)
    return first, best


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    block = Block(GPTConfig(n_embd=256, n_head=4, block_size=128)).eval()
    x = torch.randn(4, 128, 256)
    contenders = {
        "eager": lambda m: m,
        "squall.jit (torch only)": lambda m: squall.jit(m, executors=["torch"]),
        "squall.jit (defaults)": squall.jit,
        "torch.compile": torch.compile,
    }
    with torch.no_grad():
        results = {name: first_and_cached(fn, block, x) for name, fn in contenders.items()}
    eager_call = results["eager"][1]
    print(f"nanoGPT block, batch 4, seq 128, n_embd 256, one thread, torch {torch.__version__}")
    print(f"{'':26}{'first call':>12}{'per call':>12}{'vs eager':>10}")
    for name, (first, call) in results.items():
        print(f"{name:26}{first * 1e3:>10.1f}ms{call * 1e3:>10.3f}ms{call / eager_call:>9.2f}x")


if __name__ == "__main__":
    main()
