"""Dynamic shapes where a size meets torch's own argument parser, a transformers ModelOutput
argument, or a count the program divides by:

- a factory given a symbolic size (`torch.ones(b, n)`, `torch.zeros(n)`, `x.new_ones((n, 4))`)
  traces with the size symbolic: torch's parser takes a squall size as a torch.SymInt, so it
  neither refuses one first in varargs (BART's decoder ran eagerly) nor reads its value
  (`torch.zeros(n)` compiled once per n);
- a ModelOutput argument (a decoder's `encoder_outputs`) is read as a dict: its tensors are
  inputs of the program, not constants of it (a second call with new values of the same shape
  returned the first call's result), and their sizes become symbolic as other arguments' do;
- batch norm's and mean's element count is divided by as a symbolic size, not guarded (training
  compiled once per batch size).
"""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from squall.runtime.dynamic_dims import one_long
from squall.runtime.jit import jitted_state
from real_models import import_torchvision, tiny_encoder_decoder


def _stream(fn, shapes, compare=torch.testing.assert_close):
    """`fn` jitted over inputs of `shapes`, each call compared with eager; no squall warning
    (none ran eagerly). Returns the jitted function."""
    jitted = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for shape in shapes:
            x = torch.randn(*shape)
            compare(jitted(x), fn(x))
    return jitted


LENGTHS = [(2, 3), (2, 5), (2, 6), (2, 9), (2, 4)]
LENGTHS_1D = [(3,), (5,), (6,), (9,), (4,)]

