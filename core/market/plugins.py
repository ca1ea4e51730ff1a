"""Discovery: the marketplace of executors, filled by plugins through pluggy.

A `Marketplace` owns a `pluggy.PluginManager` for the hooks in `squall.market.hookspecs`. It
registers the built-in torch executor module and every entry point of the group
`squall`, then calls each plugin's hooks once: operations first, executors second.
Whatever goes wrong in someone else's package (an import error, a hook implementation
that matches no spec, a hook that raises, a hook returning nonsense) is recorded in
`load_errors` and that plugin is skipped: compilation never breaks because of it. "Raises"
means any `BaseException` but `KeyboardInterrupt` (a plugin calling `sys.exit()` at import
does not end the host), and "nonsense" includes an executor object that breaks the contract
(`executor_problem`): it is left out, alone, so one bad executor cannot break the sorting or
planning of the healthy ones.

Marketplaces are objects; tests build their own. `default_marketplace()` builds the
one `squall.jit` uses, lazily, on first use.
"""
from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from ..ltorch.base import SquallWarning
from . import hookspecs
from .executor import Executor
from .fusion import FusionExecutor
from .operations import OperationRegistry

__all__ = [
    "PluginError",
    "Marketplace",
    "default_marketplace",
    "reset_default_marketplace",
    "BUILTIN_PLUGINS",
    "executor_problem",
]

ENTRY_POINT_GROUP = "squall"
DISABLE_ENV = "SQUALL_DISABLE_PLUGINS"
# plugin name -> module; registered before entry points, through the same hooks
BUILTIN_PLUGINS = {"torch": "squall.market.torch_executor"}
USER = "<user>"  # the plugin name of executors added from plain code (add_operator_executor)


@dataclass(frozen=True)
class PluginError:
    """A plugin that could not contribute: which one, from which distribution, at what stage, why."""

    plugin: str
    distribution: str
    stage: str  # "import", "validation" (hooks that do not match the contract), a hook name, or "disable"
    error: str

    def __str__(self) -> str:
        where = f" (distribution {self.distribution})" if self.distribution else ""
        return f"plugin {self.plugin!r}{where} failed at {self.stage}: {self.error}"


def _describe(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"SystemExit({e.code!r}): the plugin tried to exit the process"
    return f"{type(e).__name__}: {e}"


def _shown(value: Any) -> str:
    """A plugin's value in a message: literals of plain types as themselves, anything else by
    type (its own __repr__ is someone else's code, and may raise)."""
    if value is None or type(value) in (bool, int, float, str):
        return repr(value)
    return f"a {type(value).__name__}"


# what the planner, the config and the CLI call on every executor
_REQUIRED_METHODS = ("is_available", "availability", "implementation_for", "offer", "claimed_ops", "describe_op")
_FUSION_METHODS = ("fusion_pass", "compile_region", "left_out_reason")


def executor_problem(ex: object) -> str | None:
    """Why `ex` cannot go on the market, or None when it keeps the executor contract.

    Checked: it is an `Executor`; its name is a str and a Python identifier; `default_rank`
    is an int (a str rank would make sorting the market a TypeError for everyone);
    `default` and `supports_autograd` are bools; the methods squall calls are callable.
    """
    if not isinstance(ex, Executor):
        return f"returned {type(ex).__name__}, not an Executor"
    name = getattr(ex, "name", None)
    if type(name) is not str or not name.isidentifier():
        return f"an executor's name must be a Python identifier (a str), got {_shown(name)}"
    what = f"executor {name!r}"
    rank = getattr(ex, "default_rank", None)
    if type(rank) is not int:
        return f"{what}: default_rank must be an int, got {_shown(rank)}"
    for flag in ("default", "supports_autograd"):
        value = getattr(ex, flag, None)
        if type(value) is not bool:
            return f"{what}: {flag} must be a bool, got {_shown(value)}"
    required = _REQUIRED_METHODS + (_FUSION_METHODS if isinstance(ex, FusionExecutor) else ())
    missing = [m for m in required if not callable(getattr(ex, m, None))]
    if missing:
        return f"{what} ({type(ex).__name__}) does not provide callable {', '.join(missing)}"
    return None


def _one_line(e: BaseException) -> str:
    # pluggy's validation messages span lines; load errors print one per line
    return " ".join(str(e).split())


def _unknown_hooks(names: list[str]) -> str:
    specs = [n for n in dir(hookspecs) if n.startswith("squall_")]
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, specs, n=1)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"@hookimpl {', '.join(parts)} matches no squall hook ({', '.join(specs)}); the plugin is left out"


