"""Two squall trees side by side: call overhead and compile time, alternating old and new.

Run: python bench/ab.py OTHER_TREE [--pairs N] [--calls N]
e.g. `git worktree add --detach /tmp/squall-main main && python bench/ab.py /tmp/squall-main`.

Each measurement runs in a fresh subprocess that imports squall from one tree's core/ (this
checkout's, or OTHER_TREE's); the two trees take turns, N pairs, each going first in every
other pair, so load on the machine falls on both alike. Measured, as in bench/overhead.py and the demo: the cached call of a jitted
`a + b` on 1-element tensors; a 30-parameter module's cached call (grad on and no_grad); and
the demo GPT's compile time (trace + plan + generate, torch executor). Prints each tree's best
and median and the ratio of bests (this tree / other).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# imports squall from the tree given as argv[1], then measures; prints one JSON line
_MEASURE = r"""
import importlib.util, json, sys, time
core = sys.argv[1] + "/core"
spec = importlib.util.spec_from_file_location("squall", core + "/__init__.py", submodule_search_locations=[core])
squall = importlib.util.module_from_spec(spec); sys.modules["squall"] = squall; spec.loader.exec_module(squall)
import torch
from squall.tools.demo import GPT, GPTConfig
from squall.runtime.jit import jitted_state
torch.set_num_threads(1)
calls = int(sys.argv[2])

def per_call(fn, args, n, rounds=3):
    for _ in range(100):
        fn(*args)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / n)
    return best

out = {"a + b": per_call(squall.jit(lambda a, b: a + b), (torch.randn(1), torch.randn(1)), calls)}
layers = []
for _ in range(15):
    layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
module, x = torch.nn.Sequential(*layers[:-1]), torch.randn(4, 16)
with torch.enable_grad():
    out["30 parameters, grad on"] = per_call(squall.jit(module), (x,), max(calls // 100, 10))
with torch.no_grad():
    out["30 parameters, no_grad"] = per_call(squall.jit(module), (x,), max(calls // 100, 10))
torch.manual_seed(0)
model = GPT(GPTConfig()).eval()
idx = torch.randint(0, model.cfg.vocab_size, (4, 128))
jitted = squall.jit(model, executors=["torch"])
with torch.no_grad():
    jitted(idx)
out["demo GPT compile"] = jitted_state(jitted).last_entry.compile_seconds
print(json.dumps(out))
"""


def measure(tree: Path, calls: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(tree), str(calls)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other squall tree (a checkout with core/)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=50_000)
    opts = parser.parse_args()
    runs: dict[str, list[dict]] = {"this": [], "other": []}
    trees = {"this": HERE, "other": opts.other.resolve()}
    for i in range(opts.pairs):
        for name in ("other", "this") if i % 2 == 0 else ("this", "other"):  # each goes first in turn
            runs[name].append(measure(trees[name], opts.calls))
    print(f"this tree: {HERE}\nother tree: {opts.other.resolve()}\n{opts.pairs} pairs, alternating")
    print(f"{'':28}{'other best':>12}{'this best':>12}{'other med':>12}{'this med':>12}{'this/other':>12}")
    for name in runs["this"][0]:
        scale, unit = (1e6, "us") if "compile" not in name else (1e3, "ms")
        other = [r[name] * scale for r in runs["other"]]
        this = [r[name] * scale for r in runs["this"]]
        print(f"{name:28}{min(other):>10.2f}{unit}{min(this):>10.2f}{unit}{statistics.median(other):>10.2f}{unit}"
              f"{statistics.median(this):>10.2f}{unit}{min(this) / min(other):>11.3f}x")


if __name__ == "__main__":
    main()
