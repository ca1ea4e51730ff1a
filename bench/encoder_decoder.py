"""`generate` on transformers encoder-decoders (T5, BART; tiny configs, random weights): eager vs
squall.jit vs squall.jit with the cache-of-one-token step compiled at once, in one process.

Run: python bench/encoder_decoder.py [--models t5,bart] [--tokens 16] [--prompts 6] [--rounds 3]

An encoder-decoder's decoding step takes three signatures in a `generate`: an empty cache, a
cache one token long (sizes 1 stay constants), two tokens or more (symbolic). The step of one
token comes once per `generate`; squall runs it eagerly until its eager calls have cost as much
CPU time as a compile (squall.runtime.ski_rental), so a `generate` compiles twice. The
"at once" contender compiles it at once (three compiles), as squall did before.

For each model and contender, per round (contenders taking turns, each with a fresh
`squall.jit`): the first `generate`'s wall and CPU time (compiles included), then the compiles
of each of --prompts prompts of new lengths and their total wall time; tokens are compared
with eager's. One CPU thread; the machine's load falls on all contenders alike: read the ratios.

Measured (2 shared cores, load 4.5-7, best of 5, 16 tokens): T5 and BART compile [2,0,0,0,0,0]
(at once: [3,0,0,0,0,0]), tokens equal eager's. First generate's CPU time: T5 0.076 s against
0.108 s at once (0.70x), BART 0.077 s against 0.096 s (0.80x); the later prompts' CPU time is the
same either way (T5 1.12x / 1.11x eager's, BART 1.36x / 1.38x): the one-token step runs eagerly
once per generate, where the compiled one ran on the tiny models no faster.
2026-11-26 (load 1-3, best of 3): each rejected call explained its failed check by compiling
481-504 guard conditions from their text (3-15 ms per switch between the decoding step's two
variants, three switches per generate); compiled once now (squall.guard_set). With a KV cache
of one token traced as a size symbol at 1 (gen1), "at once" compiles twice too. Later prompts,
CPU time against eager's: T5 1.16x -> 0.89x, BART 1.21x -> 0.94x (wall 0.91x and 1.07x).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch

import squall
from squall.runtime.jit import jitted_state

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import tiny_encoder_decoder  # noqa: E402


def contender(model: torch.nn.Module, how: str):
    """What `generate` is called on: the model itself, or a fresh squall.jit of it."""
    if how == "eager":
        return model
    jitted = squall.jit(model)
    if how == "squall, one-token step at once":
        jitted_state(jitted)._dims.zero_one_eagerly = False
    return jitted


def run(target, prompts: list[torch.Tensor], tokens: int, expected: list[torch.Tensor]) -> tuple[float, float, list[int], float, float, bool]:
    """(first generate's wall s, its CPU s, compiles per prompt, the later prompts' wall s and CPU s, tokens equal)."""
    options = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    info = getattr(target, "cache_info", None)
    compiles, equal, first_wall, first_cpu, rest, rest_cpu = [], True, 0.0, 0.0, 0.0, 0.0
    for i, prompt in enumerate(prompts):
        before = info().misses if info else 0
        wall, cpu = time.perf_counter(), time.thread_time()
        with torch.no_grad():
            out = target.generate(prompt, attention_mask=torch.ones_like(prompt), **options)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        if i == 0:
            first_wall, first_cpu = wall, cpu
        else:
            rest, rest_cpu = rest + wall, rest_cpu + cpu
        compiles.append(info().misses - before if info else 0)
        equal = equal and torch.equal(out, expected[i])
    return first_wall, first_cpu, compiles, rest, rest_cpu, equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="t5,bart")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # each round's jits start afresh, as a first run does (what earlier jits of the same code
    # learned is remembered by default: squall.runtime.dims_profile)
    os.environ.setdefault("SQUALL_REMEMBER_DYNAMIC", "0")
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    contenders = ["eager", "squall", "squall, one-token step at once"]
    for name in args.models.split(","):
        model = tiny_encoder_decoder(name)
        gen = torch.Generator().manual_seed(1)
        prompts = [torch.randint(3, 97, (1, int(n)), generator=gen) for n in torch.randint(5, 30, (args.prompts,), generator=gen)]
        with torch.no_grad():
            options = dict(max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False)
            expected = [model.generate(p, attention_mask=torch.ones_like(p), **options) for p in prompts]
        results: dict[str, list] = {c: [] for c in contenders}
        for _ in range(args.rounds):
            for how in contenders:
                results[how].append(run(contender(model, how), prompts, args.tokens, expected))
        eager_first = min(r[0] for r in results["eager"])
        eager_rest = min(r[3] for r in results["eager"])
        eager_rest_cpu = min(r[4] for r in results["eager"])
        print(f"{name}: {args.prompts} prompts of lengths {[p.shape[1] for p in prompts]}, {args.tokens} tokens, best of {args.rounds}")
        for how in contenders:
            rows = results[how]
            first, first_cpu = min(r[0] for r in rows), min(r[1] for r in rows)
            rest, rest_cpu = min(r[3] for r in rows), min(r[4] for r in rows)
            print(f"  {how:32s} first generate {first:.3f} s ({first / eager_first:.1f}x eager; CPU {first_cpu:.3f} s)  "
                  f"later prompts {rest:.3f} s ({rest / eager_rest:.2f}x eager; CPU {rest_cpu / eager_rest_cpu:.2f}x)  "
                  f"compiles {rows[0][2]}  tokens equal: {all(r[5] for r in rows)}")


if __name__ == "__main__":
    main()
