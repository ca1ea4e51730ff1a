"""Regions compiled in the user's process, where the compile worker cannot serve them
(SQUALL_INDUCTOR_SUBPROCESS=0, a worker that broke), take the worker's wrapper attempts
(squall_inductor.wrappers): a CPU region with matmuls as one C++ unit, the Python wrapper where
that fails and for an island; and they compute what eager does."""
from __future__ import annotations

import glob
import os

import pytest
import torch

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall_inductor import split_build  # noqa: E402
from squall_inductor.regions import compile_with_inductor  # noqa: E402
from squall_inductor.symbolic import SymbolicSpec  # noqa: E402
from squall_inductor.worker import RegionCompiler  # noqa: E402
from squall_inductor.wrappers import wrapper_attempts  # noqa: E402

pytestmark = pytest.mark.skipif(squall_inductor.cpp_compiler() is None, reason="no C++ compiler for inductor's CPU backend")

CPU = torch.device("cpu")


# regions of their own: inductor keeps what it compiled in memory, by source, so a region another test
# compiled in this process could be found there, with nothing written into this test's cache folder
def _matmul_then_tanh(x, w):
    return (torch.tanh(x @ w) * 3 + 1,)


def _sigmoid_island(x, w):
    return (torch.sigmoid(x * 3) - w.sum(),)


def _one_unit_sources(folder) -> int:
    """How many C++ sources inductor wrote into `folder` hold the C++ wrapper's entry point."""
    sources = glob.glob(os.path.join(folder, "**", "*.cpp"), recursive=True)
    return sum("inductor_entry_cpp" in open(path).read() for path in sources)


@pytest.fixture
def inductor_cache(tmp_path):
    """A fresh, empty inductor cache folder for the test's compiles (what they write is read back)."""
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

    with temporary_cache_dir(str(tmp_path / "inductor")):
        yield str(tmp_path / "inductor")


@pytest.mark.parametrize("fn, one_unit, units", [
    (_matmul_then_tanh, "1", 1),  # the C++ wrapper: one compiler run for the wrapper and its kernels
    (_matmul_then_tanh, "0", 0),  # SQUALL_INDUCTOR_ONE_UNIT=0: the Python wrapper, a unit per kernel
    (_sigmoid_island, "1", 0),  # an island: its few kernels without ATen's operator headers
])
def test_a_static_region_compiled_in_this_process_takes_the_workers_wrapper(monkeypatch, inductor_cache, fn, one_unit, units):
    """In-process compiles took the Python wrapper whatever the region: gpt2's whole-model region
    then compiled kernel by kernel where the worker compiled it as one unit."""
    monkeypatch.setenv("SQUALL_INDUCTOR_ONE_UNIT", one_unit)
    x, w = torch.randn(6, 8), torch.randn(8, 4)
    compiler = RegionCompiler(fn, "", worker=None)
    compiled = compiler([x, w])
    assert compiler.where == "in this process"
    assert _one_unit_sources(inductor_cache) == units
    torch.testing.assert_close(compiled(x, w)[0], fn(x, w)[0])


def test_a_symbolic_region_compiled_in_this_process_is_one_unit_and_serves_every_length(monkeypatch, inductor_cache):
    monkeypatch.setenv("SQUALL_INDUCTOR_ONE_UNIT", "1")
    spec = SymbolicSpec({"s0": 6}, [(("s0", 8), torch.float32, CPU, (0, 1)), ((8, 4), torch.float32, CPU, (0, 1))])
    compiled, guards = RegionCompiler(_matmul_then_tanh, "", worker=None).symbolic(spec)
    assert _one_unit_sources(inductor_cache) == 1
    assert "L['t1'].size()" in guards  # the weight's sizes stay guarded: only s0 varies
    w = torch.randn(8, 4)
    for n in (2, 6, 11):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x, w)[0], _matmul_then_tanh(x, w)[0])


def test_a_region_the_cpp_wrapper_cannot_compile_in_this_process_compiles_with_the_python_wrapper(monkeypatch):
    import torch._inductor.compile_fx as inductor_compile_fx
    import torch._inductor.config as inductor_config

    compile_fx, tried = inductor_compile_fx.compile_fx, []

    def failing_cpp_wrapper(*args, **kwargs):
        tried.append(inductor_config.cpp_wrapper)
        if inductor_config.cpp_wrapper:
            raise RuntimeError("the C++ wrapper failed")
        return compile_fx(*args, **kwargs)

    monkeypatch.setattr(inductor_compile_fx, "compile_fx", failing_cpp_wrapper)
    x, w = torch.randn(6, 8), torch.randn(8, 4)
    compiled = compile_with_inductor(_matmul_then_tanh, [x, w], one_unit=True)
    assert tried == [True, False]
    torch.testing.assert_close(compiled(x, w)[0], _matmul_then_tanh(x, w)[0])


def test_only_the_worker_builds_one_unit_as_two_side_by_side(monkeypatch):
    """The side-by-side build patches inductor's build function process-wide: never in the user's process."""
    from torch.fx.experimental.proxy_tensor import make_fx

    monkeypatch.setattr(split_build, "split_build_settings", lambda: {"cpp_wrapper_build_separate": True})
    graph = make_fx(_matmul_then_tanh)(torch.randn(6, 8), torch.randn(8, 4))
    assert wrapper_attempts(graph, True, True) == [{"cpp_wrapper": True, "cpp_wrapper_build_separate": True}, {"cpp_wrapper": True}, {}]
    assert wrapper_attempts(graph, True, True, split_build=False) == [{"cpp_wrapper": True}, {}]
    assert wrapper_attempts(graph, True, False) == [{}]  # not on a CPU
    assert wrapper_attempts(make_fx(_sigmoid_island)(torch.randn(6, 8), torch.randn(8, 4)), True, True) == [{}]
