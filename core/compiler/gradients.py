"""Gradients: grad rules in a table, and the transform that turns a trace into forward and backward.

A `GradRule` says how one operation (a prim or an ltorch op, by symbol id) is
differentiated: optionally a `forward` that computes the output and whatever the
backward will need (PyTorch's fused backward kernels want the forward's statistics,
e.g. layer norm's mean and rstd), and a `backward` that maps the cotangents of the
outputs to those of the inputs. Both are ordinary Python over proxies, so what they
call is recorded as operations that executors can take, in the forward and the
backward trace alike.

`differentiate(trace, rules)` walks the trace: an operation none of whose inputs
needs a gradient is kept as it is; one with a rule is recorded through the rule; one
without is differentiated through its decomposition, piece by piece. A prim with no
rule that a gradient has to pass through stops the transform with `NoGradRule`: the
caller then falls back to PyTorch's autograd rather than give a wrong gradient.

The backward trace reads forward values; those it reads are what the forward saves
(its extra outputs). Nothing else is kept alive for the backward.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .. import prims
from ..frontend.state_views import UnreplayableWrite
from ..market.executor import GradRule
from ..proxies import TensorProxy, symbol_reads, tracing
from ..symbol import BoundSymbol, Symbol, Tags, flat_proxies
from ..symbolic import SymInt, lone_symbol, symbols_of
from ..trace import Trace
from .passes import remove_dead_code

__all__ = ["GradRule", "GradCall", "GradRules", "NoGradRule", "NeedsAutograd", "Differentiated", "differentiate", "is_differentiable"]


class NoGradRule(NotImplementedError):
    """A gradient must pass through an operation no rule or decomposition differentiates.

    Raised by a rule's backward, it declines that call: the call is then differentiated through
    its decomposition where it has one. Where nothing can, the compilation falls back to
    PyTorch's autograd (with a SquallWarning)."""

    def __init__(self, op: str, within: str | None = None, source: tuple[str, int, str] | None = None):
        inside = f" (in the decomposition of {within})" if within and within != op else ""
        where = f" at {source[0]}:{source[1]}: {source[2]}" if source else ""
        super().__init__(f"squall has no gradient rule for {op}{inside}{where}")
        self.op = op
        self.within = within
        self.source = source


class NeedsAutograd(NoGradRule):
    """Only PyTorch's autograd gives eager's result here (a sparse gradient, an in-place update of
    an input that requires grad): the compilation falls back to it, decomposition or not."""


@dataclass
class GradCall:
    """What a backward rule is given: the forward call and the cotangents of its outputs.

    `args`/`kwargs` are the call's normalized arguments (forward proxies), `output` its
    output, `residuals` what the rule's `forward` returned beside the output, and
    `cotangents` one entry per output proxy, in `flat_proxies(output)` order (`g` is the
    only one, for single-output operations). A backward rule returns one entry per input
    proxy of the call, in `flat_proxies((args, kwargs))` order: a proxy of the input's
    shape and dtype, or None where that input gets no gradient.
    """

    args: tuple
    kwargs: dict
    output: Any
    residuals: tuple
    cotangents: tuple
    wanted: frozenset[str] = frozenset()  # names of the inputs a gradient is wanted for

    def wants(self, p: Any) -> bool:
        """Whether a gradient is wanted for `p` (an argument of the call; None and numbers: no).

        Rules ask this, not `p.requires_grad`: a gradient flows to every value computed from an
        input that requires grad, which a proxy's own flag does not always say."""
        return isinstance(p, TensorProxy) and p.name in self.wanted

    @property
    def g(self) -> TensorProxy:
        (g,) = self.cotangents
        return g

    @property
    def inputs(self) -> list[TensorProxy]:
        """The call's tensor arguments (a run-time number gets no gradient, nor a slot for one)."""
        return [p for p in flat_proxies((self.args, self.kwargs)) if type(p) is TensorProxy]


