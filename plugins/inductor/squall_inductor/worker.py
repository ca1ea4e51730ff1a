"""Inductor regions compiled in a worker process, so the user's process pays only to load them.

Compiling a region in the user's process costs the user twice while squall's background
upgrade runs (squall.runtime.tiers): inductor's tracing and lowering are seconds of Python
holding the GIL the user's thread needs, and its AOT trace (`make_fx(record_module_stack=True)`)
patches `torch.nn.Module.__call__` process-wide, which can break an eager module call the user
makes meanwhile. So regions compile in one persistent worker process (`worker_main`), started
when squall.jit is given inductor (the executor's `prepare`) and run at a lower priority; it
warms inductor up (worker_main.warm_up) while the first calls run on the torch plan, then gets the region as source and example
input layouts, compiles it into inductor's on-disk caches, times it against its torch calls
where asked, and saves the compiled artifact, which this process loads (milliseconds; no
tracing, no patching). The artifact is kept in inductor's cache folder too (`kept_artifact`):
a later process loads the same region for the same inputs and settings from there, without
the worker; a symbolic region is kept with its guard source.

Where the worker cannot start, or dies, regions compile in this process as before, with one
warning saying so; SQUALL_INDUCTOR_SUBPROCESS=0 asks for that from the start. At interpreter
exit the worker is stopped (after squall's region compiles are stopped), without waiting for
a compile in flight.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import torch

from squall.extend import SquallWarning, compiling_stopped, stop_compiling

from squall_inductor.direct_load import DIRECT_SUFFIX, inductor_cache_dir, keep_direct, load_direct
from squall_inductor.regions import EAGER_NUMERICS, compile_with_inductor, layout_of, region_payload
from squall_inductor.symbolic import SymbolicSpec, compile_in_process
from squall_inductor.timeline import mark

__all__ = ["CompileWorker", "CompileUnsupported", "described", "WorkerCompileError", "RegionCompiler", "default_worker", "dynamo_unsupported", "env_flag", "kept_artifact", "kept_folder", "load_kept", "one_unit_enabled", "subprocess_enabled", "claim_worker", "release_worker", "start_spare_workers", "worker_limit", "positive_int_env", "usable_cores"]

# how long a worker may take to start (import torch and inductor) before it counts as failed
START_TIMEOUT_S = 120.0
# how often a wait for the worker checks that it is alive and that the interpreter is not exiting
_POLL_S = 0.1
# the worker's priority, the lowest (squall's background thread runs at +5); it is lowered before
# anything is imported, so the threads torch starts and inductor's compilers inherit it. Where the
# worker or a compiler it started shares a core with the user's thread, the user's gets 98% of it
# (Linux's weights: 1024 against 15; at +10, 110, it got 90%): a compile only takes longer
WORKER_NICE = 19
_WORKER_MAIN = (f"import os, sys, time\nstarted = time.time()\ntry:\n    os.nice({WORKER_NICE})\nexcept OSError:\n    pass\n"
                "from squall_inductor.worker_main import main\nmain(int(sys.argv[1]), started, int(sys.argv[2]), sys.argv[3] == 'spare')\n")


class WorkerCompileError(Exception):
    """inductor could not compile a region in the worker; the message is the worker's error."""


class CompileUnsupported(Exception):
    """inductor cannot compile here at all (RegionCompiler's `unsupported`, or the worker's
    `dynamo_unsupported`, said why); nothing was kept to load."""


class WorkerUnavailable(Exception):
    """The worker could not start or died; the message says why."""


