"""Guards on Python state a program reaches through containers of modules, callables it is passed,
__slots__, global module hooks, class attributes and dicts (squall.frontend.state_guards): each test
changes what the program read after the first call and checks the compiled result against eager's."""
from __future__ import annotations

import dataclasses
import functools
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.ltorch.base import SquallWarning
from squall.proxies import TensorProxy
from squall.runtime.jit import jitted_state
from state_guard_modules import Layer, Scaled
from state_guard_modules import check as _check


# --- modules reached by slicing, iterating and indexing containers of modules ------------------


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
        with pytest.warns(SquallWarning, match=r"global module forward (pre )?hook .*test_state_guards_reached.py:\d+"):
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
    with pytest.warns(SquallWarning, match=r"closure variable 'm' \(.*test_state_guards_reached.py:\d+\).*runs eagerly"):
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
    with pytest.warns(SquallWarning, match=r"other than by setting items \(pop, at .*test_state_guards_reached.py:\d+\)"):
        assert_close(squall.jit(pops)(torch.ones(2)), torch.ones(2))
    assert pops.d == {}


