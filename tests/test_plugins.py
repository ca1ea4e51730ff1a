"""Discovery through real package metadata, custom operations, faults, add_operator_executor."""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import squall
from squall.extend import add_operator_executor
from squall.market import plugins
from squall.market.plugins import Marketplace
from squall.tools.cli import main
from example_executor.install import activate, deactivate, install_distribution, install_example

EXAMPLE_MODULES = (
    "squall_example_executor", "broken_plugin", "raising_plugin", "junk_plugin", "twin_plugin", "typo_plugin",
    "exiting_plugin", "exiting_hook_plugin", "badrank_plugin", "nameless_plugin", "halfmade_plugin", "healthy_plugin",
)

BROKEN = "import squall\nraise ImportError('needs libfoo.so, which is not installed')\n"
RAISING = """
from squall.extend import hookimpl
@hookimpl
def squall_register_executors():
    raise RuntimeError('license server unreachable')
"""
JUNK = """
from squall.extend import hookimpl
@hookimpl
def squall_register_executors():
    return ["not an executor"]
"""
TWIN = """
from squall.extend import OperatorExecutor, hookimpl
@hookimpl
def squall_register_executors():
    return [OperatorExecutor("example")]
"""
TYPO = """
from squall.extend import OperatorExecutor, hookimpl
@hookimpl
def squall_register_executor():
    return [OperatorExecutor("typo")]
"""


@pytest.fixture(autouse=True)
def default_priority(monkeypatch):
    # these tests are about the defaults a plugin joins; conftest pins the core's tests to torch
    monkeypatch.delenv("SQUALL_EXECUTORS", raising=False)


@pytest.fixture
def site(tmp_path):
    """The example executor installed in a fresh site folder on sys.path; the default market rebuilt."""
    path = install_example(tmp_path / "site")
    activate(path)
    plugins.reset_default_marketplace()
    sys.modules.pop("squall_example_executor", None)
    yield path
    deactivate(path, EXAMPLE_MODULES)
    plugins.reset_default_marketplace()


def _ours(names: list[str]) -> list[str]:
    """The names these tests installed, in order: other installed plugins (CI has them all) aside."""
    return [n for n in names if n in {"example", "torch", "mine"}]


EXITING = "import sys\nsys.exit('no GPU here, bye')\n"
EXITING_HOOK = """
import sys
from squall.extend import hookimpl
@hookimpl
def squall_register_executors():
    sys.exit(3)
"""
BAD_RANK = """
from squall.extend import OperatorExecutor, hookimpl
@hookimpl
def squall_register_executors():
    return [OperatorExecutor("badrank", default_rank="10")]
"""
NAMELESS = """
from squall.extend import Executor, hookimpl
class Nameless(Executor):
    def __init__(self):
        pass  # never calls Executor.__init__: no name, no rank
@hookimpl
def squall_register_executors():
    return [Nameless()]
"""
HALF_MADE = """
from squall.extend import OperatorExecutor, hookimpl
class HalfMade(OperatorExecutor):
    implementation_for = None
@hookimpl
def squall_register_executors():
    return [HalfMade("halfmade"), OperatorExecutor("halfmade_ok", default_rank=7)]
"""
HEALTHY = """
import torch
from squall.extend import OperatorExecutor, hookimpl
@hookimpl
def squall_register_executors():
    ex = OperatorExecutor("healthy", default_rank=20)
    ex.register_implementation("torch.exp", torch.exp)
    return [ex]
"""


def _faulty(site: Path) -> None:
    faulty = [("broken_plugin", BROKEN), ("raising_plugin", RAISING), ("junk_plugin", JUNK), ("twin_plugin", TWIN), ("typo_plugin", TYPO)]
    for plugin, source in faulty:
        install_distribution(site, f"squall-{plugin.replace('_', '-')}", "1.0", {plugin: plugin}, {f"{plugin}.py": source})


def _calls():
    import squall_example_executor

    return squall_example_executor.CALLS


