"""Regions with symbolic sizes: one inductor compilation serves every length (squall_inductor.symbolic)."""
from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
import threading
import warnings
import time

import pytest
import torch

import squall
from squall.extend import Declined, FusionRegion, load_source, resolve_operation
from squall.frontend.tracing import TracingContext
from squall.proxies import TensorProxy, tracing
from squall.symbolic import ShapeEnv

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import InductorExecutor  # noqa: E402
from squall_inductor.symbolic import SymbolicRegion, SymbolicSpec, spec_examples  # noqa: E402
from squall_inductor.regions import CompiledRegion, OtherValues, layout  # noqa: E402
from squall_inductor.worker import CompileWorker, RegionCompiler, default_worker  # noqa: E402

pytestmark = pytest.mark.skipif(squall_inductor.cpp_compiler() is None, reason="no C++ compiler for inductor's CPU backend")


def _softmax_then_flatten(x):
    b, n, h = x.shape
    y = torch.softmax(x * 2 + 1, -1).reshape(b, n * h)  # a view to sizes computed from symbols
    return torch.tanh(y) * 3


def _region_compiles(ex: InductorExecutor) -> int:
    return sum(1 for _, outcome in ex.outcomes if outcome == "inductor")


def test_one_region_compilation_serves_every_length_and_batch_size():
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_softmax_then_flatten, executors=[ex, "torch"], wait=True)
    for b, n in [(2, 5), (3, 7), (4, 9), (2, 30), (5, 3)]:
        x = torch.randn(b, n, 16)
        torch.testing.assert_close(jfn(x), _softmax_then_flatten(x))
    # the first call's static region, then one symbolic region for every later length
    assert _region_compiles(ex) == 2, ex.outcomes
    assert 'x: "cpu f32[s0, s1, 16]"' in squall.last_traces(jfn).source
    assert len(squall.last_traces(jfn).plan.regions) == 1
    assert [type(c) for c in ex._compiled.values()].count(SymbolicRegion) == 1
    assert not _static_fallbacks(ex)  # no call fell back to a static compilation


def _static_fallbacks(ex: InductorExecutor) -> list:
    return [s for c in ex._compiled.values() if isinstance(c, SymbolicRegion) for s in c.static]


def _symbolic_proxy(env: ShapeEnv, name: str, shape: tuple) -> TensorProxy:
    sizes = [env.symbol(n, name, d) if n >= 2 and d < len(shape) - 1 else n for d, n in enumerate(shape)]
    return TensorProxy(shape=tuple(sizes), dtype=torch.float32, device="cpu")


def _sigmoid_chain(x):
    return (torch.sigmoid(x * 2 + 1).sum(1),)


def _loaded(source: str):
    """A region function from its source, as squall_inductor.regions makes one (it can travel to the worker)."""
    namespace = {"torch": torch}
    load_source(source, "test-region", namespace)
    return namespace["region"]


def test_a_call_its_guards_refuse_runs_a_compilation_for_its_memory_order_or_its_layout():
    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 6, 8))  # f32[s0, s1, 8]
    region = SymbolicRegion(_sigmoid_chain, [proxy])
    for shape in [(3, 5, 8), (9, 2, 8)]:
        y = torch.randn(shape)
        assert region.holds([y])
        torch.testing.assert_close(region(y), _sigmoid_chain(y))
    assert not region.static and not region.ordered
    # transposed views (a decoding step's first cache): one more symbolic compilation, for their
    # memory order, serves every length
    for n in (5, 11):
        transposed = torch.randn(8, n, 3).permute(2, 1, 0)
        assert not region.holds([transposed])
        torch.testing.assert_close(region(transposed), _sigmoid_chain(transposed))
    assert list(region.ordered) == [(((2, 1, 0),), frozenset())] and not region.static
    # a batch of 1: inductor specialises a size of 1, so the symbolic kernel's guards refuse it;
    # one more symbolic compilation, with that symbol the constant 1, serves it at every length
    for n in (5, 9, 2):
        one = torch.randn(1, n, 8)
        assert not region.holds([one])
        torch.testing.assert_close(region(one), _sigmoid_chain(one))
    assert list(region.ordered)[1:] == [(((0, 1, 2),), frozenset({"s0"}))] and not region.static
    assert region.ordered[(((0, 1, 2),), frozenset({"s0"}))][1]([torch.randn(1, 7, 8)])
    strided = torch.randn(3, 10, 8)[:, ::2]  # not dense: no symbolic compilation takes it
    torch.testing.assert_close(region(strided), _sigmoid_chain(strided))
    assert len(region.static) == 1 and len(region.ordered) == 2
    if "L['t0'].size()[1] <= 4096" in region.holds.source:  # a bound inductor chose for its reduction
        long = torch.randn(2, 5000, 8)
        assert not region.holds([long])
        # a reduction over 5000 values: inductor's order of summation is not eager's, so float32
        # differs by a few ulps of the sum (1.5e-6 relative was seen against the default 1.3e-6)
        torch.testing.assert_close(region(long), _sigmoid_chain(long), rtol=1e-5, atol=1e-5)


