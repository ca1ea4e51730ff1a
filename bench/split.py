"""Per-call time of a module that splits (squall.runtime.split) next to eager, and next to the fallback
it replaces (the whole signature running the original module eagerly), in one process.

The model: a LLaMA (transformers, random weights) under a wrapper that trims the trailing
columns that are padding in every row before calling it — `int(mask.sum(-1).max())`, a
length read from the mask that changes from call to call, so the wrapper's guard site
thrashes and the wrapper splits: its own forward runs eagerly, the LLaMA and the head run
compiled (once per length). Calls cycle through LENGTHS, each compiled before timing.

Run: python bench/split.py [--executors torch] [--calls N] [--rounds R] [--threads T] [--layers L] [--hidden H]
Prints each contender's best per-call time over R rounds (contenders measured in turn within
each round, so load on the machine falls on all alike) and its ratio to eager.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
from torch import nn

import squall

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from real_models import import_torchvision  # noqa: E402

LENGTHS = (40, 48, 56, 64, 36, 60)


class TrimmedEncoder(nn.Module):
    """Drops the trailing columns that are padding in every row, then classifies from the first token."""

    def __init__(self, model: nn.Module, hidden: int):
        super().__init__()
        self.model = model
        self.head = nn.Linear(hidden, 2)

    def forward(self, input_ids, attention_mask):
        longest = int(attention_mask.sum(-1).max())
        out = self.model(input_ids=input_ids[:, :longest], attention_mask=attention_mask[:, :longest], use_cache=False)
        return self.head(out.last_hidden_state[:, 0])


def build(layers: int, hidden: int) -> TrimmedEncoder:
    import_torchvision()
    import transformers

    config = transformers.LlamaConfig(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=hidden * 3,
                                      num_attention_heads=hidden // 64, num_key_value_heads=hidden // 64, vocab_size=1000)
    return TrimmedEncoder(transformers.LlamaModel(config).eval(), hidden).eval()


def calls_for(batch: int = 4, width: int = 64) -> list[tuple[torch.Tensor, torch.Tensor]]:
    ids = torch.randint(0, 1000, (batch, width))
    out = []
    for n in LENGTHS:
        mask = torch.zeros(batch, width, dtype=torch.long)
        mask[:, : n // 2] = 1
        mask[0, :n] = 1  # the longest row: n real tokens
        out.append((ids, mask))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executors", default=None, help="comma-separated executor list (default: the configured one)")
    parser.add_argument("--calls", type=int, default=len(LENGTHS), help="calls per timed block (one cycle of lengths)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (one: less sensitive to a loaded machine)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    torch.manual_seed(0)
    model = build(opts.layers, opts.hidden)
    executors = opts.executors.split(",") if opts.executors else None
    split = squall.jit(model, executors=executors, wait=True)
    whole_eager = squall.jit(model, executors=executors, wait=True)
    inputs = calls_for()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in inputs * 2:  # compile: the wrapper splits, then the LLaMA once per length
            split(*args)
            whole_eager(*args)
    state = split._jitted.cache_info()
    assert state.split is not None, "the wrapper did not split"
    # the fallback the split replaces: the signature's variants run the original module eagerly
    (variants,) = [entry[0] for entry in whole_eager._jitted._cache.values()]
    variants.eager = lambda params, *a, **k: model(*a, **k)
    contenders = {"eager": model, "squall split": split, "whole-signature eager fallback": whole_eager}
    best = dict.fromkeys(contenders, float("inf"))
    with torch.no_grad():
        for _ in range(opts.rounds):
            for name, fn in contenders.items():
                start = time.perf_counter()
                for i in range(opts.calls):
                    fn(*inputs[i % len(inputs)])
                best[name] = min(best[name], (time.perf_counter() - start) / opts.calls)
    print(f"LLaMA {opts.layers} layers, hidden {opts.hidden}, batch 4, lengths {LENGTHS}; executors "
          f"{[ex.name for ex in split._jitted.executors]}; {torch.get_num_threads()} threads")
    print(state.split)
    for name, t in best.items():
        print(f"{name:32s} {t * 1e3:8.3f} ms/call   {t / best['eager']:.3f}x eager")


if __name__ == "__main__":
    main()
