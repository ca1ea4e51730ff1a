"""The inductor plugin: discovery, availability, claims, planning, and real inductor regions on CPU.

Inductor compiles take seconds, so only a few small regions are compiled, by one
executor shared across the tests that need it (identical regions compile once).
"""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import squall
from squall.extend import resolve_operation
from squall.frontend.tracing import TracingContext
from squall.ltorch import kernels
from squall.market.plugins import Marketplace
from squall.proxies import TensorProxy, tracing
from squall.runtime import tiers

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import InductorExecutor, region_function  # noqa: E402
from squall_inductor.executor import _torch_won  # noqa: E402

HAS_CPU_BACKEND = squall_inductor.cpp_compiler() is not None
needs_cpu_inductor = pytest.mark.skipif(not HAS_CPU_BACKEND, reason="no C++ compiler for inductor's CPU backend (g++ or clang++)")


@pytest.fixture(scope="module")
def inductor(tmp_path_factory) -> InductorExecutor:
    """One executor for every test that compiles: its compiled regions are shared."""
    # regions of a few dozen elements, far too small to pay back (the cost model would skip
    # them): min_eager_seconds=0 compiles them anyway, so that they stay cheap to test
    return InductorExecutor(autotune=False, choices_path=tmp_path_factory.mktemp("choices") / "choices.json",
                            min_eager_seconds=0)


def _call(op: str, *args, **kwargs):
    """The bound symbol of one call of `op` on proxies (compile-time view, no tensors needed)."""
    ctx = TracingContext()
    with tracing(ctx):
        resolve_operation(op)(*args, **kwargs)
    return ctx.scopes[0][-1]


def _proxy(shape, device="cpu", dtype=torch.float32):
    return TensorProxy(shape=shape, dtype=dtype, device=device)


# --- discovery and availability -----------------------------------------------------------------


def test_discovered_through_its_entry_point():
    market = Marketplace()
    assert "inductor" in market.names()
    ex = market.get("inductor")
    assert isinstance(ex, InductorExecutor)
    assert (ex.distribution, market.plugin_of("inductor")) == ("squall-inductor", "inductor")
    assert market.in_defaults("inductor") and market.names()[-1] == "torch"


