"""squall-apex-xentropy: discovery, availability, the checker, the transform, and (with a GPU) apex itself.

Everything that does not need apex or CUDA runs everywhere; the GPU tests at the end
skip, naming what is missing.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import squall
from squall.compiler.codegen import generate
from squall.compiler.passes import free_after_last_use
from squall.compiler.planner import plan
from squall.extend import assume_available
from squall.frontend.tracing import InputBinding, TracingContext, trace_program
from squall.market.plugins import Marketplace
from squall.proxies import TensorProxy, tracing

from squall_apex_xentropy import availability_from, cross_entropy_checker, make_executor
from squall_apex_xentropy.executor import _reduce_loss

DIST = "squall-apex-xentropy"
HAS_CUDA = torch.cuda.is_available()
HAS_APEX = importlib.util.find_spec("xentropy_cuda") is not None
needs_gpu = [
    pytest.mark.skipif(not HAS_CUDA, reason="CUDA is not available"),
    pytest.mark.skipif(not HAS_APEX, reason="NVIDIA apex's xentropy_cuda extension is not installed"),
]


def _installed() -> bool:
    try:
        importlib.metadata.distribution(DIST)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


needs_install = pytest.mark.skipif(not _installed(), reason=f"{DIST} is not pip-installed (pip install -e plugins/apex_xentropy)")


def _cuda(*shape, dtype=torch.float32):
    return TensorProxy(shape=shape, dtype=dtype, device="cuda")


# --- installation, discovery, availability --------------------------------------------------


@needs_install
def test_discovered_through_its_entry_point():
    market = Marketplace()
    ex = market.get("apex_xentropy")
    assert ex is not None, [str(e) for e in market.load_errors]
    assert (ex.distribution, market.plugin_of("apex_xentropy")) == (DIST, "apex_xentropy")
    assert ex.version == importlib.metadata.version(DIST)
    assert "torch.nn.functional.cross_entropy" in ex.claimed_ops()
    assert {"apex_xentropy.xentropy_forward", "apex_xentropy.xentropy_backward", "apex_xentropy.reduce_loss"} <= set(ex.claimed_ops())


@needs_install
def test_squall_executors_lists_it_with_its_availability():
    done = subprocess.run([sys.executable, "-m", "squall", "executors", "--json"], capture_output=True, text=True, timeout=120)
    rows = {r["name"]: r for r in json.loads(done.stdout)["executors"]}
    row = rows["apex_xentropy"]
    assert row["distribution"] == DIST
    assert row["available"] is (HAS_APEX and HAS_CUDA)
    if not HAS_APEX:
        assert "xentropy_cuda" in row["reason"] and "APEX_XENTROPY=1" in row["reason"]
    elif not HAS_CUDA:
        assert "CUDA is not available" in row["reason"]


def test_availability_names_what_is_missing():
    missing = availability_from(has_extension=False, has_apex=False, has_cuda=True)
    assert not missing and "module 'xentropy_cuda') is not installed" in missing.reason
    unbuilt = availability_from(has_extension=False, has_apex=True, has_cuda=True)
    assert not unbuilt and "apex is installed without its xentropy extension" in unbuilt.reason
    no_gpu = availability_from(has_extension=True, has_apex=True, has_cuda=False)
    assert not no_gpu and no_gpu.reason == "CUDA is not available (no CUDA device)"
    assert availability_from(has_extension=True, has_apex=True, has_cuda=True)
    # and the executor asks exactly these questions of this machine
    assert bool(make_executor().availability()) is (HAS_APEX and HAS_CUDA)


# --- the checker, with CUDA-device proxies ------------------------------------------------------


ACCEPTED = [
    ("float32 mean", dict(), {}),
    ("float16", dict(dtype=torch.float16), {}),
    ("bfloat16", dict(dtype=torch.bfloat16), {}),
    ("none", dict(), {"reduction": "none"}),
    ("sum", dict(), {"reduction": "sum"}),
    ("ignore_index", dict(), {"ignore_index": 3}),
    ("label smoothing", dict(), {"label_smoothing": 0.1}),
    ("full smoothing", dict(), {"label_smoothing": 1.0}),
    ("legacy reduce=False", dict(), {"reduce": False}),
]

DECLINED = [
    ("cpu logits", dict(device="cpu"), {}),
    ("3-d logits", dict(shape=(2, 5, 7)), {}),
    ("1-d logits", dict(shape=(7,), target_shape=()), {}),
    ("float64", dict(dtype=torch.float64), {}),
    ("int32 targets", dict(target_dtype=torch.int32), {}),
    ("probability targets", dict(target_shape=(4, 7), target_dtype=torch.float32), {}),
    ("class weights", dict(), {"weight": "w"}),
    ("no rows", dict(shape=(0, 7), target_shape=(0,)), {}),
    ("no classes", dict(shape=(4, 0)), {}),
    ("bad reduction", dict(), {"reduction": "max"}),
    ("smoothing above 1", dict(), {"label_smoothing": 1.5}),
]


def _check(dtype=torch.float32, device="cuda", shape=(4, 7), target_shape=None, target_dtype=torch.int64, **kwargs):
    with tracing(TracingContext()):
        logits = TensorProxy(shape=shape, dtype=dtype, device=device)
        target = TensorProxy(shape=target_shape if target_shape is not None else shape[:1], dtype=target_dtype, device=device)
        if kwargs.get("weight") == "w":
            kwargs["weight"] = _cuda(shape[-1])
        return cross_entropy_checker(logits, target, **kwargs)


@pytest.mark.parametrize("case", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_checker_accepts_what_the_kernel_computes_like_pytorch(case):
    _, shape_args, kwargs = case
    assert _check(**shape_args, **kwargs) is True


@pytest.mark.parametrize("case", DECLINED, ids=[c[0] for c in DECLINED])
def test_checker_declines_the_rest(case):
    _, shape_args, kwargs = case
    assert _check(**shape_args, **kwargs) is False


# --- the execution transform and the plan -----------------------------------------------------


def _trace_cuda(fn, *proxies_spec):
    """Trace `fn` on CUDA-device stand-ins, as squall.jit would on CUDA tensors (no GPU needed)."""
    stand_ins = tuple(TensorProxy(f"a{i}", shape=s, dtype=d, device="cuda") for i, (s, d) in enumerate(proxies_spec))
    return trace_program(fn, stand_ins, {})[0]


def test_planned_as_apex_calls_where_it_is_available():
    # planned (not run) as on a machine with apex and a GPU: the real checker and transform decide
    ex = make_executor()
    torch_ex = squall.market.plugins.default_marketplace().get("torch")
    fn = lambda logits, target: F.cross_entropy(logits, target, ignore_index=-1, label_smoothing=0.1)
    trace = _trace_cuda(fn, ((8, 50), torch.float16), ((8,), torch.int64))
    with assume_available(ex):
        result = plan(trace, [ex, torch_ex])
    ids = [b.sym.id for b in result.bsyms]
    assert ids == ["apex_xentropy.xentropy_forward", "apex_xentropy.reduce_loss"]
    forward, reduce_loss = result.bsyms
    assert forward.args[2:] == (0.1, -1)
    assert reduce_loss.args[2:] == (-1, "mean", torch.float16)
    assert reduce_loss.output.dtype == torch.float16 and reduce_loss.output.shape == ()
    assert result.plan.decisions[0].executor == "apex_xentropy"
    bindings = [InputBinding(p, ("args", i)) for i, p in enumerate(trace.inputs)]
    source = generate(free_after_last_use(result), bindings, takes_params=False, nargs=2, takes_kwargs=False).source
    assert "= apex_xentropy_xentropy_forward(a0, a1, 0.1, -1)" in source
    assert "apex_xentropy_reduce_loss(" in source and "'mean', torch.float16)" in source

    # a call the checker declines goes on to torch, with the reason recorded
    trace = _trace_cuda(lambda x, t: F.cross_entropy(x, t), ((8, 50), torch.float64), ((8,), torch.int64))
    with assume_available(ex):
        decision = plan(trace, [ex, torch_ex]).plan.decisions[0]
    assert decision.executor == "torch" and decision.declined == [("apex_xentropy", "checker declined")]


def test_reduce_loss_follows_pytorch():
    logits, target = torch.randn(6, 5), torch.tensor([0, 4, -100, 2, -100, 1])
    rows = F.cross_entropy(logits, target, reduction="none")  # ignored rows are 0, as apex_xentropy's forward leaves them
    for reduction in ("none", "sum", "mean"):
        expected = F.cross_entropy(logits.half(), target, reduction=reduction)
        got = _reduce_loss(rows, target, -100, reduction, torch.float16)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, atol=1e-3, rtol=1e-3)
    all_ignored = torch.full((6,), -100)
    assert torch.isnan(_reduce_loss(torch.zeros(6), all_ignored, -100, "mean", torch.float32))
    assert torch.isnan(F.cross_entropy(logits, all_ignored))


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5, 1.0])
def test_apex_label_smoothing_is_pytorchs(smoothing):
    # the per-row value xentropy_kernel.cu computes, written in torch: it is PyTorch's definition
    x = torch.randn(9, 13, dtype=torch.float64)
    target = torch.tensor([0, 12, 5, -100, 3, 3, -100, 7, 1])
    lse = torch.logsumexp(x, dim=1)
    safe = target.masked_fill(target == -100, 0)
    apex_rows = (lse - x.mean(dim=1)) * smoothing - (x.gather(1, safe[:, None])[:, 0] - lse) * (1 - smoothing)
    apex_rows = apex_rows.masked_fill(target == -100, 0)
    for reduction in ("none", "sum", "mean"):
        expected = F.cross_entropy(x, target, reduction=reduction, label_smoothing=smoothing)
        torch.testing.assert_close(_reduce_loss(apex_rows, target, -100, reduction, torch.float64), expected)


# --- CPU programs are unaffected ----------------------------------------------------------------


def test_cpu_program_unaffected_and_unavailable_executor_passed_over_with_reason():
    logits, target = torch.randn(4, 7), torch.tensor([1, 0, 6, 2])
    fn = lambda x, t: F.cross_entropy(x, t)
    jfn = squall.jit(fn)
    torch.testing.assert_close(jfn(logits, target), fn(logits, target))
    assert "apex" not in squall.last_traces(jfn).source

    if HAS_APEX and HAS_CUDA:
        named = squall.jit(fn, executors=["apex_xentropy"])
        why = "checker declined"  # available, but these are CPU tensors
    else:
        with pytest.warns(Warning, match="executor 'apex_xentropy' is unavailable here"):
            named = squall.jit(fn, executors=["apex_xentropy"])
        why = "unavailable: " + make_executor().availability().reason
    report = squall.explain(named, logits, target)
    top = next(r for r in report.rows if r.op == "torch.nn.functional.cross_entropy")
    assert ("apex_xentropy", why) in top.declined
    torch.testing.assert_close(named(logits, target), fn(logits, target))


# --- on a GPU with apex -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@needs_gpu[0]
@needs_gpu[1]
def test_apex_matches_pytorch_on_gpu(dtype, reduction, smoothing):
    logits = torch.randn(64, 1000, device="cuda", dtype=dtype)
    target = torch.randint(0, 1000, (64,), device="cuda")
    target[::7] = -1
    fn = lambda x, t: F.cross_entropy(x, t, ignore_index=-1, reduction=reduction, label_smoothing=smoothing)
    jfn = squall.jit(fn, executors=["apex_xentropy"])
    got = jfn(logits, target)
    assert "apex_xentropy_xentropy_forward" in squall.last_traces(jfn).source
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(got, fn(logits.float(), target).to(dtype), **tol)


@needs_gpu[0]
@needs_gpu[1]
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_registered_backward_matches_autograd_on_gpu(dtype):
    ex = make_executor()
    forward = ex.implementations["apex_xentropy.xentropy_forward"].impl
    backward = ex.implementations["apex_xentropy.xentropy_backward"].impl
    logits = torch.randn(32, 300, device="cuda", dtype=dtype, requires_grad=True)
    target = torch.randint(0, 300, (32,), device="cuda")
    target[::5] = -100
    grad_rows = torch.rand(32, device="cuda")
    losses, lse = forward(logits.detach(), target, 0.1, -100)
    got = backward(grad_rows, logits.detach(), lse, target, 0.1, -100)
    expected_losses = F.cross_entropy(logits.float(), target, reduction="none", label_smoothing=0.1)
    (expected,) = torch.autograd.grad((expected_losses * grad_rows).sum(), logits)
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=2e-3, rtol=2e-2)
    torch.testing.assert_close(losses, expected_losses.detach(), **tol)
    torch.testing.assert_close(got, expected, **tol)



# --- training: apex's fused backward -------------------------------------------------------------


def test_training_plans_apex_forward_and_its_fused_backward_for_a_cuda_trace():
    from squall.compiler.pipeline import compile_program

    ex = make_executor()
    torch_ex = squall.market.plugins.default_marketplace().get("torch")
    fn = lambda logits, target: F.cross_entropy(logits, target, ignore_index=-1, label_smoothing=0.1)
    logits = TensorProxy("logits", shape=(8, 50), dtype=torch.float16, device="cuda", requires_grad=True)
    target = TensorProxy("target", shape=(8,), dtype=torch.int64, device="cuda")
    with assume_available(ex), torch.enable_grad():
        compilation = compile_program(fn, (logits, target), {}, executors=[ex, torch_ex], generate_code=False)
    forward_ids = [b.sym.id for b in compilation.planned.bsyms]
    backward_ids = [b.sym.id for b in compilation.backward.bsyms]
    assert forward_ids == ["apex_xentropy.xentropy_forward", "apex_xentropy.reduce_loss"]
    assert backward_ids == ["apex_xentropy.reduce_loss_backward", "apex_xentropy.xentropy_backward"]
    # the backward reads the forward's log-sum-exp, the logits and the targets: nothing else is saved
    assert {p.dtype for p in compilation.backward.inputs[:-1]} == {torch.float32, torch.float16, torch.int64}
    assert len(compilation.backward.inputs) == 4  # three saved, one cotangent
    grad_input = compilation.backward.bsyms[-1].output
    assert grad_input.shape == (8, 50) and grad_input.dtype == torch.float16


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reduce_loss_backward_is_the_gradient_of_reduce_loss(reduction):
    from squall_apex_xentropy.executor import _reduce_loss_backward

    losses = torch.rand(6, dtype=torch.float32, requires_grad=True)
    target = torch.tensor([0, 3, -1, 2, -1, 1])
    out = _reduce_loss(losses, target, -1, reduction, torch.float32)
    grad_out = torch.rand_like(out)
    (expected,) = torch.autograd.grad(out, losses, grad_out)
    actual = _reduce_loss_backward(grad_out, target, -1, reduction)
    # the kernel zeroes ignored rows itself; compare the rows it keeps
    kept = target != -1
    torch.testing.assert_close(actual[kept], expected[kept])