def test_a_spec_with_symbols_at_one_keeps_the_others_symbolic_and_makes_constants_ints():
    cpu = torch.device("cpu")
    spec = SymbolicSpec({"s0": 4, "s1": 6, "s10": 3}, [(("s1", "s10", 8), torch.float32, cpu, (0, 1, 2)),
                                                        (("(2*s1 + 1)", "s10*s1"), torch.float32, cpu, (1, 0))])
    ones = spec.with_ones(frozenset({"s1"}))  # `s10` is another symbol
    assert ones.hints == {"s0": 4, "s10": 3}
    assert [dims for dims, *_ in ones.inputs] == [(1, "s10", 8), (3, "s10*1")]
    assert [order for *_, order in ones.inputs] == [(0, 1, 2), (1, 0)]
    assert [tuple(t.shape) for t in spec_examples(ones)] == [(1, 3, 8), (3, 3)]
    assert spec.with_ones(frozenset()) is spec
    assert [dims for dims, *_ in spec.with_ones(frozenset({"s1", "s10"})).inputs] == [(1, 1, 8), (3, 1)]


def test_a_symbolic_region_compiles_a_few_static_fallbacks_and_runs_later_layouts_on_its_torch_calls():
    # a strided view at a new length each call: every call a layout no guard admits, each a static
    # compile (so was a batch of 1 once: 49 queued behind a 200-batch DistilBERT stream)
    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 6, 8))  # f32[s0, s1, 8]
    compiled: list[tuple] = []

    def compile_static(args):
        compiled.append(tuple(a.shape for a in args))
        return _sigmoid_chain

    region = SymbolicRegion(_sigmoid_chain, [proxy], compile_static=compile_static)
    for n in range(3, 3 + 2 * squall_inductor.symbolic.MAX_STATIC_LAYOUTS + 3):
        strided = torch.randn(3, 2 * n, 8)[:, ::2]
        assert not region.holds([strided])
        torch.testing.assert_close(region(strided), _sigmoid_chain(strided))
    assert len(compiled) == len(region.static) == squall_inductor.symbolic.MAX_STATIC_LAYOUTS
    assert not region.ordered
    again = torch.randn(3, 6, 8)[:, ::2]  # a layout compiled before still runs its compilation
    assert region._other([again]) is region.static[next(iter(region.static))]


def test_a_symbolic_region_compiles_a_few_later_symbolic_compilations_then_takes_the_static_fallbacks_way():
    # each call in another memory order (or with other symbols at 1) is one more symbolic compilation,
    # up to MAX_SYMBOLIC_VARIANTS; past them such a call is a static fallback's, which are bounded too
    import itertools

    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 5, 6, 8))  # f32[s0, s1, s2, 8]
    ordered: list[tuple] = []
    static: list[tuple] = []

    def compile_ordered(spec):
        ordered.append(tuple(order for *_, order in spec.inputs))
        return _sigmoid_chain, "False"  # guards that admit nothing: every new order asks again

    def compile_static(args):
        static.append(tuple(a.shape for a in args))
        return _sigmoid_chain

    region = SymbolicRegion(_sigmoid_chain, [proxy], compile_ordered=compile_ordered, compile_static=compile_static)
    limit = squall_inductor.symbolic.MAX_SYMBOLIC_VARIANTS
    for order in list(itertools.permutations(range(4)))[1 : limit + 4]:
        x = torch.randn([(3, 5, 7, 8)[d] for d in order]).permute([order.index(d) for d in range(4)])
        torch.testing.assert_close(region(x), _sigmoid_chain(x))
    assert len(ordered) == len(region.ordered) == limit
    assert len(static) == squall_inductor.symbolic.MAX_STATIC_LAYOUTS  # (these guards admit nothing: every call went on to them)


