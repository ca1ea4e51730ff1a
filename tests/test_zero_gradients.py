"""A gradient that is zero is a tensor of zeros, as in eager, and a gradient eager leaves None stays None.

An optimizer skips a parameter whose `.grad` is None, but steps one whose gradient is zeros
(weight decay, momentum, Adam's moments): squall giving None where eager gives zeros, or the
reverse, makes training drift from eager's without an error. Flat ops (floor division, sign,
rounding, a 0-norm) and ops that never read an input (addr with beta=0, cat of an empty tensor)
are where the two can part. Every differentiable OpInfo is compared this way in test_grad.py;
these are the programs written out, and training runs with optimizers.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import squall

F = torch.nn.functional

# name -> program of (a, b), both of shape (3,) and requiring grad
PROGRAMS = {
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor_plus_product": lambda a, b: torch.div(a, b, rounding_mode="floor") + a * b,
    "copysign": lambda a, b: torch.copysign(a, b),
    "nextafter": lambda a, b: torch.nextafter(a, b),
    "floor_ceil_round_trunc": lambda a, b: torch.floor(a) + torch.ceil(b) + torch.round(a, decimals=1) + torch.trunc(b),
    "sign_frac": lambda a, b: torch.sign(a) * torch.frac(b),
    "cdist_p0": lambda a, b: torch.cdist(a.reshape(1, 3, 1), b.reshape(1, 3, 1), p=0),
    "cat_with_an_empty_slice": lambda a, b: torch.cat([a, b[:0]]),
    "gather_empty_index": lambda a, b: torch.gather(a, 0, torch.zeros(0, dtype=torch.long)).sum() + b,
    "addr_beta0": lambda a, b: torch.addr(a, b, b, beta=0),
    "mul_by_zero": lambda a, b: a * 0 + b,
    "relu_of_negative": lambda a, b: torch.relu(-a.abs() - 1) + b,
    # eager gives None here: the 0-norm's backward returns no gradient
    "vector_norm_ord0": lambda a, b: torch.linalg.vector_norm(a, 0) + b,
    "norm_p0": lambda a, b: torch.norm(a, 0) * b,
    "pairwise_distance_p0": lambda a, b: F.pairwise_distance(a[None], b[None], p=0),
    # ... and here: `b` lends only its metadata
    "type_as": lambda a, b: a.type_as(b),
    "view_as": lambda a, b: a.view_as(b),
    "expand_as": lambda a, b: a[:1].expand_as(b),
    "zeros_like_plus": lambda a, b: torch.zeros_like(b) + a,
    "new_full_times": lambda a, b: b.new_full((3,), 2.0) * a,
}


def _grads_are_none(fn, dtype=torch.float64) -> tuple[tuple[bool, bool], list[torch.Tensor | None]]:
    torch.manual_seed(0)
    a = torch.randn(3, dtype=dtype, requires_grad=True)
    b = (torch.rand(3, dtype=dtype) + 1).requires_grad_()
    out = fn(a, b)
    out.sum().backward()
    return (a.grad is None, b.grad is None), [a.grad, b.grad]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_gradient_is_none_exactly_where_eager_s_is(name):
    fn = PROGRAMS[name]
    try:
        expected_none, expected = _grads_are_none(fn)
    except NotImplementedError as e:  # torch 2.10 has no derivative of nextafter (2.13 gives zeros)
        pytest.skip(f"eager's own backward raises on torch {torch.__version__}: {e}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # differentiated by squall, no fallback
        got_none, got = _grads_are_none(squall.jit(fn))
    assert got_none == expected_none, f"{name}: squall's (a.grad, b.grad) is None: {got_none}, eager's {expected_none}"
    for g, e in zip(got, expected):
        if e is not None:
            torch.testing.assert_close(g, e)


@pytest.mark.parametrize("name", ["new_zeros", "zeros_like", "full_like", "new_full", "histc"])
def test_a_tensor_made_from_another_s_metadata_does_not_require_grad(name):
    fn = {
        "new_zeros": lambda x: x.new_zeros(3),
        "zeros_like": lambda x: torch.zeros_like(x),
        "full_like": lambda x: torch.full_like(x, 2.0),
        "new_full": lambda x: x.new_full((2,), 1.5),
        "histc": lambda x: torch.histc(x, 4),
    }[name]
    x = torch.randn(3, requires_grad=True)
    assert fn(x).requires_grad is False
    assert squall.jit(fn)(x).requires_grad is False


def test_floor_division_raises_at_backward_as_eager_does():
    # eager has no derivative for floor_divide: zeros (or None) from squall would hide that
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="floor_divide is not implemented"):
        (x // 2).sum().backward()
    with pytest.warns(squall.SquallWarning, match="floor_divide"):
        out = squall.jit(lambda x: x // 2)(x)
    with pytest.raises(RuntimeError, match="floor_divide is not implemented"):
        out.sum().backward()


class _Bucketed(torch.nn.Module):
    """A parameter reached only through floor division: eager gives it zero gradients every step."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor([1.5, -2.0, 0.75]))
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x):
        bucket = torch.div(x * self.scale, 0.5, rounding_mode="floor")
        return self.linear(x + bucket).pow(2).mean()


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.1),
        lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1),
    ],
    ids=["sgd_momentum_weight_decay", "adamw"],
)
def test_training_steps_a_parameter_with_zero_gradients_as_eager_does(make_optimizer):
    torch.manual_seed(0)
    eager = _Bucketed()
    compiled = _Bucketed()
    compiled.load_state_dict(eager.state_dict())
    jmodel = squall.jit(compiled)
    eager_opt, compiled_opt = make_optimizer(eager.parameters()), make_optimizer(compiled.parameters())
    for _ in range(4):
        x = torch.randn(5, 3)
        for model, opt in ((eager, eager_opt), (jmodel, compiled_opt)):
            opt.zero_grad()
            model(x).backward()
            opt.step()
        assert compiled.scale.grad is not None
        torch.testing.assert_close(compiled.scale.grad, eager.scale.grad)
    before = torch.tensor([1.5, -2.0, 0.75])
    assert not torch.equal(eager.scale.detach(), before)  # weight decay moved it
    for (name, a), b in zip(compiled.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("name", ["elementwise_then_sum", "floor_division_then_sum"])
def test_a_symbolic_backward_that_only_expands_its_cotangent_runs_at_every_length(name):
    # the backward's inputs (a scalar cotangent, nothing saved) carry no size: the forward saves
    # a one-element tensor expanded to the sizes for it (it raised NotImplementedError before)
    fn = {
        "elementwise_then_sum": lambda a, b: (a * 2).sum() + (b * 3).sum(),
        "floor_division_then_sum": lambda a, b: torch.div(a, b, rounding_mode="floor").sum(),
    }[name]
    jfn = squall.jit(fn, dynamic=True)
    for n in (5, 7, 9):
        a = torch.randn(n, 3, requires_grad=True)
        b = (torch.rand(n, 3) + 1).requires_grad_()
        jfn(a, b).backward()
        got = (a.grad, b.grad)
        a.grad = b.grad = None
        fn(a, b).backward()
        for g, e in zip(got, (a.grad, b.grad)):
            torch.testing.assert_close(g, e)
