"""Torch-language ops: normalization layers' functions (layer, RMS, group, batch, instance norm).

Statistics are computed in float32 for bf16/f16 inputs, as PyTorch's kernels do, and
the result is cast back to the input's dtype. batch_norm in training mode also updates
the running statistics the caller passed, as does instance_norm where it tracks them: each
symbol returns the new values and its `F.batch_norm` / `F.instance_norm` form writes them
back into the caller's tensors.
"""
from __future__ import annotations

import math

import torch

from .. import prims
from .base import torchsymbol
from .functionalization import TorchForm
from .helpers import check, computation_dtype, count_operand, expand_reduced, is_tensor, times_ratio, to_dtype
from .shape import detach
from ..proxies import TensorProxy

F = torch.nn.functional

__all__ = [
    "layer_norm", "rms_norm", "group_norm", "batch_norm", "batch_norm_functional", "instance_norm", "instance_norm_functional",
]


# --- shared helpers (never seen in traces) ------------------------------------------------


def _check_input(name: str, a, what: str = "input") -> None:
    check(is_tensor(a), lambda: f"{name}(): argument '{what}' must be Tensor, not {type(a).__name__}", TypeError)


def _check_floating(name: str, a: TensorProxy) -> None:
    check(a.dtype.is_floating_point, lambda: f"{name}: expected a floating point input, got {a.dtype}", RuntimeError)


