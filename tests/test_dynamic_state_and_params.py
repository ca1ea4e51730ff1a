"""Dynamic shapes where a real model's code meets them first (found by a sweep of HF `generate`
families and timm vision transformers with changing batches and image sizes):

- an int an argument object holds and advances at every step (a sliding-window KV cache's count
  of tokens seen, `DynamicSlidingWindowLayer.cumulative_length`) becomes a size symbol once it
  changed, so a decoding loop compiles its step once instead of at every token (and splitting,
  eager, after five);
- a method of a module's parameter called with a symbolic size (`self.cls_token.expand(B, -1, -1)`)
  traces; torch's own argument parser used to refuse the size before tracing saw the call, so the
  whole forward ran eagerly at the first batch change;
- `F.interpolate` in a mode squall does not model (antialias: timm's position-embedding
  resampling at a new image size) runs as an opaque torch call, with a warning, instead of raising.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import squall


class _Layer:
    def __init__(self):
        self.keys = torch.zeros(2, 0, 4)
        self.seen = 0  # tokens seen so far: an int each step reads and advances


class _Cache:
    """A KV cache as transformers' sliding-window layers keep one: tensors and a count of tokens."""

    def __init__(self):
        self.layers = [_Layer()]


WINDOW = 6


def _sliding_step(x, cache):
    layer = cache.layers[0]
    layer.seen += x.shape[1]
    layer.keys = torch.cat([layer.keys, x], dim=1)[:, -WINDOW:]
    offset = max(layer.seen - WINDOW, 0)
    length = layer.seen - offset
    positions = torch.arange(length) + offset
    return (layer.keys * positions[None, :, None]).sum(1)


def _decode(jitted, steps):
    """The prompt (5 tokens), then `steps` single tokens, through eager and `jitted`, compared at each call."""
    eager_cache, cache = _Cache(), _Cache()
    for i, n in enumerate([5] + [1] * steps):
        x = torch.randn(2, n, 4)
        expected, actual = _sliding_step(x, eager_cache), jitted(x, cache)
        torch.testing.assert_close(actual, expected, msg=lambda m: f"call {i}: {m}")
        assert type(cache.layers[0].seen) is int and cache.layers[0].seen == eager_cache.layers[0].seen
        torch.testing.assert_close(cache.layers[0].keys, eager_cache.layers[0].keys)
    return cache


@pytest.mark.parametrize("dynamic", [None, True])
def test_an_int_a_cache_advances_at_every_step_becomes_a_size(dynamic):
    jitted = squall.jit(_sliding_step, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no recompile warning, no split
        _decode(jitted, steps=3)
        before = jitted.cache_info().misses
        _decode(jitted, steps=8)  # a new cache; the window fills: its keys stop growing, the count does not
    # the prompt (the count 0, a constant), a step (the count changed: a size from there on,
    # before and past the window alike); a new cache, a longer loop: nothing more
    assert before == 2
    assert jitted.cache_info().misses == before
    source = squall.last_traces(jitted).source
    assert "__dict__['seen']" in source  # read from the call's own cache


def test_a_held_int_whose_value_the_program_needs_is_keyed_by_value_again():
    def step(x, cache):
        layer = cache.layers[0]
        layer.seen += 1
        return x * len(list(range(layer.seen)))  # range() needs the value itself

    jitted = squall.jit(step)
    eager_cache, cache = _Cache(), _Cache()
    for _ in range(5):
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x, cache), step(x, eager_cache))
        assert type(cache.layers[0].seen) is int and cache.layers[0].seen == eager_cache.layers[0].seen


def test_a_held_int_that_falls_back_below_two_is_a_constant_again():
    jitted = squall.jit(_sliding_step)
    eager_cache, cache = _Cache(), _Cache()
    for n in (5, 1, 1, 1):
        x = torch.randn(2, n, 4)
        torch.testing.assert_close(jitted(x, cache), _sliding_step(x, eager_cache))
    for held in (cache, eager_cache):  # the cache reset: an empty window, no tokens seen
        held.layers[0].keys, held.layers[0].seen = torch.zeros(2, 0, 4), 0
    for n in (1, 1, 3):
        x = torch.randn(2, n, 4)
        torch.testing.assert_close(jitted(x, cache), _sliding_step(x, eager_cache))
        assert cache.layers[0].seen == eager_cache.layers[0].seen


