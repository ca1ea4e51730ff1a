"""Tiered compilation: run the torch plan at once, upgrade to fused regions in the background.

A fusion executor whose regions take long to compile and time (`FusionExecutor.
compiles_in_background`, e.g. inductor: seconds per region) would make the first call of
every new signature pay for all of it. Instead, `squall.jit` plans that first call without
those executors (milliseconds) and returns, and one background worker thread plans the same
traced program again with them, compiles and times its regions, then judges the whole fused
program against the torch plan on example inputs of the real shapes (a region that won its
timing alone can lose in context; where the program's value guards read an input's values, the
job keeps a copy of that input, so the judge takes the call's branches; the other inputs are
copied within a budget and past it read in place where the program never writes them, a model's
weights included; what the program reads from objects, a KV cache's tensors, is taken at the call
too, since the objects change after it; a differentiated program's backward is run, checked and
timed with its forward). Only a faster fused program replaces the cache entry's generated function,
by the one list-item assignment `_replan` already uses, so the hot path pays nothing for the
mechanism; a slower one, or one whose results differ, is dropped, and `upgrades(fn)` says why.

`squall.jit(fn, wait=True)` (or `wait = true` under `[tool.squall]`, or SQUALL_WAIT=1)
does the same upgrade before the first call returns, in the caller's thread: the same
decisions, paid up front (benchmarks, ahead-of-time warm-up, tests of fused plans).
`wait_for_upgrades(fn)` blocks until `fn`'s pending upgrades are done (tests, benchmarks).

A judgement is remembered on disk (`program_choices.json` in squall's cache folder), keyed
by the traced program, its executors and their releases, the torch version and the thread
count: a later process skips the in-context timing (still comparing a remembered winner's
results with the torch plan's before installing it), and where the torch plan won, the whole
upgrade. Not remembered: a judgement whose sittings timed the torch plan far apart (DISTURBED).

Offers (`FusionExecutor.offers`, e.g. inductor's large regions, then islands) are tried in
order, and the first that beats the torch plan is installed at once: the user's calls run
fused from then on (`Upgrade.fused_after`). The later offers are compiled only where it did not
win by far (CLEAR_WIN), and in the background only after the jobs queued meanwhile had their
turn (`run` returns True and the worker queues the job again): compile time goes first where it
brings a fused plan at all. A later offer replaces the one running only when faster.

The jobs run in one background thread (squall.runtime.upgrade_worker: when a job is queued,
priority, exit), so the user's compute keeps its cores; a fusion executor may
compile elsewhere (inductor: in a worker process, `FusionExecutor.compile_site` says where,
and `upgrades(fn)` shows it). Its in-context judge times short batches and pauses between
them (`judge`'s slice_s and pause), so it holds the GIL the user's calls need only in short
stretches, a tenth of the time at most, as the job's other work here does (its planning, between
its stages: squall.market.pacing.pace), and stops after a few rounds where the verdict is
clear (judge_timing.DECISIVE): a judge is part of every cold time to fused speed.
"""
from __future__ import annotations

import hashlib
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..compiler.pipeline import STATE_KEYWORD, Compilation, compile_traced, state_as_keywords
from ..guards import GuardFailed
from ..ltorch.base import SquallWarning
from ..market.config import ExecutorPriority, background_fusers, background_priority
from ..market.executor import Executor
from ..market.fusion import PACE_PAUSE, FusionExecutor, compiling_stopped, pace
from ..sources import cache_root
from .choices import ChoiceStore
from .judge_compare import ill_conditioned, largest_difference, results_differ, rounding_change
from .judge_timing import Verdict, judge
from .judge_inputs import TensorSpec, call_specs, example_inputs, input_gradients

__all__ = ["Upgrade", "Verdict", "judge", "fusion_offers", "background_priority", "prepare_background", "call_specs", "UpgradeJob"]

