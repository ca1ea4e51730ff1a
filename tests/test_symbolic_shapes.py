"""Symbolic sizes (squall.symbolic) and when a dimension becomes one (squall.runtime.dynamic_dims)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.market.config import resolve_dynamic
from squall.market.fusion import FusionRegion
from squall.runtime.jit import jitted_state
from squall.symbolic import ShapeEnv, source


def _misses(jf) -> int:
    return jitted_state(jf).cache_info().misses


# --- SymInt ------------------------------------------------------------------------------------


def test_size_arithmetic_is_recorded_and_prints_as_python():
    env = ShapeEnv()
    s0, s1 = env.symbol(5, "x", 1), env.symbol(7, "y", 0)
    assert source(s0 * 2 + s1 - 1) == "(2*s0 + s1 - 1)" and (s0 * 2 + s1 - 1).value == 16
    assert (s0 * 32) // 8 == s0 * 4 and source((s0 * 32) // 8) == "(4*s0)"
    assert source((s0 + 3) // 2) == "((s0 + 3) // 2)" and ((s0 + 3) // 2).value == 4
    assert s0 - s0 == 0 and type(s0 - s0) is int  # symbols that cancel give a plain int
    assert source((s0 * s1 * 8) // (2 * s0 * s1)) == "4"
    assert not env.guards


def test_comparisons_that_hold_for_every_size_need_no_guard():
    env = ShapeEnv()
    s0 = env.symbol(5, "x", 1)
    # sizes 0 and 1 are never symbolic: a symbol is at least 2
    assert s0 != 1 and s0 > 0 and s0 >= 2 and not (s0 == 0) and 2 * s0 > s0 and s0 + 1 > s0
    assert env.guards == {}


def test_comparisons_that_depend_on_the_size_are_guards_with_their_truth():
    env = ShapeEnv()
    s0, s1 = env.symbol(5, "x", 1), env.symbol(7, "y", 0)
    assert (s0 > 4) is True and (s1 == s0 + 2) is True and (s0 > 128) is False
    assert env.guards == {"s0 > 4": True, "s1 == s0 + 2": True, "s0 > 128": False}
    assert env.check_source() == "(s0 > 4) and (s1 == s0 + 2) and not (s0 > 128)"


def test_a_concrete_read_of_a_size_is_guarded_and_noted_as_specialised():
    env = ShapeEnv()
    s0 = env.symbol(5, "x", 1)
    assert int(s0) == 5 and list(range(s0)) == [0, 1, 2, 3, 4]
    assert env.guards == {"s0 == 5": True} and env.specialised == {"s0"}


def test_a_fusion_regions_signature_keys_a_symbolic_slice_bound_by_its_expression_without_a_guard():
    # x[:, :n] with n symbolic: a slice is unhashable before Python 3.12, and its repr printed the
    # bound's value, which read it and recorded the guard `s0 == 13`: an upgrade planning regions
    # then made the upgraded program serve one length only (a variant compiled for every other)
    env = ShapeEnv()
    s0 = env.symbol(13, "x", 1)

    def region(*slices):
        calls = [SimpleNamespace(args=(k,), kwargs={}, sym=SimpleNamespace(id="torch.Tensor.__getitem__"), output_proxies=list)
                 for k in slices]
        return FusionRegion("fuser", calls, calls, [], [])

    first = region(slice(None, s0, None), slice(1, s0 - 1, 2))
    assert first.signature() == region(slice(None, s0, None), slice(1, s0 - 1, 2)).signature()
    assert first.signature() != region(slice(None, s0 + 1, None), slice(1, s0 - 1, 2)).signature()
    assert first.signature() != region(slice(None, 13, None), slice(1, 12, 2)).signature()
    assert env.guards == {} and not env.specialised


def test_a_fusion_regions_signature_tells_apart_splits_into_another_number_of_pieces():
    # x.split(2) over a symbolic length: its trace holds how many pieces there are (a guard), its
    # arguments do not. Two regions that used only the first piece had one signature, so a fusion
    # executor's region compiled for 3 pieces served a recompile for 4 (inductor: the region's
    # function then raised "too many values to unpack" at a later call, and the call was planned again)
    def split_region(length):
        jitted = squall.jit(lambda w: w.neg().split(2, 0)[0], dynamic=True, executors=["torch"])
        jitted(torch.randn(length, 4))
        (split,) = [b for b in squall.last_traces(jitted).traced.bsyms if b.sym.id == "torch.Tensor.split"]
        return FusionRegion("fuser", [split], [split], list(split.input_proxies()), [split.output_proxies()[0]])

    three, four = split_region(6), split_region(8)
    assert len(three.calls[0].output_proxies()) == 3 and len(four.calls[0].output_proxies()) == 4
    assert three.signature()[2] == four.signature()[2]  # the same input metadata: f32[s0, 4]
    assert three.signature() != four.signature()
    assert three.signature() == split_region(5).signature()  # 3 pieces too, the last s0 - 4 long


def test_dimensions_of_one_value_share_a_symbol_and_are_checked_equal():
    env = ShapeEnv()
    a, b = env.symbol(5, "x", 1), env.symbol(5, "mask", 1)
    assert source(a) == source(b) == "s0" and a == b and not env.guards
    assert env.check_source() == "mask.shape[1] == s0"


def test_symbol_values_are_read_from_the_first_argument_holding_each_symbol():
    from squall.frontend.tracing import TracingContext
    from squall.proxies import TensorProxy, symbol_reads, symbol_values, tracing

    env = ShapeEnv()
    s0, s1 = env.symbol(5, "x", 1), env.symbol(7, "y", 0)
    with tracing(TracingContext()):
        x = TensorProxy(shape=(3, s0), dtype=torch.float32, device="cpu")
        y = TensorProxy(shape=(s1, s0 * 2), dtype=torch.float32, device="cpu")  # 2*s0 is no read of s0
    assert symbol_reads([2.0, x, y]) == {"s0": (1, 1), "s1": (2, 0)}
    assert symbol_reads([s1, x]) == {"s0": (1, 1)}  # a size itself counts only with sizes=True
    assert symbol_reads([s1, x], sizes=True) == {"s1": (0, None), "s0": (1, 1)}
    reads = symbol_reads([s1, x], sizes=True)
    assert symbol_values(reads, [9, torch.zeros(3, 4)]) == {"s1": 9, "s0": 4}  # this call's values, not the traced ones
    # not a tensor (or an int) where one was traced, or too few arguments: unknown, never guessed
    assert symbol_values(reads, [9.5, 3]) == {"s1": None, "s0": None}
    assert symbol_values(reads, [9]) == {"s1": 9, "s0": None}


# --- traces and generated code ------------------------------------------------------------------


def _attention_like(x, y):
    b, s, h = x.shape
    z = (x * 2 + y).view(b, s, 4, -1).transpose(1, 2)
    return z.softmax(-1).sum(-1), torch.arange(s), x[:, : s - 1] * 3, torch.cat([x, y], dim=1).shape[1]


def test_every_size_symbolic_compiles_once_for_all_lengths_and_matches_eager():
    jf = squall.jit(_attention_like, dynamic=True)
    for n in (5, 7, 12, 2):
        x, y = torch.randn(3, n, 16), torch.randn(3, n, 16)
        assert_close(jf(x, y), _attention_like(x, y))
    assert _misses(jf) == 1
    traces = squall.last_traces(jf)
    assert 'x: "cpu f32[s0, s1, s2]"' in str(traces.traced)
    assert "torch_arange(s1)" in traces.source and "slice(None, (s1 - 1), None)" in traces.source
    assert "s1 = x.shape[1]" in traces.source  # each symbol read from an input when the program starts


def test_sizes_zero_and_one_stay_concrete():
    jf = squall.jit(_attention_like, dynamic=True)
    x, y = torch.randn(3, 1, 16), torch.randn(3, 1, 16)
    assert_close(jf(x, y), _attention_like(x, y))
    assert 'x: "cpu f32[s0, 1, s1]"' in str(squall.last_traces(jf).traced)
    x, y = torch.randn(3, 6, 16), torch.randn(3, 6, 16)  # 1 and 6 are keyed apart: another compile
    assert_close(jf(x, y), _attention_like(x, y))
    assert _misses(jf) == 2


def test_a_branch_on_a_size_is_a_shape_guard_and_the_other_side_a_variant():
    def f(x):
        return x.sin() if x.shape[1] > 4 else x.cos()

    jf = squall.jit(f, dynamic=True)
    for n in (6, 8, 3, 2, 9):
        x = torch.randn(2, n)
        assert_close(jf(x), f(x))
    info = jitted_state(jf).cache_info()
    # one variant per side of the branch; a call whose side is not the variant tried first fails a guard
    assert info.misses == 2 and info.guard_failures == 2
    source = squall.last_traces(jf).source
    assert "if not ((s1 > 4)):" in source and "raise GuardFailed" in source  # the variant the last call ran


def test_shape_guards_are_listed_in_the_entry_guard_set():
    def f(x, y):
        return x[:, : y.shape[1]] + y  # x's length at least y's

    jf = squall.jit(f, dynamic=True)
    x, y = torch.randn(2, 9), torch.randn(2, 5)
    assert_close(jf(x, y), f(x, y))
    described = jitted_state(jf)._guards(squall.last_traces(jf)).describe()
    assert "shape: not (s2 > s1) (shape guards)" in described, described


def test_a_size_read_as_a_python_int_is_keyed_by_value_again():
    def f(x):
        return x + torch.zeros(int(x.shape[0]))  # int(): the value itself, read and guarded

    jf = squall.jit(f, dynamic=True)
    for n in (3, 4, 3):
        x = torch.randn(n)
        assert_close(jf(x), f(x))
    # the symbolic trace read s0's value: compiled again with the dimension keyed by value
    assert ("args", 0) not in jitted_state(jf)._dims.dims and _misses(jf) == 3
    assert "s0" not in squall.last_traces(jf).source


# --- when a dimension becomes symbolic ---------------------------------------------------------


def test_automatic_dynamic_makes_a_changed_dimension_symbolic_at_the_recompile():
    jf = squall.jit(_attention_like)
    x, y = torch.randn(3, 5, 16), torch.randn(3, 5, 16)
    jf(x, y)
    assert "s0" not in squall.last_traces(jf).source  # the first call is static
    for n in (7, 9, 30):
        x, y = torch.randn(3, n, 16), torch.randn(3, n, 16)
        assert_close(jf(x, y), _attention_like(x, y))
    assert _misses(jf) == 2
    # the length changed; the batch size became symbolic with it, the features stayed a constant
    assert 'x: "cpu f32[s0, s1, 16]"' in str(squall.last_traces(jf).traced)


def _attention_like_asking(x, y):
    # as _attention_like, and it asks whether the batch is more than 1: its symbolic trace relies
    # on the batch being 2 or more (guarded), so a batch of 1 is not its entry's
    return (*_attention_like(x, y), x.shape[0] > 1)


def test_a_stream_of_random_lengths_and_batch_sizes_compiles_twice_and_runs_its_batches_of_one_eagerly():
    # static first call; the length changes: length and batch symbolic; a batch of 1 the trace
    # relied on being 2 or more runs eagerly until its calls took as long as a compile; then no compile
    jf = squall.jit(_attention_like_asking)
    stream = [(4, 10), (4, 23), (8, 17), (1, 9), (2, 40), (1, 33), (6, 5), (8, 64), (3, 12)]
    for i, (b, n) in enumerate(stream):
        x, y = torch.randn(b, n, 16), torch.randn(b, n, 16)
        assert_close(jf(x, y), _attention_like_asking(x, y))
        if i == 1:  # as for a model, whose compile takes far longer than a call (a tiny function's may not)
            jitted_state(jf).rental.last_compile_cpu_s = 60.0
    info = jitted_state(jf).cache_info()
    assert (info.misses, info.eager_before_compile) == (2, 2)
    assert info.hits == 5  # the second batch of 1 took the hot path to its eager runner: no hit
    assert 'x: "cpu f32[s0, s1, 16]"' in str(squall.last_traces(jf).traced)
    assert "s0 >= 2" in str(squall.explain(jf, torch.randn(4, 9, 16), torch.randn(4, 9, 16)))


def test_a_stream_whose_trace_never_asks_whether_the_batch_is_1_serves_its_batches_of_one_from_the_symbolic_entry():
    # the same stream, a program that never relies on the batch being 2 or more: its batches of 1
    # run the symbolic program (a key of their own, no compile, no rental), as eager computes them
    jf = squall.jit(_attention_like)
    stream = [(4, 10), (4, 23), (8, 17), (1, 9), (2, 40), (1, 33), (6, 5), (8, 64), (3, 12), (1, 2)]
    for b, n in stream:
        x, y = torch.randn(b, n, 16), torch.randn(b, n, 16)
        assert_close(jf(x, y), _attention_like(x, y))
    info = jitted_state(jf).cache_info()
    assert (info.misses, info.eager_before_compile) == (2, 0)
    assert "s0 >= 2" not in str(squall.explain(jf, torch.randn(4, 9, 16), torch.randn(4, 9, 16)))


def test_a_batch_of_one_compiles_once_its_eager_calls_took_as_long_as_a_compile():
    jf = squall.jit(_attention_like_asking)
    for b, n in [(4, 10), (4, 23)]:
        jf(torch.randn(b, n, 16), torch.randn(b, n, 16))
    state = jitted_state(jf)
    compile_s = state.rental.last_compile_cpu_s
    calls = 0
    while _misses(jf) == 2:
        calls += 1
        assert calls < 100_000, "the batch of one never compiled"
        x, y = torch.randn(1, 5 + calls % 7, 16), torch.randn(1, 5 + calls % 7, 16)
        assert_close(jf(x, y), _attention_like_asking(x, y))
    assert state.cache_info().eager_before_compile == calls - 1  # the last call compiled
    assert 'x: "cpu f32[1, s0, 16]"' in str(squall.last_traces(jf).traced)  # its own variant, length symbolic
    assert sum(state.rental.spent.values()) == 0  # forgotten once compiled
    x, y = torch.randn(1, 40, 16), torch.randn(1, 40, 16)
    assert_close(jf(x, y), _attention_like_asking(x, y))
    assert _misses(jf) == 3 and compile_s > 0


def test_a_function_whose_sizes_never_changed_compiles_a_batch_of_one_at_once():
    jf = squall.jit(_attention_like)
    for b in (4, 1):  # the batch changes to 1: not a symbolic entry's variant, so compiled as before
        x, y = torch.randn(b, 10, 16), torch.randn(b, 10, 16)
        assert_close(jf(x, y), _attention_like(x, y))
    info = jitted_state(jf).cache_info()
    assert (info.misses, info.eager_before_compile) == (2, 0)


def test_dynamic_true_runs_a_batch_of_one_eagerly_until_it_paid_for_a_compile_as_the_default_does():
    # dynamic=True says the sizes vary: a batch of 1 beside its symbolic entry rents as under "auto"
    jf = squall.jit(_attention_like_asking, dynamic=True)
    for i, (b, n) in enumerate([(4, 10), (1, 9), (8, 23), (1, 33)]):
        x, y = torch.randn(b, n, 16), torch.randn(b, n, 16)
        assert_close(jf(x, y), _attention_like_asking(x, y))
        if i == 0:  # as for a model, whose compile takes far longer than a call
            jitted_state(jf).rental.last_compile_cpu_s = 60.0
    info = jitted_state(jf).cache_info()
    assert (info.misses, info.eager_before_compile) == (1, 2)
    jitted_state(jf).rental.last_compile_cpu_s = 0.0  # paid for: its runner leaves the cache after this call, the next compiles
    for n in (7, 12):
        x, y = torch.randn(1, n, 16), torch.randn(1, n, 16)
        assert_close(jf(x, y), _attention_like_asking(x, y))
    assert _misses(jf) == 2 and 'x: "cpu f32[1, s0, s1]"' in str(squall.last_traces(jf).traced)  # its own variant, the 1 a constant


def test_dynamic_true_compiles_a_batch_of_one_at_its_first_call():
    jf = squall.jit(_attention_like, dynamic=True)
    x, y = torch.randn(1, 9, 16), torch.randn(1, 9, 16)
    assert_close(jf(x, y), _attention_like(x, y))
    assert _misses(jf) == 1 and squall.last_traces(jf) is not None  # the first call is compiled, never rented


class _Held:
    """An argument object holding a tensor, as a KV cache does."""

    def __init__(self, t: torch.Tensor):
        self.t = t


def test_a_step_given_a_state_holding_object_compiles_its_batch_of_one_at_once():
    # a decoding step is called at every token: renting would only put its compile off
    def step(x, held):
        return x * held.t.sum()

    jf = squall.jit(step, dynamic=True)
    for i, b in enumerate((4, 1)):
        x, held = torch.randn(b, 8), _Held(torch.randn(3))
        assert_close(jf(x, held), step(x, held))
        if i == 0:
            jitted_state(jf).rental.last_compile_cpu_s = 60.0
    info = jitted_state(jf).cache_info()
    assert (info.misses, info.eager_before_compile) == (2, 0)


def test_a_length_that_changes_leaves_a_size_1_batch_and_later_dimensions_constant():
    jf = squall.jit(_attention_like)
    for n in (5, 7, 9):
        x, y = torch.randn(1, n, 16), torch.randn(1, n, 16)
        assert_close(jf(x, y), _attention_like(x, y))
    assert _misses(jf) == 2
    assert 'x: "cpu f32[1, s0, 16]"' in str(squall.last_traces(jf).traced)


def test_dynamic_false_compiles_every_new_size():
    jf = squall.jit(lambda x: x * 2, dynamic=False)
    for n in (3, 4, 5):
        jf(torch.randn(n))
    assert _misses(jf) == 3


def test_mark_dynamic_and_mark_static_are_honoured():
    f = lambda x: x.sum(0)
    x = torch.randn(5, 3)
    torch._dynamo.mark_dynamic(x, 0)
    jf = squall.jit(f)
    assert_close(jf(x), f(x))
    assert 'x: "cpu f32[s0, 3]"' in str(squall.last_traces(jf).traced)  # symbolic from the first call
    jf = squall.jit(f, dynamic=True)
    y = torch.randn(5, 3)
    torch._dynamo.mark_static(y, 0)
    assert_close(jf(y), f(y))
    assert 'x: "cpu f32[5, s0]"' in str(squall.last_traces(jf).traced)  # the marked dimension stays a constant


def test_the_setting_comes_from_the_environment_and_pyproject(tmp_path):
    assert resolve_dynamic(None, environ={"SQUALL_DYNAMIC": "1"}) is True
    assert resolve_dynamic(None, environ={"SQUALL_DYNAMIC": "off"}) is False
    assert resolve_dynamic(False, environ={"SQUALL_DYNAMIC": "1"}) is False
    (tmp_path / "pyproject.toml").write_text("[tool.squall]\ndynamic = false\n")
    assert resolve_dynamic(None, environ={}, cwd=tmp_path) is False
    (tmp_path / "pyproject.toml").write_text("[tool.squall]\n")
    assert resolve_dynamic(None, environ={}, cwd=tmp_path) == "auto"


def test_a_bad_setting_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="dynamic must be True, False or None"):
        squall.jit(lambda x: x, dynamic="yes")
    with pytest.raises(ValueError, match=r"\$SQUALL_DYNAMIC must be"):
        resolve_dynamic(None, environ={"SQUALL_DYNAMIC": "sometimes"})
    (tmp_path / "pyproject.toml").write_text("[tool.squall]\ndynamic = 3\n")
    with pytest.raises(ValueError, match=r"\[tool.squall\] dynamic .* must be true, false or \"auto\""):
        resolve_dynamic(None, environ={}, cwd=tmp_path)


# --- executors and gradients --------------------------------------------------------------------


def test_fusion_executors_decline_symbolic_sizes_saying_so():
    from squall.market.fusion import FusionExecutor, declines_symbolic

    fusing = FusionExecutor("fuser")
    jf = squall.jit(lambda x: x.sin() * 2, dynamic=True)
    jf(torch.randn(4, 5))
    bsym = squall.last_traces(jf).traced.bsyms[0]
    assert declines_symbolic(fusing, bsym) == (None, "symbolic sizes (s0, s1): fuser compiles regions of static shapes only")
    fusing.symbolic_shapes = True
    assert declines_symbolic(fusing, bsym) is None
    fusing.symbolic_ones = False  # (nvFuser's answer) the program never asks whether a size is 1
    assert declines_symbolic(fusing, bsym) == (None, "symbolic sizes that may be 1 (s0, s1): fuser is not known to compute a size of 1 correctly")
    asking = squall.jit(lambda x: x.squeeze(0).squeeze(1).sin() * 2, dynamic=True)
    asking(torch.randn(4, 5))
    traced = squall.last_traces(asking).traced
    assert 'f32[s0, s1]' in str(traced) and not traced.context.shapes.ones  # s0 and s1 guarded as 2 or more
    assert all(declines_symbolic(fusing, b) is None for b in traced.bsyms)


def test_gradients_flow_through_symbolic_shapes():
    def f(x, w):
        b, s, h = x.shape
        y = (x @ w).view(b, s, 2, -1).softmax(-1).reshape(b, s, -1)
        return (y[:, 1:] * 2).sum()

    jf = squall.jit(f, dynamic=True)
    w = torch.randn(8, 8, requires_grad=True)
    for n in (5, 7, 3):
        x = torch.randn(2, n, 8, requires_grad=True)
        expected_grads = torch.autograd.grad(f(x, w), (x, w))
        actual = jf(x, w)
        assert_close(actual, f(x, w))
        for a, e in zip(torch.autograd.grad(actual, (x, w)), expected_grads):
            assert_close(a, e)
    assert _misses(jf) == 1
    assert "s1" in str(squall.last_traces(jf).backward)


def test_explain_shows_the_symbolic_dimensions_the_guards_and_why_fusion_declined():
    def f(x, y):
        return x[:, : y.shape[1]] + y

    jf = squall.jit(f, dynamic=True)
    x, y = torch.randn(2, 9), torch.randn(2, 5)
    jf(x, y)
    report = squall.explain(jf, x, y)
    assert "tensor: argument 'x': cpu f32[s0, s1]" in report.guards
    assert "shape: not (s2 > s1) (shape guards)" in report.guards
    assert report.last_entry == "fits this call"


# --- comparisons that need no guard ------------------------------------------------------------


def test_slicing_a_buffer_to_the_length_serves_the_buffers_own_length_too():
    positions = torch.arange(16.0)[None]

    def embed(x):
        return x + positions[:, : x.shape[1]]  # as transformers' position ids are sliced

    jf = squall.jit(embed)
    for n in (5, 7, 16, 9):  # 16: the whole buffer, a slice like any other
        x = torch.randn(3, n)
        assert_close(jf(x), embed(x))
    assert _misses(jf) == 2


def test_a_bias_broadcast_over_a_symbolic_batch_guards_nothing_on_the_batch():
    linear = torch.nn.Linear(8, 8)
    jf = squall.jit(linear)
    for b in (3, 5, 8, 2):  # 8: the batch equals the features
        x = torch.randn(b, 6, 8)
        assert_close(jf(x), linear(x))
    assert _misses(jf) == 2
    guards = squall.last_traces(jf).traced.context.shapes.describe()
    assert not any("== 8" in g for g in guards), guards


class _GrowingCache:
    """A KV-cache-like argument object: the program replaces its tensor with a longer one."""

    def __init__(self):
        self.t = torch.zeros(2, 0)


def _append_to_cache(x, cache):
    cache.t = torch.cat([cache.t, (x * 2 + 1).sin()], dim=1)
    return cache.t.sum(1) + x.sum()


def test_a_held_tensor_equal_to_an_argument_size_by_chance_shares_no_symbol_with_it():
    # at the second call the cache's length is 3, as is x's width: had they shared one symbol,
    # that entry would serve only this call, and the third would compile once more
    jf = squall.jit(_append_to_cache, executors=["torch"])
    ours, theirs = _GrowingCache(), _GrowingCache()
    for _ in range(6):
        x = torch.randn(2, 3)
        assert_close(jf(x, ours), _append_to_cache(x, theirs))
    assert_close(ours.t, theirs.t)
    assert _misses(jf) == 2
    trace = str(squall.last_traces(jf).source)
    assert 't: "cpu f32[2, s2]"' in trace and ".shape[1] == s1" not in trace


def _global_pool_after_strided_conv(x, w=torch.randn(4, 3, 3, 3)):
    """A CNN's head: a strided conv, then nn.AdaptiveAvgPool2d(1) (MobileNetV3, EfficientNet, RegNet)."""
    return torch.nn.functional.adaptive_avg_pool2d(torch.nn.functional.conv2d(x, w, stride=2), 1).flatten(1)


