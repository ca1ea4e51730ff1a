"""Regions compiled in squall-inductor's worker process: where, with what results, what the
user's process sees meanwhile, and what happens when the worker is gone.

Each compile costs seconds (and the worker's start a few more), so the regions are tiny and few.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch

import squall

squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
from squall.extend import load_source  # noqa: E402
from squall_inductor import CompiledRegion, InductorExecutor  # noqa: E402
from squall_inductor.regions import load_region, region_payload  # noqa: E402
from squall_inductor.symbolic import SymbolicSpec, guard_function  # noqa: E402
from squall_inductor.worker import CompileWorker, RegionCompiler, compile_threads, default_worker  # noqa: E402

needs_cpu_inductor = pytest.mark.skipif(squall_inductor.cpp_compiler() is None, reason="no C++ compiler for inductor's CPU backend")


def _region(source: str, **names):
    namespace = dict(names)
    load_source(source, "test-region", namespace)
    return namespace["region"], source


def test_a_region_travels_as_source_with_its_prims_and_modules_by_name():
    from squall.extend import TORCH_PRIM_IMPLS

    add = TORCH_PRIM_IMPLS["prims.add"]  # a lambda: pickle alone cannot send it
    fn, source = _region("def region(x, y):\n  return (prim_add(torch.sin(x), y) * 2,)\n", prim_add=add, torch=torch)
    rebuilt = load_region(region_payload(fn, source))
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(rebuilt(x, y), fn(x, y))
    assert rebuilt.__globals__["prim_add"] is add and rebuilt.__globals__["torch"] is torch


def test_a_function_its_module_makes_inside_another_travels_by_its_module_and_name():
    # F.max_pool2d is made by torch's boolean_dispatch: pickle cannot send it by its qualified name
    assert "<locals>" in torch.nn.functional.max_pool2d.__qualname__
    fn, source = _region("def region(x):\n  return (F.max_pool2d(x, 2) + 1,)\n", F=torch.nn.functional)
    pooled = torch.nn.functional.max_pool2d
    fn2, source2 = _region("def region(x):\n  return (pool(x, 2) + 1,)\n", pool=pooled)
    for f, src in ((fn, source), (fn2, source2)):
        rebuilt = load_region(region_payload(f, src))
        x = torch.randn(1, 2, 4, 4)
        torch.testing.assert_close(rebuilt(x), f(x))
    assert load_region(region_payload(fn2, source2)).__globals__["pool"] is pooled


def test_an_aten_operator_a_backward_calls_travels_by_its_name():
    # a training program's backward region calls aten operators (OpOverload), which pickle cannot send:
    # such regions compiled in the user's process instead of the worker
    log_softmax_backward = torch.ops.aten._log_softmax_backward_data.default
    fn, source = _region("def region(g, y):\n  return (op(g, y, 1, torch.float32) * 2,)\n", op=log_softmax_backward, torch=torch)
    with pytest.raises(Exception):
        pickle.dumps(log_softmax_backward)
    rebuilt = load_region(region_payload(fn, source))
    assert rebuilt.__globals__["op"] is log_softmax_backward
    g, y = torch.randn(3, 4), torch.randn(3, 4).log_softmax(1)
    torch.testing.assert_close(rebuilt(g, y), fn(g, y))


def test_a_tensor_propertys_getter_travels_by_its_class_and_name():
    # the torch executor reads `x.T` as torch.Tensor.T's getter, a method-wrapper pickle cannot
    # send: every region with a `.T` compiled in the user's process instead of the worker
    getter = torch.Tensor.T.__get__
    fn, source = _region("def region(x):\n  return (transposed(x) * 2,)\n", transposed=getter)
    with pytest.raises(TypeError):
        pickle.dumps(getter)
    rebuilt = load_region(region_payload(fn, source))
    x = torch.randn(3, 4)
    torch.testing.assert_close(rebuilt(x), fn(x))


def test_a_region_whose_globals_cannot_travel_says_so():
    fn, source = _region("def region(x):\n  return (scale(x),)\n", scale=lambda x: x * 3)
    with pytest.raises((pickle.PicklingError, AttributeError), match="pickle"):
        region_payload(fn, source)


@needs_cpu_inductor
def test_an_upgrade_compiles_in_the_worker_process_and_agrees_with_eager():
    def f(x):
        return torch.tanh(torch.softmax(x, -1) * 3 + 1)

    x = torch.randn(7, 9)
    ex = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    jfn = squall.jit(f, executors=[ex, "torch"])
    torch.testing.assert_close(jfn(x), f(x))  # the torch plan, at once
    assert squall.wait_for_upgrades(jfn, timeout=300)
    (upgrade,) = squall.upgrades(jfn)
    assert upgrade.status == "upgraded", upgrade
    worker = default_worker()
    assert worker.pid is not None and worker.pid != os.getpid()
    assert upgrade.compiled_in == f"in the compile worker process (pid {worker.pid})"
    assert f"compiled in the compile worker process (pid {worker.pid})" in str(upgrade)
    assert squall.last_traces(jfn).plan.regions
    for _ in range(2):
        torch.testing.assert_close(jfn(x), f(x))


@needs_cpu_inductor
def test_module_call_is_untouched_in_this_process_while_an_upgrade_compiles():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(12, 12)

        def forward(self, x):
            return torch.sigmoid(self.lin(x) * 2 - 1).cumsum(-1).exp()

    net, x = Net(), torch.randn(5, 12)
    original = torch.nn.Module.__call__
    seen: set = set()
    stop = threading.Event()

    def watch():  # what an eager module call in the user's thread would go through
        while not stop.is_set():
            seen.add(torch.nn.Module.__call__)
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
        jfn = squall.jit(net, executors=[ex, "torch"])
        with torch.no_grad():
            jfn(x)
            while not squall.wait_for_upgrades(jfn, timeout=0.01):
                torch.testing.assert_close(net(x), Net.forward(net, x))  # eager module calls meanwhile
    finally:
        stop.set()
        watcher.join()
    assert seen == {original}
    assert squall.upgrades(jfn)[0].status == "upgraded", squall.upgrades(jfn)
    with torch.no_grad():
        torch.testing.assert_close(jfn(x), net(x))


@needs_cpu_inductor
@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no os.getpriority here")
def test_the_worker_runs_at_the_lowest_priority_which_its_compilers_inherit():
    # beside the user's thread on a shared core, a worker at nice 10 took a tenth of it; at 19, 1.5%
    worker = default_worker()
    assert worker.wait_ready()
    assert os.getpriority(os.PRIO_PROCESS, worker.pid) == 19


def test_a_region_compile_the_exiting_interpreter_stops_imports_no_dynamo():
    # whether torch.compile runs here is asked only before a compile in this process: a static
    # fallback compiling in the background as the interpreter exits asked it there, and Dynamo's
    # import while the interpreter finalised aborted it ("terminate called without an active exception")
    program = (
        "import sys, torch\n"
        "from squall.extend import load_source, stop_compiling\n"
        "from squall_inductor.worker import CompileWorker, RegionCompiler, WorkerUnavailable, dynamo_unsupported\n"
        "namespace = {'torch': torch}\n"
        "source = 'def region(x):\\n  return (torch.sigmoid(x * 2),)\\n'\n"
        "load_source(source, 'test-region', namespace)\n"
        "closed = CompileWorker(); closed.close()\n"
        "stop_compiling()\n"
        "for in_process in (False, True):\n"
        "    try:\n"
        "        RegionCompiler(namespace['region'], source, worker=closed, in_process=in_process, unsupported=dynamo_unsupported)([torch.randn(3)])\n"
        "    except WorkerUnavailable:\n"
        "        pass\n"
        "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout


@needs_cpu_inductor
def test_a_dead_worker_falls_back_to_compiling_in_this_process_with_a_warning():
    def f(x):
        return (torch.cos(x * 0.5 - 2) * 5,)

    worker = CompileWorker()
    try:
        x = torch.randn(3, 5)
        fn, source = _region("def region(x):\n  return (torch.cos(x * 0.5 - 2) * 5,)\n", torch=torch)
        first = RegionCompiler(fn, source, worker=worker)
        region = CompiledRegion(fn, [x], compile=first)
        torch.testing.assert_close(region(x), f(x))
        assert first.where == f"in the compile worker process (pid {worker.pid})"
        os.kill(worker.pid, signal.SIGKILL)
        second = RegionCompiler(fn, source, worker=worker)
        y = torch.randn(4, 6)
        with pytest.warns(squall.SquallWarning, match=r"compile worker process \(pid \d+\) stopped.*compile in this process"):
            again = CompiledRegion(fn, [y], compile=second)
        assert second.where.startswith("in this process (the compile worker process")
        torch.testing.assert_close(again(y), f(y))
        torch.testing.assert_close(region(x), f(x))  # what it compiled before still runs here
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # one warning, not one per region
            third = RegionCompiler(fn, source, worker=worker)
            torch.testing.assert_close(CompiledRegion(fn, [x * 2], compile=third)(x * 2), f(x * 2))
    finally:
        worker.close()


@needs_cpu_inductor
def test_a_region_compiled_before_loads_from_the_cache_folder_without_asking_the_worker(tmp_path):
    fn, source = _region("def region(x):\n  return (torch.sigmoid(x) * 4 - torch.tensor([1.0, 2.0, 3.0]),)\n", torch=torch)
    x = torch.randn(5, 3)
    first = RegionCompiler(fn, source, worker=default_worker())
    torch.testing.assert_close(CompiledRegion(fn, [x], compile=first)(x), fn(x))
    assert first.where.startswith("in the compile worker process")
    # the artifact, its tensor constants, and its direct load: the wrapper and one kernel library
    kept = {name.split(".", 1)[1] for name in os.listdir(tmp_path / "kept")}
    assert {"bin", "bin.constants", "bin.direct"} < kept and len(kept) == 4 and [k for k in kept if k.endswith(".so")]
    later = CompileWorker()  # as in a later process: it never answers a request
    try:
        again = RegionCompiler(fn, source, worker=later)
        region = CompiledRegion(fn, [x], compile=again)
        assert again.where == f"before, loaded from {tmp_path / 'kept'}" and later.pid is None
        for y in (x, x * 3 - 1):
            torch.testing.assert_close(region(y), fn(y))
        # other sizes are another region for inductor: compiled by the worker, not loaded
        other = RegionCompiler(fn, source, worker=later)
        z = torch.randn(2, 3)
        torch.testing.assert_close(CompiledRegion(fn, [z], compile=other)(z), fn(z))
        assert other.where == f"in the compile worker process (pid {later.pid})" and later.pid is not None
    finally:
        later.close()


@needs_cpu_inductor
def test_a_symbolic_region_compiled_before_loads_with_its_guards_without_asking_the_worker(tmp_path):
    fn, source = _region("def region(x):\n  return (torch.sigmoid(x * 2 + 1).sum(1) - torch.tensor([1.0, 2.0]),)\n", torch=torch)
    spec = SymbolicSpec({"s0": 5}, [((3, "s0", 2), torch.float32, torch.device("cpu"), (0, 1, 2))])
    first = RegionCompiler(fn, source, worker=default_worker())
    compiled, guards = first.symbolic(spec)
    assert first.where.startswith("in the compile worker process")
    kept = os.listdir(tmp_path / "kept")  # the artifact, its tensor constants, its guards, its direct bundle and kernels
    assert {n.rsplit('.', 1)[-1] for n in kept} >= {"bin", "constants", "guards", "direct", "so"}, kept
    later = CompileWorker()  # as in a later process: it never answers a request
    try:
        again = RegionCompiler(fn, source, worker=later)
        loaded, kept_guards = again.symbolic(spec)
        assert again.where == f"before, loaded from {tmp_path / 'kept'}" and later.pid is None
        assert kept_guards == guards
        admits = guard_function(kept_guards, [3])
        for length in (5, 9, 30):  # one compilation for every length its guards admit
            x = torch.randn(3, length, 2)
            assert admits([x])
            torch.testing.assert_close(tuple(loaded(x)), fn(x))
        # other memory orders are another compilation: by the worker, not loaded
        other = RegionCompiler(fn, source, worker=later)
        other.symbolic(spec.with_orders([(1, 0, 2)]))
        assert other.where == f"in the compile worker process (pid {later.pid})" and later.pid is not None
    finally:
        later.close()


@needs_cpu_inductor
def test_a_damaged_kept_region_is_compiled_again(tmp_path):
    fn, source = _region("def region(x):\n  return (torch.cos(x) * 7 + 2,)\n", torch=torch)
    x = torch.randn(4, 4)
    torch.testing.assert_close(CompiledRegion(fn, [x], compile=RegionCompiler(fn, source, worker=default_worker()))(x), fn(x))
    for name in os.listdir(tmp_path / "kept"):
        (tmp_path / "kept" / name).unlink()  # a new file: one this process loaded stays mapped as it was
        (tmp_path / "kept" / name).write_bytes(b"not an artifact")
    again = RegionCompiler(fn, source, worker=default_worker())
    torch.testing.assert_close(CompiledRegion(fn, [x], compile=again)(x), fn(x))
    assert again.where.startswith("in the compile worker process")


@needs_cpu_inductor
def test_a_region_with_tensor_constants_compiles_in_the_worker():
    # make_fx keeps torch.tensor(...) as graph attributes, which a saved artifact does not hold:
    # the worker lifts them to inputs and this process passes them (GPT-2's attention builds two)
    fn, source = _region("def region(x):\n  return (x * torch.tensor([1.0, 2.0, 3.0]) + torch.tensor(0.5), x.sum(0))\n", torch=torch)
    compiler = RegionCompiler(fn, source, worker=default_worker())
    x = torch.randn(4, 3)
    region = CompiledRegion(fn, [x], compile=compiler)
    assert compiler.where.startswith("in the compile worker process")
    torch.testing.assert_close(region(x), fn(x))


@needs_cpu_inductor
def test_a_worker_that_cannot_start_falls_back_with_a_warning(monkeypatch):
    monkeypatch.setattr(squall_inductor.worker, "_WORKER_MAIN", "import sys; sys.exit('no torch here')")
    worker = CompileWorker()
    fn, source = _region("def region(x):\n  return (torch.cos(x * 0.5 - 2) * 5,)\n", torch=torch)
    x = torch.randn(3, 5)
    compiler = RegionCompiler(fn, source, worker=worker)
    with pytest.warns(squall.SquallWarning, match="stopped .exit code 1; its last words: no torch here"):
        region = CompiledRegion(fn, [x], compile=compiler)
    torch.testing.assert_close(region(x), fn(x))
    worker.close()


@needs_cpu_inductor
def test_the_worker_times_a_region_against_its_torch_calls_where_asked():
    fn, source = _region("def region(x):\n  return (torch.softmax(x, -1) * 2 + 1,)\n", torch=torch)
    compiler = RegionCompiler(fn, source, worker=default_worker(), time_budget_s=0.02)
    CompiledRegion(fn, [torch.randn(16, 16)], compile=compiler)
    torch_s, inductor_s = compiler.timings
    assert 0 < torch_s < 1 and 0 < inductor_s < 1


_EXITS_MID_COMPILE = """
import time, torch, squall
from squall_inductor import InductorExecutor
ex = InductorExecutor(include_matmuls=True, autotune=False, choices_path=None, min_eager_seconds=0)
f = lambda x, w: torch.relu(x @ w).cumsum(0).sin() * 3
jfn = squall.jit(f, executors=[ex, "torch"])
jfn(torch.randn(9, 9), torch.randn(9, 9))
time.sleep({delay})
print("done", time.monotonic(), flush=True)
"""


@needs_cpu_inductor
@pytest.mark.parametrize("delay", [0.0, 6.0])
def test_the_interpreter_exits_promptly_and_quietly_during_an_upgrade(delay, tmp_path):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), SQUALL_CACHE_DIR=str(tmp_path / "squall"))
    result = subprocess.run([sys.executable, "-c", _EXITS_MID_COMPILE.format(delay=delay)], env=env,
                            capture_output=True, text=True, timeout=300)
    exited = time.monotonic()
    assert result.returncode == 0, result.stderr
    word, finished = result.stdout.split()
    assert word == "done"
    assert result.stderr.strip() == "", result.stderr
    # from the program's last line to the process's end (one machine-wide monotonic clock): the
    # start is left out, as importing torch on a loaded machine can take half a minute
    assert exited - float(finished) < 20


@needs_cpu_inductor
def test_the_worker_starts_at_jit_and_the_jit_does_not_wait_for_it(monkeypatch):
    monkeypatch.setattr(squall_inductor.worker, "_worker", None)
    jfn = squall.jit(lambda x: torch.relu(x * 2 + 1).sum(-1), executors=["inductor", "torch"])
    worker = squall_inductor.worker._worker
    try:
        assert worker is not None and worker._process is not None and worker._process.poll() is None
        assert not worker._ready  # started, not waited for: its imports and warm-up overlap the first calls
        x = torch.randn(4, 8)
        torch.testing.assert_close(jfn(x), torch.relu(x * 2 + 1).sum(-1))
        assert squall.wait_for_upgrades(jfn, timeout=300)
        (upgrade,) = squall.upgrades(jfn)
        assert f"pid {worker.pid}" in upgrade.compiled_in or upgrade.status == "nothing to fuse", upgrade
        torch.testing.assert_close(jfn(x), torch.relu(x * 2 + 1).sum(-1))
    finally:
        if worker is not None:
            worker.close()


def test_a_jit_does_not_wait_for_a_compile_in_flight_in_the_worker(monkeypatch):
    """squall.jit starts the worker (the executor's prepare) under the lock a request holds while
    the worker compiles: jitting a second model waited for the first one's background upgrade to
    finish compiling (minutes at the worker's low priority on a busy machine)."""
    monkeypatch.setattr(squall_inductor.worker, "_worker", None)
    worker = default_worker()
    worker.start()
    jitted = threading.Event()
    try:
        with worker._lock:  # as while a region compiles in the worker
            threading.Thread(target=lambda: (squall.jit(lambda x: x + 1, executors=["inductor", "torch"]), jitted.set()), daemon=True).start()
            assert jitted.wait(20), "squall.jit waited for the compile in flight"
    finally:
        worker.close()


@pytest.mark.parametrize("executors, subprocess_setting", [(["torch"], "1"), (["inductor", "torch"], "0")])
def test_no_worker_starts_where_inductor_is_left_out_or_compiles_in_process(monkeypatch, executors, subprocess_setting):
    monkeypatch.setattr(squall_inductor.worker, "_worker", None)
    monkeypatch.setenv("SQUALL_INDUCTOR_SUBPROCESS", subprocess_setting)
    jfn = squall.jit(lambda x: x * 2 + 1, executors=executors, wait=False)
    x = torch.randn(3)
    torch.testing.assert_close(jfn(x), x * 2 + 1)
    squall.wait_for_upgrades(jfn, timeout=300)
    assert squall_inductor.worker._worker is None


_ISA_PROBE = """
import torch
from torch._inductor import cpu_vec_isa
from squall_inductor.warm_up import WarmUp, forget_vector_isa, guess_vector_isa
builds = []
failing = {failing!r}  # the instruction sets whose test builds and compiles fail here
def check_build(self, code):
    builds.append(str(self))
    return str(self) not in failing
cpu_vec_isa.VecISA.check_build = check_build
if {ours}:
    warm_up = WarmUp()
    warm_up.isa_guessed = guess_vector_isa()
    guessed, built_for_guess = str(cpu_vec_isa.pick_vec_isa()), len(builds)
    def region_compile():  # a compile fails where the picked set is one this compiler cannot build
        if str(cpu_vec_isa.pick_vec_isa()) in failing:
            raise RuntimeError("CppCompileError")
        return str(cpu_vec_isa.pick_vec_isa())
    compiled_for = warm_up.compile(region_compile, with_header=True)
    print(repr((guessed, built_for_guess, compiled_for, [str(i) for i in cpu_vec_isa.valid_vec_isa_list()])))
else:
    print(repr((str(cpu_vec_isa.pick_vec_isa()), [str(i) for i in cpu_vec_isa.valid_vec_isa_list()])))
"""


def _probe(ours: bool, failing: tuple[str, ...]) -> tuple:
    script = _ISA_PROBE.format(failing=failing, ours=ours)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"})
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])


