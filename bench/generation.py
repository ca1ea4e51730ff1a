"""`generate` on transformers decoders (tiny configs, random weights), and an encoder over a stream
of batches of random lengths: eager vs squall.jit (automatic dynamic shapes) vs
torch.compile(dynamic=True), in one process.

Run: python bench/generation.py [--models llama,gpt2,phi3] [--tokens 32] [--batches 40] [--no-torch-compile] [--device cuda]
                                [--prompts 12,12,20] [--no-stream]
(`--prompts 1,1,20`: a one-token prompt twice, then one of 20 tokens.)

For each decoder family and contender: the first `generate`'s wall time (compiles included),
the steady tokens/s of a second prompt of the same length and of a third of another length
(best of --rounds, contenders taking turns in each round, after squall's background upgrade
has finished: its time to fused speed is printed with `squall.upgrades`), the compiles each
prompt's first `generate` cost, and whether the tokens equal eager's.
Then the length stream: an encoder (DistilBERT) over --batches batches of random lengths 8-128
and batch sizes 1/4/8: compiles and total time. One CPU thread; the load on the machine falls on
all contenders alike, so read the ratios.

Measured (2 shared cores, load 10-12: rough; 32 tokens, best of 4 with contenders taking turns,
after squall's background upgrade): every family compiles twice in its first `generate` and
nothing later, a new prompt length included (2/0/0); tokens equal eager's. First `generate`
0.34-0.56 s (torch.compile 15-33 s). Steady tokens/s against eager (same / new prompt length):
llama squall 2.16x / 2.02x, torch.compile(dynamic=True) 1.64x / 1.65x; gpt2 1.75x / 1.54x against
1.43x / 1.06x; phi3 1.70x / 2.45x against 0.51x / 0.87x (it hits its recompile limit). squall's
upgrade (each decoding step one inductor region, compiled in its worker process) took 86-192 s.
Again after the session of 2026-11-26, load 1-2, best of 2: gpt2 squall 1.60x / 1.64x eager
(torch.compile(dynamic=True) 1.40x / 1.37x), llama 1.82x / 1.84x (1.58x / 1.61x); 2/0/0 compiles,
tokens equal, first generate 0.08-0.09 s (torch.compile 4.7 / 10.9 s), fused after 20-23 s.
One decoding step, cache kept (timed then on squall's torch plan: that entry's upgrade was not waited for):
squall 1.76-2.52x eager, torch.compile 0.71-3.00x. The DistilBERT
stream: 3 compiles, 1.44 s (eager 0.68 s, torch.compile 20.4 s).
A one-token prompt (`--prompts 1,1,20`, branch gen1 against main in one sitting, load 8-9.5: rough,
best of 3, two runs each): main compiled 3/0/1 (the prefill, a static first step with its cache one
token long, then a symbolic step), gen1 2/0/1 (the step's cache length a symbol traced at 1; the 1
for the third prompt is its prefill, the first one's being static); tokens equal. Same-length
tok/s against eager: gpt2 main 1.26x / 1.36x, gen1 1.81x / 1.39x; llama main 1.65x / 1.71x, gen1
1.94x / 2.55x. Prompts of 12 in the same sitting (no change expected): gpt2 main 1.63x / 1.70x,
gen1 1.51x / 2.13x; llama main 1.88x / 2.34x, gen1 2.09x / 1.87x.
After the third 2026-11-26 session's merges (gradients at kinks, NotModelled, cheaper compiles),
quiet (load 0.8-1.2), one run: llama squall 1.64x / 1.74x eager (torch.compile(dynamic=True)
1.37x / 1.43x), gpt2 1.67x / 1.64x (1.39x / 1.38x), phi3 1.83x / 1.87x (0.83x / 0.79x); 2/0/0
compiles and tokens equal on all three; first generate 0.12-0.17 s (torch.compile 16-30 s); fused
after 31-80 s. One decoding step, cache kept: squall 3.25x / 4.42x / 6.27x eager, torch.compile
1.50x / 3.43x / 1.25x. The DistilBERT stream: 2 compiles, 0.12 s (eager 0.09 s, torch.compile 13.5 s).
The judge settled (2026-11-28, b2e30e2). A one-token prompt (`--prompts 1,1,20 --no-torch-compile`,
load 0.9-1.3) judged llama's decoding step at its traced call, a cache one token long, which the
symbolic regions' kernels do not take: it compared and timed the regions' torch calls, which ran
while their compilation for that size was under way, found large regions slower than the torch
plan (1.91 ms against 1.35) and kept islands (0.99 ms); the verdict was remembered on disk, so
every later run of that step, at any prompt length, ran islands (one decoding step 3.02x eager
against torch.compile's 4.87x, load 3-4). Now the judge waits for that compilation
(FusionExecutor.settle): large regions 0.43 ms against the torch plan's 1.10 ms, kept. Then the
full run (--no-stream, load 3.1-3.4 from another job beside it: eager's own rates swing 20-40%
between prompts, so read ratios loosely): llama squall 1.81x / 1.74x eager, torch.compile(dynamic=True)
1.54x / 1.60x, one decoding step 13.0x against 8.95x; gpt2 1.52x / 1.47x against 1.60x / 1.34x;
phi3 3.15x / 1.71x against 0.74x / 0.78x (it hits its recompile limit), one step 2.04x against
0.23x; 2/0/0 compiles and tokens equal on all three; first generate 0.23-0.34 s (torch.compile
13.7-22.7 s).
Symbolic regions as one C++ unit (2026-11-28, 6dbb0a3; --no-stream, best of 2, load 0.3-1.5, fresh
squall and inductor cache folders): a symbolic region with matmuls took inductor's Python wrapper,
one compiler run per kernel, so llama's decoding step (about 25 kernels) took 51 s of worker CPU
and its time to fused speed was 114-121 s (three runs before the change, --no-torch-compile); now
it compiles as one unit, as static regions do (12.2-12.6 s). Fused after: llama 35.0 s (its
worker's start and imports, 7.5 s, included) against torch.compile(dynamic=True)'s first generate
51.6 s (0.68); gpt2 16.0 against 37.2 s (0.43), phi3 15.2 against 26.9 s (0.57), each with the
worker llama started. Steady tokens/s against eager (same / new prompt length): llama squall
2.58x / 2.05x (before the change, the same day: 2.12x / 2.02x), torch.compile 2.37x / 1.67x;
gpt2 1.86x / 1.99x against 1.53x / 1.18x; phi3 2.28x / 2.23x against 0.72x / 0.81x (its recompile
limit). One decoding step, cache kept: squall 6.25x / 2.50x / 5.20x eager, torch.compile 3.58x /
1.93x / 0.82x. The large regions ran in 0.24-0.37x the torch plan's time (llama's 0.42-0.48x
before). 2/0/0 compiles, tokens equal on all three.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
import warnings

import torch

import squall
from squall.runtime.jit import jitted_state

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import import_torchvision  # noqa: E402  (transformers imports torchvision, which needs it on CPU torch)

V = 97
DEVICE = torch.device("cpu")  # --device: where the models, prompts and batches live
GENERATE_OPTIONS: dict = {}  # --static-cache: transformers' static-cache recipe (cache_implementation="static")


def _synchronize() -> None:
    """Wait for the device's queued work, so a wall-clock time covers it (a no-op on CPU)."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()

