"""Real models: squall.jit against eager (and torch.compile) on the timm, torchvision and transformers models of
tests/test_real_models.py (small configs, random weights, inference).

Run: python bench/models.py [--torch-compile] [--inductor] [name ...]
Per model: whether squall compiles it with no opaque call, how many value guards its trace
has (a padding mask's check), the first call's time (compile included), and the cached
per-call time as a ratio to eager. Contenders run side by side in
one process, alternating within each round, best of several rounds, on one thread.

With --inductor, squall with the inductor plugin runs with `wait=True`: its first call
returns after the background upgrade (inductor's compiles, the in-context judge), so its
first-call time is the time to fused speed; the column "kept" says which offer won (large
regions, islands) or that the torch plan was kept. inductor is imported and its CPU
toolchain probed before anything is timed, so neither contender pays those one-time costs
(seconds) in its compile time. Judgements go to a fresh cache folder (nothing remembered
from an earlier run); inductor's own caches are left as they are.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import TIMM_MODELS, TORCHVISION_MODELS, TRANSFORMERS_MODELS, assert_same_output, import_torchvision  # noqa: E402

import squall  # noqa: E402
from squall.frontend.speculation import guards_of  # noqa: E402


def _first_call(fn, inputs) -> tuple[float, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        fn(**inputs)
        seconds = time.perf_counter() - start
    opaque = sorted({str(w.message).split(" is not in")[0].removeprefix("squall: ") for w in caught if issubclass(w.category, squall.SquallWarning)})
    return seconds, opaque


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="models to run (default: all)")
    parser.add_argument("--torch-compile", action="store_true", help="also torch.compile (slow to compile)")
    parser.add_argument("--inductor", action="store_true", help="also squall with the inductor plugin's fusion first")
    parser.add_argument("--why", action="store_true", help="print each upgrade's reason (every offer's time) under its row")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import_torchvision()
    contenders = {"squall": lambda m: squall.jit(m, executors=["torch"])}
    if args.inductor:
        contenders["squall+inductor"] = lambda m: squall.jit(m, executors=["inductor", "torch"], wait=True)
    if args.inductor or args.torch_compile:
        _warm_inductor()
    if args.torch_compile:
        contenders["torch.compile"] = torch.compile
    header = f"{'model':36}{'opaque calls':>14}{'guards':>8}" + "".join(f"{name + ' first':>22}{name + ' / eager':>22}" for name in contenders)
    if args.inductor:
        header += f"{'kept':>16}"
    if args.inductor and args.torch_compile:
        header += f"{'per call vs tc':>16}{'first vs tc':>13}"
    ratios: list[tuple[float, float]] = []
    print(f"torch {torch.__version__}, one thread, inference; per call: best of {args.rounds} rounds of {args.number}; eager per call in ms")
    print(header + f"{'eager ms':>10}")
    for model in TIMM_MODELS + TORCHVISION_MODELS + TRANSFORMERS_MODELS:
        if args.names and model.name not in args.names and model.name.split("/")[-1] not in args.names:
            continue
        torch.manual_seed(0)
        module, inputs = model.build(), model.inputs()
        with torch.no_grad():
            expected = module(**inputs)
            compiled, firsts, opaque = {}, {}, []
            for name, make in contenders.items():
                compiled[name] = make(module)
                firsts[name], found = _first_call(compiled[name], inputs)
                opaque = opaque or found
                assert_same_output(compiled[name](**inputs), expected, atol=model.tolerance, rtol=model.tolerance)
            runs = {"eager": module, **compiled}
            best = dict.fromkeys(runs, float("inf"))
            for _ in range(args.rounds):
                for name, fn in runs.items():
                    start = time.perf_counter()
                    for _ in range(args.number):
                        fn(**inputs)
                    best[name] = min(best[name], (time.perf_counter() - start) / args.number)
        guards = len(guards_of(squall.last_traces(compiled["squall"])))
        row = f"{model.name:36}{', '.join(opaque) or 'none':>14}{guards:>8}"
        row += "".join(f"{firsts[n] * 1e3:>20.0f}ms{best[n] / best['eager']:>21.2f}x" for n in contenders)
        if args.inductor:
            row += f"{_kept(compiled['squall+inductor']):>16}"
        if args.inductor and args.torch_compile:
            ratios.append((best["squall+inductor"] / best["torch.compile"], firsts["squall+inductor"] / firsts["torch.compile"]))
            row += f"{ratios[-1][0]:>15.2f}x{ratios[-1][1]:>12.2f}x"
        print(row + f"{best['eager'] * 1e3:>10.2f}", flush=True)
        if args.why and args.inductor:
            print(f"    {squall.upgrades(compiled['squall+inductor'])[-1]}", flush=True)
    if ratios:
        per_call, first = zip(*ratios)
        print(f"squall+inductor / torch.compile over {len(ratios)} models: per call median {statistics.median(per_call):.2f}x "
              f"(worst {max(per_call):.2f}x), first call median {statistics.median(first):.2f}x (worst {max(first):.2f}x)")


def _warm_inductor() -> None:
    """Import inductor and compile one tiny function, so the one-time costs (imports, probing the
    CPU's vector instruction sets with the C++ compiler) are not charged to the first contender."""
    os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="squall-bench-"))
    torch.compile(lambda x: x * 2 + 1)(torch.ones(3))


def _kept(fn) -> str:
    """Which offer the upgrade kept: "large regions", "islands", or why the torch plan runs."""
    (upgrade,) = squall.upgrades(fn)[-1:] or (None,)
    if upgrade is None:
        return "-"
    if upgrade.status != "upgraded":
        return {"kept the torch plan": "torch", "nothing to fuse": "nothing"}.get(upgrade.status, upgrade.status)
    last = upgrade.reason.split("; ")[-1]
    return last.split(":")[0] if ":" in last and not last.startswith("in context") else "regions"


if __name__ == "__main__":
    main()