def test_squall_executors_lists_it_in_a_fresh_process():
    done = subprocess.run([sys.executable, "-m", "squall", "executors", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["executors"]}
    assert rows["inductor"]["distribution"] == "squall-inductor"
    assert rows["inductor"]["available"] is HAS_CPU_BACKEND or torch.cuda.is_available()
    assert "prims.exp" in rows["inductor"]["ops"] and "prims.matmul" not in rows["inductor"]["ops"]


def test_asking_availability_does_not_import_torch_compile():
    # every squall.jit asks every installed executor, even one naming only "torch": importing
    # torch._dynamo (seconds) there made squall's own first call cost seconds
    code = ("import sys, torch, squall; squall.jit(lambda x: x + 1, executors=['torch'])(torch.ones(2)); "
            "print(squall.executors()['inductor'].available, 'torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(HAS_CPU_BACKEND or torch.cuda.is_available()), "False"]


def test_unavailable_without_a_compiler_says_why(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/bin/c++")
    ex = InductorExecutor(choices_path=None)
    if torch.cuda.is_available():
        assert "cuda" in ex.backends() or "triton" in ex.availability().reason
        return
    availability = ex.availability()
    assert not availability
    assert "$CXX='/nonexistent/bin/c++' is not found" in availability.reason
    assert "CUDA is not available" in availability.reason
    # the planner passes it over, saying why, and the program runs on torch
    fn = lambda x: torch.tanh(x * 2 + 1)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = squall.explain(squall.jit(fn, executors=[ex, "torch"]), torch.randn(3))
    assert report.unavailable["inductor"] == availability.reason
    assert report.taken_by("torch.mul") == ["torch"] and not report.regions
    assert "passed over: inductor" in str(report)


# --- claims, judged on proxies (no compiler, no GPU needed) ---------------------------------------


def test_claims_whole_high_level_ops_on_cpu_proxies():
    ex = InductorExecutor(choices_path=None)
    with tracing(TracingContext()):
        x, t = _proxy((8, 16)), _proxy((8,), dtype=torch.int64)
        calls = {
            "softmax": _call("torch.nn.functional.softmax", x, dim=-1),
            "layer_norm": _call("torch.nn.functional.layer_norm", x, (16,)),
            "gelu": _call("torch.nn.functional.gelu", x),
            "cross_entropy": _call("torch.nn.functional.cross_entropy", x, t),
            "view": _call("torch.Tensor.view", x, 16, 8),
        }
    for name, bsym in calls.items():
        impl, reason = ex.offer(bsym)
        assert (impl is not None) is HAS_CPU_BACKEND, (name, reason)
        # a claimed op stays whole in the region, so inductor sees softmax, not its prims
        if impl is not None:
            assert ex._expand(bsym) == [bsym]


def test_matmuls_attention_and_random_ops_stay_with_torch_by_default():
    ex, ex_mm = InductorExecutor(choices_path=None), InductorExecutor(include_matmuls=True, choices_path=None)
    with tracing(TracingContext()):
        x, w = _proxy((8, 16)), _proxy((32, 16))
        q = _proxy((2, 4, 8, 16))
        linear = _call("torch.nn.functional.linear", x, w)
        attention = _call("torch.nn.functional.scaled_dot_product_attention", q, q, q, is_causal=True)
        dropout = _call("torch.nn.functional.dropout", x, 0.5, True)
        identity = _call("torch.nn.functional.dropout", x, 0.0, False)
    impl, reason = ex.offer(linear)
    assert impl is None and "prims.matmul" in reason and "SQUALL_INDUCTOR_MATMULS=1" in reason
    assert ex.offer(attention)[0] is None and "prims.matmul" in ex.offer(attention)[1]
    assert ex.offer(dropout)[0] is None and "prims.uniform" in ex.offer(dropout)[1]
    assert ex.offer(identity)[0] is None and "returns its input" in ex.offer(identity)[1]
    if HAS_CPU_BACKEND:
        assert ex_mm.offer(linear)[0] is not None and ex_mm.offer(attention)[0] is not None
    assert "prims.matmul" in ex_mm.claimed_ops() and "prims.matmul" not in ex.claimed_ops()


def test_grouped_mm_is_claimed_only_in_bfloat16_which_inductors_tracing_takes():
    # inductor's meta function for _grouped_mm refuses float32 operands (eager runs them): a region
    # holding one failed to compile on mixtral, torch logging each failed meta at error level
    def moe(x, w, offs):
        return torch._grouped_mm(torch.relu(x), w, offs=offs) * 2.0

    offs = torch.tensor([3, 8], dtype=torch.int32)
    for dtype in (torch.float32, torch.bfloat16):
        x, w = torch.randn(8, 16, dtype=dtype), torch.randn(2, 16, 4, dtype=dtype)
        ex = InductorExecutor(include_matmuls=True, choices_path=None, min_eager_seconds=0)
        report = str(squall.explain(squall.jit(moe, executors=[ex, "torch"], wait=True), x, w, offs))
        # explain's table shortens the reason: the offer's own says it whole
        assert ("checker declined: inductor's torch._grouped_mm" in report) is (dtype == torch.float32), report
        assert not any("_grouped_mm" in " ".join(ops) for ops, _ in ex.outcomes if dtype == torch.float32)


def test_cuda_proxies_are_claimed_only_where_inductor_has_a_cuda_backend():
    ex = InductorExecutor(choices_path=None)
    with tracing(TracingContext()):
        x = _proxy((64, 1024), device="cuda")
        softmax = _call("torch.nn.functional.softmax", x, dim=-1)
        add = _call("torch.add", x, x)
    for bsym in (softmax, add):
        impl, reason = ex.offer(bsym)
        if "cuda" in ex.backends():
            assert impl is not None
        else:
            assert impl is None and reason == "checker declined: inductor has no cuda backend here"


def test_region_function_is_the_torch_executors_calls():
    with tracing(TracingContext()):
        x, w = _proxy((4, 8)), _proxy((8,))
        y = resolve_operation("torch.mul")(x, w)
        z = resolve_operation("torch.nn.functional.softmax")(y, dim=-1)
        ctx_calls = [b for b in squall.proxies.current_context().scopes[0]]
    region = squall.extend.FusionRegion("inductor", ctx_calls, ctx_calls, [x, w], [z])
    fn, source = region_function(region)
    assert "torch_mul(x" not in source  # names are squall's proxies', callees generated
    assert source.splitlines()[0] == f"def region({x.name}, {w.name}):"
    a, b = torch.randn(4, 8), torch.randn(8)
    (out,) = fn(a, b)
    torch.testing.assert_close(out, F.softmax(a * b, dim=-1))


def test_cpu_programs_without_fusible_work_plan_as_with_torch_alone():
    fn = lambda x, w: (x @ w).transpose(0, 1).reshape(-1)  # noqa: E731
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    with_inductor = squall.jit(fn, executors=[InductorExecutor(choices_path=None), "torch"])
    torch_only = squall.jit(fn, executors=["torch"])
    torch.testing.assert_close(with_inductor(x, w), fn(x, w))
    torch_only(x, w)
    assert squall.last_traces(with_inductor).source == squall.last_traces(torch_only).source
    assert not squall.last_traces(with_inductor).plan.regions  # pure metadata stays with torch


def test_a_region_that_won_by_less_than_the_margin_says_so():
    """Not "torch was faster" where inductor was faster, by less than a region must win by."""
    assert _torch_won({"torch_s": 1.76e-4, "inductor_s": 1.73e-4}, "measured") == (
        "inductor was faster by less than the 3% a region must win by on these shapes (measured: torch 0.176 ms, inductor 0.173 ms)"
    )
    assert _torch_won({"torch_s": 1e-4, "inductor_s": 2e-4}, "measured").startswith("torch was faster on these shapes")


def test_a_region_remembered_as_slower_is_not_compiled(tmp_path):
    fn = lambda x: torch.sigmoid(x * 3 + 1)  # noqa: E731
    x = torch.randn(5, 7)
    path = tmp_path / "choices.json"
    ex = InductorExecutor(choices_path=path, min_eager_seconds=0)
    report = squall.explain(squall.jit(fn, executors=[ex, "torch"]), x)
    if not HAS_CPU_BACKEND:
        pytest.skip("no C++ compiler for inductor's CPU backend (g++ or clang++)")
    # the seeded choice below was not there: this plan compiled and measured the region, and
    # whichever won, one choice is now on disk, keyed by the region's signature
    (key, choice), = json.loads(path.read_text()).items()
    assert choice["torch_s"] > 0 and choice["inductor_s"] > 0 and choice["winner"] in ("torch", "inductor")
    choice.update(winner="torch", torch_s=1e-4, inductor_s=2e-4)
    path.write_text(json.dumps({key: choice}))
    fresh = InductorExecutor(choices_path=path, min_eager_seconds=0)
    jfn = squall.jit(fn, executors=[fresh, "torch"], wait=True)
    torch.testing.assert_close(jfn(x), fn(x))
    assert not squall.last_traces(jfn).plan.regions
    assert fresh.outcomes and "remembered" in fresh.outcomes[0][1]
    # explain gives the reason for every call handed back, not a generic "left it out"
    why = (f"torch was faster on these shapes (remembered: torch {choice['torch_s'] * 1e3:.3f} ms, "
           f"inductor {choice['inductor_s'] * 1e3:.3f} ms)")
    report = squall.explain(jfn, x)
    assert report.taken_by("torch.sigmoid") == ["torch"]
    (sigmoid,) = [r for r in report.rows if r.op == "torch.sigmoid"]
    assert sigmoid.declined == [("inductor", f"fusion pass left it out: {why}")]
    assert f"handed back by inductor (torch.mul, torch.add, torch.sigmoid): {why}" in str(report)
    # a new release of the plugin times the region afresh: what an older one measured is not its own
    newer = InductorExecutor(choices_path=path, min_eager_seconds=0)
    newer._release = fresh.release() + ".1"
    squall.explain(squall.jit(fn, executors=[newer, "torch"]), x)
    assert not any("remembered" in why for _, why in newer.outcomes), newer.outcomes
    assert len(json.loads(path.read_text())) == 2  # its own measurement, beside the older one


# --- real inductor regions (CPU, a C++ compiler) ---------------------------------------------------


def _two_identical_chains(x, w):
    a = torch.tanh(x * 2 + 1)
    return torch.tanh((a @ w) * 2 + 1)


@needs_cpu_inductor
def test_regions_compile_once_run_as_one_call_and_explain_their_members(inductor):
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    jfn = squall.jit(_two_identical_chains, executors=[inductor, "torch"], wait=True)
    torch.testing.assert_close(jfn(x, w), _two_identical_chains(x, w))
    plan = squall.last_traces(jfn).plan
    assert [r.ops for r in plan.regions] == [["torch.mul", "torch.add", "torch.tanh"]] * 2, squall.upgrades(jfn)
    assert [r.reused for r in plan.regions] == [False, True]  # the second block reuses the first's compilation
    executed = squall.last_traces(jfn).source
    assert executed.count("inductor_region(") == 2 and "torch_matmul(" in executed and "torch_tanh" not in executed
    report = squall.explain(jfn, x, w)
    text = str(report)  # planned again: both regions now reuse the compilation made above
    assert "region 0 (inductor): 3 ops, 1 inputs -> 1 outputs, reusing an identical region's compilation" in text
    assert text.count(": torch.mul, torch.add, torch.tanh") == 2
    assert report.taken_by("torch.tanh") == ["inductor", "inductor"]
    assert report.taken_by("torch.matmul") == ["torch"]


@needs_cpu_inductor
def test_a_region_inductor_cannot_compile_falls_back_to_torch_with_a_warning():
    import torch._inductor.config as inductor_config

    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    fn = lambda x: torch.cos(x * 0.25 - 3) * 7  # noqa: E731
    x = torch.randn(3, 11, 5)  # shapes no other test compiles, so no cached kernel answers
    with inductor_config.patch({"cpp.cxx": ("/nonexistent/bin/c++",), "fx_graph_cache": False, "compile_threads": 1}):
        jfn = squall.jit(fn, executors=[ex, "torch"], wait=True)
        # the warning names the error and where it was raised (the worker's frame, which no traceback reaches here)
        with pytest.warns(squall.SquallWarning, match=r"inductor could not compile a region of 4 ops.*InvalidCxxCompiler.*\(raised at \w+\.py:\d+ in \w+\)"):
            out = jfn(x)
    torch.testing.assert_close(out, fn(x))
    plan = squall.last_traces(jfn).plan
    assert not plan.regions and any("falls back to torch" in e for e in plan.errors)
    assert all(d.executor == "torch" for d in plan.decisions)
    (cos,) = [d for d in plan.decisions if d.bsym.sym.id == "torch.cos"]
    assert cos.declined[0][0] == "inductor"
    assert cos.declined[0][1].startswith("fusion pass left it out: inductor could not compile it: ")
    assert "InvalidCxxCompiler" in cos.declined[0][1]


@needs_cpu_inductor
def test_training_forms_inductor_regions_in_the_forward_and_the_backward(inductor):
    def f(x, w):
        return (torch.tanh(x @ w) * 2 + 1).sum()

    x = torch.randn(8, 8)
    w = torch.randn(8, 8, requires_grad=True)
    jfn = squall.jit(f, executors=[inductor, "torch"], wait=True)
    (grad,) = torch.autograd.grad(jfn(x, w), w)
    (expected,) = torch.autograd.grad(f(x, w), w)
    torch.testing.assert_close(grad, expected)
    traces = squall.last_traces(jfn)
    assert traces.backward is not None  # squall differentiated it; torch's autograd did not
    assert traces.plan.regions and traces.backward.plan.regions
    assert "inductor_region(" in traces.source


# --- compiled regions: inductor without Dynamo ----------------------------------------------------


def _dynamo_activity() -> dict:
    """Dynamo's counters (frames it evaluated, graphs it captured, guard failures) as plain dicts."""
    from torch._dynamo.utils import counters

    return {name: dict(counts) for name, counts in counters.items()}


@needs_cpu_inductor
def test_calling_a_compiled_region_runs_no_dynamo_frame(inductor):
    def f(x):
        return torch.tanh(torch.softmax(x, -1) * 3 + 1)

    x = torch.randn(6, 5)
    jfn = squall.jit(f, executors=[inductor, "torch"], wait=True)
    jfn(x)
    assert squall.last_traces(jfn).plan.regions
    before = _dynamo_activity()
    for _ in range(3):
        torch.testing.assert_close(jfn(x), f(x))
    assert _dynamo_activity() == before


@needs_cpu_inductor
def test_a_region_called_with_other_strides_compiles_for_them():
    def f(x):
        return (torch.sigmoid(x * 2 + 1),)

    x = torch.randn(4, 6)
    region = squall_inductor.CompiledRegion(f, [x])
    torch.testing.assert_close(region(x), f(x))
    transposed = torch.randn(6, 4).t()  # same sizes, other strides: inductor's input check fails
    torch.testing.assert_close(region(transposed), f(transposed))
    assert [strides for ((_, strides),) in region.variants] == [(6, 1), (1, 4)]
    torch.testing.assert_close(region(x), f(x))  # the first compilation still serves its strides


@needs_cpu_inductor
def test_a_region_called_with_an_expanded_gradient_compiles_for_its_strides():
    # a training step whose loss is a sum hands the backward a gradient `expand` made (stride 0):
    # its example for the new compilation cannot be a copy into those strides (a conv, batch
    # norm, relu training step's backward region raised and was replanned without inductor)
    def f(g, x):
        return (torch.where(x > 0, g, 0.0) * 3,)

    x = torch.randn(4, 6)
    region = squall_inductor.CompiledRegion(f, [torch.randn(4, 6), x])
    expanded = torch.ones(()).expand(4, 6)
    torch.testing.assert_close(region(expanded, x), f(expanded, x))
    assert [strides for ((_, strides), _) in region.variants] == [(6, 1), (0, 0)]


@needs_cpu_inductor
def test_a_one_unit_region_called_with_other_strides_compiles_for_them():
    # a C++-wrapped region's input check raises RuntimeError, not AssertionError: a training
    # program's backward regions get saved views (attention's q, k, v split from one matmul) where
    # they were compiled for contiguous inputs
    from torch._inductor import config as inductor_config

    def f(x, w):
        return (torch.sigmoid(x @ w + 1),)

    def compile_one_unit(examples):
        with inductor_config.patch({"cpp_wrapper": True}):
            return squall_inductor.regions.compile_with_inductor(f, examples)

    x, w = torch.randn(4, 6), torch.randn(6, 5)
    region = squall_inductor.CompiledRegion(f, [x, w], compile=compile_one_unit)
    torch.testing.assert_close(region(x, w), f(x, w))
    transposed = torch.randn(6, 4).t()
    torch.testing.assert_close(region(transposed, w), f(transposed, w))
    assert [strides for ((_, strides), _) in region.variants] == [(6, 1), (1, 4)]


@needs_cpu_inductor
def test_a_region_called_with_other_sizes_compiles_for_them():
    def f(x):
        return (torch.sigmoid(x * 2 + 1),)

    region = squall_inductor.CompiledRegion(f, [torch.randn(4, 6)])
    for shape in [(3, 6), (4, 7), (4, 6)]:  # (3, 6) has the same strides as (4, 6)
        y = torch.randn(shape)
        torch.testing.assert_close(region(y), f(y))
    assert len(region.variants) == 3


# --- large regions: matmuls, attention, convolutions, embeddings and their epilogues ---------------


class _TinyBlock(torch.nn.Module):
    """An embedding, a layer norm, attention, linears and a convolution: every kind of call a large region takes."""

    def __init__(self):
        super().__init__()
        self.emb, self.ln = torch.nn.Embedding(50, 16), torch.nn.LayerNorm(16)
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)
        self.conv = torch.nn.Conv1d(16, 16, 3, padding=1)

    def forward(self, ids):
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln(x)).view(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(2, 5, 16))
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        return F.gelu(x).sum(-1)


def test_offers_large_regions_then_islands_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("SQUALL_INDUCTOR_MATMULS", raising=False)
    default = InductorExecutor(choices_path=None)
    (large_label, large), (islands_label, islands) = default.offers()
    assert (large_label, islands_label) == ("large regions", "islands") and islands is default
    assert large.name == "inductor" and large.include_matmuls and "prims.matmul" in large.claimed_ops()
    assert large.choices is default.choices and default.offers()[0][1] is large  # made once, one store
    assert [label for label, _ in InductorExecutor(include_matmuls=True, choices_path=None).offers()] == ["large regions"]
    assert [label for label, _ in InductorExecutor(include_matmuls=False, choices_path=None).offers()] == ["islands"]
    assert [label for label, _ in InductorExecutor(autotune=False, choices_path=None).offers()] == ["islands"]
    monkeypatch.setenv("SQUALL_INDUCTOR_MATMULS", "0")
    assert [label for label, _ in InductorExecutor(choices_path=None).offers()] == ["islands"]


@needs_cpu_inductor
def test_a_large_region_takes_a_whole_block_with_attention_and_agrees_with_eager():
    torch.manual_seed(0)
    block, ids = _TinyBlock().eval(), torch.randint(0, 50, (2, 5))
    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    with torch.no_grad():
        jfn = squall.jit(block, executors=[ex, "torch"], wait=True)
        torch.testing.assert_close(jfn(ids), block(ids), atol=1e-5, rtol=1e-5)
        (region,) = squall.last_traces(jfn).plan.regions
        for op in ("embedding", "layer_norm", "linear", "scaled_dot_product_attention", "conv1d", "gelu", "torch.sum"):
            assert any(o.endswith(op) for o in region.ops), (op, region.ops)
        before = _dynamo_activity()
        torch.testing.assert_close(jfn(ids), block(ids), atol=1e-5, rtol=1e-5)
        assert _dynamo_activity() == before


@needs_cpu_inductor
def test_islands_are_not_compiled_when_large_regions_win_by_far_and_the_upgrade_agrees_with_eager(monkeypatch, tmp_path):
    monkeypatch.delenv("SQUALL_INDUCTOR_MATMULS", raising=False)
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))  # no judgement remembered from elsewhere
    judged = []

    def judge(torch_run, fused_run, **kwargs):  # large regions at half the torch plan's time (no timing in tests)
        torch_run(), fused_run()
        judged.append(1)
        return tiers.Verdict("fused", 2e-3, 1e-3, "in context: torch plan 2.000 ms, fused 1.000 ms per call")

    monkeypatch.setattr(tiers, "judge", judge)
    torch.manual_seed(0)
    block, ids = _TinyBlock().eval(), torch.randint(0, 50, (2, 5))
    ex = InductorExecutor(choices_path=None, min_eager_seconds=0)  # both offers: large regions, then islands
    with torch.no_grad():
        jfn = squall.jit(block, executors=[ex, "torch"], wait=True)
        torch.testing.assert_close(jfn(ids), block(ids), atol=1e-5, rtol=1e-5)
        (upgrade,) = squall.upgrades(jfn)
        assert upgrade.status == "upgraded" and len(judged) == 1
        assert "islands not compiled (large regions ran in 0.50x the torch plan's time); kept large regions" in upgrade.reason
        assert upgrade.fused_after is not None and upgrade.fused_after <= upgrade.seconds
        assert ex.outcomes == [] and ex.offers()[0][1].outcomes  # the islands executor compiled nothing
        assert "islands not compiled" in str(squall.explain(jfn, ids))
        torch.testing.assert_close(jfn(ids + 1), block(ids + 1), atol=1e-5, rtol=1e-5)


