"""Speculation with guards: values a program reads from tensors, and data-dependent shapes."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.frontend.speculation import SPECULATION_LIMIT, guards_of
from squall.guards import GuardFailed, same_value


def _branchy(x):
    if x.sum() > 0:  # the branch squall speculates on
        return x * 2
    return x.sin() - 1


def test_branch_flips_between_calls_pick_the_right_variant():
    jf = squall.jit(_branchy)
    signs = [1, -1, 1, -1, -1, 1]
    for s in signs:
        x = torch.rand(4) * s
        assert_close(jf(x), _branchy(x))
    info = jf.cache_info()
    assert info.size == 1  # one input signature, two variants behind it
    assert info.misses == 2  # one compilation per branch, however often it flips
    assert info.guard_failures == 4  # each flip failed the guard of the variant tried first


def test_guards_are_printed_in_the_trace_the_source_and_explain():
    jf = squall.jit(_branchy)
    jf(torch.ones(3))
    traced = str(squall.last_traces(jf).traced)
    assert "squall.guard('bool', (t1,), {}, True, 'test_speculation.py:" in traced
    assert "torch_guard('bool'" in squall.last_traces(jf).source
    assert len(guards_of(squall.last_traces(jf))) == 1
    report = str(squall.explain(_branchy, torch.ones(3)))
    assert "squall.guard" in report


def test_a_checked_variant_hands_over_to_its_plain_code_after_a_clean_call():
    from squall.market.executor import OperatorExecutor
    from squall.runtime.jit import jitted_state
    from squall.market.torch_executor import make_executor

    vendor = OperatorExecutor("sin_vendor")  # a non-torch executor: its calls are checked once
    vendor.register_implementation("torch.sin", torch.sin)
    jf = squall.jit(_branchy, executors=[vendor, make_executor()])
    for s in (1, -1):
        x = torch.rand(8) * s
        assert_close(jf(x), _branchy(x))
        assert_close(jf(x), _branchy(x))
    state = jitted_state(jf)
    ((variants, _),) = state._cache.values()
    assert any(e.compilation.checked is not None for _, e in variants.variants)
    if state.check == "first":
        assert [runner for runner, _ in variants.variants] == [e.compilation.fn for _, e in variants.variants]


def test_item_tolist_int_float_and_value_functions_are_read_and_guarded():
    def f(x, y):
        n = int(x.max())
        scale = x.mean().item()
        flags = (x > 0.5).tolist()
        same = (torch.allclose(x, y), torch.equal(x, x))
        return torch.zeros(n) + scale, flags, same, float(x[0])

    jf = squall.jit(f)
    for _ in range(3):
        x = torch.tensor([0.25, 2.0, 3.0])
        y = x.clone() if _ % 2 else x + 1
        out, ref = jf(x, y), f(x, y)
        assert_close(out[0], ref[0])
        assert out[1:] == ref[1:]
    assert len(guards_of(squall.last_traces(jf))) == 6  # int, item, tolist, allclose, equal, float


@pytest.mark.parametrize(
    "program",
    [
        lambda x: torch.zeros(x.sum().int()),
        lambda x: x.view(x[0].long(), -1),
        lambda x: torch.arange(x.sum().long()),
        lambda x: x[: x[0].long()],
        lambda x: x.reshape((x[0].long(), -1)),
    ],
    ids=["zeros", "view", "arange", "slice_bound", "reshape"],
)
def test_a_size_taken_from_a_tensor_is_read_and_guarded(program):
    jf = squall.jit(program)
    for first in (2.0, 1.0, 2.0):
        x = torch.tensor([first, 1.0, 3.0, 4.0])
        assert_close(jf(x), program(x))
    assert jf.cache_info().misses == 2
    assert any(g.args[0] == "index" for g in guards_of(squall.last_traces(jf)))


def test_a_value_that_changes_at_every_call_stops_compiling_and_runs_eagerly():
    def counter(x):
        return x + int(x.sum())  # a new value at every call

    jf = squall.jit(counter)
    with pytest.warns(squall.SquallWarning, match=r"test_speculation.py:\d+ \(int\) changed .* runs the original function eagerly"):
        for i in range(SPECULATION_LIMIT + 3):
            x = torch.full((2,), float(i))
            assert_close(jf(x), counter(x))
    assert jf.cache_info().misses == SPECULATION_LIMIT + 1  # then no more compilations
    x = torch.full((2,), 100.0)
    assert_close(jf(x), counter(x))
    assert jf.cache_info().misses == SPECULATION_LIMIT + 1


def test_strict_mode_raises_data_dependent_error():
    strict = squall.jit(_branchy, strict=True)
    with pytest.raises(squall.DataDependentError, match=r"bool\(tensor\) needs the value of tensor t\d+.*strict mode"):
        strict(torch.ones(3))
    with pytest.raises(squall.DataDependentError, match=r"tensor\.item\(\)"):
        squall.jit(lambda x: x.sum().item(), strict=True)(torch.ones(3))
    with pytest.raises(squall.DataDependentError, match=r"torch\.allclose"):
        squall.jit(lambda x: torch.allclose(x, x), strict=True)(torch.ones(3))
    with pytest.raises(squall.DataDependentError, match=r"x\[mask\]"):
        squall.jit(lambda x: x[x > 0], strict=True)(torch.randn(5))
    with pytest.raises(squall.DataDependentError, match=r"torch\.nonzero"):
        squall.jit(torch.nonzero, strict=True)(torch.randn(5))


_DATA_DEPENDENT_OPS = {
    "nonzero": lambda x, m, r: torch.nonzero(m),
    "argwhere": lambda x, m, r: torch.argwhere(x > 0),
    "masked_select": lambda x, m, r: torch.masked_select(x, m).exp(),
    "mask_index": lambda x, m, r: x[m] * 2,
    "unique": lambda x, m, r: torch.unique(r, return_counts=True),
    "bincount": lambda x, m, r: torch.bincount(r),
    "one_hot": lambda x, m, r: torch.nn.functional.one_hot(r),
    "repeat_interleave": lambda x, m, r: torch.repeat_interleave(x, r),
    "where_condition": lambda x, m, r: torch.where(m),
}


@pytest.mark.parametrize("name", list(_DATA_DEPENDENT_OPS))
def test_data_dependent_ops_match_eager_as_their_shapes_change(name):
    op = _DATA_DEPENDENT_OPS[name]
    jf = squall.jit(op)
    gen = torch.Generator().manual_seed(0)
    for n in (3, 6, 3):
        x = torch.randn(8, generator=gen)
        m = torch.arange(8) < n
        r = torch.randint(0, n, (8,), generator=gen)
        assert_close(jf(x, m, r), op(x, m, r))
    assert any(g.args[0] == "shape" for g in guards_of(squall.last_traces(jf)))


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_data_dependent_op_takes_a_size_as_a_number(dynamic):
    # a size symbolic at the second call (or the first, dynamic=True): its value is read for the op, guarded
    op = lambda r: torch.bincount(r.flatten(), minlength=r.shape[0]) + torch.histc(r.float(), bins=r.shape[1]).sum()  # noqa: E731
    jf = squall.jit(op, dynamic=dynamic)
    gen = torch.Generator().manual_seed(0)
    for shape in ((6, 4), (9, 3), (6, 4), (12, 5)):
        r = torch.randint(0, 5, shape, generator=gen)
        assert_close(jf(r), op(r))


def test_an_in_place_write_to_an_input_happens_once_when_a_guard_fails():
    def f(x, acc):
        acc.add_(1)
        if x.sum() > 0:
            return x + acc
        return x - acc

    jf = squall.jit(f)
    acc, ref_acc = torch.zeros(3), torch.zeros(3)
    for s in (1, -1, 1, -1):
        x = torch.ones(3) * s
        assert_close(jf(x, acc), f(x, ref_acc))
        assert_close(acc, ref_acc)  # the failed variant wrote nothing back


def test_reading_a_value_does_not_touch_the_caller_tensors_or_the_random_state():
    def f(x):
        x.mul_(2)
        noise = torch.rand(3)
        if x.sum() > 5:
            return x + noise
        return x - noise

    jf = squall.jit(f)
    x, ref = torch.ones(3) * 2, torch.ones(3) * 2
    torch.manual_seed(7)
    out = jf(x)
    after = torch.rand(1)
    torch.manual_seed(7)
    expected = f(ref)
    assert_close(x, ref)  # written once, by the program, not by speculation
    assert_close(after, torch.rand(1))  # the program drew as often as eager did
    assert out.shape == expected.shape


def test_a_guard_inside_a_differentiated_program_restarts_cleanly():
    def f(x, w):
        y = x @ w
        if y.sum() > 0:
            return (y * 3).sum()
        return y.sin().sum()

    jf = squall.jit(f)
    w = torch.randn(3, 2)
    for s in (1, -1, 1):
        x = (torch.ones(4, 3) * s).requires_grad_()
        w1 = w.clone().requires_grad_()
        x2, w2 = x.detach().clone().requires_grad_(), w.clone().requires_grad_()
        jf(x, w1).backward()
        f(x2, w2).backward()
        assert_close(x.grad, x2.grad)
        assert_close(w1.grad, w2.grad)
    assert jf.cache_info().misses <= 2


def test_a_data_dependent_op_in_a_training_program_gives_eager_gradients():
    def f(x, m):
        return (x[m] * 2).sum() + x.sum()

    jf = squall.jit(f)
    for n in (2, 5):
        m = torch.arange(6) < n
        x = torch.randn(6, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        with pytest.warns(squall.SquallWarning, match="differentiated by PyTorch's autograd") as caught:
            jf(x, m).backward()
        assert caught[0].filename == __file__  # the warning points at the user's call, not at squall
        f(x2, m).backward()
        assert_close(x.grad, x2.grad)


def test_module_with_a_value_branch_flips_variants():
    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, mask):
            if (mask == 1).all():
                return self.lin(x)
            return self.lin(x) * mask[..., None]

    m = Gate()
    jm = squall.jit(m)
    x = torch.randn(2, 3, 4)
    for mask in (torch.ones(2, 3), torch.tensor([[1.0, 1, 0], [1, 1, 1]]), torch.ones(2, 3)):
        assert_close(jm(x, mask), m(x, mask))
    assert jm._jitted.cache_info().misses == 2


def test_guard_values_compare_by_type_and_value():
    assert same_value(float("nan"), float("nan"))
    assert not same_value(0.0, -0.0)
    assert not same_value(1, True)
    assert same_value([1, [2.0]], [1, [2.0]])
    err = GuardFailed("bool", "f.py:3", True, False)
    assert "f.py:3" in str(err) and "bool was False" in str(err)


def test_a_value_read_inside_an_op_decomposition_is_a_clear_error():
    from squall.frontend.speculation import Speculation

    class Ctx:
        scopes = [[], []]
        constants = {}

    with pytest.raises(squall.DataDependentError, match="inside an operation's decomposition"):
        Speculation(Ctx()).read("bool", (), {})


# --- real models from transformers, small configs, random weights, with padding masks -----------

transformers = pytest.importorskip("transformers")

_V = 64
_SMALL = dict(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=_V)
MODELS = {
    "gpt2": lambda t: t.GPT2Model(t.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=_V, n_positions=32)),
    "llama": lambda t: t.LlamaModel(t.LlamaConfig(num_key_value_heads=1, **_SMALL)),
    "mistral": lambda t: t.MistralModel(t.MistralConfig(num_key_value_heads=1, **_SMALL)),
    "qwen2": lambda t: t.Qwen2Model(t.Qwen2Config(num_key_value_heads=1, **_SMALL)),
    "bert": lambda t: t.BertModel(t.BertConfig(**_SMALL)),
    "roberta": lambda t: t.RobertaModel(t.RobertaConfig(**_SMALL)),
    "phi": lambda t: t.PhiModel(t.PhiConfig(**_SMALL)),
    "gemma": lambda t: t.GemmaModel(t.GemmaConfig(num_key_value_heads=1, head_dim=16, **_SMALL)),
    "gpt_neox": lambda t: t.GPTNeoXModel(t.GPTNeoXConfig(**_SMALL)),
    "opt": lambda t: t.OPTModel(t.OPTConfig(num_hidden_layers=1, hidden_size=32, ffn_dim=64, num_attention_heads=2, vocab_size=_V, word_embed_proj_dim=32)),
    "t5": lambda t: t.T5EncoderModel(t.T5Config(num_layers=1, d_model=32, d_ff=64, num_heads=2, d_kv=16, vocab_size=_V)),
    "mixtral": lambda t: t.MixtralModel(t.MixtralConfig(num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, **_SMALL)),
    "clip_text": lambda t: t.CLIPTextModel(
        t.CLIPTextConfig(max_position_embeddings=16, bos_token_id=0, eos_token_id=1, pad_token_id=2, **_SMALL)
    ),
}
_NO_CACHE_ARG = {"bert", "roberta", "t5", "clip_text"}


@pytest.mark.parametrize("name", list(MODELS))
def test_transformers_model_with_a_padding_mask_compiles_to_one_guarded_trace(name):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MODELS[name](transformers).eval()
    ids = torch.randint(0, _V, (2, 6))
    padded = torch.ones(2, 6, dtype=torch.long)
    padded[1, :2] = 0
    other_padding = torch.ones(2, 6, dtype=torch.long)
    other_padding[0, :3] = 0
    extra = {} if name in _NO_CACHE_ARG else {"use_cache": False}
    jm = squall.jit(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # opaque ops some models call are not this test's concern
        for mask in (padded, other_padding):  # a stable mask check: one trace, no recompilation
            out = jm(input_ids=ids, attention_mask=mask, **extra)
            assert_close(out.last_hidden_state, model(input_ids=ids, attention_mask=mask, **extra).last_hidden_state)
        state = jm._jitted
        assert state.cache_info().misses == 1 and state.cache_info().guard_failures == 0
        assert guards_of(squall.last_traces(jm))
        ones = torch.ones(2, 6, dtype=torch.long)  # no padding: the mask check flips, a second variant
        assert_close(jm(input_ids=ids, attention_mask=ones, **extra).last_hidden_state, model(input_ids=ids, attention_mask=ones, **extra).last_hidden_state)
        assert state.cache_info().misses == 2


def test_a_guarded_program_called_with_aliased_inputs_flips_variants_too():
    def f(x, y):
        x.add_(1)
        if y.sum() > 0:
            return x * 2
        return x - 1

    jf = squall.jit(f)
    for start in (1.0, -5.0, 1.0):
        a, ref = torch.full((3,), start), torch.full((3,), start)
        assert_close(jf(a, a), f(ref, ref))  # one tensor passed twice: the write is seen through both
        assert_close(a, ref)


def test_a_value_read_after_a_call_that_gives_back_its_input_is_computed():
    # `m.expand(...)` to m's own shape is traced as `t1 = expand(t1, ...)`: as t1's producer it
    # needed t1 itself, and reading `m.any()` never returned (JetMoe's `generate` with a padded
    # batch hung). A timer turns a hang into a failure
    import signal

    def f(x, mask):
        m = mask[:, None, :].expand(x.shape[0], 1, x.shape[1])
        return x * 2 if m.any() else x - 1

    fired = []

    def hung(*_):
        fired.append(True)  # (squall may take the error for the program's own and run it eagerly)
        raise TimeoutError("reading the value did not return")

    before = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 20.0)
    try:
        jitted = squall.jit(f, dynamic=True)
        x = torch.randn(3, 4)
        for mask in (torch.ones(3, 4, dtype=torch.bool), torch.zeros(3, 4, dtype=torch.bool)):
            assert_close(jitted(x, mask), f(x, mask))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert not fired, "reading the value did not return"
    assert jitted.cache_info().misses == 2  # a variant for each branch, compiled, not run eagerly
