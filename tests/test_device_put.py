"""Moving tensors between devices inside a compiled program: `prims.device_put`, what reaches it
(Tensor.to, .cpu, .cuda, .type, type_as, as_tensor, a CPU scalar beside another device's
tensors), its gradient, and fusion executors leaving it alone.

Without a GPU the second device is "meta": eager moves there too, and a meta tensor has a
shape, a dtype and a device but no values. The CUDA cases skip without CUDA.
"""
from __future__ import annotations

import re

import pytest
import torch

import squall
from opinfos import prims_only_executor
from squall import prims
from squall.frontend.tracing import TracingContext
from squall.market.fusion import FusionExecutor
from squall.market.plugins import default_marketplace
from squall.market.torch_executor import make_executor
from squall.proxies import TensorProxy, tracing

HAS_CUDA = torch.cuda.is_available()
CONFIGS = {"torch": make_executor, "decomposed": prims_only_executor}


def _same_metadata(actual, expected) -> None:
    for a, e in zip(actual, expected, strict=True):
        assert (a.shape, a.dtype, a.device, a.requires_grad) == (e.shape, e.dtype, e.device, e.requires_grad)


def _traced(fn) -> str:
    return str(squall.last_traces(fn)[0])


def test_device_put_gives_the_same_tensor_on_the_new_device():
    with tracing(TracingContext()):
        a = TensorProxy(shape=(2, 3), dtype=torch.bfloat16, device="cpu", requires_grad=True)
        out = prims.device_put(a, torch.device("meta"), non_blocking=False)
        assert (out.shape, out.dtype, out.device, out.requires_grad) == (a.shape, a.dtype, torch.device("meta"), True)
        with pytest.raises(TypeError, match="expects a torch.device, got 'meta'"):
            prims.device_put(a, "meta", non_blocking=False)
        with pytest.raises(TypeError, match="expects a tensor, got float"):
            prims.device_put(1.0, torch.device("meta"), non_blocking=False)
        with pytest.raises(TypeError, match="non_blocking to be a bool"):
            prims.device_put(a, torch.device("meta"), non_blocking=None)
        with pytest.raises(ValueError, match="with an index, got cuda"):
            prims.device_put(a, torch.device("cuda"), non_blocking=False)
        with pytest.raises(ValueError, match="on cpu already"):
            prims.device_put(a, torch.device("cpu"), non_blocking=False)


@pytest.mark.parametrize("config", CONFIGS)
def test_moves_are_traced_as_device_put_and_match_eager(config):
    def program(x, other):
        return (
            x.to("meta"),
            (x * 2).to(torch.device("meta"), torch.float64),
            x.to(other),  # other's device and dtype
            x.type_as(other),
            torch.as_tensor(x, device="meta"),
            torch.full((2,), x[0, 0], device="meta"),
        )

    x, other = torch.randn(3, 4), torch.ones(2, dtype=torch.int64, device="meta")
    jfn = squall.jit(program, executors=[CONFIGS[config]()])
    _same_metadata(jfn(x, other), program(x, other))
    assert _traced(jfn).count("prims.device_put(") == 6


def test_calls_that_stay_on_the_device_return_the_input_and_record_no_move():
    def program(x):
        same = (x.to("cpu"), x.cpu(), x.to(x), x.type_as(x), x.type(torch.FloatTensor), torch.as_tensor(x, device="cpu"))
        return all(y is x for y in same)

    x = torch.randn(3)
    jfn = squall.jit(program)
    assert jfn(x) is True and program(x) is True
    assert "device_put" not in _traced(jfn)


@pytest.mark.parametrize("config", CONFIGS)
def test_a_copy_on_the_same_device_is_a_new_tensor_with_eager_gradients(config):
    def program(x):
        y = x.to("cpu", copy=True)
        return y * 3, y

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    jfn = squall.jit(program, executors=[CONFIGS[config]()])
    got, want = jfn(x), program(x)
    torch.testing.assert_close(got, want)
    assert got[1] is not x and got[1].data_ptr() != x.data_ptr()
    (g,) = torch.autograd.grad(got[0].sum() + got[1].sum(), x)
    (e,) = torch.autograd.grad(want[0].sum() + want[1].sum(), x)
    torch.testing.assert_close(g, e)


@pytest.mark.parametrize("config", CONFIGS)
def test_the_gradient_moves_back_to_the_input_device(config):
    def program(x):
        return (x * 2).to("meta", torch.float64).sin()

    x = torch.randn(3, 4, requires_grad=True)
    jfn = squall.jit(program, executors=[CONFIGS[config]()])
    out = jfn(x)
    _same_metadata([out], [program(x)])
    backward = str(squall.last_traces(jfn)[2])
    assert "prims.device_put(" in backward and "torch.device('cpu')" in backward
    if config == "torch":  # (a plugin executor that raises is taken for a faulty one and dropped)
        # the cotangent really crosses back: from meta, as in eager, there is nothing to copy
        with pytest.raises(NotImplementedError, match="meta tensor"):
            program(x).sum().backward()
        with pytest.raises(NotImplementedError, match="meta tensor"):
            out.sum().backward()


