"""OpInfos for factories: zeros/ones/full/empty, *_like, new_*, tensor, arange, linspace, eye."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor, other_device


def _size_forms(dtype, device):
    """Every way torch accepts a size, with the common keywords."""
    yield SampleInput((2, 3), {"dtype": dtype})
    yield SampleInput(((4,),), {"dtype": dtype, "device": device})
    yield SampleInput(([2, 0, 3],), {"dtype": dtype})
    yield SampleInput((torch.Size([3, 1]),), {"dtype": dtype, "layout": torch.strided, "requires_grad": False})
    yield SampleInput((), {"size": (2, 2), "dtype": dtype})
    yield SampleInput(((),), {"dtype": dtype})


def _default_dtype_forms(dtype, device):
    yield SampleInput((3, 2))
    yield SampleInput(((),))


def _size_errors(device):
    yield ErrorInput(SampleInput((-1, 2)), RuntimeError, "Dimension size must be non-negative")
    yield ErrorInput(SampleInput((2.5,)), TypeError, "must be tuple of ints")


def _full_samples(dtype, device):
    fill = {torch.bool: True, torch.int64: 7}.get(dtype, 1.5)
    yield SampleInput(((2, 3), fill), {"dtype": dtype})
    yield SampleInput(((0, 3), fill), {"dtype": dtype})
    yield SampleInput(([4], 2), {"dtype": dtype, "device": device})
    yield SampleInput(((), fill), {"dtype": dtype})
    # the dtype follows the fill value's kind when none is given
    yield SampleInput(((2,), 3))
    yield SampleInput(((2,), 2.5))
    yield SampleInput(((2,), False))
    # a 0-d tensor as the fill, and one for a tensor on another device (its value is read there)
    yield SampleInput(((2, 3), make_tensor((), dtype, device)), {"dtype": dtype})
    yield SampleInput(((2, 3), make_tensor((), dtype, device)), {"dtype": dtype, "device": other_device(device)})


def _like_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device),))
    yield SampleInput((make_tensor((), dtype, device),))
    yield SampleInput((make_tensor((0, 3), dtype, device),))
    yield SampleInput((make_tensor((2, 3), dtype, device, noncontiguous=True),), {"dtype": torch.float64})
    yield SampleInput((make_tensor((2, 3), torch.float32, device),), {"dtype": dtype, "device": device})


def _full_like_samples(dtype, device):
    fill = {torch.bool: True, torch.int64: 7}.get(dtype, 1.5)
    for sample in _like_samples(dtype, device):
        yield SampleInput((sample.args[0], fill), sample.kwargs)
    yield SampleInput((make_tensor((2, 3), dtype, device), make_tensor((), dtype, device)))


def _new_samples(dtype, device):
    x = make_tensor((2,), dtype, device)
    yield SampleInput((x, 2, 3))
    yield SampleInput((x, (4,)))
    yield SampleInput((x, ()))
    yield SampleInput((x, [0, 2]), {"dtype": torch.float64})
    yield SampleInput((x,), {"size": (2, 2)})
    yield SampleInput((make_tensor((), torch.float32, device), 3), {"dtype": dtype, "device": device})


def _new_full_samples(dtype, device):
    x = make_tensor((2,), dtype, device)
    yield SampleInput((x, (2, 3), 1))
    yield SampleInput((x, (), True))
    yield SampleInput((x, [0, 2], 2), {"dtype": torch.float64})


def _new_tensor_samples(dtype, device):
    x = make_tensor((2,), dtype, device)
    yield SampleInput((x, [1, 0, 1]))
    yield SampleInput((x, [[1.0, 2.0], [3.0, 4.0]]), {"dtype": torch.float64})
    yield SampleInput((x, 3))


def _tensor_samples(dtype, device):
    yield SampleInput(([1, 2, 3],), {"dtype": dtype})
    yield SampleInput(([[1.5, 0.0], [2.0, -1.0]],), {"dtype": dtype, "device": device})
    yield SampleInput((3,), {"dtype": dtype})
    yield SampleInput(([],), {"dtype": dtype})
    # dtype inferred from the data
    yield SampleInput(([1, 2],))
    yield SampleInput(([1, 2.5],))
    yield SampleInput(([True, False],))


def _tensor_errors(device):
    x = make_tensor((2,), torch.float32, device)
    yield ErrorInput(SampleInput(([x, x],)), TypeError, "data containing traced tensors", torch_raises=False)


def _as_tensor_samples(dtype, device):
    yield SampleInput((make_tensor((2, 3), dtype, device),))
    yield SampleInput((make_tensor((2, 3), torch.float32, device),), {"dtype": dtype})
    yield SampleInput(([1, 0, 2],), {"dtype": dtype, "device": device})
    yield SampleInput(([[1.0, 2.0]],))
    # a tensor on another device is moved there (and converted)
    yield SampleInput((make_tensor((2, 3), dtype, device),), {"device": other_device(device)})
    yield SampleInput((make_tensor((2, 3), torch.float64, device),), {"dtype": dtype, "device": other_device(device)})


def _arange_samples(dtype, device):
    yield SampleInput((5,), {"dtype": dtype})
    yield SampleInput((2, 11, 3), {"dtype": dtype, "device": device})
    yield SampleInput((10, 0, -3), {"dtype": dtype})
    yield SampleInput((0, 0), {"dtype": dtype})
    yield SampleInput((), {"end": 4, "dtype": dtype})
    if dtype.is_floating_point:
        yield SampleInput((0, 1, 0.1), {"dtype": dtype})
        yield SampleInput((-1.5, 2.25, 0.25), {"dtype": dtype})
    else:
        yield SampleInput((0.0, 5.5, 1.5), {"dtype": dtype})


def _arange_inferred_samples(dtype, device):
    # dtype inference: int64 when every bound is an int, the default float dtype otherwise
    yield SampleInput((7,))
    yield SampleInput((1, 7, 2))
    yield SampleInput((0, 1, 0.1))
    yield SampleInput((0.5, 3))
    yield SampleInput((3, -3.0, -0.7))


def _arange_errors(device):
    yield ErrorInput(SampleInput((0, 5, 0)), RuntimeError, "step must be nonzero")
    yield ErrorInput(SampleInput((5, 0, 1)), RuntimeError, "inconsistent with step sign")
    # (not asked of eager: torch 2.10's own arange dies of a floating point exception there on
    # some CPUs, the step truncated to 0 dividing, where later torch raises ValueError)
    yield ErrorInput(SampleInput((0.0, 2.5, 0.5), {"dtype": torch.int64}), ValueError, "step must be nonzero", torch_raises=False)


def _linspace_samples(dtype, device):
    yield SampleInput((0, 1, 5), {"dtype": dtype})
    yield SampleInput((-3.0, 10.0, 50), {"dtype": dtype, "device": device})
    yield SampleInput((10, 0, 7), {"dtype": dtype})
    yield SampleInput((2, 2, 1), {"dtype": dtype})
    yield SampleInput((0, 1, 0), {"dtype": dtype})


def _linspace_errors(device):
    yield ErrorInput(SampleInput((0, 1, -1)), RuntimeError, "number of steps must be non-negative")


def _eye_samples(dtype, device):
    yield SampleInput((3,), {"dtype": dtype})
    yield SampleInput((2, 4), {"dtype": dtype, "device": device})
    yield SampleInput((0,), {"dtype": dtype})
    yield SampleInput((3, 0), {"dtype": dtype})
    yield SampleInput((4,), {"m": 2, "dtype": dtype})


def _eye_errors(device):
    yield ErrorInput(SampleInput((-1,)), RuntimeError, "n must be greater or equal to 0")
    yield ErrorInput(SampleInput((3, -1)), RuntimeError, "m must be greater or equal to 0")


def _scalar_tensor_samples(dtype, device):
    yield SampleInput((3,), {"dtype": dtype})
    yield SampleInput((1.5,), {"dtype": dtype, "device": device})
    yield SampleInput((True,))
    yield SampleInput((2,))


def _positions(x):
    # a factory inside a program, sized and placed by a traced tensor
    return x + torch.arange(x.shape[-1], device=x.device) + torch.ones(x.shape[-1], dtype=x.dtype)


def _positions_samples(dtype, device):
    yield SampleInput((make_tensor((3, 5), dtype, device),))
    yield SampleInput((make_tensor((0, 2), dtype, device),))


opinfos = [
    OpInfo("zeros", torch.zeros, _size_forms, ALL_TYPES, _size_errors, symbol="torch.zeros"),
    OpInfo("zeros_default_dtype", torch.zeros, _default_dtype_forms, (torch.float32,), symbol="torch.zeros"),
    OpInfo("ones", torch.ones, _size_forms, ALL_TYPES, _size_errors, symbol="torch.ones"),
    # empty's values are unspecified: compare shapes and dtypes only
    OpInfo("empty", torch.empty, _size_forms, ALL_TYPES, _size_errors, symbol="torch.empty", random=True),
    OpInfo("full", torch.full, _full_samples, ALL_TYPES, symbol="torch.full"),
    OpInfo("scalar_tensor", torch.scalar_tensor, _scalar_tensor_samples, NUMERIC, symbol="torch.scalar_tensor"),
    OpInfo("zeros_like", torch.zeros_like, _like_samples, ALL_TYPES, symbol="torch.zeros_like"),
    OpInfo("ones_like", torch.ones_like, _like_samples, ALL_TYPES, symbol="torch.ones_like"),
    OpInfo("empty_like", torch.empty_like, _like_samples, ALL_TYPES, symbol="torch.empty_like", random=True),
    OpInfo("full_like", torch.full_like, _full_like_samples, ALL_TYPES, symbol="torch.full_like"),
    OpInfo("Tensor.new_zeros", lambda x, *a, **k: x.new_zeros(*a, **k), _new_samples, ALL_TYPES, symbol="torch.Tensor.new_zeros"),
    OpInfo("Tensor.new_ones", lambda x, *a, **k: x.new_ones(*a, **k), _new_samples, ALL_TYPES, symbol="torch.Tensor.new_ones"),
    OpInfo("Tensor.new_empty", lambda x, *a, **k: x.new_empty(*a, **k), _new_samples, ALL_TYPES, symbol="torch.Tensor.new_empty", random=True),
    OpInfo("Tensor.new_full", lambda x, *a, **k: x.new_full(*a, **k), _new_full_samples, ALL_TYPES, symbol="torch.Tensor.new_full"),
    OpInfo("Tensor.new_tensor", lambda x, *a, **k: x.new_tensor(*a, **k), _new_tensor_samples, NUMERIC, symbol="torch.Tensor.new_tensor"),
    OpInfo("tensor", torch.tensor, _tensor_samples, ALL_TYPES, _tensor_errors, symbol="torch.tensor"),
    OpInfo("as_tensor", torch.as_tensor, _as_tensor_samples, ALL_TYPES, symbol="torch.as_tensor"),
    OpInfo("arange", torch.arange, _arange_samples, NUMERIC, _arange_errors, symbol="torch.arange"),
    OpInfo("arange_inferred_dtype", torch.arange, _arange_inferred_samples, (torch.float32,), symbol="torch.arange"),
    OpInfo("linspace", torch.linspace, _linspace_samples, NUMERIC, _linspace_errors, symbol="torch.linspace"),
    OpInfo("eye", torch.eye, _eye_samples, ALL_TYPES, _eye_errors, symbol="torch.eye"),
    OpInfo("factories_in_program", _positions, _positions_samples, FLOATING, symbol="torch.arange"),
]
