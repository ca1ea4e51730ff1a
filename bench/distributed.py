"""Distributed training steps of the demo GPT: eager vs squall under DDP and FSDP2, 2 gloo processes.

    python bench/distributed.py [--rounds 5] [--steps 4] [--batch 4] [--bucket-mb 1] [--wrappers ddp fsdp2]

Each process runs one thread; eager and squall models live side by side and are timed
alternately, best of `rounds`, so machine load hits both alike. A step is forward, loss,
backward (with the gradient reduction) and an SGD step. Printed, from rank 0:

- the step time of eager and of squall (`SQUALL_EXECUTORS` picks squall's executors; the
  defaults are every installed executor), and their ratio;
- how much of the gradient communication the backward hides. `comm` is the time the
  gradient reduction takes alone (every DDP bucket all-reduced, or every FSDP2 gradient
  reduce-scattered, by itself), `exposed` the communication a step waits for: under DDP,
  the time `loss.backward()` still runs after the last parameter gradient was computed
  (post-accumulate-grad hooks), the smallest over the steps; under FSDP2, the step minus
  the same step without gradient sync (`set_requires_gradient_sync(False)`), a noisier
  difference of two step times. hidden = 1 - exposed / comm; `no sync` is the step time
  without gradient communication (DDP's `no_sync()`). A compiled module is one autograd node, so its parameter
  gradients all appear when its backward ends and DDP starts reducing only then: squall's
  hidden fraction is what is left after that (see "Overlap" below).

How the design scales to many nodes, on paper:

- Per rank: every process compiles its own copy of each program, once, at its first
  call with a new input signature; the cache is per process and keyed on shapes, dtypes,
  devices, requires_grad and grad mode, so the ranks of a data-parallel job (same shapes)
  each compile exactly once and never again; compile time does not grow with the number
  of ranks. Nothing compiled is shared or sent between ranks.
- Per step, DDP communicates one all-reduce of every gradient bucket (2 * P * (n-1)/n
  bytes per rank on a ring, P = parameter bytes), exactly what it does for eager: squall
  changes what runs between the collectives, not the collectives. FSDP2 communicates, per
  sharded block, an all-gather of its parameters in the forward (and again in the
  backward, with resharding after forward) and a reduce-scatter of its gradients, each
  P_block * (n-1)/n bytes per rank; the compiled block only ever sees the unsharded
  parameters that FSDP2's hooks put in its parameter slots, so the compiled program is
  the same on every rank and for every world size.
- What is cached: the traced, planned and generated forward and backward of each
  compiled module (per process, in memory), the per-signature fusion regions and
  kernels of fusion executors (inductor keeps its own on-disk cache, shared by the ranks
  of one node). Collectives called inside a compiled program are operations in its trace
  (`ltorch/collectives.py`) and compile like any other: the group is part of the program.
- Overlap: with one autograd node per compiled module, DDP's buckets are reduced after
  the module's backward ends. Per-block compilation (`squall.jit` on each transformer
  block, as FSDP2 does) restores overlap at block granularity: block k's gradients are
  reduced while block k-1's backward runs. Overlap inside one compiled module needs its
  backward split into segments that return parameter gradients as separate autograd
  nodes (or the bucket all-reduces issued from inside the backward trace, which the
  collective operations make possible); neither is done yet.
"""
from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
from contextlib import nullcontext

os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="bench-squall-"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import squall  # noqa: E402
from squall.tools.demo import GPT, GPTConfig  # noqa: E402


CONTENDERS = {"ddp": ("eager", "squall", "squall/block"), "fsdp2": ("eager", "squall")}