@pytest.mark.parametrize("config", CONFIGS)
def test_a_cpu_scalar_tensor_joins_tensors_of_another_device(config):
    def program(m, s):
        return m + s, s * m, torch.where(m > 0, m, s), torch.lerp(m, m, s), torch.maximum(m, s)

    m, s = torch.ones(3, device="meta"), torch.tensor(2.0)
    jfn = squall.jit(program, executors=[CONFIGS[config]()])
    _same_metadata(jfn(m, s), program(m, s))


def test_tensors_of_two_devices_are_refused_as_eager_refuses_them():
    program = lambda m, c: m + c
    m, c = torch.ones(3, device="meta"), torch.ones(3)
    with pytest.raises(RuntimeError):
        program(m, c)
    with pytest.raises(RuntimeError, match="one device, got meta and cpu"):
        squall.jit(program)(m, c)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda x: x.to("nowhere"), RuntimeError, "Expected one of cpu, cuda"),
        (lambda x: x.to(device="nowhere"), RuntimeError, "Expected one of cpu, cuda"),
        (lambda x: x.to([1]), TypeError, "'non_blocking' must be bool"),
        (lambda x: x.to(device=2.5), TypeError, "device as a str, torch.device or int, not float"),
        (lambda x: torch.as_tensor(x, device="nowhere"), RuntimeError, "Expected one of cpu, cuda"),
        (lambda x: x.cuda(1.5), TypeError, "must be torch.device, not float"),
        (lambda x: x.cpu(memory_format=1), TypeError, "'memory_format' must be torch.memory_format"),
    ],
)
def test_bad_devices_raise_eagers_error(call, exc, match):
    x = torch.randn(3)
    with pytest.raises(exc):
        call(x)
    with pytest.raises(exc, match=match):
        squall.jit(call)(x)


@pytest.mark.skipif(HAS_CUDA, reason="checks the error of a build without CUDA")
def test_cuda_without_cuda_raises_eagers_error():
    x = torch.randn(3)
    for call in (lambda x: x.cuda(), lambda x: x.to("cuda")):
        # a CPU build raises AssertionError ("not compiled with CUDA"); a CUDA build on a machine
        # without a driver (verify.sh's torch 2.10) raises RuntimeError ("Found no NVIDIA driver")
        with pytest.raises((AssertionError, RuntimeError)) as eager:
            call(x)
        with pytest.raises(type(eager.value), match=re.escape(str(eager.value)[:40])):
            squall.jit(call)(x)


def test_no_installed_fusion_executor_takes_a_move():
    jfn = squall.jit(lambda x: (x * 2).to("meta"), executors=[make_executor()])
    jfn(torch.randn(3))
    (move,) = [b for b in squall.last_traces(jfn)[0].bsyms if b.sym.id == "torch.Tensor.to"]
    fusers = [e for e in default_marketplace().executors() if isinstance(e, FusionExecutor)]
    for ex in fusers:
        assert ex.implementation_for(prims.device_put) is None, ex.name
        impl, why = ex.offer(move)
        assert impl is None and "prims.device_put" in why, (ex.name, why)


# --- CUDA -------------------------------------------------------------------------------------

cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="CUDA is not available")


@cuda_only
@pytest.mark.parametrize("config", CONFIGS)
def test_cuda_moves_and_their_gradients_match_eager(config):
    def program(x, c, s):
        a = x.cuda() * 2
        b = a.cpu().to(torch.float32)
        d = x.to("cuda:0", non_blocking=True).type(torch.cuda.FloatTensor)
        e = c.to(x) + x.type_as(c).cpu()
        f = c * s + c.type(torch.FloatTensor).cuda(0)  # s: a CPU scalar tensor beside CUDA tensors
        return a, b, d, e, f, torch.as_tensor(x, device="cuda").sum()

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    c = torch.randn(4, 3, device="cuda", requires_grad=True)
    s = torch.tensor(1.5, requires_grad=True)
    jfn = squall.jit(program, executors=[CONFIGS[config]()])
    got, want = jfn(x, c, s), program(x, c, s)
    _same_metadata(got, want)
    torch.testing.assert_close(got, want)
    grads = torch.autograd.grad(sum(t.double().sum().cpu() for t in got), (x, c, s))
    expected = torch.autograd.grad(sum(t.double().sum().cpu() for t in want), (x, c, s))
    for g, e in zip(grads, expected, strict=True):
        assert g.device == e.device
        torch.testing.assert_close(g, e)


@cuda_only
def test_cuda_to_a_cpu_device_raises_eagers_error():
    x = torch.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match="Invalid device, must be cuda device"):
        squall.jit(lambda x: x.cuda("cpu"))(x)