def env_flag(name: str, default: bool) -> bool:
    """A boolean environment setting ("1"/"true"/"yes"/"on" or "0"/"false"/"no"/"off"; else `default`)."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return default


def positive_int_env(name: str) -> int | None:
    """The positive integer the environment variable `name` holds; None where it is unset or holds none."""
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) >= 1 else None


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS tells it, else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def described(error: BaseException) -> str:
    """An error of a compile, as the user's process reports it: its type, its message's first line, and
    where it was raised (the innermost frame), so that a warning about a failed region says where to look."""
    text = str(error).strip()
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (raised at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}{where}"


def one_unit_enabled() -> bool:
    """Whether a static CPU region compiles as one C++ translation unit, with inductor's C++ wrapper
    (SQUALL_INDUCTOR_ONE_UNIT, default on): one compiler run per region instead of one per kernel."""
    return env_flag("SQUALL_INDUCTOR_ONE_UNIT", True)


def compile_threads() -> int:
    """How many compiler processes one region's compile may use (SQUALL_INDUCTOR_COMPILE_THREADS, a
    positive integer): by default half the machine's cores, at least one. A CUDA region's Triton
    kernels then compile side by side on a many-core GPU host (one at a time, llama's whole-model
    region took 4x torch.compile's compile time on an H100), while a 2-core machine keeps its other
    core for the user's calls."""
    return positive_int_env("SQUALL_INDUCTOR_COMPILE_THREADS") or max(1, (os.cpu_count() or 2) // 2)


def subprocess_enabled() -> bool:
    """Whether regions compile in the worker process (SQUALL_INDUCTOR_SUBPROCESS, default on)."""
    return env_flag("SQUALL_INDUCTOR_SUBPROCESS", True)


class CompileWorker:
    """One worker process, started on demand; requests are served one at a time, in order."""

    def __init__(self, *, spare: bool = False):
        self.spare = spare  # started beside the default worker (`start_spare_workers`): it builds no precompiled header
        self._lock = threading.Lock()  # one request at a time
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._stderr: Any = None
        self._folder: str | None = None
        self._count = 0
        self._ready = False  # the worker said it is ready (it imported torch and inductor)
        self.pid: int | None = None
        self.broken: str | None = None  # why regions compile in this process now; None while the worker serves
        self.closed = False
        self.claims = 0  # region compiles holding this worker now (`claim_worker`)

    def start(self) -> None:
        """Start the worker process unless it runs (does not wait for it to be ready, nor for a
        request in flight: that holds the lock while the worker compiles, minutes on a busy machine)."""
        if self._process is not None or self.broken or self.closed:
            return
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._process is not None or self.broken or self.closed:
            return
        try:
            ours, theirs = socket.socketpair()
            self._stderr = tempfile.TemporaryFile()
            # torch's pass that turns Python floats into tensors (for Dynamo's float inputs) finds no
            # graph node for a float a region computes from its size symbols (a batch norm's n / (n - 1))
            # and raises: a region's inputs are all tensors, so inductor computes those floats itself
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TENSORIFY_PYTHON_SCALARS="0")
            self._process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, str(theirs.fileno()), str(os.getpid()), "spare" if self.spare else "default"],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=self._stderr, env=env, start_new_session=True)  # the terminal's Ctrl-C is not its
            theirs.close()
            self._conn = Connection(ours.detach())
            mark("user: worker spawned")
            self._folder = tempfile.mkdtemp(prefix="squall-inductor-worker-")
            atexit.register(self._close_at_exit)
        except Exception as e:  # noqa: BLE001 - no worker: compile in this process
            self._fail(f"the compile worker process could not start ({type(e).__name__}: {e})")

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> bool:
        """Start the worker unless it runs and wait until it has imported torch and inductor; False
        where it could not start (regions then compile in this process)."""
        with self._lock:
            self._start()
            if self.broken or self._conn is None:
                return False
            if not self._ready:
                try:
                    self._wait(timeout)
                except WorkerUnavailable:
                    return False
                self._ready = True
        return True

    def compile(self, payload: bytes, args: Sequence[torch.Tensor], *, time_budget_s: float | None = None) -> tuple[Callable, float | None, float | None, bool]:
        """(compiled, torch_s, inductor_s, kept): the region in `payload` compiled in the worker for
        inputs like `args`, loaded here; the times where a budget was given. A region compiled
        before for the same inputs and settings, in any process, is loaded from inductor's cache
        folder without asking the worker (`load_kept`; then `kept` is True), where no timing is
        asked. Raises CompileUnsupported where torch.compile cannot run in the worker's Python
        (`dynamo_unsupported`, asked there), WorkerCompileError where inductor failed,
        WorkerUnavailable where the worker did."""
        layouts = layout_of(args)
        with self._lock:
            self._start()
            kept = kept_artifact(payload, layouts, _inductor_config()) if not time_budget_s else None
            loaded = load_kept(kept, remake_direct=self._serves()) if kept is not None else None
            if loaded is not None:
                return loaded, None, None, True
        try:
            compiled, reply = self._compile("compile", payload, layouts, time_budget_s, kept=kept)
        except (WorkerUnavailable, WorkerCompileError, CompileUnsupported):
            loaded = load_kept(kept) if kept is not None else None  # kept without its bundle: through inductor after all
            if loaded is None:
                raise
            return loaded, None, None, True
        return compiled, reply[1], reply[2], False

    def compile_symbolic(self, payload: bytes, spec: SymbolicSpec) -> tuple[Callable, str, bool]:
        """(compiled, guard source, kept): the region in `payload` compiled in the worker for the
        spec's symbolic sizes (squall_inductor.symbolic), loaded here. Kept on disk as a static
        region is (`kept_artifact`, for the same spec: its sizes, symbol values and memory orders),
        with its guard source beside it, so a later process loads it without the worker. Raises
        as `compile` does."""
        with self._lock:
            self._start()
            kept = kept_artifact(payload, [("symbolic", spec)], _inductor_config())
            found = self._kept_symbolic(kept, remake_direct=self._serves())
            if found is not None:
                return (*found, True)
        try:
            compiled, reply = self._compile("compile_symbolic", payload, spec, None, kept=kept)
        except (WorkerUnavailable, WorkerCompileError, CompileUnsupported):
            found = self._kept_symbolic(kept)  # kept without its bundle: through inductor after all
            if found is None:
                raise
            return (*found, True)
        return compiled, reply[1], False

    @staticmethod
    def _kept_symbolic(kept: str | None, remake_direct: bool = False) -> tuple[Callable, str] | None:
        """(compiled, guard source) of the symbolic region kept at `kept`; None where none is (or,
        with `remake_direct`, where it has no direct bundle yet: `load_kept`)."""
        if kept is None or not os.path.exists(kept):
            return None
        try:
            guards = _read(kept + ".guards").decode()
            loaded = load_kept(kept, remake_direct=remake_direct)
        except OSError as e:
            _warn_unloadable(kept, e)
            return None
        return None if loaded is None else (loaded, guards)

    def _serves(self) -> bool:
        """Whether the worker process runs and may be asked (under self._lock, after `_start`)."""
        return self._conn is not None and not self.broken and not self.closed

    def _compile(self, kind: str, payload: bytes, shapes: Any, time_budget_s: float | None,
                 *, kept: str | None = None) -> tuple[Callable, tuple]:
        with self._lock:
            self._start()
            if self.broken or self._conn is None:
                raise WorkerUnavailable(self.broken or "the compile worker is closed")
            if not self._ready:
                self._wait(START_TIMEOUT_S)  # ("ready", pid)
                self._ready = True
            self._count += 1
            path = os.path.join(self._folder, f"region-{self._count}.bin")
            config = _inductor_config()
            try:
                self._conn.send((kind, payload, shapes, config, torch.get_num_threads(), time_budget_s, path))
            except OSError as e:
                raise self._died(f"{type(e).__name__}: {e}") from None
            mark("user: region sent")
            reply = self._wait(None)
            mark("user: reply received")
            if reply[0] == "error":
                raise WorkerCompileError(reply[1])
            if reply[0] == "unsupported":
                raise CompileUnsupported(reply[1])
            try:
                bundle = reply[4] if len(reply) > 4 else None
                if kept is not None:  # a symbolic region's guard source is kept beside it
                    # (and, where the worker made no direct bundle, the word that it has none: `load_kept`)
                    beside = {".constants": reply[3], **({".guards": reply[1].encode()} if kind == "compile_symbolic" else {}),
                              **({INDIRECT_SUFFIX: b""} if bundle is None else {})}
                    _keep(path, kept, beside)
                # where the region is not kept (a timed island), its direct load goes beside the
                # artifact in the worker's folder, which is emptied when the worker stops
                direct_at = kept if kept is not None else path
                if bundle is not None:
                    try:
                        keep_direct(direct_at, bundle)
                    except OSError:  # a full or read-only cache folder: loaded through inductor below
                        pass
                direct = _load_direct_or_warn(direct_at) if bundle is not None else None
                if direct is not None:
                    mark("user: region loaded directly")
                    return _loaded(direct, reply[3]), reply
                # imported here, not at the top: seconds (it loads Dynamo), paid once, in the background
                from torch._inductor import CompiledArtifact

                artifact = CompiledArtifact.load(path=path, format="binary")
            finally:
                if os.path.exists(path):
                    os.unlink(path)
        # the region's tensor constants, lifted to trailing inputs (worker_main.lift_constants)
        return _loaded(artifact, reply[3]), reply

    def _wait(self, timeout: float | None) -> tuple:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._conn.poll(_POLL_S):
            if compiling_stopped():
                raise WorkerUnavailable("the interpreter is exiting")
            if self._process.poll() is not None:
                raise self._died(f"exit code {self._process.returncode}")
            if deadline is not None and time.monotonic() > deadline:
                raise self._died(f"it did not start within {timeout:.0f} s")
        try:
            reply = self._conn.recv()
        except (EOFError, OSError) as e:
            raise self._died(f"{type(e).__name__}") from None
        if reply[0] == "ready":
            self.pid = reply[1]
        return reply

    def _died(self, how: str) -> WorkerUnavailable:
        try:  # a closed socket usually means the worker exited: its exit code says more
            how = f"exit code {self._process.wait(1.0)}"
        except subprocess.TimeoutExpired:
            pass
        tail = ""
        if self._stderr is not None:
            try:
                self._stderr.seek(0)
                lines = self._stderr.read().decode(errors="replace").strip().splitlines()
                tail = f"; its last words: {lines[-1]}" if lines else ""
            except (OSError, ValueError):
                pass
        self._fail(f"the compile worker process (pid {self._process.pid}) stopped ({how}{tail})")
        return WorkerUnavailable(self.broken)

    def _fail(self, why: str) -> None:
        self.broken = why
        self._shutdown()
        if not compiling_stopped():
            warnings.warn(f"squall-inductor: {why}; inductor regions compile in this process from now on, "
                          "which slows the user's calls while squall's background upgrade runs", SquallWarning, stacklevel=4)

    def _shutdown(self, wait_s: float = 0.0) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None and self._process.poll() is None:
            try:
                self._process.wait(wait_s)  # an idle worker exits when its socket closes
            except subprocess.TimeoutExpired:
                try:  # a compile in flight: the worker and the C++ compilers it started (its own session)
                    os.killpg(self._process.pid, signal.SIGKILL)
                except OSError:
                    self._process.kill()
                self._process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._folder is not None:
            for name in os.listdir(self._folder):
                os.unlink(os.path.join(self._folder, name))
            os.rmdir(self._folder)
            self._folder = None

    def close(self) -> None:
        """Stop the worker once the request in flight, if any, is answered; later compiles run in this process."""
        self.closed = True
        with self._lock:
            self._shutdown(wait_s=0.5)

    def _close_at_exit(self) -> None:
        # squall's region compiles are stopped first: a request in flight notices within _POLL_S,
        # declines quietly and lets go of the lock, and the worker is killed mid-compile
        stop_compiling()
        self.close()


