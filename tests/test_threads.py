"""Tracing never touches the user's module; threads compile once and update module state whole."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import squall
from squall.proxies import current_context


class Reads(torch.nn.Module):
    """Reads its parameters every way a module does, and records what it saw while traced."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 4, bias=False)
        self.head.weight = self.lin.weight  # tied
        self.register_buffer("count", torch.zeros(()))
        self.seen: list = []

    def forward(self, x):
        self.seen.append((type(self.lin.weight), type(self._buffers["count"])))
        self.count.add_(1)
        rows = self.lin.weight.shape[0] + self.lin.weight.size(1)  # metadata of a parameter
        y = F.linear(x, self.lin.weight, self.lin.bias) * self.count  # the updated buffer
        return self.head(y) + rows + self.lin.weight.t().sum()


def test_tracing_leaves_the_module_as_it_was():
    eager, compiled = Reads(), Reads()
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(2, 4)
    with torch.no_grad():
        expected = [eager(x), eager(x)]
        jm = squall.jit(compiled)
        got = [jm(x), jm(x)]
    assert_close(got, expected)
    assert_close(compiled.count, eager.count)
    assert compiled.seen[0] == (torch.nn.Parameter, torch.Tensor)  # real tensors, while traced too
    assert compiled.head.weight is compiled.lin.weight


class Handshake(torch.nn.Module):
    """While traced, waits until another thread has called the same module eagerly."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.bn = torch.nn.BatchNorm1d(3)
        self.tracing = threading.Event()
        self.eager_done = threading.Event()

    def forward(self, x):
        if current_context() is not None:  # the tracing thread (a proxy answers type() and isinstance as a tensor)
            self.tracing.set()
            assert self.eager_done.wait(10)
        return self.bn(self.lin(x))


def test_eager_calls_of_the_module_while_another_thread_compiles():
    model = Handshake().eval()
    x = torch.randn(5, 3)
    with torch.no_grad():
        reference = model(x)
    errors: list[BaseException] = []
    results: list[torch.Tensor] = []

    def call_eagerly():
        try:
            assert model.tracing.wait(10)
            with torch.no_grad():
                results.extend(model(x) for _ in range(20))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
        finally:
            model.eager_done.set()

    other = threading.Thread(target=call_eagerly)
    other.start()
    with torch.no_grad():
        compiled = squall.jit(model)(x)
    other.join()
    assert not errors, errors
    assert len(results) == 20
    for r in results:
        assert_close(r, reference)
    assert_close(compiled, reference)


def test_concurrent_first_calls_compile_once():
    def f(a, b):
        return (a * b).sin() + a

    jf = squall.jit(f)
    a, b = torch.randn(8), torch.randn(8)
    start = threading.Barrier(4)
    results: list = [None] * 4

    def call(i):
        start.wait()
        results[i] = jf(a, b)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        assert_close(r, f(a, b))
    assert jf.cache_info().misses == 1


def test_batch_norm_from_four_threads_keeps_every_update():
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).train()
    compiled = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).train()
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(16, 4)
    calls = 25
    with torch.no_grad():
        for _ in range(4 * calls):  # the same batch each time: the running statistics do not depend on order
            expected = eager(x)
    jm = squall.jit(compiled)
    with torch.no_grad():
        jm(x)  # warm up: compiled before the threads start
    start = threading.Barrier(4)
    outputs: list = []

    def call():
        start.wait()
        with torch.no_grad():
            for _ in range(calls - (1 if threading.current_thread().name == "first" else 0)):
                outputs.append(jm(x))

    threads = [threading.Thread(target=call, name="first" if i == 0 else f"t{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bn_eager, bn_compiled = eager[1], compiled[1]
    assert int(bn_compiled.num_batches_tracked) == 4 * calls
    assert_close(bn_compiled.running_mean, bn_eager.running_mean)
    assert_close(bn_compiled.running_var, bn_eager.running_var)
    assert_close(outputs[-1], expected)


def test_a_parameter_in_an_opaque_call_is_read_at_each_call():
    class Bessel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self, x):
            return x * torch.special.bessel_j0(self.w) + self.w.size(0)

    model = Bessel()
    jm = squall.jit(model)
    x = torch.randn(3)
    with torch.no_grad(), pytest.warns(squall.SquallWarning, match="bessel_j0"):
        assert_close(jm(x), model(x))
    with torch.no_grad():
        model.w.mul_(2)  # an optimizer step: the compiled program reads the new value
        assert_close(jm(x), model(x))