def _mean(x: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    n = math.prod(x.shape[d] for d in dims)
    return prims.div(prims.sum(x, dims), count_operand(n))


def _stats(x: TensorProxy, dims: tuple[int, ...]) -> tuple[TensorProxy, TensorProxy]:
    """Mean and biased variance over `dims`, reduced (dims removed)."""
    return _mean(x, dims), prims.var(x, dims, correction=0)


def _affine_vector(t, shape, dim: int, dtype: torch.dtype):
    """A per-channel vector (weight, bias, running stat) broadcast along `dim` of `shape`."""
    if t is None:
        return None
    return prims.broadcast_in_dim(to_dtype(t, dtype), tuple(shape), (dim,))


# --- layer, RMS and group norm ---------------------------------------------------------------


def _normalized_dims(name: str, input: TensorProxy, normalized_shape) -> tuple[int, ...]:
    check(
        isinstance(normalized_shape, (list, tuple, torch.Size)) and all(isinstance(n, int) for n in normalized_shape),
        lambda: f"{name}(): argument 'normalized_shape' must be tuple of ints, not {type(normalized_shape).__name__}",
        TypeError,
    )
    shape = tuple(normalized_shape)
    k = len(shape)
    check(
        k <= input.ndim and tuple(input.shape[input.ndim - k :]) == shape,
        lambda: f"Given normalized_shape={list(shape)}, expected input with shape [*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}",
        RuntimeError,
    )
    return tuple(range(input.ndim - k, input.ndim))


def _check_param_shape(what: str, t, shape: tuple[int, ...]) -> None:
    if t is None:
        return
    _check_input("layer_norm", t, what)
    check(
        tuple(t.shape) == shape,
        lambda: f"Expected {what} to be of same shape as normalized_shape, but got {what} of shape {list(t.shape)} and normalized_shape = {list(shape)}",
        RuntimeError,
    )


@torchsymbol(F.layer_norm)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """(x - mean) / sqrt(var + eps) over the trailing `normalized_shape`, then weight and bias."""
    _check_input("layer_norm", input)
    dims = _normalized_dims("layer_norm", input, normalized_shape)
    shape = tuple(normalized_shape)
    _check_param_shape("weight", weight, shape)
    _check_param_shape("bias", bias, shape)
    _check_floating("layer_norm", input)
    compute = computation_dtype(input.dtype)
    x = to_dtype(input, compute)
    mean, var = _stats(x, dims)
    rstd = prims.rsqrt(prims.add(var, float(eps)))
    out = prims.mul(prims.sub(x, expand_reduced(mean, x.shape, dims)), expand_reduced(rstd, x.shape, dims))
    if weight is not None:
        out = prims.mul(out, prims.broadcast_in_dim(to_dtype(weight, compute), x.shape, dims))
    if bias is not None:
        out = prims.add(out, prims.broadcast_in_dim(to_dtype(bias, compute), x.shape, dims))
    return to_dtype(out, input.dtype)


@torchsymbol(F.rms_norm, torch.rms_norm)
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape`, times weight.

    eps=None means the machine epsilon of the computation dtype (float32 for bf16/f16), as in torch.
    """
    _check_input("rms_norm", input)
    dims = _normalized_dims("rms_norm", input, normalized_shape)
    _check_param_shape("weight", weight, tuple(normalized_shape))
    _check_floating("rms_norm", input)
    compute = computation_dtype(input.dtype)
    eps = torch.finfo(compute).eps if eps is None else float(eps)
    x = to_dtype(input, compute)
    rstd = prims.rsqrt(prims.add(_mean(prims.mul(x, x), dims), eps))
    out = prims.mul(x, expand_reduced(rstd, x.shape, dims))
    if weight is not None:
        out = prims.mul(out, prims.broadcast_in_dim(to_dtype(weight, compute), x.shape, dims))
    return to_dtype(out, input.dtype)


def _check_channel_vector(name: str, what: str, t, channels: int, message) -> None:
    if t is None:
        return
    _check_input(name, t, what)
    check(t.numel() == channels, message, RuntimeError)


@torchsymbol(F.group_norm)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Normalise each of `num_groups` channel groups per sample, then per-channel weight and bias."""
    _check_input("group_norm", input)
    check(input.ndim >= 2, lambda: f"Expected at least 2 dimensions for input tensor but received {input.ndim}", RuntimeError)
    n, c = input.shape[0], input.shape[1]
    check(isinstance(num_groups, int) and num_groups > 0, lambda: f"group_norm expects a positive int num_groups, got {num_groups!r}", RuntimeError)
    check(
        c % num_groups == 0,
        lambda: f"Expected number of channels in input to be divisible by num_groups, but got input of shape {list(input.shape)} and num_groups={num_groups}",
        RuntimeError,
    )
    for what, t in (("weight", weight), ("bias", bias)):
        _check_channel_vector(
            "group_norm", what, t, c,
            lambda: f"Expected {what} to be a vector of size equal to the number of channels in input, but got {what} of shape {list(t.shape)} and input of shape {list(input.shape)}",
        )
    _check_floating("group_norm", input)
    compute = computation_dtype(input.dtype)
    x = to_dtype(input, compute)
    grouped = prims.reshape(x, (n, num_groups, (c // num_groups) * math.prod(input.shape[2:])))
    mean, var = _stats(grouped, (2,))
    rstd = prims.rsqrt(prims.add(var, float(eps)))
    out = prims.mul(prims.sub(grouped, expand_reduced(mean, grouped.shape, (2,))), expand_reduced(rstd, grouped.shape, (2,)))
    out = prims.reshape(out, tuple(input.shape))
    if weight is not None:
        out = prims.mul(out, _affine_vector(weight, input.shape, 1, compute))
    if bias is not None:
        out = prims.add(out, _affine_vector(bias, input.shape, 1, compute))
    return to_dtype(out, input.dtype)


# --- batch and instance norm ------------------------------------------------------------------


def _on_copies(norm, input, running_mean, running_var, *args):
    """(output, new running mean, new running var): torch's `norm` run on copies of the running
    statistics it updates, so the op stays functional (the caller's get the new values when the
    program ends, through its form)."""
    running_mean, running_var = running_mean.clone(), running_var.clone()
    return norm(input, running_mean, running_var, *args), running_mean, running_var


def _eager_batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """What the torch executor runs for `batch_norm`: F.batch_norm on copies of the running stats.

    Returns (output, new running mean, new running var) when it updates running stats, so the
    op stays functional (the caller's buffers get the new values when the program ends), and
    the output alone otherwise.
    """
    if training and running_mean is not None and running_var is not None:
        return _on_copies(F.batch_norm, input, running_mean, running_var, weight, bias, True, momentum, eps)
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@torchsymbol(_eager_batch_norm, id="torch.nn.functional.batch_norm")
def batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """Batch norm over every dim but 1; in training, also the updated running statistics.

    Training with running stats, returns (output, new_running_mean, new_running_var), the new
    stats as torch computes them: (1 - momentum) * old + momentum * batch statistic, with the
    unbiased batch variance. Otherwise returns the output alone.
    """
    _check_input("batch_norm", input)
    check(input.ndim >= 2, lambda: "Dimension out of range (expected to be in range of [-1, 0], but got 1)", IndexError)
    c = input.shape[1]
    dims = tuple(d for d in range(input.ndim) if d != 1)
    count = math.prod(input.shape[d] for d in dims)
    if training:
        check(count > 1, lambda: f"Expected more than 1 value per channel when training, got input size {input.shape}", ValueError)
    check(training or running_mean is not None, lambda: "running_mean must be defined in evaluation mode", RuntimeError)
    check(training or running_var is not None, lambda: "running_var must be defined in evaluation mode", RuntimeError)
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        _check_channel_vector("batch_norm", what, t, c, lambda: f"{what} should contain {c} elements not {t.numel()}")
    check(isinstance(momentum, (int, float)) and not isinstance(momentum, bool), lambda: f"batch_norm(): argument 'momentum' must be float, not {type(momentum).__name__}", TypeError)
    _check_floating("batch_norm", input)
    _check_param_dtypes(input, weight, bias, running_mean, running_var)
    compute = computation_dtype(input.dtype)
    x = to_dtype(input, compute)
    new_mean = new_var = None
    if training:
        mean, var = _stats(x, dims)
        if training and running_mean is not None:
            # running stats use the unbiased variance
            unbiased = times_ratio(var, count, count - 1)
            new_mean = _running_update(running_mean, mean, momentum)
            new_var = _running_update(running_var, unbiased, momentum)
    else:
        mean, var = to_dtype(running_mean, compute), to_dtype(running_var, compute)
    rstd = prims.rsqrt(prims.add(var, float(eps)))
    out = prims.mul(prims.sub(x, _affine_vector(mean, x.shape, 1, compute)), _affine_vector(rstd, x.shape, 1, compute))
    if weight is not None:
        out = prims.mul(out, _affine_vector(weight, x.shape, 1, compute))
    if bias is not None:
        out = prims.add(out, _affine_vector(bias, x.shape, 1, compute))
    out = to_dtype(out, input.dtype)
    return out if new_mean is None else (out, new_mean, new_var)


def _check_param_dtypes(input: TensorProxy, *params) -> None:
    # torch's CPU kernel takes parameters of the input's dtype, or all float32 for a bf16/f16 input
    dtypes = {t.dtype for t in params if t is not None}
    if input.device.type != "cpu" or not dtypes:
        return
    check(
        dtypes == {input.dtype} or dtypes == {computation_dtype(input.dtype)},
        lambda: f"mixed dtype (CPU): all inputs must share same datatype (input {input.dtype}, parameters {sorted(map(str, dtypes))})",
        RuntimeError,
    )


def _running_update(running: TensorProxy, stat: TensorProxy, momentum: float) -> TensorProxy:
    # eager updates running statistics outside autograd: no gradient reaches the input through them
    compute = computation_dtype(running.dtype)
    old = to_dtype(running, compute)
    new = prims.add(prims.mul(old, 1.0 - momentum), prims.mul(to_dtype(detach(stat), compute), float(momentum)))
    return to_dtype(new, running.dtype)


# F.batch_norm: the functional op, then the updated running statistics written into the caller's tensors
batch_norm_functional = TorchForm(batch_norm, F.batch_norm, updates=("running_mean", "running_var"))


def _eager_instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-05):
    """What the torch executor runs for `instance_norm`: as `_eager_batch_norm`, on copies of
    the running stats it updates, returned with the output."""
    if use_input_stats and running_mean is not None and running_var is not None:
        return _on_copies(F.instance_norm, input, running_mean, running_var, weight, bias, True, momentum, eps)
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


@torchsymbol(_eager_instance_norm, id="torch.nn.functional.instance_norm")
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-05):
    """Normalise each (sample, channel) over its spatial dims; per-channel weight and bias.

    With running stats and use_input_stats (an InstanceNorm tracking them, in training), also
    returns the updated running statistics, as torch computes them: each sample's statistic
    updates its own copy of the running one (the unbiased variance), and the copies are
    averaged over the batch. Given only one of the two running stats there, it raises
    NotImplementedError rather than skip the update.
    """
    _check_input("instance_norm", input)
    check(input.ndim >= 3, lambda: f"instance_norm expects an input with at least 3 dimensions (N, C, *), got shape {list(input.shape)}", ValueError)
    c = input.shape[1]
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        _check_channel_vector("instance_norm", what, t, c, lambda: f"{what} should contain {c} elements not {t.numel()}")
    check(
        not use_input_stats or (running_mean is None) == (running_var is None),
        lambda: "running_mean and running_var must either both be None or neither be None",
        ValueError,
    )
    updates = use_input_stats and running_mean is not None
    check(use_input_stats or (running_mean is not None and running_var is not None), lambda: "Expected running_mean and running_var to be defined when use_input_stats is false", ValueError)
    _check_floating("instance_norm", input)
    compute = computation_dtype(input.dtype)
    x = to_dtype(input, compute)
    dims = tuple(range(2, input.ndim))
    if use_input_stats:
        spatial = math.prod(input.shape[2:])
        check(spatial > 1, lambda: f"Expected more than 1 spatial element when training, got input size {input.shape}", ValueError)
        mean, var = _stats(x, dims)
        centered = prims.sub(x, expand_reduced(mean, x.shape, dims))
        out = prims.mul(centered, expand_reduced(prims.rsqrt(prims.add(var, float(eps))), x.shape, dims))
    else:
        rstd = prims.rsqrt(prims.add(to_dtype(running_var, compute), float(eps)))
        out = prims.mul(prims.sub(x, _affine_vector(running_mean, x.shape, 1, compute)), _affine_vector(rstd, x.shape, 1, compute))
    if weight is not None:
        out = prims.mul(out, _affine_vector(weight, x.shape, 1, compute))
    if bias is not None:
        out = prims.add(out, _affine_vector(bias, x.shape, 1, compute))
    out = to_dtype(out, input.dtype)
    if not updates:
        return out
    # (1 - m) * old + m * s_b, averaged over the samples b, is (1 - m) * old + m * mean_b(s_b)
    unbiased = times_ratio(var, spatial, spatial - 1)
    new_mean = _running_update(running_mean, _mean(mean, (0,)), momentum)
    new_var = _running_update(running_var, _mean(unbiased, (0,)), momentum)
    return out, new_mean, new_var


# F.instance_norm: the functional op, then the updated running statistics written into the caller's tensors
instance_norm_functional = TorchForm(instance_norm, F.instance_norm, updates=("running_mean", "running_var"))


# --- vector norms: normalize, cosine similarity, pairwise distance ----------------------------