class GradRules:
    """Grad rules by symbol id. Tables are objects: the defaults are one, a test may build its own."""

    def __init__(self, rules: Mapping[str, GradRule] | None = None):
        self._rules: dict[str, GradRule] = dict(rules or {})

    def register(self, op: Symbol | str, backward: Callable[[GradCall], Any], forward: Callable | None = None) -> None:
        """File the rule for `op` (a symbol or its id); a later rule for the same op replaces it."""
        self._rules[op.id if isinstance(op, Symbol) else op] = GradRule(backward, forward)

    def get(self, op_id: str) -> GradRule | None:
        return self._rules.get(op_id)

    def __contains__(self, op_id: object) -> bool:
        return op_id in self._rules

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def updated(self, other: Mapping[str, GradRule]) -> GradRules:
        """A new table: these rules, overridden by `other`'s."""
        return GradRules({**self._rules, **other})


def is_differentiable(p: TensorProxy) -> bool:
    """Whether a gradient can flow through a tensor of this dtype (floating or complex)."""
    return p.dtype.is_floating_point or p.dtype.is_complex


@dataclass
class _TapeEntry:
    rule: GradRule
    call: GradCall
    bsym: BoundSymbol
    top: BoundSymbol


@dataclass
class Differentiated:
    """The result of `differentiate`: a forward trace, a backward trace, and how they connect.

    The forward trace returns `(output tensors, saved)`; the backward trace takes the saved
    tensors and one cotangent per differentiable output tensor (`cotangent_of`, by the
    output proxy's name) and returns one gradient per forward input, None for inputs
    that get none.
    """

    forward: Trace
    backward: Trace
    saved: list[TensorProxy]
    differentiable_outputs: list[TensorProxy]
    grads_for: list[str]  # names of the forward inputs that get a gradient, in input order
    rules_used: list[str] = field(default_factory=list)
    # the backward for a call where the outputs named got no gradient (see `differentiate`)
    backward_without: Callable[[frozenset[str]], Trace | None] | None = None
    # inputs that require grad which no differentiated call reads (unread, detached, read under
    # no_grad): eager's graph has no edge to them (squall.compiler.autograd cuts theirs)
    unlinked: list[str] = field(default_factory=list)
    # the executors' grad transforms it was made with (`differentiate`'s `overrides`): a plan for
    # other executors with the same ones may reuse it (squall.compiler.pipeline.compile_traced)
    overrides: Mapping[int, GradRule] = field(default_factory=dict)


def _zeros_like(p: TensorProxy) -> TensorProxy:
    return prims.full(tuple(p.shape), 0, device=p.device, dtype=p.dtype)


def _accumulate(grads: dict[str, TensorProxy], p: TensorProxy, g: TensorProxy | None) -> None:
    if g is None:
        return
    if tuple(g.shape) != tuple(p.shape) or g.dtype != p.dtype:
        raise RuntimeError(
            f"squall: a grad rule returned a gradient of {g.dtype}{list(g.shape)} for {p.name}, "
            f"which is {p.dtype}{list(p.shape)}"
        )
    known = grads.get(p.name)
    grads[p.name] = g if known is None else prims.add(known, g)


def _take_cotangents(grads: dict[str, TensorProxy], outputs: list[TensorProxy]) -> list[TensorProxy | None]:
    """The cotangents of a call's outputs, taken out of `grads` (one per output, None for none).

    Replayed backward, a call comes after every later use of its outputs, so their cotangents
    are complete. They are taken, not read: an output may be one of the call's inputs (an op
    that returned its input: adaptive pooling to the input's size, expand to the same shape),
    and the input's gradient is then what the rule gives plus its earlier uses, never the
    output's cotangent a second time. An output returned twice has its whole cotangent once."""
    taken: list[TensorProxy | None] = []
    seen: set[str] = set()
    for p in outputs:
        taken.append(None if p.name in seen else grads.pop(p.name, None))
        seen.add(p.name)
    return taken


