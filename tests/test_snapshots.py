"""A recorded call holds its arguments as they were when the program made it: a list, tuple or
dict the program changes afterwards changes nothing the call read. And generated code never
reads a name before a line assigns it (or after a `del` freed it)."""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.compiler.codegen import UnassignedName, generate
from squall.extend import TensorProxy
from squall.frontend.tracing import InputBinding
from squall.market.plugins import Marketplace
from squall.symbol import DEL, BoundSymbol, snapshot
from squall.trace import Trace


def _same_as_eager(f, *args):
    expected = f(*args)
    actual = squall.jit(f)(*args)
    assert_close(actual, expected)
    return actual


def test_a_list_changed_after_an_op_read_it_is_read_as_it_was():
    def f(x, y):
        parts = [x, y]
        a = torch.cat(parts)
        parts[0] = y
        b = torch.cat(parts)
        return a, b

    a, _ = _same_as_eager(f, torch.zeros(2), torch.ones(2))
    assert_close(a, torch.tensor([0.0, 0.0, 1.0, 1.0]))


def test_a_list_appended_to_with_the_result_of_concatenating_it():
    """DenseNet's dense block: every layer appends its output to the list it concatenates."""

    def f(x):
        feats = [x]
        feats.append(torch.cat(feats, 1) * 2)
        feats.append(torch.cat(feats, 1).sum(1, keepdim=True))
        return torch.cat(feats, 1)

    out = _same_as_eager(f, torch.randn(2, 3))
    assert out.shape == (2, 7)


def test_a_nested_list_changed_inside_after_an_op_read_it():
    def f(x, y):
        dims = [[1], [0]]
        a = torch.tensordot(x, y, dims)
        dims[0][0], dims[1][0] = 0, 1  # the inner lists, not the outer one
        return a, torch.tensordot(x, y, dims)

    _same_as_eager(f, torch.randn(3, 3), torch.randn(3, 3))


def test_a_tuple_holding_a_list_changed_after_an_op_read_it():
    def f(x, y):
        dims = ([1], [0])
        a = torch.tensordot(x, y, dims=dims)
        dims[0][0], dims[1][0] = 0, 1
        return a, torch.tensordot(x, y, dims=dims)

    _same_as_eager(f, torch.randn(3, 3), torch.randn(3, 3))


def test_a_list_of_sizes_reversed_after_a_reshape_read_it():
    def f(x):
        shape = [4, 3]
        a = x.reshape(shape)
        shape.reverse()
        return a + 1, x.reshape(shape) + 1

    _same_as_eager(f, torch.randn(12))


def test_a_dict_changed_after_an_op_read_it():
    market = Marketplace(entry_point_group=None)
    op = market.operations.define(
        "snaptest.scaled", meta=lambda terms: TensorProxy(like=terms["a"]), reference=lambda terms: terms["a"] * terms["k"]
    )
    torch_ex = market.get("torch")
    torch_ex.register_implementation(op.symbol, op.reference)

    def f(x, y):
        terms = {"a": x, "k": 2.0}
        first = op(terms=terms)  # by keyword: the keyword arguments are snapshotted too
        terms["a"] = y
        terms["k"] = 3.0
        return first, op(terms)

    x, y = torch.randn(4), torch.randn(4)
    expected = f(x, y)
    assert_close(squall.jit(f, executors=[torch_ex])(x, y), expected)
    assert_close(expected[0], x * 2.0)


def test_snapshot_copies_containers_and_keeps_everything_else():
    inner = [1, 2]
    value = ({"k": inner}, (3, inner), "s")
    copied = snapshot(value)
    assert copied == value and copied is not value
    assert copied[0]["k"] is not inner and copied[1][1] is not inner
    plain = (1, (2.0, "a"), None, torch.float32)
    assert snapshot(plain) is plain  # nothing mutable: the same tuple, no copy
    tensor = torch.ones(1)
    assert snapshot([tensor])[0] is tensor  # tensors keep their identity (in-place ops rebind them)


class _Log(torch.nn.Module):
    """Keeps every input it saw in a list attribute and stacks them (a list of tensors squall
    reads through its recording copy of the list)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(x)
        return torch.stack(self.seen).sum(0)


def test_a_modules_list_of_tensors_passed_to_an_op_matches_eager_call_after_call():
    eager, compiled = _Log(), _Log()
    jitted = squall.jit(compiled)
    for step in range(3):
        x = torch.full((2,), float(step))
        assert_close(jitted(x), eager(x))
    assert len(compiled.seen) == 3 and all(type(t) is torch.Tensor for t in compiled.seen)


class _Sized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sizes = [4, 3]

    def forward(self, x):
        return x.reshape(self.sizes) + 1


def test_a_modules_list_read_by_an_op_is_still_guarded():
    module = _Sized()
    jitted = squall.jit(module)
    x = torch.randn(12)
    assert_close(jitted(x), module(x))
    module.sizes[0], module.sizes[1] = 3, 4  # the snapshot is per compilation: a change recompiles
    assert_close(jitted(x), module(x))
    assert jitted(x).shape == (3, 4)


def _executed(f, *args) -> tuple[Trace, list[InputBinding]]:
    jf = squall.jit(f, executors=["torch"])
    jf(*args)
    compilation = squall.last_traces(jf)
    return compilation[-1], compilation.bindings


def test_generated_code_never_reads_a_name_before_a_line_assigns_it():
    executed, bindings = _executed(lambda x: (x * 2).sin() + 1, torch.randn(3))
    calls = [b for b in executed.bsyms if b.sym is not DEL]
    out_of_order = Trace.from_trace(executed, bsyms=[calls[1], calls[0], calls[2]], provenance="calls swapped (test)")
    with pytest.raises(UnassignedName, match=rf"{calls[1].sym.id} \(executor torch\) reads {calls[0].output.name} before any line assigns it"):
        generate(out_of_order, bindings, takes_params=False, nargs=1, takes_kwargs=False)


def test_generated_code_never_reads_a_name_a_del_freed():
    executed, bindings = _executed(lambda x: (x * 2).sin() + 1, torch.randn(3))
    first = next(b for b in executed.bsyms if b.sym is not DEL)
    early_del = BoundSymbol(DEL, (first.output,), {}, None)
    bsyms = [first, early_del, *[b for b in executed.bsyms if b is not first]]
    freed_early = Trace.from_trace(executed, bsyms=bsyms, provenance="an early del (test)")
    with pytest.raises(UnassignedName, match=rf"reads {first.output.name} after a del freed it"):
        generate(freed_early, bindings, takes_params=False, nargs=1, takes_kwargs=False)


def test_generated_code_never_returns_a_name_no_line_assigns():
    executed, bindings = _executed(lambda x: x.cos() * 3, torch.randn(3))
    last = [b for b in executed.bsyms if b.sym is not DEL][-1]
    bsyms = [b for b in executed.bsyms if b is not last]
    missing = Trace.from_trace(executed, bsyms=bsyms, provenance="the last call dropped (test)")
    with pytest.raises(UnassignedName, match=rf"the return reads {last.output.name} before any line assigns it"):
        generate(missing, bindings, takes_params=False, nargs=1, takes_kwargs=False)