FACTORIES = {
    "ones(b, n)": (lambda x: x + torch.ones(x.shape[0], x.shape[1]), LENGTHS),
    "ones(n, b)": (lambda x: x.T * torch.ones(x.shape[1], x.shape[0], dtype=torch.float64), LENGTHS),
    "zeros(n)": (lambda x: x + torch.zeros(x.shape[0]), LENGTHS_1D),
    "ones((n, b))": (lambda x: x.T - torch.ones((x.shape[1], x.shape[0])), LENGTHS),
    "ones([n])": (lambda x: x + torch.ones([x.shape[0]]), LENGTHS_1D),
    "zeros(x.shape)": (lambda x: x + torch.zeros(x.shape), LENGTHS),
    "zeros(torch.Size(x.shape))": (lambda x: x + torch.zeros(torch.Size(x.shape)), LENGTHS),
    "reshape(torch.Size(x.shape))": (lambda x: x.T.reshape(torch.Size(x.shape)) + 1, LENGTHS),
    "zeros(tuple of sizes)": (lambda x: x + torch.zeros(tuple(x.shape)), LENGTHS),
    "empty(n, b).shape": (lambda x: torch.empty(x.shape[1], 2).shape[0] * x, LENGTHS),
    "full((n, b), v)": (lambda x: x.T * torch.full((x.shape[1], x.shape[0]), 2.5), LENGTHS),
    "full(size=)": (lambda x: x + torch.full(size=(x.shape[0],), fill_value=3), LENGTHS_1D),
    "arange(n)": (lambda x: x + torch.arange(x.shape[0]), LENGTHS_1D),
    "arange(n - 1, -1, -1)": (lambda x: x + torch.arange(x.shape[0] - 1, -1, -1), LENGTHS_1D),
    # a float range of sizes (rotary and sinusoidal positions): before, its length was read as a float, keyed by value
    "arange(n, dtype=float32)": (lambda x: x * torch.arange(x.shape[0], dtype=torch.float32), LENGTHS_1D),
    "arange(1, n, 2, dtype=float64)": (lambda x: x.sum() + torch.arange(1, x.shape[0], 2, dtype=torch.float64).sum(), LENGTHS_1D),
    "new_ones(n, b)": (lambda x: x.T + x.new_ones(x.shape[1], x.shape[0]), LENGTHS),
    "new_zeros((n,))": (lambda x: x + x.new_zeros((x.shape[0],)), LENGTHS_1D),
    "new_full((n,), v)": (lambda x: x + x.new_full((x.shape[0],), 7.0), LENGTHS_1D),
    "ones_like(x)": (lambda x: x + torch.ones_like(x), LENGTHS),
    "randn(n, b).shape": (lambda x: x * torch.randn(x.shape[1], x.shape[0]).shape[0], LENGTHS),
    "rand(n).shape": (lambda x: x * torch.rand(x.shape[0]).numel(), LENGTHS_1D),
    "randint(5, (n,)).shape": (lambda x: x + torch.randint(5, (x.shape[0],)).shape[0], LENGTHS_1D),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_a_factory_given_a_symbolic_size_traces_it_symbolic(name):
    """Each factory form, its size symbolic from the second length on: eager's results, no call
    run eagerly, and two compiles for five lengths (the first static, then one symbolic)."""
    fn, shapes = FACTORIES[name]
    jitted = _stream(fn, shapes)
    assert jitted.cache_info().misses <= 2, jitted.cache_info()


def test_a_factory_sized_by_a_symbolic_size_keeps_it_in_the_trace():
    jitted = _stream(lambda x: x + torch.ones(x.shape[0], x.shape[1]), LENGTHS[:2])
    source = squall.last_traces(jitted).source
    assert "s0" in source and "s1" in source, source


def test_a_factory_refuses_what_torch_refuses_after_a_symbolic_size():
    """A non-int after a symbolic size: torch's TypeError, as eager raises it."""
    def fn(x):
        return x[:, None] + torch.ones(x.shape[0], 2 if x.shape[0] < 5 else "a")

    jitted = _stream(fn, [(3,), (4,)])
    with pytest.raises(TypeError, match="must be tuple of ints"):
        fn(torch.randn(5))
    with pytest.raises(TypeError, match="must be tuple of ints"):
        jitted(torch.randn(5))


@pytest.mark.parametrize("dynamic", [None, True])
def test_arange_of_a_size_that_becomes_0_runs_as_eager(dynamic):
    """`torch.arange(x.shape[-1])` at length 0 is `arange(0)`: its start left at the meta's default
    printed `torch.arange()`, which torch refuses (a TypeError where eager returns an empty range)."""
    fns = [
        lambda x: torch.arange(x.shape[-1], dtype=x.dtype),
        lambda x: torch.arange(end=x.shape[-1]) * 2,
        lambda x: (torch.arange(0), torch.arange(start=0, end=x.shape[-1])),
    ]
    for fn in fns:
        jitted = squall.jit(fn, dynamic=dynamic)
        for n in (3, 0, 5, 0):
            x = torch.randn(2, n)
            torch.testing.assert_close(jitted(x), fn(x))
    with pytest.raises(TypeError, match="arange"):
        squall.jit(lambda x: x + torch.arange())(torch.randn(2))


def test_a_size_read_by_value_is_still_guarded():
    """Where the program needs a size's value (a Python int built from it), it reads it guarded:
    a new length compiles again rather than reuse the first one's result."""

    def fn(x):
        return x + int(x.shape[0]) + torch.ones(x.shape[0])

    jitted = squall.jit(fn)
    for n in (3, 5, 6):
        x = torch.randn(n)
        torch.testing.assert_close(jitted(x), fn(x))


# --- ModelOutput arguments ---------------------------------------------------------------


def _base_model_output():
    import_torchvision()
    return pytest.importorskip("transformers.modeling_outputs").BaseModelOutput


def test_a_model_output_argument_is_read_at_every_call_not_kept_as_a_constant():
    """A ModelOutput argument of the same shape and new values: eager's result each time (its
    tensor was a constant of the first trace, so later calls returned the first call's result)."""
    output = _base_model_output()

    def fn(x, encoded):
        return x + encoded.last_hidden_state.sum(1) + encoded[0].mean() + encoded["last_hidden_state"][:, 0]

    jitted = squall.jit(fn)
    for n in (6, 6, 6, 9, 9):
        x, encoded = torch.randn(1, 8), output(last_hidden_state=torch.randn(1, n, 8))
        torch.testing.assert_close(jitted(x, encoded), fn(x, encoded))
    assert jitted.cache_info().misses == 2  # the first length, then the length symbolic


def test_a_model_output_argument_as_a_keyword_takes_new_lengths_symbolically():
    output = _base_model_output()

    def fn(x, *, encoded):
        return x @ encoded.last_hidden_state.transpose(1, 2)

    jitted = squall.jit(fn)
    for n in (6, 9, 13, 4):
        x, encoded = torch.randn(1, 2, 8), output(last_hidden_state=torch.randn(1, n, 8))
        torch.testing.assert_close(jitted(x, encoded=encoded), fn(x, encoded=encoded))
    assert jitted.cache_info().misses == 2


def test_a_program_writing_into_a_model_output_argument_runs_eagerly_as_eager_does():
    output = _base_model_output()

    def fn(x, encoded):
        encoded.last_hidden_state = encoded.last_hidden_state * 2
        return x + 1

    jitted = squall.jit(fn)
    x, encoded, expected = torch.randn(3), output(last_hidden_state=torch.ones(2)), output(last_hidden_state=torch.ones(2))
    with pytest.warns(squall.SquallWarning, match="writes into a BaseModelOutput argument"):
        torch.testing.assert_close(jitted(x, encoded), fn(x, expected))
    torch.testing.assert_close(encoded.last_hidden_state, expected.last_hidden_state)


# --- counts divided by ---------------------------------------------------------------------


def test_batch_norm_training_over_batch_sizes_compiles_twice_and_matches_eager():
    """Output, input and parameter gradients, running statistics: eager's, at each batch size;
    the batch's element count is divided by at its size in the call (it was guarded: a compile
    per batch size)."""

    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()

    eager, compiled = build(), build()
    jitted = squall.jit(compiled)
    for batch in (2, 3, 5, 8, 4):
        x = torch.randn(batch, 3, 8, 8)
        x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
        expected, actual = eager(x_eager), jitted(x_compiled)
        torch.testing.assert_close(actual, expected)
        (expected * expected).sum().backward()
        (actual * actual).sum().backward()
        torch.testing.assert_close(x_compiled.grad, x_eager.grad)
        for (name, a), e in zip(compiled.named_parameters(), eager.parameters()):
            torch.testing.assert_close(a.grad, e.grad, msg=lambda m: f"{name}.grad at batch {batch}: {m}")
        for (name, a), e in zip(compiled.named_buffers(), eager.buffers()):
            torch.testing.assert_close(a, e, msg=lambda m: f"{name} at batch {batch}: {m}")
    assert jitted.cache_info().misses == 2, jitted.cache_info()


@pytest.mark.parametrize("fn", [lambda x: x.mean(1), lambda x: x.mean(), lambda x: torch.nn.functional.batch_norm(x, None, None, training=True)])
def test_a_mean_over_a_symbolic_dimension_compiles_twice(fn):
    jitted = _stream(fn, [(2, 3, 4), (2, 5, 4), (2, 6, 4), (2, 9, 4)])
    assert jitted.cache_info().misses == 2, jitted.cache_info()


@pytest.mark.parametrize("ceil_mode, count_include_pad", [(True, False), (True, True), (False, False)])
def test_an_average_pool_whose_windows_are_cut_short_compiles_once_per_parity(ceil_mode, count_include_pad):
    """Windows cut short by the edge (ceil_mode's overhang, padding left out of the count; timm's
    ResNet-D shortcut) average fewer elements, counted by the program at the call's sizes: the
    image size is never read, so sizes of one parity share an entry (a compile per image size
    before), and values and gradients are eager's."""

    def pool(x):
        return torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=ceil_mode, count_include_pad=count_include_pad)

    sizes = [(2, 3, 8, 10), (2, 3, 12, 14), (2, 3, 16, 6), (2, 3, 20, 12)]
    jitted = _stream(pool, sizes)
    assert jitted.cache_info().misses == 2, jitted.cache_info()
    x = torch.randn(2, 3, 10, 18, requires_grad=True)
    (expected,) = torch.autograd.grad(pool(x).square().sum(), x)
    (actual,) = torch.autograd.grad(jitted(x).square().sum(), x)
    torch.testing.assert_close(actual, expected)