def _draws_or_writes(bsym: BoundSymbol) -> bool:
    # (`tagged` reads a replayed layer's recording rather than copying its decomposition)
    return any(next(bsym.tagged(tag), None) is not None for tag in (Tags.RANDOM, Tags.SIDE_EFFECT))


# the gradient of a value written in place under no_grad, passed to the value it replaced
_PASSES_THROUGH = GradRule(lambda call: (call.g,))


class _Differentiator:
    """One differentiation: the forward calls recorded so far, and the tape the backward replays."""

    def __init__(self, trace: Trace, rules: GradRules, needs_grad: set[str], overrides: Mapping[int, GradRule] | None = None):
        self.trace = trace
        self.rules = rules
        self.overrides = overrides or {}  # id(top-level bsym) -> the rule its executor supplies
        self.needs_grad = needs_grad  # names of the values a gradient flows back to
        self.leaves = {p.name for p in trace.inputs if p.requires_grad}
        # the values the program made require grad (squall.frontend.grad_roots): a gradient flows
        # from one into the calls made after the flag was set (their results require grad), not
        # into those made before; the gradient reaching the root itself is dead code, as eager's
        # lands in a .grad nothing reads
        self.roots: set[str] = set(getattr(trace.context, "grad_roots", ()))
        self.forward: list[BoundSymbol] = []
        self.tape: list[_TapeEntry] = []
        self.rules_used: list[str] = []
        # inputs an ltorch op's rule gave None though a gradient reached the op (the 0-norm's
        # input): eager's None, which must stay None where nothing else reaches them
        self.declared_none: set[str] = set()

    def visit(self, bsym: BoundSymbol, rule: GradRule | None = None, top: BoundSymbol | None = None) -> None:
        """Record `bsym` into the forward and, where a gradient flows through it, onto the tape.

        `top` is the program's own call `bsym` is a piece of (for error messages)."""
        top = top or bsym
        inputs = bsym.input_proxies()
        if self.roots:
            self._reach_roots(bsym, inputs)
        if bsym.sym.id == prims.copy_.id and inputs[0].name in self.leaves:
            if inputs[1].name not in getattr(self.trace.context, "gradient_passes", {}):
                # eager refuses this on a leaf and records it on a non-leaf; PyTorch's autograd knows which
                raise NeedsAutograd("an in-place update of an input that requires grad", top.sym.id, top.source)
            # the write-back of a value written under no_grad (weight clipping, an EMA update):
            # eager allows it on a leaf and keeps the leaf in the graph, so the gradient reaching
            # the new value passes to the leaf (_pass_to_written); the copy itself is no step of it
            self.forward.append(bsym)
            return
        if (
            not any(p.name in self.needs_grad for p in inputs)
            or Tags.SIDE_EFFECT in bsym.sym.tags
            or Tags.STOPS_GRADIENT in bsym.sym.tags
            or not bsym.grad_enabled  # called under torch.no_grad() inside the program
        ):
            self.forward.append(bsym)
            self._pass_to_written(bsym)
            return
        outputs = bsym.output_proxies()
        if outputs and all(p.name in {q.name for q in inputs} for p in outputs):
            self.forward.append(bsym)  # it returned its input (dropout when off): the gradient passes as it is
            return
        rule = rule or self.rules.get(bsym.sym.id)
        if rule is None and bsym.subsymbols:
            if _draws_or_writes(bsym):
                # its random draws (a dropout mask) must be the forward's: differentiate the pieces in place
                for sub in bsym.subsymbols:
                    self.visit(sub, top=top)
                return
            # the op runs whole in the forward; the backward recomputes what its pieces' rules read
            rule = GradRule(functools.partial(self._through_decomposition, bsym, top))
        if rule is None:
            outputs = bsym.output_proxies()
            names = {p.name for p in inputs}
            if all(p.name in names for p in outputs):
                self.forward.append(bsym)  # it returned its input: the gradient passes as it is
                return
            if not any(is_differentiable(p) for p in outputs):
                self.forward.append(bsym)  # integer or boolean results: nothing flows back
                return
            raise NoGradRule(bsym.sym.id, top.sym.id, top.source)
        self.rules_used.append(bsym.sym.id)
        output, residuals = bsym.output, ()
        if rule.forward is None:
            self.forward.append(bsym)
        else:
            output, residuals = self._record_forward(bsym, rule)
        for p in flat_proxies(output):
            if is_differentiable(p):
                self.needs_grad.add(p.name)
        call = GradCall(bsym.args, bsym.kwargs, output, tuple(residuals), ())
        self.tape.append(_TapeEntry(rule, call, bsym, top))

    def _reach_roots(self, bsym: BoundSymbol, inputs: list) -> None:
        """Where `bsym` reads a gradient root and its results require grad (it was called after the
        program set the flag), the gradient flows to that root from here on."""
        reached = [p.name for p in inputs if p.name in self.roots]
        if reached and any(getattr(p, "requires_grad", False) for p in bsym.output_proxies()):
            self.needs_grad.update(reached)
            self.roots.difference_update(reached)

    def _pass_to_written(self, bsym: BoundSymbol) -> None:
        """Where `bsym` made the value an in-place op wrote under no_grad into a tensor a gradient
        reaches (TracingContext.gradient_passes), tape that the gradient reaching the new value
        passes unchanged to the value it replaced, as eager's autograd passes it."""
        passes = getattr(self.trace.context, "gradient_passes", None)
        if not passes:
            return
        for p in bsym.output_proxies():
            old = passes.get(p.name)
            if old is not None and old.name in self.needs_grad and is_differentiable(p):
                self.needs_grad.add(p.name)
                self.tape.append(_TapeEntry(_PASSES_THROUGH, GradCall((old,), {}, p, (), ()), bsym, bsym))

    def _through_decomposition(self, bsym: BoundSymbol, top: BoundSymbol, call: GradCall) -> tuple:
        """The backward of an op without a rule: its decomposition, traced afresh into the
        backward (fresh names, so nothing clashes with forward values), differentiated piece
        by piece."""
        ctx = self.trace.context
        ctx.scopes.append([])
        try:
            output = bsym.sym.meta(*bsym.args, **bsym.kwargs)
        finally:
            pieces = ctx.scopes.pop()
        # the op's own outputs are forward values: read them, never recompute them
        originals = bsym.output_proxies()
        renames = {id(new): old for new, old in zip(flat_proxies(output), originals)}
        pieces = [piece.swap_proxies(renames) for piece in pieces]
        computed = {p.name for p in originals}
        inputs = call.inputs
        needs_grad = {p.name for p in inputs if p.name in self.needs_grad}
        inner = _Differentiator(self.trace, self.rules, needs_grad)
        for piece in pieces:
            inner.visit(piece, top=top)
        recompute = [b for b in inner.forward if not b.output_proxies() or any(p.name not in computed for p in b.output_proxies())]
        ctx.scopes[-1].extend(recompute)  # dead code removal keeps what the rules read
        self.rules_used.extend(inner.rules_used)
        # an output returned twice has its whole cotangent at its first place (see _take_cotangents)
        cotangent_of: dict[str, TensorProxy] = {}
        for p, g in zip(originals, call.cotangents):
            cotangent_of.setdefault(p.name, g)
        grads = inner.backward(cotangent_of)
        # a tensor passed twice (x * x) has its whole gradient in grads: given once, not per place
        first = {p.name: i for i, p in reversed(list(enumerate(inputs)))}
        # eager's autograd node for the op gives each of its inputs a gradient, zeros where none
        # flows (cdist with p=0 only compares them, addr with beta=0 never reads its input); an
        # operand read for its metadata only (view_as's `other`) is no input of that node
        metadata_only = Tags.METADATA_OPERANDS in bsym.sym.tags
        read = {q.name for piece in pieces for q in piece.input_proxies()}
        result = []
        for i, p in enumerate(inputs):
            g = None
            if p.name in needs_grad and first[p.name] == i:
                g = grads.get(p.name)
                reached = p.name in read or not metadata_only
                if g is None and is_differentiable(p) and reached and p.name not in inner.declared_none:
                    g = _zeros_like(p)
            result.append(g)
        return tuple(result)

    def _record_forward(self, bsym: BoundSymbol, rule: GradRule) -> tuple[Any, tuple]:
        ctx = self.trace.context
        with tracing(ctx):
            ctx.scopes.append([])
            try:
                output, residuals = rule.forward(*bsym.args, **bsym.kwargs)
            finally:
                recorded = ctx.scopes.pop()
        # the rule's outputs are the proxies the rest of the program uses
        new_outputs, old_outputs = flat_proxies(output), bsym.output_proxies()
        if len(new_outputs) != len(old_outputs):
            raise RuntimeError(
                f"squall: the grad rule's forward for {bsym.sym.id} returned {len(new_outputs)} tensors where the "
                f"operation returns {len(old_outputs)}"
            )
        renames = {id(new): old for new, old in zip(new_outputs, old_outputs)}
        for r in recorded:
            self.forward.append(r.swap_proxies(renames).from_bsym(source=bsym.source))
        swap = lambda x: renames.get(id(x), x) if isinstance(x, TensorProxy) else x
        return bsym.output, tuple(tree_map(swap, residuals))

    def backward(self, cotangent_of: dict[str, TensorProxy]) -> dict[str, TensorProxy]:
        grads: dict[str, TensorProxy] = dict(cotangent_of)
        for entry in reversed(self.tape):
            outputs = flat_proxies(entry.call.output)
            present = _take_cotangents(grads, outputs)
            if all(g is None for g in present):
                continue
            cotangents = tuple(g if g is not None else _zeros_like(p) for g, p in zip(present, outputs))
            wanted = frozenset(p.name for p in entry.call.inputs if p.name in self.needs_grad)
            call = dataclasses.replace(entry.call, cotangents=cotangents, wanted=wanted)
            try:
                result = entry.rule.backward(call)
            except NoGradRule as declined:
                # a rule that does not cover this form of the call hands it to its decomposition
                if isinstance(declined, NeedsAutograd) or not entry.bsym.subsymbols or _draws_or_writes(entry.bsym):
                    raise
                result = self._through_decomposition(entry.bsym, entry.top, call)
            inputs = call.inputs
            result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            if len(result) != len(inputs):
                raise RuntimeError(
                    f"squall: the grad rule for {entry.bsym.sym.id} returned {len(result)} gradients for {len(inputs)} inputs"
                )
            for p, g in zip(inputs, result):
                if p.name not in self.needs_grad:
                    continue
                if g is None and not entry.bsym.sym.is_prim:
                    self.declared_none.add(p.name)
                elif g is None and is_differentiable(p):
                    if p.name in grads:
                        continue  # zeros added to a gradient change nothing
                    # a flat prim (floor division, copysign's sign operand): eager's autograd gives
                    # zeros, not None, and an optimizer steps a parameter with a zero gradient
                    g = _zeros_like(p)
                _accumulate(grads, p, g)
        return grads


