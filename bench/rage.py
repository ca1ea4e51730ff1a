"""The cost of always-on compile records (squall.runtime.rage) on the demo's compilation.

Run: python bench/rage.py [--rounds 15]
Compiles the demo GPT (`squall demo`'s model and input, torch executor, no_grad) with
recording on and off, in one process, each time with a fresh squall.jit, alternating which
goes first (whichever follows the other pays for its garbage) and collecting garbage before
each; prints the median compile time (trace + plan + generate, as `squall demo` reports it)
of each and their ratio; the recording work alone (the record of a finished compilation,
built and written, timed directly, which shared-machine noise does not swamp); the time
printing the traces takes at exit (deferred, off the compile path); and the cached call
with recording on and off (the hot path never reaches the recorder).
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time

os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="bench-rage-"))

import torch  # noqa: E402

import squall  # noqa: E402
from squall.runtime import rage  # noqa: E402
from squall.runtime.jit import jitted_state  # noqa: E402
from squall.tools.demo import GPT, GPTConfig  # noqa: E402


def compile_once(model, inputs, recorder: rage.Recorder) -> tuple[float, float, object]:
    rage._default = recorder  # the recorder jit writes to, for this compilation
    jitted = squall.jit(model, executors=["torch"])
    gc.collect()
    with torch.no_grad():
        jitted(*inputs)
        compile_s = jitted_state(jitted).last_entry.compile_seconds
        start = time.perf_counter()
        for _ in range(10):
            jitted(*inputs)
        call_s = (time.perf_counter() - start) / 10
    return compile_s, call_s, jitted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    torch.set_num_threads(1)  # steadier timings on a shared machine
    torch.manual_seed(0)
    model = GPT(GPTConfig()).eval()
    inputs = (torch.randint(0, model.cfg.vocab_size, (4, 128)), torch.randint(0, model.cfg.vocab_size, (4, 128)))
    on = rage.Recorder(enabled=True)
    off = rage.Recorder(enabled=False)
    compile_once(model, inputs, on)  # warm-up: imports, plugin discovery, the run file's header
    results: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    keep = []
    for i in range(rounds):
        for name, recorder in (("on", on), ("off", off))[:: 1 if i % 2 else -1]:
            compile_s, call_s, jitted = compile_once(model, inputs, recorder)
            results[name].append((compile_s, call_s))
            keep.append(jitted)  # alive until exit, so the deferred traces are printed below
    state = jitted_state(keep[-1])
    work = []
    for _ in range(rounds):
        start = time.perf_counter()
        with rage.record_compilation(state, inputs, {}, recorder=on) as record:
            record.compiled(state.last_entry.compilation)
        work.append(time.perf_counter() - start)
    start = time.perf_counter()
    on.flush(budget_s=60)
    flush_s = (time.perf_counter() - start) / (2 * rounds + 1)
    med = {k: (statistics.median(c for c, _ in v), statistics.median(t for _, t in v)) for k, v in results.items()}
    print(f"demo GPT ({sum(p.numel() for p in model.parameters()):,} parameters), input [4, 128], torch executor, "
          f"{rounds} rounds, torch {torch.__version__}")
    best = {k: min(c for c, _ in v) for k, v in results.items()}
    print(f"compile, recording off: {med['off'][0] * 1e3:7.2f} ms (median), {best['off'] * 1e3:7.2f} ms (best)")
    print(f"compile, recording on:  {med['on'][0] * 1e3:7.2f} ms (median), {best['on'] * 1e3:7.2f} ms (best); "
          f"on/off {med['on'][0] / med['off'][0]:.3f}x (median), {best['on'] / best['off']:.3f}x (best)")
    print(f"recording work alone:   {statistics.median(work) * 1e3:7.2f} ms (median), "
          f"{statistics.median(work) / med['off'][0]:.1%} of the compile time")
    print(f"traces printed at exit: {flush_s * 1e3:7.2f} ms per compilation (not on the compile path)")
    print(f"cached call, off / on:  {med['off'][1] * 1e3:.3f} ms / {med['on'][1] * 1e3:.3f} ms")
    print(f"records: {on.path} ({on.path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
