"""Replayed decompositions (squall.replays): a repeated torch-language call copies its first
call's decomposition; the trace is the one running every body gives, and results are eager's."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import squall
import squall.symbol
from squall.frontend.tracing import trace_program
from squall.replays import PendingCopy, call_key
from squall.tools.demo import Block, GPTConfig


def _traced_text(fn, args, **options) -> str:
    trace, _ = trace_program(fn, args, {}, **options)
    return trace.python(decompositions=True)


def _without_replays(monkeypatch):
    monkeypatch.setattr(squall.symbol, "call_key", lambda *a: None)


@pytest.mark.parametrize("dims", [None, {("args", 0): frozenset({0, 1})}], ids=["static", "symbolic"])
def test_a_block_traces_as_without_replays(monkeypatch, dims):
    torch.manual_seed(0)
    block = Block(GPTConfig(n_embd=64, n_head=4, block_size=32)).eval()
    x = torch.randn(2, 16, 64)
    replayed = _traced_text(block, (x,), module=block, dims=dims)
    _without_replays(monkeypatch)
    assert replayed == _traced_text(block, (x,), module=block, dims=dims)


def test_repeated_calls_replay_with_fresh_names():
    w, b = torch.randn(8, 8), torch.randn(8)

    def f(x, y):
        return F.linear(x, w, b), F.linear(y, w, b)

    trace, _ = trace_program(f, (torch.randn(3, 8), torch.randn(3, 8)), {})
    first, second = [bsym for bsym in trace.bsyms if bsym.sym.id == "torch.nn.functional.linear"]
    assert [s.sym.id for s in first.walk()] == [s.sym.id for s in second.walk()]
    made_first = {p.name for s in first.walk() for p in s.output_proxies()}
    made_second = {p.name for s in second.walk() for p in s.output_proxies()}
    assert not made_first & made_second
    assert second.subsymbols[-1].output_proxies()[0] is second.output  # the copy returns the call's own output
    xs = torch.randn(3, 8), torch.randn(3, 8)
    for got, want in zip(squall.jit(f)(*xs), f(*xs)):
        torch.testing.assert_close(got, want)


def _second_of_two_linears() -> tuple:
    """A program of two `F.linear` calls alike, traced: its trace, its bindings and the second call
    (a replay of the first, whose decomposition nothing has read yet)."""
    w = torch.randn(8, 8)

    def f(x, y):
        return torch.tanh(F.linear(x, w)), torch.tanh(F.linear(y, w))

    trace, bindings = trace_program(f, (torch.randn(3, 8), torch.randn(3, 8)), {})
    second = [bsym for bsym in trace.bsyms if bsym.sym.id == "torch.nn.functional.linear"][1]
    return trace, bindings, second


def test_a_replayed_decomposition_is_copied_when_first_read():
    trace, _, second = _second_of_two_linears()
    assert type(second._subsymbols) is PendingCopy  # nothing read it while tracing
    twin = second.from_bsym(source=None)
    assert type(twin._subsymbols) is PendingCopy  # a copy of the call shares the pending copy
    assert twin.subsymbols is second.subsymbols  # copied once, for both
    assert second.subsymbols[-1].output_proxies()[0] is second.output
    # its fresh proxies were named at the replay: the next call's names come after them
    names = [p.name for s in second.walk() for p in s.output_proxies()]
    later = trace.bsyms[trace.bsyms.index(second) + 1].output_proxies()[0].name
    assert later not in names


def test_an_in_place_op_copies_only_the_replayed_calls_it_touches(monkeypatch):
    w = torch.randn(8, 8)

    def f(x, y, z):
        a, b, c = F.linear(x, w), F.linear(y, w), F.linear(z, w)
        x.add_(1)  # rebinds x: the calls recorded so far are searched for it
        b.relu_()  # rebinds b, the second call's output
        return a, b, c

    args = lambda: (torch.randn(3, 8), torch.randn(3, 8), torch.randn(3, 8))
    trace, _ = trace_program(f, args(), {})
    _, second, third = [bsym for bsym in trace.bsyms if bsym.sym.id == "torch.nn.functional.linear"]
    assert type(second._subsymbols) is tuple  # it names b: copied where the rebind looked
    assert type(third._subsymbols) is PendingCopy  # it names neither
    replayed = trace.python(decompositions=True)
    _without_replays(monkeypatch)
    assert replayed == trace_program(f, args(), {})[0].python(decompositions=True)


def test_the_key_tells_numbers_apart_by_type_and_sign():
    with squall.proxies.tracing(squall.frontend.tracing.TracingContext()):
        x = squall.proxies.TensorProxy("x", shape=(2,), dtype=torch.float32, device="cpu")
        y = squall.proxies.TensorProxy("y", shape=(2,), dtype=torch.float32, device="cpu")
        sym = squall.ltorch.torch_table()[torch.add]
        keys = [call_key(sym, (x, v), {})[0] for v in (1, True, 1.0, 0.0, -0.0)]
        assert len(set(keys)) == 5
        # the same tensor twice is not two tensors of its metadata
        assert call_key(sym, (x, x), {})[0] != call_key(sym, (x, y), {})[0]
        assert call_key(sym, (x, y), {})[0] == call_key(sym, (y, x), {})[0]


def test_each_call_decomposes_with_its_own_numbers(monkeypatch):
    def f(x, n):
        return 1 / (x * 0.0) + 1 / (x * -0.0), n + 1, n + True, n + 1.0, n + n, n + n.flip(0)

    x, n = torch.rand(4) + 1, torch.arange(4)
    replayed = _traced_text(f, (x, n))
    assert "-0.0" in replayed
    for got, want in zip(squall.jit(f)(x, n), f(x, n)):
        torch.testing.assert_close(got, want, equal_nan=True)
        assert got.dtype == want.dtype
    _without_replays(monkeypatch)
    assert replayed == _traced_text(f, (x, n))


def test_a_body_that_captures_a_constant_is_not_replayed():
    # indexing with a list makes a constant of the indices in the body: each call's own
    def f(x):
        return x[[0, 2]] + x[[1, 2]], x[[0, 2]] * 2

    x = torch.randn(3, 4)
    for got, want in zip(squall.jit(f)(x), f(x)):
        torch.testing.assert_close(got, want)


def test_symbolic_sizes_keep_their_guards():
    # a replayed broadcast between two symbolic sizes holds only where the first call's did
    def f(x, y):
        return (x + y).sum(), (x + y).amax()

    jf = squall.jit(f)
    for n, m in ((4, 4), (5, 5), (6, 1), (7, 7)):
        x, y = torch.randn(n, 3), torch.randn(m, 3)
        for got, want in zip(jf(x, y), f(x, y)):
            torch.testing.assert_close(got, want)
    with pytest.raises(RuntimeError):
        jf(torch.randn(5, 3), torch.randn(4, 3))  # eager's error too: sizes that do not broadcast


def test_the_key_reads_the_default_device_as_torch_does():
    from torch.overrides import TorchFunctionMode

    from squall.replays import _default_device

    class PassingThrough(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    seen = [_default_device() == torch.get_default_device()]
    with PassingThrough():
        seen.append(_default_device() == torch.get_default_device())
        with torch.device("meta"):
            seen.append(_default_device() == torch.get_default_device() == torch.device("meta"))
    torch.set_default_device("meta")
    try:
        seen.append(_default_device() == torch.get_default_device() == torch.device("meta"))
    finally:
        torch.set_default_device(None)
    assert seen == [True] * 4


def _drawing_calls(trace) -> list[int]:
    return [id(b) for top in trace.bsyms for b in top.walk() if squall.symbol.Tags.RANDOM in b.sym.tags]


def test_whether_a_program_draws_is_read_without_copying_replayed_decompositions():
    from squall.compiler.pipeline import Compilation

    trace, bindings, second = _second_of_two_linears()
    assert Compilation([trace], bindings, None, {}).draws_random_numbers is False
    assert type(second._subsymbols) is PendingCopy  # its recording holds no random call: not copied
    assert _drawing_calls(trace) == []

    # two blocks alike: the second replays the first's calls, dropout among them (training)
    torch.manual_seed(0)
    blocks = torch.nn.Sequential(*(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Tanh()) for _ in range(2)))
    trace, bindings = trace_program(blocks, (torch.randn(3, 8),), {}, module=blocks)
    found = [id(b) for top in trace.bsyms for b in top.tagged(squall.symbol.Tags.RANDOM)]
    assert Compilation([trace], bindings, None, {}).draws_random_numbers is True
    assert found == _drawing_calls(trace) and len(found) >= 2  # as a full walk finds them, in its order
    blocks.eval()  # dropout returns its input: nothing drawn
    trace, bindings = trace_program(blocks, (torch.randn(3, 8),), {}, module=blocks)
    assert Compilation([trace], bindings, None, {}).draws_random_numbers is False