# --- encoder-decoder models ------------------------------------------------------------------


def _encoder_decoder(name: str) -> torch.nn.Module:
    pytest.importorskip("transformers")
    return tiny_encoder_decoder(name)


def test_a_decoder_given_new_encoder_outputs_of_the_same_shape_answers_for_them():
    module, output = _encoder_decoder("t5"), _base_model_output()
    jitted = squall.jit(module)
    start = torch.zeros(1, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(3):
            encoded = output(last_hidden_state=torch.randn(1, 6, 32))
            expected = module(decoder_input_ids=start, encoder_outputs=encoded).logits
            torch.testing.assert_close(jitted(decoder_input_ids=start, encoder_outputs=encoded).logits, expected)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_an_encoder_decoder_generates_new_prompt_lengths_without_compiling(name):
    """BART's decoder (`torch.ones(b, n)` of a symbolic length) is compiled, not run eagerly; a
    generate compiles its decoding step twice (an empty cache; a cache of two tokens or more),
    and a new prompt length nothing: the encoder's output (a ModelOutput argument) has a
    symbolic length, and the encoder-decoder cache holds state. The step with a cache of one
    token (a signature of its own: sizes 1 stay constants) comes once per generate, and runs
    eagerly until it has cost a compile (squall.runtime.ski_rental): it compiled a third time."""
    module = _encoder_decoder(name)
    jitted = squall.jit(module)
    compiles = []
    for length in (6, 9, 13):
        prompt = torch.randint(3, 97, (1, length))
        options = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=5, min_new_tokens=5, do_sample=False)
        before = jitted.cache_info().misses
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)
            expected = module.generate(prompt, **options)
            actual = jitted.generate(prompt, **options)
        assert torch.equal(actual, expected), f"prompt of {length}"
        compiles.append(jitted.cache_info().misses - before)
        jitted_state(jitted).rental.last_compile_cpu_s = 1e9  # (still rented, whatever the load)
    assert compiles == [2, 0, 0]
    assert jitted.cache_info().eager_before_compile == 3  # the step of one token, once per generate


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_an_encoder_decoder_s_step_of_one_token_compiles_once_it_cost_a_compile(name):
    module = _encoder_decoder(name)
    jitted = squall.jit(module)
    options = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False)
    compiles = []
    with torch.no_grad():
        for length in (6, 8, 7):
            prompt = torch.randint(3, 97, (1, length))
            before = jitted.cache_info().misses
            torch.testing.assert_close(jitted.generate(prompt, **options), module.generate(prompt, **options))
            compiles.append(jitted.cache_info().misses - before)
            # its eager calls have cost as much as a compile: the next generate compiles it
            jitted_state(jitted).rental.last_compile_cpu_s = 0.0
    assert compiles == [2, 1, 0]
    assert jitted.cache_info().eager_before_compile == 1


