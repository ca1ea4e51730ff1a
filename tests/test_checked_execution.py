"""Checked execution: an executor that breaks the trace's promise at run time is named, the
entry is replanned without it for that operation, and the call still returns eager's result."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.extend import OperatorExecutor


def vendor(name: str, impl, op: str = "torch.exp") -> OperatorExecutor:
    ex = OperatorExecutor(name)
    ex.register_implementation(op, impl)
    return ex


def program(x):
    return torch.exp(x) + 1  # THE EXP LINE


def took_exp(jf) -> str:
    (who,) = [d.executor for d in squall.last_traces(jf).plan.decisions if d.bsym.sym.id == "torch.exp"]
    return who


def _flatten(x):
    return torch.exp(x).reshape(-1)


def _double(x):
    return torch.exp(x).double()


def _none(x):
    return None


def _raises(x):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def _writes_input(x):
    x.mul_(0)  # clobbers the caller's tensor
    return torch.exp(x)


@pytest.mark.parametrize(
    "impl, problem",
    [
        (_flatten, r"returned cpu torch.float32 \[12\] for t0, where the trace says cpu torch.float32 \[3, 4\]"),
        (_double, r"returned cpu torch.float64 \[3, 4\] for t0"),
        (_none, r"returned None for t0, which should be a tensor"),
        (_raises, r"raised RuntimeError: CUDA error: an illegal memory access"),
        (_writes_input, r"modified its input x in place, which the operation does not write"),
    ],
    ids=["shape", "dtype", "none", "raises", "writes-input"],
)
def test_a_faulty_executor_is_named_replanned_and_the_result_is_eager(impl, problem):
    jf = squall.jit(program, executors=[vendor("faulty", impl), "torch"])
    x = torch.randn(3, 4)
    original = x.clone()
    with pytest.warns(squall.SquallWarning, match=rf"executor 'faulty' {problem}.*, running torch.exp \(from .*test_checked_execution.py:\d+: return torch.exp\(x\) \+ 1  # THE EXP LINE\)"):
        out = jf(x)
    assert_close(x, original)  # the input the faulty call wrote into has its values back
    assert_close(out, program(x))
    assert took_exp(jf) == "torch"
    info = jf.cache_info()
    assert (info.misses, info.replans) == (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(jf(x), program(x))  # the replanned entry: no warning, no new compilation
    assert jf.cache_info().misses == 1


def test_a_healthy_executor_is_checked_once_then_runs_the_plain_code(monkeypatch):
    calls = []

    def exp(x):
        calls.append(x.shape)
        return torch.exp(x)

    jf = squall.jit(program, executors=[vendor("healthy", exp), "torch"])
    x = torch.randn(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(jf(x), program(x))
        assert_close(jf(x), program(x))
    assert took_exp(jf) == "healthy" and len(calls) == 2
    compilation = squall.last_traces(jf)
    assert compilation.checked is not None and "checked_healthy_exp" in compilation.checked.source
    assert "checked" not in compilation.source  # what the cache runs after the first call
    (entry,) = jf.__squall__._cache.values()
    assert getattr(entry[0], "__wrapped__", entry[0]) is compilation.fn  # behind its state check (squall.frontend.state_guards)
    assert jf.cache_info().replans == 0


def test_check_always_catches_an_executor_that_goes_wrong_later(monkeypatch):
    calls = []

    def flaky(x):
        calls.append(1)
        return torch.exp(x) if len(calls) < 3 else torch.zeros(1)

    monkeypatch.setenv("SQUALL_CHECK", "always")
    jf = squall.jit(program, executors=[vendor("flaky", flaky), "torch"])
    x = torch.randn(4)
    assert_close(jf(x), program(x))
    assert_close(jf(x), program(x))
    with pytest.warns(squall.SquallWarning, match=r"executor 'flaky' returned cpu torch.float32 \[1\] for t0"):
        assert_close(jf(x), program(x))
    assert took_exp(jf) == "torch"


def test_check_never_and_a_bad_value(monkeypatch):
    monkeypatch.setenv("SQUALL_CHECK", "never")
    jf = squall.jit(program, executors=[vendor("unchecked", torch.exp), "torch"])
    jf(torch.randn(2))
    (entry,) = jf.__squall__._cache.values()
    assert getattr(entry[0], "__wrapped__", entry[0]) is squall.last_traces(jf).fn
    monkeypatch.setenv("SQUALL_CHECK", "sometimes")
    with pytest.raises(ValueError, match=r"\$SQUALL_CHECK must be one of first, always, never, got 'sometimes'"):
        squall.jit(program)


def test_only_the_failing_operation_is_kept_from_the_executor():
    ex = OperatorExecutor("half_right")
    ex.register_implementation("torch.exp", _double)
    ex.register_implementation("torch.tanh", torch.tanh)

    def f(x):
        return torch.tanh(torch.exp(x))

    jf = squall.jit(f, executors=[ex, "torch"])
    x = torch.randn(3)
    with pytest.warns(squall.SquallWarning, match="without 'half_right' for torch.exp"):
        assert_close(jf(x), f(x))
    who = {d.bsym.sym.id: d.executor for d in squall.last_traces(jf).plan.decisions if d.depth == 0}
    assert who == {"torch.exp": "torch", "torch.tanh": "half_right"}


def test_an_execution_transform_failing_in_its_own_operation_keeps_the_original_op_from_it():
    ex = OperatorExecutor("transformer")
    broken = ex.register_operator("exp_kernel", meta=lambda x: squall.extend.TensorProxy(like=x), fn=_flatten)
    ex.register_implementation("torch.exp", execution_transform=lambda x: broken(x))

    jf = squall.jit(program, executors=[ex, "torch"])
    x = torch.randn(2, 2)
    with pytest.warns(squall.SquallWarning, match=r"executor 'transformer' .* running transformer.exp_kernel.*without 'transformer' for torch.exp"):
        assert_close(jf(x), program(x))
    assert took_exp(jf) == "torch"


def test_a_module_entry_is_replanned_too():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self, x):
            return torch.exp(x * self.w)

    module = Scale()
    jm = squall.jit(module, executors=[vendor("faulty", _raises), "torch"])
    x = torch.randn(3)
    with torch.no_grad(), pytest.warns(squall.SquallWarning, match="executor 'faulty' raised RuntimeError"):
        assert_close(jm(x), module(x))
    assert jm._jitted.cache_info().replans == 1


def test_a_fault_in_the_backward_is_named_and_the_gradient_is_eagers():
    def mul_of_wrong_shape(a, b):
        return (a * b).reshape(-1)  # a plugin bug

    def loss(x):
        return torch.exp(x).sum()

    # the backward's only multiplication (cotangent * exp(x)) is a prim the vendor takes
    jf = squall.jit(loss, executors=[vendor("faulty", mul_of_wrong_shape, op="prims.mul"), "torch"])
    x = torch.randn(3, 4, requires_grad=True)
    expected = torch.autograd.grad(loss(x), x)[0]
    out = jf(x)
    assert [d.executor for d in squall.last_traces(jf).plan.decisions] == ["torch", "torch"]  # a clean forward
    with pytest.warns(squall.SquallWarning, match=r"executor 'faulty' returned cpu torch.float32 \[12\] for t\d+, where the trace says cpu torch.float32 \[3, 4\], running prims.mul"):
        got = torch.autograd.grad(out, x)[0]
    assert_close(out, loss(x))
    assert_close(got, expected)
    assert jf.cache_info().replans == 1
    backward = squall.last_traces(jf).backward
    assert all(b.executor.name == "torch" for b in backward.bsyms if b.executor is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(torch.autograd.grad(jf(x), x)[0], expected)  # replanned: no fault, no warning


def test_a_fault_in_a_program_that_writes_state_returns_the_result_and_writes_once():
    # the runner replays the program's writes from its result: the replanned program's result
    # must come back in that form (a result object that unpacks, as HF's ModelOutput does, was
    # returned as its first key), and the writes happen once, not once per runner
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x, seen: list):
            self.calls += 1
            seen.append(x.sum())
            return {"out": torch.exp(x), "twice": x * 2}

    module, reference = Counter(), Counter()
    jm = squall.jit(module, executors=[vendor("faulty", _raises), "torch"])
    x = torch.randn(3)
    seen, expected_seen = [], []
    with torch.no_grad(), pytest.warns(squall.SquallWarning, match="executor 'faulty' raised RuntimeError"):
        out = jm(x, seen)
    expected = reference(x, expected_seen)
    assert type(out) is dict and out.keys() == expected.keys()
    assert_close(out, expected)
    assert module.calls == reference.calls == 1
    assert len(seen) == 1
    assert_close(seen, expected_seen)
    with torch.no_grad():
        assert_close(jm(x, seen), reference(x, expected_seen))  # later calls: the new plan, from the cache
    assert module.calls == 2 and len(seen) == 2


def _cat_program(cache, x):
    return torch.cat([cache, torch.exp(x)], dim=1)  # a decoding step's cache grown by one token


def _one_short(x):
    return torch.exp(x)[:, :-1]


def test_a_symbolic_program_is_checked_against_this_calls_sizes_not_the_traced_ones(monkeypatch):
    # a call at another length than the traced one (an upgraded program's first call, or every
    # call with SQUALL_CHECK=always) must not be reported for returning its own call's sizes
    monkeypatch.setenv("SQUALL_CHECK", "always")
    jf = squall.jit(_cat_program, executors=[vendor("healthy", torch.exp), "torch"], dynamic=True)
    for length in (3, 5, 6):
        cache, x = torch.randn(2, length, 4), torch.randn(2, length, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)
            out = jf(cache, x)
        assert out.shape == (2, 2 * length, 4)
        assert_close(out, _cat_program(cache, x))
    assert took_exp(jf) == "healthy" and jf.cache_info().replans == 0


def test_a_symbolic_program_still_catches_a_size_wrong_for_this_call(monkeypatch):
    monkeypatch.setenv("SQUALL_CHECK", "always")
    jf = squall.jit(_cat_program, executors=[vendor("short", _one_short), "torch"], dynamic=True)
    cache, x = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    with pytest.warns(squall.SquallWarning, match=r"executor 'short' returned cpu torch.float32 \[2, 4, 4\] for t\d+, where the trace says cpu torch.float32 \[s0, s1, s2\] \(here \[2, 5, 4\]\)"):
        assert_close(jf(cache, x), _cat_program(cache, x))
    assert took_exp(jf) == "torch"


def test_a_fault_after_a_random_draw_draws_eagers_numbers():
    """The faulted run had drawn dropout's mask before the faulty call: the replanned program
    draws it again from the call's generator state, as eager draws it once."""

    def noisy(x):
        return torch.exp(torch.nn.functional.dropout(x, 0.5, training=True)) + 1

    jf = squall.jit(noisy, executors=[vendor("faulty", _raises), "torch"])
    x = torch.randn(6, 5)
    results = []
    for run in (noisy, jf):
        torch.manual_seed(11)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)
            out = run(x)
        results.append((out, torch.rand(2)))  # the generator as each left it
    (want, want_next), (got, got_next) = results
    assert torch.equal(got, want)
    assert torch.equal(got_next, want_next)
