"""squall's own cost on a cached call, apart from the program: the key and the state check.

Run: python bench/check_cost.py [--calls N] [--rounds R] [mlp resnet coatnet llama]

For each model, after its compile and background upgrade, in one process on one thread, taking
turns within each round (best of R rounds of N calls, the thread's CPU time, so load on a shared
machine counts against none of them):

- eager: the original module; squall: the whole cached call;
- program: the compiled program alone, given the parameters it reads (no key, no check);
- squall's own: the whole cached call with the program swapped for a stub that returns its
  result (hooks looked for, key built and looked up, state check, writes replayed);
- check: the entry's generated state check alone (`GuardSet.holds`, the same conditions);
  key = squall's own - check.

Models: `mlp` (the 30-parameter Sequential of bench/overhead.py), `resnet` and `coatnet` (timm's
test_resnet and test_coatnet, 64x64), `llama` (one decoding step of a tiny LlamaForCausalLM with
one DynamicCache, put back after each call so that every call is the same step).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import import_torchvision  # noqa: E402

import squall  # noqa: E402
from squall.runtime.jit import jitted_state  # noqa: E402


def _mlp() -> tuple[torch.nn.Module, tuple, dict]:
    layers = []
    for _ in range(15):
        layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).eval(), (torch.randn(4, 16),), {}


def _coatnet() -> tuple[torch.nn.Module, tuple, dict]:
    import timm

    return timm.create_model("test_coatnet", pretrained=False, num_classes=10, img_size=64).eval(), (torch.randn(2, 3, 64, 64),), {}


def _resnet() -> tuple[torch.nn.Module, tuple, dict]:
    import timm

    return timm.create_model("test_resnet", pretrained=False, num_classes=10).eval(), (torch.randn(2, 3, 64, 64),), {}


def _llama() -> tuple[torch.nn.Module, tuple, dict]:
    import transformers

    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        cache = model(input_ids=torch.randint(1, 97, (1, 8)), use_cache=True).past_key_values
    return model, (), {"input_ids": torch.randint(1, 97, (1, 1)), "past_key_values": cache, "use_cache": True}


MODELS = {"mlp": _mlp, "resnet": _resnet, "coatnet": _coatnet, "llama": _llama}


def breakdown(name: str, calls: int, rounds: int) -> None:
    model, args, kwargs = MODELS[name]()
    jitted = squall.jit(model)
    state = jitted_state(jitted)
    layout = kwargs.get("past_key_values")
    snapshot = None if layout is None else [(layer.keys, layer.values) for layer in layout.layers]

    def restore() -> None:  # a decoding step grows the cache: put it back, so every call is the same step
        if snapshot is not None:
            for layer, (k, v) in zip(layout.layers, snapshot):
                layer.keys, layer.values = k, v

    with torch.no_grad():
        for _ in range(3):
            jitted(*args, **kwargs)
            restore()
        squall.wait_for_upgrades(jitted)
        for _ in range(3):
            jitted(*args, **kwargs)
            restore()
        compilation = state.last_entry.compilation
        guards = state._guards(compilation)
        params = [store[k] for store, k in state._slots]
        call_args = (params, *args)
        assert guards.holds(call_args, kwargs), "the state check fails on the call it was compiled for"
        (slot,) = state._cache.values()
        runner = slot[0]
        result = compilation.fn(*call_args, **kwargs)
        restore()
        stub = guards.runner(lambda *a, **k: result, lambda a, k: None)  # the same check and writes, no program

        def own():
            slot[0] = stub
            try:
                jitted(*args, **kwargs)
            finally:
                slot[0] = runner
            restore()

        timed = {
            "eager": lambda: (model(*args, **kwargs), restore()),
            "squall": lambda: (jitted(*args, **kwargs), restore()),
            "program": lambda: (compilation.fn(*call_args, **kwargs), restore()),
            "own": own,
            "nothing": lambda: (restore(), slot.__setitem__(0, runner)),  # what `own` and the rest add around a call
            "check": lambda: guards.holds(call_args, kwargs),
        }
        best = dict.fromkeys(timed, float("inf"))
        for _ in range(rounds):
            for what, fn in timed.items():
                start = time.thread_time()
                for _ in range(calls):
                    fn()
                best[what] = min(best[what], (time.thread_time() - start) / calls)
    us = {k: (v - (best["nothing"] if k != "check" else 0.0)) * 1e6 for k, v in best.items()}
    key = us["own"] - us["check"]
    print(f"{name}: {len(params)} parameters/buffers, {len(guards.conditions)} check conditions")
    print(f"  eager {us['eager']:8.1f} us   squall {us['squall']:8.1f} us ({us['squall'] / us['eager']:.2f}x eager)   program {us['program']:8.1f} us")
    print(f"  squall's own {us['own']:6.1f} us ({us['own'] / us['squall']:.1%} of the call): key {key:6.1f} us, check {us['check']:6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"any of {list(MODELS)} (default: all)")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    import_torchvision()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"load: {os.getloadavg()[0]:.1f}")
    for name in opts.models or MODELS:
        breakdown(name, opts.calls, opts.rounds)


if __name__ == "__main__":
    main()
