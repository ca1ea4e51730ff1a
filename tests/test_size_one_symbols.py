"""A size of 1 served by a symbolic entry only where its trace never relied on the size being 2 or more.

A tensor argument's size symbol may stand for 1 (`squall.symbolic.ShapeEnv.ones`) until the
trace asks something only "2 or more" answers (`s0 == 1`, a squeeze, a branch on the size):
that answers as for 2 or more and guards `s0 >= 2`, so a call of size 1 compiles its own entry.
Size 0 is always keyed apart.
"""
from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.runtime.jit import jitted_state
from squall.symbolic import ShapeEnv


def _compiled_at_once(jf) -> None:
    # a batch of 1 beside the symbolic entry would rent (run eagerly) until it paid for a compile;
    # these tests want to see whether it compiles, so its compile is made free
    jitted_state(jf).rental.last_compile_cpu_s = 0.0


def _run(fn, *shapes_per_call, dynamic=True):
    """jit `fn`, call it with random tensors of each call's shapes, check each result against
    eager's; the cache's stats."""
    jf = squall.jit(fn, dynamic=dynamic)
    for i, shapes in enumerate(shapes_per_call):
        args = [torch.randn(s) for s in shapes]
        assert_close(jf(*args), fn(*args))
        if i == 0:
            _compiled_at_once(jf)
    return jitted_state(jf).cache_info()


# --- programs that never ask: a batch of 1 runs the symbolic entry -------------------------------


def _never_asks(x, w):
    h = torch.nn.functional.layer_norm(x @ w, (w.shape[1],))
    return h.softmax(-1) * x.sum(-1, keepdim=True) + x.mean(0)[: w.shape[1]]


def test_a_program_that_never_asks_serves_a_batch_of_one_from_its_symbolic_entry():
    info = _run(_never_asks, [(4, 8), (8, 6)], [(1, 8), (8, 6)], [(3, 8), (8, 6)], [(1, 8), (8, 6)])
    assert (info.misses, info.eager_before_compile) == (1, 0)


