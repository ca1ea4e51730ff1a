"""What calling one compiled fusion region costs by itself, next to eager, in one process.

Run: python bench/region_call.py [--calls N] [--rounds R]
The same tiny region (`tanh(x * 2 + 1)` on one CPU element, where the computation is
nothing and the call is everything) as eager, compiled with `torch.compile(fullgraph=True,
dynamic=False)` (Dynamo's frame evaluation and guards on every call: how squall-inductor
called its regions before), and compiled from squall's region straight into inductor
(`squall_inductor.CompiledRegion`: inductor's wrapper, no Dynamo frame). Then the same
function jitted by squall with the inductor executor, next to torch.compile of the function.
Contenders run in turn within each round (load falls on all alike), best round each, one thread.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import torch

import squall
from overhead import best_per_call  # bench/overhead.py: warm up, then the best round of each contender
from squall_inductor import CompiledRegion, InductorExecutor


def region(x):
    return (torch.tanh(x * 2 + 1),)


def program(x):
    return torch.tanh(x * 2 + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp())
    x = torch.randn(1)
    contenders = {
        "eager region": region,
        "torch.compile region": torch.compile(region, fullgraph=True, dynamic=False),
        "inductor region (direct)": CompiledRegion(region, [x]),
    }
    executor = InductorExecutor(autotune=False, min_eager_seconds=0)
    contenders["squall.jit + inductor"] = squall.jit(program, executors=[executor, "torch"], wait=True)
    contenders["torch.compile program"] = torch.compile(program)
    contenders["squall.jit + inductor"](x)
    assert squall.last_traces(contenders["squall.jit + inductor"]).plan.regions, "the region was not kept"
    best = best_per_call(contenders, (x,), args.calls, args.rounds)
    print(f"torch {torch.__version__}, one thread, per call in us (best of {args.rounds} rounds of {args.calls}); load {os.getloadavg()[0]:.1f}")
    eager = best["eager region"]
    for name, seconds in best.items():
        print(f"{name:28}{seconds * 1e6:10.2f} us{seconds / eager:10.2f}x eager")


if __name__ == "__main__":
    main()
