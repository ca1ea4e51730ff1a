"""A symbolic trace reused at sizes it was not first called with gives eager's answer.

Each program reads a size in a way whose value must follow the call (a list of sizes as an
index), checks a size's type, or returns what eager returns; it runs under `dynamic=True` and
automatic dynamic over lengths that change together and apart, compared with eager at every call.
"""
from __future__ import annotations

import pytest
import torch

import squall

def _written_at(x, rows, value):
    x[rows] = value
    return x


PROGRAMS = {
    # a list holding a symbolic size as an index: before, torch.tensor of the list failed on the size
    "list_of_sizes_as_index": lambda x: x[[x.shape[0] - 1, 0]] * 2,
    "list_of_sizes_written": lambda x: _written_at(x.clone(), [0, x.shape[0] // 2, -x.shape[0]], x.shape[1]),
    # type() of a size in the program's own code is int, of its shape torch.Size, as in eager:
    # before, SymInt and SymShape (the branch for an int was never taken, silently)
    "type_of_a_size": lambda x: x * (type(x.shape[0]) is int) + (type(x.shape[0] // 2) == int),
    "type_of_a_shape": lambda x: x * (type(x.shape) is torch.Size) + len(type(x.shape[1:]).__name__),
    # eager's Tensor.__setitem__ returns None: before, the traced call returned the written tensor
    "setitem_returns_none": lambda x: x.__setitem__(slice(x.shape[0] // 3, None), x.shape[1]) or x,
    # a product of sizes as the right operand of % or // was written bare in the generated code:
    # `1 % s0*s1` is `(1 % s0) * s1` (roll of the flattened tensor, decomposed; a size divided)
    "remainder_by_a_product": lambda x: x.new_zeros(29 % (x.shape[0] * x.shape[1]) + 1) + 1,
    "quotient_by_a_product": lambda x: x.new_ones((100 * x.shape[0]) // (x.shape[0] * x.shape[1])),
}

SHAPES = [(5, 7), (7, 7), (2, 3), (3, 2), (16, 4), (6, 6), (5, 7)]


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic_dynamic"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_reused_trace_matches_eager_at_every_size(name, dynamic):
    fn = PROGRAMS[name]
    jfn = squall.jit(fn, dynamic=dynamic)
    for shape in SHAPES:
        x = torch.randn(*shape)
        mine, eagers = x.clone(), x.clone()
        torch.testing.assert_close(jfn(mine), fn(eagers), msg=lambda m: f"{name} at {shape}: {m}")
        torch.testing.assert_close(mine, eagers, msg=lambda m: f"{name} at {shape}, the input: {m}")


def test_setitem_called_by_name_returns_none_and_writes():
    def program(x):
        return x.__setitem__(0, x.shape[1]), x

    x = torch.zeros(3, 4)
    result, written = squall.jit(program, dynamic=True)(x)
    assert result is None
    torch.testing.assert_close(written, program(torch.zeros(3, 4))[1])
    torch.testing.assert_close(x[0], torch.full((4,), 4.0))
