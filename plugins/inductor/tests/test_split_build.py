"""A one-unit region's C++ built as wrapper and kernels side by side (squall_inductor.split_build):
when, how the builds are ordered, and that such a region computes what eager does and loads directly."""
from __future__ import annotations

import os
import pickle
import threading

import pytest
import torch

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall.extend import load_source  # noqa: E402
from squall_inductor import CompiledRegion  # noqa: E402
from squall_inductor.split_build import side_by_side, spare_cores, split_build_settings  # noqa: E402
from squall_inductor.timeline import TIMELINE_ENV, read_timeline  # noqa: E402
from squall_inductor.worker import CompileWorker, RegionCompiler  # noqa: E402

needs_cpu_inductor = pytest.mark.skipif(squall_inductor.cpp_compiler() is None, reason="no C++ compiler for inductor's CPU backend")


class _Builder:
    """A stand-in for inductor's CppBuilder: records when its build starts and ends."""

    def __init__(self, name: str, log: list, folder, started: threading.Barrier | None = None, fails: bool = False):
        self.name, self.log, self.target, self.started, self.fails = name, log, folder / f"{name}.o", started, fails

    def get_target_file_path(self) -> str:
        return str(self.target)

    def build(self) -> None:
        self.log.append(("start", self.name))
        if self.started is not None:
            self.started.wait(timeout=10)  # raises BrokenBarrierError unless the other build runs meanwhile
        if self.fails:
            raise RuntimeError(f"{self.name} did not compile")
        self.target.write_text("built")
        self.log.append(("end", self.name))


def test_the_wrapper_and_the_kernels_build_at_once_and_the_link_after_both(tmp_path):
    from torch._inductor import codecache

    log: list = []
    both_running = threading.Barrier(2)
    builders = [_Builder("main", log, tmp_path, both_running), _Builder("kernels", log, tmp_path, both_running), _Builder("link", log, tmp_path)]
    inductor_build = codecache._worker_compile_cpp
    with side_by_side():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), builders)
    assert codecache._worker_compile_cpp is inductor_build  # put back
    assert {entry for entry in log[:2]} == {("start", "main"), ("start", "kernels")}  # both started before either ended
    assert log[-2:] == [("start", "link"), ("end", "link")]
    # a build whose target exists is not run again, as in inductor's own build
    again: list = []
    with side_by_side():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), [_Builder(n, again, tmp_path) for n in ("main", "kernels", "link")])
    assert again == []


def test_a_failing_build_raises_its_error_and_nothing_is_linked(tmp_path):
    from torch._inductor import codecache

    log: list = []
    builders = [_Builder("main", log, tmp_path), _Builder("kernels", log, tmp_path, fails=True), _Builder("link", log, tmp_path)]
    with side_by_side(), pytest.raises(RuntimeError, match="kernels did not compile"):
        codecache._worker_compile_cpp(str(tmp_path / "lock"), builders)
    assert ("start", "link") not in log


def test_a_one_unit_build_is_left_to_inductor(tmp_path, monkeypatch):
    from torch._inductor import codecache

    seen = []
    monkeypatch.setattr(codecache, "_worker_compile_cpp", lambda lock, builders: seen.append(len(builders)))
    with side_by_side():
        codecache._worker_compile_cpp(str(tmp_path / "lock"), [_Builder("main", [], tmp_path)])
    assert seen == [1]


@pytest.mark.parametrize("setting, spare, split", [("1", 0, True), ("on", 0, True), ("0", 1, False), ("off", 1, False), ("", 1, True), ("", 0, False)])
def test_the_build_is_split_where_asked_or_where_a_core_is_spare(monkeypatch, setting, spare, split):
    monkeypatch.setenv("SQUALL_INDUCTOR_SPLIT_BUILD", setting)
    monkeypatch.setattr(squall_inductor.split_build, "spare_cores", lambda: spare)
    assert split_build_settings() == ({"cpp_wrapper_build_separate": True} if split else {})


def test_spare_cores_counts_within_the_cores_this_process_may_use():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert 0 <= spare_cores() < cores  # this process runs, so it is never all of them


@needs_cpu_inductor
def test_a_region_built_side_by_side_agrees_with_eager_and_loads_directly(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUALL_INDUCTOR_ONE_UNIT", "1")
    monkeypatch.setenv("SQUALL_INDUCTOR_SPLIT_BUILD", "1")
    monkeypatch.setenv(TIMELINE_ENV, str(tmp_path / "timeline.txt"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # its kernels built, not found in an earlier run's cache
    source = "def region(x, w):\n  return (torch.tanh(x @ w + 1) * torch.softmax(x, -1).sum(-1, keepdim=True),)\n"
    namespace = {"torch": torch}
    load_source(source, "test-split-region", namespace)
    fn = namespace["region"]
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    worker = CompileWorker()  # a fresh worker takes the settings above
    try:
        compiler = RegionCompiler(fn, source, worker=worker)
        region = CompiledRegion(fn, [x, w], compile=compiler)
        assert compiler.where.startswith("in the compile worker process")
        for a, b in ((x, w), (x.neg(), w * 3)):
            torch.testing.assert_close(region(a, b), fn(a, b))
    finally:
        worker.close()
    steps = [step for _, pid, _, step in read_timeline(str(tmp_path / "timeline.txt")) if pid == worker.pid]
    assert "worker: wrapper and kernels built side by side" in steps
    kept = [n for n in os.listdir(tmp_path / "kept") if n.endswith(".direct")]
    (bundle_file,) = kept
    # the C++ wrapper's one library (wrapper and kernels linked), loaded without inductor
    assert sorted(pickle.loads((tmp_path / "kept" / bundle_file).read_bytes()).entries.values()) == ["inductor_entry_cpp"]
    assert "user: region loaded directly" in [step for _, pid, _, step in read_timeline(str(tmp_path / "timeline.txt")) if pid == os.getpid()]


@needs_cpu_inductor
def test_a_split_build_that_fails_is_built_again_as_one_unit(tmp_path, monkeypatch):
    import contextlib

    from torch._inductor import codecache
    from torch._inductor.utils import fresh_cache

    import squall_inductor.worker_main as worker_main
    from squall_inductor.regions import layout_of

    seen: list[int] = []

    @contextlib.contextmanager
    def failing_split():
        inductor_build = codecache._worker_compile_cpp

        def build(lock_path, builders):
            if len(builders) == 3 or builders[0].get_target_file_path().endswith(".main.so"):  # not a vector-ISA probe
                seen.append(len(builders))
            if len(builders) == 3:
                raise RuntimeError("the split build failed")
            return inductor_build(lock_path, builders)

        codecache._worker_compile_cpp = build
        try:
            yield
        finally:
            codecache._worker_compile_cpp = inductor_build

    monkeypatch.setattr(squall_inductor.split_build, "split_build_settings", lambda: {"cpp_wrapper_build_separate": True})
    monkeypatch.setattr(worker_main, "side_by_side", failing_split)

    def fn(x, w):
        return (torch.relu(x @ w) * 2 - 1,)

    x, w = torch.randn(4, 5), torch.randn(5, 3)
    with fresh_cache():
        _, _, constants, bundle = worker_main.compile_static(fn, layout_of([x, w]), None, str(tmp_path / "region.bin"), one_unit=True)
    assert seen == [3, 1]  # the split build, then one unit (not the Python wrapper's kernels)
    assert constants == [] and bundle is not None
    assert sorted(pickle.loads(bundle).entries.values()) == ["inductor_entry_cpp"]
