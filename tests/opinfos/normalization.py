"""OpInfos for nn normalizations and vector-norm ops."""
from __future__ import annotations

import torch

from opinfos import FLOATING, Directive, ErrorInput, OpInfo, SampleInput, make_tensor

F = torch.nn.functional
_LOW = {torch.bfloat16: (3e-2, 3e-2)}


def _layer_norm_samples(dtype, device):
    yield SampleInput((make_tensor((4, 5), dtype, device), (5,)))
    yield SampleInput((make_tensor((2, 3, 4), dtype, device, noncontiguous=True), [3, 4], make_tensor((3, 4), dtype, device), make_tensor((3, 4), dtype, device)))
    yield SampleInput((make_tensor((3, 6), dtype, device), (6,)), {"weight": make_tensor((6,), dtype, device), "eps": 1e-3})
    yield SampleInput((make_tensor((3, 6), dtype, device), (6,)), {"bias": make_tensor((6,), dtype, device)})
    yield SampleInput((make_tensor((0, 4), dtype, device), (4,)))
    yield SampleInput((make_tensor((5,), dtype, device), torch.Size([5])))
    if dtype == torch.bfloat16:
        # a low-precision input with float32 affine parameters, as in mixed-precision models
        yield SampleInput((make_tensor((3, 6), dtype, device), (6,), make_tensor((6,), torch.float32, device), make_tensor((6,), torch.float32, device)))


def _layer_norm_errors(device):
    x = make_tensor((2, 3), torch.float32, device)
    yield ErrorInput(SampleInput((x, (4,))), RuntimeError, r"Given normalized_shape=\[4\]")
    yield ErrorInput(SampleInput((x, (3,), make_tensor((2,), torch.float32, device))), RuntimeError, "Expected weight to be of same shape")
    yield ErrorInput(SampleInput((x, (3,), None, make_tensor((4,), torch.float32, device))), RuntimeError, "Expected bias to be of same shape")
    yield ErrorInput(SampleInput((x, 3)), TypeError, "must be tuple of ints")


def _rms_norm_samples(dtype, device):
    yield SampleInput((make_tensor((4, 5), dtype, device), (5,)))
    yield SampleInput((make_tensor((2, 3, 4), dtype, device, noncontiguous=True), [3, 4], make_tensor((3, 4), dtype, device)))
    yield SampleInput((make_tensor((3, 6), dtype, device), (6,)), {"weight": make_tensor((6,), dtype, device), "eps": 1e-3})
    yield SampleInput((make_tensor((0, 4), dtype, device), (4,)))
    yield SampleInput((make_tensor((3, 8), dtype, device, low=-1e-3, high=1e-3), (8,)))  # small values: eps matters


def _rms_norm_errors(device):
    x = make_tensor((2, 3), torch.float32, device)
    yield ErrorInput(SampleInput((x, (4,))), RuntimeError, r"Given normalized_shape=\[4\]")
    yield ErrorInput(SampleInput((x, (3,), make_tensor((2,), torch.float32, device))), RuntimeError, "Expected weight to be of same shape")


def _llama_rms_norm(x, weight, eps=1e-6):
    # LLaMA's RMSNorm, written with the ops its reference code uses
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _llama_rms_norm_core(x, weight, eps=1e-6):
    # the same without the dtype round trip
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _needs_tensor_to() -> tuple[Directive, ...]:
    from squall import ltorch

    if torch.Tensor.to in ltorch.torch_table():
        return ()
    return (Directive("torch.Tensor.to is not in the torch language yet (conversions family)"),)


def _llama_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3, 8), dtype, device), make_tensor((8,), dtype, device)))
    yield SampleInput((make_tensor((4, 16), dtype, device, noncontiguous=True), make_tensor((16,), dtype, device)), {"eps": 1e-5})


def _group_norm_samples(dtype, device):
    yield SampleInput((make_tensor((2, 6, 5), dtype, device), 3))
    yield SampleInput((make_tensor((2, 4, 3, 3), dtype, device, noncontiguous=True), 2, make_tensor((4,), dtype, device), make_tensor((4,), dtype, device)))
    yield SampleInput((make_tensor((3, 4), dtype, device), 4), {"weight": make_tensor((4,), dtype, device), "eps": 1e-3})
    yield SampleInput((make_tensor((2, 6, 4), dtype, device), 1), {"bias": make_tensor((6,), dtype, device)})
    yield SampleInput((make_tensor((0, 4, 3), dtype, device), 2))