def test_an_encoder_decoder_s_rented_steps_do_not_split_it():
    # each rented step failed the entry's state check: counted as a state change, the fifth
    # generate split the module (its forward eager, a warning)
    module = _encoder_decoder("t5")
    jitted = squall.jit(module)
    options = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for length in range(5, 12):
            prompt = torch.randint(3, 97, (1, length))
            assert torch.equal(jitted.generate(prompt, **options), module.generate(prompt, **options))
            # (a compile that costs more than these steps: they stay rented, whatever the load)
            jitted_state(jitted).rental.last_compile_cpu_s = 1e9
    assert jitted.cache_info().misses == 2 and jitted.cache_info().eager_before_compile == 7, jitted.cache_info()


class _Layer:
    def __init__(self, keys: torch.Tensor):
        self.keys, self.values = keys, keys.clone()


class _Cache:
    def __init__(self, *layers: torch.Tensor):
        self.layers = [_Layer(k) for k in layers]


@pytest.mark.parametrize(
    ("shapes", "expected"),
    [
        ([(1, 4, 1, 8), (1, 4, 6, 8)], True),  # self-attention one token long beside cross-attention
        ([(1, 4, 5, 8), (1, 4, 5, 8)], False),  # a decoder's layers: one length, batch of 1
        ([(2, 4, 1, 8), (2, 4, 1, 8)], False),  # a prompt of one token: nothing longer beside it
        ([(1, 4, 1, 8), (1, 4, 6, 16)], False),  # other kinds of tensor
        ([(1, 4, 2, 8), (1, 4, 6, 8)], False),  # two or more: a symbolic variant serves it
    ],
)
def test_a_state_one_long_beside_a_longer_tensor_of_its_kind(shapes, expected):
    assert one_long(_Cache(*(torch.zeros(s) for s in shapes))) is expected
