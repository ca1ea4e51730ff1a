"""Torch-language ops: activations (rectifiers, exponential-linear units, smooth activations, glu).

Activations compute like PyTorch's CPU kernels: bf16/f16 inputs in float32 (the
opmath type), cast back at the end, so results match eager bit for bit or close to it.
Their in-place forms (`torch.relu_`, `F.relu(x, inplace=True)`) are declared at the end.
"""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .functionalization import inplace
from .elementwise_unary import sigmoid
from .helpers import canonical_dim, check, computation_dtype, is_tensor, to_dtype, upcast
from ..proxies import TensorProxy
from ..symbol import Tags

F = torch.nn.functional

__all__ = [
    "relu", "hardtanh", "relu6", "leaky_relu", "threshold", "elu", "selu", "celu", "gelu", "silu",
    "mish", "softplus", "hardsigmoid", "hardswish", "logsigmoid", "softsign", "tanhshrink",
    "hardshrink", "softshrink", "glu", "relu_functional", "relu6_functional", "hardtanh_functional",
    "leaky_relu_functional", "threshold_functional", "elu_functional", "selu_functional",
    "celu_functional", "silu_functional", "mish_functional", "hardsigmoid_functional",
    "hardswish_functional", "relu_", "hardtanh_", "leaky_relu_", "threshold_", "elu_", "selu_",
    "celu_",
]


# --- shared helpers (never seen in traces) ------------------------------------------------


def _check_input(name: str, a) -> None:
    check(is_tensor(a), lambda: f"{name}(): argument 'input' must be Tensor, not {type(a).__name__}", TypeError)


def _check_floating(name: str, a: TensorProxy) -> None:
    # torch's kernels are only instantiated for floating types and say so with NotImplementedError
    _check_input(name, a)
    check(
        a.dtype.is_floating_point,
        lambda: f"{name}: not implemented for {a.dtype} tensors (floating point tensors only)",
        NotImplementedError,
    )


def _clamp(x: TensorProxy, lo, hi) -> TensorProxy:
    """x limited to [lo, hi] (None: unbounded); NaN passes through, as in torch.clamp.

    A value at a bound takes the bound, so no gradient passes there: eager's hardtanh,
    relu6, hardsigmoid and hardswish backwards pass none at their bounds (torch.clamp's does).
    """
    if lo is not None:
        x = prims.where(prims.le(x, lo), lo, x)
    if hi is not None:
        x = prims.where(prims.ge(x, hi), hi, x)
    return x


# --- softmax family -------------------------------------------------------------------------


# --- rectifiers and clamps ------------------------------------------------------------------


def _check_not_bool(name: str, a, message: str) -> None:
    _check_input(name, a)
    check(a.dtype != torch.bool, lambda: message, RuntimeError)
    check(not a.dtype.is_complex, lambda: f"{name} does not support complex tensors, got {a.dtype}", RuntimeError)


def _as_float(v):
    # float(v), a run-time number staying one (a recorded conversion, its value never read)
    return to_dtype(v, torch.float64)


def _bound_for(a: TensorProxy, v):
    # integer tensors see integer bounds (torch converts the scalar to the tensor's type)
    return v if a.dtype.is_floating_point else int(v)


@torchsymbol(torch.relu, torch.Tensor.relu, tags=(Tags.ELEMENTWISE,))
def relu(input):
    """max(input, 0); NaN stays NaN."""
    _check_not_bool("relu", input, "Boolean inputs not supported for relu")
    return prims.where(prims.le(input, 0), 0, input)