def _record_backward(
    d: _Differentiator, differentiable_outputs: list[TensorProxy], grads_for: list[str], absent: frozenset[str]
) -> tuple[dict[str, TensorProxy], list[BoundSymbol], tuple]:
    """Replay `d`'s tape backward from a fresh cotangent for each differentiable output not in
    `absent`: (cotangents by output name, the backward's calls, one gradient per name in `grads_for`)."""
    ctx = d.trace.context
    # grad mode as at compile time (a variant is recorded inside PyTorch's backward, where it is off):
    # calls recorded under no_grad pass no gradient
    with tracing(ctx), torch.enable_grad():
        ctx.scopes.append([])
        try:
            cotangents = {
                p.name: TensorProxy(ctx.new_name("g"), like=p, requires_grad=False) for p in differentiable_outputs if p.name not in absent
            }
            grads = d.backward(dict(cotangents))
        finally:
            recorded = ctx.scopes.pop()
    grad_outputs = tuple(grads.get(name) for name in grads_for)
    return cotangents, remove_dead_code(recorded, grad_outputs), grad_outputs


def _forward_values_read(recorded: list[BoundSymbol], cotangents: dict[str, TensorProxy], grad_outputs: tuple) -> dict[str, TensorProxy]:
    """The forward values a backward reads (or returns as a gradient), by name, in first-use order."""
    produced = {p.name for b in recorded for p in b.output_proxies()} | {g.name for g in cotangents.values()}
    read: dict[str, TensorProxy] = {}
    for b in recorded:
        for p in b.input_proxies():
            if p.name not in produced:
                read.setdefault(p.name, p)
    for g in grad_outputs:  # a gradient that is a forward value (e.g. a cotangent passed straight through)
        if g is not None and g.name not in produced:
            read.setdefault(g.name, g)
    return read