def test_a_module_that_never_asks_serves_a_batch_of_one_with_gradients_equal_to_eager_s():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    jm = squall.jit(model, dynamic=True)
    for b in (4, 1, 6, 1):
        x = torch.randn(b, 8, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_(True)
        out, expected = jm(x), model(x_eager)
        assert_close(out, expected)
        grads = torch.autograd.grad(out.tanh().sum(), [x, *model.parameters()])
        expected_grads = torch.autograd.grad(expected.tanh().sum(), [x_eager, *model.parameters()])
        for g, e in zip(grads, expected_grads):
            assert_close(g, e)
    info = jitted_state(jm).cache_info()
    assert (info.misses, info.eager_before_compile) == (1, 0)


def test_a_size_zero_is_never_served_by_the_symbolic_entry():
    jf = squall.jit(lambda x: x * 2 + 1, dynamic=True)
    jf(torch.randn(4, 3))
    _compiled_at_once(jf)
    x = torch.randn(0, 3)
    assert_close(jf(x), x * 2 + 1)
    assert jitted_state(jf).cache_info().misses == 2


# --- programs that ask: a batch of 1 gets a compile of its own, as eager computes it ---------------


def _squeezes(x):
    return x.squeeze(0) * 2


def _squeezes_all(x):
    return x.squeeze() + 1


def _branches(x):
    if x.shape[0] == 1:
        return x * 2
    return x + 1


def _returns_the_comparison(x):
    return x + 1, x.shape[0] == 1, x.shape[0] > 1


def _expands(x):
    return x.expand(6, 5) * 3


def _unbinds(x):
    return sum(t * (i + 1) for i, t in enumerate(x.unbind(0)))


def _iterates(x):
    return [t.sum() for t in x]


def _broadcasts(x, y):
    return x + y


# (unbind and iteration read the count: the symbolic trace is specialised, the batch keyed by value
# and traced again, one more compile)
@pytest.mark.parametrize("fn, traced, one, compiles", [
    (_squeezes, [(4, 5)], [(1, 5)], 2),
    (_squeezes_all, [(4, 5)], [(1, 5)], 2),
    (_branches, [(4, 5)], [(1, 5)], 2),
    (_returns_the_comparison, [(4, 5)], [(1, 5)], 2),
    (_expands, [(6, 5)], [(1, 5)], 2),
    (_unbinds, [(4, 5)], [(1, 5)], 3),
    (_iterates, [(4, 5)], [(1, 5)], 3),
    (_broadcasts, [(4, 5), (4, 5)], [(1, 5), (4, 5)], 2),  # the same symbol for both: checked equal
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_program_that_relies_on_a_size_being_2_or_more_compiles_a_batch_of_one_apart(fn, traced, one, compiles):
    info = _run(fn, traced, one, one)
    assert info.misses == compiles and info.eager_before_compile == 0


def test_the_guard_a_squeeze_records_is_shown_by_explain():
    jf = squall.jit(_squeezes, dynamic=True)
    jf(torch.randn(4, 5))
    report = str(squall.explain(jf, torch.randn(4, 5)))
    assert "s0 >= 2" in report


def test_a_squeeze_s_guard_is_recorded_only_where_a_size_may_be_1():
    env = ShapeEnv()
    may_be_one = env.symbol(4, "x", 0, may_be_one=True)
    two_or_more = env.symbol(5, "x", 1)
    assert (two_or_more == 1) is False and not env.guards  # 2 or more: decided, nothing guarded
    assert (may_be_one > 0) is True and not env.guards  # 1 or more: decided too
    assert (may_be_one * 2 >= may_be_one) is True and not env.guards
    assert (may_be_one == 1) is False and env.guards == {"s0 >= 2": True}
    assert env.ones == frozenset()
    assert (may_be_one != 1) is True and env.guards == {"s0 >= 2": True}  # decided from then on


def test_a_symbol_shared_with_a_dimension_keyed_as_2_or_more_is_guarded_so():
    env = ShapeEnv()
    env.symbol(4, "x", 0, may_be_one=True)
    env.symbol(4, "cache", 2)  # a dimension that is never 1 at a hit: the shared symbol is not either
    assert env.ones == frozenset() and env.guards == {"s0 >= 2": True}


def test_broadcasting_equal_symbolic_sizes_asks_nothing():
    def f(x, y):
        return (x + y) * x.softmax(-1)

    jf = squall.jit(f, dynamic=True)
    jf(torch.randn(4, 7), torch.randn(4, 7))
    env = squall.last_traces(jf).traced.context.shapes
    assert env.ones == {"s0", "s1"} and not env.guards


def _reads_strides(x):
    y = x.t()
    return y * 2, y.stride(), y.is_contiguous()


def test_a_layout_read_guards_the_sizes_as_2_or_more():
    # eager's [1, n] transposed view of a [n, 1] tensor is contiguous (a size-1 dimension's stride
    # is ignored), where a [2, n] one is not: the answer traced at 4 does not hold at 1
    jf = squall.jit(_reads_strides, dynamic=True)
    for b in (4, 1):
        x = torch.randn(5, b)
        assert jf(x)[1:] == _reads_strides(x)[1:]
        assert_close(jf(x)[0], _reads_strides(x)[0])
        _compiled_at_once(jf)
    fresh = squall.jit(_reads_strides, dynamic=True)
    fresh(torch.randn(5, 4))
    assert "s1 >= 2" in str(squall.explain(fresh, torch.randn(5, 4)))


# --- a symbol traced at 1: a tensor an argument object holds, one long (a KV cache after a one-token prompt)


def test_a_symbol_traced_at_one_answers_as_one_and_guards_where_two_or_more_would_answer_otherwise():
    env = ShapeEnv()
    n = env.symbol(1, "keys", 2, share=False, may_be_one=True)
    assert n + 1 >= 2 and n > 0 and not env.guards  # true for every size of 1 or more: no guard
    assert (n == 1) is True and env.guards == {"s0 == 1": True}  # 2 or more would say False
    env.at_least_two({"s0"})  # (a layout read): guarded as the 1 it is, and still a symbol that may be 1
    assert "s0" in env.ones and "s0 >= 2" not in env.guards
    with pytest.raises(ValueError, match="size symbol of value 1"):
        env.symbol(1, "x", 0)  # a tensor argument's size of 1 stays a constant


class _Holder:
    def __init__(self, t: torch.Tensor):
        self.t = t


def _adds_what_it_holds(x, holder):
    return x + holder.t.sum(-1, keepdim=True)


def _squeezes_what_it_holds(x, holder):
    return x + holder.t.squeeze(1).sum(-1, keepdim=True)


@pytest.mark.parametrize("fn, compiles", [(_adds_what_it_holds, 1), (_squeezes_what_it_holds, 2)])
def test_a_held_tensor_one_long_runs_its_program_for_longer_ones_unless_the_trace_relied_on_the_one(fn, compiles):
    """Traced with the held tensor one long: a program that never asks serves every later length
    (one compile); one that squeezed the 1 away is guarded so, and compiles again at length 3."""
    jf = squall.jit(fn)
    x = torch.randn(4, 1)
    for n in (1, 3, 5, 1):
        holder = _Holder(torch.randn(4, n))
        assert_close(jf(x, holder), fn(x, holder))
    assert jitted_state(jf).cache_info().misses == compiles