# an offer that runs in at most this fraction of the torch plan's time in context wins outright:
# the offers after it (inductor: islands, after large regions) are not compiled
CLEAR_WIN = 0.8
# one upgrade's sittings time the same torch plan: where its best times differ by this factor, a sitting
# was disturbed (lfm2's took 238 ms a call beside another job's compiles, 1.6 ms in the next sitting), and
# the judgement is not remembered: a later process judges again rather than keep a noisy verdict for good
DISTURBED = 2.0
# programs whose drawn example inputs would take more memory than this are not judged in context
# (the copies the job holds and the caller's tensors it reads in place do not count)
JUDGE_MAX_BYTES = 1 << 30
# a woken worker first gives the GIL back for this long, so the call that queued the job returns at once
# instead of waiting out the worker's first switch interval (5 ms)
SETTLE_S = 0.02
# a background judge (beside the user's calls) times batches of about this long, and sleeps JUDGE_PAUSE times
# as long after each: it holds the GIL at most a tenth of the time, as the upgrade's other work here does (pace)
JUDGE_SLICE_S = 2e-3
JUDGE_PAUSE = PACE_PAUSE


@dataclass
class Upgrade:
    """One entry's background upgrade: what happened (`status`), why, and when it finished.

    status: "cold" (not queued yet: its entry has not been called enough, HOT_S); "pending"
    (queued or running); "upgraded" (a fused plan runs now: set as soon as the first offer that wins
    is installed, `fused_after` seconds after submission, while later offers may still be tried
    until `done` is set); "kept the torch plan" (judged
    slower in context, or its results differed); "nothing to fuse" (no region was kept);
    "evicted" (the entry left the cache, or was replanned, first); "failed" (an error, shown
    in `reason`); "cancelled" (the interpreter was exiting).
    """

    function: str
    status: str = "pending"
    reason: str = ""
    verdict: Verdict | None = None
    seconds: float = 0.0  # background time spent on it
    # seconds from submission (when it was queued) until a fused plan first ran (its time to fused speed); later offers
    # may still be tried (status "upgraded" before `done` is set)
    fused_after: float | None = None
    compiled_in: str = ""  # where its regions compiled (FusionExecutor.compile_site), when not in this process
    submitted: float = field(default_factory=time.perf_counter)
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def finish(self, status: str, reason: str = "") -> None:
        self.status, self.reason = status, reason
        self.seconds = time.perf_counter() - self.submitted
        self.done.set()

    def __str__(self) -> str:
        took = f" after {self.seconds:.1f} s" if self.done.is_set() else ""
        if self.fused_after is not None and (not self.done.is_set() or self.seconds - self.fused_after > 0.05):
            took += f" (fused plan running after {self.fused_after:.1f} s)"
        where = f", compiled {self.compiled_in}" if self.compiled_in else ""
        return f"{self.function}: {self.status}{took}{where}" + (f" ({self.reason})" if self.reason else "")


def prepare_background(executors: Sequence[Executor]) -> None:
    """Let the available fusion executors that compile in the background start, without blocking,
    what their first compile will need (`FusionExecutor.prepare`): called when squall.jit resolves
    its priority list, so an executor's seconds of start-up overlap the first calls, not the upgrade."""
    for ex in background_fusers(executors):
        ex.prepare()


def fusion_offers(executors: Sequence[Executor]) -> list[tuple[str, Sequence[Executor]]]:
    """The priority lists an upgrade plans the program with, in turn: the k-th has each available
    fusion executor replaced by its k-th offer (`FusionExecutor.offers`; its last where it has
    fewer), labelled by those offers' labels."""
    offers = {ex.name: ex.offers() for ex in executors if isinstance(ex, FusionExecutor) and ex.availability()}
    out = []
    for k in range(max((len(o) for o in offers.values()), default=1)):
        chosen = {name: o[min(k, len(o) - 1)] for name, o in offers.items()}
        swap = lambda ex: chosen[ex.name][1] if ex.name in chosen else ex  # noqa: E731
        if isinstance(executors, ExecutorPriority):
            planned: Sequence[Executor] = ExecutorPriority(
                [swap(ex) for ex in executors], per_op={op: [swap(ex) for ex in exs] for op, exs in executors.per_op.items()},
                source=executors.source)
        else:
            planned = [swap(ex) for ex in executors]
        out.append((" + ".join(label for label, _ in chosen.values()) or "regions", planned))
    return out