def dynamo_unsupported() -> str:
    """Why torch.compile cannot run in this Python ("" where it can). It imports Dynamo (seconds):
    the worker asks in its own process, the user's process only before compiling a region itself."""
    try:
        import torch._dynamo  # torch.compile's front end

        if torch._dynamo.is_dynamo_supported():
            return ""
        return (f"torch.compile does not support Python {sys.version_info.major}.{sys.version_info.minor} "
                f"with torch {torch.__version__}")
    except Exception as e:  # noqa: BLE001
        return f"torch.compile cannot be imported: {type(e).__name__}: {e}"


def kept_artifact(payload: bytes, layouts: Sequence, config: dict | None) -> str | None:
    """Where a region compiled from `payload` for inputs of `layouts` under inductor settings
    `config` is kept, in inductor's own cache folder (so TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) means
    cold compiles for it too); None where the key cannot be made (a setting that does not pickle)."""
    try:
        text = pickle.dumps((payload, list(layouts), config, torch.__version__, torch.get_num_threads()))
    except Exception:  # noqa: BLE001 - no stable key: not kept
        return None
    return os.path.join(kept_folder(), hashlib.sha256(text).hexdigest() + ".bin")


# beside a kept region the worker made no direct bundle for (its wrapper needs more of inductor):
# it loads through inductor, and asking the worker again would not change that (`load_kept`)
INDIRECT_SUFFIX = ".indirect"