def _group_norm_errors(device):
    yield ErrorInput(SampleInput((make_tensor((2, 6, 3), torch.float32, device), 4)), RuntimeError, "divisible by num_groups")
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device), 1)), RuntimeError, "Expected at least 2 dimensions")
    yield ErrorInput(SampleInput((make_tensor((2, 4, 3), torch.float32, device), 2, make_tensor((3,), torch.float32, device))), RuntimeError, "Expected weight to be a vector of size equal")


def _bn_params(c, dtype, device):
    return make_tensor((c,), dtype, device), make_tensor((c,), dtype, device)


def _running(c, device, dtype=torch.float32):
    return make_tensor((c,), dtype, device), make_tensor((c,), dtype, device, low=0.5, high=2)


def _batch_norm_eval_samples(dtype, device):
    stat_dtype = dtype
    rm, rv = make_tensor((3,), stat_dtype, device), make_tensor((3,), stat_dtype, device, low=0.5, high=2)
    w, b = _bn_params(3, dtype, device)
    yield SampleInput((make_tensor((4, 3), dtype, device), rm, rv))
    yield SampleInput((make_tensor((2, 3, 5), dtype, device, noncontiguous=True), rm, rv, w, b))
    yield SampleInput((make_tensor((2, 3, 4, 4), dtype, device), rm, rv), {"weight": w, "eps": 1e-3})
    yield SampleInput((make_tensor((0, 3), dtype, device), rm, rv, None, b))


def _batch_norm_train(x, running_mean, running_var, *args, **kwargs):
    """Training batch norm: returns the output and the updated running statistics.

    It updates copies, so the compiled run and the eager reference start from the same stats.
    """
    if running_mean is not None:
        running_mean, running_var = running_mean.clone(), running_var.clone()
    out = F.batch_norm(x, running_mean, running_var, *args, training=True, **kwargs)
    return out, running_mean, running_var


def _batch_norm_train_samples(dtype, device):
    w, b = _bn_params(3, dtype, device)
    yield SampleInput((make_tensor((4, 3), dtype, device), *_running(3, device, dtype)))
    yield SampleInput((make_tensor((2, 3, 5), dtype, device, noncontiguous=True), *_running(3, device, dtype), w, b))
    yield SampleInput((make_tensor((2, 3, 4, 4), dtype, device), *_running(3, device, dtype)), {"momentum": 0.5, "eps": 1e-3})
    yield SampleInput((make_tensor((4, 3, 2), dtype, device), None, None, w, b))
    if dtype == torch.bfloat16:
        # mixed precision: a low-precision input with float32 parameters and statistics
        yield SampleInput((make_tensor((4, 3, 2), dtype, device), *_running(3, device), *_bn_params(3, torch.float32, device)))


def _batch_norm_errors(device):
    x = make_tensor((2, 3), torch.float32, device)
    rm, rv = _running(3, device)
    yield ErrorInput(SampleInput((x, make_tensor((4,), torch.float32, device), rv)), RuntimeError, "running_mean should contain 3 elements not 4")
    yield ErrorInput(SampleInput((x, rm, rv, make_tensor((4,), torch.float32, device))), RuntimeError, "weight should contain 3 elements not 4")
    yield ErrorInput(SampleInput((x, rm, None)), RuntimeError, "running_var must be defined in evaluation mode")
    yield ErrorInput(SampleInput((x, None, None)), RuntimeError, "running_mean must be defined in evaluation mode")
    yield ErrorInput(SampleInput((make_tensor((1, 3), torch.float32, device), None, None), {"training": True}), ValueError, "Expected more than 1 value per channel")
    yield ErrorInput(SampleInput((x.double(), rm, rv)), RuntimeError, "mixed dtype")


