"""Which of inductor's two wrappers a region compiles with, wherever it compiles.

inductor writes the code around a region's kernels (allocations, library calls for matmuls,
the kernel calls) either as Python (its default) or as C++ (`cpp_wrapper`). On a CPU the
Python wrapper builds each kernel as a C++ unit of its own, each parsing ATen's headers again
(about 1.8 s a kernel on 2 cores; a llama decoding step has about 25), and runs Python between
the kernels at every call; the C++ wrapper builds the wrapper and every kernel as one unit, one
compiler run, and runs no Python between them. So a CPU region with matmuls or convolutions
compiles with the C++ wrapper where one unit is asked for (SQUALL_INDUCTOR_ONE_UNIT, default
on), and falls back to the Python wrapper where the C++ wrapper fails. An island (no matmul:
one to a few elementwise and reduction kernels) keeps the Python wrapper, which builds it in
about half the compiler time of one unit, whose wrapper includes ATen's operator headers.

The compile worker (worker_main) and the compiles in the user's process (`regions.compile_with_inductor`,
`symbolic.compile_in_process`, where the worker cannot serve) take the same attempts; only the
worker builds one unit as two side by side (squall_inductor.split_build), which patches inductor's
build function process-wide, as the user's process must not.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["is_island", "wrapper_attempts", "first_that_compiles"]

T = TypeVar("T")

# the aten ops squall's matmul prims (squall_inductor.executor.MATMUL_PRIMS) become under make_fx:
# inductor calls a library for them, and compiles the epilogues between them as many kernels
_MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution"})


def is_island(graph: Any) -> bool:
    """Whether a traced region holds no matmul or convolution: an island of elementwise and
    reduction kernels (one to a few), which inductor's Python wrapper compiles in about half the
    compiler time of one C++ unit, whose wrapper includes ATen's operator headers (a layer_norm +
    gelu island: 0.7-1.2 against 2.0-2.6 s of compiler CPU, the same time per call)."""
    return not any(getattr(getattr(n.target, "overloadpacket", None), "__name__", None) in _MATMUL_OPS
                   for n in graph.graph.nodes if n.op == "call_function")


def wrapper_attempts(graph: Any, one_unit: bool, on_cpu: bool, *, split_build: bool = True) -> list[dict]:
    """The inductor settings a region is compiled with, each tried where the one before failed: for a
    CPU region with matmuls where `one_unit`, inductor's C++ wrapper (with `split_build`, first built
    as two units side by side where a core is spare; then as one unit), then its Python wrapper; for
    any other region, the Python wrapper."""
    import torch._inductor.config as inductor_config  # (inductor is imported only where a region compiles)

    if not (one_unit and on_cpu and not is_island(graph) and not inductor_config.cpp_wrapper):
        return [{}]
    split: dict = {}
    if split_build:
        from squall_inductor.split_build import split_build_settings

        split = split_build_settings()
    return [*([{"cpp_wrapper": True, **split}] if split else []), {"cpp_wrapper": True}, {}]


def first_that_compiles(attempts: list[dict], compile: Callable[[dict], T]) -> T:
    """`compile(settings)` for the first of `attempts` (`wrapper_attempts`) that does not raise; the
    last one's error is raised."""
    for settings in attempts[:-1]:
        try:
            return compile(settings)
        except Exception:  # noqa: BLE001 - what the C++ wrapper cannot compile, the Python wrapper may
            pass
    return compile(attempts[-1])
