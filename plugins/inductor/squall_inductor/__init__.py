"""squall-inductor: a squall fusion executor that compiles fusion regions with inductor.

Installed, it is found through the `squall` entry-point group and joins the default
executors ahead of torch; `squall executors` lists it, `squall explain` shows its regions.
"""
from __future__ import annotations

from squall.extend import hookimpl

from squall_inductor.choices import ChoiceStore, default_choices_path
from squall_inductor.executor import FUSIBLE_PRIMS, MATMUL_PRIMS, InductorExecutor, cpp_compiler
from squall_inductor.regions import CompiledRegion, compile_with_inductor, example_inputs, region_function

__all__ = [
    "InductorExecutor",
    "FUSIBLE_PRIMS",
    "MATMUL_PRIMS",
    "ChoiceStore",
    "default_choices_path",
    "cpp_compiler",
    "region_function",
    "CompiledRegion",
    "compile_with_inductor",
    "example_inputs",
    "squall_register_executors",
]
__version__ = "0.1.0"


@hookimpl
def squall_register_executors() -> list[InductorExecutor]:
    """The inductor executor, returned even where it is unavailable so users see why."""
    return [InductorExecutor()]
