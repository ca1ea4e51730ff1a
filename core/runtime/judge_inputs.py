"""What an upgrade's judge runs the torch and the fused plan on (squall.runtime.tiers).

A call's inputs are kept as `TensorSpec`s when its upgrade is queued: their metadata, a copy of
their values within a budget (first the inputs the program's value guards read, so the judge
takes the call's branches; of the others less, since every entry's job holds its copies until
it runs), and past that budget a weak reference to each input the program never writes, read in
place when the judge runs (a model's weights: drawn unit-normal weights grow a deep model's
activations until the plans differ by rounding alone). What the program reads from objects (a
KV cache's tensors) is taken at the call, since the objects change after it. The job keeps no
user data alive. A differentiated program's outputs get the same seeded gradients in every plan
the judge runs (`judge_cotangent`).

The call's values alone can make the comparison vacuous: a warm-up with `torch.zeros`, all-equal or
tiny values give both plans the same results even where the fused plan is wrong away from them (a
float `%` computed as `a - floor(a / b) * b`, a bfloat16 cast dropped inside a kernel). So the judge
compares the plans a second time, on `example_inputs(..., drawn=True)`: every floating input drawn
from a seeded generator of its own (`drawn_values`), at the call's values' mean and spread where they
spread (a model's weights), else at unit spread; non-negative where the call's are and not all zero (variances), the
call's values where they hold NaNs or infinities (an additive mask). Integers, booleans and the
inputs the program's value guards read stay the call's: indices and masks stay valid, and the
branches taken the same; so do the tensors read in place (a large model's weights: no second copy).
"""
from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd.function import BackwardCFunction
from torch.utils._pytree import tree_flatten, tree_map

from ..compiler.pipeline import STATE_KEYWORD
from ..frontend.tracing import InputBinding
from ..market.fusion import example_tensor
from ..proxies import real_tensor
from ..trace import route_value

__all__ = ["TensorSpec", "call_specs", "drawn_values", "example_inputs", "input_gradients", "judge_cotangent", "JUDGE_KEEP_MAX_BYTES", "JUDGE_KEEP_OTHERS_MAX_BYTES"]

# the most a job keeps copies of the inputs its program's value guards read (a mask, token ids)
JUDGE_KEEP_MAX_BYTES = 64 << 20
# of that, the most it keeps of its other inputs' values (a job waits with them until its entry is
# hot, and a function with many signatures has a job for each: their copies add up)
JUDGE_KEEP_OTHERS_MAX_BYTES = 16 << 20


def _spec(x: Any, kept: dict[int, torch.Tensor], borrowable: set[int], guarded: set[int]) -> Any:
    """A tensor's metadata in place of the tensor, with a copy of its values where `kept` has it,
    else a weak reference to it where `borrowable` has its id: the job keeps no user data alive.
    `guarded`: the ids of the tensors the program's value guards read."""
    if real_tensor(x):
        value = kept.get(id(x))
        return TensorSpec(tuple(x.shape), x.dtype, x.device, x.requires_grad,
                           value.detach().clone() if value is not None else None,
                           weakref.ref(x) if value is None and id(x) in borrowable else None,
                           id(x) in guarded)
    return x


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    # a copy of the call's values, for an input the program's value guards read: the judge runs
    # on the values the program was traced for there, so it takes the same branches
    value: torch.Tensor | None = field(default=None, compare=False, repr=False)
    # past the copies' budget, the caller's tensor itself where the program never writes it (a
    # model's weights): drawn examples (unit normal weights) blow the activations of a deep model
    # up until the fused and the torch plan differ by their rounding alone
    borrowed: weakref.ReferenceType | None = field(default=None, compare=False, repr=False)
    # the program's value guards read it: drawn values would take other branches, or fail a guard
    guarded: bool = field(default=False, compare=False)

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n

    @property
    def drawable(self) -> bool:
        """Drawn in the judge's second comparison (`example_inputs(..., drawn=True)`): a float the value
        guards do not read, of which the job holds a copy or nothing (a tensor read in place, a model's
        weights past the copies' budget, stays the caller's: drawing it would double a large model's memory)."""
        return self.dtype.is_floating_point and not self.guarded and (self.value is not None or self.lent() is None)

    def lent(self) -> torch.Tensor | None:
        """The caller's tensor, read in place, while it lives and still has this metadata."""
        live = self.borrowed() if self.borrowed is not None else None
        if live is None or (tuple(live.shape), live.dtype, live.device) != (self.shape, self.dtype, self.device):
            return None
        return live.detach().requires_grad_(self.requires_grad)

    def example(self, borrow: bool = True) -> torch.Tensor:
        """The copy of the call's values where kept, else the caller's tensor while it lives
        (where `borrow`; else values drawn at its scale), else drawn values."""
        if self.value is not None:
            return self.value.clone().requires_grad_(self.requires_grad)
        live = self.lent()
        if live is not None:
            return live if borrow else _drawn_like(live)
        return example_tensor(self.shape, self.dtype, self.device, requires_grad=self.requires_grad)