def test_region_formation_across_matmuls_keeps_unclaimed_calls_outside_without_a_cycle():
    # x -> matmul -> (random draw, not claimed) -> add: the draw splits the chain; a region
    # holding both matmul and add would need the draw inside and outside at once
    def f(x, w):
        h = x @ w
        noise = torch.rand_like(h)
        return torch.tanh(h + noise) @ w, torch.exp(h)

    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    report = squall.explain(squall.jit(f, executors=[ex, "torch"]), x, w)
    assert report.taken_by("torch.rand_like") == ["torch"]
    assert sorted(r.ops for r in report.regions) == [["torch.add", "torch.tanh", "torch.matmul"],
                                                     ["torch.matmul", "torch.exp"]]


@needs_cpu_inductor
def test_a_contiguous_between_a_slice_and_a_view_still_splits_the_region(inductor):
    # squall's values do not model strides, so contiguous() returns its input's proxy; a region
    # spanning it would view a sliced (non-contiguous) tensor and fail to compile
    def shift_labels(labels, w):
        padded = F.pad(labels * w, (0, 1), value=-100.0)
        return padded[..., 1:].contiguous().view(-1) * 2 + 1

    labels, w = torch.randn(2, 8), torch.randn(8)
    jfn = squall.jit(shift_labels, executors=[inductor, "torch"], wait=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no region falls back
        torch.testing.assert_close(jfn(labels, w), shift_labels(labels, w))
    assert not squall.last_traces(jfn).plan.errors


@needs_cpu_inductor
def test_training_with_large_regions_fuses_the_matmuls_of_the_forward_and_the_backward():
    def f(x, w):
        return (torch.tanh(x @ w) * 2 + 1).sum()

    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    x = torch.randn(8, 8)
    w = torch.randn(8, 8, requires_grad=True)
    jfn = squall.jit(f, executors=[ex, "torch"], wait=True)
    (grad,) = torch.autograd.grad(jfn(x, w), w)
    (expected,) = torch.autograd.grad(f(x, w), w)
    torch.testing.assert_close(grad, expected)
    traces = squall.last_traces(jfn)
    forward, backward = traces.plan.regions, traces.backward.plan.regions
    assert any("torch.matmul" in r.ops for r in forward), forward
    assert any(any("matmul" in op for op in r.ops) for r in backward), backward


@needs_cpu_inductor
def test_a_large_region_spans_contiguous_calls_and_an_integer_gather_and_agrees_with_eager():
    # Swin's window attention: windows made contiguous before a view, a position-bias table gathered
    # by an index tensor; each split its block into six regions, with Python between them
    def f(x, w, table, index):
        first = x.contiguous()  # the region's first call reads its input before returning it
        h = (first @ w).transpose(0, 1).contiguous().view(-1)
        return (h + table[index]).view(4, 4) @ w

    ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
    x, w, table = torch.randn(4, 4), torch.randn(4, 4), torch.randn(16)
    index = torch.randperm(16)
    jfn = squall.jit(f, executors=[ex, "torch"], wait=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no region falls back
        torch.testing.assert_close(jfn(x, w, table, index), f(x, w, table, index))
    (region,) = squall.last_traces(jfn).plan.regions
    assert region.ops.count("torch.Tensor.contiguous") == 2 and "torch.Tensor.__getitem__" in region.ops, region.ops
    assert len(region.inputs) == 4  # x too, though the call that reads it returns it under its own name


@needs_cpu_inductor
def test_a_region_inductor_cannot_compile_for_new_strides_runs_its_torch_calls_for_them(monkeypatch):
    from squall_inductor import regions

    fn = lambda x: (torch.sin(x) * 3 + 1,)  # noqa: E731
    region = regions.CompiledRegion(fn, [torch.randn(6, 5)])

    def cannot(*args):
        raise ValueError("inductor cannot lay this out")

    monkeypatch.setattr(regions, "compile_with_inductor", cannot)
    transposed = torch.randn(5, 6).t()
    with pytest.warns(squall.SquallWarning, match="could not compile a region for its inputs' strides"):
        (out,) = region(transposed)
    torch.testing.assert_close(out, fn(transposed)[0])
    assert region(torch.randn(6, 5))[0].shape == (6, 5)  # its first layout still runs compiled


@needs_cpu_inductor
def test_a_later_compilation_computing_other_values_than_the_regions_torch_calls_is_not_used(monkeypatch):
    # a region's first compilation is checked beside its torch calls where it is compiled; one made
    # later for other strides serves calls nobody compares, so it is checked before it serves one.
    # Here the later one is compiled with inductor's default numerics (no emulated rounding: it keeps
    # float32 values where eager rounds to bfloat16)
    from squall_inductor import regions

    fn = lambda x: ((x * 3).to(torch.bfloat16).float() * 2 + 1,)  # noqa: E731
    region = regions.CompiledRegion(fn, [torch.randn(64, 32)])
    monkeypatch.setitem(regions.EAGER_NUMERICS, "emulate_precision_casts", False)
    transposed = torch.randn(32, 64).t()
    with pytest.warns(squall.SquallWarning, match="strides .inductor's compilation computes other values than its torch calls"):
        (out,) = region(transposed)
    torch.testing.assert_close(out, fn(transposed)[0], rtol=0, atol=0)
    x = torch.randn(64, 32)
    torch.testing.assert_close(region(x)[0], fn(x)[0], rtol=0, atol=0)  # its first compilation rounds as eager


@needs_cpu_inductor
def test_a_reshape_that_make_fx_recorded_as_a_view_compiles_where_inductor_lays_its_input_out_otherwise():
    """BLOOM's attention: a cat of an empty cache and a transposed key, then reshape. make_fx records
    the reshape as a view of the cat's fake layout; inductor's cat has another, where a view fails."""

    def f(x):
        key = torch.cat([torch.tensor([]), x.transpose(1, 2)], dim=-2)
        return torch.tanh(key.reshape(8, -1, 8)) * 2.0 + 1.0, key

    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    x = torch.randn(2, 8, 4, 8)
    jfn = squall.jit(f, executors=[ex, "torch"], wait=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # the region does not fall back to torch
        torch.testing.assert_close(jfn(x), f(x))
    (region,) = squall.last_traces(jfn).plan.regions
    assert "torch.Tensor.reshape" in region.ops and "torch.cat" in region.ops, region.ops


# --- nll_loss's backward: its scatter claimed there, and only there ----------------------------------


def test_nll_loss_backward_is_claimed_with_its_scatter_but_a_scatter_alone_is_not():
    ex = InductorExecutor(choices_path=None)
    with tracing(TracingContext()):
        logp, target = _proxy((8, 16)), _proxy((8,), dtype=torch.int64)
        grad, total = _proxy(()), _proxy(())
        ctx = TracingContext()
        with tracing(ctx):
            kernels.nll_loss_backward(grad, logp, target, None, 1, -1, total)
        nll_backward = ctx.scopes[0][-1]
        index = _proxy((8, 1), dtype=torch.int64)
        scatter = _call("torch.scatter", logp, 1, index, _proxy((8, 1)))
    impl, reason = ex.offer(nll_backward)
    assert (impl is not None) is HAS_CPU_BACKEND, reason
    # a scatter elsewhere may write one place twice, where inductor and torch may keep different values
    impl, reason = ex.offer(scatter)
    assert impl is None and "prims.scatter" in reason, reason


@needs_cpu_inductor
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropys_backward_region_takes_nll_loss_backward_and_agrees_with_eager(inductor, weighted):
    # as nanoGPT: logits and loss returned, only the loss backpropagated; ignored targets and class weights
    weight = torch.rand(16) + 0.5 if weighted else None

    def f(x, w, target):
        logits = x @ w
        return logits, F.cross_entropy(logits, target, weight=weight, ignore_index=3)

    x, w = torch.randn(8, 8), torch.randn(8, 16, requires_grad=True)
    target = torch.tensor([0, 3, 5, 15, 3, 7, 1, 2])
    jfn = squall.jit(f, executors=[inductor, "torch"], wait=True)
    logits, loss = jfn(x, w, target)
    (grad,) = torch.autograd.grad(loss, w)
    expected_logits, expected_loss = f(x, w, target)
    (expected,) = torch.autograd.grad(expected_loss, w)
    torch.testing.assert_close((logits, loss, grad), (expected_logits, expected_loss, expected))
    traces = squall.last_traces(jfn)
    backward_regions = [r for t in traces if t.name.startswith("backward_") and t.plan is not None for r in t.plan.regions]
    assert any("aten.nll_loss_backward" in r.ops for r in backward_regions), backward_regions
