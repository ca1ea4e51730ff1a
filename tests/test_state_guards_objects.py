"""Guards on Python state held in configs, settings modules, replaced forwards and unhashable
object arguments (squall.frontend.state_guards): each test changes what the program read after the
first call and checks the compiled result against eager's."""
from __future__ import annotations

import dataclasses
import types
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.ltorch.base import SquallWarning
from squall.runtime.jit import jitted_state
from state_guard_modules import Layer, Scaled
from state_guard_modules import check as _check


# --- a transformers-style config, a user's settings module, a replaced forward --------------------


class MappedConfig:
    """Maps names as transformers' PreTrainedConfig does (`hidden_size` reads `n_embd`)."""

    attribute_map = {"hidden_size": "n_embd"}

    def __init__(self, n_embd):
        self.n_embd = n_embd

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_config_attribute_read_under_a_mapped_name():
    class UsesConfig(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = MappedConfig(2.0)

        def forward(self, x):
            return x * self.config.hidden_size

    m = UsesConfig()
    j = squall.jit(m)
    x = torch.randn(3)
    _check(j, m, x)
    _check(j, m, x)
    assert jitted_state(j).stats.misses == 1
    m.config.n_embd = -3.0
    _check(j, m, x)


class ConfigWithBuiltList(MappedConfig):
    """transformers' FalconH1Config: `layer_types` maps to a property building a new list per read."""

    attribute_map = {"layer_types": "layers_block_type"}

    def __init__(self, layers):
        self.layers = layers

    @property
    def layers_block_type(self):
        return ["attention" if i % 2 else "mlp" for i in range(self.layers)]


def test_config_list_built_anew_at_each_read_compiles_once():
    class UsesLayerTypes(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = ConfigWithBuiltList(3)

        def forward(self, x):
            for kind in self.config.layer_types:
                x = x.sin() if kind == "attention" else x * 2
            return x

    m = UsesLayerTypes()
    j = squall.jit(m)
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SquallWarning)  # was: "changed while the program was being compiled", eager at every call
        _check(j, m, x)
        _check(j, m, x)
    assert jitted_state(j).stats.misses == 1
    m.config.layers = 4  # another list: the program follows it
    _check(j, m, x)
    assert jitted_state(j).stats.misses == 2


SETTINGS = types.ModuleType("user_settings")  # a user's `import settings`
SETTINGS.SCALE = 2.0


def test_attribute_of_a_users_settings_module_rebound():
    def f(x):
        return x * SETTINGS.SCALE

    j = squall.jit(f)
    x = torch.randn(3)
    _check(j, f, x)
    _check(j, f, x)
    assert jitted_state(j).stats.misses == 1
    SETTINGS.SCALE = 5.0
    try:
        _check(j, f, x)
    finally:
        SETTINGS.SCALE = 2.0

    def assigns(x):
        SETTINGS.SCALE = 3.0
        return x

    try:
        with pytest.warns(SquallWarning, match=r"assigns user_settings.SCALE \(.*test_state_guards_objects.py:\d+\).*runs eagerly"):
            squall.jit(assigns)(x)
        assert SETTINGS.SCALE == 3.0  # as eager assigns it
    finally:
        SETTINGS.SCALE = 2.0


def test_forward_replaced_on_the_instance_of_a_torch_module():
    lin = nn.Linear(4, 4)
    j = squall.jit(lin)
    x = torch.randn(2, 4)
    _check(j, lin, x)
    lin.forward = lambda t: nn.functional.linear(t, lin.weight, lin.bias) * 2  # as wrapping libraries do
    _check(j, lin, x)
    del lin.forward
    _check(j, lin, x)
    assert jitted_state(j).stats.misses == 2, "the forward came back: the first plan again"


ACT_SCALE = 2.0


def scaled_act(x):
    return torch.tanh(x) * ACT_SCALE


ACTS = {"scaled": scaled_act}


def test_modules_and_functions_held_in_plain_lists_tuples_and_dicts():
    global ACT_SCALE

    class Holds(nn.Module):
        def __init__(self):
            super().__init__()
            self.plain = [Layer()]  # not registered: a plain list of a module
            self.acts = (scaled_act, torch.relu)

        def forward(self, x):
            for layer in self.plain:
                x = layer(x)
            return ACTS["scaled"](self.acts[0](x)), self.acts, self.plain

    m = Holds()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    out, acts, plain = j(x)
    assert acts[0] is scaled_act and plain[0] is m.plain[0] and type(plain[0]) is Layer, "the real objects come back, not recording copies"
    assert_close(out, m(x)[0])
    m.plain[0].scale = -1.0
    assert_close(j(x)[0], m(x)[0])
    try:
        ACT_SCALE = 3.0
        assert_close(j(x)[0], m(x)[0])
    finally:
        ACT_SCALE = 2.0
    ACTS["scaled"] = torch.tanh
    try:
        assert_close(j(x)[0], m(x)[0])
    finally:
        ACTS["scaled"] = scaled_act


def test_property_reading_changing_state_and_a_submodule_put_in_eval_alone():
    class Gated(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.999))
            self._gate = 2.0

        @property
        def gate(self):
            return self._gate

        def forward(self, x):
            return self.inner(x) * self.gate

    torch.manual_seed(0)
    m = Gated().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    m._gate = -1.0
    _check(j, m, x)
    m.inner[1].train()  # only the dropout: in training, p=0.999 zeroes (nearly) everything
    assert j(x).abs().sum() < m.inner[0](x).abs().sum() * 0.1
    m.inner[1].eval()
    _check(j, m, x)


