"""Real models: squall.jit against eager and torch.compile on the timm, torchvision and transformers
models of tests/test_real_models.py (small configs, random weights, inference).

Run: python bench/models.py [name ...]          (default: every model; prints a markdown table)
     python bench/models.py --no-torch-compile --no-inductor resnet   (squall's torch plan only)
     python bench/models.py --sweep stablelm timm/ghostnet_050        (models of bench/sweep_model_list.py,
                                                                       which squall's tests do not run)

Per model: the cached per-call time of eager, torch.compile (default mode), squall with the torch
executor alone, and squall with the inductor plugin after its upgrade, each as a ratio to
torch.compile's; each contender's first call (compile included); squall with inductor's time to
fused speed, and its ratio to torch.compile's first call; which offer the upgrade kept; whether
squall compiles the model with no opaque call, and how many value guards its trace has.
Contenders run side by side in one process on one thread, alternating within each round, best
of several rounds. Per-call times are the thread's CPU time by default (`--clock cpu`), so on a
shared, loaded machine the time a contender waits for a core counts against none of them; `--clock
wall` times wall clock. The load average is printed before and after.

squall with the inductor plugin runs tiered, as by default: its first call returns on the torch
plan; the script calls it again until its entry is hot (its calls took 50 ms, when the upgrade is
queued), and the background upgrade (inductor's compiles in its worker process, the in-context
judge) runs while this script waits for it. Its time to fused speed is the time from the start of the
first call until the upgrade's first fused plan runs (`Upgrade.fused_after`); per-call times are
taken once the upgrade is done. inductor is imported and its CPU toolchain probed before anything
is timed, so neither contender pays those one-time costs (seconds) in its compile time; squall's
compile worker process is started then too (the first model would pay its start). Judgements go to a
fresh cache folder (nothing remembered from an earlier run); inductor's own caches are left as
they are (`TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)` for cold compiles).

Measured 2026-11-27 (all 27 rows, load 4-9 from two other jobs, thread CPU time; inductor's caches
warm from earlier runs, so the first-call and time-to-fused columns are warm for both): squall after
its upgrade per call, as a fraction of torch.compile's, median 0.80 (eager 1.78, squall torch only
1.29); every model at or under 1.00 except llama, 1.03, which alone again read 0.55 (mixtral 0.77,
after inductor stopped being offered float32 `_grouped_mm`, whose regions failed to compile: 0.95
before). Kept: large regions on 25, the torch plan on test_convnext and deit_tiny.

Again 2026-11-28 (all 27 rows, --rounds 10, load 0.4-2.8, thread CPU time; inductor's caches warm
from earlier runs for both, torch.compile's first calls 2.3-150 s): squall after its upgrade per
call, as a fraction of torch.compile's, median 0.65, worst 0.88 (timm/test_nfnet), every model
under 1.00 (eager median 1.87, squall torch only 1.34); large regions kept on all 27; time to fused
speed against torch.compile's first call median 0.67, worst 1.84 (llama: torch.compile's first
call 2.3 s from its warm cache, squall's upgrade 4.3 s).

Models squall's tests do not run (--sweep, bench/sweep_model_list.py's third batch; 2026-11-29,
--rounds 10, load 1.0-1.5, thread CPU time, fresh inductor cache), per call as a fraction of
torch.compile's, and time to fused speed against torch.compile's first call:

| model | eager | squall | squall+inductor | torch.compile ms | torch.compile first s | to fused s | to fused / first |
|---|---|---|---|---|---|---|---|
| stablelm | 2.32 | 1.50 | 0.52 | 0.783 | 10.55 | 10.42 | 0.99 |
| nemotron | 2.36 | 1.44 | 0.51 | 0.688 | 8.60 | 5.73 | 0.67 |
| qwen2_moe | 1.92 | 1.19 | 0.76 | 1.359 | 12.23 | 12.47 | 1.02 |
| roformer | 2.83 | 1.66 | 0.56 | 0.672 | 10.06 | 12.81 | 1.27 |
| convnextv2 | 1.57 | 1.15 | 0.64 | 0.817 | 8.33 | 4.37 | 0.52 |
| timm/ghostnet_050 | 1.68 | 1.32 | 0.77 | 7.852 | 55.07 | 55.49 | 1.01 |
| timm/pvt_v2_b0 | 1.12 | 0.95 | 0.86 | 11.453 | 27.93 | 14.69 | 0.53 |
| torchvision/mobilenet_v3_small | 1.40 | 1.16 | 0.79 | 5.347 | 32.79 | 13.24 | 0.40 |

squall after its upgrade: median 0.70 of torch.compile's per-call time, worst 0.86 (pvt_v2_b0);
large regions kept on all 8; time to fused speed median 0.83 of torch.compile's first call, worst
1.27 (roformer: 12.8 against 10.1 s).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import TIMM_MODELS, TORCHVISION_MODELS, TRANSFORMERS_MODELS, RealModel, assert_same_output, import_torchvision  # noqa: E402

import squall  # noqa: E402
from squall.frontend.speculation import guards_of  # noqa: E402


def _first_call(fn, inputs) -> tuple[float, float, list[str]]:
    """(start, seconds, opaque calls): when the first call started (perf_counter), how long it took, what squall warned of."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        fn(**inputs)
        seconds = time.perf_counter() - start
    opaque = sorted({str(w.message).split(" is not in")[0].removeprefix("squall: ") for w in caught if issubclass(w.category, squall.SquallWarning)})
    return start, seconds, opaque


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="models to run, by name or last part of it (default: all)")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out (slow to compile)")
    parser.add_argument("--no-inductor", action="store_true", help="leave squall with the inductor plugin out")
    parser.add_argument("--why", action="store_true", help="print each upgrade's reason (every offer's time) under the table")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="per-call time: the thread's CPU time, or wall clock")
    parser.add_argument("--sweep", action="store_true",
                        help="take the models, by name, from bench/sweep_model_list.py (in eval mode, without their labels)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--number", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import_torchvision()
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    contenders = {}
    if not args.no_torch_compile:
        contenders["torch.compile"] = torch.compile
    contenders["squall"] = lambda m: squall.jit(m, executors=["torch"])
    if not args.no_inductor:
        contenders["squall+inductor"] = lambda m: squall.jit(m, executors=["inductor", "torch"])
    if len(contenders) > 1:
        _warm_inductor()
    base = "torch.compile" if "torch.compile" in contenders else "eager"
    candidates = _sweep_models() if args.sweep else TIMM_MODELS + TORCHVISION_MODELS + TRANSFORMERS_MODELS
    models = [m for m in candidates if not args.names or m.name in args.names or m.name.split("/")[-1] in args.names]
    missing = set(args.names) - {n for m in models for n in (m.name, m.name.split("/")[-1])}
    if missing:
        parser.error(f"unknown models: {', '.join(sorted(missing))}")
    print(f"torch {torch.__version__}, one thread, inference; per call: best of {args.rounds} rounds of {args.number} calls, "
          f"{args.clock} time; ratios to {base}'s per-call time (lower is faster); load average {_load()}\n")
    names = ["eager", *contenders]
    shown = [n for n in names if n != base]
    print("| model | " + " | ".join(f"{n} / {base}" for n in shown) + f" | {base} ms | "
          + " | ".join(f"{n} first s" for n in contenders)
          + (" | squall+inductor to fused s | to fused / torch.compile first | kept" if "squall+inductor" in contenders else "")
          + " | opaque calls | guards |")
    print("|---" * (len(shown) + len(contenders) + 4 + 3 * ("squall+inductor" in contenders)) + "|")
    ratios: dict[str, list[float]] = {n: [] for n in names}
    to_fused_ratios: list[float] = []
    reasons = []
    for model in models:
        torch.manual_seed(0)
        module, inputs = model.build(), model.inputs()
        with torch.no_grad():
            expected = module(**inputs)
            compiled, firsts, opaque = {}, {}, []
            for name, make in contenders.items():
                compiled[name] = make(module)
                start, firsts[name], found = _first_call(compiled[name], inputs)
                opaque = opaque or found
                if name == "squall+inductor":
                    to_fused = _to_fused_speed(compiled[name], inputs, start)
                assert_same_output(compiled[name](**inputs), expected, atol=model.tolerance, rtol=model.tolerance)
            runs = {"eager": module, **compiled}
            best = dict.fromkeys(runs, float("inf"))
            for _ in range(args.rounds):
                for name, fn in runs.items():
                    start = clock()
                    for _ in range(args.number):
                        fn(**inputs)
                    best[name] = min(best[name], (clock() - start) / args.number)
        for n in names:
            ratios[n].append(best[n] / best[base])
        guards = len(guards_of(squall.last_traces(compiled["squall"])))
        row = f"| {model.name} | " + " | ".join(f"{best[n] / best[base]:.2f}" for n in shown) + f" | {best[base] * 1e3:.3f} | "
        row += " | ".join(f"{firsts[n]:.2f}" for n in contenders)
        if "squall+inductor" in contenders:
            ratio = to_fused / firsts["torch.compile"] if to_fused is not None and "torch.compile" in firsts else None
            if ratio is not None:
                to_fused_ratios.append(ratio)
            row += (f" | {'-' if to_fused is None else f'{to_fused:.2f}'} | {'-' if ratio is None else f'{ratio:.2f}'}"
                    f" | {_kept(compiled['squall+inductor'])}")
            reasons.append(f"- {model.name}: {squall.upgrades(compiled['squall+inductor'])[-1]}")
        print(row + f" | {', '.join(opaque) or 'none'} | {guards} |", flush=True)
    if models:
        print("| median | " + " | ".join(f"{statistics.median(ratios[n]):.2f}" for n in shown) + " |")
        print("| worst | " + " | ".join(f"{max(ratios[n]):.2f}" for n in shown) + " |")
        if to_fused_ratios:
            print(f"\ntime to fused speed / torch.compile's first call: median {statistics.median(to_fused_ratios):.2f}, "
                  f"worst {max(to_fused_ratios):.2f}")
    print(f"\nload average at the end: {_load()}")
    if args.why:
        print("\n" + "\n".join(reasons))


def _sweep_models() -> list[RealModel]:
    """bench/sweep_model_list.py's models as this script runs them: inference in eval mode, their
    inputs without the labels (which only a training step reads), tests/real_models.py's tolerance."""
    from sweep_model_list import MODELS

    def in_eval_mode(build):
        return lambda: build().eval()

    def without_labels(inputs):
        return lambda: {k: v for k, v in inputs().items() if k != "labels"}

    return [RealModel(m.name, in_eval_mode(m.build), without_labels(m.inputs)) for m in MODELS]


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _warm_inductor() -> None:
    """Import inductor and compile one tiny function, so the one-time costs (imports, probing the
    CPU's vector instruction sets with the C++ compiler) are not charged to the first contender."""
    os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="squall-bench-"))
    torch.compile(lambda x: x * 2 + 1)(torch.ones(3))
    worker = squall_inductor_worker()
    if worker is not None:
        start = time.perf_counter()
        worker.wait_ready()
        print(f"squall-inductor's compile worker process started in {time.perf_counter() - start:.1f} s "
              "(once per process; not charged to any model below)")


