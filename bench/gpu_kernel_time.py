"""Where a CUDA step spends its GPU time, eager against squall's torch plan, kernel by kernel.

    python bench/gpu_kernel_time.py [--only resnet50 llama ...] [--inference] [--train-dtype bfloat16] [--autocast] [--steps 3] [--top 25]

bench/gpu_models.py says how much slower or faster a step is; this says why. For each model of
gpu_models.py (training step in float32 by default, as there, or in --train-dtype; --autocast: a
float32 model's step under bfloat16 autocast; --inference for bfloat16 without gradients), eager and `squall.jit(model, executors=["torch"])` each run warm steps, are timed in
alternating rounds (CUDA events), then run --steps steps under torch.profiler. Printed per model:
per step, the GPU time and the number of kernels of each contender; the aten ops each calls per
step with their GPU time (which op launched the difference: `cudnn_batch_norm` against
`native_batch_norm`, an attention backward against its math decomposition); and the kernels whose
time per step differs most.

Measured on an H100 (torch 2.11+cu130, 2026-11-27), training steps, GPU time per step, eager
against squall's torch plan. Before: ResNet-50 18.84 ms against 21.46 (1.14x; batch norm ran the
native kernels, 8.57 ms, where eager runs cuDNN's, 6.04), LLaMA (float32) 50.94 against 54.89
(1.08x; attention on the math path, where eager runs the memory-efficient kernels: 2.5 ms against
about 6). After squall's rules recorded eager's kernels (torch's `_batch_norm_with_update` /
`batch_norm_backward`, the memory-efficient attention kernels): ResNet-50 18.71 against 18.98
(1.01x, 734 against 735 kernels), LLaMA 51.21 against 50.82 and 51.19 against 50.85 (0.99x, 554
kernels each). LLaMA in bfloat16 (--train-dtype bfloat16): 14.14 ms against 24.45 per step (1.73x):
this PyTorch prefers cuDNN's attention on an H100, and squall then took the math path; since, it
takes the flash kernel there (not yet run on a GPU; a check on first use keeps the math path if
the kernels do not answer as float32 math does).
Then (H100, torch 2.11+cu130, 2026-11-27, --rounds 2), the flash path run: LLaMA bfloat16 training
eager 13.698 ms, squall's torch plan 12.390 (0.90x; 576 kernels against 584, GPU time 10.228 against
10.315 ms): squall's flash kernels take 140 + 301 us per step where eager's cuDNN attention takes 93 +
237, the rest evens out. Under bfloat16 autocast (--autocast, float32 models): LLaMA eager 20.766 ms,
squall 19.543 (0.94x; GPU time 12.066 against 12.027); ResNet-50 eager 36.665, squall 38.293 (1.04x;
GPU time 15.082 against 15.534, 390 us of it one atomic kernel: squall differentiated the global
average pool with the pooling backward, eager as the mean it computes). With the mean's gradient
recorded: ResNet-50 eager 24.901 ms, squall 24.270 (0.97x), 953 kernels each, GPU time 15.077 against
15.159 ms (a host whose speed moved between the two runs: compare within a run only).
"""
from __future__ import annotations

import argparse
import collections
import sys
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

import squall
from gpu_fusion import median_cuda_ms  # bench/ is on sys.path when this script runs
from gpu_models import MODELS, _logits, _step


def _device_us(event) -> float:
    """An averaged event's own GPU time in microseconds (torch renamed the field in 2.4)."""
    for field in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, field):
            return float(getattr(event, field))
    return 0.0


def _total_device_us(event) -> float:
    for field in ("device_time_total", "cuda_time_total"):
        if hasattr(event, field):
            return float(getattr(event, field))
    return 0.0