def test_with_dynamic_false_a_held_int_is_guarded_by_value():
    jitted = squall.jit(_sliding_step, dynamic=False)
    _decode(jitted, steps=2)
    assert "__dict__['seen']" not in squall.last_traces(jitted).source


class _ClassToken(torch.nn.Module):
    """A ViT's class token and a buffer, each used through its own methods with the batch size."""

    def __init__(self):
        super().__init__()
        self.cls_token = torch.nn.Parameter(torch.randn(1, 1, 4))
        self.register_buffer("scale", torch.randn(1, 4))

    def forward(self, x):
        b = x.shape[0]
        tokens = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)
        return tokens * self.scale.repeat(b, 1)[:, None, :]


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_parameters_method_takes_a_symbolic_batch(dynamic):
    module = _ClassToken()
    jitted = squall.jit(module, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # traced, not run eagerly
        for batch in (2, 3, 5, 8):
            x = torch.randn(batch, 3, 4, requires_grad=True)
            actual, expected = jitted(x), module(x)
            torch.testing.assert_close(actual, expected)
            grads = torch.autograd.grad(actual.sum(), (x, module.cls_token))
            torch.testing.assert_close(grads, torch.autograd.grad(expected.sum(), (x, module.cls_token)))
    assert jitted.cache_info().misses <= 2


@pytest.mark.parametrize("options", [dict(mode="bicubic", antialias=True, align_corners=False), dict(mode="bilinear", antialias=True, align_corners=False)])
@pytest.mark.parametrize("dynamic", [None, True])
def test_interpolate_in_a_mode_squall_does_not_model_runs_as_an_opaque_call(options, dynamic):
    def resample(grid, x):
        return torch.nn.functional.interpolate(grid, size=(x.shape[1], x.shape[2]), **options) + 1

    grid = torch.randn(1, 3, 4, 4)
    jitted = squall.jit(resample, dynamic=dynamic)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for size in (3, 6, 7, 6):
            x = torch.empty(1, size, size)
            torch.testing.assert_close(jitted(grid, x), resample(grid, x))
    messages = [str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning)]
    assert messages and all("interpolate runs as an opaque torch call (interpolate(): " in m and "is not supported by squall" in m for m in messages), messages


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_of_integer_images_answers_as_eager(mode):
    """Eager resizes uint8 images in these modes (and refuses int64): squall raised its own
    NotImplementedError for both; now torch's call answers, a uint8 image resized, int64 refused."""
    def resize(x):
        return torch.nn.functional.interpolate(x, size=(6, 5), mode=mode)

    image = torch.randint(0, 256, (1, 3, 4, 4), dtype=torch.uint8)
    with pytest.warns(squall.SquallWarning, match="interpolation of torch.uint8 is not supported by squall"):
        assert torch.equal(squall.jit(resize)(image), resize(image))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        resize(image.long())
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"), warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        squall.jit(resize)(image.long())


def test_interpolate_still_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match="align_corners"):
        squall.jit(lambda x: torch.nn.functional.interpolate(x, size=(3, 3), mode="nearest", align_corners=True))(torch.randn(1, 1, 2, 2))