# family -> (config class, model class, extra config): tiny, random weights, nothing downloaded
DECODERS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(num_key_value_heads=2)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_layer=2, n_head=2)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(num_key_value_heads=2)),
}


DECODER_SIZES = {"hidden": 32, "positions": 128}  # --hidden; positions: enough for the longest prompt and --tokens


def build_decoder(family: str) -> torch.nn.Module:
    import transformers

    config_name, model_name, extra = DECODERS[family]
    hidden = DECODER_SIZES["hidden"]
    common = dict(vocab_size=V, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=DECODER_SIZES["positions"])
    if family == "gpt2":
        common = dict(vocab_size=V, n_embd=hidden, n_positions=DECODER_SIZES["positions"])
    config = getattr(transformers, config_name)(**common, **extra)
    return getattr(transformers, model_name)(config).eval().to(DEVICE)


def _compiles(fn) -> int:
    if fn is None:
        return 0
    try:
        return jitted_state(fn).cache_info().misses
    except TypeError:
        return 0


def generate_once(model, forward_owner, prompt: torch.Tensor, tokens: int) -> tuple[torch.Tensor, float]:
    mask = torch.ones_like(prompt)
    _synchronize()
    start = time.perf_counter()
    out = forward_owner.generate(prompt, attention_mask=mask, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0,
                                 **GENERATE_OPTIONS)
    _synchronize()
    return out, time.perf_counter() - start