def _recompute_checkpointed(
    forward: list[BoundSymbol], regions: list[int], recorded: list[BoundSymbol], saved: list[TensorProxy]
) -> tuple[list[BoundSymbol], list[TensorProxy]]:
    """The backward's calls and what the forward saves, where the program ran code under a
    non-reentrant `torch.utils.checkpoint`: eager saves such code's inputs and recomputes the rest
    in the backward, and so does squall. A saved value made inside a checkpointed region (by
    `forward[i]`, in region `regions[i]`; 0: outside any) is computed again in the backward, from
    what the region read from outside it, which is saved instead. A call that draws random numbers
    or writes state is not run again: its results are saved (a dropout's output)."""
    if not any(regions):
        return recorded, saved
    made_by: dict[str, int] = {}
    for i, b in enumerate(forward):
        for p in b.output_proxies():
            made_by.setdefault(p.name, i)  # (a call that returns its input, dropout at p=0, did not make it)
    # a region's results that code outside it reads (the next layer's input) are saved, as eager's
    # next checkpoint saves its inputs: the backward then recomputes one region at a time
    leaving = {q.name for i, b in enumerate(forward) for q in b.input_proxies()
               if (j := made_by.get(q.name)) is not None and regions[j] and regions[j] != regions[i]}
    recomputed: set[int] = set()
    kept: dict[str, TensorProxy] = {}
    pending = [(p, 0) for p in saved]  # (a value the backward reads, the region of the call reading it; 0: the backward's own)
    while pending:
        p, reader = pending.pop()
        i = made_by.get(p.name)
        region = regions[i] if i is not None else 0
        if region and (reader == 0 or reader == region) and p.name not in leaving and not _draws_or_writes(forward[i]):
            if i not in recomputed:
                recomputed.add(i)
                pending.extend((q, region) for q in forward[i].input_proxies())
        else:
            kept.setdefault(p.name, p)
    # each recomputed call placed right before the first backward call that needs it (with the calls
    # it needs first, in forward order): the backward walks the regions last to first, and one
    # region's values are freed before the next region's are made, as in eager's backward
    reads = {i: [made_by[q.name] for q in forward[i].input_proxies() if made_by.get(q.name) in recomputed] for i in recomputed}
    placed: set[int] = set()
    backward: list[BoundSymbol] = []

    def place(needed: list[int]) -> None:
        found, stack = set(), [i for i in needed if i not in placed]
        while stack:
            i = stack.pop()
            if i not in found and i not in placed:
                found.add(i)
                stack.extend(reads[i])
        backward.extend(forward[i] for i in sorted(found))
        placed.update(found)

    for b in recorded:
        place([made_by[q.name] for q in b.input_proxies() if made_by.get(q.name) in recomputed])
        backward.append(b)
    place(sorted(recomputed))  # a gradient that is a recomputed value itself
    # in the order they were first saved, then the regions' inputs
    order = {p.name: n for n, p in enumerate(saved)}
    return backward, sorted(kept.values(), key=lambda p: order.get(p.name, len(order)))


