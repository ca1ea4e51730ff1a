"""Executor priority lists: which executors a compilation asks, in what order.

Highest first:

1. `squall.jit(fn, executors=[...])`
2. the environment variable `SQUALL_EXECUTORS=a,b`
3. `[tool.squall] executors = [...]` in the nearest pyproject.toml (from the working
   directory up), with per-operation overrides under `[tool.squall.ops]`:
   `"torch.nn.functional.cross_entropy" = ["apex_xentropy", "torch"]`
4. the defaults: every installed, available executor that joins the defaults, by its
   declared rank, torch last.

A list of names is *absolute* (it is the whole list; torch is appended if it is not
named) or *relative*, made only of "+name" (put in front of the defaults, in the order
given) and "-name" (removed from the defaults). An absolute list from the jit call or the
environment replaces everything, per-operation overrides included; a relative one keeps
the project's per-operation overrides. A list of Executor objects is used exactly as given.
An unknown name is an `UnknownExecutorError` listing the installed ones; a named but
unavailable executor is a warning saying why (the planner then passes it over).
"""
from __future__ import annotations

import copy
import difflib
import functools
import os
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ltorch.base import SquallWarning
from .executor import Executor
from .fusion import FusionExecutor
from .operations import resolve_operation
from .plugins import Marketplace, default_marketplace

__all__ = ["background_priority", "background_fusers", "resolve_wait", "WAIT_ENV", "env_flag", "env_switch", "resolve_dynamic", "DYNAMIC_ENV", "AUTOMATIC", "ExecutorPriority", "UnknownExecutorError", "PyprojectError", "resolve_executors", "find_pyproject", "read_pyproject", "ENV_VAR"]

ENV_VAR = "SQUALL_EXECUTORS"
WAIT_ENV = "SQUALL_WAIT"


class UnknownExecutorError(ValueError):
    """A priority list names an executor that is not installed."""


class ExecutorPriority(list):
    """A resolved priority list: the executors, highest first, plus per-operation lists.

    `key` (the executor names, and the per-operation lists) identifies the configuration
    in a cache key; `source` says where the list came from.
    """

    def __init__(self, executors: Sequence[Executor], *, per_op: Mapping[str, Sequence[Executor]] | None = None, source: str = ""):
        super().__init__(executors)
        self.per_op: dict[str, tuple[Executor, ...]] = {k: tuple(v) for k, v in (per_op or {}).items()}
        self.source = source
        self.key: tuple = (
            tuple(ex.name for ex in self),
            tuple(sorted((op, tuple(ex.name for ex in exs)) for op, exs in self.per_op.items())),
        )

    @property
    def names(self) -> list[str]:
        return [ex.name for ex in self]

    def __repr__(self) -> str:
        extra = f", per_op={ {k: [e.name for e in v] for k, v in self.per_op.items()} }" if self.per_op else ""
        return f"ExecutorPriority({self.names}{extra}, source={self.source!r})"


def find_pyproject(start: str | os.PathLike | None = None) -> Path | None:
    """The nearest pyproject.toml from `start` (the working directory) upwards."""
    # (os.path rather than pathlib's objects: every squall.jit looks, two or three times)
    folder = os.path.realpath(start if start is not None else os.getcwd())
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return Path(candidate)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


# the keys [tool.squall] understands; anything else is most likely a typo, and warned about
PYPROJECT_KEYS = ("executors", "ops", "wait", "dynamic")


class PyprojectError(ValueError):
    """A pyproject.toml that squall cannot read, or whose [tool.squall] settings are malformed."""


def read_pyproject(path: Path) -> dict[str, Any]:
    """The `[tool.squall]` table of `path` (empty when absent).

    A file that is not UTF-8 or not valid TOML, a `tool` or `tool.squall` that is not a
    table, or a malformed setting is a `PyprojectError` naming the file and the key; an
    unknown key under `[tool.squall]` is a warning naming the closest known one.
    """
    try:
        with open(path, "rb") as f:
            # parsed once per content: every squall.jit reads it (2 ms a call for this repository's)
            document = _parsed_toml(f.read())
    except UnicodeDecodeError as e:
        raise PyprojectError(f"squall: cannot read {path}: it is not UTF-8 text ({e.reason} at byte {e.start})") from e
    except tomllib.TOMLDecodeError as e:
        raise PyprojectError(f"squall: cannot read {path}: {e}") from e
    except OSError as e:
        raise PyprojectError(f"squall: cannot read {path}: {e.strerror or e}") from e
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise PyprojectError(f"squall: 'tool' in {path} must be a table ([tool.squall]), got {_toml_type(tool)}")
    table = tool.get("squall", {})
    if not isinstance(table, dict):
        raise PyprojectError(f"squall: 'tool.squall' in {path} must be a table ([tool.squall]), got {_toml_type(table)}")
    # the caller's own copy of the one table it reads (copying the whole document was most of a read)
    table = copy.deepcopy(table)
    for key in table:
        if key not in PYPROJECT_KEYS:
            close = difflib.get_close_matches(key, PYPROJECT_KEYS, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            warnings.warn(
                f"squall: unknown key {key!r} under [tool.squall] in {path} is ignored{hint} "
                f"(known keys: {', '.join(PYPROJECT_KEYS)})",
                SquallWarning,
                stacklevel=4,
            )
    executors = table.get("executors")
    if executors is not None and not (isinstance(executors, list) and all(isinstance(n, str) for n in executors)):
        raise PyprojectError(f"squall: [tool.squall] executors in {path} must be a list of executor names, got {_toml_type(executors)}")
    if "wait" in table and not isinstance(table["wait"], bool):
        raise PyprojectError(f"squall: [tool.squall] wait in {path} must be true or false, got {_toml_type(table['wait'])}")
    if "dynamic" in table and table["dynamic"] not in (True, False, AUTOMATIC):
        raise PyprojectError(f"squall: [tool.squall] dynamic in {path} must be true, false or \"auto\", got {table['dynamic']!r}")
    ops = table.get("ops", {})
    if not isinstance(ops, dict) or not all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in ops.values()):
        raise PyprojectError(f"squall: [tool.squall.ops] in {path} must map operation names to lists of executor names")
    return table


