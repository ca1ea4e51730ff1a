"""Always-on compile records: what a maintainer asks first, kept without the user doing anything.

Each process that compiles writes one *run* file, `<cache>/rage/run-<time>-<pid>-<nonce>.jsonl`
(`<cache>` is $SQUALL_CACHE_DIR, else $XDG_CACHE_HOME/squall, else ~/.cache/squall). Its
first line describes the process: time, command line, squall/torch/Python/OS versions, the
installed executors with their availability and the plugins that failed to load. Then one
line per compilation: the function and where it is defined, input metadata (shapes, dtypes,
devices; never tensor values), the executor list and where it came from, each planned
stage's decisions, regions and plugin errors, compile time per stage, recompilation causes,
the warnings raised, the generated source, and for a failed compilation (or first call) the
exception with its traceback and a reproducer script (`squall.runtime.repro`).

Recording is cheap enough never to turn off: the hot path (a cache hit) never reaches this
module, and a successful compilation's traces are printed as Python only when the process
exits (printing them is the one costly part). The directory is bounded (oldest runs are
pruned first), every process writes only its own file, and nothing here ever fails the
user's program: a read-only or full disk means no record and one warning.
`SQUALL_RAGE=0` turns recording off; `squall rage` reads the records back.
"""
from __future__ import annotations

import atexit
import json
import os
import platform
import secrets
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ..ltorch.base import SquallWarning
from ..market import plugins
from ..proxies import type_string, real_tensor
from ..sources import cache_root
from . import logs
from .repro import reproducer

__all__ = ["Recorder", "CompileRecord", "default_recorder", "rage_dir", "record_compilation", "SWITCH_ENV"]

SWITCH_ENV = "SQUALL_RAGE"
MAX_RUNS = 100  # run files kept; the oldest go first
MAX_TOTAL_BYTES = 64 << 20  # all run files together
MAX_RUN_BYTES = 8 << 20  # one run; past it, records keep their summary but drop traces and source
EXIT_BUDGET_S = 1.0  # time spent printing deferred traces when the process exits
_SHORT = 200  # characters kept of a non-tensor argument's repr


def rage_dir(environ: dict[str, str] | None = None) -> Path:
    """Where records go: $SQUALL_CACHE_DIR/rage, else the platform's user cache dir + squall/rage."""
    return cache_root(environ) / "rage"


def _enabled(environ: dict[str, str] | None = None) -> bool:
    value = (os.environ if environ is None else environ).get(SWITCH_ENV, "1").strip().lower()
    return value not in ("0", "off", "false", "no")


# --- describing things as JSON, without tensor values --------------------------------------------


def describe_value(x: Any) -> dict[str, Any]:
    """An argument as metadata: tensors by shape, dtype, device and requires_grad, never values."""
    if real_tensor(x):
        return {"tensor": True, "shape": list(x.shape), "dtype": str(x.dtype), "device": str(x.device), "requires_grad": x.requires_grad}
    if x is None or isinstance(x, (bool, int, float)):
        return {"type": type(x).__name__, "value": x if not isinstance(x, float) or x == x and abs(x) != float("inf") else repr(x)}
    text = repr(x)
    return {"type": type(x).__name__, "repr": text if len(text) <= _SHORT else text[:_SHORT] + "…"}


def describe_inputs(args: tuple, kwargs: dict) -> list[dict[str, Any]]:
    """Every leaf of the arguments (a tensor, a number, another object), labelled by where it sits."""
    out = []
    for where, tree in [*((f"args[{i}]", a) for i, a in enumerate(args)), *((f"{k}=", v) for k, v in kwargs.items())]:
        leaves, _ = tree_flatten(tree)
        for j, leaf in enumerate(leaves):
            out.append({"where": where if len(leaves) == 1 else f"{where}#{j}", **describe_value(leaf)})
    return out


def _where(fn: Callable) -> dict[str, Any]:
    target = type(fn).forward if isinstance(fn, torch.nn.Module) else fn
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    return {
        "function": getattr(target, "__qualname__", type(fn).__name__) if not isinstance(fn, torch.nn.Module) else type(fn).__qualname__,
        "module_class": isinstance(fn, torch.nn.Module),
        "file": code.co_filename if code is not None else None,
        "line": code.co_firstlineno if code is not None else None,
    }


def _executor_status(executors: Any) -> list[dict[str, Any]]:
    out = []
    for ex in executors:
        try:
            availability = ex.availability()
            available, reason = bool(availability), availability.reason
        except Exception as e:  # noqa: BLE001 - a plugin's availability check is someone else's code
            available, reason = False, f"availability() raised {type(e).__name__}: {e}"
        out.append({"name": ex.name, "version": ex.version, "distribution": ex.distribution, "available": available, "reason": reason})
    return out


