"""Replayed module calls (squall.frontend.module_replays): a repeated layer's call copies its first
call's record; the trace, its guards and its inputs are the ones tracing every call gives, and
results (and gradients) are eager's. A layer that differs, writes, or changes after compiling is
traced on its own or caught by its guards."""
from __future__ import annotations

import pytest
import torch

import squall
import squall.frontend.module_replays as module_replays
from squall.frontend.module_replays import REPLAY_ENV, replays_enabled
from squall.frontend.tracing import trace_program
from squall.tools.demo import GPT, GPTConfig

from real_models import TIMM_MODELS, import_torchvision


@pytest.fixture
def replays(monkeypatch):
    """The number of module calls replayed since the test began."""
    made = []
    plan = module_replays._plan

    def counting(*args):
        replay = plan(*args)
        made.append(args[1].label)
        return replay

    monkeypatch.setattr(module_replays, "_plan", counting)
    return made


def _traced(monkeypatch, model, args, kwargs, replay: bool, **options) -> tuple:
    monkeypatch.setenv(REPLAY_ENV, "1" if replay else "0")
    trace, bindings = trace_program(model, args, kwargs, module=model, **options)
    guards = trace.context.state.guards
    return trace.python(decompositions=True), [str(g) for g in guards.guards], guards.conditions, [b.path for b in bindings]


def _assert_traces_as_without(monkeypatch, model, args=(), kwargs=None, **options) -> None:
    kwargs = kwargs or {}
    replayed = _traced(monkeypatch, model, args, kwargs, True, **options)
    assert replayed == _traced(monkeypatch, model, args, kwargs, False, **options)


def _gpt2(layers: int = 3):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=layers, n_head=2, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).eval()


def _llama(layers: int = 3):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval()


def _distilbert(layers: int = 3):
    transformers = pytest.importorskip("transformers")
    config = transformers.DistilBertConfig(vocab_size=64, dim=32, hidden_dim=64, n_layers=layers, n_heads=2, max_position_embeddings=32)
    return transformers.DistilBertModel(config).eval()


_SYMBOLIC = {("kwargs", "input_ids"): frozenset({0, 1})}


@pytest.mark.parametrize("build", [_gpt2, _llama, _distilbert], ids=["gpt2", "llama", "distilbert"])
@pytest.mark.parametrize("dims", [None, _SYMBOLIC], ids=["static", "symbolic"])
def test_a_transformer_traces_as_without_replays(monkeypatch, replays, build, dims):
    torch.manual_seed(0)
    model = build()
    _assert_traces_as_without(monkeypatch, model, kwargs={"input_ids": torch.randint(0, 64, (2, 8))}, dims=dims)
    assert len(replays) >= 2  # the second and third layers at least


def test_a_timm_model_traces_as_without_replays(monkeypatch, replays):
    pytest.importorskip("timm")
    import_torchvision()
    vit = next(m for m in TIMM_MODELS if m.name == "timm/test_vit")
    torch.manual_seed(0)
    model = vit.build()
    _assert_traces_as_without(monkeypatch, model, kwargs=vit.inputs())
    assert replays


@pytest.mark.parametrize("build", [_gpt2, _llama, _distilbert], ids=["gpt2", "llama", "distilbert"])
def test_compiled_transformers_match_eager(replays, build):
    torch.manual_seed(0)
    model = build()
    ids = torch.randint(0, 64, (2, 8))
    with torch.no_grad():
        got, want = squall.jit(model)(input_ids=ids), model(input_ids=ids)
    torch.testing.assert_close(got[0], want[0])
    assert replays


class Layer(torch.nn.Module):
    def __init__(self, width: int, scale: float = 2.0):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)
        self.scale = scale
        self.gated = False

    def forward(self, x):
        y = self.norm(torch.relu(self.fc(x))) * self.scale
        return torch.sigmoid(y) * x if self.gated else y + x


class Stack(torch.nn.Module):
    def __init__(self, width: int = 16, depth: int = 4):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_layers_alike_replay_and_match_eager(monkeypatch, replays):
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(3, 16)
    _assert_traces_as_without(monkeypatch, model, (x,))
    # (the first layer's input does not require grad, its output does: the second is the first of its key)
    assert replays == ["submodule 'layers'.2", "submodule 'layers'.3"]
    monkeypatch.setenv(REPLAY_ENV, "1")
    torch.testing.assert_close(squall.jit(model)(x), model(x))


def test_a_layer_whose_attribute_differs_traces_on_its_own(monkeypatch, replays):
    torch.manual_seed(0)
    model = Stack().eval()
    model.layers[2].gated = True  # another branch
    model.layers[3].scale = 3.0  # another number
    x = torch.randn(3, 16)
    _assert_traces_as_without(monkeypatch, model, (x,))
    assert replays == []  # layer 2 differs in a branch, layer 3 in a number: each is traced
    torch.testing.assert_close(squall.jit(model)(x), model(x))