def _profile(step, steps: int) -> tuple[dict[str, tuple[int, float]], dict[str, tuple[int, float]]]:
    """(kernels, aten ops) per step: name -> (calls, GPU microseconds)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kernels: dict[str, tuple[int, float]] = {}
    ops: dict[str, tuple[int, float]] = {}
    for event in prof.key_averages():
        device_type = str(getattr(event, "device_type", ""))
        if device_type.endswith("CUDA"):
            kernels[event.key] = (event.count / steps, _device_us(event) / steps)
        elif event.key.startswith("aten::"):
            ops[event.key] = (event.count / steps, _total_device_us(event) / steps)
    return kernels, ops


def _compare(title: str, eager: dict, squall_: dict, top: int, key=lambda row: abs(row[4] - row[2])) -> None:
    rows = [(name, *eager.get(name, (0, 0.0)), *squall_.get(name, (0, 0.0))) for name in set(eager) | set(squall_)]
    rows.sort(key=key, reverse=True)
    print(f"\n{title}: per step, calls and GPU us, eager | squall[torch]; largest differences first")
    for name, e_calls, e_us, s_calls, s_us in rows[:top]:
        if e_calls == s_calls and abs(e_us - s_us) < 1:
            continue
        print(f"  {e_calls:6.1f} {e_us:10.1f} | {s_calls:6.1f} {s_us:10.1f}   {name[:110]}")


def _autocast_step(model: torch.nn.Module, compiled, inputs: dict[str, torch.Tensor]):
    """A mixed-precision training step as users write it: the forward and the loss under CUDA
    autocast (bfloat16), the backward outside it."""
    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = _logits(compiled(**inputs))
            loss = out.float().square().mean()
        loss.backward()
        return out
    return step


def run(name: str, train: bool, steps: int, top: int, rounds: int, train_dtype: torch.dtype, autocast: bool = False) -> None:
    build, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model = build().cuda().train(train)
    inputs = make_inputs()
    dtype = train_dtype if train else torch.bfloat16
    make_step = _step
    if autocast:  # a float32 model under autocast
        dtype = torch.float32
        make_step = lambda model, compiled, inputs, train: _autocast_step(model, compiled, inputs)  # noqa: E731
    if dtype != torch.float32:
        model = model.to(dtype)
        inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        contenders = {"eager": make_step(model, model, inputs, train),
                      "squall[torch]": make_step(model, squall.jit(model, executors=["torch"]), inputs, train)}
        for step in contenders.values():
            step(), step()
        times = collections.defaultdict(list)
        for _ in range(rounds):
            for contender, step in contenders.items():
                times[contender].append(median_cuda_ms(step, warmup=1, reps=10))
        profiles = {contender: _profile(step, steps) for contender, step in contenders.items()}
    mode = "train under bfloat16 autocast" if autocast else f"train {str(dtype).removeprefix('torch.')}" if train else "inference"
    print(f"\n=== {name} {mode}: best of {rounds} rounds, ms per step: "
          + ", ".join(f"{c} {min(t):.3f}" for c, t in times.items()))
    for contender, (kernels, _) in profiles.items():
        print(f"  {contender}: {sum(c for c, _ in kernels.values()):.0f} kernels, "
              f"{sum(us for _, us in kernels.values()) / 1000:.3f} ms of GPU time per step")
    (e_kernels, e_ops), (s_kernels, s_ops) = profiles["eager"], profiles["squall[torch]"]
    _compare("aten ops", e_ops, s_ops, top, key=lambda row: abs(row[4] - row[2]) + 1000 * abs(row[3] - row[1]))
    _compare("kernels", e_kernels, s_kernels, top)
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["resnet50", "llama"], help=f"models (of {', '.join(MODELS)})")
    parser.add_argument("--inference", action="store_true", help="bfloat16 forward without gradients instead of a training step")
    parser.add_argument("--train-dtype", choices=["float32", "bfloat16"], default="float32", help="the training step's dtype (model and inputs)")
    parser.add_argument("--autocast", action="store_true", help="a float32 model's training step under CUDA bfloat16 autocast (forward and loss; the backward outside it)")
    parser.add_argument("--steps", type=int, default=3, help="steps profiled per contender")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds")
    parser.add_argument("--top", type=int, default=25, help="rows printed per table")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_kernel_time.py: no CUDA device", file=sys.stderr)
        return 2
    unknown = set(args.only) - set(MODELS)
    if unknown:
        parser.error(f"unknown model(s) {sorted(unknown)}; choose from {sorted(MODELS)}")
    for name in args.only:
        run(name, train=not args.inference, steps=args.steps, top=args.top, rounds=args.rounds, train_dtype=getattr(torch, args.train_dtype), autocast=args.autocast)
    return 0


if __name__ == "__main__":
    sys.exit(main())