def bench_decoder(family: str, tokens: int, rounds: int, with_torch_compile: bool, lengths: tuple[int, int, int] = (12, 12, 20)) -> None:
    torch.manual_seed(0)
    model = build_decoder(family)
    contenders = {"eager": model, "squall": squall.jit(model)}
    if with_torch_compile:
        compiled = build_decoder(family)
        compiled.load_state_dict(model.state_dict())
        compiled.forward = torch.compile(compiled.forward, dynamic=True)
        contenders["torch.compile(dynamic=True)"] = compiled
    prompts = [torch.randint(1, V, (1, n), device=DEVICE) for n in lengths]
    expected = [generate_once(model, model, p, tokens)[0] for p in prompts]
    print(f"\n{family}: generate {tokens} tokens (prompt {lengths[0]}, again {lengths[1]}, then {lengths[2]}){' '.join(['', *map(str, GENERATE_OPTIONS.items())])}")
    print(f"  {'':30}{'first':>9}{'tok/s same len':>16}{'tok/s new len':>15}{'compiles':>16}{'tokens':>8}")
    jitted = contenders["squall"]
    firsts, equal, per_generate = {}, {}, []
    with torch.no_grad():
        for name, fn in contenders.items():
            before = _compiles(jitted)
            out, firsts[name] = generate_once(model, fn, prompts[0], tokens)
            equal[name] = torch.equal(out, expected[0])
            if name == "squall":
                per_generate.append(_compiles(jitted) - before)
                # squall's background upgrade (inductor regions, compiled in its worker process)
                # finishes before the steady state is measured: its time is time to fused speed
                start = time.perf_counter()
                squall.wait_for_upgrades(jitted)
                to_fused = time.perf_counter() - start + firsts[name]
        for i, p in enumerate(prompts[1:], start=1):  # each prompt's first generate: compiles counted
            for name, fn in contenders.items():
                before = _compiles(jitted)
                out, _ = generate_once(model, fn, p, tokens)
                equal[name] = equal[name] and torch.equal(out, expected[i])
                if name == "squall":
                    per_generate.append(_compiles(jitted) - before)
        # contenders take turns within each round, so a change of the machine's load falls on all alike
        best = {(name, i): float("inf") for name in contenders for i in (1, 2)}
        for _ in range(rounds):
            for i, p in enumerate(prompts[1:], start=1):
                for name, fn in contenders.items():
                    out, seconds = generate_once(model, fn, p, tokens)
                    best[name, i] = min(best[name, i], seconds)
                    equal[name] = equal[name] and torch.equal(out, expected[i])
    rows = {name: [tokens / best[name, 1], tokens / best[name, 2]] for name in contenders}
    for name, rates in rows.items():
        compiles = "/".join(map(str, per_generate)) if name == "squall" else "-"
        print(f"  {name:30}{firsts[name]:>8.2f}s{rates[0]:>16.0f}{rates[1]:>15.0f}{compiles:>16}{'equal' if equal[name] else 'DIFFER':>8}")
    print(f"  squall's fused speed after {to_fused:.1f} s: " + "; ".join(map(str, squall.upgrades(jitted))))
    eager = rows["eager"]
    for name, rates in rows.items():
        if name != "eager":
            print(f"  {name} vs eager: {rates[0] / eager[0]:.2f}x (same length), {rates[1] / eager[1]:.2f}x (new length)")
    if GENERATE_OPTIONS:
        return
    # the steady state of a decoding loop that keeps its cache (generate makes a new cache object
    # per call, which squall keys by identity): the median time of one step, all compiled
    steps = {name: decode_step_seconds(fn, tokens) for name, fn in contenders.items()}
    print("  one decoding step, cache kept: " + ", ".join(f"{name} {t * 1e3:.2f} ms" for name, t in steps.items())
          + "; " + ", ".join(f"{name} {steps['eager'] / t:.2f}x eager" for name, t in steps.items() if name != "eager"))