def _plan_dict(trace: Any) -> dict[str, Any]:
    plan = trace.plan
    return {
        "trace": trace.name,
        "provenance": trace.provenance,
        "executors": list(plan.executors),
        # compact rows: [operation, depth, executor or None (decomposed), [[executor, why], ...], region]
        "decisions": [[d.bsym.sym.id, d.depth, d.executor, [list(x) for x in d.declined], d.region] for d in plan.decisions],
        "where": sorted({f"{d.bsym.source[0]}:{d.bsym.source[1]}" for d in plan.decisions if d.bsym.source}),
        "regions": [vars(r) for r in plan.regions],
        "unavailable": dict(plan.unavailable),
        "errors": list(plan.errors),
    }


def trace_texts(compilation: Any) -> list[dict[str, str]]:
    """Every stage of a compilation as Python (the costly part of a record)."""
    return [{"name": t.name, "provenance": t.provenance, "text": str(t)} for t in compilation]


def error_dict(e: BaseException) -> dict[str, Any]:
    """An exception with its traceback, as text."""
    return {"type": f"{type(e).__module__}.{type(e).__qualname__}", "message": str(e), "traceback": "".join(traceback.format_exception(e))}


def _os_name() -> str:
    """platform.platform()'s answer ("Linux-6.1.0-x86_64-with-glibc2.36") without its cost: it runs
    `uname -p` in a subprocess and scans the Python binary for its libc (~20 ms of the first compile)."""
    u = platform.uname()  # the processor field, the slow one, is computed only when read
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        libc = ""
    return f"{u.system}-{u.release}-{u.machine}" + (f"-with-{libc.replace(' ', '')}" if libc else "")


