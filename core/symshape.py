"""A traced tensor's shape where some sizes are symbolic: a torch.Size to the program.

torch.Size holds only ints and cannot be subclassed, so a shape holding `SymInt`s is a
`SymShape`: a tuple whose `__class__` answers torch.Size (as a TensorProxy's answers
torch.Tensor), so that `isinstance(x.shape, torch.Size)` holds as in eager.

What keeps the symbols (no read of a value, nothing specialised): indexing, unpacking, `len`,
slicing and `+`/`*` (a SymShape again, or a torch.Size where no symbol is left), `numel()`,
comparisons (`==` with a tuple or a Size decides each size on this call's values and guards the
verdict, as a SymInt's `==` does), and passing it on to torch (`x.view(s)`, `x.new_zeros(s)`,
where it is recorded as the tuple of sizes it holds).

What reads the values: `str`, `repr`, `format` and `hash` give eager's text and hash of this
call's sizes (`torch.Size([3, 7])`), each value read and guarded as `str(n)` is
(`squall.symbolic`), so a program that keys a cache on `str(x.shape)` gets another key at another
length; the program is then specialised on those sizes. `torch.Size(s)` holds the symbolic sizes
themselves (torch takes a SymInt as its own torch.SymInt), recorded as a SymShape is when passed
on. A program that returns one gets a torch.Size of each call's sizes.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import SequenceKey, register_pytree_node

from .symbolic import SymInt

__all__ = ["SymShape", "as_shape", "shape_text"]


def as_shape(sizes: Any) -> torch.Size | SymShape:
    """`sizes` as a shape: a torch.Size where every size is an int, else a SymShape."""
    items = tuple(sizes)
    for v in items:
        if type(v) is SymInt:
            return tuple.__new__(SymShape, items)
    return torch.Size(items)


def shape_text(shape: Any) -> str:
    """Eager's text of a shape with this call's sizes, read without a guard: for a warning or an
    error message, which never changes what the program computes (`str(shape)` reads and guards)."""
    return str(torch.Size([v.value if type(v) is SymInt else v for v in shape]))


def _values(shape: tuple) -> torch.Size:
    # this call's sizes, each read and guarded (`int(n)`): for what the program sees as text or a hash
    return torch.Size([int(v) for v in shape])


class SymShape(tuple):
    """A shape holding symbolic sizes (`squall.symbolic.SymInt`); see the module's docstring."""

    __slots__ = ()

    @property
    def __class__(self):
        return torch.Size

    def __getitem__(self, item):
        if type(item) is slice:
            return as_shape(tuple.__getitem__(self, item))
        return tuple.__getitem__(self, item)

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return as_shape(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return as_shape(tuple.__add__(tuple(other), self))

    def __mul__(self, n):
        if not isinstance(n, int) and type(n) is not SymInt:
            return NotImplemented
        return as_shape(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def numel(self) -> int | SymInt:
        """The number of elements a tensor of this shape holds, symbolic where its sizes are."""
        n = 1
        for v in self:
            n = n * v
        return n

    def __repr__(self) -> str:
        return repr(_values(self))

    def __str__(self) -> str:
        return str(_values(self))

    def __format__(self, spec: str) -> str:
        return format(_values(self), spec)

    def __hash__(self) -> int:
        return hash(_values(self))

    def __reduce__(self):
        # copy and pickle make the torch.Size of this call's sizes (read, guarded)
        return (torch.Size, (list(_values(self)),))


# a pytree node of its sizes, rebuilt by `as_shape`: a program that returns `x.shape` gets a
# torch.Size of the call's sizes (the generated function rebuilds it from the size symbols)
register_pytree_node(
    SymShape,
    lambda s: (list(s), None),
    lambda sizes, _: as_shape(sizes),
    serialized_type_name="squall.symshape.SymShape",
    flatten_with_keys_fn=lambda s: ([(SequenceKey(i), v) for i, v in enumerate(s)], None),
)