def decode_step_seconds(fn, steps: int) -> float:
    """The median time of one decoding step of `fn` (a model, or its compiled form) with one
    DynamicCache kept across steps, after two warm-up loops (and squall's background upgrade)."""
    times = []
    with torch.no_grad():
        for loop in range(3):
            ids = torch.randint(1, V, (1, 8 + loop), device=DEVICE)
            out = fn(input_ids=ids, use_cache=True)
            cache = out.past_key_values
            for _ in range(steps):
                token = out.logits[:, -1:].argmax(-1)
                _synchronize()
                start = time.perf_counter()
                out = fn(input_ids=token, past_key_values=cache, use_cache=True)
                _synchronize()
                if loop == 2:
                    times.append(time.perf_counter() - start)
            if loop == 0 and isinstance(fn, squall.JittedModule):
                squall.wait_for_upgrades(fn)  # the steady state is squall's fused plan
    return sorted(times)[len(times) // 2]


def bench_length_stream(batches: int, with_torch_compile: bool) -> None:
    import transformers

    torch.manual_seed(0)
    config = transformers.DistilBertConfig(vocab_size=V, dim=32, hidden_dim=64, n_layers=2, n_heads=2, max_position_embeddings=128)
    model = transformers.DistilBertModel(config).eval().to(DEVICE)
    rng = random.Random(0)
    stream = [(rng.choice([1, 4, 8]), rng.randint(8, 128)) for _ in range(batches)]
    inputs = [torch.randint(1, V, shape, device=DEVICE) for shape in stream]
    contenders = {"eager": model, "squall": squall.jit(model)}
    if with_torch_compile:
        contenders["torch.compile(dynamic=True)"] = torch.compile(model, dynamic=True)
    print(f"\nlength stream: DistilBERT over {batches} batches, batch 1/4/8, lengths 8-128")
    expected = None
    with torch.no_grad():
        expected = [model(input_ids=x).last_hidden_state for x in inputs]
        for name, fn in contenders.items():
            _synchronize()
            start = time.perf_counter()
            outs = [fn(input_ids=x).last_hidden_state for x in inputs]
            _synchronize()
            total = time.perf_counter() - start
            worst = max(float((a - e).abs().max()) for a, e in zip(outs, expected))
            compiles = _compiles(fn) if name == "squall" else "-"
            if name == "squall":
                squall.wait_for_upgrades(fn)
            print(f"  {name:30}{total:>8.2f}s total   compiles {compiles!s:>3}   max |diff| {worst:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama,gpt2,phi3")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--device", default="cpu", help="where models and inputs live (e.g. cuda)")
    parser.add_argument("--prompts", default="12,12,20", help="the three prompts' lengths (1,1,20: a one-token prompt)")
    parser.add_argument("--no-stream", action="store_true", help="skip the DistilBERT length stream")
    parser.add_argument("--static-cache", action="store_true", help='generate with cache_implementation="static" (a preallocated cache written in place)')
    parser.add_argument("--hidden", type=int, default=32, help="the decoders' hidden size (their caches grow with it)")
    opts = parser.parse_args()
    if opts.static_cache:
        GENERATE_OPTIONS["cache_implementation"] = "static"
    DECODER_SIZES["hidden"] = opts.hidden
    # each round's jits start afresh, as a first run does (what earlier jits of the same code
    # learned is remembered by default: squall.runtime.dims_profile)
    os.environ.setdefault("SQUALL_REMEMBER_DYNAMIC", "0")
    global DEVICE
    DEVICE = torch.device(opts.device)
    import_torchvision()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    lengths = tuple(int(n) for n in opts.prompts.split(","))
    if len(lengths) != 3 or min(lengths) < 1:
        parser.error(f"--prompts takes three lengths of 1 or more, got {opts.prompts!r}")
    DECODER_SIZES["positions"] = max(128, max(lengths) + opts.tokens)
    for family in opts.models.split(","):
        bench_decoder(family, opts.tokens, opts.rounds, not opts.no_torch_compile, lengths)
    if not opts.no_stream:
        bench_length_stream(opts.batches, not opts.no_torch_compile)


if __name__ == "__main__":
    main()
