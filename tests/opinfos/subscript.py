"""OpInfos for indexing syntax: x[key] and x[key] = value."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, Directive, ErrorInput, OpInfo, SampleInput, make_tensor
from squall.ltorch.base import DataDependentError


def _index(shape, dtype, device, high):
    return torch.randint(-high, high, shape, device=device, dtype=dtype)


def _getitem_samples(dtype, device):
    x = make_tensor((4, 5, 6), dtype, device)
    yield SampleInput((x, lambda t: t[1]))
    yield SampleInput((x, lambda t: t[-1, 2:, ::2]))
    yield SampleInput((x, lambda t: t[1:, None, ..., ::2]))
    yield SampleInput((x, lambda t: t[..., -8:100, None]))
    yield SampleInput((x, lambda t: t[3:1, True]))
    yield SampleInput((x, lambda t: t[False]))
    yield SampleInput((make_tensor((), dtype, device), lambda t: t[None, ...]))
    yield SampleInput((make_tensor((4, 6), dtype, device, noncontiguous=True), lambda t: t[::3, 1::2]))
    # the whole tensor: the identity
    yield SampleInput((x, lambda t: t[:]))
    yield SampleInput((x, lambda t: t[...]))
    yield SampleInput((x, lambda t: t[:, 0:5, -6:]))


def _mask_samples(dtype, device):
    # a bool mask: the output's length is read from the call being compiled, and guarded
    x = make_tensor((4, 5, 6), dtype, device)
    yield SampleInput((x, lambda t: t[t != t.flatten()[0]]))
    yield SampleInput((x, lambda t: t[0][t[0, :, 0] == t[0, 0, 0]]))
    yield SampleInput((x, lambda t: t[t != t]))  # nothing selected


_DATA_DEPENDENT = Directive(
    "its output shape depends on data: it runs whole as its torch call, guarded (squall.frontend.speculation), never as prims",
    configs=("decomposed",),
)


def _advanced_samples(dtype, device):
    x = make_tensor((4, 5, 6), dtype, device)
    i = _index((3,), torch.int64, device, 4)
    j = _index((2, 1), torch.int64, device, 5)
    yield SampleInput((x, i, j, lambda t, i, j: t[i]))
    yield SampleInput((x, i, j, lambda t, i, j: t[i, j]))  # adjacent: broadcast (2, 3) in place
    yield SampleInput((x, i, j, lambda t, i, j: t[:, j, i]))
    yield SampleInput((x, i, j, lambda t, i, j: t[i, :, i]))  # separated: moved to the front
    yield SampleInput((x, i, j, lambda t, i, j: t[0, :, [0, -1]]))  # ints select first, as in torch
    yield SampleInput((x, i.to(torch.int32), j, lambda t, i, j: t[None, [1, 2, 0], 1:, i]))
    yield SampleInput((x, i, j, lambda t, i, j: t[..., [[0], [5]]]))


def _getitem_errors(device):
    x = make_tensor((4, 5), torch.float32, device)
    yield ErrorInput(SampleInput((x, lambda t: t[4])), IndexError, "index 4 is out of bounds for dimension 0 with size 4")
    yield ErrorInput(SampleInput((x, lambda t: t[0, -6])), IndexError, "index -6 is out of bounds for dimension 1 with size 5")
    yield ErrorInput(SampleInput((x, lambda t: t[::-1])), ValueError, "step must be greater than zero")
    yield ErrorInput(SampleInput((x, lambda t: t[::0])), ValueError, "slice step cannot be zero")
    yield ErrorInput(SampleInput((x, lambda t: t[0, 0, 0])), IndexError, "too many indices for tensor of dimension 2")
    yield ErrorInput(SampleInput((x, lambda t: t[1.5])), IndexError, "only integers, slices")
    yield ErrorInput(SampleInput((make_tensor((), torch.float32, device), lambda t: t[0])), IndexError, "invalid index of a 0-dim tensor")


def _setitem(t, fn, value):
    out = t.clone()
    fn(out, value)
    return out


def _set(key):
    def assign(t, v):
        t[key] = v

    return assign


def _setitem_samples(dtype, device):
    x = make_tensor((4, 5, 6), dtype, device)
    yield SampleInput((x, _set(1), 3))
    yield SampleInput((x, _set((slice(1, None), None, ..., slice(None, None, 2))), make_tensor((3, 1, 5, 1), dtype, device)))
    yield SampleInput((x, _set((-1, slice(2, 5))), make_tensor((1, 6), torch.float64, device)))
    yield SampleInput((x, _set((slice(None, None, 3), slice(1, None, 2), 0)), make_tensor((2,), dtype, device)))
    yield SampleInput((x, _set(slice(5, 7)), 1))
    yield SampleInput((make_tensor((), dtype, device), _set(...), make_tensor((), dtype, device)))


def _setitem_advanced_samples(dtype, device):
    x = make_tensor((4, 5, 6), dtype, device)
    yield SampleInput((x, _set(([0, 2, 3],)), make_tensor((6,), dtype, device)))
    yield SampleInput((x, _set((slice(None), [[1], [4]], [0, 5])), 0))
    yield SampleInput((x, _set((..., [-1, 0])), make_tensor((4, 5, 2), dtype, device)))


def _setitem_mask_samples(dtype, device):
    x = make_tensor((4, 5), dtype, device)
    m = make_tensor((4, 5), torch.bool, device)
    r = make_tensor((4,), torch.bool, device)
    yield SampleInput((x, m, 0, lambda t, m, v: t.__setitem__(m, v)))
    yield SampleInput((x, r, make_tensor((5,), dtype, device), lambda t, m, v: t.__setitem__(m, v)))
    yield SampleInput((x, m, make_tensor((), dtype, device), lambda t, m, v: t.__setitem__(m, v)))


def _setitem_errors(device):
    x = make_tensor((4, 5), torch.float32, device)
    yield ErrorInput(SampleInput((x, _set(7), 1.0)), IndexError, "index 7 is out of bounds")
    yield ErrorInput(SampleInput((x, _set(slice(0, 2)), make_tensor((3, 5), torch.float32, device))), RuntimeError, "must match the existing size")
    yield ErrorInput(SampleInput((x, _set(x[:, 0] > 0), make_tensor((2, 5), torch.float32, device))), DataDependentError, "one value per selected element", torch_raises=False)


def _with_mask(t, m, v, fn):
    out = t.clone()
    fn(out, m, v)
    return out


opinfos = [
    OpInfo("getitem", lambda x, f: f(x), _getitem_samples, ALL_TYPES, error_inputs=_getitem_errors, symbol="torch.Tensor.__getitem__"),
    OpInfo("getitem_mask", lambda x, f: f(x), _mask_samples, ALL_TYPES, symbol="torch.Tensor.__getitem__", directives=(_DATA_DEPENDENT,)),
    OpInfo("getitem_advanced", lambda x, i, j, f: f(x, i, j), _advanced_samples, ALL_TYPES, symbol="torch.Tensor.__getitem__"),
    OpInfo("setitem", _setitem, _setitem_samples, ALL_TYPES, error_inputs=_setitem_errors, symbol="ltorch.setitem"),
    OpInfo("setitem_advanced", _setitem, _setitem_advanced_samples, ALL_TYPES, symbol="ltorch.setitem"),
    OpInfo("setitem_mask", _with_mask, _setitem_mask_samples, ALL_TYPES, symbol="ltorch.setitem"),
    # the write reaches the caller's tensor, as an in-place op on an input must
    OpInfo("setitem_input", lambda x, v: (x.__setitem__((slice(1, 3), 0), v), x)[1], lambda dt, dev: [SampleInput((make_tensor((4, 3), dt, dev), make_tensor((2,), dt, dev)))], ALL_TYPES, symbol="ltorch.setitem"),
]
