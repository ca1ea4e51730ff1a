"""A program that writes part of an input in place (a preallocated KV cache at a position) runs
that write in place on the torch plan, as eager does, instead of computing the whole input's new
value into a new tensor and copying it back (squall.compiler.passes.write_backs_folded): and it
answers as eager does wherever the old value, or a view of the new one, is still read."""
from __future__ import annotations

import pytest
import torch

import squall
from kernel_calls import AtenCalls, launching


def _cache_step(cache, kv, pos):
    cache[:, pos : pos + 1] = kv
    return cache[:, : pos + 1].softmax(1).sum(1)


def _index_copy_step(cache, kv, pos):
    # transformers' StaticCache writes its keys and values so
    cache.index_copy_(1, torch.tensor([pos]), kv)
    return (cache[:, : pos + 1] * 2).sum(1)


def _calls(fn, *args) -> dict:
    with AtenCalls() as counter:
        fn(*args)
    return dict(launching(counter.calls))


@pytest.mark.parametrize("step", [_cache_step, _index_copy_step], ids=["setitem", "index_copy_"])
def test_a_cache_written_at_a_position_is_written_in_place_as_eager(step):
    jitted = squall.jit(step, executors=["torch"])
    cache, expected_cache = torch.zeros(2, 16, 8), torch.zeros(2, 16, 8)
    for pos in range(6):
        kv = torch.randn(2, 1, 8)
        torch.testing.assert_close(jitted(cache, kv, pos), step(expected_cache, kv, pos))
        torch.testing.assert_close(cache, expected_cache)
    kv = torch.randn(2, 1, 8)
    eager_calls, calls = _calls(step, cache.clone(), kv, 7), _calls(jitted, cache, kv, 7)
    assert "clone" not in calls and "copy_" not in calls.keys() - eager_calls.keys(), f"squall {calls} against eager {eager_calls}"
    assert sum(calls.values()) <= sum(eager_calls.values()), f"squall {calls} against eager {eager_calls}"


def _read_through_an_earlier_view(cache, kv):
    head = cache[:, :2]  # a view: eager's sees the write below
    cache[:, 1:2] = kv
    return head * 1


def _read_an_earlier_copy(cache, kv):
    before = cache * 1  # its own memory: the old values
    cache[:, 1:2] = kv
    return before + cache[:, :2].sum()


def _returns_a_view_of_the_written_input(cache, kv):
    cache[:, 1:2] = kv
    return cache[:, :3]


def _returns_a_view_of_a_functional_copy_written_back(cache, kv):
    new = cache.index_copy(1, torch.tensor([1]), kv)  # memory of its own, in eager
    cache.copy_(new)
    return new[:, :3]


def _writes_from_a_view_of_itself(cache, kv):
    cache[:, 3:4] = cache[:, 1:2]
    return cache.sum(1) + kv.sum()


def _reads_the_old_value_after_the_write(cache, kv):
    old = cache.clone()
    cache[:, 0:1] = kv
    return old - cache


@pytest.mark.parametrize(
    "program",
    [_read_through_an_earlier_view, _read_an_earlier_copy, _returns_a_view_of_the_written_input, _writes_from_a_view_of_itself,
     _reads_the_old_value_after_the_write, _returns_a_view_of_a_functional_copy_written_back],
)
def test_writes_into_an_input_answer_as_eager_wherever_its_old_or_new_memory_is_read(program):
    jitted = squall.jit(program, executors=["torch"])
    for _ in range(2):
        start, kv = torch.randn(2, 5, 3), torch.randn(2, 1, 3)
        cache, expected_cache = start.clone(), start.clone()
        torch.testing.assert_close(jitted(cache, kv), program(expected_cache, kv))
        torch.testing.assert_close(cache, expected_cache)


@pytest.mark.parametrize(("program", "shares"), [(_returns_a_view_of_the_written_input, True), (_returns_a_view_of_a_functional_copy_written_back, False)],
                         ids=["view_of_input", "view_of_copy"])