def kept_folder() -> str:
    """The folder of compiled regions `kept_artifact` names: squall_regions in inductor's cache folder."""
    return os.path.join(inductor_cache_dir(), "squall_regions")


def load_kept(kept: str, *, remake_direct: bool = False) -> Callable | None:
    """The region kept at `kept` (by `kept_artifact`), loaded: directly where the worker left a
    direct bundle (squall_inductor.direct_load: without importing inductor), else through
    inductor's CompiledArtifact; None where nothing is kept there, or where what is kept cannot be
    loaded (then with a warning saying so: the region is compiled again).

    With `remake_direct` (the worker serves), also None where the region has neither a direct bundle
    nor the worker's word that it can have none (INDIRECT_SUFFIX): a region kept by a squall from
    before direct bundles. Loading it through inductor would import Dynamo and inductor into this
    process at every later load (seconds of CPU time beside the user's calls); the worker compiles
    it once more instead, from inductor's warm caches, and keeps its bundle beside it."""
    if not os.path.exists(kept):
        return None
    try:
        constants = _read(kept + ".constants")
        direct = _load_direct_or_warn(kept)
        if direct is not None:
            return _loaded(direct, constants)
        if remake_direct and not os.path.exists(kept + DIRECT_SUFFIX) and not os.path.exists(kept + INDIRECT_SUFFIX):
            return None
        # imported here, not at the top: seconds (it loads Dynamo), and only where no direct bundle serves
        from torch._inductor import CompiledArtifact

        return _loaded(CompiledArtifact.load(path=kept, format="binary"), constants)
    except Exception as e:  # noqa: BLE001 - a damaged or foreign file: compile the region again
        _warn_unloadable(kept, e)
        return None


