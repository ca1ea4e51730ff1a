"""Fusion benchmark on CUDA: eager, torch.compile, and squall with each installed executor list.

    python bench/gpu_fusion.py [--json PATH]

Workloads: an elementwise chain (bias + gelu + residual), layer norm, softmax, and the demo
GPT block (inference) and GPT (a training step: forward, loss, backward). Times are medians
of CUDA-event timings after warm-up; each squall contender also reports which executors ran
(`squall.last_traces`) so a fast number that never used its executor is visible. Needs a
CUDA device; written for bench/gpu.sh. Each squall contender's background upgrade is awaited
before its per-call timing, and its outcome reported (`upgrades`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import squall
from squall.tools.demo import GPT, Block, GPTConfig


def median_cuda_ms(fn: Callable[[], Any], *, warmup: int = 5, reps: int = 30) -> float:
    """The median of `reps` CUDA-event timings of `fn()` after `warmup` calls, in milliseconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _first_call_s(step: Callable[[], Any]) -> float:
    """Wall time of the first call (tracing or Dynamo, planning, compiles), the GPU synchronized."""
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def _workloads() -> dict[str, tuple[Callable, tuple, bool]]:
    """name -> (function or module, arguments, whether a step is forward + backward of its loss)."""
    torch.manual_seed(0)
    x, b, r = (torch.randn(64, 1024, 1024, device="cuda"), torch.randn(1024, device="cuda"), torch.randn(64, 1024, 1024, device="cuda"))
    w = torch.randn(1024, device="cuda")
    cfg = GPTConfig()
    block = Block(cfg).cuda().eval()
    gpt = GPT(cfg).cuda()
    idx = torch.randint(0, cfg.vocab_size, (8, cfg.block_size), device="cuda")
    targets = torch.randint(0, cfg.vocab_size, (8, cfg.block_size), device="cuda")
    return {
        "bias_gelu_residual": (lambda x, b, r: r + F.gelu(x + b) * 0.5, (x, b, r), False),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (1024,), w, b), (x, w, b), False),
        "softmax": (lambda x: torch.softmax(x, dim=-1), (x,), False),
        "gpt_block_inference": (block, (torch.randn(8, cfg.block_size, cfg.n_embd, device="cuda"),), False),
        "gpt_train_step": (gpt, (idx, targets), True),  # timed as forward, loss, backward
    }


def _contenders() -> dict[str, Callable[[Callable], Callable]]:
    market = squall.market.plugins.default_marketplace()
    available = {e.name for e in market.default_executors()}
    found: dict[str, Callable[[Callable], Callable]] = {
        "eager": lambda fn: fn,
        "torch.compile": lambda fn: torch.compile(fn),
        "squall[torch]": lambda fn: squall.jit(fn, executors=["torch"]),
        "squall[defaults]": lambda fn: squall.jit(fn),
    }
    for name in ("nvfuser", "cupy", "inductor", "apex_xentropy"):
        if name in available:
            found[f"squall[{name}]"] = lambda fn, name=name: squall.jit(fn, executors=[name, "torch"])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_fusion.py: no CUDA device", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for workload, (fn, inputs, grads) in _workloads().items():
        for contender, make in _contenders().items():
            row: dict[str, Any] = {"workload": workload, "contender": contender}
            try:
                with warnings.catch_warnings(), torch.set_grad_enabled(grads):
                    warnings.simplefilter("ignore")
                    compiled = make(fn)
                    step = (lambda: compiled(*inputs)[1].backward()) if grads else (lambda: compiled(*inputs))
                    row["first_call_s"] = round(_first_call_s(step), 3)
                    if contender.startswith("squall"):
                        # per-call speed is what runs once the background upgrade is done; its
                        # compiles would otherwise be timed as the user's calls
                        squall.wait_for_upgrades(compiled)
                        row["upgrades"] = [str(u) for u in squall.upgrades(compiled)]
                    row["ms"] = round(median_cuda_ms(step), 4)
                if contender.startswith("squall"):
                    executed = squall.last_traces(compiled).source
                    row["executors_ran"] = sorted({e for e in ("nvfuser", "cupy", "inductor", "apex_xentropy") if e in str(executed)})
            except Exception as e:  # noqa: BLE001 - one contender failing must not hide the others
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
