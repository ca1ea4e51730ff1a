"""Fused plans agree with eager where values, dtypes and layouts are awkward (found by a differential
hunt over inductor regions forced in with `wait=True`): each test fails on the code before its fix."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import squall
from squall.extend import resolve_operation
from squall.frontend.tracing import TracingContext
from squall.proxies import TensorProxy, tracing

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import InductorExecutor  # noqa: E402

HAS_CPU_BACKEND = squall_inductor.cpp_compiler() is not None
needs_cpu_inductor = pytest.mark.skipif(not HAS_CPU_BACKEND, reason="no C++ compiler for inductor's CPU backend (g++ or clang++)")


def _call(op, *args, **kwargs):
    ctx = TracingContext()
    with tracing(ctx):
        resolve_operation(op)(*args, **kwargs)
    return ctx.scopes[0][-1]


def _div_call(a, b, rounding_mode):
    return _call("torch.div", a, b, rounding_mode=rounding_mode)


def test_integer_division_toward_zero_by_a_tensor_is_not_claimed():
    # inductor's CPU kernel for it divides unchecked: a zero divisor killed the process (SIGFPE)
    ex = InductorExecutor(choices_path=None)
    with tracing(TracingContext()):
        i, j = TensorProxy(shape=(4,), dtype=torch.int64, device="cpu"), TensorProxy(shape=(4,), dtype=torch.int32, device="cpu")
        x = TensorProxy(shape=(4,), dtype=torch.float32, device="cpu")
    for bsym in (_div_call(i, j, "trunc"), _div_call(j, j, "trunc"), _div_call(i, 0, "trunc")):
        impl, reason = ex.offer(bsym)
        assert impl is None and "zero divisor" in reason, reason
    # a nonzero number, floats, and floor division (whose kernel checks) stay claimed
    for bsym in (_div_call(i, 3, "trunc"), _div_call(x, x, "trunc"), _div_call(i, j, "floor")):
        impl, reason = ex.offer(bsym)
        assert (impl is not None) is HAS_CPU_BACKEND, reason


def test_floating_point_floor_division_and_remainder_are_not_claimed():
    # inductor computes a - floor(a / b) * b in the dtype; eager's kernels are exact (from fmod)
    ex = InductorExecutor(choices_path=None)
    with tracing(TracingContext()):
        x, y = TensorProxy(shape=(4,), dtype=torch.float32, device="cpu"), TensorProxy(shape=(4,), dtype=torch.float16, device="cpu")
        i = TensorProxy(shape=(4,), dtype=torch.int64, device="cpu")
    for bsym in (_call("torch.remainder", x, 0.7), _call("torch.remainder", y, y), _call("torch.floor_divide", x, x),
                 _div_call(x, 2.5, "floor")):
        impl, reason = ex.offer(bsym)
        assert impl is None and "floating-point floor division or remainder" in reason, reason
    # fmod (inductor's is eager's), and integers (exact either way) stay claimed
    for bsym in (_call("torch.fmod", x, 0.7), _call("torch.remainder", i, 3), _call("torch.floor_divide", i, i)):
        impl, reason = ex.offer(bsym)
        assert (impl is not None) is HAS_CPU_BACKEND, reason


@needs_cpu_inductor
def test_a_fused_program_taking_a_remainder_of_large_values_agrees_with_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)

    def wrap_phase(t):
        return (t % 0.7) * 2 + 1

    jf = squall.jit(wrap_phase, executors=[ex, "torch"], wait=True)
    t = torch.randn(64)  # the judge runs on this first call's values, where the two agree
    torch.testing.assert_close(jf(t), wrap_phase(t))
    t = torch.linspace(-2e5, 3e5, 64)
    torch.testing.assert_close(jf(t), wrap_phase(t))  # inductor's remainder was off by up to 0.02 here


@needs_cpu_inductor
def test_a_fused_region_rounds_to_bfloat16_and_float16_where_eager_does(tmp_path, monkeypatch):
    # inductor's default keeps float32 values where eager rounds: a down-then-up cast was dropped
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)

    def fake_quantize(x):
        q = (x * 3).to(torch.bfloat16).float()
        return q * 2 + 1, ((x.half() * 3).exp() + 1).float()

    jf = squall.jit(fake_quantize, executors=[ex, "torch"], wait=True)
    x = torch.zeros(64)  # a warm-up call of zeros: the judge sees values that round exactly
    torch.testing.assert_close(jf(x), fake_quantize(x), rtol=0, atol=0)
    assert squall.last_traces(jf).plan.regions
    x = torch.randn(64)
    torch.testing.assert_close(jf(x), fake_quantize(x), rtol=0, atol=0)


_TRUNCATING_PROGRAM = textwrap.dedent("""
    import tempfile, os
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
    import torch, squall
    from squall_inductor import InductorExecutor
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    def f(a, b):
        return torch.div(a * 3, b, rounding_mode="trunc") * 2 + (a - b).abs()
    a, b = torch.tensor([5, -7, 3, 4, 9, -2]), torch.tensor([2, 3, -1, 1, 4, 5])
    jf = squall.jit(f, executors=[ex, "torch"], wait=True)
    assert torch.equal(jf(a, b), f(a, b))
    b[1] = 0
    try:
        jf(a, b)
    except RuntimeError as e:
        assert "ZeroDivisionError" in str(e), e
        print("raised as eager does")
