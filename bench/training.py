"""Training-step benchmark on CPU: eager, torch.compile, squall (torch only), squall (installed defaults).

    python bench/training.py [--rounds R] [--only mlp gpt_block ...] [--skip-compile]

One thread, all contenders side by side in one process. For each workload a step is
forward + loss + backward (gradients are zeroed between steps, not applied, so every
step sees the same parameters). Printed per contender: the first step (compile and run),
the best per-step time over R rounds and its ratio to eager, the bytes of tensors saved
for the backward (summed by a saved-tensors hook: what a step keeps alive between
forward and backward, eager and compiled alike), and, for squall, whether squall's own
gradient transform ran ("squall") or it fell back to PyTorch's autograd ("autograd").
"""
from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
import warnings

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-inductor-"))
os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="bench-squall-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import squall  # noqa: E402
from squall.demo import Block, GPTConfig  # noqa: E402


class MLP(nn.Module):
    def __init__(self, d: int = 512, hidden: int = 2048):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x, target):
        return F.mse_loss(self.fc2(F.gelu(self.fc1(x))), target)


class BlockWithLoss(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.block = Block(cfg)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, x, target):
        logits = self.head(self.block(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))


class CrossEntropy(nn.Module):
    def __init__(self, rows: int = 4096, classes: int = 8192):
        super().__init__()
        self.logits = nn.Parameter(torch.randn(rows, classes) * 0.1)

    def forward(self, target):
        return F.cross_entropy(self.logits, target)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x, target):
        return F.cross_entropy(self.head(self.body(x).flatten(1)), target)


def workloads() -> dict:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=8192, block_size=128, n_layer=1, n_head=4, n_embd=256)
    return {
        "mlp": (MLP(), (torch.randn(256, 512), torch.randn(256, 512))),
        "gpt_block": (BlockWithLoss(cfg), (torch.randn(4, 128, 256), torch.randint(0, 8192, (4, 128)))),
        "cross_entropy": (CrossEntropy(), (torch.randint(0, 8192, (4096,)),)),
        "cnn": (SmallCNN().train(), (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))),
    }


def contenders(model: nn.Module) -> dict:
    return {
        "eager": model,
        "torch.compile": torch.compile(copy.deepcopy(model)),
        "squall (torch only)": squall.jit(copy.deepcopy(model), executors=["torch"]),
        "squall (defaults)": squall.jit(copy.deepcopy(model)),
    }


def step(model, args) -> None:
    for p in model.parameters():
        p.grad = None
    model(*args).backward()


def saved_bytes(model, args) -> int:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(*args)
    loss.backward()
    return total


def per_step_seconds(model, args, rounds: int, budget_s: float = 0.5) -> float:
    start, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - start < budget_s / 4:
        step(model, args)
        n += 1
    number = max(1, int(n * budget_s / (time.perf_counter() - start) / 4))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            step(model, args)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def how_differentiated(model) -> str:
    state = getattr(model, "_jitted", None)
    if state is None or state.last_entry is None:
        return ""
    return "squall" if state.last_entry.compilation.backward is not None else "autograd"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="workloads to run (default: all)")
    parser.add_argument("--skip-compile", action="store_true", help="leave out torch.compile (it takes seconds per workload)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"training step (forward + backward), one thread, torch {torch.__version__}")
    for key, (model, inputs) in workloads().items():
        if args.only and key not in args.only:
            continue
        print(f"\n{key}")
        print(f"  {'contender':24}{'first step':>12}{'per step':>12}{'vs eager':>10}{'saved MB':>10}  gradients")
        eager_s = None
        for label, fn in contenders(model).items():
            if args.skip_compile and label == "torch.compile":
                continue
            start = time.perf_counter()
            step(fn, inputs)
            first = time.perf_counter() - start
            seconds = per_step_seconds(fn, inputs, args.rounds)
            eager_s = eager_s or seconds
            saved = saved_bytes(fn, inputs) / 2**20
            print(f"  {label:24}{first * 1e3:10.1f}ms{seconds * 1e3:10.3f}ms{seconds / eager_s:9.2f}x{saved:10.1f}  {how_differentiated(fn)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
