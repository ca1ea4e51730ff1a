"""The compilation pipeline: trace → plan → free intermediates → generate.

Every stage takes a trace and returns a new one, so a compilation is the list of
traces it went through, each printable as Python with a provenance line. `jit`,
`explain` and the demo all compile through `compile_program`; nothing else repeats
these steps.
"""
from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..frontend.tracing import InputBinding, trace_program
from ..ltorch.base import SquallWarning
from ..market.executor import Executor
from ..symbol import user_stacklevel
from ..trace import Trace
from .autograd import autograd_function, calling_trace
from .checking import ExecutorFault, checked_call, needs_check
from .codegen import GeneratedFunction, generate
from .collection import collection_paused
from .grad_rules import default_grad_rules
from .gradients import GradRule, NoGradRule, differentiate
from .passes import free_after_last_use
from .planner import Plan, plan

__all__ = ["Compilation", "compile_program", "compile_traced"]


class Compilation(list):
    """The traces of one compilation, in order: as traced, as planned, as executed; where
    gradients are needed, the forward and backward traces at each stage too.

    `plan` holds the planner's decisions, `source` the generated Python (None when the
    compilation stopped after planning), `seconds` the time each stage took.
    """

    def __init__(
        self,
        traces: list[Trace],
        bindings: list[InputBinding],
        generated: GeneratedFunction | None,
        seconds: dict[str, float],
        checked: GeneratedFunction | None = None,
    ):
        super().__init__(traces)
        self.bindings = bindings
        self.generated = generated
        self.seconds = seconds
        # the same program with every non-torch call checked (squall.compiler.checking); None when it has none
        self.checked = checked
        # a differentiated program's checked backward runs after the call returns: who hears of
        # an executor's fault there (squall.jit: it replans the entry)
        self.on_backward_fault: Callable | None = None

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
        """The planner's decisions for the program (its forward, where it is differentiated)."""
        return self.planned.plan

    @property
    def backward(self) -> Trace | None:
        """The planned backward trace, where squall differentiated the program."""
        return next((t for t in self if t.plan is not None and t.name.startswith("backward_")), None)

    @property
    def source(self) -> str | None:
        """The generated Python: the program, then (where differentiated) its forward and backward."""
        if self.generated is None:
            return None
        return "\n".join([self.generated.source, *(part.source for part in self.generated.parts.values())])

    @property
    def writes_inputs(self) -> bool:
        """Whether the program writes into a tensor it was given (`squall.runtime.aliasing` guards it)."""
        return bool(self._written_places())

    @property
    def writes_module_state(self) -> bool:
        """Whether the program writes into a module's parameter or buffer (running statistics)."""
        return any(path[0] == "params" for path in self._written_places())

    def _written_places(self) -> list[tuple]:
        context = self.traced.context
        written = {old.name for old, _ in context.mutated_inputs.values()} if context is not None else set()
        return [b.path for b in self.bindings if b.proxy.name in written]

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
    on_traced: Callable[[Trace], None] | None = None,
    same_as: dict[tuple, tuple] | None = None,
    strict: bool = False,
    dynamic: frozenset[tuple] = frozenset(),
    dims: dict[tuple, frozenset[int]] | None = None,
) -> Compilation:
    """Compile `fn(*args, **kwargs)` (or `module(...)`) for the priority list `executors`.

    Gradients are planned for when grad mode is on and an input requires grad. With
    `generate_code=False` the pipeline stops after planning (what `explain` shows).
    `on_traced` sees the traced trace before any later stage can fail (compile records).
    `same_as` names inputs that are the same tensor as an earlier one (`squall.runtime.aliasing`).
    `strict` refuses to read tensor values while tracing (see `trace_program`).
    `dynamic` names the number arguments that are run-time inputs, `dims` the tensor
    arguments' symbolic dimensions (see `trace_program`).
    """
    seconds: dict[str, Any] = {}
    start = time.perf_counter()
    with collection_paused():  # (squall.compiler.collection: what a trace allocates survives it)
        traced, bindings = trace_program(fn, args, kwargs, module=module, same_as=same_as, strict=strict, dynamic=dynamic, dims=dims)
    seconds["trace"] = time.perf_counter() - start
    if on_traced is not None:
        on_traced(traced)
    layout = dict(takes_params=module is not None, nargs=len(args), takes_kwargs=bool(kwargs))
    return compile_traced(traced, bindings, layout, executors=executors, generate_code=generate_code, seconds=seconds)


