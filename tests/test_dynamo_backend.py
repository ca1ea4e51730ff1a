"""torch.compile(backend="squall"): Dynamo's graphs compiled on squall's market, against eager."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import squall
from squall.extend import Marketplace, add_operator_executor
from squall.runtime.dynamo_backend import BACKEND_OPTIONS, compiled_graphs, squall_backend

from real_models import TIMM_MODELS, TRANSFORMERS_MODELS, assert_same_output, import_torchvision


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def new_graphs(before: list) -> list:
    return [g for g in compiled_graphs() if all(g is not b for b in before)]


def test_the_backend_is_found_by_name_through_its_entry_point():
    assert "squall" in torch._dynamo.list_backends()
    assert torch._dynamo.lookup_backend("squall") is squall_backend


def test_a_graph_break_at_a_print_compiles_both_graphs_on_squall(capsys):
    def f(x):
        y = torch.sin(x) * 2
        print("between the graphs")
        return F.gelu(y) + x.sum(-1, keepdim=True)

    x = torch.randn(4, 8)
    before = compiled_graphs()
    compiled = torch.compile(f, backend="squall")
    for _ in range(2):
        assert_close(compiled(x), f(x))
    assert capsys.readouterr().out.count("between the graphs") == 4  # eager's print, every call
    graphs = new_graphs(before)
    assert len(graphs) == 2
    ops = [{b.sym.id for b in squall.last_traces(g)[0].bsyms} for g in graphs]
    assert "torch.sin" in ops[0] and "torch.nn.functional.gelu" in ops[1]
    assert all(g.cache_info().hits >= 1 for g in graphs)  # the second call was served from squall's cache


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_branch_on_a_tensor_value_in_a_plain_function_matches_eager(sign):
    def f(x):
        y = x * 3
        if y.sum() > 0:  # Dynamo breaks the graph here; squall compiles each side
            return torch.relu(y) - 1
        return torch.tanh(y) + 1

    x = sign * torch.rand(5, 3)
    compiled = torch.compile(f, backend="squall")
    assert_close(compiled(x), f(x))
    assert_close(compiled(-x), f(-x))


def test_a_no_grad_block_inside_the_graph_keeps_eager_gradients():
    w = torch.randn(6, 6, requires_grad=True)

    def f(x):
        with torch.no_grad():
            scale = x.abs().amax()
        return (x @ w / scale).tanh().sum()

    x = torch.randn(3, 6)
    expected = torch.autograd.grad(f(x), w)[0]
    actual = torch.autograd.grad(torch.compile(f, backend="squall")(x), w)[0]
    assert_close(actual, expected)


def test_options_pass_through_to_squall_jit():
    before = compiled_graphs()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    compiled = torch.compile(model, backend="squall", options={"executors": ["torch"], "cache_size": 3})
    x = torch.randn(2, 4)
    assert_close(compiled(x), model(x))
    (graph,) = new_graphs(before)
    state = graph._jitted
    assert [ex.name for ex in state.executors] == ["torch"] and state.cache_size == 3
    assert set(BACKEND_OPTIONS) >= {"executors", "wait", "cache_size", "strict", "recompile_limit"}


def test_an_unknown_option_is_an_error_naming_it():
    compiled = torch.compile(torch.sin, backend="squall", options={"executor": ["torch"]})
    with pytest.raises(Exception, match="unknown option.*'executor'.*squall takes executors"):
        compiled(torch.randn(3))


def test_the_backend_refuses_what_is_not_a_graph():
    with pytest.raises(TypeError, match="expects a torch.fx.GraphModule, got function"):
        squall_backend(lambda x: x.sin(), [torch.randn(2)])


def test_an_executor_registered_in_code_takes_its_operation_in_the_backends_plan():
    market = Marketplace()  # a market of the test's own, the default one stays as it was
    calls = []

    def gelu_impl(x, approximate="none"):
        calls.append(x.shape)
        return F.gelu(x, approximate=approximate)

    mine = add_operator_executor(
        "my_gelu", {"torch.nn.functional.gelu": ("gelu", None, gelu_impl)}, marketplace=market, add_to_default_executors=False
    )
    torch_ex = market.get("torch")
    before = compiled_graphs()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    compiled = torch.compile(model, backend="squall", options={"executors": [mine, torch_ex]})
    x = torch.randn(3, 4)
    assert_close(compiled(x), model(x))
    assert calls == [torch.Size([3, 8])]
    (graph,) = new_graphs(before)
    report = squall.explain(graph)  # no inputs: the compilation the graph's call made
    assert report.taken_by("torch.nn.functional.gelu") == ["my_gelu"]
    assert "my_gelu" in str(report)


def _train_step_matches_eager(model: torch.nn.Module, inputs: dict, loss_of) -> None:
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="squall")
    loss = loss_of(compiled(**inputs))
    expected = loss_of(reference(**inputs))
    assert_close(loss, expected, rtol=1e-4, atol=1e-4)
    loss.backward()
    expected.backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")


def _real(models, name):
    return next(m for m in models if m.name == name)


def test_a_transformers_model_forward_and_training_step_match_eager():
    pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e '.[test]'")
    spec = _real(TRANSFORMERS_MODELS, "llama")
    torch.manual_seed(0)
    model, inputs = spec.build(), spec.inputs()
    with torch.no_grad():
        assert_same_output(torch.compile(model, backend="squall")(**inputs), model(**inputs), atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()
    model.train()
    _train_step_matches_eager(model, {**inputs, "labels": inputs["input_ids"]}, lambda out: out.loss)


def test_a_timm_model_forward_and_training_step_match_eager():
    pytest.importorskip("timm", reason="timm is a test extra: pip install -e '.[test]'")
    import_torchvision()
    spec = _real(TIMM_MODELS, "timm/test_resnet")
    torch.manual_seed(0)
    model, inputs = spec.build(), spec.inputs()
    with torch.no_grad():
        assert_close(torch.compile(model, backend="squall")(**inputs), model(**inputs), atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()
    model.train()
    _train_step_matches_eager(model, inputs, lambda out: out.logsumexp(-1).mean())


def test_squall_rage_records_each_graph_the_backend_compiles(tmp_path, monkeypatch):
    from squall.tools import bundle
    from squall.runtime import rage

    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SQUALL_RAGE", raising=False)
    recorder = rage.Recorder()
    monkeypatch.setattr(rage, "_default", recorder)

    def f(x):
        y = x.cos()
        print("break")
        return y * 2

    torch.compile(f, backend="squall")(torch.randn(3))
    recorder.flush()
    (run,) = bundle.load_runs(recorder.directory)
    assert [c["outcome"] for c in run.compilations] == ["ok", "ok"]
    ops = [[d[0] for d in c["plans"][0]["decisions"] if d[1] == 0] for c in run.compilations]
    assert ops == [["torch.cos"], ["torch.mul"]]


def test_dynamic_true_compiles_one_graph_twice_for_every_length():
    def f(x):
        return (x.view(x.shape[0], -1) * 2).softmax(-1) + x.shape[1]

    before = compiled_graphs()
    compiled = torch.compile(f, backend="squall", dynamic=True)
    for n in (3, 5, 7, 9, 11):
        x = torch.randn(n, 4, 2)
        assert_close(compiled(x), f(x))
    (graph,) = new_graphs(before)
    # the sizes Dynamo passes as ints are read from x's shape: the second length makes them symbolic
    assert graph.cache_info().misses == 2 and graph.cache_info().hits == 3
    assert '"cpu f32[s0, 8]"' in str(squall.last_traces(graph)[0])