def _refuse_overwritten_saved_leaves(forward: list[BoundSymbol], saved: list[TensorProxy]) -> None:
    """An input written in place (its write-back copy is among the forward's last steps) whose
    earlier value the backward reads: one that requires grad (written under no_grad, if a leaf),
    or a buffer (`y = x * self.scale`, then `self.scale.mul_(0.5)`: its gradient read the new
    scale). The copy would overwrite what is saved, so the backward would read the new value.
    Eager raises at backward there ("modified by an inplace operation"): the call runs eagerly
    instead (squall.runtime.calls), so it does."""
    written = {b.args[0].name for b in forward if b.sym.id == prims.copy_.id}
    overwritten = sorted(p.name for p in saved if p.name in written)
    if overwritten:
        raise UnreplayableWrite(
            f"squall: the program writes {', '.join(overwritten)} in place after using it where "
            "the backward needs its earlier value (eager's backward raises there: one of the variables "
            "needed for gradient computation has been modified by an inplace operation)"
        )


def _symbols_in_calls(recorded: list[BoundSymbol]) -> dict[str, SymInt | None]:
    """The size symbols the calls compute with (a gradient's shape given to `full` or `expand`),
    each with an argument that is that symbol alone where a call has one (`x[n : n + 2]`'s backward
    pads its cotangent at n), else None."""
    found: dict[str, SymInt | None] = {}
    for top in recorded:
        for b in top.walk():
            for x in tree_flatten((b.args, b.kwargs))[0]:
                if type(x) is SymInt:
                    lone = lone_symbol(x)
                    for name in symbols_of(x):
                        if found.get(name) is None:
                            found[name] = x if name == lone else None
    return found


