"""The inductor fusion executor: fusion regions compiled by inductor, without Dynamo.

It claims what inductor does well — elementwise chains, reductions, normalizations,
softmax, losses, and the views between them — as whole torch-language ops, so inductor
sees `layer_norm`, not its fifteen prims. Matmuls, convolutions and attention stay with
the torch executor unless `include_matmuls` (or SQUALL_INDUCTOR_MATMULS=1) says otherwise.

Each region becomes a function of torch calls (`regions.region_function`), traced to an FX
graph and compiled by inductor's own entry point (`regions.CompiledRegion`: no Dynamo frame
and no guard check when it is called; squall's guards already decided the plan is valid) at
plan time, so a region inductor cannot compile falls back to the torch executor with a
warning instead of failing at run time. With `autotune` (the default; SQUALL_INDUCTOR_AUTOTUNE=0
turns it off) the compiled region is timed against the torch executor's calls on the
region's real shapes and kept only when it is faster; the winner is remembered on disk
(`choices.ChoiceStore`). Identical regions share one compilation (squall's FusionExecutor).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from squall.extend import (
    CHECKER_DECLINED,
    NOT_IMPLEMENTED,
    Availability,
    BoundSymbol,
    Declined,
    FusionExecutor,
    FusionRegion,
    Implementation,
    NumberProxy,
    PrimIDs,
    SquallWarning,
    Symbol,
    Tags,
    TensorProxy,
    all_prims,
    compiling_stopped,
    concrete_shape,
    in_background_upgrade,
    note_strides,
    symbols_of,
    tensor_problem,
    upgrades_are_awaited,
)

from squall_inductor.choices import ChoiceStore, best_time, default_choices_path, region_key
from squall_inductor.meta_dtypes import dtypes_differ
from squall_inductor.regions import CompiledRegion, OtherValues, example_inputs, region_function, size_reads, torch_callable, unlike_torch_calls
from squall_inductor.symbolic import SymbolicRegion, wait_for_variants
from squall_inductor.worker import (CompileUnsupported, RegionCompiler, WorkerCompileError, claim_worker, default_worker, described, dynamo_unsupported,
                                    env_flag, release_worker, start_spare_workers, subprocess_enabled, worker_limit)

__all__ = ["InductorExecutor", "FUSIBLE_PRIMS", "MATMUL_PRIMS", "PRIMS_WITHIN", "cpp_compiler", "env_flag"]

# prims inductor fuses well, beyond every elementwise, reduction and view prim
_EXTRA_PRIMS = {
    PrimIDs.CAT, PrimIDs.PAD, PrimIDs.FLIP, PrimIDs.FULL, PrimIDs.IOTA,
    PrimIDs.TAKE, PrimIDs.TAKE_ALONG_AXIS, PrimIDs.INDEX,  # gathers by integer indices (Swin's position bias)
}
# not claimed: random draws (inductor's RNG differs from eager's), in-place copies, scatters,
# sorts and scans (no fusion win), opaque torch calls
FUSIBLE_PRIMS: frozenset[str] = frozenset(
    pid for pid, p in all_prims().items()
    if (p.tags & {Tags.ELEMENTWISE, Tags.REDUCTION, Tags.SHAPE_ONLY} or pid in _EXTRA_PRIMS)
    and not p.tags & {Tags.RANDOM, Tags.SIDE_EFFECT}
)
# prims claimed only inside these torch-language ops, where inductor makes one pointwise kernel of
# them: nll_loss's backward scatters one value per row into zeros (a row's index is its target, so
# no two writes meet and the result is eager's), which inductor fuses with log_softmax's backward;
# on torch instead it fills and writes a logits-sized tensor that log_softmax's backward reads again
# (the gpt training step: [512, 8192], 16 MB)
PRIMS_WITHIN: dict[str, frozenset[str]] = {
    "aten.nll_loss_backward": frozenset({PrimIDs.SCATTER}),
    "aten.nll_loss2d_backward": frozenset({PrimIDs.SCATTER}),
}
# on CPU inductor calls the same BLAS/oneDNN kernels for these; opt in with include_matmuls
MATMUL_PRIMS: frozenset[str] = frozenset({PrimIDs.MATMUL, PrimIDs.CONVOLUTION})
_MATMUL_HINT = "matmuls, convolutions and attention stay with torch unless SQUALL_INDUCTOR_MATMULS=1"
# a region must beat the torch executor by this factor to be kept: timing noise is not a win
_MARGIN = 0.97
# what calling a compiled region costs by itself (inductor's wrapper; no Dynamo frame): about
# 5-10 us per call on CPU (bench/region_call.py: a compiled 3-op region on one element, torch
# 2.13, one thread; through torch.compile it was 45 us), so a region eager runs faster than this
# cannot win, and is neither compiled nor timed
CALL_OVERHEAD_S = 8e-6
# each contender's share of timing one region against torch (choices.best_time)
_REGION_TIMING_S = 0.1
# the judge waits at most this long for a symbolic region's later compilations (`settle`): a compile
# in the worker takes seconds; past this the judge times what runs meanwhile, the region's torch calls
SETTLE_TIMEOUT_S = 300.0


# torch calls eager runs that inductor's tracing cannot take (its meta function refuses them): a
# region holding one fails to compile, and torch logs each failed meta at error level
_INDUCTOR_REFUSES: dict[str, tuple[Callable[[BoundSymbol], bool], str]] = {
    "torch._grouped_mm": (
        lambda bsym: any(p.dtype != torch.bfloat16 for p in bsym.input_proxies()[:2]),
        "inductor's torch._grouped_mm takes bfloat16 operands only (its meta function refuses others)",
    ),
}


def _computed_otherwise_than_eager(bsym: BoundSymbol) -> str:
    """Why inductor's CPU kernel for the call would not compute what eager does ("" where it would), for
    divisions whose results eager's kernels round exactly (torch 2.13):
    - integers divided rounding toward zero by a tensor or by 0: inductor divides unchecked, so a zero
      divisor kills the process with SIGFPE where eager raises ZeroDivisionError (its integer floor
      division, fmod and remainder check);
    - floating-point floor division and remainder: inductor computes floor(a / b) and a - floor(a / b) * b
      in the tensor's dtype, where eager's are exact (from fmod): `x % 0.7` of values near 1e6 differed by
      up to 0.11, near 1e3 by 1e-4, `-1e30 % 5.5` gave 7.6e22 for eager's 1.5, and infinities differ
      (`inf // 2.5`: eager nan, inductor inf; `0 % inf`: eager 0, inductor nan)."""
    for p in _walk_prims(bsym):
        if p.sym.id not in (PrimIDs.DIV, PrimIDs.REMAINDER):
            continue
        floating = p.output.dtype.is_floating_point or p.output.dtype.is_complex
        rounding = (p.args[2] if len(p.args) > 2 else p.kwargs.get("rounding_mode")) if p.sym.id == PrimIDs.DIV else None
        divisor = p.args[1]
        if rounding == "trunc" and not floating and (isinstance(divisor, TensorProxy) or divisor == 0):
            return ("integers divided rounding toward zero by a tensor: inductor's kernel does not check for a zero divisor "
                    "(SIGFPE, where eager raises ZeroDivisionError)")
        if floating and (p.sym.id == PrimIDs.REMAINDER or rounding == "floor"):
            return ("floating-point floor division or remainder: inductor computes a - floor(a / b) * b in the tensor's dtype, "
                    "where eager's kernel is exact (from fmod): they differ for large magnitudes and infinities")
    return ""


def cpp_compiler() -> str | None:
    """The C++ compiler inductor's CPU backend would use ($CXX, else its configured default), if found."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else []
    config = sys.modules.get("torch._inductor.config")
    if not candidates and config is not None:
        # read inductor's setting only where it is already imported: importing torch._inductor
        # costs seconds (it loads dynamo), too much for a question `squall.jit(..., ["torch"])` asks
        try:
            cxx = config.cpp.cxx
            candidates = [c for c in (cxx if isinstance(cxx, tuple) else (cxx,)) if c] + ["g++", "clang++"]
        except Exception:  # noqa: BLE001 - an unusable inductor shows when a region compiles
            pass
    candidates = candidates or ["g++", "clang++"]  # inductor's own default: $CXX, else g++ (clang++ on macOS)
    for c in candidates:
        found = shutil.which(c)
        if found:
            return found
    return None