def _load_direct_or_warn(kept: str) -> Callable | None:
    """The region's direct load (None where it has no bundle, or where the bundle is damaged: then with a warning)."""
    try:
        return load_direct(kept)
    except Exception as e:  # noqa: BLE001 - the artifact beside it still serves
        warnings.warn(f"squall-inductor: the compiled region kept at {kept} could not be loaded directly "
                      f"({type(e).__name__}: {e}); it is loaded through inductor instead", SquallWarning, stacklevel=3)
        return None


def _warn_unloadable(kept: str, error: BaseException) -> None:
    if compiling_stopped():  # the interpreter is exiting (a load registers an atexit hook, refused now): nothing to say
        return
    warnings.warn(f"squall-inductor: the compiled region kept at {kept} could not be loaded "
                  f"({type(error).__name__}: {error}); it is compiled again", SquallWarning, stacklevel=3)


def _keep(path: str, kept: str, beside: dict[str, bytes]) -> None:
    """Copy a compiled artifact to where `kept_artifact` finds it; the files `beside` it (suffix:
    contents: its constants, a symbolic region's guards) first, the artifact last, each by an
    atomic rename, so a reader never sees half of one."""
    try:
        os.makedirs(os.path.dirname(kept), exist_ok=True)
        for target, data in (*((kept + suffix, data) for suffix, data in beside.items()), (kept, _read(path))):
            temporary = f"{target}.{os.getpid()}.tmp"
            with open(temporary, "wb") as f:
                f.write(data)
            os.replace(temporary, target)
    except OSError:  # a full or read-only cache folder: the region is simply compiled again next time
        pass


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _loaded(artifact: Any, constants: bytes) -> Callable:
    """The callable of a loaded artifact, given its lifted tensor constants (pickled) after the inputs."""
    compiled = getattr(artifact, "_compiled_fn", artifact)  # the artifact's own __call__ adds a frame around it
    values = pickle.loads(constants)
    if values:
        return lambda *args: compiled(*args, *values)
    return compiled