@needs_cpu_inductor
@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="the guess is for x86 CPUs")
def test_the_worker_guesses_the_vector_isa_inductor_would_pick_without_a_test_build():
    picked, listed = _probe(False, ())
    guessed, builds, compiled_for, guessed_list = _probe(True, ())
    assert (guessed, compiled_for, guessed_list) == (picked, picked, listed)
    assert builds == 0


@needs_cpu_inductor
@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="the guess is for x86 CPUs")
def test_a_compile_that_fails_for_the_guessed_vector_isa_is_repeated_after_inductors_own_probe():
    first, listed = _probe(False, ())
    if first == "INVALID_VEC_ISA" or len(listed) < 2:
        pytest.skip("this CPU lists fewer than two vector instruction sets")
    # the compiler cannot build the set the CPU's flags suggest: inductor's probe drops it
    picked, probed_list = _probe(False, (first,))
    guessed, _, compiled_for, final_list = _probe(True, (first,))
    assert guessed == first and picked != first
    assert (compiled_for, final_list) == (picked, probed_list)


def test_a_compile_that_fails_for_another_reason_raises_its_own_error_after_one_probe():
    from squall_inductor.warm_up import WarmUp

    warm_up, calls = WarmUp(), []
    warm_up.isa_guessed = True

    def failing():
        calls.append(1)
        raise ValueError("a region inductor cannot lower")

    with pytest.raises(ValueError, match="cannot lower"):
        warm_up.compile(failing, with_header=True)
    assert len(calls) == 1 and not warm_up.isa_guessed  # the probe picked the same set: no second try
    with pytest.raises(ValueError, match="cannot lower"):
        warm_up.compile(failing, with_header=True)
    assert len(calls) == 2  # no guess left to blame: no probe, no retry


