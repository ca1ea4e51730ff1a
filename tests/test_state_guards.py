"""Guards on Python state (squall.frontend.state_guards): each test changes what the program read after the
first call and checks the compiled result against eager's; side effects replay as eager's do."""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils import prune
from torch.testing import assert_close

import squall
from squall.ltorch.base import SquallWarning
from squall.proxies import TensorProxy
from squall.runtime.jit import jitted_state


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 2.0
        self.relu = True
        self.mode = "add"

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.relu:
            y = torch.relu(y)
        return y + 1 if self.mode == "add" else y - 1


def _check(jitted, eager, *args):
    assert_close(jitted(*args), eager(*args))


@pytest.mark.parametrize("change", [("scale", 3.0), ("scale", -0.0), ("relu", False), ("mode", "sub"), ("scale", 3)])
def test_module_attribute_changed_after_first_call(change):
    m = Scaled()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    setattr(m, *change)
    _check(j, m, x)
    assert jitted_state(j).stats.changes, "the recompile is put down to the attribute"


def test_attribute_changed_back_reuses_the_earlier_plan():
    m = Scaled()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    for scale in (2.0, 3.0, 2.0, 3.0):
        m.scale = scale
        _check(j, m, x)
    assert jitted_state(j).stats.misses == 2


SCALE = 2.0
OFFSET = torch.ones(3)


def reads_globals(x):
    return x * SCALE + OFFSET


def test_global_number_and_tensor_rebound():
    global SCALE, OFFSET
    j = squall.jit(reads_globals)
    x = torch.randn(3)
    _check(j, reads_globals, x)
    try:
        SCALE = 5.0
        _check(j, reads_globals, x)
        OFFSET = torch.full((3,), 7.0)
        _check(j, reads_globals, x)
        OFFSET.add_(1)  # in place: the same tensor, read at the call
        _check(j, reads_globals, x)
    finally:
        SCALE, OFFSET = 2.0, torch.ones(3)


def test_closure_cell_rebound():
    k = 2.0
    bias = torch.zeros(3)

    def f(x):
        return x * k + bias

    j = squall.jit(f)
    x = torch.randn(3)
    _check(j, f, x)
    k = -1.5
    _check(j, f, x)
    bias = torch.ones(3)
    _check(j, f, x)


def test_submodule_replaced():
    m = Scaled()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    m.lin = nn.Linear(4, 4)  # same shapes: only its identity tells
    _check(j, m, x)
    m.lin = nn.Linear(4, 6)
    _check(j, m, x)


def test_submodule_in_a_sequential_replaced():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    j = squall.jit(m)
    x = torch.randn(3, 4)
    _check(j, m, x)
    m[1] = nn.Tanh()
    _check(j, m, x)


class MaybeBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        y = x @ self.weight
        if hasattr(self, "extra"):
            y = y + self.extra
        return y


def test_parameter_added_and_removed():
    m = MaybeBias()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    m.extra = nn.Parameter(torch.randn(4))
    _check(j, m, x)
    del m.extra
    _check(j, m, x)
    lin = nn.Linear(4, 4)
    jl = squall.jit(lin)
    _check(jl, lin, x)
    lin.bias = None
    _check(jl, lin, x)


def test_hook_registered_on_inner_submodule_after_compiling():
    m = Scaled()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    handle = m.lin.register_forward_hook(lambda mod, args, out: out * 10)
    _check(j, m, x)  # compiled again, the hook traced with the forward
    handle.remove()
    _check(j, m, x)
    assert j.cache_info().misses == 2  # the hooked and the unhooked forward, each compiled once
    prune.l1_unstructured(m.lin, "weight", amount=0.5)  # a hook of torch's own: run eagerly
    with pytest.warns(SquallWarning, match="forward pre hooks hook"):
        _check(j, m, x)


def test_pre_hook_side_effect_runs_every_call():
    m = Scaled()
    calls = []
    m.lin.register_forward_pre_hook(lambda mod, args: calls.append(1))
    j = squall.jit(m)
    x = torch.randn(2, 4)
    j(x)
    j(x)
    j(x)
    assert len(calls) == 3  # the traced hook's append, replayed at every call


class Config:
    def __init__(self, factor):
        self.factor = factor


