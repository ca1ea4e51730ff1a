"""One guard form (squall.guard_set): every kind of guard goes into a compilation's one guard set,
the ones checked before the program into one generated check, and a failure of each kind is
explained in words; the policy (squall.runtime.policy) maps each to what happens next."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.guard_set import ALIAS, GUARD_KINDS, NUMBER, STATE, TENSOR, VALUE, GuardFailure, GuardSet
from squall.guards import GuardFailed
from squall.runtime.jit import jitted_state
from squall.runtime.policy import SPECULATION_LIMIT, Action, decide, decide_fault
from squall.runtime.variants import failure_of


class Scaled(nn.Module):
    """Reads Python state (`self.scale`) and writes its first input in place (an alias guard)."""

    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, a, b):
        a.mul_(self.scale)
        return a + b


def _guards(jitted):
    return squall.last_traces(jitted).guard_set


def test_state_and_alias_guards_are_one_generated_check_in_front_of_the_program():
    m = Scaled()
    j = squall.jit(m)
    a, b = torch.randn(3), torch.randn(3)
    assert_close(j(a.clone(), b), m(a.clone(), b))
    guards = _guards(j)
    assert {g.kind for g in guards.guards} >= {STATE, ALIAS, TENSOR}
    assert any("scale" in g.label for g in guards.of_kind(STATE))
    assert len(guards.of_kind(ALIAS)) == 1 and guards.of_kind(ALIAS)[0].condition in guards.conditions
    (slot,) = jitted_state(j)._cache.values()
    assert slot[0].__wrapped__ is squall.last_traces(j).fn  # one check, straight in front of the program


def test_a_state_guard_failure_is_explained_and_the_call_matches_eager():
    m = Scaled()
    j = squall.jit(m)
    a, b = torch.randn(3), torch.randn(3)
    j(a.clone(), b)
    guards = _guards(j)
    m.scale = 3.0
    failure = guards.explain(([], a, b), {})
    assert failure == GuardFailure(STATE, "attribute 'scale' of the module")
    assert str(failure) == "state guard failed: attribute 'scale' of the module"
    assert_close(j(a.clone(), b), m(a.clone(), b))
    assert jitted_state(j).stats.changes == {"attribute 'scale' of the module": 1}


def test_an_alias_guard_failure_is_explained_and_the_same_tensor_twice_matches_eager():
    m = Scaled()
    j = squall.jit(m)
    a, b = torch.randn(3), torch.randn(3)
    j(a.clone(), b)
    shared = torch.randn(3)
    failure = _guards(j).explain(([], shared, shared), {})
    assert failure.kind == ALIAS and "argument 'a', argument 'b'" in failure.label
    expected_in = shared.clone()
    expected = m(expected_in, expected_in)
    assert_close(j(shared, shared), expected)
    assert_close(shared, expected_in)


def test_tensor_guards_are_the_keys_and_explain_a_miss_without_joining_the_check():
    j = squall.jit(lambda x, y: x * y)
    x, y = torch.randn(3), torch.randn(3)
    j(x, y)
    guards = _guards(j)
    assert [g.label for g in guards.of_kind(TENSOR)] == ["argument 'x': cpu f32[3]", "argument 'y': cpu f32[3]"]
    assert not guards.conditions  # nothing to check before the program: the key holds the metadata
    assert j(x, y.double()).dtype == torch.float64
    assert guards.explain((x, y), {}) is None
    assert guards.explain((x, y.double()), {}) == GuardFailure(TENSOR, "argument 'y': cpu f32[3]")
    assert guards.explain((x, torch.randn(4)), {}).label == "argument 'y': cpu f32[3]"


def branchy(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def test_a_value_guard_is_in_the_set_and_its_failure_says_where_and_what():
    j = squall.jit(branchy)
    x = torch.ones(3)
    assert_close(j(x), branchy(x))
    (value,) = _guards(j).of_kind(VALUE)
    assert value.site.startswith("test_guard_set.py:") and value.condition is None
    with pytest.raises(GuardFailed) as raised:
        squall.last_traces(j).fn(-x)
    failure = failure_of(raised.value)
    assert (failure.kind, failure.site, failure.read) == (VALUE, value.site, "bool")
    assert "was True, the trace assumed False" in failure.detail or "was False, the trace assumed True" in failure.detail
    assert_close(j(-x), branchy(-x))  # another variant
    assert decide(failure, module=False, compiles=1) is Action.NEW_VARIANT


def signed(x, s):
    if s > 0:
        return x * s
    return x - s


def test_a_number_guard_is_its_own_kind():
    j = squall.jit(signed)
    x = torch.randn(4)
    for s in (1.0, 2.0, 3.0):
        assert_close(j(x, s), signed(x, s))
    (number,) = _guards(j).of_kind(NUMBER)
    with pytest.raises(GuardFailed) as raised:
        squall.last_traces(j).fn(x, -1.0)
    assert failure_of(raised.value).kind == NUMBER and failure_of(raised.value).site == number.site
    assert_close(j(x, -1.0), signed(x, -1.0))


def test_a_new_guard_kind_is_a_table_row_and_a_condition():
    kinds = {**GUARD_KINDS, "relation": ("a relation between input sizes", "check")}
    guards = GuardSet(kinds)
    guards.add("args[0].shape[1] >= 2", "input 0 dim 1 >= 2", kind="relation", site="model.py:3")
    guards.add("args[0].shape[1] == args[1].shape[2]", "input0.dim1 == input1.dim2", kind="relation")
    failures = []
    run = guards.runner(lambda x, y: x.sum() + y.sum(), lambda args, kwargs: failures.append(guards.explain(args, kwargs)))
    assert_close(run(torch.ones(2, 3), torch.ones(1, 1, 3)), torch.tensor(9.0))
    run(torch.ones(2, 1), torch.ones(1, 1, 1))
    run(torch.ones(2, 3), torch.ones(1, 1, 4))
    assert failures == [GuardFailure("relation", "input 0 dim 1 >= 2", "model.py:3"), GuardFailure("relation", "input0.dim1 == input1.dim2")]
    # the policy has no rule of its own for it: the entry is set aside and the call compiled again
    assert decide(failures[0], module=False) is Action.SET_ASIDE
    assert guards.describe() == ["relation: input 0 dim 1 >= 2 (model.py:3)", "relation: input0.dim1 == input1.dim2"]


def test_a_guard_of_an_unknown_kind_or_in_the_wrong_place_is_refused():
    guards = GuardSet()
    with pytest.raises(ValueError, match=r"a 'shape' guard is not checked before the program; kinds that are: \['alias', 'state'\]"):
        guards.add("True", "x", kind="shape")
    with pytest.raises(ValueError, match=r"a 'state' guard needs a condition \(GuardSet.add\), or is unknown"):
        guards.note(STATE, "x")
    with pytest.raises(ValueError, match=r"a 'value' guard is checked inside the program"):
        guards.note(VALUE, "x", condition="True")


def test_a_condition_that_raises_does_not_hold():
    guards = GuardSet()
    guards.add("args[0].missing == 1", "attribute 'missing' of argument 0")
    assert not guards.holds((object(),), {})
    assert guards.explain((object(),), {}) == GuardFailure(STATE, "attribute 'missing' of argument 0")


@pytest.mark.parametrize(
    "failure, options, action",
    [
        (GuardFailure(STATE, "s"), {"module": True}, Action.SET_ASIDE),
        (GuardFailure(STATE, "s"), {"module": True, "first_call": True}, Action.EAGER_ONCE),
        (GuardFailure(STATE, "s"), {"module": True, "compiles": SPECULATION_LIMIT + 1}, Action.SPLIT),
        (GuardFailure(STATE, "s"), {"module": False, "compiles": SPECULATION_LIMIT + 1}, Action.SET_ASIDE),
        (GuardFailure(ALIAS, "a"), {"module": False, "alias": None}, Action.RUN),
        (GuardFailure(ALIAS, "a"), {"module": False, "alias": "same"}, Action.NEW_VARIANT),
        (GuardFailure(ALIAS, "a"), {"module": False, "alias": "overlapping"}, Action.EAGER),
        (GuardFailure(ALIAS, "a"), {"module": True, "alias": "overlapping"}, Action.SPLIT),
        (GuardFailure(VALUE, "v", read="item"), {"module": False, "compiles": SPECULATION_LIMIT + 1}, Action.READ_AT_RUN_TIME),
        (GuardFailure(VALUE, "v", read="item"), {"module": False, "compiles": SPECULATION_LIMIT + 1, "dynamic": True}, Action.EAGER),
        (GuardFailure(NUMBER, "n", read="bool"), {"module": True, "compiles": SPECULATION_LIMIT + 1}, Action.SPLIT),
    ],
)
def test_the_policy_maps_each_failure_to_one_action(failure, options, action):
    assert decide(failure, **options) is action


def test_an_executor_fault_replans_until_it_was_kept_out_everywhere():
    assert decide_fault(False, False) is Action.REPLAN
    assert decide_fault(True, False) is Action.REPLAN
    assert decide_fault(True, True) is Action.RAISE
