"""Priority lists: jit kwarg > $SQUALL_EXECUTORS > pyproject.toml (+ per-op overrides) > defaults."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from squall.extend import Executor, OperatorExecutor, hookimpl
from squall.market import plugins
from squall.market.config import PyprojectError, UnknownExecutorError, resolve_executors
from squall.market.plugins import Marketplace


def _exp_executor(name: str, **kwargs) -> OperatorExecutor:
    ex = OperatorExecutor(name, **kwargs)
    ex.register_implementation("torch.exp", torch.exp)
    return ex


class Vendors:
    @hookimpl
    def squall_register_executors(self) -> list[Executor]:
        return [
            _exp_executor("fast", default_rank=10),
            _exp_executor("slow", default_rank=20),
            _exp_executor("ghost", default_rank=5, requires=("no_such_library_squall_test>=1.0",)),
            _exp_executor("extra", default_rank=1, default=False),
        ]


@pytest.fixture
def market(monkeypatch, tmp_path):
    monkeypatch.delenv("SQUALL_EXECUTORS", raising=False)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above a fresh temporary folder
    m = Marketplace(entry_point_group=None, plugins=[("vendors", Vendors())])
    monkeypatch.setattr(plugins, "_default", m)
    return m


def program(x):
    return torch.exp(x) + 1


X = torch.randn(4)


def taken(fn) -> str:
    """Who ran torch.exp, read from the plan that produced the executed code; and the numbers match."""
    torch.testing.assert_close(fn(X), torch.exp(X) + 1)
    (who,) = [d.executor for d in squall.last_traces(fn).plan.decisions if d.bsym.sym.id == "torch.exp"]
    assert f"{who}_exp" in squall.last_traces(fn).source
    return who


def test_defaults_are_available_default_executors_by_rank_torch_last(market):
    fn = squall.jit(program)
    assert fn.executors.names == ["fast", "slow", "torch"]
    assert fn.executors.source == "defaults"
    assert taken(fn) == "fast"


def test_jit_keyword_absolute_and_relative(market):
    assert taken(squall.jit(program, executors=["slow"])) == "slow"
    assert squall.jit(program, executors=["slow"]).executors.names == ["slow", "torch"]
    assert squall.jit(program, executors=["torch", "slow"]).executors.names == ["torch", "slow"]
    assert taken(squall.jit(program, executors=["torch", "slow"])) == "torch"
    fn = squall.jit(program, executors=["+extra"])
    assert fn.executors.names == ["extra", "fast", "slow", "torch"]
    assert taken(fn) == "extra"
    fn = squall.jit(program, executors=["-fast"])
    assert fn.executors.names == ["slow", "torch"]
    assert taken(fn) == "slow"
    assert squall.jit(program, executors=["+slow", "-fast"]).executors.names == ["slow", "torch"]


def test_environment_beats_pyproject_and_loses_to_the_keyword(market, monkeypatch, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.squall]\nexecutors = ["fast"]\n')
    monkeypatch.setenv("SQUALL_EXECUTORS", "slow")
    fn = squall.jit(program)
    assert (fn.executors.names, fn.executors.source) == (["slow", "torch"], "$SQUALL_EXECUTORS")
    assert taken(fn) == "slow"
    assert taken(squall.jit(program, executors=["fast"])) == "fast"
    monkeypatch.setenv("SQUALL_EXECUTORS", "-fast,-slow")
    assert taken(squall.jit(program)) == "torch"


def test_nearest_pyproject_and_per_operation_overrides(market, monkeypatch, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.squall]\nexecutors = ["slow"]\n\n[tool.squall.ops]\n"torch.Tensor.exp" = ["extra", "torch"]\n'
    )
    deeper = tmp_path / "src" / "pkg"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)  # found by walking up from the working directory
    fn = squall.jit(program)
    assert fn.executors.names == ["slow", "torch"]
    assert {op: [e.name for e in exs] for op, exs in fn.executors.per_op.items()} == {"torch.exp": ["extra", "torch"]}
    assert taken(fn) == "extra"
    # a relative list keeps the project's per-operation overrides; an absolute one replaces everything
    assert taken(squall.jit(program, executors=["+fast"])) == "extra"
    assert taken(squall.jit(program, executors=["fast"])) == "fast"
    # the configuration is part of the key a compilation is cached under
    assert squall.jit(program).executors.key != squall.jit(program, executors=["fast"]).executors.key


def test_per_operation_override_may_be_relative(market, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.squall.ops]\n"torch.exp" = ["-fast"]\n')
    fn = squall.jit(program)
    assert fn.executors.names == ["fast", "slow", "torch"]
    assert taken(fn) == "slow"


def test_unknown_name_is_an_error_listing_the_installed(market, monkeypatch, tmp_path):
    with pytest.raises(UnknownExecutorError, match=r"unknown executor 'nvfuzer'; installed executors: extra, ghost, fast, slow, torch"):
        squall.jit(program, executors=["nvfuzer"])
    monkeypatch.setenv("SQUALL_EXECUTORS", "+nvfuzer")
    with pytest.raises(UnknownExecutorError, match="nvfuzer"):
        squall.jit(program)
    monkeypatch.delenv("SQUALL_EXECUTORS")
    (tmp_path / "pyproject.toml").write_text('[tool.squall.ops]\n"torch.expp" = ["fast"]\n')
    with pytest.raises(ValueError, match="did you mean"):
        squall.jit(program)
    (tmp_path / "pyproject.toml").write_text('[tool.squall]\nexecutors = "fast"\n')
    with pytest.raises(ValueError, match="must be a list of executor names"):
        squall.jit(program)
    (tmp_path / "pyproject.toml").unlink()
    with pytest.raises(ValueError, match="mixes plain names"):
        squall.jit(program, executors=["fast", "+slow"])


def test_named_but_unavailable_is_a_warning_with_its_reason(market):
    with pytest.warns(squall.SquallWarning, match=r"'ghost' is unavailable here \(library 'no_such_library_squall_test' is not installed\)"):
        fn = squall.jit(program, executors=["ghost", "slow"])
    assert fn.executors.names == ["ghost", "slow", "torch"]
    assert taken(fn) == "slow"
    decision = next(d for d in squall.last_traces(fn).plan.decisions if d.bsym.sym.id == "torch.exp")
    assert decision.declined == [("ghost", "unavailable: library 'no_such_library_squall_test' is not installed")]


def test_executor_objects_are_used_exactly_as_given(market):
    mine = _exp_executor("mine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        priority = resolve_executors([mine])
    assert priority.names == ["mine"] and priority.per_op == {}
    mixed = resolve_executors([mine, "slow"])
    assert mixed.names == ["mine", "slow", "torch"]


def test_an_unknown_pyproject_key_warns_with_the_closest_known_one(market, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.squall]\nexecutor = ["slow"]\n')
    with pytest.warns(squall.SquallWarning, match=r"unknown key 'executor' under \[tool.squall\] in .*pyproject.toml is ignored; did you mean 'executors'\?"):
        fn = squall.jit(program)
    assert fn.executors.names == ["fast", "slow", "torch"]  # ignored, as it says
    (tmp_path / "pyproject.toml").write_text('[tool.squall]\nexecutors = ["slow"]\nflavour = 1\n')
    with pytest.warns(squall.SquallWarning, match=r"unknown key 'flavour'.*known keys: executors, ops"):
        assert squall.jit(program).executors.names == ["slow", "torch"]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"[tool]\nsquall = 3\n", r"'tool.squall' in .*pyproject.toml must be a table \(\[tool.squall\]\), got an integer"),
        (b'tool = "squall"\n', r"'tool' in .*pyproject.toml must be a table"),
        (b"[tool.squall]\nexecutors = [\n", r"cannot read .*pyproject.toml: "),
        (b"[tool.squall]\nexecutors = ['caf\xe9']\n", r"cannot read .*pyproject.toml: it is not UTF-8 text"),
        (b'[tool.squall]\nexecutors = "fast"\n', r"\[tool.squall\] executors in .*pyproject.toml must be a list of executor names, got a string"),
        (b"[tool.squall]\nops = 1\n", r"\[tool.squall.ops\] in .*pyproject.toml must map operation names"),
    ],
    ids=["squall-not-a-table", "tool-not-a-table", "invalid-toml", "not-utf8", "executors-not-a-list", "ops-not-a-table"],
)
def test_a_malformed_pyproject_is_an_error_naming_the_file_and_the_key(market, tmp_path, content, message):
    (tmp_path / "pyproject.toml").write_bytes(content)
    with pytest.raises(PyprojectError, match=message):
        squall.jit(program)


def test_the_pyproject_found_is_the_nearest_file_and_each_read_is_the_callers_own(market, monkeypatch, tmp_path):
    from squall.market.config import find_pyproject, read_pyproject

    (tmp_path / "pyproject.toml").write_text('[tool.squall]\nexecutors = ["slow"]\n[tool.other]\nkept = [1]\n')
    deeper = tmp_path / "src" / "pyproject.toml" / "pkg"  # a folder of that name is passed over
    deeper.mkdir(parents=True)
    (tmp_path / "link").symlink_to(deeper)
    assert find_pyproject(deeper) == tmp_path.resolve() / "pyproject.toml"
    assert find_pyproject(tmp_path / "link") == tmp_path.resolve() / "pyproject.toml"  # resolved first, as pathlib resolves
    monkeypatch.chdir(tmp_path / "src")
    assert find_pyproject("pyproject.toml") == tmp_path.resolve() / "pyproject.toml"  # relative to the working directory
    assert find_pyproject() == tmp_path.resolve() / "pyproject.toml"
    table = read_pyproject(tmp_path / "pyproject.toml")
    table["executors"].append("fast")  # a caller changing what it was given changes no later read
    assert read_pyproject(tmp_path / "pyproject.toml") == {"executors": ["slow"]}