def _inductor_config() -> dict:
    """The inductor settings this process changed from their defaults (a user's or a test's patch
    applies in the worker too), and inductor's environment settings and squall's (`one_unit_enabled`,
    which the worker reads here); no settings where inductor is not
    loaded here, so a process that never imported it keys its regions as one whose settings are
    the defaults."""
    environment = {k: v for k, v in os.environ.items() if k.startswith("TORCHINDUCTOR_") and k != "TORCHINDUCTOR_CACHE_DIR"}
    environment["one unit"] = one_unit_enabled()
    environment["eager numerics"] = sorted(EAGER_NUMERICS.items())  # regions kept before it rounded otherwise
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        return {"environment": environment}
    # a setting set to its default (inductor's own loads set some) is no change
    defaults = getattr(config, "_config", {})
    changed = {k: v for k, v in config.save_config_portable().items()
               if not config._is_default(k) and (k not in defaults or v != getattr(defaults[k], "default", object()))}
    return {"environment": environment, "changed": changed} if changed else {"environment": environment}


_worker: CompileWorker | None = None
_worker_lock = threading.Lock()


# the workers started beside the default one, where regions compile side by side (`start_spare_workers`)
_spare_workers: list[CompileWorker] = []


def default_worker() -> CompileWorker:
    """The process's compile worker (its process starts at the first `start` or compile)."""
    with _worker_lock:
        return _default_worker()


def _default_worker() -> CompileWorker:
    global _worker
    if _worker is None:
        _worker = CompileWorker()
    return _worker


def worker_limit() -> int:
    """How many compile workers may compile regions at once where the caller waits for them
    (SQUALL_INDUCTOR_WORKERS, a positive integer): by default 2 where this process may run on 2
    cores or more, else 1. Each is a process with torch and inductor imported (a few hundred MB)."""
    return positive_int_env("SQUALL_INDUCTOR_WORKERS") or min(2, usable_cores())


def start_spare_workers(count: int) -> None:
    """Start workers beside the default one until `count` serve in all (waiting for none of them)."""
    with _worker_lock:
        while 1 + len(_spare_workers) < count:
            _spare_workers.append(CompileWorker(spare=True))
        spares = _spare_workers[:count - 1]
    for worker in spares:
        worker.start()


def claim_worker() -> CompileWorker:
    """The worker the fewest region compiles hold now (the default one among equals), held for one
    region's compile until `release_worker`: regions compiled side by side each get a worker of
    their own where enough were started (`start_spare_workers`). A broken or closed one is passed
    over while another serves (the default one is taken where none does: its compile then runs here)."""
    with _worker_lock:
        default = _default_worker()
        serving = [w for w in (default, *_spare_workers) if not w.broken and not w.closed] or [default]
        worker = min(serving, key=lambda w: w.claims)
        worker.claims += 1
        return worker


def release_worker(worker: CompileWorker) -> None:
    """The end of a region compile's hold on `worker` (`claim_worker`)."""
    with _worker_lock:
        worker.claims -= 1


# inductor's compile in this process is not thread-safe: regions compiled side by side whose
# workers broke (FusionExecutor.parallel_compiles) compile here one at a time
_in_process_compiles = threading.RLock()


