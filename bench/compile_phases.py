"""One compile of the length stream's model, phase by phase, on the calling thread's CPU time.

Run: python bench/compile_phases.py [--repeat 15] [--dim 32] [--executors torch] [--cold-sources]

The model is bench/length_stream.py's (DistilBERT, 2 layers, --dim wide), called under
`torch.no_grad()` as the stream calls it. Each sample builds a fresh `squall.jit` and times its
first call (the miss: trace, plan, generate, guards, runner, the compile record, the program's
first run), static (automatic dynamic's first compile) and with every size symbolic
(`dynamic=True`), the two taking turns so that load on a shared machine falls on both alike.
The table has each phase's best sample (so the phases need not add up to the total's best) and
its median, in ms of `time.thread_time()`:

- trace: `trace_program` (the program run on proxies through the state views);
- plan: the planner; codegen: freeing after last use and the generated source's `compile()`;
- record: the compile record (squall.runtime.rage: its start and its finish);
- run: the compiled program called again on the same input (what the first call's own run costs);
- rest: total - the above (guards, the cache's entry and runner, the first call's run);
- gc: of the total, the cyclic garbage collector's collections (gc.callbacks).

The jitted functions stay alive (the last 20), as a program keeps its compiled entries, so the
collector sees what it sees in one. The table's best samples are those the collector spared:
the mean is what a stream of compiles pays. Generated source is compiled once per process
and text (squall.sources): `--cold-sources` forgets it before each sample, as a process's
first compile of a program finds it (what `compile()` costs, in codegen and rest).

The phases are timed by wrapping the pipeline's functions in this process only (a few µs each).
Also printed: the traced program's operations and the µs of trace per operation.

Measured (tracespeed3, 2026-11-26, main and the branch in alternate processes, --repeat 10,
load 8.8-9.2, so CPU time; ms, best / mean):
- static: total 10.2-10.4 / 32-33 -> 9.7-10.3 / 10.4-10.8; trace 6.9-7.2 -> 6.4-6.7 (54 ops:
  129-134 -> 118-124 µs an op); collections 0.3 / 22 -> 0.3 / 0.4 (main's mean holds one full
  collection of the heap, about 200 ms, in 10 compiles); rest 0.9 -> 1.3-1.4 (the collection the
  trace put off runs after it).
- dynamic=True: total 11.2-11.5 / 12.1-12.8 -> 11.2 / 13.1; trace 7.8-8.0 -> 7.1-7.2.
- Where a trace goes (branch, instrumented): 55 torch calls dispatched, 3.2 ms, 2.6 ms of it the
  torch-language ops (a first call of an op 50-270 µs: sdpa, layer_norm, embedding, linear; a
  replayed one 12-30 µs); 400 attribute reads through the state views, 2.4 ms (about 6 µs a read:
  the class lookup, the guard's text, the read's record); the rest is the program's own Python,
  the RNG snapshots (numpy's get_state alone is about 0.1 ms, twice), the recorder's finish
  (0.25 ms) and the module's slots (0.1-0.2 ms, twice a compile).
- --cold-sources adds about 2 ms a compile: Python's compile() of the computation (1.3 ms for
  9.7k characters) and of the state check (2.3 ms for one 7k-character expression), which a
  process pays at its first compile of a program and the length stream's later rounds do not.
- The collector, toggled in one process (bench loop of 80 compiles, 20 kept, each with 5
  calls after): mean 26.0 -> 18.5 ms static, 34.5 -> 16.3 ms symbolic; its collections 11.4
  -> 3.8 and 18.8 -> 0.6 ms a compile. Medians and bests barely move: the collections it saves
  are the rare big ones.

Measured (tracespeed4, 2026-11-26, main and the branch in two processes taking turns sample by
sample, 20 samples each, load 3.8-5.0; ms, best / median): static trace 6.2-6.7 / 7.1-7.6 ->
5.6-5.8 / 6.4-6.8 (0.85-0.91x), total 0.91-0.92x; dynamic=True trace 0.86-0.91x, total
0.90-0.92x. Traces, generated sources and guards byte-identical on eight programs. Where a
static trace went before it (py-spy at 1.5-2 kHz over 500 compiles): the 54 torch-language calls
45% (their bodies and prims' metas 16%, call keys 6%, replays 4%, replay records 3%, binding
and snapshots 4%, the source line 3%), 208 attribute reads through the state views 21% (a
submodule or method read about 13 µs with its view and guard text, a parameter 3.5 µs), the
globals-write check at the end (35 recorded functions' globals, about 2400 entries compared by
identity) 3-5%, the random-state snapshots 0.2 ms (numpy's get_state is 48 µs, twice), about
135 proxies at 2-3 µs each (torch's _make_wrapper_subclass), and the program's own Python with
torch's dispatch into the tracing mode about a fifth. No item is above 6%: halving the trace
needs fewer Python steps per op and per read, not one fix.

Measured (compilecost3, 2026-11-26; main (4df9abf) and the branch, torch executor, a machine
loaded 4-11, so CPU time; ms, best / median). In alternating processes, 4 pairs of 12 compiles,
the collector off during each (load 9.5-10.3): static 14.4 / 16.9 -> 12.7 / 15.3 (0.88x / 0.90x),
dynamic=True 14.8 / 17.6 -> 13.7 / 16.8 (0.93x / 0.95x). This bench, --repeat 20, the trees
taking turns three times (load 4.1-4.9): static best 10.5-13.0 -> 10.4-11.8, trace 6.9-8.7 ->
6.7-7.8, plan 0.34-0.41 -> 0.30-0.31 (the one phase that moved beyond the noise), dynamic=True
11.5-17.5 -> 11.7-13.3: a few percent, not the third the length stream needs. What went: the
module tree walked once a compile (`module_slots` ran twice, `modules()` twice more, and
`check_wrapping` asked one isinstance per wrapper class), prims.var's keyword-only `correction`
bound without inspect, the guard set's conditions listed once per runner, the planner's second
dead-code walk skipped where fusion changed nothing. Traces, generated sources, guard labels and
conditions byte-identical on 14 entries (DistilBERT static, symbolic and batch-of-1, dynamic=True,
gpt2, llama, mistral, qwen2, mixtral, bert, clip, gpt2 and bert under grad, a function).
Where a compile goes (instrumented, best of 40, load 10): trace 9.9, plan + codegen 1.6, the
compile record's finish 0.4, cache entry and guard runner 0.4, the first run and the entry point
about 2. Measured and left: numpy's legacy `get_state` (about 100 µs, twice a trace, for the RNG
check: MT19937's `state` copies the key word by word, and the cached Gaussian is readable only
through it); the globals-write check (36 recorded functions, 2513 globals copied twice and
compared by identity, 0.1-0.2 ms: one shared copy per module would change which function a
guard's label names, or refuse a global a library set mid-trace); module replays of a 2-layer
model (alternating in one process: recording costs the first layer 2.5 -> 3.0 ms, and the second
replays in 1.5 ms against 1.3 ms traced: op-level replays already make it cheap). A py-spy
profile (400 compiles, 2 kHz) stays flat: no function above 5% of a trace in its own time.

Measured (compilespeed, 2026-11-27; main (893e7fd) and the branch in alternating processes, load
2.5-5.7 from other sessions, so CPU time; ms, best / median). Where a compile goes now (cProfile
and a 2 kHz SIGPROF sampler, 150 compiles): still flat. The trace is about 62% (the model's
Python through the state views and the torch-language calls: `Symbol.__call__` 20% inclusive,
attribute reads 16%, no function above 3% in its own time), plan + codegen 8%, the compile record
4-5% (its JSON line, with the generated source, about 0.3 ms), `squall.jit()` itself 5-7%. What
went: `Compilation.draws_random_numbers`, asked once per dynamic=True compile (its variants),
walked every call's decomposition and so copied every replayed one (0.85 -> 0.24 ms:
`BoundSymbol.tagged` reads a pending copy's recording instead); `squall.jit()` deep-copied the
whole parsed pyproject.toml twice (now only [tool.squall]), looked for it through pathlib, and
walked `parameters()` and `buffers()` for lazy ones (1.13-1.16 / 1.23-1.39 -> 0.85-0.91 /
1.00-1.10, about 0.77x). A jit and its first call, the collector off, default executors, 3 pairs
of 30: static 15.2-17.4 / 17.3-19.3 -> 15.3-16.8 / 17.4-18.5; dynamic=True 17.8-19.6 / 19.5-21.4
-> 16.8-17.6 / 19.1-20.3 (about 0.94x); the symbolic recompile 16.5-18.1 / 18.6-20.7 -> 15.8-17.9
/ 18.1-19.0. This bench, --repeat 12, 3 pairs: dynamic=True rest 2.7-3.0 -> 1.9-2.3 (the draws
question), the other phases within the noise. Measured and left: the collector's share is about
8 ms a compile in this bench (40 compiles, 20 jits kept: 72 young collections 0.35 ms each, 7
middle ones about 6 ms, one full one of the 375k-object heap, 266 ms), more than any phase but
the trace; a transformers config's Python `__getattribute__` answers `__class__` for each
`isinstance` squall asks of it (144 a compile, 2-3 µs each, mostly python_effects' refusals); the
compile record's JSON line; numpy's `get_state` (as above). bench/length_stream.py
--no-torch-compile, 2 alternating pairs at load 3.6-6.3, CPU time against eager's: squall 1.31x,
1.33x -> 1.11x, 1.36x; squall(dynamic=True) 1.07x, 1.56x -> 0.80x, 1.07x: at that load the
stream's rounds move more than a few percent of its two compiles, and the 6-10 ms a compile
that the issue's target needs is not reached.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable

import torch

import squall
from squall import sources
from squall.compiler import pipeline
from squall.runtime import rage
from squall.runtime.jit import jitted_state

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from length_stream import VOCAB, build_model, import_torchvision  # noqa: E402

PHASES = ("trace", "plan", "codegen", "record")
KEPT = 20  # jitted functions kept alive, as a program keeps its entries


class PhaseClock:
    """Thread CPU seconds spent inside the wrapped functions, per phase, for the current sample."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.depth = 0

    def wrap(self, phase: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            if self.depth:  # a phase inside another (generate inside the checked plan's): counted once
                return fn(*args, **kwargs)
            self.depth += 1
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[phase] += time.thread_time() - start
                self.depth -= 1

        return timed


def instrument(clock: PhaseClock) -> None:
    pipeline.trace_program = clock.wrap("trace", pipeline.trace_program)
    pipeline.plan = clock.wrap("plan", pipeline.plan)
    pipeline.generate = clock.wrap("codegen", pipeline.generate)
    pipeline.free_after_last_use = clock.wrap("codegen", pipeline.free_after_last_use)
    rage.CompileRecord.__init__ = clock.wrap("record", rage.CompileRecord.__init__)
    rage.CompileRecord.finish = clock.wrap("record", rage.CompileRecord.finish)


class CollectorClock:
    """Thread CPU seconds the cyclic garbage collector spent, since `clear`."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._start = 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.spent += time.thread_time() - self._start


def one_compile(model: torch.nn.Module, x: torch.Tensor, dynamic: bool, executors: list[str] | None, clock: PhaseClock,
                collector: CollectorClock, kept: list, cold_sources: bool) -> dict[str, float]:
    fn = squall.jit(model, executors=executors, dynamic=dynamic) if dynamic else squall.jit(model, executors=executors)
    kept.append(fn)
    del kept[:-KEPT]
    if cold_sources:
        sources._COMPILED.clear()
    clock.spent.clear()
    collector.spent = 0.0
    with torch.no_grad():
        start = time.thread_time()
        fn(input_ids=x)
        total = time.thread_time() - start
        start = time.thread_time()
        fn(input_ids=x)
        run = time.thread_time() - start
    sample = {phase: clock.spent.get(phase, 0.0) for phase in PHASES}
    sample.update(run=run, total=total, rest=total - sum(sample.values()) - run, gc=collector.spent)
    sample["ops"] = len(jitted_state(fn).last_entry.compilation.traced.bsyms)
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--executors", default="torch", help="comma-separated, or 'default' for the installed defaults")
    parser.add_argument("--cold-sources", action="store_true", help="forget compiled source text before each sample")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    import_torchvision()
    model = build_model(opts.dim)
    x = torch.randint(1, VOCAB, (4, 40))
    executors = None if opts.executors == "default" else opts.executors.split(",")
    clock, collector, kept = PhaseClock(), CollectorClock(), []
    instrument(clock)
    samples: dict[str, list[dict[str, float]]] = {"static": [], "dynamic=True": []}
    for _ in range(2):  # warm-up: imports, first-use caches
        for name in samples:
            one_compile(model, x, name != "static", executors, clock, collector, kept, opts.cold_sources)
    for _ in range(opts.repeat):
        for name in samples:
            samples[name].append(one_compile(model, x, name != "static", executors, clock, collector, kept, opts.cold_sources))
    cold = ", source compiled cold" if opts.cold_sources else ""
    print(f"one compile of DistilBERT (dim {opts.dim}, 2 layers, input 4x40{cold}), thread CPU ms, best / mean of {opts.repeat}; load {os.getloadavg()[0]:.1f}")
    columns = ("total", *PHASES, "run", "rest", "gc")
    print(f"{'':14}" + "".join(f"{c:>15}" for c in columns) + f"{'ops':>6}{'trace µs/op':>13}")
    for name, rows in samples.items():
        cells = "".join(f"{min(r[c] for r in rows) * 1e3:7.2f} /{statistics.mean(r[c] for r in rows) * 1e3:6.2f}" for c in columns)
        ops = rows[-1]["ops"]
        per_op = min(r["trace"] for r in rows) / ops * 1e6 if ops else float("nan")
        print(f"{name:14}{cells}{ops:6d}{per_op:13.1f}")


if __name__ == "__main__":
    main()
