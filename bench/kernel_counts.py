"""Aten op calls per training step, eager against squall's torch plan, op by op.

    python bench/kernel_counts.py [--only resnet50 resnet llama gpt2 ...] [--all-ops]

On a GPU a training step is bound by its kernels and their launches; on a CPU the number
of aten ops a step calls, counted by a TorchDispatchMode (below autograd, so what runs:
`linear` counts as its `addmm`), stands for them, and does not depend on the input's size.
A step is forward + loss + backward as in bench/training.py (its workloads, plus timm's
resnet50 at 2 images of 64x64 and a tiny transformers GPT-2). Printed per workload: the
total calls that launch kernels (views and metadata ops left out, see tests/kernel_calls.py's `LAUNCHES_NOTHING`)
for eager and for squall (`executors=["torch"]`), then each op whose count differs.
--dtype bfloat16 runs the models and inputs in bfloat16.

Measured 2026-11-27 (CPU, torch 2.13), bfloat16: llama 363 calls against eager's 276 (`_to_copy`
109 against 26: squall computes bfloat16 arithmetic in float32 and its derivatives converted there
and back between ops), gpt2 264 against 211. After the conversions back to a widened value's dtype
were removed and ops between conversions ran narrow (squall.compiler.passes): llama 280, gpt2 217;
float32 unchanged (llama 255 against 251, resnet50 408 against 408, gpt2 179 against 191).
Again 2026-11-27 (load 5), with a round trip the backward returns removed: bfloat16 gpt2 217 and
llama 280, unchanged. Of gpt2's 16 extra `_to_copy`, none is an add of a number (a bfloat16 add
with 1.0 would give the same bits narrow, but squall's forward runs those adds whole, unconverted):
12 are its two gelu_new's backwards (tanh's derivative recomputes tanh in float32
from the saved input, 3 conversions, where eager's tanh_backward reads the bfloat16 output; pow's
derivative computes in float32, 3 more): matching eager there takes derivatives computed on the bfloat16
values eager's kernels read, not a conversion pass, and changes squall's gradients to eager's bits.
"""
from __future__ import annotations

import argparse
import collections
import copy
import importlib.util
import os
import sys
import warnings

import torch
from torch import nn

import squall

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import ImageClassifierLoss, step, workloads  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from kernel_calls import AtenCalls, launching  # noqa: E402

def calls_per_step(model, args) -> collections.Counter:
    step(model, args)  # compile (squall) and warm up outside the count
    step(model, args)
    with AtenCalls() as counter:
        step(model, args)
    return counter.calls


class GPT2Loss(nn.Module):
    """A tiny transformers GPT-2 (random weights) returning the loss of its labels."""

    def __init__(self):
        super().__init__()
        import transformers

        config = transformers.GPT2Config(vocab_size=1024, n_embd=64, n_layer=2, n_head=4, n_positions=128)
        self.lm = transformers.GPT2LMHeadModel(config).train()

    def forward(self, ids, labels):
        return self.lm(input_ids=ids, labels=labels).loss


class ResNet50Loss(ImageClassifierLoss):
    """timm's resnet50 (random weights, batch norms in training mode) returning the cross-entropy of its labels."""

    def __init__(self):
        super().__init__()
        import timm

        self.net = timm.create_model("resnet50", pretrained=False, num_classes=10).train()


def all_workloads() -> dict:
    found = workloads()
    torch.manual_seed(0)
    if importlib.util.find_spec("timm"):
        found["resnet50"] = (ResNet50Loss(), (torch.randn(2, 3, 64, 64), torch.randint(0, 10, (2,))))
    if importlib.util.find_spec("transformers"):
        found["gpt2"] = (GPT2Loss().train(), (torch.randint(0, 1024, (4, 64)), torch.randint(0, 1024, (4, 64))))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["resnet50", "resnet", "llama", "gpt2"])
    parser.add_argument("--all-ops", action="store_true", help="count views and metadata ops too")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="the models' and inputs' floating dtype")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    for key, (model, inputs) in all_workloads().items():
        if key not in args.only:
            continue
        model = model.to(dtype)
        inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
        compiled = squall.jit(copy.deepcopy(model), executors=["torch"])
        eager, ours = calls_per_step(model, inputs), calls_per_step(compiled, inputs)
        if not args.all_ops:
            eager, ours = launching(eager), launching(ours)
        print(f"\n{key}: aten calls per step, eager {sum(eager.values())}, squall (torch only) {sum(ours.values())}")
        for name in sorted(set(eager) | set(ours), key=lambda n: (ours[n] - eager[n], n)):
            if eager[name] != ours[name]:
                print(f"    {name:40}{eager[name]:6}{ours[name]:6}{ours[name] - eager[name]:+6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
