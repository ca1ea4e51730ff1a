"""Real third-party models on CUDA: eager, torch.compile and squall (torch plan, and each fusion
executor installed), inference and a training step, at sizes a GPU is used for.

    python bench/gpu_models.py [--only NAME ...] [--train | --train-only] [--train-dtype bfloat16] [--rounds 5] [--skip CONTENDER ...] [--json PATH]

Models are built from the libraries' own classes with random weights (nothing is downloaded):
transformers LLaMA and GPT-2 (4 layers, hidden 1024, batch 8 x 512 tokens), timm ResNet-50
and ViT-B/16 (batch 32, 224x224); inference in bfloat16, training in float32 (or --train-dtype). Per contender: the first call's wall time (tracing or Dynamo,
planning, compiles; squall's background upgrade awaited and timed with it), the per-call
time, and the largest difference from eager's output. Contenders run in one process on the
same inputs: each is built and called once, one after the other; then per-call times are taken
in --rounds rounds, every contender in turn (each round the median of 10 CUDA-event timings),
and the best round is reported.

Measured on an H100 (torch 2.11+cu130, 2026-11-27), inference, per call against torch.compile:
timed one contender after the other (before the rounds), squall with inductor took 0.79x on
LLaMA, 0.63x on GPT-2 and 1.46x on ResNet-50; the ResNet-50 number was the order's, not the
program's: in rounds (the same process, .diag script) squall 2.739 ms against torch.compile's
2.618 (1.05x), its region called alone 2.494 ms, and both ran the same 131 kernels (1.82 ms of
kernel time; layout optimisation on in both): at batch 32 the call is bound by the host's
launches. A LLaMA training step (float32): squall with inductor 51.3 ms against torch.compile's
50.3 (1.02x) and eager's 53.9; its first call, the upgrade awaited, 64 s against 15 s (the
large regions ran after 42 s; islands were compiled and judged as well).
Then this script in rounds (--rounds 5, squall[cupy] skipped), same day, another H100; best round
against torch.compile's: LLaMA 1.918 ms against 2.409 (0.80x; squall's torch plan 0.62x eager's),
GPT-2 2.188 against 2.259 (0.97x), ResNet-50 3.964 against 3.964 (1.00x), ViT-B/16 3.647 against
3.468 (1.05x: the judge kept the torch plan, its fused plan 3% faster in context, inside the
margin; torch.compile itself 0.94x eager's). The host was noisy: rounds of one contender spread
up to 2x (ResNet-50 eager 7.4-15.1 ms), so only the best round is comparable.
Again 2026-11-27 (H100, torch 2.11+cu130; the CUDA plugins' tests first: 251 passed, 27 skipped),
--rounds 3, inference, best round against torch.compile's: LLaMA 1.737 ms against 1.884 (0.92x),
GPT-2 1.788 against 1.745 (1.02x), ViT-B/16 3.471 against 3.411 (1.02x; large regions kept at
0.96x the torch plan in context), ResNet-50 4.792 against 3.885 (1.23x). ResNet-50 again in a
second process (--only resnet50 --rounds 7): 3.673 against 2.457 (1.49x), eager 4.944. Its
upgrade judged the large regions at 5.210 ms against the torch plan's 5.681 (0.92x, best of 24
batches: the sitting was slow for both), so the islands were compiled too (4.524 against 3.658,
0.81x) and kept; the earlier session's large region alone ran at torch.compile's speed. Not
diagnosed further (the session's device time was spent): a judge whose two offers are timed in
different sittings may keep the slower one where the load changes between them.
Since (2026-11-27, later): a later offer is timed in the same rounds as the torch plan and the
offer running, and replaces it only where faster than both (squall.runtime.tiers.judge's
`running`). Re-run 2026-11-27 on an H100 (torch 2.11+cu130), --rounds 5, inference, best round
against torch.compile's: ResNet-50 2.602 ms against 2.432 (1.07x; large regions judged at 0.74x the
torch plan, islands not compiled), LLaMA 2.340 against 2.579 (0.91x), ViT-B/16 3.492 against 3.424
(1.02x). Training (--train-only --rounds 3): LLaMA 50.854 against 50.882 (1.00x; eager 54.072);
ResNet-50 27.636 against 25.659 (1.08x; eager 24.227, squall's torch plan 29.241): the judge refused
both fused plans, their input gradients "differing by up to 0.335 where they reach 23.7" at float32's
tolerance. CUDA computes float32 convolutions in TF32 by default (cuDNN), and eager's own ResNet-50
gradients move by 5.8% of the largest between TF32 and IEEE float32 (same machine), so the judge now
gives float32 on CUDA float16's tolerance where TF32 is allowed. Then (another H100, eager and squall
only): ResNet-50 training 21.887 ms against eager's 24.272 (0.90x), large regions kept (23.205 against
the torch plan's 26.669 in context). The training torch plan is slower than eager on ResNet-50
(1.21x): not yet looked into.
Since (2026-11-27, later): squall's training rules record eager's CUDA kernels (cuDNN's batch norm
through torch's `_batch_norm_with_update`, the memory-efficient attention kernels; see
bench/gpu_kernel_time.py), and an inductor region called with a stride-0 gradient compiles for it
(LLaMA's large training regions had raised on the judge's inputs). H100, torch 2.11+cu130,
--train-only --rounds 3, best round: LLaMA eager 53.468 ms, torch.compile 50.675, squall's torch
plan 53.536 (1.00x eager; 1.07x before), squall with inductor 49.296 (0.97x torch.compile; large
regions kept, 47.0 against the torch plan's 51.0 in context); ResNet-50 eager 25.064, torch.compile
26.507, squall's torch plan 22.531 (0.90x eager; 1.21x before), squall with inductor 25.191 (large
regions kept at 19.1 against 21.5 in context, but slower in the rounds: the rounds of one contender
spread 13-28%). A second ResNet-50 run (no torch.compile): eager 24.642, torch plan 23.936, with
inductor 22.478 (the judge kept the torch plan: fused 24.54 against 24.69 in context).
LLaMA training in bfloat16 (--train-only --train-dtype bfloat16 --rounds 3, H100, torch 2.11+cu130,
2026-11-27, squall[cupy] skipped): eager 13.668 ms, torch.compile 8.548 (first call 15.6 s), squall's
torch plan 12.152 (0.89x eager; first call 0.55 s), squall with inductor 8.252 (0.97x torch.compile;
large regions judged at 6.452 ms against the torch plan's 12.278 in context). Its fused plan ran
38.2 s after the first call; SQUALL_INDUCTOR_TIMELINE showed where: the worker's imports 9.4 s
(started at squall.jit), then five regions compiled one after another in the one worker, 8.7, 5.0,
4.4, 4.5 and 4.9 s (make_fx 0.4-0.6 s of each, the rest inductor's lowering and Triton's compiles).
Each of them is a fusion pass of its own forming one whole region (the forward, the backward, the
backward without some outputs, ...; on CPU: 137, 263 and 259 calls, one region each), so compiling a
pass's regions side by side in more workers could not help: tried (2 and 3 workers, one per pass's
region) and dropped, 57.8 and 38.8 s against 38.2 s with one. Shortening it means compiling the
passes themselves side by side (the fusion executor keeps per-pass state today).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

import squall
from gpu_fusion import median_cuda_ms  # bench/ is on sys.path when this script runs


def _transformers(config_name: str, model_name: str, **config: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import transformers

        cfg = getattr(transformers, config_name)(**config)
        return getattr(transformers, model_name)(cfg)

    return build


def _timm(name: str) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import timm

        return timm.create_model(name, pretrained=False)

    return build


_DECODER = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[], dict[str, torch.Tensor]]]] = {
    "llama": (_transformers("LlamaConfig", "LlamaForCausalLM", **_DECODER),
              lambda: {"input_ids": torch.randint(0, 32000, (8, 512), device="cuda")}),
    "gpt2": (_transformers("GPT2Config", "GPT2LMHeadModel", vocab_size=32000, n_positions=1024, n_embd=1024, n_layer=4, n_head=16),
             lambda: {"input_ids": torch.randint(0, 32000, (8, 512), device="cuda")}),
    "resnet50": (_timm("resnet50"), lambda: {"x": torch.randn(32, 3, 224, 224, device="cuda")}),
    "vit_b16": (_timm("vit_base_patch16_224"), lambda: {"x": torch.randn(32, 3, 224, 224, device="cuda")}),
}


def _logits(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _contenders(skip: set[str]) -> dict[str, Callable[[torch.nn.Module], Callable]]:
    available = {e.name for e in squall.market.plugins.default_marketplace().default_executors()}
    found: dict[str, Callable[[torch.nn.Module], Callable]] = {
        "eager": lambda m: m,
        "torch.compile": lambda m: torch.compile(m),
        "squall[torch]": lambda m: squall.jit(m, executors=["torch"]),
    }
    for name in ("inductor", "nvfuser", "cupy"):
        if name in available:
            found[f"squall[{name}]"] = lambda m, name=name: squall.jit(m, executors=[name, "torch"], wait=True)
    return {name: make for name, make in found.items() if name not in skip}


def _step(model: torch.nn.Module, compiled: Callable, inputs: dict[str, torch.Tensor], train: bool) -> Callable[[], torch.Tensor]:
    """One call of `compiled`: a training step (forward, loss, backward) or a forward without gradients."""
    if train:
        def step():
            model.zero_grad(set_to_none=True)
            out = _logits(compiled(**inputs))
            out.float().square().mean().backward()
            return out
    else:
        def step():
            with torch.no_grad():
                return _logits(compiled(**inputs))
    return step


def _run(name: str, train: bool, rounds: int, skip: set[str], train_dtype: torch.dtype = torch.float32) -> list[dict[str, Any]]:
    build, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model = build().cuda().train(train)
    inputs = make_inputs()
    dtype = train_dtype if train else torch.bfloat16  # inference in bfloat16, as it is served
    if dtype != torch.float32:
        model = model.to(dtype)
        inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
    mode = ("train" if dtype == torch.float32 else f"train {str(dtype).removeprefix('torch.')}") if train else "inference"
    rows, reference, steps = [], None, {}
    for contender, make in _contenders(skip).items():
        row: dict[str, Any] = {"model": name, "mode": mode, "contender": contender}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = make(model)
                step = _step(model, compiled, inputs, train)
                start = time.perf_counter()
                out = step()
                if contender.startswith("squall"):
                    squall.wait_for_upgrades(compiled)
                torch.cuda.synchronize()
                row["first_call_s"] = round(time.perf_counter() - start, 3)
                if reference is None:
                    reference = out.detach().float()
                row["max_diff"] = float((out.detach().float() - reference).abs().max())
                if contender.startswith("squall"):
                    row["upgrades"] = [str(u)[:300] for u in squall.upgrades(compiled)]
                    source = str(squall.last_traces(compiled).source)
                    row["executors_ran"] = sorted(e for e in ("inductor", "nvfuser", "cupy") if e in source)
                steps[contender] = step
        except Exception as e:  # noqa: BLE001 - one contender failing must not hide the others
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        rows.append(row)
    # per-call times in rounds, each contender in turn, once all are compiled: at these sizes a call
    # is bound by the host's kernel launches, and timing each contender right after its own compile
    # let what ran before it (a compile's threads, the allocator, clocks) decide the order (one
    # H100 run timed a ResNet-50 contender at 1.46x torch.compile alone and 1.04x in rounds)
    times: dict[str, list[float]] = {c: [] for c in steps}
    for _ in range(rounds):
        for contender, step in steps.items():
            try:
                times[contender].append(median_cuda_ms(step, warmup=2, reps=10))
            except Exception as e:  # noqa: BLE001
                next(r for r in rows if r["contender"] == contender)["error"] = f"{type(e).__name__}: {str(e)[:400]}"
    for row in rows:
        if times.get(row["contender"]):
            row["ms"] = round(min(times[row["contender"]]), 3)
            row["ms_rounds"] = [round(t, 3) for t in times[row["contender"]]]
        print(json.dumps(row), flush=True)
    torch._dynamo.reset()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help=f"models to run (default: all of {', '.join(MODELS)})")
    parser.add_argument("--train", action="store_true", help="also a training step (forward, loss, backward) per model")
    parser.add_argument("--train-only", action="store_true", help="only the training step, no inference")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of per-call timing, each contender in turn (the best round is reported)")
    parser.add_argument("--train-dtype", choices=["float32", "bfloat16"], default="float32", help="the training step's dtype (model and inputs)")
    parser.add_argument("--skip", nargs="*", default=[], help="contenders to leave out, e.g. squall[cupy]")
    parser.add_argument("--json", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_models.py: no CUDA device", file=sys.stderr)
        return 2
    unknown = set(args.only or ()) - set(MODELS)
    if unknown:
        parser.error(f"unknown model(s) {sorted(unknown)}; choose from {sorted(MODELS)}")
    rows = []
    for name in args.only or MODELS:
        if not args.train_only:
            rows += _run(name, train=False, rounds=args.rounds, skip=set(args.skip))
        if args.train or args.train_only:
            rows += _run(name, train=True, rounds=args.rounds, skip=set(args.skip), train_dtype=getattr(torch, args.train_dtype))
    print("\n| model | mode | contender | first call s | ms/call | vs eager | vs torch.compile | max diff |\n|---|---|---|---|---|---|---|---|")
    for row in rows:
        base = {r["contender"]: r.get("ms") for r in rows if r["model"] == row["model"] and r["mode"] == row["mode"]}
        ms = row.get("ms")
        ratio = lambda other: f"{ms / other:.2f}x" if ms and other else "-"
        print(f"| {row['model']} | {row['mode']} | {row['contender']} | {row.get('first_call_s', '-')} | {ms if ms else row.get('error', '-')[:60]} "
              f"| {ratio(base.get('eager'))} | {ratio(base.get('torch.compile'))} | {row.get('max_diff', '-')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
