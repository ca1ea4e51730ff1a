"""Real models: squall.jit against eager (and torch.compile) on the timm, torchvision and transformers models of
tests/test_real_models.py (small configs, random weights, inference).

Run: python bench/models.py [--torch-compile] [--inductor] [name ...]
Per model: whether squall compiles it with no opaque call, how many value guards its trace
has (a padding mask's check), the first call's time (compile included), and the cached
per-call time as a ratio to eager. Contenders run side by side in
one process, alternating within each round, best of several rounds, on one thread.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import TIMM_MODELS, TORCHVISION_MODELS, TRANSFORMERS_MODELS, assert_same_output, import_torchvision  # noqa: E402

import squall  # noqa: E402
from squall.speculation import guards_of  # noqa: E402


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
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import_torchvision()
    contenders = {"squall": lambda m: squall.jit(m, executors=["torch"])}
    if args.inductor:
        contenders["squall+inductor"] = lambda m: squall.jit(m, executors=["inductor", "torch"])
    if args.torch_compile:
        contenders["torch.compile"] = torch.compile
    header = f"{'model':36}{'opaque calls':>14}{'guards':>8}" + "".join(f"{name + ' first':>22}{name + ' / eager':>22}" for name in contenders)
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
        print(row + f"{best['eager'] * 1e3:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