def test_background_compilations_under_way_at_exit_are_stopped_and_waited_for():
    # a thread left in a static fallback's compile as the interpreter finalised aborted it
    # ("terminate called without an active exception") or hung it
    program = textwrap.dedent("""
        import time, torch
        from squall.extend import compiling_stopped
        from squall.frontend.tracing import TracingContext
        from squall.proxies import TensorProxy, tracing
        from squall.symbolic import ShapeEnv
        from squall_inductor.symbolic import SymbolicRegion

        def fn(x):
            return (torch.sigmoid(x * 2 + 1).sum(1),)

        def compile_static(args):  # a compile in flight: it ends once compiling is stopped
            while not compiling_stopped():
                time.sleep(0.01)
            print("stopped", flush=True)
            raise RuntimeError("the interpreter is exiting")

        env = ShapeEnv()
        with tracing(TracingContext()):
            proxy = TensorProxy(shape=(env.symbol(4, "x", 0), env.symbol(6, "x", 1), 8), dtype=torch.float32, device="cpu")
        region = SymbolicRegion(fn, [proxy], compile_static=compile_static, background=True)
        strided = torch.randn(3, 10, 8)[:, ::2]  # a layout no symbolic compilation takes
        torch.testing.assert_close(region(strided), fn(strided))  # its torch calls, while the compile runs
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "stopped", (done.stdout, done.stderr[-2000:])


def test_guards_name_the_inputs_sizes_and_strides():
    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 6, 8))
    region = SymbolicRegion(_sigmoid_chain, [proxy])
    source = region.holds.source
    assert "L['t0'].size()[2] == 8" in source and "stride()" in source and "2 <= L['t0'].size()[0]" in source


def _one_call_region_compiled(size: int, make_call) -> object:
    """What inductor's compile_region answers for a region of the one call `make_call(n)` records,
    `n` a size symbol of value `size` (a warning at the call would be an error)."""
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    ctx = TracingContext()
    with tracing(ctx):
        x = make_call(ShapeEnv().symbol(size, "x", 0))
    call = ctx.scopes[0][-1]
    region = FusionRegion("inductor", [call], [call], [x], list(call.output_proxies()))
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        return ex.compile_region(region)


def _assert_declined_for_an_unheld_symbol(answer) -> None:
    assert isinstance(answer, Declined)
    assert "symbolic sizes (s0) that no input of the region holds as a dimension" in answer.reason


def test_a_region_reading_a_symbol_no_input_holds_is_declined_saying_why():
    def reshape(n):
        x = TensorProxy(shape=(2 * n,), dtype=torch.float32, device="cpu")  # only 2*s0 is a dimension
        resolve_operation("torch.Tensor.reshape")(x, (n, 2))
        return x
    _assert_declined_for_an_unheld_symbol(_one_call_region_compiled(6, reshape))


def test_a_region_whose_inputs_hold_a_symbol_only_in_an_expression_is_declined_saying_why():
    """DenseNet's batch norm and ReLU after a strided convolution, under symbolic sizes: the
    region's input is `f32[2, (s0 - 1) // 2 + 1]`, its calls name no size. Inductor cannot bind
    s0 from that dimension ("expected [s0] to have been codegen-ed"): it was compiled anyway and
    failed, with a warning at the call; now declined before compiling."""
    def relu(n):
        x = TensorProxy(shape=(2, (n - 1) // 2 + 1), dtype=torch.float32, device="cpu")
        resolve_operation("torch.relu")(x)
        return x
    _assert_declined_for_an_unheld_symbol(_one_call_region_compiled(9, relu))


def test_the_background_upgrade_compiles_symbolic_regions_in_the_worker_and_leaves_nn_module_alone():
    # torch.fx's trace patches torch.nn.Module.__call__ and __getattr__ process-wide while it runs:
    # in the user's process that would reach the user's threads (torch.compile of a model crashed
    # beside a decoding loop in bench/generation.py), so symbolic regions compile in the worker
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    module_call, module_getattr = torch.nn.Module.__call__, torch.nn.Module.__getattr__
    seen: set = set()
    stop = threading.Event()

    def watch():  # what an eager module call in one of the user's threads would go through
        while not stop.is_set():
            seen.add((torch.nn.Module.__call__, torch.nn.Module.__getattr__))
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        jfn = squall.jit(_softmax_then_flatten, executors=[ex, "torch"], dynamic=True)
        x = torch.randn(3, 7, 16)
        torch.testing.assert_close(jfn(x), _softmax_then_flatten(x))
        assert squall.wait_for_upgrades(jfn, timeout=300)
    finally:
        stop.set()
        watcher.join()
    assert seen == {(module_call, module_getattr)}
    (upgrade,) = squall.upgrades(jfn)
    assert upgrade.status == "upgraded", upgrade
    worker = default_worker()
    assert worker.pid is not None and worker.pid != os.getpid()
    assert upgrade.compiled_in == f"in the compile worker process (pid {worker.pid})"
    (region,) = [c for c in ex._compiled.values() if isinstance(c, SymbolicRegion)]
    assert _region_compiles(ex) == 1, ex.outcomes
    for b, n in [(3, 7), (2, 5), (4, 30), (6, 2)]:  # one compilation serves every length and batch size
        y = torch.randn(b, n, 16)
        assert region.holds([y.reshape(b, n, 16)])
        torch.testing.assert_close(jfn(y), _softmax_then_flatten(y))
    assert _region_compiles(ex) == 1 and not region.static
    assert jfn.cache_info().misses == 1  # one squall compile: the symbolic entry


def _drop_last_position(x):
    n = x.shape[1]
    return torch.softmax(x[:, : n - 1] * 2 + 1, -1) * 3  # a slice bounded by a symbolic size


def test_an_upgrade_of_a_symbolic_slice_serves_every_length_without_another_compile():
    # the upgrade's planning keyed the region by the slice's printed bound, which read the length
    # and guarded it: every later length failed the upgraded program's shape guard and compiled a
    # variant in the user's thread
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_drop_last_position, executors=[ex, "torch"], dynamic=True)
    x = torch.randn(3, 7, 16)
    torch.testing.assert_close(jfn(x), _drop_last_position(x))
    assert squall.wait_for_upgrades(jfn, timeout=300)
    (upgrade,) = squall.upgrades(jfn)
    assert upgrade.status == "upgraded", upgrade
    for b, n in [(3, 9), (2, 5), (4, 30)]:
        y = torch.randn(b, n, 16)
        torch.testing.assert_close(jfn(y), _drop_last_position(y))
    info = jfn.cache_info()
    assert (info.misses, info.guard_failures) == (1, 0), info
    assert "inductor" in squall.last_traces(jfn).source  # the upgraded program ran them


def test_the_compilations_for_calls_the_guards_refuse_run_in_the_worker_in_the_background():
    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 6, 8))
    worker = default_worker()
    source = "def region(x):\n  return (torch.sigmoid(x * 2 + 1).sum(1),)\n"
    fn = _loaded(source)
    ordered = RegionCompiler(fn, source, worker=worker, in_process=False)
    static = RegionCompiler(fn, source, worker=worker, in_process=False)
    region = SymbolicRegion(fn, [proxy], compile=RegionCompiler(fn, source, worker=worker).symbolic,
                            compile_ordered=ordered.symbolic, compile_static=static, background=True)
    transposed = torch.randn(8, 5, 3).permute(2, 1, 0)
    one = torch.randn(1, 5, 8)
    strided = torch.randn(3, 10, 8)[:, ::2]
    # while their compilations run, the calls run the region's torch calls
    torch.testing.assert_close(region(transposed), _sigmoid_chain(transposed))
    torch.testing.assert_close(region(one), _sigmoid_chain(one))
    torch.testing.assert_close(region(strided), _sigmoid_chain(strided))
    assert region.wait(timeout=300)
    assert len(region.ordered) == 2 and len(region.static) == 1
    assert isinstance(region.static[layout([strided])], CompiledRegion)
    assert ordered.where == static.where == f"in the compile worker process (pid {worker.pid})"
    assert worker.pid != os.getpid()
    for n in (5, 9):  # served by the compilation for their memory order, at any length
        transposed = torch.randn(8, n, 3).permute(2, 1, 0)
        assert region.ordered[(((2, 1, 0),), frozenset())][1]([transposed])
        torch.testing.assert_close(region(transposed), _sigmoid_chain(transposed))
    for n in (5, 9):  # and a batch of 1 by the compilation for a size of 1, at any length
        one = torch.randn(1, n, 8)
        assert region.ordered[(((0, 1, 2),), frozenset({"s0"}))][1]([one])
        torch.testing.assert_close(region(one), _sigmoid_chain(one))


def test_a_background_compilation_never_falls_back_to_tracing_in_this_process():
    # a dead worker: the region's torch calls serve the calls the guards refuse, saying so
    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 6, 8))
    source = "def region(x):\n  return (torch.sigmoid(x * 2 + 1).sum(1),)\n"
    fn = _loaded(source)
    worker = CompileWorker()
    worker.close()
    dead = RegionCompiler(fn, source, worker=worker, in_process=False)
    region = SymbolicRegion(fn, [proxy], compile_ordered=dead.symbolic, compile_static=dead, background=True)
    one, strided = torch.randn(1, 5, 8), torch.randn(3, 10, 8)[:, ::2]
    with pytest.warns(squall.SquallWarning, match="could not compile a symbolic region for its inputs' shapes and strides.*torch calls"):
        torch.testing.assert_close(region(strided), _sigmoid_chain(strided))
        assert region.wait(timeout=60)
    assert region.static[layout([strided])] is fn
    with pytest.warns(squall.SquallWarning, match=r"could not compile a symbolic region for its inputs' sizes of 1 \(s0\).*torch calls"):
        torch.testing.assert_close(region(one), _sigmoid_chain(one))
        assert region.wait(timeout=60)
    assert region.ordered[(((0, 1, 2),), frozenset({"s0"}))][0] is fn
    torch.testing.assert_close(region(strided), _sigmoid_chain(strided))
    torch.testing.assert_close(region(one), _sigmoid_chain(one))


def test_the_guard_function_decides_as_torch_s_guard_expression():
    # constant sizes and strides are compared as whole tuples; the decisions are the expression's
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

    from squall_inductor.symbolic import guard_function

    source = ("L['t0'].size()[0] == 4 and L['t0'].size()[1] == 8 and L['t0'].stride()[0] == 8 and "
              "L['t0'].stride()[1] == 1 and L['t0'].storage_offset() == 0 and L['t1'].size()[1] == 8 and "
              "L['t1'].stride()[0] == L['t1'].size()[1] and L['t1'].stride()[1] == 1 and 2 <= L['t1'].size()[0]")
    holds = guard_function(source, [2, 2])

    def expected(a, b):
        return bool(eval(source, dict(SYMPY_INTERP), {"L": {"t0": a, "t1": b}}))  # noqa: S307 - the test's own source

    weight = torch.randn(4, 8)
    cases = [(weight, torch.randn(3, 8)), (weight, torch.randn(1, 8)), (torch.randn(8, 4).t(), torch.randn(3, 8)),
             (torch.randn(4, 9)[:, :8], torch.randn(3, 8)), (torch.randn(5, 8), torch.randn(3, 8)),
             (torch.randn(40)[8:].view(4, 8), torch.randn(3, 8)), (weight, torch.randn(8, 3).t())]
    assert [holds((a, b)) for a, b in cases] == [expected(a, b) for a, b in cases] == [True] + [False] * 6
    assert guard_function("L['t0'].size()[0] == 4 or L['t0'].size()[0] == 5", [1])((torch.randn(5),))


def _grow_cache(cache, key):
    """A decoding step's cache grown by the new token's key: `[1, 2, s0 + 1, 16]`."""
    return torch.cat([cache, torch.tanh(key) * 2], dim=2), cache.sum(-1)


def test_a_symbolic_region_checked_at_other_lengths_serves_them_with_eager_values_and_sizes(monkeypatch):
    # every call checked (as an upgraded program's first call is, at whatever length it comes):
    # the symbolic region's results must agree with the sizes of the call, not of the traced one
    monkeypatch.setenv("SQUALL_CHECK", "always")
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_grow_cache, executors=[ex, "torch"], wait=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # a fault reported would be a warning
        for length in (5, 8, 9, 6, 13):
            cache, key = torch.randn(1, 2, length, 16), torch.randn(1, 2, 1, 16)
            got, want = jfn(cache, key), _grow_cache(cache, key)
            assert [g.shape for g in got] == [w.shape for w in want] == [(1, 2, length + 1, 16), (1, 2, length)]
            torch.testing.assert_close(got, want)
    assert jfn.cache_info().replans == 0
    assert [type(c) for c in ex._compiled.values()].count(SymbolicRegion) == 1


class _Holder:
    def __init__(self, cache: torch.Tensor):
        self.cache = cache


def _grow_held_cache(holder, key):
    return _grow_cache(holder.cache, key)


def test_a_held_cache_one_token_long_is_compiled_for_every_longer_length():
    # the cache's length is a symbol traced at 1 (squall.symbolic.ShapeEnv.traced_at_one): inductor
    # compiles it for 2 or more (a hint of 1 would make it the constant 1: a static kernel per
    # length), and its guards send the call of length 1 to a static compilation
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_grow_held_cache, executors=[ex, "torch"], wait=True)
    for length in (1, 2, 3, 7, 1):
        holder, key = _Holder(torch.randn(1, 2, length, 16)), torch.randn(1, 2, 1, 16)
        torch.testing.assert_close(jfn(holder, key), _grow_held_cache(holder, key))
    assert jfn.cache_info().misses == 1
    (symbolic,) = [c for c in ex._compiled.values() if type(c) is SymbolicRegion]
    assert 2 in symbolic.spec.hints.values() and 1 not in symbolic.spec.hints.values(), symbolic.spec
    (held,) = [i for i, (dims, *_) in enumerate(symbolic.spec.inputs) if dims[2] != 1]  # the cache, among the region's inputs
    assert symbolic.holds([torch.randn(1, 2, 3 if i == held else 1, 16) for i in range(2)])
    assert not symbolic.holds([torch.randn(1, 2, 1, 16) for i in range(2)])
    assert symbolic.wait(120)
    assert {shapes[held][0][2] for shapes in symbolic.static} <= {1}, list(symbolic.static)


def _scale_held_cache(holder, key):
    return torch.cat([holder.cache * 3, torch.sigmoid(key)], dim=2), holder.cache.amax(-1)


def test_the_judge_compares_and_times_the_compilation_a_cache_one_token_long_runs():
    # the judge runs the traced call, a cache of length 1, which the symbolic kernel does not take:
    # the compilation for that size of 1 its first run starts is waited for (InductorExecutor.settle),
    # so the judge compares and times what later calls run, not the region's torch calls meanwhile
    # (a decoding step's large regions judged so lost to the torch plan, and were remembered so)
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_scale_held_cache, executors=[ex, "torch"], wait=True)
    holder, key = _Holder(torch.randn(1, 2, 1, 16)), torch.randn(1, 2, 1, 16)
    torch.testing.assert_close(jfn(holder, key), _scale_held_cache(holder, key))
    assert [u.status for u in squall.upgrades(jfn)] == ["upgraded"], squall.upgrades(jfn)
    (symbolic,) = [c for c in ex._compiled.values() if type(c) is SymbolicRegion]
    assert not symbolic._pending, "the judge waited for the compilation its call needs"
    ((compiled, holds),) = symbolic.ordered.values()
    assert compiled is not symbolic.fn and holds([torch.randn(1, 2, 1, 16)] * len(symbolic.spec.inputs))  # the cache and the key
    for length in (1, 4):
        holder = _Holder(torch.randn(1, 2, length, 16))
        torch.testing.assert_close(jfn(holder, key), _scale_held_cache(holder, key))


def test_a_compilation_returning_other_sizes_than_the_trace_is_never_returned():
    env = ShapeEnv()
    with tracing(TracingContext()):
        x = _symbolic_proxy(env, "x", (4, 6, 8))  # f32[s0, s1, 8]
        summed = TensorProxy(shape=(x.shape[0], 8), dtype=torch.float32, device="cpu")  # what _sigmoid_chain returns: f32[s0, 8]
    served = []

    def one_row_short(*args):  # a compilation whose guards admit calls it serves wrongly
        full = _sigmoid_chain(*args)[0]
        if args[0].shape[0] != 5:  # right at the sizes it is checked at before it serves a call (4, and 7)
            return [full]
        served.append(1)
        return [full[:-1]]

    region = SymbolicRegion(_sigmoid_chain, [x], outputs=[summed], compile=lambda spec: (one_row_short, "True"))
    y = torch.randn(5, 3, 8)
    with pytest.warns(squall.SquallWarning, match=r"returned sizes \[\[4, 8\]\] for inputs of sizes \[\[5, 3, 8\]\], which its trace does not give"):
        out = region(y)
    assert out[0].shape == (5, 8)
    torch.testing.assert_close(out, _sigmoid_chain(y))
    z = torch.randn(7, 2, 8)
    torch.testing.assert_close(region(z), _sigmoid_chain(z))  # later calls: the torch calls, no warning
    assert served == [1]
    healthy = SymbolicRegion(_sigmoid_chain, [x], outputs=[summed])
    assert healthy.fits([z], healthy(z)) and not healthy.fits([z], (torch.zeros(6, 8),))


def _symbolic_rows(shape: tuple = (4, 6, 8)) -> list[TensorProxy]:
    with tracing(TracingContext()):
        return [_symbolic_proxy(ShapeEnv(), "x", shape)]  # f32[s0, s1, 8]


def test_a_symbolic_compilation_right_only_at_its_traced_sizes_serves_no_call():
    # it serves every length, and the judge compares a plan at one call's lengths: it is run beside
    # the region's torch calls at other sizes too (each symbol moved by 3: 7 rows of 9) before it serves
    seen = []

    def off_elsewhere(*args):
        seen.append(tuple(args[0].shape))
        out = _sigmoid_chain(*args)[0]
        return [out if args[0].shape[0] == 4 else out + 0.1]

    with pytest.raises(OtherValues, match="computes other values than its torch calls on example inputs"):
        SymbolicRegion(_sigmoid_chain, _symbolic_rows(), compile=lambda spec: (off_elsewhere, "True"))
    assert seen == [(4, 6, 8), (7, 9, 8)]
    SymbolicRegion(_sigmoid_chain, _symbolic_rows(), compile=lambda spec: (_sigmoid_chain, "True"))  # a right one serves


def test_a_symbolic_compilation_raising_at_other_sizes_its_guards_admit_serves_no_call():
    def raises_elsewhere(*args):
        if args[0].shape[0] != 4:
            raise IndexError("index 7 is out of bounds")
        return _sigmoid_chain(*args)

    with pytest.raises(OtherValues, match=r"raised IndexError: index 7 is out of bounds at sizes \[\[7, 9, 8\]\] its guards admit"):
        SymbolicRegion(_sigmoid_chain, _symbolic_rows(), compile=lambda spec: (raises_elsewhere, "True"))


def test_the_second_check_runs_at_the_first_other_sizes_the_guards_admit_and_the_torch_calls_take():
    seen = []

    def right(fn):
        def compiled(*args):
            seen.append(tuple(args[0].shape))
            return fn(*args)
        return compiled

    # inductor's guards ask for an even length: moved by 3 they refuse, by 1 too, by 2 they admit
    SymbolicRegion(_sigmoid_chain, _symbolic_rows(), compile=lambda spec: (right(_sigmoid_chain), "L['t0'].size()[1] % 2 == 0"))
    assert seen == [(4, 6, 8), (6, 8, 8)]
    seen.clear()

    def needs_six_rows(x):  # torch calls that take one length only: nothing to compare at others
        return (torch.sigmoid(x.reshape(6, 4, 8)),)

    SymbolicRegion(needs_six_rows, _symbolic_rows((6, 4, 8)), compile=lambda spec: (right(needs_six_rows), "True"))
    assert seen == [(6, 4, 8)]  # nothing run at other sizes


def test_a_batch_of_one_sharing_a_symbolic_entry_runs_its_later_background_upgrade(monkeypatch):
    # the batch of 1 shares the symbolic entry's torch plan before the background upgrade; once the
    # upgrade is installed it runs the fused plan too, where inductor's guards send it to a
    # compilation with that size the constant 1 (never the symbolic kernel)
    from squall.runtime import upgrade_worker
    from squall.runtime.jit import jitted_state

    monkeypatch.setattr(upgrade_worker, "HOT_S", 0.0)  # queued after its first call
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_softmax_then_flatten, executors=[ex, "torch"])
    for b, n in [(2, 5), (3, 7), (1, 9)]:
        x = torch.randn(b, n, 16)
        torch.testing.assert_close(jfn(x), _softmax_then_flatten(x))
    assert squall.wait_for_upgrades(jfn, timeout=240)
    assert [u.status for u in squall.upgrades(jfn)][-1] == "upgraded", squall.upgrades(jfn)
    cache = jitted_state(jfn).cache
    symbolic_key, one_key = [k for k, r in cache.entries.items() if r.slot is not None][-2:]
    assert cache.entries[one_key].compiled is cache.entries[symbolic_key].compiled  # the upgraded plan
    assert jfn.cache_info().misses == 2
    for n in (9, 4):
        x = torch.randn(1, n, 16)
        torch.testing.assert_close(jfn(x), _softmax_then_flatten(x))
    assert jfn.cache_info().misses == 2
    (symbolic,) = [c for c in ex._compiled.values() if type(c) is SymbolicRegion]
    assert symbolic.wait(120)
    assert not symbolic.static and [ones for _, ones in symbolic.ordered] == [frozenset({"s0"})]  # the batches of 1 ran it


def test_a_batch_of_one_the_squall_entry_serves_runs_a_compilation_inductor_s_guards_admit():
    # squall's symbolic trace never asked whether the batch is 1, so a batch of 1 runs its entry's
    # program; inductor specialises sizes 0 and 1 in its compile, whose guards refuse that call:
    # it runs one more symbolic compilation, with the batch the constant 1, for every length,
    # never the symbolic kernel (it was a static compilation per length)
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(_softmax_then_flatten, executors=[ex, "torch"], wait=True)
    for b, n in [(2, 5), (3, 7), (1, 9), (1, 4), (4, 6)]:
        x = torch.randn(b, n, 16)
        torch.testing.assert_close(jfn(x), _softmax_then_flatten(x))
    assert jfn.cache_info().misses == 2 and jfn.cache_info().eager_before_compile == 0  # static, then symbolic: no compile for the 1s
    symbolic = [c for c in ex._compiled.values() if type(c) is SymbolicRegion]
    assert len(symbolic) == 1 and not symbolic[0].holds([torch.randn(1, 9, 16)])
    assert symbolic[0].wait(120)  # compiled in the background (the region's torch calls meanwhile)
    assert not _static_fallbacks(ex)
    (ones,) = symbolic[0].ordered.values()
    assert ones[1]([torch.randn(1, 9, 16)]) and ones[1]([torch.randn(1, 4, 16)]) and not ones[1]([torch.randn(2, 4, 16)])
    x = torch.randn(1, 9, 16)
    torch.testing.assert_close(jfn(x), _softmax_then_flatten(x))  # now on its static compilation


def test_a_slice_bound_from_a_symbol_no_input_holds_is_declined_saying_why():
    """`x[:, : y.shape[1] // 2]` where y is not an input of the region: the bound sits in a slice,
    which pytree keeps whole, so the symbol went unseen and the region function named s0 without
    reading it (NameError at compile, a warning at the call)."""
    def sliced(n):
        x = TensorProxy(shape=(2, 12), dtype=torch.float32, device="cpu")
        resolve_operation("torch.Tensor.__getitem__")(x, (slice(None), slice(None, n // 2)))
        return x
    _assert_declined_for_an_unheld_symbol(_one_call_region_compiled(9, sliced))


def test_a_batch_norm_in_training_compiles_for_symbolic_sizes_in_the_worker():
    """Its running variance's n / (n - 1) is a float of the size symbols, which torch's pass that
    turns Python floats into tensors could not place (KeyError: s85): the region fell back to torch."""
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()
    theirs = copy.deepcopy(ours)
    jfn = squall.jit(ours, executors=[ex, "torch"], wait=True, dynamic=True)
    for b, n in [(2, 9), (3, 12), (4, 7)]:
        x = torch.randn(b, 4, n, n)
        torch.testing.assert_close(jfn(x), theirs(x))
    torch.testing.assert_close(ours[0].running_var, theirs[0].running_var)
    assert not ex.compile_errors, ex.compile_errors
    assert _region_compiles(ex) >= 1, ex.outcomes


def _matmul_then_gelu(x, w):
    return (torch.nn.functional.gelu(x @ w) * 2 - 1,)


def _gelu_island(x, w):
    return (torch.nn.functional.gelu(x * 2) - w.sum(),)


@pytest.mark.parametrize("fn, one_unit, entries", [
    (_matmul_then_gelu, True, {"inductor_entry_cpp"}),  # the C++ wrapper's one library: one compiler run
    (_matmul_then_gelu, False, {"kernel"}),  # SQUALL_INDUCTOR_ONE_UNIT=0: the Python wrapper's kernels
    (_gelu_island, True, {"kernel"}),  # an island: its few kernels without ATen's operator headers
])
def test_a_symbolic_region_with_a_matmul_compiles_as_one_unit_and_serves_every_length(tmp_path, fn, one_unit, entries):
    """A symbolic region compiled kernel by kernel, each kernel a compiler run with its own copy of
    the headers, took 51 s of worker CPU for a llama decoding step (about 25 kernels)."""
    import pickle

    from squall_inductor import worker_main
    from squall_inductor.direct_load import keep_direct, load_direct

    cpu = torch.device("cpu")
    spec = SymbolicSpec({"s0": 6}, [(("s0", 8), torch.float32, cpu, (0, 1)), ((8, 4), torch.float32, cpu, (0, 1))])
    kept = str(tmp_path / "region.bin")
    guards, constants, bundle = worker_main.compile_symbolic(fn, spec, kept, one_unit=one_unit)
    assert set(pickle.loads(bundle).entries.values()) == entries
    keep_direct(kept, bundle)
    region = load_direct(kept)
    w = torch.randn(8, 4)
    for n in (2, 6, 11):
        x = torch.randn(n, 8)
        torch.testing.assert_close(region(x, w, *constants)[0], fn(x, w)[0])


def test_a_symbolic_region_the_cpp_wrapper_cannot_compile_is_traced_again_and_compiled_with_the_python_wrapper(tmp_path, monkeypatch):
    import pickle

    from squall_inductor import split_build, worker_main

    compiled_symbolic, tried = worker_main._compiled_symbolic, []

    def failing_cpp_wrapper(graph, fakes, fake_mode, spec, path, settings):
        tried.append((settings.get("cpp_wrapper", False), fake_mode))
        if settings.get("cpp_wrapper"):
            raise RuntimeError("the C++ wrapper failed")
        return compiled_symbolic(graph, fakes, fake_mode, spec, path, settings)

    monkeypatch.setattr(worker_main, "_compiled_symbolic", failing_cpp_wrapper)
    monkeypatch.setattr(split_build, "split_build_settings", lambda: {})
    cpu = torch.device("cpu")
    spec = SymbolicSpec({"s0": 6}, [(("s0", 8), torch.float32, cpu, (0, 1)), ((8, 4), torch.float32, cpu, (0, 1))])
    _, _, bundle = worker_main.compile_symbolic(_matmul_then_gelu, spec, str(tmp_path / "region.bin"), one_unit=True)
    assert [cpp for cpp, _ in tried] == [True, False]
    assert tried[0][1] is not tried[1][1]  # a fresh shape environment, without the failed compile's guards
    assert set(pickle.loads(bundle).entries.values()) == {"kernel"}


def _matmul_then_hardswish(x, w):
    return (torch.nn.functional.hardswish(x @ w) - 2,)


def test_a_symbolic_region_compiled_again_in_the_same_worker_still_gets_its_direct_bundle(tmp_path):
    """Each symbolic compile runs in a fresh temporary cache folder; torch 2.10 finds a kernel built by
    an earlier compile loaded, its library in that compile's folder, deleted since. It had no direct
    bundle then, and the user's process loaded the region through inductor (importing Dynamo there)."""
    import pickle

    from squall_inductor import worker_main
    from squall_inductor.direct_load import keep_direct, load_direct

    spec = SymbolicSpec({"s0": 6}, [(("s0", 8), torch.float32, torch.device("cpu"), (0, 1)), ((8, 4), torch.float32, torch.device("cpu"), (0, 1))])
    w = torch.randn(8, 4)
    for attempt in range(2):
        kept = str(tmp_path / f"region{attempt}.bin")
        _, constants, bundle = worker_main.compile_symbolic(_matmul_then_hardswish, spec, kept, one_unit=False)
        assert bundle is not None and set(pickle.loads(bundle).entries.values()) == {"kernel"}
        keep_direct(kept, bundle)
        region = load_direct(kept)
        for n in (3, 9):
            x = torch.randn(n, 8)
            torch.testing.assert_close(region(x, w, *constants)[0], _matmul_then_hardswish(x, w)[0])


def test_a_later_symbolic_compilation_computing_other_values_serves_no_call(monkeypatch):
    # each compilation is checked beside the region's torch calls before it serves a call; here the
    # one for a transposed memory order is compiled (in this process) with inductor's default
    # numerics, which keep float32 values where eager rounds to bfloat16
    from squall_inductor import regions

    env = ShapeEnv()
    with tracing(TracingContext()):
        proxy = _symbolic_proxy(env, "x", (4, 6, 8))
    fn = _loaded("def region(x):\n  return ((x * 3).to(torch.bfloat16).float() * 2 + 1,)\n")
    region = SymbolicRegion(fn, [proxy])
    x = torch.randn(4, 9, 8)
    torch.testing.assert_close(region(x), fn(x), rtol=0, atol=0)  # its first compilation rounds as eager
    monkeypatch.setitem(regions.EAGER_NUMERICS, "emulate_precision_casts", False)
    transposed = torch.randn(8, 9, 4).permute(2, 1, 0)
    with pytest.warns(squall.SquallWarning, match="memory order .OtherValues: inductor's compilation computes other values"):
        torch.testing.assert_close(region(transposed), fn(transposed), rtol=0, atol=0)
    assert all(compiled is fn for compiled, _ in region.ordered.values())
    torch.testing.assert_close(region(transposed), fn(transposed), rtol=0, atol=0)
