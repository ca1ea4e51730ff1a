"""squall-cupy-ops on a GPU: CuPy kernels against the torch executor (skipped without CuPy or CUDA).

Every elementwise OpInfo of squall's own test suite, and the GPT block, run with the cupy
executor first and with the torch executor alone; the results must agree.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import squall

from squall_cupy_ops import make_executor

HAS_CUDA = torch.cuda.is_available()
HAS_CUPY = importlib.util.find_spec("cupy") is not None
pytestmark = [
    pytest.mark.skipif(not HAS_CUPY, reason="cupy is not installed"),
    pytest.mark.skipif(not HAS_CUDA, reason="CUDA is not available"),
]

# squall's OpInfos live in its tests/ folder, beside this plugin in the source tree
_CORE_TESTS = Path(__file__).resolve().parents[3] / "tests"
if _CORE_TESTS.is_dir() and str(_CORE_TESTS) not in sys.path:
    sys.path.insert(0, str(_CORE_TESTS))
try:
    from opinfos import conversions, elementwise_binary, elementwise_unary

    ELEMENTWISE = elementwise_unary.opinfos + elementwise_binary.opinfos + conversions.opinfos
except ImportError:  # an installed plugin without squall's source tree
    ELEMENTWISE = []

CUPY_DTYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.bool)  # no bfloat16 in CuPy


def _executors():
    # every region kept, untimed: these tests check the kernels' results, not the judge's choice
    return [make_executor(judge_in_context=False), squall.market.plugins.default_marketplace().get("torch")]


def _jit_cupy(fn):
    # cupy's regions are planned in the background upgrade; wait=True does it before the first call returns
    return squall.jit(fn, executors=_executors(), wait=True)


def _torch_only():
    return [squall.market.plugins.default_marketplace().get("torch")]


@pytest.mark.parametrize("info", ELEMENTWISE, ids=[o.name for o in ELEMENTWISE])
def test_elementwise_opinfos_match_the_torch_executor(info):
    ran = 0
    for dtype in info.dtypes:
        if dtype not in CUPY_DTYPES:
            continue
        for sample in info.sample_inputs(dtype, "cuda"):
            program = lambda *args, **kwargs: info.op(*args, **kwargs)
            expected = squall.jit(program, executors=_torch_only())(*sample.args, **sample.kwargs)
            actual = _jit_cupy(program)(*sample.args, **sample.kwargs)
            # a non_blocking copy to the CPU (Tensor.to's samples) may still be in flight, in eager too
            torch.cuda.synchronize()
            torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{info.name} {sample}: {m}")
            ran += 1
    if not ran:
        pytest.skip(f"{info.name} has no samples in the dtypes CuPy handles")


def test_gpt_block_matches_the_torch_executor():
    from squall.tools.demo import Block, GPTConfig

    torch.manual_seed(0)
    block = Block(GPTConfig(n_embd=64, n_head=4, block_size=32)).cuda().eval()
    x = torch.randn(2, 32, 64, device="cuda")
    with torch.no_grad():
        expected = squall.jit(block, executors=_torch_only())(x)
        actual = _jit_cupy(block)(x)
    # the block's elementwise work is single ops between matmuls and norms (reductions, not
    # cupy's): it may take nothing, and must still agree
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_tanh_gelu_mlp_runs_as_cupy_kernels():
    # GPT-2's MLP activation written out: a chain of elementwise ops between two matmuls
    def mlp(x, w1, w2):
        h = x @ w1
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        return h @ w2

    x, w1, w2 = torch.randn(64, 128, device="cuda"), torch.randn(128, 512, device="cuda"), torch.randn(512, 128, device="cuda")
    jmlp = _jit_cupy(mlp)
    torch.testing.assert_close(jmlp(x, w1, w2), mlp(x, w1, w2), atol=1e-4, rtol=1e-4)
    assert "cupy" in squall.last_traces(jmlp).source  # its region really ran as a CuPy kernel


def test_judged_upgrade_keeps_the_faster_plan_and_says_so():
    # the default executor is judged in context: the fused plan is installed only if faster
    fn = lambda a, b: torch.tanh(a * b + 1) * torch.sigmoid(a - b)
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    jfn = squall.jit(fn, executors=[make_executor(), squall.market.plugins.default_marketplace().get("torch")], wait=True)
    torch.testing.assert_close(jfn(a, b), fn(a, b))
    (upgrade,) = squall.upgrades(jfn)
    assert upgrade.status in ("upgraded", "kept the torch plan"), str(upgrade)
    assert ("cupy" in squall.last_traces(jfn).source) == (upgrade.status == "upgraded")


def test_broadcast_noncontiguous_bool_and_empty_inputs():
    fn = lambda a, b, m: (torch.where(m, a.t() + b, -a.t()), (a.t() > b) ^ m)
    a = torch.randn(8, 4, device="cuda")  # transposed below: a strided input
    b = torch.randn(8, device="cuda")  # broadcast: a stride-0 view
    m = torch.rand(4, 8, device="cuda") > 0.5
    jfn = _jit_cupy(fn)
    torch.testing.assert_close(jfn(a, b, m), fn(a, b, m))
    assert "cupy" in squall.last_traces(jfn).source
    empty = torch.empty(0, 4, device="cuda")
    torch.testing.assert_close(jfn(empty, torch.randn(0, device="cuda"), torch.empty(4, 0, dtype=torch.bool, device="cuda")),
                               fn(empty, torch.randn(0, device="cuda"), torch.empty(4, 0, dtype=torch.bool, device="cuda")))


def test_kernels_run_on_pytorchs_current_stream():
    fn = lambda a: torch.tanh(a) * 3 + 1
    jfn = _jit_cupy(fn)
    side = torch.cuda.Stream()
    a = torch.randn(1 << 20, device="cuda")
    with torch.cuda.stream(side):
        out = jfn(a)
    side.synchronize()
    torch.testing.assert_close(out, fn(a))