def _walk_prims(bsym: BoundSymbol):
    for b in bsym.walk():
        if b.sym.is_prim:
            yield b


class InductorExecutor(FusionExecutor):
    """Fuses elementwise, reduction and normalization regions and compiles each with inductor."""

    # a region with symbolic sizes is compiled once for all their values (squall_inductor.symbolic)
    symbolic_shapes = True

    def __init__(
        self,
        name: str = "inductor",
        *,
        include_matmuls: bool | None = None,
        autotune: bool | None = None,
        choices_path: Path | None | str = "default",
        default_rank: int = 50,
        min_eager_seconds: float = CALL_OVERHEAD_S,
    ):
        super().__init__(name, version=torch.__version__, default_rank=default_rank)
        # the cost model (squall's FusionExecutor.skip_reason): a lone op of fewer than three
        # prims fuses nothing; a region eager runs in less than a compiled call costs cannot win
        self.min_compute_prims = 3
        self.min_eager_seconds = min_eager_seconds
        self.include_matmuls = env_flag("SQUALL_INDUCTOR_MATMULS", False) if include_matmuls is None else include_matmuls
        # whether the user chose (argument or environment) between large regions and islands;
        # if not, both are offered to squall.runtime.tiers' judge (`offers`)
        self.matmuls_chosen = include_matmuls is not None or bool(os.environ.get("SQUALL_INDUCTOR_MATMULS", "").strip())
        self._large_regions: InductorExecutor | None = None
        self.autotune = env_flag("SQUALL_INDUCTOR_AUTOTUNE", True) if autotune is None else autotune
        self.judge_in_context = self.autotune  # autotune off: every region with real work is kept, untimed
        # each region timed alone against torch (autotune); the large-region offer leaves its
        # (few, large) regions to the in-context judge, which times the whole program anyway
        self.time_regions = self.autotune
        path = default_choices_path() if choices_path == "default" else (Path(choices_path) if choices_path else None)
        self.choices = ChoiceStore(path)
        self.prims = FUSIBLE_PRIMS | (MATMUL_PRIMS if self.include_matmuls else frozenset())
        # what happened to each region signature compiled here: "inductor", or why torch runs it
        self.outcomes: list[tuple[list[str], str]] = []
        self._backends: frozenset[str] | None = None
        self._unsupported: str | None = None  # why torch.compile cannot run here; None: not asked yet
        self._warned: set[str] = set()  # the compile failures already warned about

    # --- availability -----------------------------------------------------------------------
    def backends(self) -> frozenset[str]:
        """The device types inductor can compile for here: "cpu" with a C++ compiler, "cuda" with Triton."""
        if self._backends is None:
            found = set()
            if cpp_compiler() is not None:
                found.add("cpu")
            if torch.cuda.is_available() and Availability.of_library("triton"):
                found.add("cuda")
            self._backends = frozenset(found)
        return self._backends

    def is_available(self) -> Availability:
        # cheap on purpose: every squall.jit asks (even one naming only "torch"), and importing
        # torch._dynamo costs seconds; whether dynamo supports this Python is asked before the
        # first compile (`_dynamo_unsupported`), and a region then goes back to torch saying why
        try:
            found = importlib.util.find_spec("torch._dynamo") is not None
        except (ImportError, ValueError) as e:
            return Availability(False, f"torch.compile cannot be found: {type(e).__name__}: {e}")
        if not found:
            return Availability(False, f"torch {torch.__version__} has no torch.compile (torch._dynamo)")
        if not self.backends():
            cxx = os.environ.get("CXX")
            compiler = f"the C++ compiler $CXX={cxx!r} is not found" if cxx else "no C++ compiler (g++ or clang++) is found"
            cuda = "CUDA is not available" if not torch.cuda.is_available() else "triton is not installed"
            return Availability(False, f"inductor has no backend here: {compiler} for CPU, and {cuda}")
        return Availability(True)

    # --- claims -----------------------------------------------------------------------------
    def implementation_for(self, sym: Symbol) -> Implementation | None:
        # torch-language ops are claimed whole (when their decomposition is fusible, see offer)
        # so that regions keep the high-level op for inductor
        if sym.is_prim:
            return Implementation(None) if sym.id in self.prims else None
        if Tags.OPAQUE in sym.tags or not sym.torchfns:
            return None
        return Implementation(None)

    def claimed_ops(self) -> list[str]:
        return sorted(self.prims)

    def offers(self) -> list[tuple[str, InductorExecutor]]:
        """"large regions" first — matmuls, linears, convolutions, attention and embeddings with
        their epilogues, up to the whole program — then the elementwise "islands" between them;
        squall.runtime.tiers' judge keeps the fastest that beats the torch plan in context. Only one of
        them where the user chose (include_matmuls, SQUALL_INDUCTOR_MATMULS), or where regions
        are not timed (autotune off: there is nothing to choose by)."""
        if self.availability():
            self.prepare()  # started at squall.jit already; here for offers asked without it
        if self.matmuls_chosen or not self.autotune:
            return [("large regions" if self.include_matmuls else "islands", self)]
        if self._large_regions is None:
            large = InductorExecutor(self.name, include_matmuls=True, autotune=True, choices_path=None,
                                     default_rank=self.default_rank, min_eager_seconds=self.min_eager_seconds)
            large.choices, large.distribution = self.choices, self.distribution  # one store, one file
            large.time_regions = False
            self._large_regions = large
        return [("large regions", self._large_regions), ("islands", self)]

    def prepare(self) -> None:
        """Start the compile worker process (squall_inductor.worker), at squall.jit: its imports and
        inductor's one-time CPU costs (the vector-ISA probe, the precompiled header; seconds) run at a
        low priority while the first calls run on the torch plan, not when the first upgrade asks.
        Starting it costs the caller about a millisecond (one process spawn), and nothing with
        SQUALL_INDUCTOR_SUBPROCESS=0 or where squall.jit's executors leave inductor out."""
        if subprocess_enabled():
            default_worker().start()

    def settle(self) -> None:
        """Wait (at most SETTLE_TIMEOUT_S) for the later compilations symbolic regions started in the
        background (squall_inductor.symbolic: a size of 1, another memory order, a static fallback)."""
        wait_for_variants(SETTLE_TIMEOUT_S)

    def parallel_compiles(self) -> int:
        """Regions compile side by side, each in a worker process of its own (worker_limit: 2 where
        the machine has 2 cores or more), where the caller waits for them (wait=True,
        squall.wait_for_upgrades); one at a time beside the user's calls (a background upgrade, so
        the user's thread keeps its core), and where they compile in this process. Where several,
        the spare workers start now: their imports overlap the compiles of the pass that asked (the
        large regions'), before the islands' pass compiles side by side."""
        if not subprocess_enabled() or (in_background_upgrade() and not upgrades_are_awaited()):
            return 1
        count = worker_limit()
        if count > 1:
            start_spare_workers(count)
        return count

    def offer(self, bsym: BoundSymbol) -> tuple[Implementation | None, str]:
        if self.implementation_for(bsym.sym) is None:
            hint = f" ({_MATMUL_HINT})" if bsym.sym.id in MATMUL_PRIMS else ""
            return None, NOT_IMPLEMENTED + hint
        within = PRIMS_WITHIN.get(bsym.sym.id, frozenset())
        for p in _walk_prims(bsym):
            if p.sym.id not in self.prims and p.sym.id not in within:
                hint = f"; {_MATMUL_HINT}" if p.sym.id in MATMUL_PRIMS else ""
                return None, f"{NOT_IMPLEMENTED} (in its decomposition, {p.sym.id}{hint})"
        refuses, why = _INDUCTOR_REFUSES.get(bsym.sym.id, (None, ""))
        if refuses is not None and refuses(bsym):
            return None, f"{CHECKER_DECLINED}: {why}"
        unlike_eager = _computed_otherwise_than_eager(bsym)
        if unlike_eager:
            return None, f"{CHECKER_DECLINED}: {unlike_eager}"
        inputs, outputs = bsym.input_proxies(), bsym.output_proxies()
        if any(type(p) is NumberProxy for p in inputs + outputs):
            # regions are compiled for constant scalars (dynamic=False): a number read at run time stays with torch
            return None, f"{CHECKER_DECLINED}: a number known only at run time (a dynamic Python number)"
        if not outputs:
            return None, f"{CHECKER_DECLINED}: it returns nothing, there is nothing to compute"
        if Tags.RANDOM in bsym.sym.tags and {id(p) for p in outputs} & {id(p) for p in inputs}:
            # a draw that returned its input (eval-mode dropout) splits no region where it stays
            return None, f"{CHECKER_DECLINED}: it returns its input, there is nothing to compute"
        # a call that returns its input otherwise (contiguous: squall's values have no strides) is
        # taken: inside a region it makes the layout the calls after it need, and outside one it
        # would split the region around it (Swin: six regions per block for one)
        for p in inputs + outputs:
            if p.device.type not in self.backends():
                return None, f"{CHECKER_DECLINED}: inductor has no {p.device.type} backend here"
            if p.dtype.is_complex:
                return None, f"{CHECKER_DECLINED}: complex tensors"
        if not bsym.sym.is_prim:
            # a region returns what inductor traced: an output in another dtype than the trace's would
            # reach calls planned (and compiled) for the trace's (CPU batch norm under autocast)
            why = dtypes_differ(bsym, torch_callable(bsym))
            if why:
                return None, f"{CHECKER_DECLINED}: {why}"
        return Implementation(None), ""

    # --- compilation --------------------------------------------------------------------------
    def compile_region(self, region: FusionRegion) -> Callable | Declined:
        """The region compiled by inductor, or `Declined(why)` where the torch executor should run it."""
        ops = [b.sym.id for b in region.calls]
        # whether torch.compile runs on this Python is asked only where a region must compile (it
        # imports Dynamo, seconds): a region kept on disk loads without it
        why = self._decline_statically(region)
        if why:
            return self._declined(ops, why)
        device = str(region.inputs[0].device if region.inputs else region.outputs[0].device)
        # a region remembered as faster on torch stays there in either offer; only islands measure
        key = region_key(region.signature(), device, self.release()) if self.autotune else ""
        remembered = self.choices.get(key) if self.autotune else None
        if remembered is not None and remembered["winner"] == "torch":
            return self._declined(ops, _torch_won(remembered, "remembered"))
        symbolic = _is_symbolic(region)
        if symbolic:
            _, unread = size_reads(region)
            if unread:
                return self._declined(ops, f"{CHECKER_DECLINED}: symbolic sizes ({', '.join(sorted(unread))}) that no "
                                      "input of the region holds as a dimension: its function cannot read them")
        eager, source = region_function(region)
        args = example_inputs(region.inputs)
        timed = self.time_regions and remembered is None
        # a region is compiled (and a static one timed) in the worker process where it serves: the
        # user's process only loads it, and never runs torch.fx's trace, which patches
        # torch.nn.Module process-wide while it runs (a user's thread calling a model meanwhile
        # would go through the patch)
        worker = claim_worker() if subprocess_enabled() else None  # (a worker of its own where regions compile side by side)
        compiler = RegionCompiler(eager, source, worker=worker, time_budget_s=_REGION_TIMING_S if timed and not symbolic else None,
                                  unsupported=self._dynamo_unsupported)
        try:
            if symbolic:  # one compilation for every value of its sizes (squall_inductor.symbolic)
                # calls its guards refuse: their compilations run in the background, in the worker only
                later = worker is not None and not worker.broken
                ordered = RegionCompiler(eager, source, worker=worker, in_process=not later, unsupported=self._dynamo_unsupported)
                static = RegionCompiler(eager, source, worker=worker, in_process=not later, unsupported=self._dynamo_unsupported)
                compiled = SymbolicRegion(eager, region.inputs, outputs=region.outputs, compile=compiler.symbolic, compile_ordered=ordered.symbolic,
                                          compile_static=static, background=later)
            else:
                compiled = CompiledRegion(eager, args, compile=compiler)
            # a region that compiles but cannot run falls back here too; its outputs' layouts are
            # those the regions planned after it take
            outputs = compiled(*args)
            unlike = _unlike_trace(region.outputs, outputs) or unlike_torch_calls(eager, args, outputs)
            if unlike:
                # the calls planned after it were planned (and compiled) for the trace's metadata: a
                # region compiled for float32 reads a bfloat16 tensor's buffer as floats, past its end
                return self._declined(ops, f"{CHECKER_DECLINED}: inductor's compiled region {unlike}", split=True)
            note_strides(region.outputs, outputs)
        except CompileUnsupported as e:
            return self._declined(ops, str(e))
        except OtherValues as e:  # a symbolic region's first compilation, checked as it is made: declined as above
            return self._declined(ops, f"{CHECKER_DECLINED}: {e}", split=True)
        except Exception as e:  # noqa: BLE001 - any inductor failure means "run it with torch"
            text = str(e).strip()
            message = text if isinstance(e, WorkerCompileError) else described(e)
            if compiling_stopped():  # the interpreter began exiting mid-compile: nobody runs this plan
                return self._declined(ops, f"the interpreter is exiting ({message})")
            if message not in self._warned:  # its parts often fail alike (a missing compiler): said once
                self._warned.add(message)
                warnings.warn(
                    f"squall-inductor: inductor could not compile a region of {len(ops)} ops ({', '.join(ops)}); "
                    f"its parts are offered again, and what inductor cannot compile runs on the torch executor ({message})",
                    SquallWarning,
                    stacklevel=2,
                )
            self.compile_errors.append(f"region ({', '.join(ops)}) falls back to torch: {message}")
            how = " for symbolic sizes" if symbolic else ""
            return self._declined(ops, f"inductor could not compile it{how}: {message}", split=True)
        finally:
            self.compile_site = compiler.where or "in this process"
            if worker is not None:
                release_worker(worker)
        if timed:
            torch_s, inductor_s = compiler.timings or (best_time(eager, args, device=device, budget_s=_REGION_TIMING_S),
                                                       best_time(compiled, args, device=device, budget_s=_REGION_TIMING_S))
            remembered = {"winner": "inductor" if inductor_s < torch_s * _MARGIN else "torch",
                          "torch_s": torch_s, "inductor_s": inductor_s, "ops": ops}
            self.choices.put(key, remembered)
            if remembered["winner"] == "torch":
                return self._declined(ops, _torch_won(remembered, "measured"))
        self.outcomes.append((ops, "inductor"))
        return compiled

    def _dynamo_unsupported(self) -> str:
        """Why torch.compile cannot run here ("" when it can); asked once, before the first compile in
        this process (a region kept on disk loads without asking; the compile worker asks in its own)."""
        if self._unsupported is None:
            self._unsupported = dynamo_unsupported()
        return self._unsupported

    def _declined(self, ops: list[str], why: str, *, split: bool = False) -> Declined:
        self.outcomes.append((ops, why))
        return Declined(why, split=split)

    def _decline_statically(self, region: FusionRegion) -> str:
        # pure metadata, a lone cheap op, a region too small to win: squall's cost model
        # (skip_reason) has handed those back before compile_region is asked
        return "" if region.outputs else "no outputs"


