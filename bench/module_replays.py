"""Compile time of layer stacks with and without replayed module calls (squall.frontend.module_replays).

Run: python bench/module_replays.py [--repeat 10] [--models demo-gpt,distilbert,gpt2,llama] [--torch-compile]

For each model (tiny widths, real depths: the demo GPT and gpt2 with 12 layers, DistilBERT with
6, llama with 8), a fresh `squall.jit` of it is called once under `torch.no_grad()` (the miss:
trace, plan, generate, the first run) with `$SQUALL_REPLAY_MODULES` on and off, taking turns
sample by sample so that load on a shared machine falls on both alike; the trace alone is timed
the same way. Times are `time.thread_time()` (the calling thread's CPU time), best and median
over --repeat samples, in ms; the ratio is replays on / off. Eager's call is printed beside
them, and with --torch-compile one first call of torch.compile (seconds: not repeated).
gpt2 and llama are called as a training loop or an encoder calls them (`use_cache=False`) and
as `generate`'s prompt step calls them (the default cache: each layer writes it at its own
index, so none is replayed: what the recording costs).

Measured (replay branch, 2026-11-26, 2-core machine shared with other sessions, load 5-6, 10
samples; trace ratio on/off best / median): gpt2-12 without cache 0.68 / 0.68 and 0.85 / 0.77
(compile 0.74-0.83 / 0.87-0.92), llama-8 without cache 0.83-0.85 / 0.76-0.87 (compile 0.86-0.88 /
0.84-0.90), demo GPT-12 0.84-0.85 / 0.88-0.98, DistilBERT-6 0.92-1.01 / 0.96-1.00; with the cache
(generate's prompt step) gpt2 0.98 / 0.90-0.92, llama 1.04-1.07 / 0.97-1.10 (noise around 1).
A replayed layer costs its guards made again (about 150 guard calls a gpt block: the guard set
must be the one a fresh trace makes), its calls copied and its places matched, about a third
to half of tracing it; its first replay in a trace also walks the first layer's record once.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch

import squall
from squall.frontend.module_replays import REPLAY_ENV
from squall.frontend.tracing import trace_program
from squall.tools.demo import GPT, GPTConfig

VOCAB = 128


def _transformers():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    import real_models  # noqa: PLC0415 - the tests' helper: torchvision's ops before transformers imports it

    real_models.import_torchvision()
    import transformers  # noqa: PLC0415 - optional

    return transformers


def models(names: list[str]) -> list[tuple[str, torch.nn.Module, dict]]:
    ids = torch.randint(0, VOCAB, (2, 16))
    made = []
    if "demo-gpt" in names:
        made.append(("demo-gpt-12", GPT(GPTConfig(vocab_size=VOCAB, block_size=64, n_layer=12, n_head=4, n_embd=64)).eval(), {"idx": ids}))
    if {"distilbert", "gpt2", "llama"} & set(names):
        tf = _transformers()
        if "distilbert" in names:
            config = tf.DistilBertConfig(vocab_size=VOCAB, dim=64, hidden_dim=128, n_layers=6, n_heads=4, max_position_embeddings=64)
            made.append(("distilbert-6", tf.DistilBertModel(config).eval(), {"input_ids": ids}))
        if "gpt2" in names:
            gpt2 = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=12, n_head=4, bos_token_id=0, eos_token_id=0)).eval()
            made.append(("gpt2-12 no cache", gpt2, {"input_ids": ids, "use_cache": False}))
            made.append(("gpt2-12 cache", gpt2, {"input_ids": ids}))
        if "llama" in names:
            config = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=8, num_attention_heads=4,
                                    num_key_value_heads=2, max_position_embeddings=64)
            llama = tf.LlamaForCausalLM(config).eval()
            made.append(("llama-8 no cache", llama, {"input_ids": ids, "use_cache": False}))
            made.append(("llama-8 cache", llama, {"input_ids": ids}))
    return made


def _timed(fn) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--models", default="demo-gpt,distilbert,gpt2,llama")
    parser.add_argument("--torch-compile", action="store_true", help="also one first call of torch.compile per model")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"load {os.getloadavg()[0]:.1f}; ms of thread CPU time, best / median of {args.repeat}; ratio: replays on / off")
    for name, model, kwargs in models(args.models.split(",")):
        samples: dict[tuple[str, bool], list[float]] = {}
        with torch.no_grad():
            eager = min(_timed(lambda: model(**kwargs)) for _ in range(3))
            for i in range(args.repeat):
                for replay in (True, False) if i % 2 else (False, True):
                    os.environ[REPLAY_ENV] = "1" if replay else "0"
                    samples.setdefault(("trace", replay), []).append(_timed(lambda: trace_program(model, (), kwargs, module=model)))
                    jitted = squall.jit(model)
                    samples.setdefault(("compile", replay), []).append(_timed(lambda: jitted(**kwargs)))
            os.environ.pop(REPLAY_ENV, None)
            for what in ("trace", "compile"):
                on, off = samples[(what, True)], samples[(what, False)]
                print(f"{name:17s} {what:8s} on {min(on) * 1e3:7.2f} / {statistics.median(on) * 1e3:7.2f}   off {min(off) * 1e3:7.2f} / "
                      f"{statistics.median(off) * 1e3:7.2f}   ratio {min(on) / min(off):.2f} / {statistics.median(on) / statistics.median(off):.2f}")
            line = f"{name:17s} eager call {eager * 1e3:.2f} ms"
            if args.torch_compile:
                compiled = torch.compile(model)
                line += f"; torch.compile first call {_timed(lambda: compiled(**kwargs)):.2f} s"
            print(line, flush=True)
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
