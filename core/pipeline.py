"""The compilation pipeline: trace → plan → free intermediates → generate.

Every stage takes a trace and returns a new one, so a compilation is the list of
traces it went through, each printable as Python with a provenance line. `jit`,
`explain` and the demo all compile through `compile_program`; nothing else repeats
these steps.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .codegen import GeneratedFunction, generate
from .executor import Executor
from .passes import free_after_last_use
from .planner import Plan, plan
from .trace import Trace
from .tracing import InputBinding, trace_program

__all__ = ["Compilation", "compile_program"]


class Compilation(list):
    """The traces of one compilation, in order (as traced, as planned, as executed).

    `plan` holds the planner's decisions, `source` the generated Python (None when the
    compilation stopped after planning), `seconds` the time each stage took.
    """

    def __init__(self, traces: list[Trace], bindings: list[InputBinding], generated: GeneratedFunction | None, seconds: dict[str, float]):
        super().__init__(traces)
        self.bindings = bindings
        self.generated = generated
        self.seconds = seconds

    @property
    def traced(self) -> Trace:
        return self[0]

    @property
    def planned(self) -> Trace:
        return next(t for t in self if t.plan is not None)

    @property
    def executed(self) -> Trace:
        return self[-1]

    @property
    def plan(self) -> Plan:
        return self.planned.plan

    @property
    def source(self) -> str | None:
        return self.generated.source if self.generated is not None else None

    @property
    def fn(self) -> Callable | None:
        return self.generated.fn if self.generated is not None else None

    def __repr__(self) -> str:
        stages = "; ".join(t.provenance for t in self)
        return f"<Compilation of {self.traced.name}: {stages}>"


def compile_program(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    *,
    executors: Sequence[Executor],
    module: torch.nn.Module | None = None,
    generate_code: bool = True,
) -> Compilation:
    """Compile `fn(*args, **kwargs)` (or `module(...)`) for the priority list `executors`.

    Gradients are planned for when grad mode is on and an input requires grad. With
    `generate_code=False` the pipeline stops after planning (what `explain` shows).
    """
    seconds: dict[str, Any] = {}
    start = time.perf_counter()
    traced, bindings = trace_program(fn, args, kwargs, module=module)
    seconds["trace"] = (now := time.perf_counter()) - start
    needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in traced.inputs)
    planned = plan(traced, executors, autograd=needs_grad)
    seconds["plan"] = (start := time.perf_counter()) - now
    if not generate_code:
        return Compilation([traced, planned], bindings, None, seconds)
    executed = free_after_last_use(planned)
    generated = generate(executed, bindings, takes_params=module is not None, nargs=len(args), takes_kwargs=bool(kwargs))
    seconds["generate"] = time.perf_counter() - start
    return Compilation([traced, planned, executed], bindings, generated, seconds)