def test_object_argument_attribute_changed():
    def f(x, cfg):
        return x * cfg.factor

    j = squall.jit(f)
    cfg = Config(2.0)
    x = torch.randn(3)
    _check(j, f, x, cfg)
    cfg.factor = 4.0
    _check(j, f, x, cfg)


def test_negative_zero_and_nan_keys():
    def f(x, s):
        return x / s

    j = squall.jit(f)
    x = torch.ones(2)
    assert_close(j(x, 0.0), f(x, 0.0))
    assert_close(j(x, -0.0), f(x, -0.0))
    assert torch.isneginf(j(x, -0.0)).all()
    for _ in range(3):
        assert_close(j(x, float("nan")), f(x, float("nan")), equal_nan=True)
    # 0.0, then -0.0 misses (the key tells them apart), which makes `s` a run-time number
    # (squall.runtime.entry_point.DynamicNumbers): NaN runs on that entry, computed as eager computes it
    assert jitted_state(j).stats.misses == 2
    assert_close(j(x, (math.inf, -0.0)[1]), f(x, -0.0))


def test_complex_keys_tell_signed_zero_parts_apart():
    def f(x, c):
        return x / c

    j = squall.jit(f)
    x = torch.ones(2, dtype=torch.complex64)
    for c in (complex(1.0, 0.0), complex(1.0, -0.0), complex(1.0, 0.0)):
        assert torch.equal(torch.signbit(j(x, c).imag), torch.signbit(f(x, c).imag))
    assert jitted_state(j).stats.misses == 2


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.total = torch.zeros(())  # a plain tensor attribute
        self.log = []

    def forward(self, x):
        self.count = self.count + 1
        self.total = self.total + x.sum()
        self.last = x * 2
        self.log.append(x + 1)
        return x * self.count


def test_side_effects_replayed_every_call():
    m, e = Counter(), Counter()
    j = squall.jit(m)
    for i in range(3):
        x = torch.full((2,), float(i))
        assert_close(j(x), e(x))
        assert not isinstance(m.last, TensorProxy)
        assert_close(m.last, e.last)
    assert_close(m.count, e.count)
    assert_close(m.total, e.total)
    assert len(m.log) == len(e.log) == 3
    for a, b in zip(m.log, e.log):
        assert_close(a, b)
    assert jitted_state(j).stats.misses == 1


def test_unreplayable_write_runs_eagerly_with_a_warning_naming_the_line():
    class Pops(nn.Module):
        def __init__(self):
            super().__init__()
            self.queue = [1.0, 2.0, 3.0]

        def forward(self, x):
            return x * self.queue.pop()

    m = Pops()
    j = squall.jit(m)
    with pytest.warns(SquallWarning, match=r"other than by appending to it \(pop, at .*test_state_guards.py:\d+\).*runs eagerly"):
        assert_close(j(torch.ones(2)), torch.full((2,), 3.0))
    assert_close(j(torch.ones(2)), torch.full((2,), 2.0))  # eager's pop, at every call
    assert m.queue == [1.0]

    class Deletes(nn.Module):
        def __init__(self):
            super().__init__()
            self.tmp = 1.0

        def forward(self, x):
            del self.tmp
            return x

    m = Deletes()
    with pytest.warns(SquallWarning, match=r"deletes attribute 'tmp'.*test_state_guards.py:\d+"):
        squall.jit(m)(torch.ones(2))
    assert not hasattr(m, "tmp")


def test_module_is_not_modified_by_tracing():
    m = Counter()
    before = dict(m.__dict__)
    j = squall.jit(m)
    j(torch.ones(2))
    assert type(m) is Counter
    assert all(not isinstance(v, TensorProxy) for v in m.__dict__.values())
    assert set(m.__dict__) == set(before) | {"last"}


def test_bound_method_reads_its_object():
    class Holder:
        def __init__(self):
            self.factor = 2.0

        def apply(self, x):
            return x * self.factor

    h = Holder()
    j = squall.jit(h.apply)
    x = torch.randn(3)
    _check(j, h.apply, x)
    h.factor = -3.0
    _check(j, h.apply, x)