def test_a_returned_view_shares_the_written_inputs_memory_where_eagers_does(program, shares):
    jitted = squall.jit(program, executors=["torch"])
    for fn in (program, jitted):
        cache = torch.zeros(2, 5, 3)
        out = fn(cache, torch.ones(2, 1, 3))
        cache.zero_()
        assert out[:, 1].eq(0 if shares else 1).all(), fn


def test_a_write_into_an_input_under_gradients_matches_eagers_gradients():
    def step(cache, kv, w):
        cache[:, 1:2] = kv.detach()
        return (cache[:, :3] * w).sum()

    w, expected_w = torch.randn(2, 3, 4, requires_grad=True), None
    expected_w = w.detach().clone().requires_grad_()
    jitted = squall.jit(step, executors=["torch"])
    cache, expected_cache = torch.zeros(2, 5, 4), torch.zeros(2, 5, 4)
    for _ in range(2):
        kv = torch.randn(2, 1, 4)
        jitted(cache, kv, w).backward()
        step(expected_cache, kv, expected_w).backward()
        torch.testing.assert_close(cache, expected_cache)
        torch.testing.assert_close(w.grad, expected_w.grad)


def test_a_cache_of_symbolic_length_is_written_in_place():
    jitted = squall.jit(_index_copy_step, dynamic=True, executors=["torch"])
    for length in (12, 16, 20):
        cache, expected_cache = torch.zeros(2, length, 8), torch.zeros(2, length, 8)
        kv = torch.randn(2, 1, 8)
        torch.testing.assert_close(jitted(cache, kv, 5), _index_copy_step(expected_cache, kv, 5))
        torch.testing.assert_close(cache, expected_cache)
    source = squall.last_traces(jitted).source
    assert "index_copy_(" in source and "torch_copy_(" not in source, source
    assert jitted.cache_info().misses == 1


def _moving_average(average, x):
    # an exponential moving average kept in a buffer, as eager updates it: one chain of writes
    average.mul_(0.9).add_(x, alpha=0.1)
    return average.sum()


def _scaled_and_masked(x, mask):
    x.mul_(2)
    x.masked_fill_(mask, 0.0)
    x.sub_(mask.float()).div_(3)
    return x


@pytest.mark.parametrize("program", [_moving_average, _scaled_and_masked], ids=["add_after_mul_", "four_writes"])
def test_elementwise_writes_into_an_input_run_in_place_as_eagers(program):
    jitted = squall.jit(program, executors=["torch"])
    for _ in range(2):
        start, other = torch.randn(4, 6), torch.randn(4, 6)
        other = other if program is _moving_average else other > 0
        state, expected_state = start.clone(), start.clone()
        torch.testing.assert_close(jitted(state, other), program(expected_state, other))
        torch.testing.assert_close(state, expected_state)
    eager_calls, calls = _calls(program, start.clone(), other), _calls(jitted, start.clone(), other)
    # each write into the input's own memory, as eager's: no new tensor per write and no copy back
    assert "copy_" not in calls and calls == eager_calls, f"squall {calls} against eager {eager_calls}"


def _chain_read_between(x, y):
    scaled = x.mul_(2)
    seen = scaled * 1  # reads the chain's middle value: its own memory in eager too
    x.add_(y)
    return seen


def _chain_returns_its_middle(x, y):
    middle = x * 2  # a new tensor: eager's x is untouched by it
    x.copy_(middle.add_(y))
    return middle


@pytest.mark.parametrize("program", [_chain_read_between, _chain_returns_its_middle])
def test_a_chain_of_writes_answers_as_eager_where_its_middle_is_read(program):
    jitted = squall.jit(program, executors=["torch"])
    for _ in range(2):
        start, y = torch.randn(3, 5), torch.randn(3, 5)
        state, expected_state = start.clone(), start.clone()
        out, expected = jitted(state, y), program(expected_state, y)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(state, expected_state)
        state.zero_(), expected_state.zero_()
        torch.testing.assert_close(out, expected)  # the result's memory is not the input's where eager's is not


