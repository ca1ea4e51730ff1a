"""A kept region loaded without inductor's compile stack (squall_inductor.direct_load): in a second
process, after damage to what is kept, with misaligned inputs, and what the worker refuses to save.

Each compile costs seconds, so the regions are tiny; they compile in the shared worker process.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import squall

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall.extend import load_source  # noqa: E402
from squall_inductor import CompiledRegion  # noqa: E402
from squall_inductor.direct_load import inductor_cache_dir  # noqa: E402
from squall_inductor.symbolic import SymbolicSpec  # noqa: E402
from squall_inductor.worker import CompileWorker, RegionCompiler, default_worker  # noqa: E402

needs_cpu_inductor = pytest.mark.skipif(squall_inductor.cpp_compiler() is None, reason="no C++ compiler for inductor's CPU backend")

_SOURCE = "def region(x, w):\n  return (torch.tanh(x @ w + 1) * torch.sigmoid(x).sum(-1, keepdim=True) - torch.tensor([0.5, 1.0, 2.0]),)\n"


def _region():
    namespace = {"torch": torch}
    load_source(_SOURCE, "test-region", namespace)
    return namespace["region"], _SOURCE


def _compiled_once(tmp_path):
    """The region compiled in the worker for (4, 5) @ (5, 3) inputs, kept under tmp_path/kept."""
    fn, source = _region()
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    first = RegionCompiler(fn, source, worker=default_worker())
    torch.testing.assert_close(CompiledRegion(fn, [x, w], compile=first)(x, w), fn(x, w))
    assert first.where.startswith("in the compile worker process")
    return fn, source, x, w


def _kept(tmp_path, suffix):
    return [tmp_path / "kept" / n for n in os.listdir(tmp_path / "kept") if n.endswith(suffix)]


def _damage(path, data: bytes) -> None:
    """Replace a kept file (a new file: a library this process loaded stays mapped as it was)."""
    path.unlink()
    path.write_bytes(data)


def _load_again(fn, source, args):
    """The region as a later process loads it: a worker that is never asked unless nothing is kept."""
    later = CompileWorker()
    try:
        again = RegionCompiler(fn, source, worker=later)
        region = CompiledRegion(fn, list(args), compile=again)
        return region, again
    finally:
        later.close()


def _loads_directly_in_a_new_process(tmp_path, source: str, checks: str) -> None:
    """Run `checks` in a new process where the region `source` is `fn`, and `compiler` a
    RegionCompiler of it with a fresh worker (`later`), reading the regions kept under `tmp_path`:
    the checks' region must load from there, and the process import neither inductor nor Dynamo."""
    child = textwrap.dedent(f"""
        import sys, torch
        import squall_inductor.worker as inductor_worker
        from squall.extend import load_source
        from squall_inductor import CompiledRegion
        from squall_inductor.symbolic import SymbolicSpec, guard_function
        from squall_inductor.worker import CompileWorker, RegionCompiler
        inductor_worker.kept_folder = lambda: {str(tmp_path / "kept")!r}
        namespace = {{"torch": torch}}
        load_source({source!r}, "test-region", namespace)
        fn = namespace["region"]
        later = CompileWorker()
        compiler = RegionCompiler(fn, {source!r}, worker=later)
    """) + textwrap.dedent(checks) + textwrap.dedent("""
        assert compiler.where.startswith("before, loaded from"), compiler.where
        heavy = sorted(m for m in ("torch._inductor", "torch._dynamo") if m in sys.modules)
        assert not heavy, heavy
        later.close()
        print("loaded directly")
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded directly" in done.stdout


@needs_cpu_inductor
def test_a_second_process_loads_a_kept_region_without_importing_inductor_and_matches_eager(tmp_path):
    fn, source, x, w = _compiled_once(tmp_path)
    _loads_directly_in_a_new_process(tmp_path, source, """
        x, w = torch.randn(4, 5), torch.randn(5, 3)
        region = CompiledRegion(fn, [x, w], compile=compiler)
        for a, b in ((x, w), (x * 2 - 1, w.exp())):
            torch.testing.assert_close(region(a, b), fn(a, b))
    """)


def _symbolic_region():
    """(source, function, spec) of a small region compiled for a symbolic length s0 (traced at 5)."""
    source = "def region(x):\n  return (torch.sigmoid(x * 2 + 1).sum(1) - torch.tensor([1.0, 2.0]),)\n"
    namespace = {"torch": torch}
    load_source(source, "test-region", namespace)
    spec = SymbolicSpec({"s0": 5}, [((3, "s0", 2), torch.float32, torch.device("cpu"), (0, 1, 2))])
    return source, namespace["region"], spec


@needs_cpu_inductor
def test_a_symbolic_region_loads_in_a_second_process_without_importing_inductor_and_matches_eager_at_every_length(tmp_path):
    # without a direct bundle the user's process loaded a symbolic region through inductor: Dynamo's
    # import and the vector-ISA probe, seconds of a background thread holding the interpreter
    source, fn, spec = _symbolic_region()
    first = RegionCompiler(fn, source, worker=default_worker())
    first.symbolic(spec)
    assert first.where.startswith("in the compile worker process")
    assert _kept(tmp_path, ".direct"), os.listdir(tmp_path / "kept")
    _loads_directly_in_a_new_process(tmp_path, source, """
        spec = SymbolicSpec({"s0": 5}, [((3, "s0", 2), torch.float32, torch.device("cpu"), (0, 1, 2))])
        loaded, guards = compiler.symbolic(spec)
        admits = guard_function(guards, [3])
        for length in (5, 9, 30):
            x = torch.randn(3, length, 2)
            assert admits([x])
            torch.testing.assert_close(tuple(loaded(x)), fn(x))
    """)


@needs_cpu_inductor
def test_a_damaged_kernel_library_loads_through_inductor_with_a_warning(tmp_path):
    fn, source, x, w = _compiled_once(tmp_path)
    (library, *_) = _kept(tmp_path, ".so")
    _damage(library, library.read_bytes()[:-16] + b"\0" * 16)  # still a library file, not the one compiled
    with pytest.warns(squall.SquallWarning, match="could not be loaded directly.*not the one compiled.*loaded through inductor"):
        region, compiler = _load_again(fn, source, (x, w))
    assert compiler.where.startswith("before, loaded from")
    torch.testing.assert_close(region(x, w), fn(x, w))


@needs_cpu_inductor
def test_a_missing_kernel_library_loads_through_inductor_with_a_warning(tmp_path):
    fn, source, x, w = _compiled_once(tmp_path)
    for library in _kept(tmp_path, ".so"):
        library.unlink()
    with pytest.warns(squall.SquallWarning, match="could not be loaded directly.*FileNotFoundError"):
        region, _ = _load_again(fn, source, (x, w))
    torch.testing.assert_close(region(x, w), fn(x, w))


@needs_cpu_inductor
def test_a_damaged_bundle_and_artifact_compile_the_region_again_with_a_warning(tmp_path):
    fn, source, x, w = _compiled_once(tmp_path)
    for damaged in (*_kept(tmp_path, ".direct"), *_kept(tmp_path, ".bin")):
        _damage(damaged, b"not what was kept")
    worker = CompileWorker()
    try:
        with pytest.warns(squall.SquallWarning) as caught:
            again = RegionCompiler(fn, source, worker=worker)
            region = CompiledRegion(fn, [x, w], compile=again)
        messages = " | ".join(str(c.message) for c in caught)
        assert "could not be loaded directly" in messages and "it is compiled again" in messages
        assert again.where == f"in the compile worker process (pid {worker.pid})"
        torch.testing.assert_close(region(x, w), fn(x, w))
    finally:
        worker.close()
    # compiled again, it is kept again: a later load is direct and quiet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        region, compiler = _load_again(fn, source, (x, w))
    assert compiler.where.startswith("before, loaded from")
    torch.testing.assert_close(region(x, w), fn(x, w))



def _as_kept_before_direct_bundles(tmp_path) -> None:
    """Leave only what a squall from before direct bundles kept: the artifact and its constants (and a
    symbolic region's guards), no bundle, no kernel library beside it, no word that it has none."""
    for path in (*_kept(tmp_path, ".direct"), *_kept(tmp_path, ".so"), *_kept(tmp_path, ".indirect")):
        path.unlink()


@needs_cpu_inductor
def test_a_region_kept_without_a_direct_bundle_is_compiled_once_more_in_the_worker_and_then_loads_directly(tmp_path):
    # loading it through inductor imported Dynamo and inductor into the user's process at every
    # later load: 3 s of CPU time beside the length stream's calls, in each new process
    fn, source, x, w = _compiled_once(tmp_path)
    _as_kept_before_direct_bundles(tmp_path)
    worker = CompileWorker()
    try:
        again = RegionCompiler(fn, source, worker=worker)
        region = CompiledRegion(fn, [x, w], compile=again)
        assert again.where == f"in the compile worker process (pid {worker.pid})"
        torch.testing.assert_close(region(x, w), fn(x, w))
    finally:
        worker.close()
    assert _kept(tmp_path, ".direct")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        region, compiler = _load_again(fn, source, (x, w))
    assert compiler.where.startswith("before, loaded from")
    torch.testing.assert_close(region(x * 3, w), fn(x * 3, w))


@needs_cpu_inductor
def test_a_symbolic_region_kept_without_a_direct_bundle_is_compiled_once_more_in_the_worker(tmp_path):
    source, fn, spec = _symbolic_region()
    RegionCompiler(fn, source, worker=default_worker()).symbolic(spec)
    _as_kept_before_direct_bundles(tmp_path)
    worker = CompileWorker()
    try:
        again = RegionCompiler(fn, source, worker=worker)
        loaded, _ = again.symbolic(spec)
        assert again.where == f"in the compile worker process (pid {worker.pid})"
    finally:
        worker.close()
    x = torch.randn(3, 9, 2)
    torch.testing.assert_close(tuple(loaded(x)), fn(x))
    assert _kept(tmp_path, ".direct")


@needs_cpu_inductor
def test_a_region_the_worker_made_no_bundle_for_loads_through_inductor_without_asking_it_again(tmp_path, monkeypatch):
    (fn, source), x, w = _region(), torch.randn(4, 5), torch.randn(5, 3)
    first = CompileWorker()
    replies = first._wait  # the worker's replies, as one without a bundle reads (a wrapper that needs more of inductor)
    monkeypatch.setattr(first, "_wait", lambda timeout: (lambda r: r[:4] + (None,) if r[0] == "ok" else r)(replies(timeout)))
    try:
        compiler = RegionCompiler(fn, source, worker=first)
        torch.testing.assert_close(CompiledRegion(fn, [x, w], compile=compiler)(x, w), fn(x, w))
        assert compiler.where == f"in the compile worker process (pid {first.pid})"
    finally:
        first.close()
    assert not _kept(tmp_path, ".direct") and _kept(tmp_path, squall_inductor.worker.INDIRECT_SUFFIX)
    later = CompileWorker()
    monkeypatch.setattr(later, "_compile", lambda *a, **k: pytest.fail("the worker was asked again"))
    try:
        again = RegionCompiler(fn, source, worker=later)
        region = CompiledRegion(fn, [x, w], compile=again)
    finally:
        later.close()
    assert again.where.startswith("before, loaded from")
    torch.testing.assert_close(region(x, w), fn(x, w))


def test_an_aligned_copy_keeps_sizes_strides_and_values():
    from squall_inductor.direct_load import _aligned_copy

    storage = torch.randn(64)
    for view in (storage[1:21].view(4, 5), storage[3:].as_strided((3, 4), (1, 5)), storage[1:1]):
        copied = _aligned_copy(view)
        assert copied.data_ptr() % 16 == 0 and copied.data_ptr() != view.data_ptr() or view.numel() == 0
        assert (copied.shape, copied.stride()) == (view.shape, view.stride())
        assert torch.equal(copied, view)


@needs_cpu_inductor
def test_a_misaligned_input_gives_eagers_answer(tmp_path):
    fn, source, x, w = _compiled_once(tmp_path)
    region, _ = _load_again(fn, source, (x, w))
    storage = torch.randn(21)
    shifted = storage[1:].view(4, 5)  # 4 bytes past a 16-byte boundary: inductor's kernels assume aligned inputs
    assert shifted.data_ptr() % 16
    before = storage.clone()
    torch.testing.assert_close(region(shifted, w), fn(shifted, w))
    assert torch.equal(storage, before)


def test_the_worker_saves_no_bundle_for_a_wrapper_that_needs_more_of_inductor():
    from squall_inductor.direct_build import wrapper_source

    header = 'r"""\nfrom torch._inductor.select_algorithm import AlgorithmSelectorCache\nAlgorithmSelectorCache.x\n"""\n'
    given = "from torch._inductor.async_compile import AsyncCompile\nfrom torch._inductor.select_algorithm import extern_kernels\n"
    body = "async_compile = AsyncCompile()\ndef call(args):\n    return extern_kernels.mm(*args)\n"
    source, why = wrapper_source(header + given + "from torch._inductor.hooks import run_intermediate_hooks\n" + body)
    assert why == "" and "import" not in source and source.count("\n") == (header + given + body).count("\n") + 1
    used = body.replace("return", "run_intermediate_hooks(); return")
    assert wrapper_source(given + "from torch._inductor.hooks import run_intermediate_hooks\n" + used) == (
        None, "it uses run_intermediate_hooks from inductor")
    assert wrapper_source(given + body + "k = async_compile.triton('k', '')\n")[1] == "it compiles kernels with async_compile.triton"
    assert wrapper_source("import torch._dynamo\n" + given + body)[1] == "it imports torch._dynamo"


def test_the_cache_folder_is_inductors_without_importing_it(monkeypatch, tmp_path):
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert inductor_cache_dir() == cache_dir() == str(tmp_path / "mine")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    expected = inductor_cache_dir()
    assert cache_dir() == expected  # (inductor's sets the variable: monkeypatch restores it)


@needs_cpu_inductor
@pytest.mark.parametrize("one_unit", ["1", "0"])
def test_a_region_compiles_as_one_unit_or_kernel_by_kernel_and_loads_directly_either_way(tmp_path, monkeypatch, one_unit):
    import pickle

    monkeypatch.setenv("SQUALL_INDUCTOR_ONE_UNIT", one_unit)
    # the C++ wrapper's one library, or the Python wrapper's kernels (its matmul is a BLAS call)
    fn, source, x, w = _compiled_once(tmp_path)
    (bundle_file,) = _kept(tmp_path, ".direct")
    entries = sorted(pickle.loads(bundle_file.read_bytes()).entries.values())
    assert entries == ["inductor_entry_cpp"] if one_unit == "1" else entries and set(entries) == {"kernel"}
    region, compiler = _load_again(fn, source, (x, w))
    assert compiler.where.startswith("before, loaded from")
    for a, b in ((x, w), (x.neg(), w * 3)):
        torch.testing.assert_close(region(a, b), fn(a, b))


_ISLAND_SOURCE = "def region(x):\n  return (torch.tanh(x * 2 + 1) * torch.sigmoid(x).sum(-1, keepdim=True),)\n"


def test_a_region_without_matmuls_is_an_island():
    from torch.fx.experimental.proxy_tensor import make_fx

    from squall_inductor.wrappers import is_island

    x, w = torch.randn(4, 5), torch.randn(5, 3)
    assert is_island(make_fx(lambda x: torch.softmax(x * 2, -1).sum(0))(x))
    assert not is_island(make_fx(lambda x, w: torch.relu(x @ w))(x, w))
    assert not is_island(make_fx(lambda x, w: torch.nn.functional.linear(x, w.t(), None))(x, w))
    assert not is_island(make_fx(lambda x, w: torch.nn.functional.conv1d(x.t()[None], w.t()[:, :, None]))(x, w))


@needs_cpu_inductor
def test_an_island_compiles_kernel_by_kernel_where_regions_compile_as_one_unit_and_loads_directly(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setenv("SQUALL_INDUCTOR_ONE_UNIT", "1")
    namespace = {"torch": torch}
    load_source(_ISLAND_SOURCE, "test-island", namespace)
    fn, x = namespace["region"], torch.randn(4, 5)
    first = RegionCompiler(fn, _ISLAND_SOURCE, worker=default_worker())
    torch.testing.assert_close(CompiledRegion(fn, [x], compile=first)(x), fn(x))
    (bundle_file,) = _kept(tmp_path, ".direct")
    # the Python wrapper's kernels, not the C++ wrapper's one library (ATen's headers: twice the compile)
    assert set(pickle.loads(bundle_file.read_bytes()).entries.values()) == {"kernel"}
    region, compiler = _load_again(fn, _ISLAND_SOURCE, (x,))
    assert compiler.where.startswith("before, loaded from")
    torch.testing.assert_close(region(x.neg()), fn(x.neg()))


@needs_cpu_inductor
def test_neither_the_compiling_process_nor_a_second_one_imports_dynamo_for_an_upgrade(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "squall"))
    program = textwrap.dedent(f"""
        import sys, torch, squall
        import squall_inductor.worker as inductor_worker
        from squall_inductor import InductorExecutor
        inductor_worker.kept_folder = lambda: {str(tmp_path / "kept")!r}

        def f(x, w):
            return torch.softmax(torch.tanh(x @ w) * 3 + 1, -1).sum(0)

        x, w = torch.randn(6, 5), torch.randn(5, 7)
        ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
        jfn = squall.jit(f, executors=[ex, "torch"])
        torch.testing.assert_close(jfn(x, w), f(x, w))
        assert squall.wait_for_upgrades(jfn, timeout=300)
        (upgrade,) = squall.upgrades(jfn)
        assert upgrade.status == "upgraded", upgrade
        for a, b in ((x, w), (x * 2, w - 1)):
            torch.testing.assert_close(jfn(a, b), f(a, b))
        print(upgrade.compiled_in)
        print(sorted(m for m in ("torch._inductor", "torch._dynamo") if m in sys.modules))
    """)
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr[-3000:]
    first, second = (done.stdout.strip().splitlines() for done in runs)
    # the process whose regions the worker compiled imported neither: whether torch.compile runs in
    # this Python is asked in the worker (Dynamo's import is seconds of the upgrade holding the
    # interpreter beside the user's calls), and the region loads directly
    assert first[0].startswith("in the compile worker process") and first[1] == "[]", first
    assert second == [f"before, loaded from {tmp_path / 'kept'}", "[]"]


@needs_cpu_inductor
def test_a_symbolic_upgrade_imports_neither_inductor_nor_dynamo_in_the_users_process(tmp_path, monkeypatch):
    # the user's process loaded a symbolic region through inductor, and asked whether torch.compile
    # runs here first: seconds of imports and vector-ISA probes in the upgrade thread, holding the
    # interpreter the user's calls need
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "squall"))
    program = textwrap.dedent(f"""
        import sys, torch, squall
        import squall_inductor.worker as inductor_worker
        from squall_inductor import InductorExecutor
        inductor_worker.kept_folder = lambda: {str(tmp_path / "kept")!r}

        def f(x):
            return torch.softmax(torch.tanh(x) * 3 + 1, -1).sum(-1)

        ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
        jfn = squall.jit(f, executors=[ex, "torch"], dynamic=True)
        x = torch.randn(4, 6, 8)
        torch.testing.assert_close(jfn(x), f(x))
        assert squall.wait_for_upgrades(jfn, timeout=300)
        (upgrade,) = squall.upgrades(jfn)
        assert upgrade.status == "upgraded", upgrade
        for x in (torch.randn(4, 6, 8), torch.randn(3, 11, 8), torch.randn(5, 2, 8)):
            torch.testing.assert_close(jfn(x), f(x))
        print(upgrade.compiled_in)
        print(sorted(m for m in ("torch._inductor", "torch._dynamo") if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("in the compile worker process") and lines[1] == "[]", lines


def test_a_region_unloadable_while_the_interpreter_exits_says_nothing(monkeypatch):
    # a background upgrade still loading at exit: the load's atexit hook is refused then
    from squall_inductor import worker

    error = RuntimeError("can't register atexit after shutdown")
    monkeypatch.setattr(worker, "compiling_stopped", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        worker._warn_unloadable("/kept/region.bin", error)
    monkeypatch.setattr(worker, "compiling_stopped", lambda: False)
    with pytest.warns(squall.SquallWarning, match="could not be loaded .*atexit.* it is compiled again"):
        worker._warn_unloadable("/kept/region.bin", error)