def test_a_layer_with_a_side_effect_is_not_replayed(monkeypatch, replays):
    class Counting(Layer):
        def forward(self, x):
            self.calls = getattr(self, "calls", 0) + 1
            return super().forward(x)

    class CountingStack(Stack):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(Counting(16) for _ in range(3))

    torch.manual_seed(0)
    model, twin = CountingStack().eval(), CountingStack().eval()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(3, 16)
    jitted = squall.jit(model)
    for _ in range(2):
        torch.testing.assert_close(jitted(x), twin(x))
    assert [layer.calls for layer in model.layers] == [layer.calls for layer in twin.layers] == [2, 2, 2]
    assert not replays


def test_a_list_append_in_a_layer_is_not_replayed(monkeypatch, replays):
    log: list = []

    class Logging(Layer):
        def forward(self, x):
            log.append(self.scale)
            return super().forward(x)

    class LoggingStack(Stack):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(Logging(16) for _ in range(3))

    torch.manual_seed(0)
    model = LoggingStack().eval()
    x = torch.randn(3, 16)
    want = model(x)
    log.clear()
    torch.testing.assert_close(squall.jit(model)(x), want)
    assert log == [2.0, 2.0, 2.0]
    assert not replays


def test_a_guard_on_a_replayed_layer_is_checked_at_call_time(replays):
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(3, 16)
    jitted = squall.jit(model)
    torch.testing.assert_close(jitted(x), model(x))
    assert "submodule 'layers'.3" in replays
    model.layers[3].gated = True  # read by the replayed layer's guards, re-bound to it
    torch.testing.assert_close(jitted(x), model(x))
    model.layers[2].scale = 0.5
    torch.testing.assert_close(jitted(x), model(x))


def test_a_hook_on_a_later_layer_is_seen(replays):
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(3, 16)
    jitted = squall.jit(model)
    torch.testing.assert_close(jitted(x), model(x))
    model.layers[2].fc.register_forward_hook(lambda module, args, out: out * 0)
    torch.testing.assert_close(jitted(x), model(x))


def test_gradients_through_replayed_layers_match_eager(replays):
    torch.manual_seed(0)
    model = Stack().train()
    twin = Stack().train()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(3, 16, requires_grad=True)
    x_twin = x.detach().clone().requires_grad_()
    squall.jit(model)(x).square().sum().backward()
    twin(x_twin).square().sum().backward()
    assert replays
    torch.testing.assert_close(x.grad, x_twin.grad)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_a_training_step_compiles_as_without_replays(monkeypatch, replays):
    # every trace of the compilation (joint, forward, backward, planned, executed) and the source
    torch.manual_seed(0)
    first = Stack().train()
    x = torch.randn(3, 16, requires_grad=True)
    compiled = {}
    for replay in (True, False):
        monkeypatch.setenv(REPLAY_ENV, "1" if replay else "0")
        model = Stack().train()
        model.load_state_dict(first.state_dict())
        jitted = squall.jit(model)
        jitted(x).square().sum().backward()
        compilation = squall.last_traces(jitted)
        compiled[replay] = ([t.python() for t in compilation], compilation.source)
    assert replays
    assert compiled[True] == compiled[False]


def test_symbolic_sizes_replay(monkeypatch, replays):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=4, n_head=4, n_embd=32)).eval()
    ids = torch.randint(0, 64, (2, 16))
    _assert_traces_as_without(monkeypatch, model, (ids,), dims={("args", 0): frozenset({0, 1})})
    assert len(replays) == 3  # blocks 1-3
    monkeypatch.setenv(REPLAY_ENV, "1")
    jitted = squall.jit(model, dynamic=True)
    for length in (16, 9, 23):
        ids = torch.randint(0, 64, (2, length))
        with torch.no_grad():
            torch.testing.assert_close(jitted(ids), model(ids))


@pytest.mark.parametrize("build", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_generate_matches_eager(build):
    # each layer writes its keys and values into the cache at its own index: none is replayed
    torch.manual_seed(0)
    model = build(3)
    jitted = squall.jit(model)
    with torch.no_grad():
        for length in (5, 7):
            ids = torch.randint(1, 64, (1, length))
            options = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
            assert torch.equal(jitted.generate(ids, **options), model.generate(ids, **options))


def test_the_switch_reads_its_values():
    assert replays_enabled({}) and replays_enabled({REPLAY_ENV: "yes"})
    assert not replays_enabled({REPLAY_ENV: "0"}) and not replays_enabled({REPLAY_ENV: "False"})
    with pytest.raises(ValueError, match=REPLAY_ENV):
        replays_enabled({REPLAY_ENV: "sometimes"})
