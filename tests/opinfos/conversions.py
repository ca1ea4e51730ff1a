"""OpInfos for conversions of dtype and device: Tensor.to, Tensor.float and friends, Tensor.cpu,
Tensor.cuda, type_as, Tensor.type.

Moves go to `other_device`: "meta" from the CPU, the CPU from CUDA.
"""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, Directive, ErrorInput, OpInfo, SampleInput, make_tensor, other_device

_SHAPES = ((), (5,), (4, 3), (2, 0, 3))
HAS_CUDA = torch.cuda.is_available()


def _to(a, *args, **kwargs):
    return a.to(*args, **kwargs)


def _to_samples(dtype, device):
    a = make_tensor((4, 3), dtype, device)
    for target in (torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.bool, dtype):
        yield SampleInput((a, target))
    for shape in _SHAPES:
        yield SampleInput((make_tensor(shape, dtype, device), torch.float64))
    yield SampleInput((make_tensor((4, 6), dtype, device, noncontiguous=True), torch.int32))
    yield SampleInput((a, "cpu"))
    yield SampleInput((a, torch.device("cpu"), torch.int64))
    yield SampleInput((a, make_tensor((2,), torch.float64, device)))  # another tensor as the template
    yield SampleInput((a, make_tensor((2,), dtype, device)))  # a template of its own dtype: the identity
    yield SampleInput((a, "cpu", dtype))
    yield SampleInput((a,), {"dtype": torch.float32, "copy": True})
    yield SampleInput((a, torch.int64, True, True))  # non_blocking, copy
    yield SampleInput((a,), {"device": "cpu", "dtype": torch.bfloat16, "non_blocking": True})
    yield SampleInput((a, torch.float64), {"memory_format": torch.preserve_format})
    # moves to another device, with and without a change of dtype, in each call form
    other = other_device(device)
    yield SampleInput((a, other))
    yield SampleInput((a, torch.device(other), torch.float64))
    yield SampleInput((a, other, torch.bfloat16))  # narrower: converted before the move
    yield SampleInput((a,), {"device": other, "copy": True})
    yield SampleInput((a, other), {"non_blocking": True})
    yield SampleInput((a, make_tensor((2,), torch.int64, other)))  # another device's tensor as the template
    yield SampleInput((make_tensor((2, 0, 3), dtype, device), other))


def _to_errors(device):
    a = make_tensor((3,), torch.float32, device)
    yield ErrorInput(SampleInput((a, "nowhere")), RuntimeError, "Expected one of cpu, cuda")
    yield ErrorInput(SampleInput((a, [1])), TypeError, "'non_blocking' must be bool")
    yield ErrorInput(SampleInput((a,), {"device": 3.0}), TypeError, "expected a device as a str, torch.device or int, not float")
    yield ErrorInput(SampleInput((a, torch.float32, "yes")), TypeError, "'non_blocking' must be bool")
    yield ErrorInput(SampleInput((a, torch.float32), {"foo": 1}), TypeError, "unexpected keyword arguments")


def _unchanged(a):
    """Conversions that change nothing return the tensor itself, as torch does."""
    same = torch.float32 if a.dtype == torch.float32 else a.dtype
    return a.to(a.dtype) is a and a.to("cpu") is a and a.type_as(a) is a and a.type(same) is a and a.to(a) is a


def _method_samples(dtype, device):
    for shape in _SHAPES:
        yield SampleInput((make_tensor(shape, dtype, device),))
    yield SampleInput((make_tensor((4, 6), dtype, device, noncontiguous=True),))
    yield SampleInput((make_tensor((3, 2), dtype, device),), {"memory_format": torch.preserve_format})


def _method(name: str) -> OpInfo:
    return OpInfo(f"Tensor.{name}", lambda a, **kw: getattr(a, name)(**kw), _method_samples, ALL_TYPES, symbol=f"torch.Tensor.{name}")


def _type_as_samples(dtype, device):
    for other in (torch.float64, torch.int64, torch.bool, dtype):
        yield SampleInput((make_tensor((4, 3), dtype, device), make_tensor((2,), other, device)))
    yield SampleInput((make_tensor((), dtype, device), make_tensor((0,), torch.bfloat16, device)))