def compile_traced(
    traced: Trace,
    bindings: list[InputBinding],
    layout: dict[str, Any],
    *,
    executors: Sequence[Executor],
    generate_code: bool = True,
    seconds: dict[str, Any] | None = None,
) -> Compilation:
    """The stages after tracing: [differentiate] -> plan -> free -> generate, for a traced program.

    `layout` says how the generated function is called (`takes_params`, `nargs`,
    `takes_kwargs`). The traced trace is only read, so one trace can be planned again for
    another priority list (squall.runtime.tiers plans it first without, then with, fusion executors).
    """
    seconds = {} if seconds is None else seconds
    now = time.perf_counter()
    needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in traced.inputs)
    if needs_grad:
        try:
            diff = differentiate(traced, default_grad_rules(), overrides=executor_grad_rules(traced, executors))
        except NoGradRule as e:
            warnings.warn(
                f"{e}: this program is differentiated by PyTorch's autograd instead, on the executors "
                "autograd can differentiate through (torch)",
                SquallWarning,
                stacklevel=user_stacklevel(),
            )
        else:
            seconds["differentiate"] = (start := time.perf_counter()) - now
            return _compile_differentiated(traced, diff, bindings, executors, layout, seconds, start, generate_code)
    planned = plan(traced, executors, autograd=needs_grad)
    seconds["plan"] = (start := time.perf_counter()) - now
    if not generate_code:
        return Compilation([traced, planned], bindings, None, seconds)
    executed = free_after_last_use(planned)
    generated = generate(executed, bindings, **layout, shape_guards=True)
    checked = generate(executed, bindings, **layout, wrap=checked_call, shape_guards=True) if any(map(needs_check, executed.bsyms)) else None
    seconds["generate"] = time.perf_counter() - start
    return Compilation([traced, planned, executed], bindings, generated, seconds, checked)


def executor_grad_rules(trace: Trace, executors: Sequence[Executor]) -> dict[int, GradRule]:
    """The grad transforms of the executors that will take the program's calls: for each call,
    the first usable executor (in the planner's order) that accepts it decides, and if it
    brings a grad transform, that differentiates the call."""
    per_op = getattr(executors, "per_op", None) or {}
    usable = [ex for ex in executors if ex.availability()]
    rules: dict[int, GradRule] = {}
    for bsym in trace.bsyms:
        for ex in per_op.get(bsym.sym.id, usable):
            if not ex.availability():
                continue
            impl, _ = ex.offer(bsym)
            if impl is not None:
                if impl.grad_transform is not None:
                    rules[id(bsym)] = impl.grad_transform
                break
    return rules


def _positional(trace: Trace) -> list[InputBinding]:
    return [InputBinding(p, ("args", i)) for i, p in enumerate(trace.inputs)]


