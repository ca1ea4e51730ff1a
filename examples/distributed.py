"""Train the demo GPT on 2 processes with DDP and with FSDP2, eager and squall side by side.

    python examples/distributed.py [--steps 5] [--wrappers ddp fsdp2]
    torchrun --nproc-per-node 2 examples/distributed.py       # the same, started by torchrun

CPU and gloo by default (NCCL on CUDA where every rank has a GPU: `--device cuda`). Each rank
draws its own batches; the loss printed is the mean over ranks. How squall is wrapped:

- DDP:   `DDP(squall.jit(model))` — the whole model compiled, DDP around it.
- FSDP2: `fully_shard(squall.jit(block))` for each transformer block, then `fully_shard(model)`;
         FSDP2's hooks unshard each block's parameters eagerly around its compiled forward.
"""
from __future__ import annotations

import argparse
import os
import socket

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import squall
from squall.tools.demo import GPT, GPTConfig

CONFIG = GPTConfig(vocab_size=1024, block_size=64, n_layer=2, n_head=4, n_embd=64)


def build(wrapper: str, compiled: bool, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)  # the same initial model on every rank, for eager and squall
    model = GPT(CONFIG).to(device)
    if wrapper == "ddp":
        return DDP(squall.jit(model) if compiled else model)
    blocks = model.transformer.h
    for i, block in enumerate(blocks):
        blocks[i] = fully_shard(squall.jit(block) if compiled else block)
    fully_shard(model)
    return model


def train(model: torch.nn.Module, steps: int, rank: int, device: torch.device) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, CONFIG.vocab_size, (4, CONFIG.block_size), generator=data).to(device)
        targets = torch.randint(0, CONFIG.vocab_size, (4, CONFIG.block_size), generator=data).to(device)
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / dist.get_world_size())
    return losses


def run(rank: int, world_size: int, args: argparse.Namespace) -> None:
    device = torch.device(args.device, rank % torch.cuda.device_count()) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", rank=rank, world_size=world_size)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    try:
        for wrapper in args.wrappers:
            eager = train(build(wrapper, False, device), args.steps, rank, device)
            compiled = train(build(wrapper, True, device), args.steps, rank, device)
            if rank == 0:
                print(f"\n{wrapper.upper()} on {world_size} processes ({args.device}): loss per step, mean over ranks")
                print(f"{'step':>4}  {'eager':>10}  {'squall':>10}  {'difference':>10}")
                for step, (e, s) in enumerate(zip(eager, compiled)):
                    print(f"{step:>4}  {e:>10.6f}  {s:>10.6f}  {abs(e - s):>10.2e}")
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, world_size: int, port: int, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run(rank, world_size, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--wrappers", nargs="+", choices=["ddp", "fsdp2"], default=["ddp", "fsdp2"])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--nproc", type=int, default=2, help="processes to spawn (without torchrun)")
    args = parser.parse_args()
    if "RANK" in os.environ:  # started by torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_spawned, args=(args.nproc, port, args), nprocs=args.nproc)


if __name__ == "__main__":
    main()