def _version(module_name: str) -> str | None:
    """An installed package's version: the imported module's own where it is imported (the
    distribution metadata would be read from disk, ~5 ms the first time), else the metadata's."""
    module = sys.modules.get(module_name)
    found = getattr(module, "__version__", None)
    if isinstance(found, str):
        return found
    try:
        return metadata.version(module_name)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """The process: when, which command, which versions, what is installed (no environment variables
    except squall's own, which say how squall was configured)."""
    market = getattr(plugins, "_default", None)  # read, never built here: discovery costs a plugin import
    return {
        "kind": "run",
        "time": time.time(),
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "executable": sys.executable,
        "versions": {
            "squall": _version("squall"),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "os": _os_name(),
            "numpy": _version("numpy"),
            "pluggy": _version("pluggy"),
            "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "squall_env": {k: v for k, v in os.environ.items() if k.startswith("SQUALL_")},
        "executors": _executor_status(market.executors()) if market is not None else None,
        "plugin_errors": [str(e) for e in market.load_errors] if market is not None else [],
    }


# --- the recorder --------------------------------------------------------------------------------


class Recorder:
    """Appends records to this process's run file in `directory`, keeping the directory bounded.

    Thread-safe; a forked child starts a run file of its own. `write` never raises: the first
    failure turns recording off for the process with one `SquallWarning` saying why.
    """

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        *,
        max_runs: int = MAX_RUNS,
        max_bytes: int = MAX_TOTAL_BYTES,
        max_run_bytes: int = MAX_RUN_BYTES,
        enabled: bool | None = None,
    ):
        self.directory = Path(directory) if directory is not None else rage_dir()
        self.max_runs, self.max_bytes, self.max_run_bytes = max_runs, max_bytes, max_run_bytes
        self.enabled = _enabled() if enabled is None else enabled
        self.path: Path | None = None
        self.disabled_because: str | None = None
        self._lock = threading.RLock()
        self._pid: int | None = None
        self._written = 0
        self._seq = 0
        self._deferred: list[tuple[int, weakref.ref]] = []
        self._atexit = False

    def next_seq(self) -> int:
        """The number of this process's next compilation record (1, 2, ...)."""
        with self._lock:
            self._seq += 1
            return self._seq

    def write(self, record: dict[str, Any]) -> bool:
        """Append one record (a JSON object) to this process's run; False where it could not be."""
        if not self.enabled or self.disabled_because is not None:
            return False
        try:
            with self._lock:
                if self._pid != os.getpid():
                    self._start_run()
                line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
                if self._written + len(line) > self.max_run_bytes and record.get("kind") == "compilation":
                    # a run past its budget keeps what happened, not the bulky texts
                    record = {k: v for k, v in record.items() if k not in ("traces", "source", "reproducer")} | {"truncated": True}
                    line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
                if self._written + len(line) > self.max_run_bytes * 2:
                    return False
                self._append(line)
            return True
        except Exception as e:  # noqa: BLE001 - recording must never fail the user's program
            self._give_up(e)
            return False

    def _append(self, line: str) -> None:
        data = line.encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)  # one write of a whole line: readers never see half a record from a live writer
        finally:
            os.close(fd)
        self._written += len(data)

    def _start_run(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.prune(keep=self.max_runs - 1)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime())
        self.path = self.directory / f"run-{stamp}-{os.getpid()}-{secrets.token_hex(3)}.jsonl"
        self._pid, self._written, self._deferred = os.getpid(), 0, []
        self._append(json.dumps(environment(), default=str, separators=(",", ":")) + "\n")

    def _give_up(self, e: BaseException) -> None:
        with self._lock:
            if self.disabled_because is not None:
                return
            self.disabled_because = f"{type(e).__name__}: {e}"
        warnings.warn(
            f"squall: compile records are off for this process: cannot write to {self.directory} "
            f"({self.disabled_because}); set SQUALL_CACHE_DIR to a writable folder, or SQUALL_RAGE=0 to silence this",
            SquallWarning,
            stacklevel=2,
        )

    def prune(self, keep: int | None = None) -> int:
        """Delete the oldest run files until at most `keep` remain and they fit in `max_bytes`;
        returns how many went. Another process pruning at the same time is harmless."""
        keep = self.max_runs if keep is None else keep
        found = []
        for path in self.directory.glob("run-*.jsonl"):
            try:
                st = path.stat()
            except OSError:
                continue  # pruned by someone else meanwhile
            found.append((st.st_mtime, path, st.st_size))
        found.sort(reverse=True)
        total, removed = 0, 0
        for i, (_, path, size) in enumerate(found):
            total += size
            if i >= keep or total > self.max_bytes:
                try:
                    path.unlink()
                    removed += 1
                except OSError:
                    pass
        return removed

    def clear(self) -> int:
        """Delete every run file; returns how many."""
        removed = 0
        for path in self.directory.glob("run-*.jsonl"):
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        return removed

    def defer_traces(self, seq: int, compilation: Any) -> None:
        """Print `compilation`'s traces when the process exits (if it is still alive then)."""
        if not self.enabled or self.disabled_because is not None:
            return
        with self._lock:
            self._deferred.append((seq, weakref.ref(compilation)))
            if not self._atexit:
                self._atexit = True
                atexit.register(self.flush)

    def flush(self, budget_s: float = EXIT_BUDGET_S) -> None:
        """Write the deferred traces, newest compilations first, within `budget_s`."""
        with self._lock:
            if self._pid != os.getpid():
                return  # a forked child does not write its parent's run
            deferred, self._deferred = self._deferred, []
        deadline = time.perf_counter() + budget_s
        for seq, ref in reversed(deferred):
            compilation = ref()
            if compilation is None or time.perf_counter() > deadline:
                continue
            try:
                self.write({"kind": "traces", "seq": seq, "traces": trace_texts(compilation)})
            except Exception:  # noqa: BLE001 - a trace that fails to print is left out, never raised at exit
                continue


_default: Recorder | None = None
_default_lock = threading.Lock()