def test_globals_read_by_static_and_class_methods():
    global ACT_SCALE

    class Helpers(nn.Module):
        @staticmethod
        def static(x):
            return x * ACT_SCALE

        @classmethod
        def klass(cls, x):
            return x + ACT_SCALE

        def forward(self, x):
            return self.static(x) + self.klass(x)

    m = Helpers()
    j = squall.jit(m)
    x = torch.randn(3)
    _check(j, m, x)
    _check(j, m, x)
    assert jitted_state(j).stats.misses == 1
    try:
        ACT_SCALE = -7.0
        _check(j, m, x)
    finally:
        ACT_SCALE = 2.0


def test_dict_absence_caught_setdefault_and_list_concatenation():
    class Reads(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = {}
            self.cache = {}
            self.factors = [2.0]

        def forward(self, x):
            try:
                y = x * self.d["k"]
            except KeyError:
                y = x
            self.cache.setdefault("first", 1.0)
            return y * sum(self.factors + [1.0])

    m = Reads()
    j = squall.jit(m)
    x = torch.randn(3)
    _check(j, m, x)
    m.d["k"] = 3.0
    _check(j, m, x)
    m.factors[0] = -1.0
    _check(j, m, x)
    assert m.cache == {"first": 1.0}


def test_module_passed_as_an_argument_is_read_through():
    def f(x, layer):
        return layer(x)

    layer = Layer()
    j = squall.jit(f)
    x = torch.randn(2, 4)
    _check(j, f, x, layer)
    _check(j, f, x, layer)
    assert jitted_state(j).stats.misses == 1
    layer.scale = 5.0
    _check(j, f, x, layer)
    layer.lin = nn.Linear(4, 4)
    _check(j, f, x, layer)


def test_global_backward_hook_runs_for_each_module_as_in_eager():
    m = Layer()
    j = squall.jit(m)
    x = torch.randn(2, 4, requires_grad=True)
    j(x).sum().backward()
    seen = []
    handle = nn.modules.module.register_module_full_backward_hook(lambda mod, gi, go: seen.append(mod))
    try:
        with pytest.warns(SquallWarning, match="global module backward hook"):
            j(x).sum().backward()
        compiled, seen[:] = list(seen), []
        m(x).sum().backward()
    finally:
        handle.remove()
    assert [id(s) for s in compiled] == [id(s) for s in seen] and len(seen) == 2


# --- unhashable object arguments: keyed by identity, their attributes guarded ----------------------


@dataclasses.dataclass
class _EqConfig:  # eq=True and not frozen: __hash__ is None
    scale: float
    relu: bool


def _configured(x, cfg):
    y = x * cfg.scale
    return torch.relu(y) if cfg.relu else y


def test_unhashable_dataclass_argument_is_keyed_by_identity_and_guarded():
    cfg = _EqConfig(2.0, True)
    j = squall.jit(_configured)
    x = torch.randn(5)
    _check(j, _configured, x, cfg)
    _check(j, _configured, x, cfg)
    assert jitted_state(j).stats.misses == 1
    cfg.relu = False  # changed in place: the guard on the attribute sees it
    _check(j, _configured, x, cfg)
    cfg.scale = 3.0
    _check(j, _configured, x, cfg)
    other = _EqConfig(3.0, False)  # equal by its own __eq__, yet another object: read again
    _check(j, _configured, x, other)
    other.scale = -1.0
    _check(j, _configured, x, other)
    _check(j, _configured, x, cfg)


def test_unhashable_config_in_a_list_argument_and_as_keyword():
    cfg = _EqConfig(2.0, False)
    f = lambda x, cfgs, *, last: _configured(x, cfgs[0]) + _configured(x, last)
    j = squall.jit(f)
    x = torch.randn(3)
    assert_close(j(x, [cfg], last=cfg), f(x, [cfg], last=cfg))
    cfg.relu = True
    assert_close(j(x, [cfg], last=cfg), f(x, [cfg], last=cfg))


def test_transformers_config_argument_changed_after_the_first_call():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.PretrainedConfig(hidden_act="relu")
    cfg.temperature = 2.0

    def f(x, config):
        y = x / config.temperature
        return torch.relu(y) if config.hidden_act == "relu" else torch.tanh(y)

    j = squall.jit(f)
    x = torch.randn(6)
    _check(j, f, x, cfg)
    cfg.hidden_act = "tanh"
    _check(j, f, x, cfg)
    cfg.temperature = 0.5
    _check(j, f, x, cfg)


def test_simple_namespace_argument_is_keyed_by_its_values():
    f = lambda x, ns: x * ns.scale + ns.shift
    j = squall.jit(f)
    x = torch.randn(4)
    ns = types.SimpleNamespace(scale=2.0, shift=1)
    _check(j, f, x, ns)
    _check(j, f, x, types.SimpleNamespace(scale=2.0, shift=1))
    assert jitted_state(j).stats.misses == 1  # an equal namespace: the same entry
    ns.shift = 5
    _check(j, f, x, ns)
    # a tensor in one would be a constant of the trace: refused, naming the argument
    with pytest.raises(TypeError, match="argument.*SimpleNamespace.*not hashable"):
        j(x, types.SimpleNamespace(scale=torch.ones(1), shift=0))


def test_unhashable_argument_written_by_the_program_is_replayed_on_it():
    @dataclasses.dataclass
    class Counter:
        n: int = 0
        last: float = 0.0

    def f(x, c):
        c.last = 1.5
        return x + 1

    j = squall.jit(f)
    a, b = Counter(), Counter()
    x = torch.randn(2)
    _check(j, f, x, a)
    a.last = 0.0
    j(x, a)
    assert a.last == 1.5
    j(x, b)  # another object: its own entry, the write lands on it
    assert b.last == 1.5


def test_unhashable_dataclass_holding_a_tensor_sees_it_replaced_and_changed_in_place():
    @dataclasses.dataclass
    class Weighted:
        w: torch.Tensor
        shift: float

    f = lambda x, c: x * c.w + c.shift
    j = squall.jit(f)
    x, c = torch.randn(3), Weighted(torch.ones(3), 1.0)
    _check(j, f, x, c)
    c.w.add_(1)  # in place: the same tensor, read at the call
    _check(j, f, x, c)
    c.w = torch.randn(3)  # another tensor of the same metadata: an input read at the call, not compiled again
    _check(j, f, x, c)
    c.shift = 3.0
    _check(j, f, x, c)
    c.w = torch.randn(3, dtype=torch.float64)  # another dtype: its metadata guard fails, compiled again
    _check(j, f, x, c)
    assert jitted_state(j).stats.misses == 3


class RegistersOnFirstCall(nn.Module):
    """Registers a capture hook on its inner layer at its first call (as transformers' output capture does)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.installed = False
        self.captured = []

    def forward(self, x):
        if not self.installed:
            self.lin.register_forward_hook(lambda mod, args, out: self.captured.append(out * 2))
            self.installed = True
        return self.lin(x) + 1


def test_a_hook_registered_while_traced_is_registered_once_by_eager_and_then_traced():
    torch.manual_seed(0)
    m = RegistersOnFirstCall()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    expected = torch.nn.functional.linear(x, m.lin.weight, m.lin.bias)  # (not through the hooked layer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SquallWarning)
        for n in range(1, 4):
            assert_close(j(x), expected + 1)
            assert len(m.lin._forward_hooks) == 1  # registered once, by eager, never by the trace
            assert len(m.captured) == n  # the hook ran at every call
            assert_close(m.captured[-1], expected * 2)
    assert j.cache_info().misses == 2 and j.cache_info().split is None  # the first call ran eagerly


def test_a_traced_hook_keying_a_dict_by_its_module_stores_the_real_module():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    activations = {}
    for layer in model:
        layer.register_forward_hook(lambda mod, args, out: activations.__setitem__(mod, out.detach()))
    x = torch.randn(2, 4)
    squall.jit(model)(x)
    assert list(activations) == list(model)  # the modules themselves, not squall's stand-ins
    assert_close(activations[model[1]], model(x))


def test_a_state_changed_back_runs_the_entry_set_aside_for_it_in_place_of_a_miss():
    """A one-token prompt's prefill and decoding step share a key and take turns at every
    generate: the rejected call runs the set-aside entry whose guards hold at once, without a
    second dispatch through the entry point (a miss's checks)."""
    m = Scaled()
    j = squall.jit(m)
    state = jitted_state(j)
    x = torch.randn(2, 4)
    for scale in (2.0, 3.0):
        m.scale = scale
        _check(j, m, x)
    dispatched = []
    entry_point = state.entry_point
    state.entry_point = lambda *a, **k: dispatched.append(1) or entry_point(*a, **k)
    for scale in (2.0, 3.0, 2.0):
        m.scale = scale
        _check(j, m, x)
    assert dispatched == []
    assert j.cache_info().misses == 2
    assert state.stats.changes == {"attribute 'scale' of the module": 4}
