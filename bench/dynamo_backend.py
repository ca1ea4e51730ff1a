"""torch.compile(backend="squall") against torch.compile's own backend (inductor) and squall.jit.

Run: python bench/dynamo_backend.py [--train] [name ...]   (default: a few models of bench/models.py)

Per model (tiny configs, random weights, one thread): the first call's time (Dynamo, the backend's
compile and one run), and the cached per-call time as a ratio to eager, for
  - squall.jit             squall's own tracer (torch executor)
  - dynamo+squall          torch.compile(backend="squall", options={"executors": ["torch"]})
  - torch.compile          torch.compile() (inductor, default options)
`--train` times a training step (forward, a loss, backward) instead of inference. Contenders run
side by side in one process, alternating within each round, best of several rounds.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import TIMM_MODELS, TRANSFORMERS_MODELS, assert_same_output, import_torchvision  # noqa: E402

import squall  # noqa: E402

DEFAULT_MODELS = ["gpt2", "llama", "bert", "timm/test_resnet", "timm/test_vit", "timm/test_convnext"]

CONTENDERS = {
    "squall.jit": lambda m: squall.jit(m, executors=["torch"]),
    "dynamo+squall": lambda m: torch.compile(m, backend="squall", options={"executors": ["torch"]}),
    "torch.compile": torch.compile,
}


def _loss(out) -> torch.Tensor:
    logits = out if isinstance(out, torch.Tensor) else (out.logits if hasattr(out, "logits") else out[0])
    return logits.float().logsumexp(-1).mean()


def _step(fn, inputs: dict, train: bool):
    if not train:
        with torch.no_grad():
            return fn(**inputs)
    loss = _loss(fn(**inputs))
    loss.backward()
    return loss


def _best_per_call(fns: dict, inputs: dict, train: bool, rounds: int, number: int) -> dict[str, float]:
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(number):
                _step(fn, inputs, train)
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models to run (default: {' '.join(DEFAULT_MODELS)}; 'all' for every one)")
    parser.add_argument("--train", action="store_true", help="time a training step instead of inference")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import_torchvision()
    names = args.names or DEFAULT_MODELS
    mode = "training step" if args.train else "inference"
    print(f"torch {torch.__version__}, one thread, {mode}; first call in s (compile included); per call: best of {args.rounds} rounds of {args.number}, as a ratio to eager")
    print(f"{'model':28}" + "".join(f"{c + ' first':>22}{c + ' / eager':>22}" for c in CONTENDERS) + f"{'eager ms':>10}")
    for model in TIMM_MODELS + TRANSFORMERS_MODELS:
        if "all" not in names and model.name not in names and model.name.split("/")[-1] not in names:
            continue
        torch.manual_seed(0)
        module, inputs = model.build(), model.inputs()
        if args.train:
            module.train()
        expected = _step(module, inputs, args.train)
        fns, firsts = {"eager": module}, {}
        torch._dynamo.reset()  # per model; each backend keeps its own Dynamo cache entry of the forward
        for name, make in CONTENDERS.items():
            fn = make(module)
            start = time.perf_counter()
            out = _step(fn, inputs, args.train)
            firsts[name] = time.perf_counter() - start
            assert_same_output(out, expected, atol=model.tolerance * 10, rtol=model.tolerance * 10)
            fns[name] = fn
        module.zero_grad(set_to_none=True)
        best = _best_per_call(fns, inputs, args.train, args.rounds, args.number)
        row = f"{model.name:28}" + "".join(f"{firsts[c]:>22.2f}{best[c] / best['eager']:>22.2f}" for c in CONTENDERS)
        print(row + f"{best['eager'] * 1e3:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
