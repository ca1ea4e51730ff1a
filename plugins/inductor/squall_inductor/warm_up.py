"""In the compile worker: inductor's one-time C++ costs, paid only where they shorten the way to a fused region.

A cold worker has two of them before its first C++ compile (bench/cold_start.py --timeline, gpt2,
2 cores): the vector-ISA probe (inductor builds and loads a test program per instruction set the
CPU lists: 4-5 s, of it 2-3 s for one program that includes ATen's vector headers) and the
precompiled header its C++ compiles include (5.8 s to build once, into a folder shared by every
process of the user; it then saves about 1.3 s of CPU per compile). `WarmUp` pays them thus:

- The instruction set is taken from the CPU's own flags, as torch reads them (`guess_vector_isa`):
  inductor's list is made with its test builds taken as passing. The region's own C++ compile,
  which includes the same ATen vector headers, is the test: where a compile fails while the set
  is a guess, every verdict is cleared, inductor's own probe runs, and the compile is repeated
  where the probe picks another set. So no region is compiled for a set the CPU lacks, and a
  compiler that cannot build the guessed set costs one failed compile.
- The precompiled header is built (by compiling one tiny region) only once the worker has been
  idle for `HEADER_AFTER_IDLE_S`: a region sent at the worker's start (the usual case: the first
  upgrade is queued while the worker imports) is compiled at once without the header, about 4.5 s
  of CPU sooner with a cold header folder, and 1.5 s later than with a header already on disk
  (gpt2's region: 4.5 against 3.0 s of compiler CPU) where the old warm-up's tiny compile cost 3.5 s
  first. A region sent while the header builds waits for it: hence the idle time before. On a
  machine with CUDA the header is not built (its regions are CUDA's; a CPU region there compiles
  without it).
"""
from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import TypeVar

import torch
import torch._inductor.config as inductor_config
from torch._inductor import cpu_vec_isa, standalone_compile
from torch.fx.experimental.proxy_tensor import make_fx

from squall_inductor.timeline import mark
from squall_inductor.worker import one_unit_enabled

__all__ = ["WarmUp", "guess_vector_isa", "forget_vector_isa", "HEADER_AFTER_IDLE_S"]

# how long the worker waits for a request before it builds the precompiled header: longer than the
# user's process takes to judge a fused plan and send the next region (islands, another layout)
HEADER_AFTER_IDLE_S = 5.0

T = TypeVar("T")


def guess_vector_isa() -> bool:
    """Make inductor's vector-ISA list from the CPU's flags alone, as torch reads them (cpuinfo:
    AVX2, AVX-512, VNNI, bf16, AMX), with each of inductor's test builds taken as passing; the list
    is kept for the process (functools.cache), so inductor picks from it what its probe would pick
    where the compiler builds every set the CPU has. True where the list is such a guess; False
    where a setting decides the set (ATEN_CPU_CAPABILITY, cpp.simdlen, cpp.vec_isa_ok) or the CPU
    is not x86, where inductor probes as it would."""
    if (os.environ.get("ATEN_CPU_CAPABILITY") or inductor_config.cpp.simdlen is not None
            or inductor_config.cpp.vec_isa_ok is not None or platform.machine() not in ("x86_64", "AMD64")):
        return False
    probe = cpu_vec_isa.VecISA.check_build
    cpu_vec_isa.VecISA.check_build = lambda self, code: True  # this worker is single-threaded here
    try:
        cpu_vec_isa.valid_vec_isa_list()
    finally:
        cpu_vec_isa.VecISA.check_build = probe
    return True


def forget_vector_isa() -> None:
    """Clear every vector-ISA verdict inductor keeps (its list, each set's cached checks and the
    flags they set), so the next `pick_vec_isa` probes as inductor does in a fresh process."""
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    for isa in cpu_vec_isa.supported_vec_isa_list:
        for cls in type(isa).__mro__:
            for value in vars(cls).values():
                if hasattr(value, "cache_clear"):
                    value.cache_clear()
        for name in [n for n in vars(isa) if n.startswith("_is_") and n.endswith("_supported")]:
            delattr(isa, name)  # back to the class's default (False), which the checks set


def _warm_up_region(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x * 2.0 + 1.0).sum(-1)


class WarmUp:
    """What the worker has paid of inductor's one-time C++ costs (see the module's docstring)."""

    def __init__(self):
        self.isa_guessed = False  # the vector ISA is a guess no C++ compile has confirmed yet
        self.header_built = False  # the precompiled header the regions' compiles include is built
        self._header_tried = False

    def start(self) -> None:
        """Before the first request: the vector ISA (a failure here is left for the first compile to meet)."""
        try:
            self.isa_guessed = guess_vector_isa()
            mark("worker: vector ISA " + ("guessed from the CPU's flags" if self.isa_guessed else "left to inductor"))
        except Exception:  # noqa: BLE001 - inductor probes at the first compile instead
            self.isa_guessed = False

    def build_header(self) -> None:
        """Compile one tiny region, which builds the precompiled header (the C++ wrapper's where
        regions compile as one unit) unless it is on disk from an earlier process."""
        if self._header_tried or torch.cuda.is_available():  # built or failed once; CUDA's regions need no CPU header
            return
        self._header_tried = True
        try:
            args = [torch.ones(4, 8)]
            with inductor_config.patch({"compile_threads": 1, "cpp_wrapper": one_unit_enabled()}):
                graph = make_fx(_warm_up_region, tracing_mode="fake")(*args)
                self.compile(lambda: standalone_compile(graph, args, dynamic_shapes="from_example_inputs", options={})(*args),
                             with_header=True)
            self.header_built = True
            mark("worker: warm-up region compiled (precompiled header)")
        except Exception:  # noqa: BLE001 - nothing depends on it but time
            pass

    def compile(self, build: Callable[[], T], *, with_header: bool | None = None, on_cpu: bool = True) -> T:
        """`build()` (C++ compiles), without the precompiled header where it is not built yet
        (`with_header` decides where given). Where a region `on_cpu` fails while the vector ISA
        is a guess, the guess is dropped for inductor's own probe, and `build()` runs again where
        that picks another set; else the failure stands (a CUDA region's kernels do not use the
        set, and the probe costs seconds). A guess stays one until a CPU compile fails, so a
        region that is the first to include the vector headers is still checked."""
        settings = {} if (self.header_built if with_header is None else with_header) else {"cpp_cache_precompile_headers": False}
        try:
            with inductor_config.patch(settings):
                return build()
        except Exception:
            if not (self.isa_guessed and on_cpu):
                raise
            self.isa_guessed = False
            guessed = str(cpu_vec_isa.pick_vec_isa())
            forget_vector_isa()
            if str(cpu_vec_isa.pick_vec_isa()) == guessed:  # inductor's own probe: the same set, so not the guess's fault
                raise
            mark("worker: the guessed vector ISA failed; inductor's probe picked another")
            with inductor_config.patch(settings):
                return build()
