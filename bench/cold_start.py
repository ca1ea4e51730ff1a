"""Time to fused speed in a fresh process: squall with inductor against torch.compile, cold and warm.

Run: python bench/cold_start.py [name ...]       (default: gpt2 test_resnet llama bert test_vit test_convnext)
     python bench/cold_start.py --rounds 2 gpt2

Each model runs, per contender and round, in two new processes in turn: the first with empty
inductor and squall cache folders (TORCHINDUCTOR_CACHE_DIR, SQUALL_CACHE_DIR: cold), the second
with the folders the first left (warm: a user's second run). The contenders alternate, and each has
its own folders, so neither compiles a kernel the other then finds on disk.

Each child imports torch, squall and the model's library, builds the model (inference, one thread),
then starts the clock and:
- torch.compile: compiles the model and calls it once (its compile time: Dynamo's and inductor's
  imports, the vector-ISA probe and every kernel compile included);
- squall + inductor: jits it, calls it until its upgrade is queued (once the entry is hot), at
  least twice, and waits until its background upgrade has installed a fused plan (`Upgrade.fused_after`; its compile
  worker's start, imports and warm-up included), or the upgrade ended without one. With --busy it
  calls the model in a loop meanwhile, as a user's serving loop would: the user's thread then
  holds the GIL the upgrade's thread needs for its Python (planning, loading compiled regions).
The child then times per-call cost against eager (best of rounds, thread CPU time) and prints one
JSON line. The table shows each contender's seconds, squall's ratio to torch.compile (the target
is <= 0.2), and per call after the upgrade as a ratio to torch.compile's (each against eager in
its own process). The load average is printed before and after: the machine may be shared.

Inductor keeps its precompiled C++ headers outside TORCHINDUCTOR_CACHE_DIR, in one folder under
the temporary folder shared by all of a user's processes (built once: about 6 s on 2 cores, for
squall's C++-wrapper header and torch.compile's kernel header alike). By default that folder is
the machine's, so "cold" means cold caches but headers a previous run may have built; with
--cold-headers each contender gets its own empty temporary folder (TMPDIR) too: a first run on a
fresh machine.

With --timeline, squall's cold runs also print where the time went: each step of the user's
process and of the compile worker (squall_inductor.timeline: spawn, imports, vector-ISA probe,
warm-up, trace, lowering and compile, first run, load), seconds after the clock started; with
CXX pointing at a compiler wrapper that appends to $SQUALL_INDUCTOR_TIMELINE, each C++ compile too.

What is timed, checked (cold21): both contenders run in fresh processes that import torch, squall
and the model's library and build the model before the clock starts, each with its own empty
inductor and squall cache folders (and, with --cold-headers, its own TMPDIR): the same cache
policy. torch.compile's clock holds Dynamo's and inductor's imports, its lowering and every kernel
compile, and its first call; squall's holds the worker's spawn and imports, the region's trace,
lowering and C++ compile, the load, the judge and the install.

This machine's environment sets PYTHONDONTWRITEBYTECODE=1, and squall (an editable install) has
no bytecode on disk, so every fresh process compiles squall's 145 modules from source: `import
squall` after torch took 1.24-1.91 s against 0.91-1.28 s with bytecode (2026-11-29, five pairs
alternating, load 0.7-1.1, the bytecode under PYTHONPYCACHEPREFIX). The compile worker pays it
too, inside squall's clock; torch's and inductor's modules have their bytecode. A user's pip
install writes it, so squall's cold seconds below are a little high (about 0.3-1 s).

History (2-core CPU, torch 2.13, one sample each unless said):
- 2026-11-28 (fourth session, 5833f73), --cold-headers, load 0.7-1.2, a machine whose Python runs
  about 2.5x slower than the one below (a fresh worker's imports 5.3-7.5 s): gpt2 16.45 against
  25.64 s (0.64); again with --timeline 19.03 against 26.63 s (0.71): imports 5.3 s, make_fx 0.2 s,
  lowering and the C++ as one unit 12.3 s (no core counted spare: the child's 10 ms polling loop
  is runnable in some of `spare_cores`' looks), load and install 1.1 s; warm 0.22-0.23.
- last session, quiet (load 0.3-0.8), --cold-headers: gpt2 10.67 s against torch.compile's 25.99 s
  (0.41), llama 12.88 against 28.00 s (0.46); warm 0.03-0.04; per call 0.56-0.64 of torch.compile's.
- cold21, load 5-7 (other jobs on both cores), --cold-headers --timeline: gpt2 15.59 against
  48.38 s (0.32), llama 21.82 against 75.59 s (0.29); warm 0.06 and 0.04; per call 0.62 and 0.54.
  torch.compile's side swells more under load than squall's, so the ratios flatter squall. The
  worker's CPU from spawn to reply: gpt2 imports 3.9, trace 0.1, lowering 1.9, one C++ unit 3.9 s;
  llama 3.4, 0.2, 2.6 and 4.0 s.
- cold21, where the cold seconds go and the floor (worker CPU, gpt2's region; the clock's wall time
  on a quiet machine is about their sum, as the user's thread waits on the other core):
  a fresh interpreter's imports 3.2-3.5 s (torch 1.1, inductor with Dynamo and its lowerings 1.6,
  squall 0.4); make_fx 0.15 s; inductor's lowering and code generation 1.9-2.2 s (of it its
  pattern-matcher set-ups 0.4, its source hash for cache keys 0.1, lazy imports 0.3, the
  vector-tiling analysis in sympy 0.3-0.5); the one C++ unit 3.6-4.1 s of compiler CPU, 3.0 s of it
  ATen's and c10's headers (unchanged by -O1, -g0 or -Wall off: 3.3-3.9 s); load and judge 0.15 s.
  About 9-10 s in a row, where 1/5 of torch.compile's 26 s is 5.2 s: imports and lowering alone
  (5.2-5.9 s) use it up before a line of C++ is compiled. The C++ cannot start earlier (g++ lexes a
  whole unit before parsing it; a precompiled header costs 5.3 s to save 1.2 s), and the Python
  wrapper would compile each of the region's 23 kernels with its own copy of the headers (1.8 s
  each). What a spare core buys: the wrapper and the kernels as two units side by side
  (squall_inductor.split_build): 2.4 + 0.35 s of wall time for the C++ instead of 3.6-4.1 s, so
  about 8-8.5 s, 0.31-0.33 of a quiet torch.compile's 26 s. Under load (5-7) no core is spare, the
  region builds as one unit, and the forced split (SQUALL_INDUCTOR_SPLIT_BUILD=1) took as long
  (gpt2 22.1-23.0 against 22.1-22.4 s) for 0.8 s more compiler CPU.
  To compare on a quiet machine: SQUALL_INDUCTOR_SPLIT_BUILD=0 (one unit) against unset (split
  where a core is spare; --timeline then shows "worker: wrapper and kernels built side by side").
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from squall_inductor.timeline import TIMELINE_ENV, mark, read_timeline

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = ["gpt2", "test_resnet", "llama", "bert", "test_vit", "test_convnext"]
CONTENDERS = ("torch.compile", "squall+inductor")


def _child(contender: str, name: str, busy: bool) -> None:
    import torch

    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from real_models import TIMM_MODELS, TORCHVISION_MODELS, TRANSFORMERS_MODELS, import_torchvision

    import squall

    torch.set_num_threads(1)
    import_torchvision()
    (model,) = [m for m in TIMM_MODELS + TORCHVISION_MODELS + TRANSFORMERS_MODELS if name in (m.name, m.name.split("/")[-1])]
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    with torch.no_grad():
        module(**inputs)  # the model's own first-call costs (lazy imports in its code) are nobody's
        mark("user: clock started")
        start = time.perf_counter()
        calls = 1
        if contender == "torch.compile":
            fn = torch.compile(module)
            fn(**inputs)
            to_fused = time.perf_counter() - start
            kept = "torch.compile"
        else:
            fn = squall.jit(module, executors=["inductor", "torch"])
            fn(**inputs)
            while True:
                (upgrade,) = squall.upgrades(fn)[-1:] or (None,)
                if upgrade is not None and (upgrade.fused_after is not None or upgrade.done.is_set()):
                    break
                if busy or upgrade is None or upgrade.status == "cold":  # an upgrade is queued once an entry is hot
                    fn(**inputs)
                    calls += 1
                else:
                    time.sleep(0.01)
            squall.wait_for_upgrades(fn)
            if upgrade.fused_after is not None:
                mark("user: fused plan installed", at=time.time() - (time.perf_counter() - upgrade.submitted - upgrade.fused_after))
            to_fused = None if upgrade.fused_after is None else upgrade.submitted + upgrade.fused_after - start
            kept = upgrade.status
        best = {"eager": float("inf"), "compiled": float("inf")}
        for _ in range(20):
            for label, run in (("eager", module), ("compiled", fn)):
                t = time.thread_time()
                for _ in range(3):
                    run(**inputs)
                best[label] = min(best[label], (time.thread_time() - t) / 3)
    if contender != "torch.compile":
        print(upgrade, file=sys.stderr)
    print(json.dumps({"to_fused": to_fused, "calls": calls, "per_call_vs_eager": best["compiled"] / best["eager"], "kept": kept}))


def _run(contender: str, name: str, folders: dict[str, str], busy: bool, timeline: str | None = None) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=folders["inductor"], SQUALL_CACHE_DIR=folders["squall"])
    if "tmp" in folders:  # inductor's precompiled headers go under the temporary folder
        env["TMPDIR"] = folders["tmp"]
    env.pop(TIMELINE_ENV, None)
    if timeline:
        env[TIMELINE_ENV] = timeline
    done = subprocess.run([sys.executable, __file__, "--child", contender, name, *(["--busy"] if busy else [])], env=env, capture_output=True, text=True)
    if os.environ.get("COLD_START_VERBOSE"):
        print(done.stderr, file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{contender} on {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _print_timeline(name: str, path: str) -> None:
    """The timeline's steps: seconds after the user's clock started, each step's own wall seconds
    and CPU seconds (its process's and finished children's, since that process's previous step)."""
    steps = read_timeline(path)
    start = next((at for at, _, _, step in steps if step == "user: clock started"), steps[0][0] if steps else 0.0)
    print(f"\n{name}, squall cold, timeline (s after the clock started; wall and CPU s since the process's previous step):")
    print("  at s     wall s  CPU s  [pid] step")
    previous: dict[int, tuple[float, float]] = {}
    for at, pid, cpu, step in steps:
        # a line of CXX's wrapper (one process per compile) carries that compile's own CPU seconds
        before_at, before_cpu = previous.get(pid, (at, 0.0 if step.startswith("g++") else cpu))
        previous[pid] = (at, cpu)
        print(f"  {at - start:7.2f}  {at - before_at:6.2f}  {cpu - before_cpu:5.2f}  [{pid}] {step}")
    print()


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--rounds", type=int, default=1, help="cold+warm process pairs per contender and model")
    parser.add_argument("--busy", action="store_true", help="squall's child calls the model in a loop until fused "
                        "(default: twice, then it waits, as bench/models.py does)")
    parser.add_argument("--cold-headers", action="store_true", help="each contender's own empty TMPDIR too: "
                        "inductor's precompiled headers cold (a fresh machine's first run)")
    parser.add_argument("--timeline", action="store_true", help="print the steps of squall's cold runs (squall_inductor.timeline)")
    parser.add_argument("--child", nargs=2, metavar=("CONTENDER", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child, args.busy)
        return
    print(f"load average {_load()}; seconds from compile/jit to fused speed, per-call ratios to torch.compile's\n")
    print("| model | run | torch.compile s | squall+inductor to fused s | ratio | calls meanwhile | per call / torch.compile | kept |")
    print("|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"cold": [], "warm": []}
    for name in args.names:
        for r in range(args.rounds):
            results: dict[str, dict[str, dict]] = {"cold": {}, "warm": {}}
            order = CONTENDERS if r % 2 == 0 else CONTENDERS[::-1]
            for contender in order:
                folders = {k: tempfile.mkdtemp(prefix=f"squall-cold-{k}-") for k in ("inductor", "squall", *(("tmp",) if args.cold_headers else ()))}
                try:
                    for run in ("cold", "warm"):
                        timeline = None
                        if args.timeline and run == "cold" and contender != "torch.compile":
                            timeline = os.path.join(folders["squall"], "timeline.txt")
                        results[run][contender] = _run(contender, name, folders, args.busy, timeline)
                        if timeline and os.path.exists(timeline):
                            _print_timeline(name, timeline)
                finally:
                    for folder in folders.values():
                        shutil.rmtree(folder, ignore_errors=True)
            for run in ("cold", "warm"):
                tc, sq = results[run]["torch.compile"], results[run]["squall+inductor"]
                ratio = sq["to_fused"] / tc["to_fused"] if sq["to_fused"] is not None else None
                if ratio is not None:
                    ratios[run].append(ratio)
                fused = "-" if sq["to_fused"] is None else f"{sq['to_fused']:.2f}"
                print(f"| {name} | {run} | {tc['to_fused']:.2f} | {fused} | "
                      f"{'-' if ratio is None else f'{ratio:.2f}'} | {sq['calls']} | "
                      f"{sq['per_call_vs_eager'] / tc['per_call_vs_eager']:.2f} | {sq['kept']} |", flush=True)
    for run, found in ratios.items():
        if found:
            print(f"\n{run}: to fused / torch.compile median {statistics.median(found):.2f}, worst {max(found):.2f}")
    print(f"\nload average at the end: {_load()}")


if __name__ == "__main__":
    main()
