"""squall-nvfuser on a real GPU: compiled results against the torch executor's.

These run only where nvFuser and a CUDA device are present; elsewhere they skip, naming
what is missing. They go through the whole path: planning, region forming, translation
(`translate_region`), `fd.execute`.
"""
from __future__ import annotations

import importlib.util

import pytest
import torch

import squall
from squall.tools.demo import Block, GPTConfig
from squall_nvfuser import make_executor

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("nvfuser_direct") is None, reason="nvfuser_direct is not installed"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available"),
]


def _executors():
    # every region kept, untimed: these tests check the kernels' results, not the judge's choice
    return [make_executor(judge_in_context=False), squall.market.plugins.default_marketplace().get("torch")]


def _compare(fn, *args, atol=1e-5, rtol=1e-5):
    """Run `fn` with nvFuser first and with torch alone; the results must agree and nvFuser must have run."""
    # nvFuser's regions are planned in the background upgrade; wait=True does it before the first call returns
    fused = squall.jit(fn, executors=_executors(), wait=True)
    reference = squall.jit(fn, executors=["torch"])
    torch.testing.assert_close(fused(*args), reference(*args), atol=atol, rtol=rtol)
    plan = squall.last_traces(fused).plan
    assert not plan.errors, plan.errors
    assert any(r.executor == "nvfuser" for r in plan.regions), "no nvFuser region was formed"
    return fused


def test_elementwise_chain():
    x, y = torch.randn(64, 128, device="cuda"), torch.randn(128, device="cuda")
    _compare(lambda x, y: torch.tanh(torch.exp(x) * y - 1.5).sigmoid() + x.abs().sqrt(), x, y)


def test_elementwise_chain_low_precision_and_non_contiguous():
    x = torch.randn(128, 64, device="cuda", dtype=torch.bfloat16).t()  # a transposed view
    _compare(lambda x: torch.nn.functional.gelu(x) * 0.5 + x, x, atol=1e-2, rtol=1e-2)


def test_reductions():
    x = torch.randn(32, 256, device="cuda")
    _compare(lambda x: (x.sum(dim=-1), x.amax(dim=0), x.var(dim=1), torch.softmax(x, dim=-1)), x)
    h = torch.randn(16, 512, device="cuda", dtype=torch.float16)
    _compare(lambda h: h.sum(dim=-1), h, atol=1e-2, rtol=1e-2)


def test_layer_norm():
    x = torch.randn(8, 64, 256, device="cuda")
    w, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    _compare(lambda x, w, b: torch.nn.functional.layer_norm(x, (256,), w, b), x, w, b)


def test_gpt_block_and_identical_regions_compile_once():
    torch.manual_seed(0)
    block = Block(GPTConfig()).cuda().eval()
    x = torch.randn(2, 32, GPTConfig().n_embd, device="cuda")
    with torch.no_grad():
        _compare(block, x, atol=1e-4, rtol=1e-4)

        def two_norms(a, w):
            # the matmul (not fused) separates two layer norms with the same signature
            return torch.nn.functional.layer_norm(torch.nn.functional.layer_norm(a, (128,)) @ w, (128,))

        a, w = torch.randn(4, 128, device="cuda"), torch.randn(128, 128, device="cuda")
        report = squall.explain(squall.jit(two_norms, executors=["nvfuser", "torch"]), a, w)
        assert len(report.regions) == 2 and report.regions[1].reused
