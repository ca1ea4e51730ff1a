"""Gradients of every differentiable OpInfo: squall's own gradient transform against PyTorch autograd.

For each OpInfo whose reference PyTorch can differentiate, each sample's floating point
tensors become leaves that require grad; the program is compiled by `squall.jit` (which
then differentiates it with squall's grad rules) and `torch.autograd.grad` of a
random-weighted sum of its outputs is compared with the same on the eager reference.
Two executor configurations: the torch executor whole, and torch for prims only (every
ltorch op then runs through its decomposition, so every prim rule is exercised).

A fallback to PyTorch autograd (a prim without a rule) is a failure: `SquallWarning` is
an error here, and the compilation must list a backward trace. Ops squall cannot
differentiate yet are listed in `NOT_YET` with the reason, never skipped silently.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map

import squall
from squall.market.torch_executor import make_executor
from opinfos import OpInfo, SampleInput, all_opinfos, prims_only_executor

CONFIGS = {
    "torch": [make_executor()],
    "decomposed": [prims_only_executor()],
}

# float64 runs every sample; float32 the first few (same code paths, looser tolerances)
FLOAT32_SAMPLES = 3
TOLERANCES = {torch.float64: {"rtol": 1e-7, "atol": 1e-7}, torch.float32: {"rtol": 1e-4, "atol": 1e-4}}

# op name -> why squall's gradient is not compared for it (yet)
NOT_YET: dict[str, str] = {
    "Tensor.logical_or_": (
        "x.logical_or_(y) on a float x that requires grad: eager records no node for it, so the "
        "gradient reaching x's new value passes to its old one unchanged; squall's result carries none"
    ),
    "Tensor.lt_": (
        "x.lt_(y) on a float x that requires grad: eager's result carries zero gradients back to x "
        "and y, squall's (the comparison converted to x's dtype) carries none, so they get None"
    ),
}

# the op a fallback warning names ("no gradient rule for X") -> why that fallback is expected
KNOWN_FALLBACKS: dict[str, str] = {
    "an in-place update of an input that requires grad": (
        "eager refuses it on a leaf and records it on a non-leaf; only PyTorch's autograd knows "
        "which, so squall falls back to it (correct, with a SquallWarning)"
    ),
    "opaque.torch.Tensor.__getitem__": (
        "x[mask]: its output shape depends on data, so it runs whole as its torch call, shaped and "
        "guarded as in the call compiled (squall.frontend.speculation); PyTorch's autograd differentiates it "
        "(correct, with a SquallWarning)"
    ),
    "prims.scatter_reduce with reduce='prod'": (
        "PyTorch's scatter_reduce(prod) backward special-cases zeros per scattered group by "
        "inspecting the data; the prim rule refuses it rather than approximate"
    ),
}


def _is_differentiable(x) -> bool:
    return isinstance(x, torch.Tensor) and (x.dtype.is_floating_point or x.dtype.is_complex)


def _non_finite(sample: SampleInput) -> bool:
    return any(_is_differentiable(x) and not x.isfinite().all() for x in tree_flatten((sample.args, sample.kwargs))[0])


def _all_zero_tensor(sample: SampleInput) -> bool:
    return any(_is_differentiable(x) and x.numel() and not x.any() for x in tree_flatten((sample.args, sample.kwargs))[0])


# Where squall differentiates an ltorch op through its decomposition (no ltorch grad rule yet),
# the result can differ from PyTorch's hand-written backward on some inputs, though every prim
# rule is right: those samples are not compared, for the reason given.
_EDGES = (
    "PyTorch's own backward for this op special-cases non-finite inputs; the gradient of its "
    "decomposition is nan there: needs an ltorch grad rule (core/compiler/grad_rules/ltorch.py)"
)
_ZERO_NORM = (
    "at a zero vector PyTorch's norm backward gives 0 where the decomposition's sqrt'(0) gives "
    "nan: needs an ltorch grad rule (core/compiler/grad_rules/ltorch.py)"
)
_MAX_POOL_NAN = (
    "a nan in a window: PyTorch's max-pool backward sends the gradient to the nan's index, "
    "the decomposition's amax rule (as PyTorch's amax backward) gives the window nan"
)
_LOGIT_LOOPS = (
    "eager's logit backward answers -0.0 (+inf or -inf) and, with eps, NaN (NaN or 0) differently in its "
    "scalar and vectorized loops (torch 2.13 CPU), so a tensor's length and the CPU's vector width "
    "decide: squall follows the scalar loop, which test_logit_gradient_follows_eagers_scalar_loop_at_its_edges checks"
)
_ZERO_STD = (
    "a 0-d input has zero deviation: PyTorch's std backward masks sqrt'(0) to 0, the "
    "decomposition gives nan: needs an ltorch grad rule"
)


def _zero_d(sample: SampleInput) -> bool:
    return isinstance(sample.args[0], torch.Tensor) and sample.args[0].ndim == 0


NOT_YET_SAMPLES: dict[str, tuple[str, Callable[[SampleInput], bool]]] = {
    **{
        name: (_EDGES, _non_finite)
        for name in (
            "sigmoid", "F.sigmoid", "special.expit", "Tensor.sigmoid_",
            "relu6", "hardtanh", "elu", "selu", "celu", "softplus", "hardswish", "logsigmoid",
            "hardshrink",
        )
    },
    **{name: (_MAX_POOL_NAN, _non_finite) for name in (
        "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_torch_namespace",
        "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    )},
    "std": (_ZERO_STD, _zero_d),
    "std_mean": (_ZERO_STD, _zero_d),
    "binary_cross_entropy": (
        "probabilities of exactly 0 or 1: PyTorch clamps log at -100 and its backward's "
        "denominator at an epsilon; the decomposition's gradient is nan there",
        lambda s: bool(((s.args[0] == 0) | (s.args[0] == 1)).any()),
    ),
    **{name: (_LOGIT_LOOPS, _non_finite) for name in ("logit", "logit_eps", "special.logit")},
    "nn.functional.normalize": (_ZERO_NORM, _all_zero_tensor),
    "cosine_similarity": (_ZERO_NORM, _all_zero_tensor),
}


def _leaves(sample: SampleInput, mask: list[bool] | None = None) -> tuple[tuple, dict, list[torch.Tensor]]:
    """Fresh copies of the sample's arguments, its floating point tensors leaves that require
    grad (those `mask` selects, in flattening order: all when it is None)."""
    leaves: list[torch.Tensor] = []
    position = iter(range(1 << 30))

    def leaf(x):
        if _is_differentiable(x):
            t = x.detach().clone()
            if mask is None or mask[next(position)]:
                t.requires_grad_(True)
                leaves.append(t)
            return t
        return x

    args, kwargs = tree_map(leaf, (sample.args, sample.kwargs))
    return args, kwargs, leaves


def _weights(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outputs]


def _grads(fn, sample: SampleInput, mask: list[bool] | None, weights: list[torch.Tensor] | None):
    """(the floating point outputs, their weights, gradients of the weighted sum w.r.t. the leaves).

    Outputs that do not require grad add nothing (the gradient through them is zero), so
    an output one side marks non-differentiable and the other gives a zero gradient agree.
    """
    args, kwargs, leaves = _leaves(sample, mask)
    out = fn(*args, **kwargs)
    outputs = [o for o in tree_flatten(out)[0] if _is_differentiable(o)]
    if weights is None:
        weights = _weights(outputs)
    # a complex output enters through the real part: the loss is real, as autograd.grad needs
    terms = [torch.real((o * w).sum()) for o, w in zip(outputs, weights) if o.requires_grad]
    if not terms:
        return outputs, weights, [None for _ in leaves]
    # None where no gradient reaches an input: an optimizer skips such a parameter, so where
    # eager gives zeros squall must too (weight decay and momentum still step)
    return outputs, weights, list(torch.autograd.grad(sum(terms), leaves, allow_unused=True))


def _eager(info: OpInfo, sample: SampleInput):
    """Eager's gradients, and which floating point inputs it differentiates; None where it refuses.

    Eager refuses some inputs outright (batch norm's running statistics, a loss's class
    weights, a tensor standing for a number): those inputs do not require grad on
    either side. Eager refusing every form (a backward PyTorch lacks or rejects, e.g. for
    empty inputs) leaves nothing to compare.
    """
    n = sum(_is_differentiable(x) for x in tree_flatten((sample.args, sample.kwargs))[0])
    try:
        return None, _grads(info.ref(), sample, None, None)
    except Exception:
        pass
    accepted = []
    for mask in ([i == j for j in range(n)] for i in range(n)):
        try:
            _grads(info.ref(), sample, mask, None)
            accepted.append(True)
        except Exception:
            accepted.append(False)
    if not any(accepted):
        return None
    try:
        return accepted, _grads(info.ref(), sample, accepted, None)
    except Exception:
        return None


def _has_backward_trace(jfn) -> bool:
    return any(t.name.startswith("backward_") for t in squall.last_traces(jfn))


def check_gradients(info: OpInfo, config: str, sample: SampleInput, dtype: torch.dtype) -> str:
    """Compare squall's gradients with eager's for one sample; says "compared" or why not."""
    if not any(_is_differentiable(x) for x in tree_flatten((sample.args, sample.kwargs))[0]):
        return "no floating point input"
    known = NOT_YET_SAMPLES.get(info.name)
    if known and known[1](sample):
        return known[0]
    eager = _eager(info, sample)
    if eager is None:
        return "eager cannot differentiate this sample"
    mask, (expected_out, weights, expected) = eager
    if not any(o.requires_grad for o in expected_out):
        return "eager's outputs do not require grad"

    def program(*args, **kwargs):
        return info.op(*args, **kwargs)

    jfn = squall.jit(program, executors=CONFIGS[config])
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # a fallback to PyTorch autograd fails the test
        try:
            actual_out, _, actual = _grads(jfn, sample, mask, weights)
        except squall.SquallWarning as w:
            known = next((why for op, why in KNOWN_FALLBACKS.items() if f"no gradient rule for {op}" in str(w)), None)
            if known is None:
                raise
            return known
    assert _has_backward_trace(jfn), f"{sample}: squall did not differentiate the program"
    assert len(actual_out) == len(expected_out), f"{sample}: {len(actual_out)} floating point outputs, eager has {len(expected_out)}"
    tol = info.tolerances.get(dtype)
    tol = {"rtol": tol[0], "atol": tol[1]} if tol and dtype != torch.float64 else TOLERANCES[dtype]
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert (a is None) == (e is None), f"{sample}: gradient of input {i} is {'None' if a is None else 'a tensor'}, eager's {'None' if e is None else 'a tensor'}"
        if e is not None:
            torch.testing.assert_close(a, e, equal_nan=True, **tol, msg=lambda m: f"{sample}: gradient of input {i}: {m}")
    return "compared"


def _cases():
    for info in all_opinfos():
        if info.random:
            continue  # random outputs: eager and squall draw differently
        for config in CONFIGS:
            for dtype in (torch.float64, torch.float32):
                if dtype not in info.dtypes:
                    continue
                marks = []
                reason = NOT_YET.get(info.name) or info.skip_reason(config, dtype)
                if reason:
                    marks.append(pytest.mark.skip(reason=reason))
                yield pytest.param(info, config, dtype, id=f"{info.name}-{config}-{str(dtype).removeprefix('torch.')}", marks=marks)


@pytest.mark.parametrize("info,config,dtype", list(_cases()))
def test_gradients(info: OpInfo, config: str, dtype: torch.dtype):
    samples = list(info.sample_inputs(dtype, "cpu"))
    if dtype == torch.float32:
        samples = samples[:FLOAT32_SAMPLES]
    outcomes = [check_gradients(info, config, s, dtype) for s in samples]
    if "compared" not in outcomes:
        pytest.skip(f"no sample of {info.name} was compared: {'; '.join(sorted(set(outcomes)))}")


# Edges the OpInfo samples may not reach, written out: zeros in products, ties in max and
# min, complex operands (PyTorch's convention grad * conj(d out / d in)).
_EDGE_PROGRAMS = {
    "prod_zeros": (lambda x: x.prod(1), lambda: torch.tensor([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.0, 2.0, -3.0]], dtype=torch.float64)),
    "cumprod_zeros": (lambda x: x.cumprod(1), lambda: torch.tensor([[1.5, 0.0, 2.0, 0.0], [0.0, 2.0, 0.0, 3.0], [1.0, 2.0, -3.0, 0.5]], dtype=torch.float64)),
    "amax_ties": (lambda x: x.amax(1), lambda: torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=torch.float64)),
    "maximum_ties": (lambda x: torch.maximum(x, x.flip(0)), lambda: torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64)),
    # eager's logit backward: NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it,
    # g * inf at exactly 0 and 1 (the decomposition's gradient gave numbers and NaN there)
    "logit_outside_its_domain": (torch.logit, lambda: torch.tensor([-0.5, 0.3, 1.5, 0.0, 1.0, 0.05], dtype=torch.float64)),
    "logit_with_eps": (lambda x: torch.logit(x, 0.1), lambda: torch.tensor([-0.5, 0.3, 1.5, 0.0, 1.0, 0.05], dtype=torch.float64)),
    # eager's BCE-with-logits backward at an infinite logit: sigmoid(x) - target, finite (the
    # decomposition's stable softplus gave NaN at -inf)
    "bce_with_logits_at_infinite_logits": (
        lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor([0.0, 1.0, 0.5, 1.0, 0.2], dtype=torch.float64)),
        lambda: torch.tensor([-math.inf, math.inf, 0.0, 1e30, -3.0], dtype=torch.float64),
    ),
    # eager's prod backward branches on the zeros of the whole input: none, g * out / a (NaN at an
    # infinite factor); two or more in torch.prod(x), zeros; else the product of the others
    "prod_infinite_factor": (lambda x: x.prod(1), lambda: torch.tensor([[math.inf, 2.0, 3.0], [1e200, 1e200, 0.5]], dtype=torch.float64)),
    "prod_all_two_zeros_and_nan": (lambda x: x.prod(), lambda: torch.tensor([[0.0, math.inf, 2.0], [-0.0, math.nan, 3.0]], dtype=torch.float64)),
    "prod_all_one_zero_and_inf": (lambda x: x.prod(), lambda: torch.tensor([[0.0, math.inf], [2.0, 3.0]], dtype=torch.float64)),
    "prod_dim_zeros_and_inf": (lambda x: x.prod(0), lambda: torch.tensor([[0.0, math.inf], [0.0, 3.0], [math.inf, 0.0]], dtype=torch.float64)),
    # eager's cumprod backward masks each stretch between zeros before summing: a NaN from 0 * inf
    # past a zero stays there (and one inside its own sum is eager's too)
    "cumprod_zeros_and_infinities": (
        lambda x: x.cumprod(1),
        lambda: torch.tensor([[math.inf, 1e-30, -0.0, 2.0], [0.0, math.inf, 0.0, 2.0], [3.0, 0.0, math.inf, math.nan], [1e300, 1e300, 0.0, 1e-300]], dtype=torch.float64),
    ),
    "cumprod_of_one_element": (lambda x: x[:, :1].cumprod(1) + x[0, 1].cumprod(0), lambda: torch.tensor([[-math.inf, 0.0], [math.inf, 2.0], [0.0, 1.0]], dtype=torch.float64)),
    # an ignored target adds nothing to nll_loss and gets no gradient, even where its row holds
    # inf or NaN and the targets' total weight is NaN (0 * inf and 0 * NaN were NaN)
    "nll_loss_ignored_rows_nan_weight": (
        lambda x: F.nll_loss(x, torch.tensor([-100, 3, 3, -100, 2]), weight=torch.tensor([-math.inf, 3.0, 1.0, math.nan], dtype=torch.float64)),
        lambda: torch.tensor([[-math.inf, 3.0, 1.0, math.nan], [-2.5, -1.0, 1e30, 0.999], [0.5, -1e30, 0.0, math.inf], [math.nan, -0.0, -math.inf, 3.0], [1.0, math.nan, -2.5, -1.0]], dtype=torch.float64),
    ),
    # eager's nextafter backward: g to the first operand except where the two are equal
    "nextafter_equal_operands": (
        lambda x: torch.nextafter(x, torch.tensor([1.0, 0.0, 2.0, -math.inf], dtype=torch.float64)),
        lambda: torch.tensor([1.0, 2.0, 2.0, -math.inf], dtype=torch.float64),
    ),
    # eager's infinity-norm backward splits the gradient among the elements at the norm and the
    # NaNs, times sgn (0 at a NaN): a NaN in a row no longer makes the row's gradient NaN
    **{
        name: (fn, lambda: torch.tensor([[3.0, math.nan, -3.0, 1.0], [-3.0, 3.0, 1.0, -math.inf], [0.0, -0.0, 0.0, 0.0], [2.0, -1.0, 0.5, 2.0]], dtype=torch.float64))
        for name, fn in {
            "vector_norm_inf_ties_and_nan": lambda x: torch.linalg.vector_norm(x, math.inf, 1, True),
            "vector_norm_minus_inf": lambda x: torch.linalg.vector_norm(x, -math.inf, 0),
            "vector_norm_inf_whole": lambda x: torch.linalg.vector_norm(x[[0, 2, 3]], math.inf),
            "norm_inf_dim": lambda x: torch.norm(x, p=math.inf, dim=1),
        }.items()
    },
    # an all -inf window beside padding: eager's gradient goes to its first element in the input
    "max_pool3d_all_minus_inf_padded": (lambda x: F.max_pool3d(x[None], (1, 3, 3), (1, 2, 2), (0, 1, 1)), lambda: torch.full((2, 4, 5), -math.inf, dtype=torch.float64)),
    # ... and with a target that requires grad too (row 1 of z): eager's target backward is -x g,
    # or (log_sigmoid(-x) - pos_weight log_sigmoid(x)) g (the decomposition gave NaN at -inf logits)
    **{
        name: (fn, lambda: torch.tensor([[-math.inf, math.inf, 0.0, 1e30, -3.0, -math.inf], [0.0, 1.0, 0.5, -math.inf, 0.2, -math.inf]], dtype=torch.float64))
        for name, fn in {
            "bce_with_logits_target_requires_grad": lambda z: F.binary_cross_entropy_with_logits(z[0], z[1]),
            "bce_with_logits_target_requires_grad_pos_weight": lambda z: F.binary_cross_entropy_with_logits(
                z[0], z[1], pos_weight=torch.tensor([2.0, 0.5, 1.0, 3.0, 1.0, 2.0], dtype=torch.float64), reduction="sum"
            ),
            "bce_with_logits_target_requires_grad_weight": lambda z: F.binary_cross_entropy_with_logits(
                z[0], z[1], weight=torch.tensor([2.0, 0.5, 1.0, 3.0, 1.0, 2.0], dtype=torch.float64), reduction="none"
            ),
        }.items()
    },
    "complex_elementwise": (
        lambda z: torch.exp(z) * z / (z + 2) + torch.sin(z) * torch.tanh(z) + torch.sqrt(z) + torch.log(z),
        lambda: torch.randn(6, dtype=torch.complex128),
    ),
}


def _eager_differentiates(fn, make) -> bool:
    x = make().requires_grad_()
    try:
        out = fn(x)
        torch.autograd.grad(out, x, torch.ones_like(out))
    except RuntimeError:  # e.g. nextafter's derivative, which torch 2.10's autograd lacks
        return False
    return True


@pytest.mark.parametrize("name", list(_EDGE_PROGRAMS))
def test_gradients_at_edges(name: str):
    fn, make = _EDGE_PROGRAMS[name]
    if not _eager_differentiates(fn, make):
        pytest.skip(f"torch {torch.__version__}'s autograd cannot differentiate {name}: nothing to compare with")
    sample = SampleInput((make(),))
    info = OpInfo(name, fn, lambda dtype, device: [sample])
    for config in CONFIGS:
        assert check_gradients(info, config, sample, torch.float64) == "compared"


def test_a_tensor_used_twice_in_one_call_gets_its_gradient_once():
    # an op differentiated through its decomposition (ltorch.mul here) with the same tensor
    # in two places: its gradient is the sum over the places, not that sum once per place
    def f(x):
        y = x * 2
        return (y * y).sum()

    x = torch.randn(2, 3, requires_grad=True)
    expected = torch.autograd.grad(f(x), x)[0]
    got = torch.autograd.grad(squall.jit(f)(x), x)[0]
    torch.testing.assert_close(got, expected)


F = torch.nn.functional

# Programs around an op that returns its input (its output proxy *is* its input proxy): the
# input's gradient is the op's own gradient plus that of its other uses, each counted once.
# Issue 26: adaptive pooling to the input's size gave twice eager's gradient (a CNN on small
# images ends on a 1x1 map), interpolate(mode="area") to the same size three times.
_RETURNS_ITS_INPUT = {
    "adaptive_avg_pool2d_1x1_to_1": (lambda x: F.adaptive_avg_pool2d(x, 1).pow(2).sum(), (2, 3, 1, 1)),
    "adaptive_avg_pool2d_3x3_to_3": (lambda x: F.adaptive_avg_pool2d(x, 3).pow(2).sum(), (2, 3, 3, 3)),
    "adaptive_avg_pool2d_2x2_to_1": (lambda x: F.adaptive_avg_pool2d(x, 1).pow(2).sum(), (2, 3, 2, 2)),
    "adaptive_avg_pool2d_and_its_input": (lambda x: (F.adaptive_avg_pool2d(x, 3).exp() * x).sum(), (2, 3, 3, 3)),
    "adaptive_avg_pool2d_detached": (lambda x: (F.adaptive_avg_pool2d(x, 3).detach() * x).sum(), (2, 3, 3, 3)),
    "adaptive_avg_pool2d_twice": (lambda x: F.adaptive_avg_pool2d(F.adaptive_avg_pool2d(x, 3) * 2, 3).pow(2).sum(), (2, 3, 3, 3)),
    "adaptive_avg_pool2d_returned_twice": (lambda x: (lambda y: (y, y, x))(F.adaptive_avg_pool2d(x, 3)), (2, 3, 3, 3)),
    "adaptive_max_pool2d_same_size": (lambda x: F.adaptive_max_pool2d(x, 3).pow(2).sum(), (2, 3, 3, 3)),
    "interpolate_area_same_size": (lambda x: F.interpolate(x, size=(3, 3), mode="area").pow(2).sum(), (2, 3, 3, 3)),
    "interpolate_bilinear_same_size": (lambda x: (F.interpolate(x, size=(3, 3), mode="bilinear") * x).sum(), (2, 3, 3, 3)),
    "expand_same_shape_and_its_input": (lambda x: (x.expand(2, 3) * x.sin()).sum(), (2, 3)),
    "einsum_identity_and_its_input": (lambda x: (torch.einsum("ij->ij", x) * x).sum(), (2, 3)),
    # differentiated through its decomposition, which returns x twice untouched
    "broadcast_tensors_returns_its_input_twice": (lambda x: torch.broadcast_tensors(x, x, x.sum(0)), (2, 3)),
}


@pytest.mark.parametrize("name", list(_RETURNS_ITS_INPUT))
def test_an_op_that_returns_its_input_passes_its_gradient_once(name: str):
    fn, shape = _RETURNS_ITS_INPUT[name]
    sample = SampleInput((torch.randn(shape, dtype=torch.float64),))
    info = OpInfo(name, fn, lambda dtype, device: [sample])
    for config in CONFIGS:
        assert check_gradients(info, config, sample, torch.float64) == "compared"


@pytest.mark.parametrize("eps", [None, 0.2])
def test_logit_gradient_follows_eagers_scalar_loop_at_its_edges(eps):
    # each value alone: eager's scalar loop (NOT_YET_SAMPLES' _LOGIT_LOOPS: its vectorized loop
    # differs at -0.0, and at NaN with eps), against squall's gradient of all of them at once
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, 1.5, -2.5, 0.5, -0.5, 0.1, 0.9]
    expected = []
    for v in values:
        x = torch.tensor([v], dtype=torch.float64, requires_grad=True)
        torch.logit(x, eps).backward(torch.ones(1, dtype=torch.float64))
        expected.append(x.grad.item())
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    squall.jit(lambda t: torch.logit(t, eps))(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor(expected, dtype=torch.float64), equal_nan=True)