@functools.lru_cache(maxsize=8)
def _parsed_toml(content: bytes) -> dict[str, Any]:
    """The TOML document `content` holds (callers copy what they hand out: the cached one is shared)."""
    return tomllib.loads(content.decode())


def _toml_type(value: Any) -> str:
    """A TOML value's kind, with its article ("an integer")."""
    return {str: "a string", int: "an integer", float: "a float", bool: "a boolean", list: "an array"}.get(type(value), f"a {type(value).__name__}")


def _lookup(name: str, market: Marketplace) -> Executor:
    ex = market.get(name)
    if ex is None:
        installed = ", ".join(market.names()) or "none"
        failed = market.load_error_for(name)
        why = f" (its plugin failed to load: {failed.error})" if failed else ""
        others = "".join(f"; {e}" for e in market.load_errors if e is not failed)
        raise UnknownExecutorError(f"squall: unknown executor {name!r}{why}; installed executors: {installed}{others}")
    availability = ex.availability()
    if not availability:
        warnings.warn(
            f"squall: executor {name!r} is unavailable here ({availability.reason}); it will be passed over",
            SquallWarning,
            stacklevel=5,
        )
    return ex


def _is_relative(entry: Any) -> bool:
    return isinstance(entry, str) and entry[:1] in "+-" and entry != ""


def _apply(entries: Sequence[Any], base: Sequence[Executor], market: Marketplace, where: str) -> tuple[list[Executor], bool]:
    """The list `entries` describes, given `base` for relative entries; and whether it was relative."""
    entries = list(entries)
    relative = [e for e in entries if _is_relative(e)]
    if relative and len(relative) != len(entries):
        raise ValueError(f"squall: {where} mixes plain names with +name/-name entries: {entries}")
    if relative:
        front = [_lookup(e[1:], market) for e in relative if e[0] == "+"]
        removed = {_lookup(e[1:], market).name for e in relative if e[0] == "-"}
        front_names = {ex.name for ex in front}
        rest = [ex for ex in base if ex.name not in front_names]
        return [ex for ex in front + rest if ex.name not in removed], True
    out: list[Executor] = []
    for e in entries:
        ex = e if isinstance(e, Executor) else _lookup(e, market) if isinstance(e, str) else None
        if ex is None:
            raise TypeError(f"squall: {where} entries are executor names or Executor objects, got {type(e).__name__}")
        if ex.name not in {x.name for x in out}:
            out.append(ex)
    torch_ex = market.get("torch")
    if torch_ex is not None and "torch" not in {ex.name for ex in out}:
        out.append(torch_ex)  # so that every program still runs
    return out, False


def _split(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]