def squall_inductor_worker():
    """squall-inductor's compile worker process, where it is installed and enabled (else None)."""
    try:
        from squall_inductor.worker import default_worker, subprocess_enabled
    except ImportError:
        return None
    return default_worker() if subprocess_enabled() else None


def _to_fused_speed(fn, inputs: dict, start: float) -> float | None:
    """Seconds from `start` (of `fn`'s first call) until its upgrade's first fused plan ran, after
    waiting for the whole upgrade; None where no fused plan ran. As a user's loop would, `fn` is
    called until its entry is hot and its upgrade queued (squall.runtime.upgrade_worker.HOT_S)."""
    deadline = time.perf_counter() + 60
    while any(u.status == "cold" for u in squall.upgrades(fn)) and time.perf_counter() < deadline:
        fn(**inputs)
    squall.wait_for_upgrades(fn)
    (upgrade,) = squall.upgrades(fn)[-1:] or (None,)
    if upgrade is None or upgrade.fused_after is None:
        return None
    return upgrade.submitted + upgrade.fused_after - start


def _kept(fn) -> str:
    """Which offer the upgrade kept: "large regions", "islands", or why the torch plan runs."""
    (upgrade,) = squall.upgrades(fn)[-1:] or (None,)
    if upgrade is None:
        return "-"
    if upgrade.status != "upgraded":
        return {"kept the torch plan": "torch", "nothing to fuse": "nothing"}.get(upgrade.status, upgrade.status)
    last = upgrade.reason.split("; ")[-1]
    return last.removeprefix("kept ") if last.startswith("kept ") else "regions"


if __name__ == "__main__":
    main()