def test_a_strided_convolution_trains_with_every_dimension_symbolic():
    """Its input's gradient is a transposed convolution whose output_padding (the rows the forward's
    floor division dropped) is computed from the sizes: read and guarded, not passed on symbolic."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 3, stride=2, padding=1))
    jitted = squall.jit(module, dynamic=True)
    for batch, size in [(2, 9), (3, 9), (2, 12)]:
        x = torch.randn(batch, 3, size, size, requires_grad=True)
        actual = torch.autograd.grad(jitted(x).sum(), (x, *module.parameters()))
        torch.testing.assert_close(actual, torch.autograd.grad(module(x).sum(), (x, *module.parameters())))


class _CrossCache:
    """An encoder-decoder cache's cross-attention part as transformers keeps it: keys computed at
    the first step, and a dict saying which layers have theirs (made anew with each cache)."""

    def __init__(self):
        self.is_updated = {0: False, 1: False}
        self.layers = [_Layer(), _Layer()]


def _cross_step(x, memory, cache):
    out = x
    for layer in (0, 1):
        if not cache.is_updated[layer]:
            cache.layers[layer].keys = memory * (layer + 2)
            cache.is_updated[layer] = True
        out = out + cache.layers[layer].keys.sum()
    return out


def test_a_dict_an_argument_object_holds_is_read_and_written_through_the_call():
    """Its items are guarded, and its writes replayed, on the call's own object: a new cache of
    the same layout runs the programs the first one compiled, and each call writes its own."""
    jitted = squall.jit(_cross_step)
    compiles = []
    for _ in range(3):
        memory = torch.randn(4)
        eager_cache, cache = _CrossCache(), _CrossCache()
        before = jitted.cache_info().misses
        for _ in range(3):
            x = torch.randn(4)
            torch.testing.assert_close(jitted(x, memory, cache), _cross_step(x, memory, eager_cache))
            assert cache.is_updated == eager_cache.is_updated
            torch.testing.assert_close([c.keys for c in cache.layers], [c.keys for c in eager_cache.layers])
        compiles.append(jitted.cache_info().misses - before)
    assert compiles == [2, 0, 0]  # the first step (nothing cached yet), the later steps
    stale = _CrossCache()
    stale.is_updated[1] = True  # a layout no call compiled for: guarded, not taken for another
    stale.layers[1].keys = torch.ones(4)
    x, memory = torch.randn(4), torch.randn(4)
    expected_cache = _CrossCache()
    expected_cache.is_updated[1], expected_cache.layers[1].keys = True, torch.ones(4)
    torch.testing.assert_close(jitted(x, memory, stale), _cross_step(x, memory, expected_cache))


def _add_in_place(x, n):
    x.add_(n)
    return x * 2


def test_a_program_writing_its_input_takes_a_dynamic_number():
    """The check that the written inputs share no memory reads the tensors alone, not the number
    passed beside them (it raised TypeError at the call after the number became dynamic)."""
    jitted = squall.jit(_add_in_place)
    for n in (1, 2, 3, 4):
        x, expected_x = torch.ones(3), torch.ones(3)
        torch.testing.assert_close(jitted(x, n), _add_in_place(expected_x, n))
        torch.testing.assert_close(x, expected_x)
    x = torch.ones(4)
    torch.testing.assert_close(jitted(x[:3], 5), torch.full((3,), 12.0))  # still checked: a view of another tensor


def test_a_program_writing_its_input_reads_a_held_int_as_a_size():
    def step(x, cache):
        layer = cache.layers[0]
        layer.seen += x.shape[1]
        x.add_(1)
        return x[:, : layer.seen % 7 + 1]

    jitted = squall.jit(step)
    eager_cache, cache = _Cache(), _Cache()
    for n in (5, 3, 4, 2):
        x = torch.randn(2, n)
        expected_x = x.clone()
        torch.testing.assert_close(jitted(x, cache), step(expected_x, eager_cache))
        torch.testing.assert_close(x, expected_x)
        assert cache.layers[0].seen == eager_cache.layers[0].seen


def _pad_in_ends(ids, pad):
    return ids * 2 if pad in ids[:, [-1, 0]] else ids * 3  # transformers' padding check


def test_a_number_in_a_tensor_is_read_and_guarded():
    jitted = squall.jit(_pad_in_ends)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for ids in ([[1, 2, 3]], [[0, 2, 3]], [[4, 2, 5]], [[4, 2, 0]]):
            ids = torch.tensor(ids)
            torch.testing.assert_close(jitted(ids, 0), _pad_in_ends(ids, 0))


def test_a_tensor_holds_only_tensors_and_numbers():
    with pytest.raises(RuntimeError, match="Tensor.__contains__ only supports Tensor or scalar"):
        squall.jit(lambda x: "a" in x)(torch.ones(2))