def test_a_failing_cuda_region_keeps_the_guess_and_runs_no_cpu_probe(monkeypatch):
    import squall_inductor.warm_up
    from squall_inductor.warm_up import WarmUp

    probes = []
    monkeypatch.setattr(squall_inductor.warm_up, "forget_vector_isa", lambda: probes.append(1))
    warm_up, calls = WarmUp(), []
    warm_up.isa_guessed = True

    def failing():
        calls.append(1)
        raise ValueError("a CUDA region inductor cannot lower")

    with pytest.raises(ValueError, match="cannot lower"):
        warm_up.compile(failing, with_header=True, on_cpu=False)
    # its kernels do not use the CPU's vector set: the error is reported at once, the guess stands
    assert calls == [1] and probes == [] and warm_up.isa_guessed


@needs_cpu_inductor
@pytest.mark.skipif(torch.cuda.is_available(), reason="a worker on a machine with CUDA builds no CPU header (its regions need none)")
def test_regions_compile_without_the_precompiled_header_until_an_idle_worker_built_it(monkeypatch):
    import torch._inductor.config as inductor_config
    import squall_inductor.warm_up
    from squall_inductor.warm_up import WarmUp

    monkeypatch.setattr(squall_inductor.warm_up, "guess_vector_isa", lambda: False)  # this process's ISA verdicts stay inductor's
    warm_up = WarmUp()
    warm_up.start()
    assert not warm_up.header_built
    assert warm_up.compile(lambda: inductor_config.cpp_cache_precompile_headers) is False  # no header build on its way
    warm_up.build_header()  # the worker was idle
    assert warm_up.header_built
    assert warm_up.compile(lambda: inductor_config.cpp_cache_precompile_headers) is inductor_config.cpp_cache_precompile_headers


