"""Plain Python objects passed as arguments (a KV cache) are keyed by their type and the layout
the program read, not their identity: a new object of the same layout runs the same program,
reached through the call's own arguments; any difference the trace relied on compiles again."""
from __future__ import annotations

import torch

import squall


class Layer:
    def __init__(self, keys: torch.Tensor | None, scale: float = 1.0):
        self.keys = keys
        self.scale = scale


class Cache:
    def __init__(self, layers: list[Layer], flag: bool = False):
        self.layers = layers
        self.flag = flag
        self.steps = 0


def _cache(n_layers: int = 2, length: int = 5, **options) -> Cache:
    return Cache([Layer(torch.randn(2, length, 4)) for _ in range(n_layers)], **options)


def read(x: torch.Tensor, cache: Cache) -> torch.Tensor:
    out = x
    for layer in cache.layers:
        if layer.keys is not None:
            out = out + layer.keys.sum(1) * layer.scale
    return out * 2 if cache.flag else out


def _same_calls(fn, jitted, x, make):
    """Both called on their own object from `make()` with the same contents."""
    torch.manual_seed(1)
    expected = fn(x, make())
    torch.manual_seed(1)
    actual = jitted(x, make())
    torch.testing.assert_close(actual, expected)


def test_a_new_object_of_the_same_layout_runs_the_same_program_on_its_own_tensors():
    jitted = squall.jit(read)
    x = torch.randn(2, 4)
    for seed in range(3):
        torch.manual_seed(seed)
        cache = _cache()
        torch.testing.assert_close(jitted(x, cache), read(x, cache))
    info = jitted.cache_info()
    assert (info.misses, info.hits) == (1, 2)


def test_a_different_layout_compiles_again_and_matches_eager():
    jitted = squall.jit(read)
    x = torch.randn(2, 4)
    layouts = [
        lambda: _cache(),
        lambda: _cache(n_layers=3),  # one more layer
        lambda: Cache([Layer(torch.randn(2, 5, 4)), Layer(None)]),  # a tensor missing
        lambda: _cache(flag=True),  # a Python attribute the trace branched on
        lambda: Cache([Layer(torch.randn(2, 5, 4), scale=3.0), Layer(torch.randn(2, 5, 4))]),  # a number it read
        lambda: Cache((Layer(torch.randn(2, 5, 4)), Layer(torch.randn(2, 5, 4)))),  # a tuple, not a list
    ]
    for make in layouts:
        _same_calls(read, jitted, x, make)
    assert jitted.cache_info().misses == len(layouts)
    for make in layouts:  # each layout again: its own program, no compile
        _same_calls(read, jitted, x, make)
    assert jitted.cache_info().misses == len(layouts)


def test_the_tensors_an_object_holds_are_symbolic_so_a_growing_cache_compiles_once():
    jitted = squall.jit(read)
    x = torch.randn(2, 4)
    for length in (5, 6, 9, 17):
        torch.manual_seed(length)
        cache = _cache(length=length)
        torch.testing.assert_close(jitted(x, cache), read(x, cache))
    assert jitted.cache_info().misses == 1
    # a dtype differs: the metadata guard fails, compiled again
    cache = Cache([Layer(torch.randn(2, 5, 4, dtype=torch.float64)) for _ in range(2)])
    torch.testing.assert_close(jitted(x.double(), cache), read(x.double(), cache))
    assert jitted.cache_info().misses == 2


def update(x: torch.Tensor, cache: Cache) -> Cache:
    """As a KV cache's update: each layer's keys grow by x, a counter counts; the cache is returned."""
    for layer in cache.layers:
        layer.keys = torch.cat([layer.keys, x.unsqueeze(1)], dim=1)
    cache.steps = cache.steps + 1
    return cache


def test_writes_are_replayed_on_the_call_s_own_object_which_is_returned():
    jitted = squall.jit(update)
    x = torch.randn(2, 4)
    first, again = _cache(), _cache()
    before = [layer.keys.clone() for layer in again.layers]
    assert jitted(x, first) is first
    out = jitted(x, again)
    assert out is again, "the program returns the object this call gave, not the one it was traced with"
    assert again.steps == 1 and first.steps == 1
    for layer, old in zip(again.layers, before):
        torch.testing.assert_close(layer.keys, torch.cat([old, x.unsqueeze(1)], dim=1))
    assert jitted.cache_info().misses == 1


def two(x: torch.Tensor, a: Cache, b: Cache) -> torch.Tensor:
    a.layers[0].keys = a.layers[0].keys + 1
    return x + b.layers[0].keys.sum(1)


def test_one_object_passed_twice_is_told_apart_from_two_objects():
    jitted = squall.jit(two)
    x = torch.randn(2, 4)
    for shared in (False, True, False):
        torch.manual_seed(0)
        a = _cache()
        expected = two(x, a, a if shared else _cache())
        torch.manual_seed(0)
        a = _cache()
        actual = jitted(x, a, a if shared else _cache())
        torch.testing.assert_close(actual, expected, msg=lambda m: f"shared={shared}: {m}")
    assert jitted.cache_info().misses == 2


class Placed:
    def __init__(self, device: str, keys: torch.Tensor):
        self.device = torch.device(device)  # a new torch.device object per cache, as HF's static cache makes
        self.keys = keys


def placed(x: torch.Tensor, cache: Placed) -> torch.Tensor:
    return x + cache.keys if cache.device.type == "cpu" else x - cache.keys


