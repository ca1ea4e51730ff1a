"""Grad rules for the collectives (`squall.ltorch.collectives`): PyTorch's own, written as
operations, so a differentiated program's backward trace shows its communication too.

A sum-reduction's gradient is the same reduction of the cotangents (all_reduce), an
all_gather's is a sum reduce_scatter, a sum reduce_scatter's an all_gather; waiting passes
the gradient on. Other reductions have no gradient in PyTorch either: `NoGradRule` hands
the program to PyTorch's autograd, whose backward raises eager's error.
"""
from __future__ import annotations

from ... import ltorch
from ..gradients import GradCall, GradRules, NoGradRule

__all__ = ["register_collective_rules"]


def _wait_tensor(call: GradCall) -> tuple:
    return (call.g,)


def _all_reduce(call: GradCall) -> tuple:
    _, reduce_op, group_name = call.args
    if reduce_op.lower() != "sum":
        raise NoGradRule(f"all_reduce with reduce_op={reduce_op!r} (PyTorch differentiates only 'sum')")
    return (ltorch.wait_tensor(ltorch.all_reduce(call.g, "sum", group_name)),)


def _all_gather_into_tensor(call: GradCall) -> tuple:
    _, group_size, group_name = call.args
    return (ltorch.wait_tensor(ltorch.reduce_scatter_tensor(call.g, "sum", group_size, group_name)),)


def _reduce_scatter_tensor(call: GradCall) -> tuple:
    _, reduce_op, group_size, group_name = call.args
    if reduce_op.lower() != "sum":
        raise NoGradRule(f"reduce_scatter_tensor with reduce_op={reduce_op!r} (PyTorch differentiates only 'sum')")
    return (ltorch.wait_tensor(ltorch.all_gather_into_tensor(call.g, group_size, group_name)),)


def register_collective_rules(rules: GradRules) -> None:
    """File the rules above, where this PyTorch has torch.distributed (else there are no collectives)."""
    if not hasattr(ltorch, "wait_tensor"):
        return
    rules.register(ltorch.wait_tensor, _wait_tensor)
    rules.register(ltorch.all_reduce, _all_reduce)
    rules.register(ltorch.all_gather_into_tensor, _all_gather_into_tensor)
    rules.register(ltorch.reduce_scatter_tensor, _reduce_scatter_tensor)