def test_side_effects_replayed_when_differentiated():
    class Tracks(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("steps", torch.zeros(()))

        def forward(self, x):
            self.steps = self.steps + 1
            self.last = self.lin(x).detach()
            return self.lin(x).sum() * self.steps

    m = Tracks()
    e = Tracks()
    e.load_state_dict(m.state_dict())
    j = squall.jit(m)
    x = torch.randn(2, 3)
    for _ in range(3):
        j(x).backward()
        e(x).backward()
    assert_close(m.steps, e.steps)
    assert_close(m.last, e.last)
    assert_close(m.lin.weight.grad, e.lin.weight.grad)


FACTOR = 2.0


def _helper(x):
    return x * FACTOR


def test_global_read_by_a_helper_function():
    def f(x):
        return _helper(x) + 1

    global FACTOR
    j = squall.jit(f)
    x = torch.randn(3)
    _check(j, f, x)
    try:
        FACTOR = -4.0
        _check(j, f, x)
    finally:
        FACTOR = 2.0


def test_module_returning_its_submodule_gives_the_real_one():
    class Returns(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x), self.lin

    m = Returns()
    out, sub = squall.jit(m)(torch.randn(1, 2))
    assert sub is m.lin and type(sub) is nn.Linear


def test_two_appends_to_one_list():
    class Logs(nn.Module):
        def __init__(self):
            super().__init__()
            self.log = []

        def forward(self, x):
            self.log.append(x + 1)
            self.log.append(x + 2)
            return x

    m = Logs()
    j = squall.jit(m)
    j(torch.zeros(1))
    j(torch.zeros(1))
    assert [float(t) for t in m.log] == [1.0, 2.0, 1.0, 2.0]


COUNTER = 0


def test_assigning_a_global_runs_eagerly_with_a_warning_naming_the_line():
    global COUNTER

    def bumps(x):
        global COUNTER
        COUNTER = COUNTER + 1
        return x

    j = squall.jit(bumps)
    try:
        with pytest.warns(SquallWarning, match=r"global 'COUNTER' \(.*test_state_guards.py:\d+\).*runs eagerly"):
            j(torch.ones(1))
        j(torch.ones(1))
        assert COUNTER == 2  # as eager: once per call
    finally:
        COUNTER = 0


DELETED = 1


def test_deleting_a_global_runs_eagerly_with_a_warning_naming_the_line():
    global DELETED

    def deletes(x):
        global DELETED
        del DELETED
        return x + 1

    j = squall.jit(deletes)
    try:
        with pytest.warns(SquallWarning, match=r"deletes the global 'DELETED' \(.*test_state_guards.py:\d+\).*runs eagerly"):
            out = j(torch.ones(1))
        assert_close(out, torch.ones(1) + 1)
        assert "DELETED" not in globals()  # as eager: the module lost it (it was kept, silently, before)
    finally:
        DELETED = 1


def test_pre_hook_registered_after_compiling_changes_the_input():
    m = Scaled()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    m.lin.register_forward_pre_hook(lambda mod, args: (args[0] * -1,))
    _check(j, m, x)


GLOBAL_NET = nn.Sequential(nn.Linear(3, 3), nn.Dropout(1.0)).eval()  # in training, p=1 zeroes all


def test_global_module_swapped_or_put_in_eval():
    global GLOBAL_NET

    def f(x):
        return GLOBAL_NET(x)

    j = squall.jit(f)
    x = torch.randn(2, 3)
    saved = GLOBAL_NET
    try:
        _check(j, f, x)
        GLOBAL_NET.train()
        _check(j, f, x)
        GLOBAL_NET = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
        _check(j, f, x)
        GLOBAL_NET[0].weight.data.mul_(2)  # in place: the same tensor, read at the call
        _check(j, f, x)
    finally:
        GLOBAL_NET = saved


def test_parameter_of_a_global_module_replaced():
    global GLOBAL_NET

    def f(x):
        return sum(p.sum() for p in GLOBAL_NET.parameters()) + x

    j = squall.jit(f)
    x = torch.randn(2)
    saved = GLOBAL_NET
    try:
        GLOBAL_NET = nn.Sequential(nn.Linear(3, 3))
        _check(j, f, x)
        GLOBAL_NET[0].weight = nn.Parameter(torch.ones(3, 3))
        _check(j, f, x)
    finally:
        GLOBAL_NET = saved


class _HostileName(str):
    """An attribute name whose repr is other code: guards must name the attribute by its plain value."""

    def __repr__(self):
        return "'lin'"


def test_an_attribute_read_by_a_str_subclass_name_is_guarded_by_its_plain_value():
    class ReadsByName(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = 2.0

        def forward(self, x):
            return self.lin(x) * getattr(self, _HostileName("scale"))

    m, x = ReadsByName(), torch.randn(3, 4)
    jm = squall.jit(m)
    _check(jm, m, x)
    _check(jm, m, x)
    assert jitted_state(jm).cache_info().misses == 1
    m.scale = -1.5
    _check(jm, m, x)


# --- modules reached by slicing, iterating and indexing containers of modules ------------------


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale


class Stack(nn.Module):
    """Reaches its layers the ways models do: `self.layers[:n]` (LLaMA), iteration, enumerate,
    zip, ModuleDict items/values, Sequential slicing and iteration, indexing."""

    def __init__(self, how):
        super().__init__()
        self.how = how
        self.layers = nn.ModuleList([Layer() for _ in range(3)])
        self.table = nn.ModuleDict({"a": Layer(), "b": Layer()})
        self.seq = nn.Sequential(Layer(), Layer())

    def forward(self, x):
        how = self.how
        if how == "slice":
            layers = self.layers[:2]
        elif how == "iterate":
            layers = self.layers
        elif how == "enumerate":
            layers = [layer for _, layer in enumerate(self.layers)]
        elif how == "zip":
            layers = [layer for layer, _ in zip(self.layers, range(2))]
        elif how == "items":
            layers = [layer for _, layer in self.table.items()]
        elif how == "values":
            layers = self.table.values()
        elif how == "sequential slice":
            return self.seq[:1](x)
        elif how == "sequential":
            layers = self.seq
        else:
            layers = [self.layers[-1]]
        for layer in layers:
            x = layer(x)
        return x


def _set_scale(m):
    for layer in m.modules():
        if isinstance(layer, Layer):
            layer.scale = -3.0


def _replace_linear(m):
    for layer in m.modules():
        if isinstance(layer, Layer):
            layer.lin = nn.Linear(4, 4)


def _hook_linear(m):
    for layer in list(m.modules()):
        if isinstance(layer, Layer):
            layer.lin.register_forward_hook(lambda mod, args, out: out * 10)


@pytest.mark.parametrize("how", ["slice", "iterate", "enumerate", "zip", "items", "values", "sequential slice", "sequential", "index"])
@pytest.mark.parametrize("change", [_set_scale, _replace_linear, _hook_linear], ids=["scale", "submodule", "hook"])
def test_layers_reached_through_containers_are_guarded(how, change):
    m = Stack(how)
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    _check(j, m, x)
    assert jitted_state(j).stats.misses == 1, "an unchanged state hits the cache"
    change(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SquallWarning)  # a hook: the module runs eagerly
        _check(j, m, x)
    assert jitted_state(j).stats.misses == 2


# --- functions passed in, partials, callable objects ---------------------------------------------

ACT_SCALE = 2.0


def scaled_act(x):
    return torch.tanh(x) * ACT_SCALE


def applies(x, act):
    return act(x) + 1


class ScaledCall:
    def __init__(self):
        self.k = 2.0

    def __call__(self, x):
        return x * self.k * ACT_SCALE


@pytest.mark.parametrize(
    "make_act",
    [
        lambda: scaled_act,
        lambda: functools.partial(lambda x, k: scaled_act(x) * k, k=3.0),
        lambda: ScaledCall(),
        lambda: ScaledCall().__call__,
    ],
    ids=["function", "partial", "callable object", "bound method"],
)
def test_globals_of_a_function_passed_in_are_guarded(make_act):
    global ACT_SCALE
    act = make_act()
    j = squall.jit(applies)
    x = torch.randn(3)
    _check(j, applies, x, act)
    _check(j, applies, x, act)
    assert jitted_state(j).stats.misses == 1
    try:
        ACT_SCALE = -5.0
        _check(j, applies, x, act)
    finally:
        ACT_SCALE = 2.0
    _check(j, applies, x, act)
    assert jitted_state(j).stats.misses == 2, "the state came back: the first plan again"


def test_partial_keywords_and_callable_attributes_changed_in_place():
    act = functools.partial(lambda x, k: x * k, k=2.0)
    j = squall.jit(applies)
    x = torch.randn(3)
    _check(j, applies, x, act)
    act.keywords["k"] = -0.5
    _check(j, applies, x, act)
    call = ScaledCall()
    _check(j, applies, x, call)
    call.k = 7.0
    _check(j, applies, x, call)


def test_functions_in_a_list_argument_are_guarded():
    global ACT_SCALE

    def both(x, acts):
        return acts[0](x) + acts[1](x)

    j = squall.jit(both)
    x = torch.randn(3)
    acts = [scaled_act, torch.relu]
    _check(j, both, x, acts)
    try:
        ACT_SCALE = 4.0
        _check(j, both, x, acts)
    finally:
        ACT_SCALE = 2.0


def test_a_callable_object_held_by_a_module_is_guarded():
    class Holds(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = ScaledCall()
            self.gelu = functools.partial(torch.nn.functional.gelu, approximate="tanh")

        def forward(self, x):
            return self.gelu(self.act(x))

    m = Holds()
    j = squall.jit(m)
    x = torch.randn(3)
    _check(j, m, x)
    m.act.k = -1.0
    _check(j, m, x)
    m.gelu.keywords["approximate"] = "none"
    _check(j, m, x)


# --- __slots__ -----------------------------------------------------------------------------------


class Slotted:
    __slots__ = ("k", "unset")

    def __init__(self, k):
        self.k = k


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenConfig:
    mult: float = 2.0


class WithDict(Slotted):
    def __init__(self, k):
        super().__init__(k)
        self.extra = 1.0


SLOTTED = Slotted(2.0)


def test_slot_attribute_of_an_argument_changed():
    def f(x, s):
        return x * s.k + (s.unset if hasattr(s, "unset") else 0.0)

    j = squall.jit(f)
    s = Slotted(2.0)
    x = torch.randn(3)
    _check(j, f, x, s)
    _check(j, f, x, s)
    assert jitted_state(j).stats.misses == 1
    s.k = -4.0
    _check(j, f, x, s)
    s.unset = 10.0  # a slot that was unset when traced
    _check(j, f, x, s)
    w = WithDict(3.0)  # slots of the base, a __dict__ of its own
    _check(j, f, x, w)
    w.k = 0.5
    _check(j, f, x, w)


def test_slot_attribute_of_a_global_and_a_slots_dataclass_config():
    def f(x):
        return x * SLOTTED.k

    j = squall.jit(f)
    x = torch.randn(3)
    _check(j, f, x)
    SLOTTED.k = 5.0
    try:
        _check(j, f, x)
    finally:
        SLOTTED.k = 2.0

    class UsesConfig(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.config = FrozenConfig()

        def forward(self, x):
            return self.lin(x) * self.config.mult

    m = UsesConfig()
    jm = squall.jit(m)
    _check(jm, m, x)
    object.__setattr__(m.config, "mult", -1.0)  # how a frozen dataclass is changed anyway
    _check(jm, m, x)


def test_a_slot_write_is_replayed():
    class Counts:
        __slots__ = ("seen",)

        def __init__(self):
            self.seen = torch.zeros(())

    def f(x, c):
        c.seen = c.seen + x.sum()
        return x * 2

    c, e = Counts(), Counts()
    j = squall.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        assert_close(j(x, c), f(x, e))
    assert_close(c.seen, e.seen)


# --- global module hooks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "register",
    [
        lambda calls: nn.modules.module.register_module_forward_hook(lambda mod, args, out: calls.append(mod) or out * 10),
        lambda calls: nn.modules.module.register_module_forward_pre_hook(lambda mod, args: calls.append(mod) or (args[0] * -1,)),
    ],
    ids=["forward", "forward pre"],
)
@pytest.mark.parametrize("compiled", ["module", "function calling a module"])
def test_global_module_hook_registered_after_compiling(register, compiled):
    m = Scaled()
    f = m if compiled == "module" else (lambda x: m(x))
    j = squall.jit(f)
    x = torch.randn(2, 4)
    _check(j, f, x)
    calls = []
    handle = register(calls)
    try:
        expected = f(x)
        eager_calls, calls[:] = list(calls), []
        with pytest.warns(SquallWarning, match=r"global module forward (pre )?hook .*test_state_guards.py:\d+"):
            assert_close(j(x), expected)
        assert [id(c) for c in calls] == [id(c) for c in eager_calls], "each module's hook, with that module, as eager"
    finally:
        handle.remove()
    misses = jitted_state(j).stats.misses
    _check(j, f, x)  # removed: compiled again, or the first plan
    _check(j, f, x)
    assert jitted_state(j).stats.misses <= misses + 1


# --- attributes of the class ---------------------------------------------------------------------


class ClassScaled(nn.Module):
    scale = 2.0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.post(self.lin(x) * self.scale)

    def post(self, y):
        return y + 1


class ClassScaledChild(ClassScaled):
    pass


def test_class_attribute_rebound_or_shadowed():
    m = ClassScaledChild()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _check(j, m, x)
    _check(j, m, x)
    assert jitted_state(j).stats.misses == 1
    try:
        ClassScaled.scale = 3.0  # rebound on the class that holds it
        _check(j, m, x)
        ClassScaledChild.scale = -1.0  # shadowed by a class before it in the MRO
        _check(j, m, x)
        m.scale = 0.5  # shadowed by the instance
        _check(j, m, x)
        ClassScaled.post = lambda self, y: y - 100  # a method monkeypatched on the class
        _check(j, m, x)
        m.post = lambda y: y * 0  # and on the instance
        _check(j, m, x)
    finally:
        ClassScaled.scale = 2.0
        ClassScaled.post = lambda self, y: y + 1
        del ClassScaledChild.scale


def test_a_module_and_a_recursive_function_in_closure_cells():
    m = Scaled()

    def repeat(x, n):
        return repeat(x * m.scale, n - 1) if n else m(x)

    j = squall.jit(repeat)
    x = torch.randn(2, 4)
    _check(j, repeat, x, 2)
    m.scale = -1.0
    _check(j, repeat, x, 2)
    m.lin = nn.Linear(4, 4)
    _check(j, repeat, x, 2)


def test_assigning_a_closure_variable_holding_a_module_runs_eagerly():
    m = Scaled()

    def swaps(x):
        nonlocal m
        y = m(x)
        m = nn.Identity()
        return y

    x = torch.randn(2, 4)
    expected = m(x)
    with pytest.warns(SquallWarning, match=r"closure variable 'm' \(.*test_state_guards.py:\d+\).*runs eagerly"):
        assert_close(squall.jit(swaps)(x), expected)
    assert isinstance(m, nn.Identity)  # as eager rebinds it


# --- dicts reached through attributes and globals ------------------------------------------------

TABLE = {"k": 2.0, "unused": 1.0}


class ReadsDicts(nn.Module):
    table = {"a": 2.0}  # on the class

    def __init__(self):
        super().__init__()
        self.d = {"scale": 2.0, "shift": 1.0}

    def forward(self, x):
        y = x * self.d["scale"] * self.table["a"] * TABLE["k"]
        if "extra" in self.d:
            y = y + self.d["extra"]
        return y + sum(self.d.values())


def test_dict_items_changed_in_place():
    m = ReadsDicts()
    j = squall.jit(m)
    x = torch.randn(3)
    _check(j, m, x)
    TABLE["unused"] = 7.0  # an item the program never read: no recompile
    _check(j, m, x)
    assert jitted_state(j).stats.misses == 1
    try:
        for change in (
            lambda: m.d.__setitem__("scale", -1.0),
            lambda: m.d.__setitem__("extra", 5.0),  # a key tested with `in`, absent when traced
            lambda: ReadsDicts.table.__setitem__("a", 3.0),
            lambda: TABLE.__setitem__("k", 0.5),
        ):
            change()
            _check(j, m, x)
    finally:
        ReadsDicts.table["a"], TABLE["k"] = 2.0, 2.0


def test_dict_items_set_by_the_program_are_replayed():
    class Memo(nn.Module):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def forward(self, x):
            self.seen["last"] = x * 2
            return x + 1

    m = Memo()
    j = squall.jit(m)
    for i in range(3):
        x = torch.full((2,), float(i))
        j(x)
        assert_close(m.seen["last"], x * 2)
        assert not isinstance(m.seen["last"], TensorProxy)

    class Pops(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = {"a": 1.0}

        def forward(self, x):
            return x * self.d.pop("a")

    pops = Pops()
    with pytest.warns(SquallWarning, match=r"other than by setting items \(pop, at .*test_state_guards.py:\d+\)"):
        assert_close(squall.jit(pops)(torch.ones(2)), torch.ones(2))
    assert pops.d == {}


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
        with pytest.warns(SquallWarning, match=r"assigns user_settings.SCALE \(.*test_state_guards.py:\d+\).*runs eagerly"):
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
