"""Gradients where eager's backward picks a side: at kinks, at bounds, among ties, at a zero norm.

The OpInfo samples of test_grad.py are random, so they almost never land on these points;
training does (a row of zeros after a relu, a DPO loss at its start, a zero padding row
normalized). eager's hand-written backwards choose one subgradient there; differentiating
squall's decomposition chose another (an amax splits a tie's gradient, a clamp passes it at
its bound, a square root gives 0 * inf = NaN at 0). Each program runs on values that sit on
these points, and its gradient must be eager's, NaN for NaN.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import squall

_POINTS = torch.tensor([-6.0, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, 1.0, 0.0, 0.0])
# three rows: the points, reversed, and a row of zeros (all tied, zero norm)
X = torch.stack([_POINTS, _POINTS.flip(0), torch.zeros_like(_POINTS)])
Z = torch.zeros_like(X)

PROGRAMS = {
    # ties: eager routes the gradient to the selected index
    "max_dim": lambda x: x.max(1).values,
    "min_dim_keepdim": lambda x: torch.min(x, 0, keepdim=True)[0],
    "max_pool1d": lambda x: F.max_pool1d(x.unsqueeze(0), 2),
    "max_pool1d_overlapping": lambda x: F.max_pool1d(x.unsqueeze(0), 3, 1),
    "max_pool3d": lambda x: F.max_pool3d(x[None, None], (1, 2, 2)),
    "adaptive_max_pool1d": lambda x: F.adaptive_max_pool1d(x.unsqueeze(0), 3),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x.unsqueeze(0), (2, 3)),
    "fmax": lambda x: torch.fmax(x, Z),
    "fmin": lambda x: torch.fmin(Z, x),
    # still split evenly, as eager splits them
    "amax": lambda x: x.amax(1),
    "max_all": lambda x: x.max(),
    "maximum": lambda x: torch.maximum(x, Z),
    # bounds: eager passes no gradient at them (torch.clamp does)
    "hardtanh": lambda x: F.hardtanh(x),
    "hardtanh_0_1": lambda x: F.hardtanh(x, 0.0, 1.0),
    "relu6": lambda x: F.relu6(x),
    "hardsigmoid": lambda x: F.hardsigmoid(x),
    "hardswish": lambda x: F.hardswish(x),
    "clamp": lambda x: x.clamp(-1, 1),
    # kinks
    "logsigmoid": lambda x: F.logsigmoid(x),
    "atan2_origin": lambda x: torch.atan2(x, Z),
    # zero norms: eager masks them
    "vector_norm_rows": lambda x: x.norm(dim=1),
    "vector_norm_3": lambda x: torch.linalg.vector_norm(x, 3, dim=1),
    "normalize": lambda x: F.normalize(x, dim=1),
    "cosine_similarity": lambda x: F.cosine_similarity(x, Z + 1),
    "cdist": lambda x: torch.cdist(x, X),
    "cdist_mm": lambda x: torch.cdist(x, X, compute_mode="use_mm_for_euclid_dist"),
    "std_of_constant": lambda x: (x * 0 + 1).std(1) + x.std(1),
    # overflow in a branch a select discards: exp(100) is inf, and 0 * inf made the gradient NaN
    "sigmoid_far": lambda x: (x * 20).sigmoid(),
    "glu_far": lambda x: F.glu(torch.cat([x, x * -20], 1), 1),
    "elu_far": lambda x: F.elu(x * 20, 0.5),
    "selu_far": lambda x: F.selu(x * 20),
    "celu_far": lambda x: F.celu(x * 20, 2.0),
    "softplus_far": lambda x: F.softplus(x * 20),
    "mish_far": lambda x: F.mish(x * 20),
}


@pytest.mark.parametrize("dynamic", [None, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradient_at_boundaries_is_eagers(name, dynamic):
    fn = PROGRAMS[name]
    x = X.clone().requires_grad_()
    expected = fn(x)
    g = torch.randn(expected.shape, generator=torch.Generator().manual_seed(0))
    (expected_grad,) = torch.autograd.grad(expected, x, g)
    xs = X.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # squall's own gradient, not a fallback
        out = squall.jit(fn, dynamic=dynamic)(xs)
    (grad,) = torch.autograd.grad(out, xs, g)
    torch.testing.assert_close(out, expected, equal_nan=True)
    torch.testing.assert_close(grad, expected_grad, equal_nan=True)



# NaN and infinities where the ops' backwards pick a side. Eager's clamp and hardsigmoid pass no
# gradient to a NaN input, max()/min() over every element give a NaN result's gradient to the
# NaNs, and hardswish passes 1 at +inf and 0 at -inf. (Eager's elu, hardswish, softshrink and
# hardtanh give a NaN input 1 or NaN/0 depending on whether it falls in a vectorised stretch of
# the tensor or in its scalar tail: no one answer to match, so not compared.)
_SPECIALS = torch.tensor([-float("inf"), float("inf"), -4.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0, 2.0, 2.0])
_NAN = torch.tensor([float("nan")])
INFINITIES = {"infinities": _SPECIALS}
WITH_NAN = {**INFINITIES, "with_nan": torch.cat([_NAN, _SPECIALS]), "two_nans": torch.tensor([1.0, float("nan"), 5.0, float("nan")])}

AT_SPECIALS = [
    ("clamp", lambda x: x.clamp(-1, 1), WITH_NAN),
    ("clamp_min", lambda x: torch.clamp_min(x, 0.5), WITH_NAN),
    ("clamp_tensor_bounds", lambda x: x.clamp(torch.zeros_like(x) - 1, torch.ones_like(x)), WITH_NAN),
    ("hardsigmoid", lambda x: F.hardsigmoid(x), WITH_NAN),
    ("max_all", lambda x: x.max(), WITH_NAN),
    ("min_all", lambda x: torch.min(x), WITH_NAN),
    ("hardswish", lambda x: F.hardswish(x), INFINITIES),
]


@pytest.mark.parametrize(("name", "fn", "values"), [
    pytest.param(name, fn, values, id=f"{name}-{which}") for name, fn, inputs in AT_SPECIALS for which, values in inputs.items()
])
def test_gradient_at_nan_and_infinities_is_eagers(name, fn, values):
    x = values.clone().requires_grad_()
    expected = fn(x)
    (expected_grad,) = torch.autograd.grad(expected, x, torch.ones_like(expected))
    xs = values.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        out = squall.jit(fn)(xs)
    (grad,) = torch.autograd.grad(out, xs, torch.ones_like(out))
    torch.testing.assert_close(out, expected, equal_nan=True)
    torch.testing.assert_close(grad, expected_grad, equal_nan=True)