def _type_as_other_device_samples(dtype, device):
    other = other_device(device)
    for target in (torch.float64, dtype):
        yield SampleInput((make_tensor((4, 3), dtype, device), make_tensor((2,), target, other)))


def _type_samples(dtype, device):
    a = make_tensor((4, 3), dtype, device)
    # on CUDA, the CPU type names move the tensor to the CPU
    for target in (torch.float64, "torch.LongTensor", "torch.BoolTensor", torch.bfloat16, torch.FloatTensor):
        yield SampleInput((a, target))
    yield SampleInput((make_tensor((2, 0), dtype, device), torch.float32))
    if HAS_CUDA:
        for target in ("torch.cuda.DoubleTensor", torch.cuda.FloatTensor):
            yield SampleInput((a, target))
        yield SampleInput((a, "torch.cuda.LongTensor", True))  # non_blocking


def _type_errors(device):
    a = make_tensor((3,), torch.float32, device)
    yield ErrorInput(SampleInput((a, "torch.NoSuchTensor")), ValueError, "invalid type")
    yield ErrorInput(SampleInput((a, torch.float64, "no")), TypeError, "'non_blocking' must be bool")


def _cpu_samples(dtype, device):
    for shape in _SHAPES:
        yield SampleInput((make_tensor(shape, dtype, device),))
    yield SampleInput((make_tensor((4, 6), dtype, device, noncontiguous=True),))
    yield SampleInput((make_tensor((3, 2), dtype, device),), {"memory_format": torch.preserve_format})


def _cuda_samples(dtype, device):
    a = make_tensor((4, 3), dtype, device)
    yield SampleInput((a,))
    yield SampleInput((a, 0))
    yield SampleInput((a, "cuda"))
    yield SampleInput((a, torch.device("cuda", 0)), {"non_blocking": True})
    yield SampleInput((make_tensor((2, 0, 3), dtype, device),))


def _cuda_errors(device):
    a = make_tensor((3,), torch.float32, device)
    yield ErrorInput(SampleInput((a, 1.5)), TypeError, "argument 'device' .* must be torch.device, not float")
    yield ErrorInput(SampleInput((a,), {"non_blocking": 1}), TypeError, "'non_blocking' must be bool")
    if HAS_CUDA:  # without CUDA eager cannot get as far as the device's type
        yield ErrorInput(SampleInput((a, "cpu")), RuntimeError, "Invalid device, must be cuda device")


opinfos: list[OpInfo] = [
    OpInfo("Tensor.to", _to, _to_samples, ALL_TYPES, error_inputs=_to_errors, symbol="torch.Tensor.to"),
    OpInfo("Tensor.to_unchanged_is_self", _unchanged, lambda dtype, device: [SampleInput((make_tensor((3,), dtype, device),))], ALL_TYPES, symbol="torch.Tensor.to"),
    *[_method(n) for n in ("float", "double", "half", "bfloat16", "int", "long", "short", "char", "byte", "bool")],
    OpInfo("Tensor.type_as", lambda a, b: a.type_as(b), _type_as_samples, ALL_TYPES, symbol="torch.Tensor.type_as"),
    OpInfo("Tensor.type_as_other_device", lambda a, b: a.type_as(b), _type_as_other_device_samples, ALL_TYPES, symbol="torch.Tensor.type_as"),
    OpInfo("Tensor.cpu", lambda a, **kw: a.cpu(**kw), _cpu_samples, ALL_TYPES, symbol="torch.Tensor.cpu"),
    OpInfo(
        "Tensor.cuda", lambda a, *args, **kw: a.cuda(*args, **kw), _cuda_samples, ALL_TYPES, error_inputs=_cuda_errors,
        symbol="torch.Tensor.cuda", directives=() if HAS_CUDA else (Directive("CUDA is not available"),),
    ),
    OpInfo("Tensor.type", lambda a, *args, **kw: a.type(*args, **kw), _type_samples, ALL_TYPES, error_inputs=_type_errors, symbol="torch.Tensor.type"),
    OpInfo(
        "Tensor.type_name",
        lambda a: a.type() == {torch.float32: "torch.FloatTensor", torch.int64: "torch.LongTensor"}.get(a.dtype, a.type()),
        lambda dtype, device: [SampleInput((make_tensor((3,), dtype, device),))],
        ALL_TYPES,
        symbol="torch.Tensor.type",
    ),
]
