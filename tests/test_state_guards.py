"""Guards on Python state (squall.frontend.state_guards): each test changes what the program read after the
first call and checks the compiled result against eager's; side effects replay as eager's do."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn.utils import prune
from torch.testing import assert_close

import squall
from squall.ltorch.base import SquallWarning
from squall.proxies import TensorProxy
from squall.runtime.jit import jitted_state
from state_guard_modules import Scaled
from state_guard_modules import check as _check


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