def resolve_executors(
    requested: Sequence[Executor | str] | None = None,
    *,
    marketplace: Marketplace | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> ExecutorPriority:
    """The priority list in force for a compilation (see the module docstring for the rules)."""
    if requested is not None and not isinstance(requested, (str, bytes)) and all(isinstance(e, Executor) for e in requested):
        return ExecutorPriority(list(requested), source="jit(executors=...)")
    if isinstance(requested, str):
        requested = _split(requested)
    market = marketplace if marketplace is not None else default_marketplace()
    env = os.environ if environ is None else environ
    defaults = market.default_executors()
    env_list = _split(env.get(ENV_VAR, ""))
    pyproject: Path | None = None
    project: dict[str, Any] = {}
    if requested is None and not env_list or any(_is_relative(e) for e in (requested or env_list)):
        # the project's settings matter only where no absolute list is given above them
        pyproject = find_pyproject(cwd)
        project = read_pyproject(pyproject) if pyproject is not None else {}

    if requested is not None:
        chosen, _ = _apply(requested, defaults, market, "executors=")
        source = "jit(executors=...)"
    elif env_list:
        chosen, _ = _apply(env_list, defaults, market, f"${ENV_VAR}")
        source = f"${ENV_VAR}"
    elif project.get("executors") is not None:
        chosen, _ = _apply(project["executors"], defaults, market, f"[tool.squall] executors in {pyproject}")
        source = str(pyproject)
    else:
        chosen, source = list(defaults), "defaults"

    per_op: dict[str, list[Executor]] = {}
    for op_name, entries in project.get("ops", {}).items():
        try:
            op_id = resolve_operation(op_name, market.operations).id
        except KeyError as e:
            raise PyprojectError(f"squall: [tool.squall.ops] in {pyproject}: {e.args[0]}") from None
        per_op[op_id], _ = _apply(entries, chosen, market, f"[tool.squall.ops] {op_name!r} in {pyproject}")
    return ExecutorPriority(chosen, per_op=per_op, source=source)


def env_flag(value: str) -> bool | None:
    """An environment variable's yes or no (None: neither)."""
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def env_switch(name: str, default: bool | None, environ: Mapping[str, str] | None = None) -> bool | None:
    """The yes or no of environment variable `name` (1/true/yes/on or 0/false/no/off); `default`
    where it is unset or empty; a ValueError naming it where it is something else."""
    value = (os.environ if environ is None else environ).get(name, "").strip().lower()
    flag = env_flag(value)
    if flag is not None:
        return flag
    if value:
        raise ValueError(f"squall: ${name} must be 1/true/yes/on or 0/false/no/off, got {value!r}")
    return default


def resolve_wait(
    requested: bool | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> bool:
    """Whether a first call compiles and times fusion regions before it returns (True) or runs
    the torch plan and upgrades in the background (False, the default; squall.runtime.tiers).

    Highest first: `squall.jit(fn, wait=...)`; $SQUALL_WAIT (1/true/yes/on or 0/false/no/off);
    `wait = true` under `[tool.squall]` in the nearest pyproject.toml; False.
    """
    if requested is not None:
        if not isinstance(requested, bool):
            raise TypeError(f"squall.jit: wait must be True, False or None, got {type(requested).__name__}")
        return requested
    flag = env_switch(WAIT_ENV, None, environ)
    if flag is not None:
        return flag
    pyproject = find_pyproject(cwd)
    return bool(read_pyproject(pyproject).get("wait", False)) if pyproject is not None else False


DYNAMIC_ENV = "SQUALL_DYNAMIC"
AUTOMATIC = "auto"  # first call static; a dimension that changes becomes symbolic


def resolve_dynamic(
    requested: bool | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> bool | str:
    """Which tensor dimensions a jitted function traces as symbolic sizes (`squall.symbolic`):
    True (every dimension of 2 or more, from the first call), False (none: every size is a
    constant of the trace), or "auto" (the default: a dimension that changed between two calls
    of one signature becomes symbolic at the recompile).

    Highest first: `squall.jit(fn, dynamic=...)` (None: not given); $SQUALL_DYNAMIC
    (1/true/yes, 0/false/no or auto); `dynamic = true|false|"auto"` under `[tool.squall]` in
    the nearest pyproject.toml; "auto".
    """
    if requested is not None:
        if not isinstance(requested, bool):
            raise TypeError(f"squall.jit: dynamic must be True, False or None (automatic), got {requested!r}")
        return requested
    value = (os.environ if environ is None else environ).get(DYNAMIC_ENV, "").strip().lower()
    flag = env_flag(value)
    if flag is not None:
        return flag
    if value == AUTOMATIC:
        return AUTOMATIC
    if value:
        raise ValueError(f"squall: ${DYNAMIC_ENV} must be 1/true/yes, 0/false/no or auto, got {value!r}")
    pyproject = find_pyproject(cwd)
    return read_pyproject(pyproject).get("dynamic", AUTOMATIC) if pyproject is not None else AUTOMATIC


def background_priority(executors: Sequence[Executor]) -> ExecutorPriority | None:
    """The priority list the first call runs on: `executors` without the available fusion
    executors that compile in the background (their per-operation lists too), or None where
    there are none to leave out (then nothing is tiered)."""
    deferred = {ex.name for ex in background_fusers(executors)}
    if not deferred:
        return None
    per_op = {op: [ex for ex in exs if ex.name not in deferred] for op, exs in (getattr(executors, "per_op", None) or {}).items()}
    source = getattr(executors, "source", "jit(executors=...)")
    return ExecutorPriority([ex for ex in executors if ex.name not in deferred], per_op=per_op,
                            source=f"{source}, without {', '.join(sorted(deferred))} until the background upgrade")


def background_fusers(executors: Sequence[Executor]) -> list[FusionExecutor]:
    """The available fusion executors of `executors` that compile in the background (squall.runtime.tiers)."""
    return [ex for ex in executors if isinstance(ex, FusionExecutor) and ex.compiles_in_background and ex.availability()]