class RegionCompiler:
    """Compiles one region function: for given example inputs (`__call__`, CompiledRegion's
    `compile`) or for symbolic sizes (`symbolic`, SymbolicRegion's `compile`); in the worker
    process where it serves, else in this process. Records where (`where`) and, for the first
    compile with a time budget, the worker's timing of it (`timings`: torch_s, inductor_s).
    Without `in_process`, where the worker cannot serve it raises WorkerUnavailable instead
    (a compile in a background thread of the user's process must not run torch.fx's trace,
    which patches torch.nn.Module process-wide)."""

    def __init__(self, fn: Callable, source: str, *, worker: CompileWorker | None, time_budget_s: float | None = None,
                 in_process: bool = True, unsupported: Callable[[], str] | None = None):
        self.fn, self.source, self.worker = fn, source, worker
        self.unsupported = unsupported  # why inductor cannot compile here ("" where it can): asked only before a compile
        self.in_process = in_process
        self.time_budget_s = time_budget_s
        self.timings: tuple[float, float] | None = None
        self.where = ""

    def __call__(self, args: Sequence[torch.Tensor]) -> Callable:
        done = self._in_worker(lambda payload: self.worker.compile(payload, args, time_budget_s=self.time_budget_s))
        if done is None:
            with _in_process_compiles:
                return compile_with_inductor(self.fn, self._here(args), one_unit=one_unit_enabled())
        compiled, torch_s, inductor_s, kept = done
        if torch_s is not None and inductor_s is not None and self.timings is None:
            self.timings = (torch_s, inductor_s)
        self.time_budget_s = None  # a recompile for another layout is not timed
        if kept:
            self.where = f"before, loaded from {kept_folder()}"
        return compiled

    def symbolic(self, spec: SymbolicSpec) -> tuple[Callable, str]:
        """(compiled, guard source) for the spec's symbolic sizes (squall_inductor.symbolic)."""
        done = self._in_worker(lambda payload: self.worker.compile_symbolic(payload, spec))
        if done is None:
            with _in_process_compiles:
                return compile_in_process(self.fn, self._here(spec), one_unit=one_unit_enabled())
        compiled, guards, kept = done
        if kept:
            self.where = f"before, loaded from {kept_folder()}"
        return compiled, guards

    def _check_supported(self) -> None:
        """Raise CompileUnsupported where inductor cannot compile here (asked before a compile in this
        process only: the question imports Dynamo, seconds of a background upgrade holding the
        interpreter beside the user's calls; the worker asks it itself, and a kept region loads without it)."""
        why = self.unsupported() if self.unsupported is not None else ""
        if why:
            raise CompileUnsupported(why)

    def _here(self, what: Any) -> Any:
        """`what`, where this region may compile in this process and inductor can (else raise): asked
        only then, so neither a compile that may not run here nor one the exiting interpreter stops
        imports Dynamo (`_check_supported`; an import as the interpreter finalises aborts it)."""
        if not self.in_process:
            raise WorkerUnavailable(f"it would compile {self.where}, and this compile may not")
        if compiling_stopped():
            raise WorkerUnavailable("the interpreter is exiting")
        self._check_supported()
        return what

    def _in_worker(self, request: Callable[[bytes], Any]) -> Any:
        """The request's answer from the worker, or None where this process must compile (saying why in `where`)."""
        if self.worker is not None and not self.worker.broken and not self.worker.closed:
            try:
                payload = region_payload(self.fn, self.source)
            except Exception as e:  # noqa: BLE001 - a global that cannot travel: this region compiles here
                self.where = f"in this process (the region cannot be sent to the worker: {type(e).__name__})"
                return None
            try:
                answer = request(payload)
            except WorkerUnavailable:
                if compiling_stopped():
                    raise
                self.where = f"in this process ({self.worker.broken})"
                return None
            self.where = f"in the compile worker process (pid {self.worker.pid})"
            return answer
        if not self.where:
            self.where = "in this process" + (f" ({self.worker.broken})" if self.worker is not None and self.worker.broken else "")
        return None