def test_a_torch_device_an_object_holds_is_guarded_by_value_not_identity():
    jitted = squall.jit(placed)
    x = torch.randn(3)
    for _ in range(3):
        cache = Placed("cpu", torch.randn(3))
        torch.testing.assert_close(jitted(x, cache), placed(x, cache))
    assert jitted.cache_info().misses == 1
    cache = Placed("meta", torch.randn(3))  # another device: the guard fails
    torch.testing.assert_close(jitted(x, cache), placed(x, cache))
    assert jitted.cache_info().misses == 2


class Settings:
    def __init__(self, scale: float):
        self.scale = scale


def scaled(x: torch.Tensor, settings: Settings) -> torch.Tensor:
    return x * settings.scale


def test_a_call_given_a_state_holding_object_is_symbolic_from_its_first_compile_and_a_settings_object_is_not():
    """A KV-cache-like object (tensors, or a list of objects) marks a step of a stateful loop: every
    size of the call is symbolic from the first compile; an object of plain settings does not."""
    settings = squall.jit(scaled)
    x = torch.randn(3, 4)
    torch.testing.assert_close(settings(x, Settings(2.0)), scaled(x, Settings(2.0)))
    assert "s0" not in squall.last_traces(settings).source
    cached = squall.jit(read)
    x = torch.randn(2, 4)
    cache = _cache()
    torch.testing.assert_close(cached(x, cache), read(x, cache))
    assert "s0" in squall.last_traces(cached).source
    for n in (3, 5):  # other batch sizes: the same program
        x, cache = torch.randn(n, 4), Cache([Layer(torch.randn(n, 5, 4)) for _ in range(2)])
        torch.testing.assert_close(cached(x, cache), read(x, cache))
    assert cached.cache_info().misses == 1


def test_a_program_returning_the_object_it_was_given_prints():
    # the background upgrade keys its verdict by the printed trace: printing the returned object
    # failed ("from a function that does not receive the call's arguments"), so generate's
    # entries were never upgraded; shown, the object is where the call's arguments reach it
    jitted = squall.jit(update, executors=["torch"])
    cache = _cache()
    assert jitted(torch.randn(2, 4), cache) is cache
    shown = str(squall.last_traces(jitted).traced)
    assert shown.splitlines()[-1].strip() == "return tree_unflatten([args[1], t1, t3, 1], output_spec)", shown


class StateLayer:
    """As a Mamba cache's layer: tensors held in a dict by index and in a list (made at the
    prompt, then written in place at every step)."""

    def __init__(self):
        self.conv_states: dict[int, torch.Tensor | None] = {0: None}
        self.recurrent: list[torch.Tensor] = []


def recurrent_step(x: torch.Tensor, cache: Cache) -> torch.Tensor:
    out = x
    for layer in cache.layers:
        if layer.conv_states[0] is None:  # the prompt: the states made
            layer.conv_states[0] = x.sum(0, keepdim=True).repeat(2, 1)
            layer.recurrent.append(x * 2)
        else:  # a step: written in place, as a Mamba cache's `copy_`
            layer.conv_states[0].copy_(layer.conv_states[0] * 0.5 + x)
            layer.recurrent[0].mul_(0.25).add_(x)
        out = out + layer.conv_states[0] * layer.recurrent[0]
    return out


def test_tensors_held_in_an_object_s_dict_or_list_are_inputs_so_a_new_cache_compiles_nothing():
    # they were guarded by identity: every new cache (each `generate` of a Mamba, FalconMamba,
    # NemotronH, Inkling or LaraMini model) failed the step's check and compiled the step again
    jitted = squall.jit(recurrent_step)
    torch.manual_seed(0)
    for generation in range(3):
        ours, theirs = Cache([StateLayer(), StateLayer()]), Cache([StateLayer(), StateLayer()])
        for _ in range(4):
            x = torch.randn(2, 4)
            torch.testing.assert_close(jitted(x, ours), recurrent_step(x, theirs))
            for mine, eager in zip(ours.layers, theirs.layers):
                torch.testing.assert_close(mine.conv_states[0], eager.conv_states[0])
                torch.testing.assert_close(mine.recurrent[0], eager.recurrent[0])
        if generation == 0:
            assert jitted.cache_info().misses == 2  # the prompt, the step
    assert jitted.cache_info().misses == 2, "a new cache of the same layout runs the programs compiled"


class TwoPlaces:
    def __init__(self, a: torch.Tensor, b: torch.Tensor):
        self.a, self.b, self.states = a, b, {0: a}


def read_twice(x: torch.Tensor, held: TwoPlaces) -> torch.Tensor:
    return x + held.a * 2 + held.b + held.states[0] * 3


def test_one_tensor_an_object_holds_in_two_places_is_told_apart_from_two_tensors():
    # one input read from the first place: a later object holding two tensors there gave the
    # first one's value for both (a wrong answer); now guarded to be the same object
    jitted = squall.jit(read_twice)
    x, t = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(jitted(x, TwoPlaces(t, t)), read_twice(x, TwoPlaces(t, t)))
    for held in (TwoPlaces(torch.randn(3), torch.randn(3)), TwoPlaces(t, t)):
        held.states[0] = torch.randn(3)
        torch.testing.assert_close(jitted(x, held), read_twice(x, held))
    assert jitted.cache_info().misses == 2