""")


@needs_cpu_inductor
def test_a_fused_program_dividing_integers_toward_zero_raises_on_a_zero_divisor_as_eager_does(tmp_path):
    done = subprocess.run([sys.executable, "-c", _TRUNCATING_PROGRAM], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "SQUALL_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[-2] == "raised as eager does"


def test_a_regions_torch_calls_read_a_layer_norms_statistics_laid_out_channels_last():
    # a fused forward returns the statistics its backward alone reads in the layout its kernels chose
    # (channels-last, around convnextv2's convolutions); a backward region running its torch calls (a
    # symbolic region while its compilation for that layout is under way) handed them to aten's layer
    # norm backward, which reads them in memory order: the stem's gradients were off by half their size
    from squall_inductor.regions import load_region, region_function, region_payload

    from squall.extend import FusionRegion

    norm = torch.nn.LayerNorm(8)
    traced = squall.jit(norm, executors=["torch"])
    traced(torch.randn(3, 5, 5, 8)).sum().backward()
    call = next(b for t in squall.last_traces(traced) for b in t.bsyms if b.sym.id == "aten.native_layer_norm_backward")
    region = FusionRegion("inductor", [call], [call], list(call.input_proxies()), [p for p in call.output_proxies() if p is not None])
    fn, source = region_function(region)

    aten = torch.ops.aten
    x, dy = torch.randn(3, 5, 5, 8), torch.randn(3, 5, 5, 8)
    _, mean, rstd = aten.native_layer_norm(x, [8], norm.weight.detach(), norm.bias.detach(), 1e-5)
    grad_out, saved_input, _, saved_mean, saved_rstd, weight, bias, mask = call.args
    expected = [g for g in aten.native_layer_norm_backward(dy, x, [8], mean, rstd, norm.weight.detach(), norm.bias.detach(), mask)
                if g is not None]
    assert len(expected) == len(region.outputs) == 2  # the weight's and the bias's (the input requires none)
    values = {grad_out.name: dy, saved_input.name: x, weight.name: norm.weight.detach(), bias.name: norm.bias.detach(),
              saved_mean.name: mean.contiguous(memory_format=torch.channels_last),
              saved_rstd.name: rstd.contiguous(memory_format=torch.channels_last)}
    args = [values[p.name] for p in region.inputs]
    for run in (fn, load_region(region_payload(fn, source))):  # here, and as the compile worker rebuilds it
        got = run(*args)
        assert len(got) == 2
        for g, want in zip(got, expected):
            torch.testing.assert_close(g, want)


@needs_cpu_inductor
@pytest.mark.parametrize("dynamic", [False, True])  # (symbolic: the region's compilation is checked as it is made)
def test_a_region_computing_other_values_than_its_torch_calls_is_not_used_where_the_judge_cannot_compare(tmp_path, monkeypatch, dynamic):
    # the judge compares a program drawing random numbers by its NaNs alone (a fused kernel may draw
    # others than torch's), so each region is compared with its own torch calls as it is compiled.
    # Here inductor compiles with its default numerics (no emulated rounding: a region then keeps
    # float32 values where eager rounds to bfloat16), in this process, where the setting is changed
    from squall_inductor import regions

    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SQUALL_INDUCTOR_SUBPROCESS", "0")
    monkeypatch.setitem(regions.EAGER_NUMERICS, "emulate_precision_casts", False)
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)

    def noisy_quantize(x):
        q = (x * 3).to(torch.bfloat16).float() * 2 + 1
        return torch.nn.functional.dropout(q, 0.5), q.exp()

    jf = squall.jit(noisy_quantize, executors=[ex, "torch"], wait=True, dynamic=dynamic)
    x = torch.randn(256)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", squall.SquallWarning)
        for _ in range(2):  # the call that upgrades, and one on the plan it installed
            torch.manual_seed(0)
            got = jf(x)
            torch.manual_seed(0)
            torch.testing.assert_close(got, noisy_quantize(x))  # (a region of exp alone may be kept: it rounds as eager's, within an ulp)
    assert not [w for w in caught if "could not compile" in str(w.message)], caught  # declined with its reason, not a compile failure
    (upgrade,) = squall.upgrades(jf)
    assert "computes other values than its torch calls on example inputs" in str(squall.explain(jf)), upgrade


def test_the_region_check_compares_an_output_drawn_values_overflowed_where_both_runs_are_finite():
    from squall_inductor.regions import unlike_torch_calls

    expected = torch.tensor([1.0, float("nan"), 3.0, float("inf")])
    torch_calls = lambda x: (expected.clone(), x)  # noqa: E731 - the region's torch calls, returning the input too
    x = torch.tensor([0.5, -1.0, 2.0, -0.3])
    # NaN in a few more places in one run (drawn values overflowed in both): compared where both are finite
    assert unlike_torch_calls(torch_calls, [x], (torch.tensor([1.0, float("nan"), float("nan"), 5.0]), x)) == ""
    why = unlike_torch_calls(torch_calls, [x], (torch.tensor([1.5, float("nan"), 3.0, float("inf")]), x))
    assert "output 0: differs by up to 0.5" in why, why
    # an output the torch calls keep finite is compared everywhere: NaN where they have none is refused
    why = unlike_torch_calls(torch_calls, [x], (expected, torch.where(x > 0, float("nan"), x)))
    assert "output 1: NaNs or infinities where the torch plan has none" in why, why


def test_the_region_check_lets_rounding_explain_a_difference_where_the_torch_calls_are_ill_conditioned():
    # drawn values make a long backward chain ill-conditioned (biogpt's: gradients of 8e13, 0.13% apart):
    # where the torch calls' own results move by a tenth of the distance when their inputs change by
    # a few rounding errors, rounding explains it, as the judge decides for a whole plan
    from squall_inductor.regions import unlike_torch_calls

    x, y = torch.ones(64) + 1e-6 * torch.arange(64), torch.ones(64)
    cancelling = lambda x, y: ((x - y) * 1e6,)  # noqa: E731 - a difference of nearly equal values
    scaling = lambda x, y: (x * 2,)  # noqa: E731
    off = (cancelling(x, y)[0] * 1.05,)  # 5% of the largest value apart
    assert unlike_torch_calls(cancelling, [x, y], off) == ""
    # one ill-conditioned output excuses no other output's difference
    both = lambda x, y: (*cancelling(x, y), *scaling(x, y))  # noqa: E731
    why = unlike_torch_calls(both, [x, y], (off[0], scaling(x, y)[0] * 1.05))
    assert "computes other values than its torch calls" in why, why  # (naming the first output that differs)
    assert unlike_torch_calls(both, [x, y], (off[0], scaling(x, y)[0])) == ""
    # never a difference in shape (or dtype, integer values, where NaNs are), however ill-conditioned
    why = unlike_torch_calls(cancelling, [x, y], (cancelling(x, y)[0][:32],))
    assert "output 0 is torch.float32 (32,) on cpu where the torch plan's is torch.float32 (64,)" in why, why
    why = unlike_torch_calls(scaling, [x, y], (scaling(x, y)[0] * 1.05,))
    assert "computes other values than its torch calls" in why, why