def test_a_global_adaptive_pool_divides_by_the_symbolic_map_size():
    """Its mean divides by the map's size as an expression: before, it read the size (float(L)),
    guarding it, and compiled once per image size."""
    jf = squall.jit(_global_pool_after_strided_conv, dynamic=True)
    for size in (9, 13, 20):
        x = torch.randn(2, 3, size, size + 2)
        assert_close(jf(x), _global_pool_after_strided_conv(x))
    assert _misses(jf) == 1


def test_a_strided_convolutions_input_gradient_compiles_once_per_remainder_not_per_size():
    """The gradient of a strided convolution's input adds back the rows the forward's floor
    dropped, a remainder of the stride, which the transposed convolution takes as a constant:
    guarded as that relation, sizes of one remainder share a program (before, the size itself
    was read and every image size compiled, as a CNN in training did)."""
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    jf = squall.jit(_global_pool_after_strided_conv, dynamic=True, executors=["torch"])
    for size in (9, 13, 10, 21, 14):  # (size - 3) % 2: 0, 0, 1, 0, 1
        x = torch.randn(2, 3, size, size, requires_grad=True)
        ours, theirs = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        jf(ours, w).square().sum().backward()
        w_grad, w.grad = w.grad, None
        _global_pool_after_strided_conv(theirs, w).square().sum().backward()
        assert_close(ours.grad, theirs.grad)
        assert_close(w_grad, w.grad)
        w.grad = None
    assert _misses(jf) == 2