def test_discovered_through_installed_metadata_and_used_by_the_planner(site):
    market = Marketplace()
    assert _ours(market.names()) == ["example", "torch"]
    ex = market.get("example")
    assert (ex.distribution, ex.version, market.plugin_of("example")) == ("squall-example-executor", "0.3.1", "example")
    # what choices remembered on disk are keyed by: a new release of the plugin is judged afresh
    assert ex.release() == "0.3.1 squall-example-executor==0.3.1"
    assert market.get("torch").release() == f"{torch.__version__} squall=={importlib.metadata.version('squall')}"  # squall's own

    fn = squall.jit(lambda x: torch.exp(x) * 2)
    x = torch.randn(3, 4)
    before = dict(_calls())
    torch.testing.assert_close(fn(x), torch.exp(x) * 2)
    executed = squall.last_traces(fn).source
    assert "example_exp" in executed  # the example executor's implementation is what the code calls
    assert _calls()["exp"] == before.get("exp", 0) + 1
    assert _ours(fn.executors.names) == ["example", "torch"]


def test_cli_lists_the_installed_executor(site, capsys):
    assert main(["executors", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["executors"]}
    assert rows["example"]["distribution"] == "squall-example-executor"
    assert rows["example"]["available"] is True
    assert sorted(rows["example"]["ops"]) == ["example.scaled_tanh", "example.tanh_scale", "prims.mul", "torch.exp"]
    assert main(["executors"]) == 0
    table = capsys.readouterr().out
    assert "example" in table and "squall-example-executor" in table and "0.3.1" in table


def test_python_dash_m_finds_the_plugin_in_a_fresh_process(site):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "squall", "executors", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    names = [r["name"] for r in json.loads(done.stdout)["executors"]]
    assert _ours(names) == ["example", "torch"]


def test_custom_operation_from_a_plugin(site):
    market = Marketplace()
    plugins._default = market
    scaled_tanh = market.operations.get("example.scaled_tanh")
    x = torch.randn(5)
    expected = torch.tanh(x) * 3.0
    torch.testing.assert_close(scaled_tanh(x, 3.0), expected)  # eagerly: its reference

    fn = squall.jit(lambda x: scaled_tanh(x, 3.0) + 1)
    before = _calls()["scaled_tanh"]
    torch.testing.assert_close(fn(x), expected + 1)
    assert _calls()["scaled_tanh"] == before + 1
    assert "example_tanh_scale" in squall.last_traces(fn).source

    # without the example executor, torch runs the reference the operation was defined with
    fn = squall.jit(lambda x: scaled_tanh(x, 3.0) + 1, executors=["torch"])
    torch.testing.assert_close(fn(x), expected + 1)
    assert _calls()["scaled_tanh"] == before + 1


def test_faulty_plugins_are_recorded_and_skipped(site, capsys):
    _faulty(site)
    market = Marketplace()
    errors = {e.plugin: e for e in market.load_errors}
    assert errors["broken_plugin"].stage == "import"
    assert errors["broken_plugin"].distribution == "squall-broken-plugin"
    assert "libfoo.so" in errors["broken_plugin"].error
    assert errors["raising_plugin"].stage == "squall_register_executors"
    assert "license server unreachable" in errors["raising_plugin"].error
    assert "not an Executor" in errors["junk_plugin"].error
    assert "already provided by plugin 'example'" in errors["twin_plugin"].error
    assert (errors["typo_plugin"].stage, errors["typo_plugin"].distribution) == ("validation", "squall-typo-plugin")
    assert "did you mean 'squall_register_executors'?" in errors["typo_plugin"].error
    assert _ours(market.names()) == ["example", "torch"]

    # compilation goes on with what did load
    fn = squall.jit(lambda x: torch.exp(x))
    x = torch.randn(2)
    torch.testing.assert_close(fn(x), torch.exp(x))
    assert "example_exp" in squall.last_traces(fn).source

    # `squall executors` shows the failures and says so in its exit code
    assert main(["executors"]) == 1
    out = capsys.readouterr().out
    assert "not loaded: plugin 'broken_plugin' (distribution squall-broken-plugin) failed at import" in out

    # naming the broken one is an error that says why it is missing
    with pytest.raises(squall.market.config.UnknownExecutorError, match="libfoo.so"):
        squall.jit(lambda x: x, executors=["broken_plugin"])


def test_plugins_that_exit_or_break_the_executor_contract_are_contained(site):
    for plugin, source in [
        ("exiting_plugin", EXITING),
        ("exiting_hook_plugin", EXITING_HOOK),
        ("badrank_plugin", BAD_RANK),
        ("nameless_plugin", NAMELESS),
        ("halfmade_plugin", HALF_MADE),
        ("healthy_plugin", HEALTHY),
    ]:
        install_distribution(site, f"squall-{plugin.replace('_', '-')}", "2.0", {plugin: plugin}, {f"{plugin}.py": source})
    market = Marketplace()  # the test process is still here: sys.exit was contained
    errors = {e.plugin: e for e in market.load_errors}
    assert (errors["exiting_plugin"].stage, errors["exiting_plugin"].distribution) == ("import", "squall-exiting-plugin")
    assert "SystemExit('no GPU here, bye')" in errors["exiting_plugin"].error
    assert errors["exiting_hook_plugin"].stage == "squall_register_executors"
    assert "SystemExit(3)" in errors["exiting_hook_plugin"].error
    bad_rank = errors["badrank_plugin"]
    assert (bad_rank.stage, bad_rank.distribution) == ("squall_register_executors", "squall-badrank-plugin")
    assert "executor 'badrank': default_rank must be an int, got '10'" in bad_rank.error
    assert "plugin 'badrank_plugin' (distribution squall-badrank-plugin)" in str(bad_rank)
    assert "name must be a Python identifier (a str), got None" in errors["nameless_plugin"].error
    assert "executor 'halfmade' (HalfMade) does not provide callable implementation_for" in errors["halfmade_plugin"].error
    # the bad executor is left out alone: its healthy sibling and the other plugins are on the market
    assert {"example", "healthy", "halfmade_ok", "torch"} <= set(market.names())
    assert not {"badrank", "halfmade"} & set(market.names())

    # and every jit works (a str rank next to a healthy plugin used to make sorting the market a TypeError)
    fn = squall.jit(lambda x: torch.exp(x) + 1)
    x = torch.randn(3)
    torch.testing.assert_close(fn(x), torch.exp(x) + 1)
    assert "example_exp" in squall.last_traces(fn).source


def test_keyboard_interrupt_from_a_plugin_is_not_swallowed():
    class Interrupted:
        @squall.extend.hookimpl
        def squall_register_executors(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Marketplace(entry_point_group=None, plugins=[("interrupted", Interrupted())])


def test_executors_added_from_code_are_validated_too():
    market = Marketplace(entry_point_group=None)
    with pytest.raises(TypeError, match="executor 'ranked': default_rank must be an int, got 1.5"):
        market.add_executor(squall.extend.OperatorExecutor("ranked", default_rank=1.5))
    assert market.names() == ["torch"]


def test_a_plugin_checker_or_availability_that_exits_is_contained():
    def exits(*args, **kwargs):
        raise SystemExit(1)

    quitter = squall.extend.OperatorExecutor("quitter")
    quitter.register_implementation("torch.exp", torch.exp, checker=exits)
    fn = squall.jit(lambda x: torch.exp(x), executors=[quitter, "torch"])
    torch.testing.assert_close(fn(torch.zeros(2)), torch.ones(2))
    [decision] = [d for d in squall.last_traces(fn).plan.decisions if d.bsym.sym.id == "torch.exp"]
    assert decision.executor == "torch" and "checker raised SystemExit" in dict(decision.declined)["quitter"]

    leaving = squall.extend.OperatorExecutor("leaving")
    leaving.is_available = exits
    assert not leaving.availability() and "is_available() raised SystemExit" in leaving.availability().reason

    answers = squall.extend.OperatorExecutor("answers")
    answers.is_available = lambda: False  # a bool rather than an Availability: still usable, with a reason
    assert not answers.availability() and answers.availability().reason == "is_available() returned False"


def test_disable_plugins_by_environment(site, monkeypatch):
    monkeypatch.setenv("SQUALL_DISABLE_PLUGINS", "example, other")
    with pytest.warns(squall.SquallWarning, match=r"\$SQUALL_DISABLE_PLUGINS names 'other', which is no installed plugin; installed plugins: .*example"):
        market = Marketplace()
    assert _ours(market.names()) == ["torch"]
    assert market.load_errors == []
    monkeypatch.setenv("SQUALL_DISABLE_PLUGINS", "exampel")
    with pytest.warns(squall.SquallWarning, match=r"'exampel', which is no installed plugin \(did you mean 'example'\?\)"):
        assert "example" in Marketplace().names()
    monkeypatch.setenv("SQUALL_DISABLE_PLUGINS", "torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a known name, though one that cannot be disabled: no warning
        market = Marketplace()
    assert _ours(market.names()) == ["example", "torch"]  # the built-in executor cannot be disabled
    assert market.load_errors[0].stage == "disable"


def test_plugin_objects_register_through_the_same_hooks():
    class Plugin:
        @squall.extend.hookimpl
        def squall_register_executors(self):
            return [squall.extend.OperatorExecutor("mine", default_rank=5)]

    market = Marketplace(entry_point_group=None, plugins=[("mine", Plugin())])
    assert market.names() == ["mine", "torch"]
    assert market.plugin_of("torch") == "torch"
    assert Marketplace(entry_point_group=None, builtin=False).names() == []


def test_a_misspelled_hook_implementation_is_reported_and_the_plugin_left_out():
    class Typo:
        @squall.extend.hookimpl
        def squall_register_operations(self, operations):
            operations.define("typo.op", meta=lambda x: x)

        @squall.extend.hookimpl
        def squall_register_executor(self):  # one letter short: pluggy alone would never call it
            return [squall.extend.OperatorExecutor("typo")]

    class Fine:
        @squall.extend.hookimpl
        def squall_register_executors(self):
            return [squall.extend.OperatorExecutor("fine", default_rank=5)]

    market = Marketplace(entry_point_group=None, plugins=[("typo", Typo()), ("fine", Fine())])
    assert market.names() == ["fine", "torch"]  # the others still register
    [error] = market.load_errors
    assert (error.plugin, error.stage) == ("typo", "validation")
    assert "'squall_register_executor' (did you mean 'squall_register_executors'?)" in error.error
    assert "typo.op" not in market.operations  # left out whole, not half registered
    assert market.plugin_manager.get_plugin("typo") is None

    # registered later, the same check runs
    assert market.register_plugin(Typo(), name="typo_again") is False
    assert market.load_errors[-1].plugin == "typo_again"


def test_both_hooks_name_the_registry_operations():
    import inspect

    from squall.market import hookspecs

    for spec in (hookspecs.squall_register_operations, hookspecs.squall_register_executors):
        assert list(inspect.signature(spec).parameters) == ["operations"]

    class OldName:
        @squall.extend.hookimpl
        def squall_register_operations(self, registry):
            pass

    [error] = Marketplace(entry_point_group=None, builtin=False, plugins=[("old", OldName())]).load_errors
    assert error.stage == "validation" and "'registry'" in error.error and "\n" not in error.error


# --- the shape of the contract: one public face -------------------------------------------------

def test_plugins_import_only_the_public_face():
    from test_layout import ROOT, module_imports

    for path in sorted((ROOT / "plugins").glob("*/squall_*/**/*.py")) + sorted((ROOT / "tests" / "example_executor").rglob("*.py")):
        internal = {m for m in module_imports(path, "plugin.module") if m.startswith("squall") and m != "squall.extend"}
        assert not internal, f"{path.relative_to(ROOT)} imports {sorted(internal)}: import them from squall.extend"


def test_squall_executors_is_a_plain_function():
    import inspect

    import squall.market.torch_executor  # importing the built-in executor's module leaves squall.executors alone

    assert inspect.isfunction(squall.executors) and squall.executors is sys.modules["squall.tools.explain"].executors
    assert "torch" in [row.name for row in squall.executors()]
    assert [row.name for row in squall.executors(Marketplace(entry_point_group=None))] == ["torch"]
    assert squall.market.plugins.BUILTIN_PLUGINS == {"torch": "squall.market.torch_executor"}


# --- planning as on a machine where an executor is available ------------------------------------


def _cuda_exp_executor() -> squall.extend.OperatorExecutor:
    """An executor for CUDA tensors whose library is missing everywhere (so unavailable, GPU or not)."""
    ex = squall.extend.OperatorExecutor("cuda_exp", default_rank=5, requires=("no_such_library_squall_test",))
    ex.register_implementation("torch.exp", torch.exp, checker=lambda a: a.device.type == "cuda")
    return ex


def test_assume_available_plans_a_cuda_trace_as_where_the_executor_runs():
    from squall.frontend.tracing import trace_program
    from squall.compiler.planner import plan
    from squall.proxies import TensorProxy

    ex, torch_ex = _cuda_exp_executor(), Marketplace(entry_point_group=None).get("torch")
    stand_in = TensorProxy("x", shape=(4, 8), dtype=torch.float32, device="cuda")  # no GPU needed to plan
    trace = trace_program(lambda x: torch.exp(x) + 1, (stand_in,), {})[0]
    assert not ex.availability() and "no_such_library_squall_test" in ex.availability().reason
    assert plan(trace, [ex, torch_ex]).plan.decisions[0].executor == "torch"  # passed over: unavailable here

    with squall.extend.assume_available(ex) as assumed:
        assert assumed == [ex] and ex.availability()
        decision = plan(trace, [ex, torch_ex]).plan.decisions[0]
    assert (decision.bsym.sym.id, decision.executor) == ("torch.exp", "cuda_exp")
    assert not ex.availability()  # on exit, the real answer again


def test_assume_available_by_name_keeps_the_executor_in_the_defaults(monkeypatch):
    class Vendor:
        @squall.extend.hookimpl
        def squall_register_executors(self):
            return [_cuda_exp_executor()]

    market = Marketplace(entry_point_group=None, plugins=[("vendor", Vendor())])
    monkeypatch.setattr(plugins, "_default", market)
    assert market.names() == ["cuda_exp", "torch"]
    assert [ex.name for ex in market.default_executors()] == ["torch"]
    with squall.extend.assume_available("cuda_exp"):
        assert [ex.name for ex in market.default_executors()] == ["cuda_exp", "torch"]
        with squall.extend.assume_available("cuda_exp"):  # blocks nest
            pass
        assert market.get("cuda_exp").availability()
    assert [ex.name for ex in market.default_executors()] == ["torch"]
    with pytest.raises(KeyError, match="installed: cuda_exp, torch"):
        with squall.extend.assume_available("cuda_ex"):
            pass


# --- add_operator_executor, exactly as the docs show it ---------------------------------------


def apex_xentropy_checker(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0):
    return weight is None and label_smoothing == 0.0 and reduction == "mean" and input.ndim == 2


def apex_xentropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0):
    apex_xentropy.calls += 1
    logp = torch.log_softmax(input.float(), dim=1)
    keep = target != ignore_index
    picked = logp.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    return (-(picked * keep).sum() / keep.sum()).to(input.dtype)


apex_xentropy.calls = 0


@pytest.fixture
def clean_default_market(monkeypatch):
    # only the built-in executor: installed plugins (a real squall-apex-xentropy among them) stay out
    market = Marketplace(entry_point_group=None)
    monkeypatch.setattr(plugins, "_default", market)
    yield market


def test_add_operator_executor_as_in_the_docs(clean_default_market):
    squall.extend.add_operator_executor(
        "apex_xentropy",
        {"torch.nn.functional.cross_entropy": ("apex_xentropy", apex_xentropy_checker, apex_xentropy)},
        add_to_default_executors=True)

    def loss(logits, target):
        return F.cross_entropy(logits, target)

    fn = squall.jit(loss)
    assert fn.executors.names == ["apex_xentropy", "torch"]
    logits, target = torch.randn(6, 5), torch.tensor([0, 4, 2, -100, 1, 3])
    before = apex_xentropy.calls
    torch.testing.assert_close(fn(logits, target), F.cross_entropy(logits, target))
    assert apex_xentropy.calls == before + 1
    assert "= apex_xentropy_apex_xentropy(logits, target" in squall.last_traces(fn).source

    # the checker declines label smoothing: torch takes that call
    smooth = squall.jit(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1))
    torch.testing.assert_close(smooth(logits, target), F.cross_entropy(logits, target, label_smoothing=0.1))
    assert apex_xentropy.calls == before + 1
    report = squall.explain(smooth, logits, target)
    assert ("apex_xentropy", "checker declined") in report.rows[0].declined


def test_add_operator_executor_with_an_op_of_today_and_only_when_named(clean_default_market):
    calls = []

    def exp_impl(a):
        calls.append(a.shape)
        return torch.exp(a)

    add_operator_executor("my_exp", {"torch.exp": ("fast_exp", None, exp_impl)}, add_to_default_executors=False)
    x = torch.randn(3)
    squall.jit(torch.exp)(x)
    assert calls == []  # not in the defaults
    fn = squall.jit(lambda x: torch.exp(x), executors=["my_exp"])
    torch.testing.assert_close(fn(x), torch.exp(x))
    assert calls == [torch.Size([3])]
    assert "my_exp_fast_exp" in squall.last_traces(fn).source

    with pytest.raises(KeyError, match="torch.exq"):
        add_operator_executor("bad", {"torch.exq": ("e", None, exp_impl)})
    with pytest.raises(TypeError, match="operator name, checker or None, implementation"):
        add_operator_executor("bad", {"torch.exp": (exp_impl,)})