@needs_cpu_inductor
def test_the_timeline_records_the_workers_steps_in_order_and_nothing_when_unset(monkeypatch, tmp_path):
    from squall_inductor.timeline import TIMELINE_ENV, mark, read_timeline

    monkeypatch.delenv(TIMELINE_ENV, raising=False)
    mark("unseen")  # no timeline asked for: no file anywhere, no error
    path = tmp_path / "timeline.txt"
    monkeypatch.setenv(TIMELINE_ENV, str(path))
    worker = CompileWorker()  # a fresh worker inherits the setting
    try:
        fn, source = _region("def region(x):\n  return (torch.exp(x) * 3 - 1,)\n", torch=torch)
        x = torch.randn(4, 5)
        region = CompiledRegion(fn, [x], compile=RegionCompiler(fn, source, worker=worker))
        torch.testing.assert_close(region(x), (torch.exp(x) * 3 - 1,))
    finally:
        worker.close()
    steps = read_timeline(str(path))
    ours = [step for _, pid, _, step in steps if pid == os.getpid()]
    theirs = [(step, cpu) for _, pid, cpu, step in steps if pid == worker.pid]
    assert ours[:1] == ["user: worker spawned"] and "user: region sent" in ours and "user: reply received" in ours
    names = [step for step, _ in theirs]
    for earlier, later in [("worker: interpreter started", "worker: imports done"), ("worker: imports done", "worker: request received"),
                           ("worker: request received", "worker: FX graph traced (make_fx)"),
                           ("worker: FX graph traced (make_fx)", "worker: reply ready")]:
        assert names.index(earlier) < names.index(later), names
    cpus = [cpu for _, cpu in theirs]
    assert cpus[0] == 0.0 and cpus == sorted(cpus)  # CPU seconds used so far: never less than at an earlier step
    assert "unseen" not in names + ours


