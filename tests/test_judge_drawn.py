"""The upgrade's judge compares the plans on drawn values too: a call's degenerate values (a
warm-up with zeros) let a fused plan that is wrong away from zero through."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from squall.market.torch_executor import make_executor
from squall.runtime import tiers
from test_tiers import SlowFuser, _own_cache, fused_faster  # noqa: F401 - fixtures

def program(x):
    return torch.exp(x) * 2.0 + 1.0


class BfloatRounding(SlowFuser):
    """A fusion executor whose regions round their outputs through bfloat16: exact at zero (exp(0) * 2 + 1
    is 3), wrong by up to 0.4% elsewhere (a dropped cast, as inductor's once was)."""

    def __init__(self):
        super().__init__("bf16fuse")
        self.gate.set()

    def compile_region(self, region):
        fn = super().compile_region(region)

        def rounded(*inputs):
            return tuple(o.to(torch.bfloat16).to(o.dtype) if o.dtype.is_floating_point else o for o in fn(*inputs))

        return rounded


def test_a_fused_plan_wrong_away_from_zero_is_refused_after_a_zeros_warm_up(fused_faster):
    f = squall.jit(program, executors=[BfloatRounding(), make_executor()], wait=True)
    with pytest.warns(squall.SquallWarning, match="computes other results than its torch plan"):
        torch.testing.assert_close(f(torch.zeros(64)), program(torch.zeros(64)))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "kept the torch plan" and "on drawn values" in upgrade.reason, upgrade
    x = torch.randn(64)
    torch.testing.assert_close(f(x), program(x))


def test_a_right_fused_plan_says_it_was_compared_on_the_calls_and_on_drawn_values(fused_faster):
    fuser = SlowFuser()
    fuser.gate.set()
    f = squall.jit(program, executors=[fuser, make_executor()], wait=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        torch.testing.assert_close(f(torch.zeros(64)), program(torch.zeros(64)))
    (upgrade,) = squall.upgrades(f)
    assert upgrade.status == "upgraded", upgrade
    assert "on the call's values and on drawn values" in upgrade.reason, upgrade