def _drawn_like(t: torch.Tensor) -> torch.Tensor:
    """Values drawn at the mean and spread of `t`'s (a model's weights: unit normal ones grow a deep
    model's activations until plans differ by their rounding alone); zeros for integers, as drawn."""
    drawn = example_tensor(t.shape, t.dtype, t.device)
    if t.dtype.is_floating_point and t.numel() > 1:
        with torch.no_grad():
            std, mean = torch.std_mean(t.detach().float())
            drawn = (drawn.float() * std + mean).to(t.dtype)
    return drawn.requires_grad_(t.requires_grad)


# below this spread the call's values are degenerate (all equal, or tiny): drawn values spread by one
DEGENERATE_SPREAD = 1e-3


def drawn_values(t: torch.Tensor, seed: int) -> torch.Tensor:
    """Values for the judge's second comparison in place of a floating tensor `t` of the call: drawn
    from a generator seeded with `seed` (one per input: tensors of one shape get different values), at
    `t`'s mean and spread (a model's weights: unit normal ones grow a deep model's activations until
    plans differ by their rounding alone), at unit spread around its mean where `t`'s values hardly
    spread (zeros, ones, tiny values: what made the first comparison vacuous), non-negative where
    `t`'s are and are not all zero (a variance, a probability); `t`'s own values where it holds NaNs or infinities (an
    additive mask of -inf: drawn values would unmask what the program masks)."""
    with torch.no_grad():
        values = t.detach().float()
        if not bool(torch.isfinite(values).all()):
            return t.detach().clone().requires_grad_(t.requires_grad)
        drawn = example_tensor(t.shape, torch.float32, t.device, seed=seed)
        if t.numel():
            std, mean = torch.std_mean(values) if t.numel() > 1 else (values.new_zeros(()), values.mean())
            spread = std if bool(std > DEGENERATE_SPREAD) else torch.ones_like(std)
            drawn = drawn * spread + mean
            if bool(values.min() >= 0) and bool(values.max() > 0):  # (zeros say nothing of a sign)
                drawn = drawn.abs()
    return drawn.to(t.dtype).requires_grad_(t.requires_grad)