def _backward_the_calls_run(compilation: Compilation) -> tuple[frozenset[str], frozenset[int], dict[str, tuple[int, ...]]]:
    """The backward a differentiated program's calls ran: where every backward so far left the
    same outputs without a gradient (a training step's `loss.backward()` beside the logits it
    returns), those outputs' names and their positions among its autograd.Function's outputs
    (empty where the calls ran the full backward, more than one kind, or none yet); and the
    strides its inputs had, by name in the program's differentiation (empty where unknown)."""
    run = dict(compilation.backwards_run)  # a copy: the user's backwards add to it meanwhile
    names = next(iter(run)) if len(run) == 1 else frozenset()
    record, diff = run.get(names), compilation.differentiated
    if record is None or diff is None:
        return names, frozenset(), {}
    trace = (diff.backward_without(names) if names else None) or diff.backward
    strides = {p.name: s for p, s in zip(trace.inputs, record.input_strides) if s is not None}
    return names, record.outputs_without_gradient, strides


def _region_executors(compilation: Compilation) -> set[str]:
    return {r.executor for t in compilation if t.plan is not None for r in t.plan.regions}


# raised when the judge's checks change, so that no judgement made by the old ones is remembered
# (2: each plan run from the call's values where the program writes its inputs; gradients measured
# against the largest of them; 3: float32 on CUDA with TF32 allowed judged at float16's tolerance;
# 4: compared on drawn values too, as a zeros warm-up let plans wrong away from zero through; 5: the
# fused plan compared and timed once the compilations its first run started are done, FusionExecutor.settle)
JUDGE_REVISION = 5


# --- judgements remembered on disk ------------------------------------------------------------------

_stores: dict[Path, ChoiceStore] = {}


def _verdict_store() -> ChoiceStore:
    """The store of in-context judgements in squall's cache folder (resolved at each use)."""
    path = cache_root() / "program_choices.json"
    return _stores.setdefault(path, ChoiceStore(path))


def _program_key(compilation: Compilation, executors: Sequence[Executor], num_threads: int) -> str:
    # each executor's release too: a new release of a plugin compiles other regions, judged afresh
    names = (tuple((ex.name, ex.release()) for ex in executors), getattr(executors, "key", None))
    text = repr((str(compilation.traced), names, torch.__version__, num_threads, JUDGE_REVISION))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# --- the job and the worker ----------------------------------------------------------------------


