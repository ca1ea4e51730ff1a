"""The default grad rules: one for every differentiable prim, and for the ltorch ops whose
PyTorch backward kernels beat differentiating their decomposition."""
from __future__ import annotations

import functools

from ..gradients import GradRules
from .collectives import register_collective_rules
from .ltorch import register_ltorch_rules
from .prims import register_prim_rules

__all__ = ["default_grad_rules"]


@functools.cache
def default_grad_rules() -> GradRules:
    """The rule table squall differentiates with (built once; executors' rules override it per call)."""
    rules = GradRules()
    register_prim_rules(rules)
    register_ltorch_rules(rules)
    register_collective_rules(rules)
    return rules