@pytest.mark.parametrize("setting, expected", [("3", 3), (" 12 ", 12), ("0", None), ("-2", None), ("many", None), ("", None)])
def test_compile_threads_reads_a_positive_count_and_otherwise_takes_half_the_cores(monkeypatch, setting, expected):
    monkeypatch.setenv("SQUALL_INDUCTOR_COMPILE_THREADS", setting)
    assert compile_threads() == (expected if expected is not None else max(1, (os.cpu_count() or 2) // 2))


def _state(pid: int) -> str:
    """A process's state letter ('' once it is gone; 'Z' for one dead and not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see whether a process is gone")
def test_a_worker_busy_compiling_dies_with_the_process_that_started_it(tmp_path):
    # the user's process (here `parent`) is killed while its worker is busy: a compile holds the
    # worker's main thread, so the socket's end is not seen until it is over (minutes of CPU)
    worker_code = ("import sys\nfrom squall_inductor.worker_main import exit_with_parent\n"
                   "exit_with_parent(int(sys.argv[1]), poll_s=0.05)\nprint('busy', flush=True)\nwhile True:\n    pass\n")
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"worker = subprocess.Popen([sys.executable, '-c', {worker_code!r}, str(os.getpid())], stdout=subprocess.PIPE, text=True, start_new_session=True)\n"
        "assert worker.stdout.readline().strip() == 'busy'\n"
        "print(worker.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    worker_pid = None
    try:
        worker_pid = int(parent.stdout.readline())
        assert _state(worker_pid) not in ("", "Z")
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _state(worker_pid) not in ("", "Z") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state(worker_pid) in ("", "Z"), "the worker outlived the process that started it"
    finally:
        parent.kill()
        if worker_pid is not None and _state(worker_pid) not in ("", "Z"):
            os.kill(worker_pid, signal.SIGKILL)  # this test's failure leaves no spinning process behind


@pytest.fixture
def fresh_workers(monkeypatch):
    """A fresh default worker and no spare ones; every worker the test started is closed after it."""
    monkeypatch.setattr(squall_inductor.worker, "_worker", None)
    monkeypatch.setattr(squall_inductor.worker, "_spare_workers", [])
    yield squall_inductor.worker
    for worker in [squall_inductor.worker._worker, *squall_inductor.worker._spare_workers]:
        if worker is not None:
            worker.close()


def test_regions_compile_side_by_side_only_where_the_caller_waits_for_them(fresh_workers, monkeypatch):
    monkeypatch.setenv("SQUALL_INDUCTOR_WORKERS", "2")  # (a 1-core machine would say 1)
    executor = InductorExecutor(autotune=False, choices_path=None)
    answers: dict[str, int] = {}

    def asked(label: str, background: bool, awaited: bool) -> None:
        def ask():
            if background:
                squall.market.fusion.mark_background_upgrade_thread()
            if awaited:
                with squall.market.fusion.upgrades_awaited():
                    answers[label] = executor.parallel_compiles()
            else:
                answers[label] = executor.parallel_compiles()
        thread = threading.Thread(target=ask)
        thread.start()
        thread.join()

    asked("beside the user's calls", True, False)
    assert fresh_workers._spare_workers == []  # none started: the user's thread keeps its core
    asked("awaited", True, True)
    asked("in the caller's thread", False, False)
    monkeypatch.setenv("SQUALL_INDUCTOR_SUBPROCESS", "0")
    asked("in this process", False, False)
    assert answers == {"beside the user's calls": 1, "awaited": 2, "in the caller's thread": 2, "in this process": 1}
    assert len(fresh_workers._spare_workers) == 1  # started by the first answer of 2, for the compiles after it


@needs_cpu_inductor
def test_two_islands_compile_side_by_side_each_in_a_worker_of_its_own(fresh_workers, monkeypatch):
    monkeypatch.setenv("SQUALL_INDUCTOR_WORKERS", "2")
    executor = InductorExecutor(autotune=False, choices_path=None, min_eager_seconds=0)
    executor.compiles_in_background = False  # regions compiled at the first call, in this thread

    def program(x, w):
        return torch.tanh((torch.relu(x * 2 + 1) @ w) - 1) * 3  # two islands, the matmul between them with torch

    jfn = squall.jit(program, executors=[executor, "torch"])
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    torch.testing.assert_close(jfn(x, w), program(x, w))
    assert len(squall.last_traces(jfn).plan.regions) == 2, squall.explain(jfn, x, w)
    (spare,) = fresh_workers._spare_workers
    assert fresh_workers._worker._count == 1 and spare._count == 1  # one region each
    assert fresh_workers._worker.pid != spare.pid and spare.pid is not None


def test_concurrent_compiles_claim_different_workers_and_pass_over_a_broken_one(fresh_workers):
    # (no process starts: workers start at their first compile)
    default, spare = fresh_workers.default_worker(), CompileWorker(spare=True)
    fresh_workers._spare_workers.append(spare)
    first, second = fresh_workers.claim_worker(), fresh_workers.claim_worker()
    assert (first, second) == (default, spare)
    fresh_workers.release_worker(first)
    assert fresh_workers.claim_worker() is default  # the one no compile holds
    fresh_workers.release_worker(default)
    fresh_workers.release_worker(spare)
    default.broken = "it stopped"
    assert fresh_workers.claim_worker() is spare and fresh_workers.claim_worker() is spare  # not the broken one, while one serves
    spare.broken = "it stopped too"
    assert fresh_workers.claim_worker() is default  # none serves: its compiles run in this process, one at a time