def _is_symbolic(region: FusionRegion) -> bool:
    """Whether the region's tensors or its calls' arguments hold a symbolic size (squall.symbolic)."""
    proxies = (*region.inputs, *region.outputs, *(p for b in region.calls for p in b.output_proxies()))
    return any(symbols_of(p.shape) for p in proxies) or bool(size_reads(region)[0] or size_reads(region)[1])


def _unlike_trace(expected: list, outputs: Any) -> str:
    """How a compiled region's outputs on its example inputs differ in dtype, device or shape from
    the trace's ("" where they do not): the check squall makes of an executor's calls at run time."""
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    if len(outputs) != len(expected):
        return f"returned {len(outputs)} outputs where the trace has {len(expected)}"
    for p, t in zip(expected, outputs):
        problem = tensor_problem(t, p, p.name, tuple(concrete_shape(p.shape)))
        if problem:
            return problem
    return ""


def _torch_won(choice: dict, how: str) -> str:
    times = f"({how}: torch {choice['torch_s'] * 1e3:.3f} ms, inductor {choice['inductor_s'] * 1e3:.3f} ms)"
    if choice["inductor_s"] < choice["torch_s"]:
        return f"inductor was faster by less than the {round((1 - _MARGIN) * 100)}% a region must win by on these shapes {times}"
    return f"torch was faster on these shapes {times}"