def _disabled_from_env() -> frozenset[str] | None:
    value = os.environ.get(DISABLE_ENV)
    if value is None:
        return None
    return frozenset(n.strip() for n in value.split(",") if n.strip())


class Marketplace:
    """Installed executors by name, custom operations, and what failed to load.

    `entry_point_group=None` skips entry-point discovery, `builtin=False` leaves out the
    torch executor, and `plugins` registers extra plugin objects (name, object) as if they
    had been found through entry points. `disabled` defaults to $SQUALL_DISABLE_PLUGINS.
    """

    def __init__(
        self,
        *,
        entry_point_group: str | None = ENTRY_POINT_GROUP,
        builtin: bool = True,
        plugins: Iterable[tuple[str, object]] = (),
        disabled: Iterable[str] | None = None,
    ):
        self.plugin_manager = pluggy.PluginManager("squall")
        self.plugin_manager.add_hookspecs(hookspecs)
        self.operations = OperationRegistry()
        self.load_errors: list[PluginError] = []
        from_env = disabled is None and _disabled_from_env() is not None
        self.disabled = frozenset(disabled) if disabled is not None else (_disabled_from_env() or frozenset())
        self._executors: dict[str, Executor] = {}
        self._origin: dict[str, str] = {}  # executor name -> plugin name
        self._defaults: dict[str, bool] = {}  # executor name -> in the default list
        self._distributions: dict[str, str] = {}  # plugin name -> distribution
        for name in self.disabled:
            if name in BUILTIN_PLUGINS:
                self.load_errors.append(PluginError(name, "squall", "disable", "built-in plugins cannot be disabled"))
            else:
                self.plugin_manager.set_blocked(name)
        fresh: list[str] = []
        if builtin:
            for name, module in BUILTIN_PLUGINS.items():
                if self._register(name, lambda module=module: importlib.import_module(module), "squall"):
                    fresh.append(name)
        for name, obj in plugins:
            if self._register(name, lambda obj=obj: obj, ""):
                fresh.append(name)
        if entry_point_group is not None:
            fresh.extend(self._load_entry_points(entry_point_group))
        self._collect(self._check_pending(fresh))
        self._warn_unknown_disabled(
            (BUILTIN_PLUGINS if builtin else {}).keys() | {name for name, _ in plugins} | self._entry_point_names(entry_point_group),
            f"${DISABLE_ENV}" if from_env else "disabled=",
        )
        for name in BUILTIN_PLUGINS if builtin else ():
            failed = next((e for e in self.load_errors if e.plugin == name and e.stage != "disable"), None)
            if failed is not None:
                # squall's own executor failing is a bug in squall, not someone else's package
                raise RuntimeError(f"squall: the built-in {str(failed).removeprefix('plugin ')}")

    # --- loading ---

    @staticmethod
    def _entry_point_names(group: str | None) -> set[str]:
        if group is None:
            return set()
        try:
            return {ep.name for ep in importlib.metadata.entry_points(group=group)}
        except Exception:  # noqa: BLE001 - broken metadata of another package: nothing to compare with
            return set()

    def _warn_unknown_disabled(self, known: set[str], where: str) -> None:
        """A disabled name that is no plugin here is most likely a typo: say so, and what is there."""
        for name in sorted(self.disabled - known):
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            warnings.warn(
                f"squall: {where} names {name!r}, which is no installed plugin{hint}; "
                f"installed plugins: {', '.join(sorted(known)) or 'none'}",
                SquallWarning,
                stacklevel=4,
            )

    def _register(self, name: str, load: Callable[[], object], distribution: str) -> bool:
        if self.plugin_manager.is_blocked(name):
            return False
        try:
            self.plugin_manager.register(load(), name=name)
        except pluggy.PluginValidationError as e:  # a hookimpl whose arguments the spec does not have
            self.load_errors.append(PluginError(name, distribution, "validation", _one_line(e)))
            return False
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - someone else's package must not break ours, nor exit
            self.load_errors.append(PluginError(name, distribution, "import", _describe(e)))
            return False
        self._distributions[name] = distribution
        return True

    def _load_entry_points(self, group: str) -> list[str]:
        """Load each entry point on its own, so that one broken package does not hide the others."""
        loaded = []
        # by name, so that which of two clashing plugins wins does not depend on sys.path order
        for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda ep: ep.name):
            pm = self.plugin_manager
            if pm.is_blocked(ep.name) or pm.get_plugin(ep.name) is not None:
                continue
            dist = ep.dist.name if ep.dist is not None else ""
            try:
                pm.load_setuptools_entrypoints(group, name=ep.name)
            except pluggy.PluginValidationError as e:
                self.load_errors.append(PluginError(ep.name, dist, "validation", _one_line(e)))
                continue
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - an import error (or sys.exit) in a plugin is recorded, not raised
                self.load_errors.append(PluginError(ep.name, dist, "import", _describe(e)))
                continue
            if pm.get_plugin(ep.name) is not None:
                self._distributions[ep.name] = dist
                loaded.append(ep.name)
        return loaded

    def _check_pending(self, plugin_names: list[str]) -> list[str]:
        """The plugins of `plugin_names` left after pluggy's `check_pending()`.

        A hook implementation that matches no spec (`squall_register_executor`, one letter
        short) would otherwise never be called, and the plugin would vanish without a word:
        each plugin that has one is recorded, with the hooks it meant, and unregistered.
        """
        pm = self.plugin_manager
        while True:
            try:
                pm.check_pending()
            except pluggy.PluginValidationError as e:
                # pluggy stops at the first offender; record it, take it out, and look again
                name = pm.get_name(e.plugin) or repr(e.plugin)
                unknown = sorted(
                    caller.name for caller in pm.get_hookcallers(e.plugin) or ()
                    if not caller.has_spec()
                    and any(impl.plugin is e.plugin and not impl.optionalhook for impl in caller.get_hookimpls())
                )
                self.load_errors.append(PluginError(name, self._distributions.get(name, ""), "validation", _unknown_hooks(unknown)))
                pm.unregister(e.plugin)
            else:
                return [n for n in plugin_names if pm.get_plugin(n) is not None]

    def _call_each(self, hook: str, plugin_names: list[str], **kwargs: Any) -> list[tuple[str, Any]]:
        """Call `hook` of each named plugin separately; a raising implementation is recorded."""
        wanted = set(plugin_names)
        results = []
        for impl in getattr(self.plugin_manager.hook, hook).get_hookimpls():
            if impl.plugin_name not in wanted:
                continue
            try:
                result = impl.function(**{k: kwargs[k] for k in impl.argnames})
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - a plugin's hook that raises (or exits) is skipped
                self.load_errors.append(PluginError(impl.plugin_name, self._distributions.get(impl.plugin_name, ""), hook, _describe(e)))
                continue
            results.append((impl.plugin_name, result))
        return results

    def _collect(self, plugin_names: list[str]) -> None:
        self._call_each("squall_register_operations", plugin_names, operations=self.operations)
        for plugin, result in self._call_each("squall_register_executors", plugin_names, operations=self.operations):
            dist = self._distributions.get(plugin, "")
            if result is None:
                continue
            items = result if isinstance(result, (list, tuple)) else [result]
            for ex in items:
                try:
                    problem = executor_problem(ex)
                except KeyboardInterrupt:
                    raise
                except BaseException as e:  # noqa: BLE001 - an attribute of the plugin's object raised
                    problem = f"inspecting the returned {type(ex).__name__} raised {_describe(e)}"
                if problem is not None:
                    self.load_errors.append(PluginError(plugin, dist, "squall_register_executors", problem))
                    continue
                if ex.name in self._executors:
                    error = f"executor {ex.name!r} is already provided by plugin {self._origin[ex.name]!r}"
                    self.load_errors.append(PluginError(plugin, dist, "squall_register_executors", error))
                    continue
                if not ex.distribution and dist:
                    ex.distribution = dist
                if not ex.version and dist:
                    try:
                        ex.version = importlib.metadata.version(dist)
                    except importlib.metadata.PackageNotFoundError:
                        pass
                self._add(ex, plugin, default=getattr(ex, "default", True))

    def _add(self, ex: Executor, plugin: str, *, default: bool) -> None:
        self._executors[ex.name] = ex
        self._origin[ex.name] = plugin
        self._defaults[ex.name] = default

    def register_plugin(self, plugin: object, *, name: str, distribution: str = "") -> bool:
        """Register one more plugin object and collect its operations and executors."""
        if not self._register(name, lambda: plugin, distribution) or not self._check_pending([name]):
            return False
        self._collect([name])
        return True

    # --- executors added from plain code ---

    def add_executor(self, ex: Executor, *, default: bool = True) -> None:
        """Put `ex` on the market (replacing an executor added the same way under the same name)."""
        if not isinstance(ex, Executor):
            raise TypeError(f"only an Executor can go on the market, got {type(ex).__name__}")
        problem = executor_problem(ex)
        if problem is not None:
            raise TypeError(f"squall: {problem}")
        origin = self._origin.get(ex.name)
        if origin is not None and origin != USER:
            raise ValueError(f"executor name {ex.name!r} is taken by plugin {origin!r}")
        self._add(ex, USER, default=default)

    def remove_executor(self, name: str) -> Executor:
        """Take an executor off the market; returns it."""
        if name not in self._executors:
            raise KeyError(f"no executor named {name!r}; installed: {', '.join(self.names())}")
        self._origin.pop(name)
        self._defaults.pop(name)
        return self._executors.pop(name)

    # --- queries ---

    def names(self) -> list[str]:
        """Installed executor names, in default-rank order."""
        return [ex.name for ex in self.executors()]

    def executors(self) -> list[Executor]:
        """Every installed executor, available or not, by default rank (torch last)."""
        return sorted(self._executors.values(), key=lambda ex: (ex.name == "torch", ex.default_rank, ex.name))

    def get(self, name: str) -> Executor | None:
        return self._executors.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._executors

    def plugin_of(self, name: str) -> str:
        """The plugin that provided executor `name`."""
        return self._origin[name]

    def in_defaults(self, name: str) -> bool:
        """Whether executor `name` joins the default list when available."""
        return self._defaults.get(name, False)

    def default_executors(self) -> list[Executor]:
        """Every installed, available executor that joins the defaults, by declared rank, torch last."""
        return [ex for ex in self.executors() if self._defaults[ex.name] and ex.availability()]

    def load_error_for(self, name: str) -> PluginError | None:
        """The recorded failure of plugin `name`, if any (explains why an executor is missing)."""
        return next((e for e in self.load_errors if e.plugin == name), None)


_default: Marketplace | None = None


def default_marketplace() -> Marketplace:
    """The marketplace `squall.jit` uses: built on first use from the installed plugins."""
    global _default
    if _default is None:
        _default = Marketplace()
    return _default


def reset_default_marketplace() -> None:
    """Forget the default marketplace; the next use discovers plugins again."""
    global _default
    _default = None