@torchsymbol(torch._C._nn.hardtanh, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.hardtanh")
def hardtanh(input, min_val=-1.0, max_val=1.0):
    """input clamped to [min_val, max_val]."""
    _check_not_bool("hardtanh", input, "Bool inputs not supported for hardtanh")
    check(min_val <= max_val, lambda: f"min_val cannot be greater than max_val (got {min_val} and {max_val})", ValueError)
    return _clamp(input, _bound_for(input, min_val), _bound_for(input, max_val))


@torchsymbol(torch._C._nn.relu6, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.relu6")
def relu6(input):
    """input clamped to [0, 6]."""
    _check_not_bool("relu6", input, "Bool inputs not supported for hardtanh")
    return _clamp(input, 0, 6)


@torchsymbol(torch._C._nn.leaky_relu, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.leaky_relu")
def leaky_relu(input, negative_slope=0.01):
    """input where positive, negative_slope * input elsewhere."""
    _check_floating("leaky_relu", input)
    x = upcast(input)
    return to_dtype(prims.where(prims.gt(x, 0), x, prims.mul(x, _as_float(negative_slope))), input.dtype)


@torchsymbol(torch.threshold, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.threshold")
def threshold(input, threshold, value):
    """value where input <= threshold, input elsewhere."""
    _check_input("threshold", input)
    check(input.dtype != torch.bool, lambda: "threshold: not implemented for torch.bool tensors", NotImplementedError)
    return prims.where(prims.le(input, _bound_for(input, threshold)), _bound_for(input, value), input)


# --- exponential-linear units ---------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_core(name: str, a, alpha: float, scale: float, input_scale: float) -> TensorProxy:
    _check_floating(name, a)
    x = upcast(a)
    positive = prims.gt(x, 0)
    # the exponential of the positive inputs is never taken: unselected, it overflowed to inf
    # above 88 and made their gradient 0 * inf = NaN (eager's is scale)
    below = prims.where(positive, 0.0, x)
    negative = prims.mul(prims.expm1(prims.mul(below, _as_float(input_scale))), _as_float(alpha) * _as_float(scale))
    return to_dtype(prims.where(positive, prims.mul(x, _as_float(scale)), negative), a.dtype)


@torchsymbol(torch._C._nn.elu, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.elu")
def elu(input, alpha=1.0, scale=1.0, input_scale=1.0):
    """scale * input where positive, alpha * scale * expm1(input * input_scale) elsewhere."""
    return _elu_core("elu", input, alpha, scale, input_scale)


@torchsymbol(torch.selu, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.selu")
def selu(input):
    """elu with the self-normalising constants."""
    return _elu_core("selu", input, _SELU_ALPHA, _SELU_SCALE, 1.0)


@torchsymbol(torch.celu, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.celu")
def celu(input, alpha=1.0):
    """max(0, x) + min(0, alpha * expm1(x / alpha))."""
    check(alpha != 0, lambda: "ZeroDivisionError: alpha cannot be 0 for CELU", RuntimeError)
    return _elu_core("celu", input, alpha, 1.0, 1.0 / alpha)


# --- smooth activations ---------------------------------------------------------------------


@torchsymbol(F.gelu, tags=(Tags.ELEMENTWISE,))
def gelu(input, approximate="none"):
    """x * Phi(x), exactly ('none', via erf) or with torch's tanh approximation."""
    check(approximate in ("none", "tanh"), lambda: "approximate argument must be either none or tanh.", RuntimeError)
    _check_floating("gelu", input)
    x = upcast(input)
    if approximate == "none":
        cdf = prims.mul(prims.add(prims.erf(prims.mul(x, math.sqrt(0.5))), 1.0), 0.5)
        return to_dtype(prims.mul(x, cdf), input.dtype)
    beta = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5
    cube = prims.mul(prims.mul(x, x), x)
    inner = prims.mul(prims.add(x, prims.mul(cube, 0.044715)), beta)
    out = prims.mul(prims.mul(x, 0.5), prims.add(prims.tanh(inner), 1.0))
    return to_dtype(out, input.dtype)


@torchsymbol(torch._C._nn.silu, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.silu")
def silu(input):
    """x * sigmoid(x)."""
    _check_floating("silu", input)
    x = upcast(input)
    return to_dtype(prims.div(x, prims.add(prims.exp(prims.neg(x)), 1.0)), input.dtype)


@torchsymbol(torch._C._nn.mish, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.mish")
def mish(input):
    """x * tanh(softplus(x))."""
    _check_floating("mish", input)
    x = upcast(input)
    return to_dtype(prims.mul(x, prims.tanh(_softplus(x, 1.0, 20.0))), input.dtype)


@torchsymbol(F.softplus, tags=(Tags.ELEMENTWISE,))
def softplus(input, beta=1, threshold=20):
    """log1p(exp(beta * x)) / beta, linear above `threshold` for stability."""
    _check_floating("softplus", input)
    return to_dtype(_softplus(upcast(input), float(beta), float(threshold)), input.dtype)


def _softplus(x: TensorProxy, beta: float, threshold: float) -> TensorProxy:
    scaled = prims.mul(x, beta)
    linear = prims.gt(scaled, threshold)
    # exp of the linear part's inputs is never taken: unselected, it overflowed to inf above 88
    # and made their gradient 0 * inf = NaN (eager's is 1)
    soft = prims.div(prims.log1p(prims.exp(prims.where(linear, 0.0, scaled))), beta)
    return prims.where(linear, x, soft)


@torchsymbol(torch._C._nn.hardsigmoid, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.hardsigmoid")
def hardsigmoid(input):
    """clamp(x + 3, 0, 6) / 6."""
    _check_floating("hardsigmoid", input)
    x = upcast(input)
    # a NaN of its own at a NaN input: eager's backward passes no gradient there
    shifted = prims.add(prims.where(prims.isnan(x), float("nan"), x), 3.0)
    return to_dtype(prims.div(_clamp(shifted, 0.0, 6.0), 6.0), input.dtype)


@torchsymbol(torch._C._nn.hardswish, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.hardswish")
def hardswish(input):
    """x * clamp(x + 3, 0, 6) / 6."""
    _check_floating("hardswish", input)
    x = upcast(input)
    # eager's backward: 0 up to -3, x / 3 + 1/2 between, 1 from 3; the middle's product taken
    # between only (at an infinity, unselected, it made the gradient 0 * inf = NaN)
    below, within = prims.le(x, -3.0), prims.lt(x, 3.0)
    xm = prims.where(prims.logical_and(prims.logical_not(below), within), x, 0.0)
    middle = prims.div(prims.mul(xm, prims.add(xm, 3.0)), 6.0)
    # x * 0 below, as eager's forward: NaN at -inf
    return to_dtype(prims.where(below, prims.mul(x, 0.0), prims.where(within, middle, x)), input.dtype)


@torchsymbol(F.logsigmoid, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.logsigmoid")
def logsigmoid(input):
    """log(sigmoid(x)) as min(x, 0) - log1p(exp(-|x|)), stable for large |x|."""
    _check_floating("logsigmoid", input)
    x = upcast(input)
    negative = prims.lt(x, 0.0)
    low = prims.where(negative, x, 0.0)
    # -|x| as a select, so its gradient at 0 is -1 (abs's is 0): eager's 0.5 there, where
    # a DPO loss starts (the policy equal to the reference)
    minus_abs = prims.where(negative, x, prims.neg(x))
    return to_dtype(prims.sub(low, prims.log1p(prims.exp(minus_abs))), input.dtype)


def _float_result(name: str, a) -> tuple[TensorProxy, torch.dtype]:
    # these torch ops are compositions of torch calls: integers promote to the default float dtype
    _check_input(name, a)
    check(a.dtype != torch.bool, lambda: f"{name}: not implemented for torch.bool tensors", NotImplementedError)
    result = a.dtype if a.dtype.is_floating_point else torch.get_default_dtype()
    return to_dtype(a, computation_dtype(result)), result


@torchsymbol(F.softsign, tags=(Tags.ELEMENTWISE,))
def softsign(input):
    """x / (1 + |x|)."""
    x, result = _float_result("softsign", input)
    return to_dtype(prims.div(x, prims.add(prims.abs(x), 1.0)), result)


@torchsymbol(F.tanhshrink, tags=(Tags.ELEMENTWISE,))
def tanhshrink(input):
    """x - tanh(x)."""
    x, result = _float_result("tanhshrink", input)
    return to_dtype(prims.sub(x, prims.tanh(x)), result)


@torchsymbol(torch.hardshrink, torch.Tensor.hardshrink, tags=(Tags.ELEMENTWISE,))
def hardshrink(input, lambd=0.5):
    """0 where |x| <= lambd, x elsewhere."""
    _check_floating("hardshrink", input)
    inside = prims.logical_and(prims.ge(input, -lambd), prims.le(input, lambd))
    return prims.where(inside, 0.0, input)


@torchsymbol(torch._C._nn.softshrink, tags=(Tags.ELEMENTWISE,), id="torch.nn.functional.softshrink")
def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _check_floating("softshrink", input)
    check(lambd >= 0, lambda: f"lambda must be greater or equal to 0, but found to be {lambd}.", RuntimeError)
    x = upcast(input)
    # the middle is x * 0, not 0, so that NaN stays NaN as in torch's kernel
    middle = prims.where(prims.lt(x, -lambd), prims.add(x, lambd), prims.mul(x, 0.0))
    out = prims.where(prims.gt(x, lambd), prims.sub(x, lambd), middle)
    return to_dtype(out, input.dtype)


@torchsymbol(F.glu)
def glu(input, dim=-1):
    """First half of `dim` times the sigmoid of the second half."""
    _check_input("glu", input)
    check(input.ndim > 0, lambda: "glu does not support scalars because halving size must be even", RuntimeError)
    d = canonical_dim(input.ndim, dim)
    n = input.shape[d]
    check(n % 2 == 0, lambda: f"Halving dimension must be even, but dimension {d} is size {n}", RuntimeError)
    _check_floating("glu", input)
    x = upcast(input)
    half = n // 2
    ones = (1,) * x.ndim
    first = prims.slice(x, (0,) * x.ndim, tuple(half if i == d else s for i, s in enumerate(x.shape)), ones)
    second = prims.slice(x, tuple(half if i == d else 0 for i in range(x.ndim)), tuple(x.shape), ones)
    return to_dtype(prims.mul(first, sigmoid(second)), input.dtype)


# --- in-place forms -----------------------------------------------------------------------------

relu_functional = inplace(relu, F.relu, flag="inplace")
relu6_functional = inplace(relu6, F.relu6, flag="inplace")
hardtanh_functional = inplace(hardtanh, F.hardtanh, flag="inplace")
leaky_relu_functional = inplace(leaky_relu, F.leaky_relu, flag="inplace")
threshold_functional = inplace(threshold, F.threshold, flag="inplace")
elu_functional = inplace(elu, F.elu, flag="inplace")
selu_functional = inplace(selu, F.selu, flag="inplace")
celu_functional = inplace(celu, F.celu, flag="inplace")
silu_functional = inplace(silu, F.silu, flag="inplace")
mish_functional = inplace(mish, F.mish, flag="inplace")
hardsigmoid_functional = inplace(hardsigmoid, F.hardsigmoid, flag="inplace")
hardswish_functional = inplace(hardswish, F.hardswish, flag="inplace")

relu_ = inplace(relu, torch.relu_, torch.Tensor.relu_)
hardtanh_ = inplace(hardtanh, F.hardtanh_)
leaky_relu_ = inplace(leaky_relu, F.leaky_relu_)
threshold_ = inplace(threshold, torch.threshold_)
elu_ = inplace(elu, F.elu_)
selu_ = inplace(selu, torch.selu_)
celu_ = inplace(celu, torch.celu_)