class UpgradeJob:
    """Plan a compiled entry's traced program with the fusion executors, judge it, install it."""

    def __init__(self, upgrade: Upgrade, base: Compilation, layout: dict[str, Any], executors: Sequence[Executor],
                 call_specs: tuple[Any, tuple, dict], install: Callable[[Compilation, float], bool | None],
                 *, alive: Callable[[], bool] = lambda: True):
        self.upgrade, self.base, self.layout, self.executors = upgrade, base, layout, executors
        self.call_specs = call_specs  # (params, args, kwargs) with tensors as TensorSpec
        # install(compilation, seconds): True when swapped in; False when the entry was evicted
        # or replanned meanwhile; None when the jitted function is gone
        self.install, self.alive = install, alive
        self.grad_enabled = torch.is_grad_enabled()  # grad mode is per thread; the key holds the caller's
        self.background = False  # run by the worker thread, beside the user's calls (else in the caller's thread: wait=True)
        self.num_threads = torch.get_num_threads()
        # progress over the offers, kept between the worker's turns (`run` may return before the last)
        self._offers: list[tuple[str, Sequence[Executor]]] | None = None
        self._offer_count = 0
        self._key = ""
        self._remembered: dict | None = None
        self._tried: list[str] = []
        self._seconds = 0.0
        self._judged = False  # some offer kept regions and was judged
        self._torch_times: list[float] = []  # the torch plan's time in each sitting
        self._last_plan: Compilation | None = None
        # (ratio to the torch plan, label, verdict, plan) of the offer running now
        self._installed: tuple[float | None, str, Verdict, Compilation] | None = None
        # the backward the user's calls ran (`_backward_the_calls_run`): the one planned and judged
        self._backward_for: frozenset[str] = frozenset()
        self._outputs_without_gradient: frozenset[int] = frozenset()
        self._strides_met: dict[str, tuple[int, ...]] = {}  # of its inputs, as the user's calls met them

    def run(self) -> bool:
        """Plan, judge and install offers until done; True where a fused plan runs and more offers
        are left that the worker should try after the jobs queued meanwhile (background only)."""
        try:
            more = self._run()
        except Exception as e:  # noqa: BLE001 - a failed upgrade leaves the torch plan (or the offer installed) running
            self._finish_after_error(f"{type(e).__name__}: {e}")
            more = False
        if not more:
            self.call_specs = None  # the copies of guarded inputs go with the job, once it is done
        return more

    def cancel(self) -> None:
        """The interpreter is exiting: try no more offers (the one installed, if any, keeps running)."""
        self.call_specs = None
        if self._installed is not None:
            return self.upgrade.finish("upgraded", self._reason("; the interpreter exited before later offers were tried"))
        self.upgrade.finish("cancelled", "the interpreter is exiting")

    def _finish_after_error(self, error: str) -> None:
        if self._installed is not None:
            return self.upgrade.finish("upgraded", self._reason(f"; a later offer failed: {error}"))
        self.upgrade.finish("failed", error)

    def _reason(self, tail: str = "") -> str:
        label = self._installed[1] if self._installed is not None else ""
        kept = [f"kept {label}"] if label and self._offer_count > 1 else []
        return "; ".join(self._tried + kept) + tail

    def _run(self) -> bool:
        if not self.alive():
            self.upgrade.finish("evicted", "the jitted function no longer exists")
            return False
        if self._offers is None:  # first turn: what is remembered decides which offers to plan
            self._key = _program_key(self.base, self.executors, self.num_threads)
            self._backward_for, self._outputs_without_gradient, self._strides_met = _backward_the_calls_run(self.base)
            pace()
            self._remembered = _verdict_store().get(self._key)
            if self._remembered is not None and self._remembered["winner"] == "torch":
                self.upgrade.finish("kept the torch plan", f"remembered: {self._remembered['reason']}")
                return False
            offers = fusion_offers(self.executors)
            if self._remembered is not None:
                # the offer that won before is the only one planned (its regions come from inductor's caches)
                offers = [o for o in offers if o[0] == self._remembered.get("offer")] or offers[:1]
            self._offers, self._offer_count = list(offers), len(offers)
        while self._offers:
            label, executors = self._offers.pop(0)
            if not self._judge_offer(label, executors):
                return False  # finished (cancelled, evicted)
            if self._installed is None or not self._offers:
                continue
            ratio, running, _, _ = self._installed
            if ratio is None or ratio <= CLEAR_WIN:
                # the offer running beats the torch plan by far (or was remembered): later offers, which
                # fuse less (inductor: islands between the large regions' matmuls), are not compiled
                why = (f"{running} ran in {ratio:.2f}x the torch plan's time" if ratio is not None
                       else f"{running} was kept without an in-context time")
                skipped = ", ".join(o[0] for o in self._offers)
                self._tried.append(f"{skipped} not compiled ({why})")
                self._offers.clear()
                break
            if self.background:
                return True  # the fused plan runs; later offers wait until the jobs queued meanwhile had their turn
        return self._conclude()

    def _judge_offer(self, label: str, executors: Sequence[Executor]) -> bool:
        """Plan the program with one offer, judge it, and install it where it beats the torch plan and
        the offer running; False where the job finished instead (cancelled, evicted)."""
        named = f"{label}: " if self._offer_count > 1 else ""
        start = time.perf_counter()
        try:
            # the torch plan's differentiation: its values' names are those the strides were met under
            with torch.set_grad_enabled(self.grad_enabled):
                fused = compile_traced(self.base.traced, self.base.bindings, self.layout, executors=executors, backward_for=self._backward_for,
                                       differentiated=self.base.differentiated, strides=self._strides_met,
                                       backwards_later_on=background_priority(executors) if self.background else None)
        except Exception as e:  # noqa: BLE001 - one offer failing leaves the others to try
            if compiling_stopped():
                self.cancel()
                return False
            self._seconds += time.perf_counter() - start
            if self._offer_count == 1:
                raise
            self._tried.append(f"{named}planning failed ({type(e).__name__}: {e})")
            return True
        self._seconds += time.perf_counter() - start
        pace()
        sites = {ex.compile_site for ex in executors if isinstance(ex, FusionExecutor) and ex.compile_site}
        if sites:
            self.upgrade.compiled_in = "; ".join(sorted(sites))
        if compiling_stopped():
            self.cancel()
            return False
        self._last_plan = fused
        fusers = _region_executors(fused)
        if not fusers:
            self._tried.append(f"{named}no fusion region was kept")
            return True
        try:
            verdict = self._verdict(fused, fusers, self._remembered)
        except Exception as e:  # noqa: BLE001 - an offer whose program raises on the judge's inputs is not kept
            if self._offer_count == 1:
                raise
            self._tried.append(f"{named}its plan raised on the judge's inputs ({type(e).__name__}: {_first_line(e)})")
            return True
        self._tried.append(named + verdict.reason)
        self._judged = True
        if verdict.torch_s:
            self._torch_times.append(verdict.torch_s)
        if verdict.keep != "fused":
            if self._installed is None:
                self.upgrade.verdict = Verdict("torch", verdict.torch_s, verdict.fused_s, "; ".join(self._tried))
            return True
        timed = verdict.torch_s is not None and bool(verdict.fused_s)
        if self._installed is not None and verdict.running_s is None:
            return True  # not timed beside the offer running (untimed, remembered): that one stays
        if not self.install(fused, self._seconds):
            self.upgrade.finish("evicted", "the entry left the cache, or was replanned, before the upgrade")
            return False
        self._installed = (verdict.fused_s / verdict.torch_s if timed else None, label, verdict, fused)
        self.upgrade.verdict = Verdict("fused", verdict.torch_s, verdict.fused_s, self._reason())
        if self.upgrade.fused_after is None:
            self.upgrade.fused_after = time.perf_counter() - self.upgrade.submitted
        self.upgrade.status, self.upgrade.reason = "upgraded", self._reason()  # done is set once every offer is tried
        return True

    def _conclude(self) -> bool:
        times = self._torch_times
        disturbed = len(times) > 1 and max(times) > DISTURBED * min(times)
        # a judgement from disturbed sittings is not remembered (and one remembered is not remembered again)
        remembered = self._remembered or disturbed
        tail = (f"; not remembered: the torch plan's time differed {max(times) / min(times):.1f}x between sittings "
                "(a busy machine), a later process judges again") if disturbed else ""
        if self._installed is not None:
            _, label, verdict, _ = self._installed
            reason = self._reason(tail)
            self.upgrade.verdict = Verdict("fused", verdict.torch_s, verdict.fused_s, reason)
            if not remembered and verdict.torch_s is not None:
                _verdict_store().put(self._key, {"winner": "fused", "offer": label, "torch_s": verdict.torch_s,
                                                 "fused_s": verdict.fused_s, "reason": reason})
            self.upgrade.finish("upgraded", reason)
            return False
        if not self._judged:
            if self._last_plan is None:  # every offer failed to plan
                self.upgrade.finish("failed", "; ".join(self._tried))
                return False
            # no offer kept a region: the same calls on the same executors as the first plan, with
            # the fusion executors' reasons recorded, installed so that last_traces and explain show why
            self.install(self._last_plan, self._seconds)
            self.upgrade.finish("nothing to fuse", "no fusion region was kept (squall explain says why for each)")
            return False
        verdict = self.upgrade.verdict
        if not remembered and verdict is not None:  # every offer with regions was judged, and lost or computed other results
            _verdict_store().put(self._key, {"winner": "torch", "torch_s": verdict.torch_s,
                                             "fused_s": verdict.fused_s, "reason": "; ".join(self._tried)})
        self.upgrade.finish("kept the torch plan", "; ".join(self._tried) + tail)
        return False

    def _verdict(self, fused: Compilation, fusers: set[str], remembered: dict | None) -> Verdict:
        """The judgement of one offer's fused plan: remembered, timed in context, or not judged. A
        remembered win is not timed again, but its results are still compared: the regions it runs
        were compiled in this process (or loaded from inductor's caches, perhaps built on another
        machine sharing the folder), and no plan runs unseen. Where they differ, that verdict is
        replaced by this one."""
        if remembered is not None:
            checked = self._judge(fused, untimed="timed in an earlier process")
            if checked.keep != "fused":
                self._remembered = None  # (`_conclude` remembers the torch plan's win instead)
                return checked
            return Verdict("fused", remembered.get("torch_s"), remembered.get("fused_s"), f"remembered: {remembered['reason']} ({checked.reason})")
        if any(ex.name in fusers and getattr(ex, "judge_in_context", True) for ex in self.executors):
            return self._judge(fused)
        # not timed, but its results are compared: a plan nobody ran is never installed unseen
        return self._judge(fused, untimed=f"not timed in context: {', '.join(sorted(fusers))} asked not to be")

    def _judge(self, fused: Compilation, untimed: str = "") -> Verdict:
        """The in-context judgement: results compared, then both plans timed; with `untimed` (why
        they are not timed) the results only."""
        params, args, kwargs = self.call_specs
        specs = [s for s in tree_flatten((params, args, kwargs))[0] if isinstance(s, TensorSpec)]
        random = self.base.draws_random_numbers
        if random and self.background:
            # running it would advance the user's random generator under their program's feet (in
            # the caller's thread, wait=True, the generator's state is put back after the judge)
            return Verdict("fused", None, None, "not judged in context: the program draws random numbers, and "
                           "the user's calls draw beside the background judge; each region won its own timing")
        if sum(s.nbytes for s in specs if s.value is None and s.lent() is None) > JUDGE_MAX_BYTES:
            return Verdict("fused", None, None, f"not judged in context: the example inputs it would draw take more than "
                           f"{JUDGE_MAX_BYTES >> 20} MiB; each region won its own timing")
        try:
            if not random:
                return self._judge_on_examples(fused, specs, untimed=untimed)
            cuda = sorted({s.device.index or 0 for s in specs if s.device.type == "cuda"})
            with torch.random.fork_rng(devices=cuda):  # the user's random stream is as it was before the judge
                verdict = self._judge_on_examples(fused, specs, compare=False, untimed=untimed)
            if verdict.keep != "fused":
                return verdict
            return replace(verdict, reason=f"{verdict.reason} (values not compared, only where they are NaN or infinite: the "
                                           "program draws random numbers, and a fused kernel may draw others than torch's)")
        except GuardFailed as failed:
            # the inputs its value guards read were not kept (too large), or the program changes them
            return Verdict("fused", None, None, f"not judged in context: a value guard failed on the judge's inputs "
                           f"({failed}); each region won its own timing")

    def _runnable(self, compilation: Compilation) -> Callable:
        """The program as the judge calls it: taking what it reads from objects as the keywords
        `call_specs` kept them under, where it reads any (squall.compiler.pipeline.state_as_keywords)."""
        if not compilation.state_bindings or not any(k.startswith(STATE_KEYWORD) for k in self.call_specs[2]):
            return compilation.fn
        return state_as_keywords(compilation, self.layout).fn

    def _runner(self, borrow: bool, drawn: bool = False, rounded: bool = False) -> tuple[Callable[[Callable], tuple[Any, tuple]], list[torch.Tensor]]:
        """A function running a plan on example inputs (the caller's own tensors where `borrow` and
        the job holds them: `_example`; drawn floats where `drawn`: `example_inputs`), returning its
        outputs and its inputs' gradients; and those inputs that are the caller's tensors. With
        `rounded`, each floating input the job made (none of the caller's) is changed by a few
        rounding errors (judge_compare.rounding_change)."""
        (params, args, kwargs), lent = example_inputs(self.call_specs, borrow, drawn)
        lead = (params,) if self.layout.get("takes_params") else ()
        # a differentiated program runs its backward after every call: the judge runs it too (its
        # results checked, its time counted), so a fused backward is never installed unseen
        tensors = [t for t in tree_flatten((params, args, kwargs))[0] if isinstance(t, torch.Tensor)]
        leaves = [t for t in tensors if t.requires_grad]
        # a program writing its inputs in place (running statistics, a KV cache) leaves them changed:
        # each run starts from the values the first one had, as both plans must (a lent tensor is
        # one the program never writes)
        lent_ids = {id(t) for t in lent}
        if rounded:
            for t in tensors:
                if t.is_floating_point() and id(t) not in lent_ids:
                    with torch.no_grad():
                        t.mul_(rounding_change(t))
        restore = [[t, t.detach().clone(), t._version] for t in tensors if id(t) not in lent_ids] if self.base.writes_inputs else []

        def run(fn: Callable) -> tuple[Any, tuple]:
            for held in restore:
                tensor, values, version = held
                if tensor._version != version:
                    with torch.no_grad():
                        tensor.copy_(values)
                    held[2] = tensor._version
            out = fn(*lead, *args, **kwargs)
            return out, input_gradients(out, leaves, self._outputs_without_gradient)

        return run, lent

    def _judge_on_examples(self, fused: Compilation, specs: list[TensorSpec], compare: bool = True, untimed: str = "") -> Verdict:
        """Check the fused plan's results against the torch plan's on example inputs (the call's
        own values where its value guards read them; not with `compare` False), then time both there
        (not with `untimed`, why not); a differentiated program's backward, run with gradients of ones,
        is checked and timed with it. The plans run unchecked (squall.compiler.checking): a checked call
        puts back an input whose version changed during it, and in the background the caller's tensors
        read in place (a model's weights) change under an optimizer step beside the judge."""
        torch_fn, fused_fn = self._runnable(self.base), self._runnable(fused)
        # the offer running now is timed in the same sitting, so that the two are compared directly
        running_fn = (self._installed[1], self._runnable(self._installed[3])) if self._installed is not None else None
        with torch.set_grad_enabled(self.grad_enabled):
            run, lent = self._runner(borrow=True)
            settling = [ex for ex in self.executors if isinstance(ex, FusionExecutor) and type(ex).settle is not FusionExecutor.settle]
            if settling:
                # a first run starts what its regions compile for these inputs (a symbolic region met
                # with a size of 1), waited for: the runs compared and timed below run what later calls do
                run(fused_fn)
                for ex in settling:
                    ex.settle()
            versions = [t._version for t in lent]
            (torch_out, torch_grads), (fused_out, fused_grads) = run(torch_fn), run(fused_fn)
            if [t._version for t in lent] != versions:
                # the user's program wrote a tensor the judge reads in place between the two runs (an
                # optimizer step beside a background judge): they did not run on the same values
                run, _ = self._runner(borrow=False)
                (torch_out, torch_grads), (fused_out, fused_grads) = run(torch_fn), run(fused_fn)
            # values drawn at random differ between plans; where NaNs and infinities are does not
            differ = results_differ((torch_out, torch_grads), (fused_out, fused_grads), values=compare)
            # the call's values decide strictly; where rounding explains the difference there, the torch plan is
            # kept without warning that the fused plan is wrong (MobileNetV2's batch norms over 2 images)
            rounding = differ and compare and self._rounding_explains(torch_fn, (torch_out, torch_grads), (fused_out, fused_grads),
                                                                      borrow=True, drawn=False)
            backward = bool(torch_grads)
            del torch_out, fused_out, torch_grads, fused_grads
            if rounding:
                return Verdict("torch", None, None, f"its results differ from the torch plan's ({differ}) on the call's values, and {rounding}; "
                                                    "the call's values decide, strictly")
            compared = "on example inputs"
            if compare:
                compared = "on the call's values"
                differ = differ and f"{differ} on the call's values"
                if not differ:
                    differ, not_drawn = self._differ_on_drawn_values(torch_fn, fused_fn)
                    compared += f" ({not_drawn})" if not_drawn else " and on drawn values"
            if differ:
                warnings.warn(f"squall: the fused plan of {self.upgrade.function} computes other results than its "
                              f"torch plan ({differ}); the torch plan keeps running",
                              SquallWarning, stacklevel=2)
                return Verdict("torch", None, None, f"its results differ from the torch plan's: {differ}")
            if untimed:
                matched = "its results matched the torch plan's" if compare else "no NaNs or infinities where the torch plan has none"
                return Verdict("fused", None, None, f"{untimed}; {matched} {compared}")
            cuda = any(s.device.type == "cuda" for s in specs)
            # short batches (stopping early once the verdict is clear), with pauses beside the user's calls
            polite = dict(slice_s=JUDGE_SLICE_S, pause=JUDGE_PAUSE if self.background else 0.0)
            if running_fn is not None:
                polite["running"] = (running_fn[0], lambda: run(running_fn[1]))
            verdict = judge(lambda: run(torch_fn), lambda: run(fused_fn),
                            sync=torch.cuda.synchronize if cuda else (lambda: None), device_type="cuda" if cuda else "cpu", **polite)
        if compare:
            verdict = replace(verdict, reason=f"{verdict.reason}, its results matching the torch plan's {compared}")
        if not backward:
            return verdict
        # the backward timed is the one the user's calls ran
        n = len(self._backward_for)
        which = f" (for calls leaving {n} output{'s' if n > 1 else ''} without a gradient, as the user's did)" if n else ""
        return replace(verdict, reason=verdict.reason.replace(" per call ", f" per call and its backward{which} "))

    def _differ_on_drawn_values(self, torch_fn: Callable, fused_fn: Callable) -> tuple[str, str]:
        """The plans' results compared a second time, on drawn floats (judge_inputs.example_inputs):
        the call's values may be degenerate (a warm-up with zeros), and a plan wrong away from them
        would pass. Returns why they differ ("" where they agree), and why they were not compared
        ("" where they were): a guard failing on the drawn values, or the torch plan raising on
        them, refuses no plan."""
        if not any(isinstance(s, TensorSpec) and s.drawable for s in tree_flatten(self.call_specs)[0]):
            return "", "not compared on drawn values: it has no floating input of its own to draw"
        for borrow in (True, False):
            try:
                run, lent = self._runner(borrow=borrow, drawn=True)
                versions = [t._version for t in lent]
                torch_out, torch_grads = run(torch_fn)
            except GuardFailed as failed:
                return "", f"not compared on drawn values: a value guard failed on them ({failed})"
            except Exception as e:  # noqa: BLE001 - the program itself rejects the drawn values (a check on them)
                return "", f"not compared on drawn values: the torch plan raised on them ({type(e).__name__}: {_first_line(e)})"
            try:
                fused_out, fused_grads = run(fused_fn)
            except GuardFailed as failed:
                return "", f"not compared on drawn values: a value guard failed on them ({failed})"
            except Exception as e:  # noqa: BLE001 - where the torch plan ran, the fused plan must too
                return f"it raised on drawn values where the torch plan did not ({type(e).__name__}: {_first_line(e)})", ""
            if [t._version for t in lent] == versions:
                break
            # (as on the call's values) the user's program wrote a tensor read in place between the runs
        differ = results_differ((torch_out, torch_grads), (fused_out, fused_grads))
        if not differ:
            return "", ""
        rounding = self._rounding_explains(torch_fn, (torch_out, torch_grads), (fused_out, fused_grads), borrow=borrow, drawn=True)
        if rounding:
            return "", f"not compared on drawn values: {rounding}"
        return f"{differ} on drawn values", ""

    def _rounding_explains(self, torch_fn: Callable, torch_results: Any, fused_results: Any, *, borrow: bool, drawn: bool) -> str:
        """Why rounding alone can explain how far the plans' results are apart ("" where it cannot): the torch
        plan, run again on the same values each changed by a few rounding errors (judge_compare.ill_conditioned), moves its own
        results by at least a tenth of that distance."""
        apart = largest_difference(torch_results, fused_results)
        try:
            rounded, _ = self._runner(borrow=borrow, drawn=drawn, rounded=True)
            moved = largest_difference(torch_results, rounded(torch_fn))
        except Exception:  # noqa: BLE001 - (a guard failing on the changed values) no measure of the noise: they differ
            return ""
        return ill_conditioned(apart, moved)


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else ""
