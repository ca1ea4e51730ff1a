"""Views in a functional trace, as PyTorch's functionalization models them.

In eager PyTorch a view (`x[0]`, `x.t()`, `x.view(...)`, `x.split(2)`) shares memory with
its base: an in-place write through the view changes the base, and a write into the base
(or another view) changes the view. A squall trace is functional, so `ViewTracker` keeps,
for each view, its *root* (the tensor that is no view: an input, a parameter, an
intermediate) and the *steps* from the root to it (each a recorded view call), and:

- a write through a view is applied to its root: the new view value is scattered back
  through the steps, each by its inverse (`setitem` for indexing, slicing and splitting; a
  reshape for reshapes; the inverse permutation for transposes, `movedim` for `movedim`),
  and the root is rebound to the result (an input or a module's buffer then gets it
  written back at the end, as eager leaves it);
- every other view of that root is marked stale, and regenerated from the root's newest
  value (its steps replayed) the next time the program uses it.

Views whose memory sharing depends on the layout (`reshape`, `reshape_as` and `flatten` return a
view where `view` would succeed for their input's sizes and strides, else a copy; `contiguous()`
returns its input itself where that is contiguous, else a copy) are decided where a write or a
stale read reaches them, by eager's layout of their input in the call being traced
(squall.frontend.layouts, guarded): a view is written back through like any other, a copy
leaves its input's family (with the views taken of it); before an opaque torch call writes in
place (at run time, into the tensor itself), such copies leave as clones (`before_opaque_write`).
Views with no inverse here (`unfold`), and views eager makes in calls squall runs opaquely
(tagged `OPAQUE_VIEW`: `as_strided`, `x.imag`, ...), make the call run eagerly, with a warning saying
why (`NotModelled`), where a write would have to pass through them, or a read would need a write
into their base. So does a write through an expanded view: eager refuses most and takes some.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from .. import prims
from ..ltorch.base import NotModelled, UndecidedOverlap
from ..ltorch.shape import clone, movedim, transpose
from ..ltorch.subscript import setitem
from ..prims.base import canonical_dim
from ..proxies import TensorProxy
from ..symbol import Tags
from .grad_roots import refuse_write_into_root
from .layouts import traced_is_contiguous, traced_overlap, traced_reshape_is_view, traced_to_aliases

__all__ = ["ViewStep", "ViewTracker", "VIEW_OPS"]


@dataclass(frozen=True)
class ViewStep:
    """One recorded view call: `op(*args, **kwargs)` with the viewed tensor at `args[at]`;
    `index` picks the output of an op that returns several views; `key`, where set, is the
    indexing that gives the same view (a split's piece), whose inverse is `setitem`."""

    op: Any
    args: tuple
    kwargs: dict = field(default_factory=dict)
    at: int = 0
    index: int | None = None
    key: tuple | None = None
    shape: tuple | None = None  # the view's shape when made (a layout-dependent one's: `ViewTracker._view_in_eager`)

    def forward(self, parent: TensorProxy) -> TensorProxy:
        """The view, replayed from `parent`'s current value."""
        args = (*self.args[: self.at], parent, *self.args[self.at + 1 :])
        out = self.op(*args, **self.kwargs)
        return out if self.index is None else out[self.index]

    def bound(self) -> tuple:
        return self.op.normalize(self.args, self.kwargs)[0]


def _whole(d: int, item) -> tuple:
    """The key selecting `item` along dim `d`."""
    return (slice(None),) * d + (item,)


# --- inverses: (step, the parent's current value, the view's new value) -> the parent's new value --


def _reshaped_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    return prims.reshape(new, tuple(parent.shape))


def _expanded_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    if new.numel() != parent.numel():
        # eager refuses most such writes ("more than one element of the written-to tensor refers
        # to a single memory location") and takes some (fill_, zero_): eager decides, and says which
        raise NotModelled(
            "squall: an in-place write through an expanded view, whose elements share memory: eager refuses most "
            "such writes and takes some (fill_, zero_), which squall's traces do not model"
        )
    return prims.reshape(new, tuple(parent.shape))


def _getitem_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    return setitem(parent, step.args[1], new)


def _narrow_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    _, dim, start, length = step.bound()
    d = canonical_dim(parent.ndim, dim)
    start = start + parent.shape[d] if start < 0 else start
    return setitem(parent, _whole(d, slice(start, start + length)), new)


def _selected_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    _, dim, index = step.bound()
    return setitem(parent, _whole(canonical_dim(parent.ndim, dim), index), new)


def _swapped_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    _, d0, d1 = step.bound()
    return transpose(new, d0, d1)


def _reversed_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    return prims.transpose(new, tuple(reversed(range(new.ndim))))


def _last_two_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    return transpose(new, -2, -1)


def _permuted_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    bound, kwargs = step.op.normalize(step.args, step.kwargs)
    dims = bound[1:] or kwargs.get("dims")
    if len(dims) == 1 and isinstance(dims[0], (list, tuple, torch.Size)):
        dims = dims[0]
    perm = [canonical_dim(parent.ndim, d) for d in dims]
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return prims.transpose(new, tuple(inverse))


def _moved_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    _, source, destination = step.bound()
    return movedim(new, destination, source)


def _diagonal_back(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
    # diagonal() is a strided slice of the two dims moved last and flattened: set that slice
    _, offset, dim1, dim2 = step.bound()
    d1, d2 = canonical_dim(parent.ndim, dim1), canonical_dim(parent.ndim, dim2)
    moved = movedim(parent, (d1, d2), (-2, -1))
    rows, cols = moved.shape[-2], moved.shape[-1]
    length = new.shape[-1]
    if length == 0:
        return parent
    start = offset if offset >= 0 else -offset * cols
    flat = prims.reshape(moved, (*moved.shape[:-2], rows * cols))
    flat = setitem(flat, (..., slice(start, start + (length - 1) * (cols + 1) + 1, cols + 1)), new)
    return movedim(prims.reshape(flat, tuple(moved.shape)), (-2, -1), (d1, d2))


def _no_inverse(why: str) -> Callable:
    def refuse(step: ViewStep, parent: TensorProxy, new: TensorProxy) -> TensorProxy:
        raise NotModelled(f"squall: an in-place write through {step.op.id}(...) {why}")

    return refuse


# what a write through each view op does to the viewed tensor
_INVERSES: dict[str, Callable] = {
    "torch.Tensor.__getitem__": _getitem_back,
    "torch.Tensor.view": _reshaped_back,
    "torch.Tensor.view_as": _reshaped_back,
    "torch.Tensor.reshape": _reshaped_back,  # only where eager's was a view (`_view_in_eager`), as for the next three
    "torch.Tensor.reshape_as": _reshaped_back,
    "torch.Tensor.flatten": _reshaped_back,
    "torch.Tensor.unflatten": _reshaped_back,  # always a view: it splits one dimension
    "torch.Tensor.squeeze": _reshaped_back,
    "torch.Tensor.unsqueeze": _reshaped_back,
    "torch.Tensor.detach": _reshaped_back,
    "torch.Tensor.expand": _expanded_back,
    "torch.Tensor.expand_as": _expanded_back,
    "torch.broadcast_to": _expanded_back,
    "torch.broadcast_tensors": _expanded_back,
    "torch.narrow": _narrow_back,
    "torch.select": _selected_back,
    "torch.transpose": _swapped_back,
    "torch.swapaxes": _swapped_back,
    "torch.swapdims": _swapped_back,
    "torch.t": _reversed_back,
    "torch.Tensor.T": _reversed_back,
    "torch.Tensor.H": _reversed_back,
    "torch.Tensor.mT": _last_two_back,
    "torch.Tensor.mH": _last_two_back,
    "torch.Tensor.permute": _permuted_back,
    "torch.movedim": _moved_back,
    "torch.diagonal": _diagonal_back,
    "torch.Tensor.contiguous": lambda step, parent, new: new,  # only where eager returned its input
    "torch.Tensor.to.memory_format": lambda step, parent, new: new,  # as contiguous
    "torch.Tensor.unfold": _no_inverse("is not supported (its windows may overlap); write into the tensor it unfolds"),
}
# ops returning several views, one per piece along a dim: the position of their dim parameter
_SPLITS = {"torch.split": 2, "torch.Tensor.split": 2, "torch.chunk": 2, "torch.tensor_split": 2, "torch.unbind": 1}
# views only where the input's layout allows it, else copies (`ViewTracker._view_in_eager`)
_LAYOUT_DEPENDENT = frozenset({"torch.Tensor.reshape", "torch.Tensor.reshape_as", "torch.Tensor.flatten", "torch.Tensor.contiguous", "torch.Tensor.to.memory_format"})

# ltorch ops whose torch counterparts return views sharing memory with their input
VIEW_OPS = frozenset(_INVERSES) | frozenset(_SPLITS)


def _is_basic_key(key) -> bool:
    """Whether eager's `x[key]` is a view (ints, slices, None, ..., and 0-dim integer tensors,
    which eager takes as ints) rather than a gather (other tensors, lists, and bools: eager's
    `x[True]` indexes with a tensor)."""
    items = key if type(key) is tuple else (key,)
    return not any(type(k) is bool or isinstance(k, (list, tuple)) or (isinstance(k, (TensorProxy, torch.Tensor)) and not _an_int(k)) for k in items)


def _an_int(index: TensorProxy | torch.Tensor) -> bool:
    # (a 0-dim uint8 or bool tensor is a mask to eager)
    return index.ndim == 0 and not index.dtype.is_floating_point and not index.dtype.is_complex and index.dtype not in (torch.bool, torch.uint8)


class ViewTracker:
    """The views of one tracing: each view's root and steps, and which views are stale."""

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.root: dict[int, TensorProxy] = {}  # id(view) -> the tensor it is a view of, itself no view
        self.steps: dict[int, tuple[ViewStep, ...]] = {}  # id(view) -> the view calls from its root
        # id(root) -> [root, its views...]; holding them keeps every id above in use
        self.family: dict[int, list[TensorProxy]] = {}
        self.stale: set[int] = set()  # id(view): regenerated from its root before its next use
        self.logs: list[list] = []  # the module calls being recorded: each notes the view calls made meanwhile (squall.frontend.module_replays)

    def note(self, op: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """Record, where `op` is a view op, that the tensors it returned view its tensor argument."""
        if getattr(op, "id", None) not in VIEW_OPS and Tags.OPAQUE_VIEW not in getattr(op, "tags", ()):
            return
        if op.id == "torch.Tensor.__getitem__" and not _is_basic_key(args[1]):
            return  # advanced indexing copies
        for log in self.logs:
            log.append((op, args, kwargs, out))
        if type(out) is TensorProxy:  # the common case, without pytree (and a proxy's __class__, read by isinstance)
            outputs, several = [out], False
        else:
            outputs, _ = tree_flatten(out)
            several = isinstance(out, (tuple, list))
        keys = self._split_keys(op, args, kwargs, outputs) if op.id in _SPLITS else None
        for i, view in enumerate(outputs):
            at = i if op.id == "torch.broadcast_tensors" else next((j for j, x in enumerate(args) if isinstance(x, TensorProxy)), None)
            if at is None or not isinstance(view, TensorProxy) or view is args[at]:
                continue
            shape = tuple(view.shape) if op.id in _LAYOUT_DEPENDENT else None
            step = ViewStep(op, args, kwargs, at, i if several else None, keys[i] if keys else None, shape)
            base = args[at]
            root = self.root.get(id(base), base)
            self.root[id(view)] = root
            self.steps[id(view)] = (*self.steps.get(id(base), ()), step)
            self.family.setdefault(id(root), [root]).append(view)

    @staticmethod
    def _split_keys(op: Any, args: tuple, kwargs: dict, pieces: list) -> list[tuple]:
        """For each piece of a split along a dim, the indexing that gives it."""
        bound = op.normalize(args, kwargs)[0]
        d = canonical_dim(bound[0].ndim, bound[_SPLITS[op.id]])
        if op.id == "torch.unbind":
            return [_whole(d, i) for i in range(len(pieces))]
        keys, start = [], 0
        for piece in pieces:
            keys.append(_whole(d, slice(start, start + piece.shape[d])))
            start += piece.shape[d]
        return keys

    def family_of(self, a: TensorProxy) -> list[TensorProxy]:
        """`a`'s root, then every view noted of that root (`a` itself, where no view was taken of it)."""
        root = self.root.get(id(a), a)
        return self.family.get(id(root), [root])

    def write(self, a: TensorProxy, value: TensorProxy) -> TensorProxy:
        """`a` gets `value` (an in-place op wrote it); its root and other views follow."""
        if self.ctx.grad_roots:
            refuse_write_into_root(self.ctx, self.family_of(a))
        root = self.root.get(id(a))
        if root is None:
            self._mark_stale(a, keep=None)
            return self.ctx.rebind(a, value)
        steps = self.steps[id(a)]
        k = self._last_copy(steps)
        if k is not None:
            # that copy is a tensor of its own, and `a` is it or a view of it
            self._leave_family(self._made_by(k, a, steps), root)
            return self.write(a, value)
        _refuse_opaque_views(steps, a, written=True)
        parents = [root]  # each step's input, as it is now
        for step in steps[:-1]:
            parents.append(step.forward(parents[-1]))
        new = value
        for step, parent in zip(reversed(steps), reversed(parents)):
            new = setitem(parent, step.key, new) if step.key is not None else _INVERSES[step.op.id](step, parent, new)
        if any(step.op.id == "torch.Tensor.detach" for step in steps):
            # a write through `w.data` or `w.detach()` is unseen by autograd, as one under no_grad
            # is: `w` stays in the graph and the gradient reaching its new value passes to it
            with torch.no_grad():
                self.ctx.rebind(root, new)
        else:
            self.ctx.rebind(root, new)
        self._mark_stale(root, keep=a)
        return self.ctx.rebind(a, value)

    def has_views(self, a: TensorProxy) -> bool:
        """Whether a view was taken of `a`'s root (`a` is one, or has one)."""
        return id(self.root.get(id(a), a)) in self.family

    def check_overlap(self, name: str, a: TensorProxy, operands: list, key: Any = None) -> None:
        """Before in-place op `name` writes `a`: raise eager's error where an operand is a view of
        `a`'s family whose memory partly overlaps `a`'s (`x[1:] += x[:-1]`, `x.add_(x.t())`; eager's
        loop would read elements it has already written). The same tensor (`x.add_(x)`), a view of
        the same elements laid out alike and disjoint views (`x[0] += x[1]`, `x[:, ::2] += x[:, 1::2]`)
        are answered as eager answers them. Where views that are not dense (which eager does not
        check) share elements, eager's answer is its loop order's, and where the call's layouts are
        unknown squall cannot tell: the program runs eagerly (`UndecidedOverlap`). With `key`
        (`a[key] = b`), the part `a[key]` is what is written: a view where `key` is basic, else
        (advanced indexing) `a` itself, as torch's index_put_ checks."""
        if not self.has_views(a):
            return  # no operand shares its memory
        root = self.root.get(id(a), a)
        for b in operands:
            if type(b) is not TensorProxy or b is a or self.root.get(id(b), b) is not root or self._taken_at(b, a, key):
                continue
            copied = any(self._last_copy(self.steps.get(id(t), ())) is not None for t in (a, b))  # a reshape eager copied
            overlap = traced_overlap(self.ctx, a, b, key if key is not None and _is_basic_key(key) else None, shared=not copied)
            if overlap == "partial":
                raise RuntimeError(
                    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                    "single memory location. Please clone() the tensor before performing the operation."
                )
            if overlap is None:
                raise UndecidedOverlap(
                    f"squall: {name} writes tensor {a.name} reading {b.name}, a view of the same tensor that may share "
                    "its elements: eager then raises, or answers in the order its loop writes them, which squall's "
                    "functional program does not reproduce"
                )

    def _taken_at(self, b: TensorProxy, a: TensorProxy, key: Any) -> bool:
        """Whether `b` is `a[key]` itself (`x[i] += y` assigns the view it wrote back to `x[i]`, with
        the same key): the same elements laid out alike, for every size, with no layout read."""
        step = self.steps.get(id(b), (None,))[-1]
        return key is not None and step is not None and step.op.id == "torch.Tensor.__getitem__" and step.args[0] is a and step.args[1] is key

    def before_opaque_write(self, a: TensorProxy) -> None:
        """Before an opaque torch call writes into `a` in place, which it does to `a`'s tensor at run
        time: each copy eager made in `a`'s family (a layout-dependent view of it that is no view in
        eager) leaves the family now as a fresh tensor (a clone), its views stale (regenerated from
        it before their next use). At run time the torch call that made such a copy may have
        returned a view (contiguous() of a value squall computed contiguous), which the write must
        neither reach through the copy nor leave the copy sharing."""
        if self.ctx.grad_roots:
            refuse_write_into_root(self.ctx, self.family_of(a))
        root = self.root.get(id(a), a)
        for member in list(self.family.get(id(root), ())[1:]):
            steps = self.steps.get(id(member))
            if self.root.get(id(member)) is not root or steps[-1].op.id not in _LAYOUT_DEPENDENT or self._view_in_eager(steps[-1]):
                continue
            self._leave_family(member, root)
            self.ctx.rebind(member, clone(member))
            self._mark_stale(member, keep=None)

    def _last_copy(self, steps: tuple[ViewStep, ...]) -> int | None:
        """The position of the last of `steps` that eager made a copy with (a layout-dependent
        one), asking eager's layout from the end: the steps before it lead to that copy's input."""
        return next((k for k in reversed(range(len(steps))) if steps[k].op.id in _LAYOUT_DEPENDENT and not self._view_in_eager(steps[k])), None)

    @staticmethod
    def _made_by(k: int, view: TensorProxy, steps: tuple[ViewStep, ...]) -> TensorProxy:
        """The tensor step `k` of `steps` (which lead to `view`) made."""
        return view if k == len(steps) - 1 else steps[k + 1].args[steps[k + 1].at]

    def _view_in_eager(self, step: ViewStep) -> bool:
        """Whether eager's call of a layout-dependent view op returned a view of its input (for
        `contiguous()`: the input itself) rather than a copy, by its input's layout in the call
        being traced (guarded, squall.frontend.layouts): `contiguous()` where the input is laid out
        as asked, `reshape`, `reshape_as` and `flatten` where `view` would succeed for it."""
        x = step.args[step.at]
        if step.op.id == "torch.Tensor.contiguous":
            return traced_is_contiguous(self.ctx, x, step.bound()[1])
        if step.op.id == "torch.Tensor.to.memory_format":
            return traced_to_aliases(self.ctx, x, step.kwargs["memory_format"])
        return traced_reshape_is_view(self.ctx, x, step.shape)

    def _leave_family(self, a: TensorProxy, root: TensorProxy) -> None:
        """`a`, noted as a view of `root`, is a copy (eager's layout-dependent op copied): it and
        the views taken of it since leave that family, and `a` roots them. A write into that
        family never reached them (a write through them leaves it first), so none is stale."""
        family = self.family[id(root)]
        leaving = [v for v in family if v is a or any(step.args[step.at] is a for step in self.steps.get(id(v), ()))]
        family[:] = [v for v in family if not any(v is w for w in leaving)]  # by identity: a proxy's == is torch's
        for view in leaving:
            self.stale.discard(id(view))
            if view is a:
                del self.root[id(a)], self.steps[id(a)]
                continue
            steps = self.steps[id(view)]
            at = next(i for i, step in enumerate(steps) if step.args[step.at] is a)
            self.root[id(view)], self.steps[id(view)] = a, steps[at:]
            self.family.setdefault(id(a), [a]).append(view)

    def _mark_stale(self, root: TensorProxy, keep: TensorProxy | None) -> None:
        for view in self.family.get(id(root), ())[1:]:
            if view is not keep:
                self.stale.add(id(view))

    def refresh(self, values: Any) -> None:
        """Regenerate, from their roots' newest values, the stale views among `values` (in place:
        the handles the program holds stand for the new values), which the program is about to use."""
        for x in tree_flatten(values)[0]:
            if type(x) is not TensorProxy:
                continue
            if id(x) not in self.stale:
                continue
            steps = self.steps[id(x)]
            k = self._last_copy(steps)
            if k is not None:
                # eager made a copy on the way, which the write that made `x` stale did not reach
                # (a write through the copy's views leaves the family first, `write`): the copy
                # and its views keep their values, and leave the family
                self._leave_family(self._made_by(k, x, steps), self.root[id(x)])
                continue
            _refuse_opaque_views(steps, x, written=False)
            self.stale.discard(id(x))
            value = self.root[id(x)]
            for step in steps:
                value = step.forward(value)
            self.ctx.rebind(x, value)

    def taken_of(self, x: TensorProxy, bases: dict[int, TensorProxy]) -> TensorProxy | None:
        """`x` taken again, by its steps, of the tensor `bases` maps its root to (an input the
        program wrote, once its final value is written back into it), where eager's `x` is a view
        of that root: a returned view of a written input then shares the input's memory, as
        eager's does (`x.mul_(2); return x[0]`). None where `x` is no such view."""
        root = self.root.get(id(x))
        base = bases.get(id(root)) if root is not None else None
        if base is None:
            return None
        steps = self.steps[id(x)]
        if self._last_copy(steps) is not None or any(Tags.OPAQUE_VIEW in getattr(step.op, "tags", ()) for step in steps):
            return None  # eager copied on the way, or squall cannot take that view again
        value = base
        for step in steps:
            value = step.forward(value)
        return value

def _refuse_opaque_views(steps: tuple[ViewStep, ...], x: TensorProxy, written: bool) -> None:
    """Raise where one of `steps` (the view calls that made `x`) is an opaque call's view: squall
    follows no write through it (`written`), nor takes it again of its base's new value."""
    opaque = next((step.op.id.removeprefix("opaque.") for step in steps if Tags.OPAQUE_VIEW in getattr(step.op, "tags", ())), None)
    if opaque is None:
        return
    if written:
        raise NotModelled(
            f"squall: an in-place write into {opaque}(...) of a tensor: that op is not in squall's torch language and "
            "runs as an opaque torch call, which returns a view (sharing memory) squall cannot follow a write through. "
            "Write the update out of place, or take the view with indexing or a view op squall models (x[:, i], "
            "x.narrow, x.transpose, x.view)"
        )
    raise NotModelled(
        f"squall: the program uses tensor {x.name}, a view {opaque}(...) returned of a tensor changed since; that op "
        "runs as an opaque torch call, whose view squall cannot take again of the new value. Take the view after the change"
    )