def _rolled_and_set(x, v):
    shifted = x.roll(1, 1)  # a new tensor the program then writes, as a rolling buffer's update does
    shifted[:, -1] = v
    return shifted * 2


def _masked_then_rows_set(x, v):
    t = x * 3
    t[0] = v
    t[2] = v
    return t


def test_a_write_into_an_intermediate_writes_its_memory_as_eagers():
    for program, v in ((_rolled_and_set, torch.randn(4)), (_masked_then_rows_set, torch.randn(6))):
        jitted = squall.jit(program, executors=["torch"])
        x = torch.randn(4, 6)
        torch.testing.assert_close(jitted(x, v), program(x, v))
        eager_calls, calls = _calls(program, x, v), _calls(jitted, x, v)
        assert "clone" not in calls and calls == eager_calls, f"squall {calls} against eager {eager_calls}"


def _view_returned_before_the_write(x, v):
    t = x * 3
    row = t[1]  # a view: eager's sees the write
    t[1] = v
    return row * 1, t


def _old_value_returned(x, v):
    t = x * 3
    kept = t.clone()
    t[1] = v
    return kept, t


def _view_read_after_the_write(x, v):
    t = x * 3
    head = t[:2]
    t[1] = v
    return head.sum(0)


def _opaque_reader_keeps_it(x, v):
    t = x * 3
    _KEPT.append(torch.Tensor.clone(t))  # (stands for any user function reading it)
    t[1] = v
    return t


_KEPT: list = []


@pytest.mark.parametrize("program", [_view_returned_before_the_write, _old_value_returned, _view_read_after_the_write])
def test_a_write_into_an_intermediate_answers_as_eager_where_its_views_or_old_value_are_read(program):
    jitted = squall.jit(program, executors=["torch"])
    for _ in range(2):
        x, v = torch.randn(3, 4), torch.randn(4)
        torch.testing.assert_close(jitted(x, v), program(x, v))


def test_a_write_into_an_intermediate_under_gradients_matches_eagers_gradients():
    def program(x, v):
        t = x * x
        t[1] = v
        return (t * t.sin()).sum()

    x, v = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    ex, ev = x.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()
    jitted = squall.jit(program, executors=["torch"])
    jitted(x, v).backward()
    program(ex, ev).backward()
    torch.testing.assert_close((x.grad, v.grad), (ex.grad, ev.grad))


def test_a_chain_of_writes_at_positions_of_an_input_runs_in_place():
    def two_positions(cache, a, b):
        cache[:, 0] = a
        cache.index_copy_(1, torch.tensor([2]), b)
        return cache.sum()

    jitted = squall.jit(two_positions, executors=["torch"])
    a, b = torch.randn(3), torch.randn(3, 1)
    cache, expected_cache = torch.zeros(3, 4), torch.zeros(3, 4)
    torch.testing.assert_close(jitted(cache, a, b), two_positions(expected_cache, a, b))
    torch.testing.assert_close(cache, expected_cache)
    eager_calls, calls = _calls(two_positions, cache.clone(), a, b), _calls(jitted, cache, a, b)
    assert "clone" not in calls and "copy_" not in calls.keys() - eager_calls.keys(), f"squall {calls} against eager {eager_calls}"


class _Holder:
    """An object a program returns (no pytree node: rebuilt through its copy protocol)."""

    def __init__(self):
        self.rows = None


def test_an_intermediate_written_in_place_reaches_a_returned_object_as_a_tensor():
    def program(x, v):
        t = x * 3
        t[0] = v  # written in t's memory: the object's attribute is that memory
        held = _Holder()
        held.rows = t
        return held

    jitted = squall.jit(program, executors=["torch"])
    x, v = torch.randn(3, 4), torch.randn(4)
    out = jitted(x, v)
    assert type(out.rows) is torch.Tensor, type(out.rows)
    torch.testing.assert_close(out.rows, program(x, v).rows)