def call_specs(params: list | None, args: tuple, kwargs: dict, *, keep: Sequence[tuple] = (),
               state: Sequence[InputBinding] = (), written: Sequence[tuple] = ()) -> tuple[Any, tuple, dict]:
    """A call's (params, args, kwargs) with every tensor replaced by its metadata; the tensors
    at the input paths `keep` (`InputBinding.path`: those the program's value guards read) by
    their metadata and a copy of their values, while those copies take at most JUDGE_KEEP_MAX_BYTES.
    The other tensors keep a copy of their values too while the copies fit that budget (the judge
    times the plans on the call's values); past it, a weak reference to each the program never
    writes (the paths `written`: Compilation.written_input_paths), read in place by the judge while
    it lives, else drawn examples. The inputs the program reads
    from objects (`state`: Compilation.state_bindings) are taken
    now, as they are at the call, and added to kwargs under STATE_KEYWORD + their name: the
    objects change after the call (a KV cache grows at every step), and the judge runs the
    program generated to take them so (`state_as_keywords`)."""
    roots = {"params": params, "args": args, "kwargs": kwargs}
    keyword = {id(b.path): STATE_KEYWORD + b.proxy.name for b in state}  # (guard_input_paths gives these path objects)
    try:
        snapshot = {keyword[id(b.path)]: _state_value(b.path, args, kwargs) for b in state}
    except (LookupError, AttributeError, TypeError):  # the call removed a place it read: the judge reads the objects then
        snapshot = {}
    def at(path: tuple) -> Any:
        if path[0] == "state":
            return snapshot.get(keyword.get(id(path), ""))
        value = roots[path[0]]
        for k in path[1:]:
            value = value[k]
        return value

    kept: dict[int, torch.Tensor] = {}
    guarded = {id(v) for v in map(at, keep) if real_tensor(v)}
    room = JUDGE_KEEP_MAX_BYTES
    for path in keep:
        value = at(path)
        if real_tensor(value) and id(value) not in kept:
            room -= value.numel() * value.element_size()
            if room < 0:
                break  # the judge's run fails a guard then, and says so
            kept[id(value)] = value
    # then every other input's values, while their copies fit: drawn examples (normal weights, zero
    # token ids) make other activations than the program's, and kernels whose speed depends on the
    # values (exp, erf and their underflows) time otherwise on them (the gpt training step's fused
    # plan: 0.91x the torch plan's time on the call's values, 0.98x on drawn ones)
    room = min(room, JUDGE_KEEP_OTHERS_MAX_BYTES)
    leaves = [v for v in tree_flatten((params, args, kwargs, snapshot))[0] if real_tensor(v) and v.layout is torch.strided]
    for value in leaves:
        if id(value) not in kept and value.numel() * value.element_size() <= room:
            room -= value.numel() * value.element_size()
            kept[id(value)] = value
    # the judge runs the plans on a borrowed tensor itself: never one the program writes into
    unwritten = {id(v) for v in leaves} - {id(at(path)) for path in written}
    return tree_map(lambda x: _spec(x, kept, unwritten, guarded), (params, args, {**kwargs, **snapshot}))


def _state_value(path: tuple, args: tuple, kwargs: dict) -> Any:
    """The value at a state input's path (squall.frontend.tracing.InputBinding) in this call."""
    _, owner, key, route = path
    return route_value(route, args, kwargs) if route is not None else owner[key]


def example_inputs(tree: Any, borrow: bool = True, drawn: bool = False) -> tuple[Any, list[torch.Tensor]]:
    """Example inputs for the specs in `tree` (not reading the caller's tensors unless `borrow`),
    and those of them that are the caller's own tensors, read in place. With `drawn`, the floating
    inputs the program's value guards do not read are `drawn_values` in place of the call's (the
    judge's second comparison); the others as without it."""
    lent: list[torch.Tensor] = []
    seeds = iter(range(1, 1 << 30))  # seed 0 is example_tensor's default: the call's own drawn examples

    def one(s: Any) -> Any:
        if not isinstance(s, TensorSpec):
            return s
        if drawn and s.drawable:
            seed = next(seeds)
            if s.value is None:
                return example_tensor(s.shape, s.dtype, s.device, requires_grad=s.requires_grad, seed=seed)
            return drawn_values(s.value, seed)
        live = s.lent() if borrow and s.value is None else None
        if live is None:
            return s.example(borrow=False)
        lent.append(live)
        return live

    return tree_map(one, tree), lent


def input_gradients(out: Any, leaves: list[torch.Tensor], without_gradient: frozenset[int] = frozenset()) -> tuple:
    """The gradients of `leaves` (the judge's example inputs that require them) from the outputs
    of a differentiated program, each output's gradient `judge_cotangent`'s but for the outputs of squall's
    autograd.Function at the positions `without_gradient` names, which get none (as the user's
    calls gave them none); () where nothing is differentiated."""
    if not leaves or not torch.is_grad_enabled():
        return ()
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None
            and not (without_gradient and t.output_nr in without_gradient and isinstance(t.grad_fn, BackwardCFunction))]
    if not outs:
        return ()
    return torch.autograd.grad(outs, leaves, grad_outputs=[judge_cotangent(t) for t in outs], allow_unused=True)


def judge_cotangent(t: torch.Tensor) -> torch.Tensor:
    """The gradient the judge gives an output `t`: values in [0.5, 1.5) drawn from a generator
    seeded the same for every plan (so the plans it compares get the same one). Not all ones: a
    program ending in a softmax has an input gradient of exactly zero for those (every row's
    gradient sums to zero), and the judge would compare rounding noise with rounding noise."""
    generator = torch.Generator().manual_seed(t.numel())
    return (torch.rand(t.shape, generator=generator, dtype=t.dtype) + 0.5).to(t.device)