def _size_carrier(d: _Differentiator, recorded: list[BoundSymbol], backward_inputs: list) -> TensorProxy | None:
    """A tensor the forward saves only for its shape, where the backward computes with size symbols
    none of its inputs has as a dimension (`(a * 2).sum()` with `a`'s sizes symbolic: the backward
    expands a scalar cotangent to `(s0, s1)`, and its generated code reads sizes from its inputs).
    One element, expanded: it costs no memory."""
    in_calls = _symbols_in_calls(recorded)
    missing = set(in_calls) - set(symbol_reads(backward_inputs))
    if not missing:
        return None
    sizes: dict[str, Any] = {}
    for p in [*d.trace.inputs, *(q for b in d.forward for q in b.output_proxies())]:
        if isinstance(p, TensorProxy):
            for n in p.shape:
                name = lone_symbol(n)
                if name in missing:
                    sizes.setdefault(name, n)
    # a symbol no tensor has as a dimension (an int argument made a size) as the calls give it, or
    # alone where they compute only with expressions of it (`F.pad(x, (0, n))`'s backward slices at 8 + s0)
    env = getattr(d.trace.context, "shapes", None)
    for name in missing - sizes.keys():
        if in_calls[name] is not None:
            sizes[name] = in_calls[name]
        elif env is not None and name in env.symbols:
            sizes[name] = env.size(name)
    if set(sizes) != missing:
        return None  # the backward's code generation names what it cannot read
    anchor = next(p for p in d.trace.inputs if isinstance(p, TensorProxy))
    shape = tuple(sizes[name] for name in sorted(sizes))
    ctx = d.trace.context
    with tracing(ctx):
        ctx.scopes.append([])
        try:
            carrier = prims.broadcast_in_dim(prims.full((), False, device=anchor.device, dtype=torch.bool), shape, ())
        finally:
            d.forward.extend(ctx.scopes.pop())
    return carrier


