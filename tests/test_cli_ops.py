"""`squall ops NAME`: where an op is defined, its torch names, signature, decomposition, executors."""
from __future__ import annotations

from squall.tools.cli import main


def test_a_torch_name_shows_definition_decomposition_and_executors(capsys):
    assert main(["ops", "torch.nn.functional.softmax"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torch.nn.functional.softmax: ltorch op softmax_functional")
    assert "ltorch/softmax.py:" in out  # file:line of the definition
    assert "signature     softmax_functional(input, dim=None, _stacklevel=3, dtype=None)" in out
    assert "ltorch.softmax_functional(x0, -1)" in out and "# t3 = prims.exp(" in out  # traced decomposition
    assert "executors     " in out and "torch" in out.split("executors", 1)[1].splitlines()[0]


def test_short_and_method_names_find_every_op_they_stand_for(capsys):
    assert main(["ops", "softmax"]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if line and not line.startswith(" ")]
    assert heads == ["torch.softmax: ltorch op softmax", "torch.nn.functional.softmax: ltorch op softmax_functional"]
    assert main(["ops", "Tensor.softmax"]) == 0
    assert capsys.readouterr().out.startswith("torch.softmax: ltorch op softmax")


def test_an_in_place_form_and_a_prim(capsys):
    assert main(["ops", "Tensor.add_"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torch.Tensor.add_: writes the result of torch.add into its argument 'input'")
    assert "ltorch/elementwise_binary.py:" in out and "torch.add: ltorch op add" in out
    assert "via forms     torch.Tensor.add_" in out
    assert main(["ops", "prims.exp"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("prims.exp: prim exp") and "prims/elementwise.py:" in out


def test_an_op_without_example_inputs_shows_its_source(capsys):
    assert main(["ops", "F.batch_norm"]) == 0
    out = capsys.readouterr().out
    assert "source (no example inputs to trace it on)" in out and "def batch_norm(" in out
    assert "torch.nn.functional.batch_norm: ltorch op batch_norm" in out
    assert "then writes its extra results into running_mean, running_var" in out


def test_an_unknown_name_exits_2_with_close_matches(capsys):
    assert main(["ops", "sofmax"]) == 2
    err = capsys.readouterr().err
    assert "'sofmax' names no ltorch op or prim" in err and "torch.softmax" in err
