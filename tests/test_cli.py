"""The `squall` command line: subcommands, --json, exit codes."""
from __future__ import annotations

import json

import pytest

from squall.tools.cli import main


def test_help_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "executors" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main([])
    assert done.value.code == 2


def test_executors_json(capsys):
    assert main(["executors", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["executors"][-1]["name"] == "torch"


def test_explain_the_demo_model(capsys):
    assert main(["explain", "--json", "--batch", "1", "--seq", "4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["function"] == "GPT" and data["executors"] == ["torch"]
    assert {op["op"] for op in data["operations"]} >= {"torch.nn.functional.linear", "torch.nn.functional.layer_norm"}


def test_unknown_executor_exits_2(capsys):
    assert main(["explain", "--executors", "nvfuzer"]) == 2
    assert "unknown executor 'nvfuzer'" in capsys.readouterr().err