def _compile_differentiated(traced, diff, bindings, executors, layout, seconds, start, generate_code) -> Compilation:
    """Plan forward and backward separately on the marketplace, generate both, and the program
    that runs them inside one autograd.Function."""
    forward = plan(diff.forward, executors)
    backward = plan(diff.backward, executors)
    seconds["plan"] = (now := time.perf_counter()) - start
    if not generate_code:
        return Compilation([traced, diff.forward, diff.backward, forward, backward], bindings, None, seconds)
    forward_x, backward_x = free_after_last_use(forward), free_after_last_use(backward)
    forward_fn = generate(forward_x, _positional(forward_x), takes_params=False, nargs=len(forward_x.inputs), takes_kwargs=False, call_arguments=False)
    backward_fn = _generate_backward(backward_x, len(diff.saved))
    function = autograd_function(diff, forward_fn.fn, backward_fn.fn, traced.name, _backward_without(diff, executors))
    program = free_after_last_use(calling_trace(traced, function))
    generated = generate(program, bindings, **layout, shape_guards=True)
    generated.parts = {"forward": forward_fn, "backward": backward_fn}
    traces = [traced, diff.forward, diff.backward, forward, backward, forward_x, backward_x, program]
    compilation = Compilation(traces, bindings, generated, seconds)
    if any(map(needs_check, forward_x.bsyms)) or any(map(needs_check, backward_x.bsyms)):
        compilation.checked = _checked_differentiated(compilation, diff, forward_x, backward_x, bindings, layout, executors)
    seconds["generate"] = time.perf_counter() - now
    return compilation


def _backward_without(diff, executors) -> Callable[[frozenset[str]], Callable | None]:
    """Plans and generates, on the same executors, the backward for calls where some outputs got
    no gradient (see `autograd_function`): None where that backward would read a value the
    forward does not save."""

    def build(absent: frozenset[str]) -> Callable | None:
        trace = diff.backward_without(absent)
        if trace is None:
            return None
        return _generate_backward(free_after_last_use(plan(trace, executors)), len(diff.saved)).fn

    return build


def _generate_backward(executed: Trace, n_saved: int, wrap: Callable | None = None) -> GeneratedFunction:
    """A backward called as (saved, *cotangents), `saved` a list it empties once unpacked: each
    saved tensor is freed after its last use, as eager's autograd frees a node's saved tensors
    once the node has run."""
    bindings = [InputBinding(p, ("params", i) if i < n_saved else ("args", i - n_saved)) for i, p in enumerate(executed.inputs)]
    return generate(executed, bindings, takes_params=True, nargs=len(executed.inputs) - n_saved, takes_kwargs=False, wrap=wrap, consumes_params=True, call_arguments=False)


def _checked_differentiated(compilation, diff, forward_x, backward_x, bindings, layout, executors) -> GeneratedFunction:
    """The program with every non-torch call of its forward and backward checked.

    A fault in the forward is raised from the call, as for any program (squall.jit replans
    and runs it again). A fault in the backward surfaces in `loss.backward()`, when the call
    has long returned: that backward is computed again on the torch executor alone from the
    same saved tensors (its gradients stay eager's), the fault is reported to
    `compilation.on_backward_fault` (squall.jit replans the entry for later calls).
    """
    forward_fn = generate(forward_x, _positional(forward_x), takes_params=False, nargs=len(forward_x.inputs), takes_kwargs=False, wrap=checked_call, call_arguments=False)
    backward_fn = _generate_backward(backward_x, len(diff.saved), wrap=checked_call)
    on_torch: list[Callable] = []

    def backward(saved, *cotangents):
        try:
            grads = backward_fn.fn(list(saved), *cotangents)  # a copy: a fault runs it again from `saved`
        except ExecutorFault as fault:
            if not on_torch:
                replanned = free_after_last_use(plan(diff.backward, [ex for ex in executors if ex.name == "torch"]))
                on_torch.append(_generate_backward(replanned, len(diff.saved)).fn)
            report = compilation.on_backward_fault
            if report is not None:
                report(fault)
            else:
                warnings.warn(f"squall: {fault}; this backward was computed on the torch executor instead", SquallWarning, stacklevel=2)
            return on_torch[0](saved, *cotangents)
        compilation.on_backward_fault = None  # a clean backward: nothing holds the call's inputs any more
        return grads

    function = autograd_function(diff, forward_fn.fn, backward, compilation.traced.name)
    program = free_after_last_use(calling_trace(compilation.traced, function))
    checked = generate(program, bindings, **layout, shape_guards=True)
    checked.parts = {"forward": forward_fn, "backward": backward_fn}
    return checked