def _instance_norm_samples(dtype, device):
    w, b = _bn_params(3, dtype, device)
    yield SampleInput((make_tensor((2, 3, 5), dtype, device),))
    yield SampleInput((make_tensor((2, 3, 4, 4), dtype, device, noncontiguous=True),), {"weight": w, "bias": b, "eps": 1e-3})
    rm, rv = make_tensor((3,), dtype, device), make_tensor((3,), dtype, device, low=0.5, high=2)
    yield SampleInput((make_tensor((2, 3, 4), dtype, device), rm, rv, w, b), {"use_input_stats": False})


def _instance_norm_errors(device):
    x = make_tensor((2, 3, 4), torch.float32, device)
    rm, rv = _running(3, device)
    yield ErrorInput(SampleInput((x, rm, None)), ValueError, "running_mean and running_var must either both be None or neither be None")
    yield ErrorInput(SampleInput((x, None, None, make_tensor((4,), torch.float32, device))), RuntimeError, "weight should contain 3 elements", torch_raises=False)


def _instance_norm_train(x, running_mean, running_var, *args, **kwargs):
    """Instance norm updating its running statistics: the output and the updated statistics
    (on copies, as `_batch_norm_train`)."""
    running_mean, running_var = running_mean.clone(), running_var.clone()
    out = F.instance_norm(x, running_mean, running_var, *args, use_input_stats=True, **kwargs)
    return out, running_mean, running_var


def _instance_norm_train_samples(dtype, device):
    w, b = _bn_params(3, dtype, device)
    yield SampleInput((make_tensor((4, 3, 5), dtype, device), *_running(3, device, dtype)))
    yield SampleInput((make_tensor((2, 3, 4, 4), dtype, device, noncontiguous=True), *_running(3, device, dtype), w, b), {"momentum": 0.5, "eps": 1e-3})
    yield SampleInput((make_tensor((1, 3, 2, 3), dtype, device), *_running(3, device, dtype)))


opinfos = [
    OpInfo("nn.functional.layer_norm", F.layer_norm, _layer_norm_samples, FLOATING, error_inputs=_layer_norm_errors, symbol="torch.nn.functional.layer_norm", tolerances=_LOW),
    OpInfo("nn.functional.rms_norm", F.rms_norm, _rms_norm_samples, FLOATING, error_inputs=_rms_norm_errors, symbol="torch.nn.functional.rms_norm", tolerances=_LOW),
    OpInfo("llama_rms_norm_core", _llama_rms_norm_core, _llama_samples, FLOATING, tolerances=_LOW),
    OpInfo("llama_rms_norm", _llama_rms_norm, _llama_samples, FLOATING, tolerances=_LOW, directives=_needs_tensor_to()),
    OpInfo("rms_norm", torch.rms_norm, _rms_norm_samples, FLOATING, symbol="torch.nn.functional.rms_norm", tolerances=_LOW),
    OpInfo("nn.functional.group_norm", F.group_norm, _group_norm_samples, FLOATING, error_inputs=_group_norm_errors, symbol="torch.nn.functional.group_norm", tolerances={**_LOW, torch.float32: (1e-4, 1e-4)}),
    OpInfo(
        "nn.functional.batch_norm",
        F.batch_norm,
        _batch_norm_eval_samples,
        FLOATING,
        error_inputs=_batch_norm_errors,
        # torch's strided (non-contiguous) bf16 eval kernel works in bf16 and is off by up to 2.0
        # from its own contiguous kernel; the contiguous kernel is the reference
        reference=lambda x, *args, **kwargs: F.batch_norm(x.contiguous(), *args, **kwargs),
        symbol="torch.nn.functional.batch_norm",
        tolerances=_LOW,
    ),
    OpInfo(
        "nn.functional.batch_norm_training",
        _batch_norm_train,
        _batch_norm_train_samples,
        FLOATING,
        symbol="torch.nn.functional.batch_norm",
        tolerances=_LOW,
    ),
    OpInfo("nn.functional.instance_norm", F.instance_norm, _instance_norm_samples, FLOATING, error_inputs=_instance_norm_errors, symbol="torch.nn.functional.instance_norm", tolerances=_LOW),
    OpInfo("nn.functional.instance_norm_training", _instance_norm_train, _instance_norm_train_samples, FLOATING, symbol="torch.nn.functional.instance_norm", tolerances=_LOW),
]