def build(wrapper: str, contender: str, bucket_mb: float) -> torch.nn.Module:
    """The demo GPT under `wrapper`: eager, compiled whole (DDP) or per block (FSDP2, and
    DDP's "squall/block", which gives each block's backward an autograd node of its own)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig())
    blocks = model.transformer.h
    if wrapper == "ddp":
        if contender == "squall/block":
            for i, block in enumerate(blocks):
                blocks[i] = squall.jit(block)
        return DDP(squall.jit(model) if contender == "squall" else model, bucket_cap_mb=bucket_mb)
    for i, block in enumerate(blocks):
        blocks[i] = fully_shard(squall.jit(block) if contender == "squall" else block)
    fully_shard(model)
    return model


def no_sync(model: torch.nn.Module, wrapper: str):
    """A context in which a step skips the gradient reduction."""
    if wrapper == "ddp":
        return model.no_sync()
    model.set_requires_gradient_sync(False)
    return _restoring_sync(model)


class _restoring_sync:
    def __init__(self, model):
        self.model = model

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.model.set_requires_gradient_sync(True)


class GradientTimes:
    """When each step's last parameter gradient was computed (post-accumulate-grad hooks on
    the parameters DDP reduces), to tell backward compute from the wait for communication."""

    def __init__(self, model: torch.nn.Module):
        self.last = 0.0
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(self._note)

    def _note(self, _):
        self.last = time.perf_counter()


def step_time(model, opt, batches, sync: bool, wrapper: str, grads: GradientTimes | None = None) -> tuple[float, float]:
    """Per-step time (slowest rank) and, with `grads`, the time a step's backward spent after its
    last gradient was computed: the communication it did not hide (the smallest over the steps)."""
    dist.barrier()
    start = time.perf_counter()
    waited = float("inf")
    for idx, targets in batches:
        with nullcontext() if sync else no_sync(model, wrapper):
            _, loss = model(idx, targets)
            loss.backward()
            if grads is not None:
                waited = min(waited, time.perf_counter() - grads.last)
        opt.step()
        opt.zero_grad()
    elapsed = torch.tensor([(time.perf_counter() - start) / len(batches), waited])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # a step takes as long as its slowest rank
    return elapsed[0].item(), elapsed[1].item()


def comm_time(model: torch.nn.Module, wrapper: str, rounds: int) -> float:
    """The gradient reduction alone: DDP's buckets all-reduced one after another, or (FSDP2)
    every block's gradients reduce-scattered."""
    params = [p for p in model.parameters() if p.requires_grad]
    if wrapper == "ddp":
        # buckets of DDP's size (float32 gradients), holding every parameter's gradient
        total, per_bucket = sum(p.numel() for p in params), int(model.bucket_bytes_cap // 4)
        buffers = [torch.randn(min(per_bucket, total - start)) for start in range(0, total, per_bucket)]
    else:
        world = dist.get_world_size()
        buffers = [torch.randn(p.full_tensor().numel() if hasattr(p, "full_tensor") else p.numel() * world) for p in params]
    best = float("inf")
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        for b in buffers:
            if wrapper == "ddp":
                dist.all_reduce(b)
            else:
                out = torch.empty(b.numel() // dist.get_world_size())
                dist.reduce_scatter_single(out, b[: out.numel() * dist.get_world_size()])
        elapsed = torch.tensor(time.perf_counter() - start)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        best = min(best, elapsed.item())
    return best


def bench(wrapper: str, args, rank: int) -> dict:
    cfg = GPTConfig()
    data = torch.Generator().manual_seed(rank)
    batches = [
        (torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size), generator=data),
         torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size), generator=data))
        for _ in range(args.steps)
    ]  # fmt: skip
    models = {name: build(wrapper, name, args.bucket_mb) for name in CONTENDERS[wrapper]}
    opts = {name: torch.optim.SGD(m.parameters(), lr=1e-3) for name, m in models.items()}
    grads = {name: GradientTimes(m) for name, m in models.items()} if wrapper == "ddp" else {}
    first = {}
    for name, m in models.items():  # warm up: compile, DDP's bucket rebuild
        start = time.perf_counter()
        step_time(m, opts[name], batches[:1], True, wrapper)
        first[name] = time.perf_counter() - start
        step_time(m, opts[name], batches[:2], True, wrapper)
    best = {(name, sync): float("inf") for name in models for sync in (True, False)}
    waited = {name: float("inf") for name in models}
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for name in order:
            for sync in (True, False):
                step, wait = step_time(models[name], opts[name], batches, sync, wrapper, grads.get(name) if sync else None)
                best[name, sync] = min(best[name, sync], step)
                waited[name] = min(waited[name], wait)
    comm = comm_time(models["eager"], wrapper, args.rounds)
    out = {"first": first, "comm": comm}
    for name in models:
        # DDP: the wait after the last gradient, measured in the step; FSDP2: the step with
        # gradient sync minus the step without (noisier: a difference of two step times)
        exposed = waited[name] if wrapper == "ddp" else max(0.0, best[name, True] - best[name, False])
        out[name] = {"step": best[name, True], "compute": best[name, False], "exposed": exposed, "hidden": min(1.0, max(0.0, 1 - exposed / comm))}
    return out


def run(rank: int, world_size: int, port: int, args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        for wrapper in args.wrappers:
            result = bench(wrapper, args, rank)
            if rank != 0:
                continue
            e = result["eager"]
            print(f"\n{wrapper.upper()}, demo GPT, batch {args.batch}, {world_size} gloo processes, 1 thread each "
                  f"(best of {args.rounds} rounds of {args.steps} steps; first step: eager {result['first']['eager']:.2f}s, "
                  f"squall {result['first']['squall']:.2f}s with compilation)")
            print(f"{'':12} {'step':>9} {'no sync':>9} {'exposed':>9} {'hidden':>7}")
            for name in CONTENDERS[wrapper]:
                r = result[name]
                print(f"{name:12} {r['step'] * 1e3:>7.1f}ms {r['compute'] * 1e3:>7.1f}ms {r['exposed'] * 1e3:>7.1f}ms {r['hidden']:>6.0%}")
            print(f"gradient communication alone: {result['comm'] * 1e3:.1f}ms; step time vs eager: "
                  + ", ".join(f"{name} {result[name]['step'] / e['step']:.2f}x" for name in CONTENDERS[wrapper][1:]))
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--bucket-mb", type=float, default=1.0, help="DDP's bucket size: small buckets give overlap a chance")
    parser.add_argument("--wrappers", nargs="+", choices=["ddp", "fsdp2"], default=["ddp", "fsdp2"])
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(run, args=(2, port, args), nprocs=2)


if __name__ == "__main__":
    main()