def differentiate(trace: Trace, rules: GradRules, *, overrides: Mapping[int, GradRule] | None = None) -> Differentiated:
    """Split `trace` into a forward trace that saves what the backward reads, and the backward.

    `overrides` maps id(a top-level bound symbol) to the rule an executor supplies for
    that call (its grad transform), which wins over the table's.
    """
    needs_grad = {p.name for p in trace.inputs if p.requires_grad and is_differentiable(p)}
    d = _Differentiator(trace, rules, needs_grad, overrides)
    regions: list[int] = []  # per forward call, the checkpoint region of the program's call it came from
    for bsym in trace.bsyms:
        d.visit(bsym, d.overrides.get(id(bsym)))
        regions.extend([bsym.checkpoint_region] * (len(d.forward) - len(regions)))

    # one cotangent per distinct output tensor (a tensor returned twice gets the sum of both)
    differentiable_outputs = list({p.name: p for p in flat_proxies(trace.output) if p.name in d.needs_grad}.values())
    grads_for = [p.name for p in trace.inputs if p.requires_grad and is_differentiable(p)]
    cotangents, recorded, grad_outputs = _record_backward(d, differentiable_outputs, grads_for, frozenset())
    # what the backward reads of the forward is what the forward saves, less what it recomputes
    recorded, saved_list = _recompute_checkpointed(
        d.forward, regions, recorded, list(_forward_values_read(recorded, cotangents, grad_outputs).values()))
    _refuse_overwritten_saved_leaves(d.forward, saved_list)
    # sizes read from the saved tensors alone: a backward built for a call where some outputs got
    # no gradient lacks their cotangents (`return x, x[0]` with symbolic sizes: x comes back as itself)
    carrier = _size_carrier(d, recorded, saved_list)
    if carrier is not None:
        saved_list.append(carrier)
    forward = Trace.from_trace(
        trace,
        bsyms=d.forward,
        output=(tuple(flat_proxies(trace.output)), tuple(saved_list)),
        provenance="forward of the gradient transform: returns (output tensors, saved for backward)",
    )
    def backward_trace(cotangents: dict, recorded: list, grad_outputs: Any, provenance: str) -> Trace:
        return Trace(
            f"backward_{trace.name}",
            saved_list + list(cotangents.values()),
            recorded,
            grad_outputs,
            constants=trace.constants,
            context=trace.context,
            provenance=provenance,
        )

    backward = backward_trace(cotangents, recorded, grad_outputs, "backward of the gradient transform: (saved, cotangents) -> gradients of the inputs")

    made: dict[frozenset[str], Trace | None] = {}

    def backward_without(absent: frozenset[str]) -> Trace | None:
        """The backward for a call where the outputs named in `absent` got no gradient (PyTorch
        passes None for them: eager's autograd never reaches what only they feed), or None where
        it would read a forward value the forward does not save. Made once per `absent`: every
        plan of this differentiation names its values alike."""
        if absent not in made:
            made[absent] = _backward_without(absent)
        return made[absent]

    def _backward_without(absent: frozenset[str]) -> Trace | None:
        cotangents, recorded, grad_outputs = _record_backward(d, differentiable_outputs, grads_for, absent)
        recorded, reads = _recompute_checkpointed(
            d.forward, regions, recorded, list(_forward_values_read(recorded, cotangents, grad_outputs).values()))
        if not {p.name for p in reads} <= {p.name for p in saved_list}:
            return None
        if set(_symbols_in_calls(recorded)) - set(symbol_reads(saved_list + list(cotangents.values()))):
            # it computes with sizes only an absent cotangent carried (`return x, x[0]`: x is
            # returned as itself, so its slot never gets a gradient and s0 is in no input)
            return None
        return backward_trace(cotangents, recorded, grad_outputs, f"backward of the gradient transform, for a call where {sorted(absent)} got no gradient")

    linked = {p.name for entry in d.tape for p in entry.bsym.input_proxies()}
    unlinked = [name for name, g in zip(grads_for, grad_outputs) if g is None and name not in linked]
    return Differentiated(forward, backward, saved_list, differentiable_outputs, grads_for, d.rules_used, backward_without, unlinked, dict(overrides or {}))