def default_recorder() -> Recorder:
    """The recorder compilations write to: built on first use from the environment."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Recorder()
        return _default


def reset_default_recorder() -> None:
    """Forget the default recorder (tests; after changing SQUALL_CACHE_DIR or SQUALL_RAGE)."""
    global _default
    with _default_lock:
        if _default is not None:
            _default.flush()
        _default = None


# --- one compilation's record --------------------------------------------------------------------

# catch_warnings swaps module-level state; two threads doing it at once can leave warnings
# routed to a dead list, so only one compilation at a time captures (the others still record)
_capturing = threading.Lock()


class CompileRecord:
    """What `record_compilation` hands to the compile: callbacks for the stages it sees."""

    def __init__(self, recorder: Recorder, state: Any, args: tuple, kwargs: dict):
        self.recorder = recorder
        self.state = state
        self.traced_trace: Any = None
        self.compilation: Any = None
        self.record: dict[str, Any] = {
            "kind": "compilation",
            "seq": recorder.next_seq(),
            "time": time.time(),
            **_where(state.fn),
            "inputs": describe_inputs(args, kwargs),
            "grad_enabled": torch.is_grad_enabled(),
            "default_dtype": str(torch.get_default_dtype()),
        }

    def traced(self, trace: Any) -> None:
        """Called by the pipeline right after tracing: a failure after this point can be reproduced."""
        self.traced_trace = trace

    def compiled(self, compilation: Any) -> None:
        """Called with the finished compilation (traces, plan, generated source)."""
        self.compilation = compilation

    def finish(self, error: BaseException | None, caught: list, seconds: float) -> None:
        """Complete the record (outcome, plans, warnings, error, reproducer), write it and log it."""
        state, rec = self.state, self.record
        executors = state.executors
        rec["executors"] = {
            "order": [ex.name for ex in executors],
            "per_op": {op: [ex.name for ex in exs] for op, exs in getattr(executors, "per_op", {}).items()},
            "source": getattr(executors, "source", "jit(executors=...)"),
            "status": _executor_status(executors),
        }
        rec["compile_seconds"] = seconds
        rec["recompilation"] = {"compilations": state.stats.misses, "changes": dict(state.stats.changes)}
        rec["warnings"] = [
            {"category": w.category.__name__, "message": str(w.message), "file": w.filename, "line": w.lineno} for w in caught
        ]
        c = self.compilation
        if c is not None:
            rec["seconds"] = dict(c.seconds)
            # later stages carry their planned trace's plan along: one entry per plan
            planned = {id(t.plan): t for t in reversed(c) if t.plan is not None}
            rec["plans"] = [_plan_dict(t) for t in reversed(planned.values())]
            rec["inputs_traced"] = [[p.name, type_string(p)] for p in c.traced.inputs]
            rec["source"] = c.source
        errors = [e for p in rec.get("plans", ()) for e in p["errors"]]
        if error is not None:
            rec["outcome"] = "failed"
            rec["stage"] = "compile" if self.traced_trace is not None else "trace"
            rec["error"] = error_dict(error)
        else:
            rec["outcome"] = "plugin errors" if errors else "ok"
        if error is not None or errors:
            # the failure path: cost does not matter here, and the process may not live to exit
            if c is not None:
                rec["traces"] = trace_texts(c)
            elif self.traced_trace is not None:
                rec["traces"] = [{"name": self.traced_trace.name, "provenance": self.traced_trace.provenance, "text": str(self.traced_trace)}]
            if self.traced_trace is not None:
                rec["reproducer"] = reproducer(self.traced_trace, rec)
        elif c is not None:
            rec["traces"] = None  # printed at exit
        if self.recorder.write(rec) and rec.get("traces", ()) is None:
            self.recorder.defer_traces(rec["seq"], c)
        logs.log_compilation(rec, c)

    def first_call(self, fn: Callable) -> Callable:
        """`fn` for its first call only: a failure there is recorded too, then raised."""

        def first_call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                try:
                    rec = {"kind": "first_call", "seq": self.record["seq"], "time": time.time(), "outcome": "first call failed", "error": error_dict(e)}
                    if self.traced_trace is not None:
                        rec["reproducer"] = reproducer(self.traced_trace, self.record, first_call=True)
                    self.recorder.write(rec)
                    logs.log_failure(self.record, rec)
                except Exception:  # noqa: BLE001 - the user's error is the one to see
                    pass
                raise

        return first_call


@contextmanager
def record_compilation(state: Any, args: tuple, kwargs: dict, recorder: Recorder | None = None) -> Iterator[CompileRecord]:
    """Record the compilation run inside the block for jitted `state` (a JittedFunction).

    Warnings raised inside are recorded and then shown as they would have been; an
    exception is recorded with its traceback and propagates unchanged.
    """
    recorder = recorder if recorder is not None else default_recorder()
    if not (recorder.enabled or logs.active()):
        yield _Off()
        return
    try:
        record = CompileRecord(recorder, state, args, kwargs)
    except Exception:  # noqa: BLE001 - recording must never fail the user's program
        yield _Off()
        return
    start = time.perf_counter()
    capture = _capturing.acquire(blocking=False)
    caught: list = []
    error: BaseException | None = None
    try:
        if capture:
            with warnings.catch_warnings(record=True) as caught:
                try:
                    yield record
                except BaseException as e:  # an interrupted compilation is recorded as such too
                    error = e
                    raise
        else:
            try:
                yield record
            except BaseException as e:
                error = e
                raise
    finally:
        if capture:
            _capturing.release()
            for w in caught:
                # back to whoever shows warnings (the console, pytest, an outer catch_warnings)
                warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
        try:
            record.finish(error, caught, time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 - recording must never fail the user's program
            recorder._give_up(e)


class _Off:
    """The record of a compilation while recording is off: every callback does nothing."""

    def traced(self, trace: Any) -> None:
        pass

    def compiled(self, compilation: Any) -> None:
        pass

    def first_call(self, fn: Callable) -> Callable:
        return fn
