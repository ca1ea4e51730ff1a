"""OpInfos for convolution, pooling, attention and resizing ops."""
from __future__ import annotations

import torch

from opinfos import FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor

F = torch.nn.functional
_CONV_DTYPES = NUMERIC  # torch's CPU convolutions take int64 too, not bool
_CONV_TOL = {torch.bfloat16: (3e-2, 8e-2)}


def _t(shape, dtype, device, **kw):
    return make_tensor(shape, dtype, device, low=-3, high=3, **kw)


def _conv_samples(n: int):
    def samples(dtype, device):
        s = (6, 5, 7)[:n]
        k = (3, 2, 3)[:n]
        x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
        yield SampleInput((x(2, 4, *s), x(6, 4, *k)))
        yield SampleInput((x(2, 4, *s), x(6, 4, *k), x(6)), {"stride": 2, "padding": 1})
        yield SampleInput((x(4, *s), x(6, 4, *k)), {"bias": x(6)})  # unbatched
        yield SampleInput((x(2, 4, *s), x(6, 2, *k)), {"groups": 2, "dilation": 2, "padding": tuple(range(1, n + 1))})
        yield SampleInput((x(2, 4, *s, noncontiguous=True), x(6, 4, *k)), {"padding": "same"})
        yield SampleInput((x(1, 4, *s), x(4, 1, *k)), {"padding": "same", "dilation": 2, "groups": 4})
        yield SampleInput((x(2, 4, *s), x(6, 4, *k)), {"padding": "valid", "stride": (2,) * n})
        yield SampleInput((x(0, 4, *s), x(6, 4, *k)))

    return samples


def _conv_errors(n: int):
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]

    def errors(device):
        f = torch.float32
        s, k = (5,) * n, (3,) * n
        x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
        yield ErrorInput(SampleInput((x(*s), x(4, 4, *k))), RuntimeError, f"Expected {n + 1}D \\(unbatched\\) or {n + 2}D \\(batched\\) input to conv{n}d")
        yield ErrorInput(SampleInput((x(1, 3, *s), x(4, 2, *k))), RuntimeError, "expected input.* to have 2 channels, but got 3 channels")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 2, *k)), {"groups": 3}), RuntimeError, "expected weight to be divisible by 3")
        yield ErrorInput(SampleInput((x(1, 4, *(2,) * n), x(4, 4, *k))), RuntimeError, "Kernel size can't be greater than actual input size")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k), x(3))), RuntimeError, "expected bias to be 1-dimensional with 4 elements")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"stride": (1,) * (n + 1)}), RuntimeError, "expected stride to be a single integer value or a list")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"stride": 0}), RuntimeError, "non-positive stride")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"padding": -1}), RuntimeError, "negative padding")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"padding": "same", "stride": 2}), RuntimeError, "not supported for strided convolutions")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"padding": "foo"}), RuntimeError, "Invalid padding string")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"dilation": 0}), RuntimeError, "dilation should be greater than zero")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"groups": 0}), RuntimeError, "non-positive groups")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k, dtype=torch.float64))), RuntimeError, "should be the same")
        yield ErrorInput(SampleInput((x(1, 4, *s, dtype=torch.bool), x(4, 4, *k, dtype=torch.bool))), NotImplementedError, "Bool")

    return errors


def _conv_transpose_samples(n: int):
    def samples(dtype, device):
        s = (5, 4, 3)[:n]
        k = (3, 2, 3)[:n]
        x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
        yield SampleInput((x(2, 4, *s), x(4, 3, *k)))
        yield SampleInput((x(2, 4, *s), x(4, 3, *k), x(3)), {"stride": 2, "padding": 1, "output_padding": 1})
        yield SampleInput((x(4, *s), x(4, 3, *k)), {"bias": x(3)})  # unbatched
        yield SampleInput((x(2, 4, *s), x(4, 2, *k), x(4)), {"groups": 2, "dilation": 2, "output_padding": 1})
        yield SampleInput((x(2, 4, *s, noncontiguous=True), x(4, 3, *k)), {"stride": (2,) * n, "padding": (1,) * n})
        yield SampleInput((x(0, 4, *s), x(4, 3, *k)))

    return samples


def _conv_transpose_errors(n: int):
    def errors(device):
        f = torch.float32
        s, k = (5,) * n, (3,) * n
        x = lambda *shape: make_tensor(shape, f, device)
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"output_padding": 2, "stride": 2}), RuntimeError, "output padding must be smaller than either stride or dilation")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(3, 4, *k))), RuntimeError, "expected input.* to have 3 channels, but got 4 channels")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 4, *k)), {"padding": 5}), RuntimeError, "Output size is too small")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 2, *k)), {"groups": 3}), RuntimeError, "expected weight to be divisible by 3")
        yield ErrorInput(SampleInput((x(1, 4, *s), x(4, 2, *k), x(2)), {"groups": 2}), RuntimeError, "expected bias to be 1-dimensional with 4 elements")

    return errors


def _convolution_samples(dtype, device):
    x = lambda *shape: _t(shape, dtype, device)
    yield SampleInput((x(2, 4, 6, 5), x(6, 2, 3, 2), x(6), (2, 1), (1, 0), (1, 2), False, (0, 0), 2))
    yield SampleInput((x(2, 4, 5), x(4, 3, 3), None, (2,), (1,), (1,), True, (1,), 1))


def _convolution_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    args = ((1, 1), (0, 0), (1, 1), False, (0, 0), 1)
    yield ErrorInput(SampleInput((x(4, 5, 5), x(4, 4, 3, 3), None, *args)), RuntimeError, "Expected 4-dimensional input for 4-dimensional weight")
    yield ErrorInput(SampleInput((x(1, 3, 5, 5), x(4, 4, 3, 3), None, *args)), RuntimeError, "to have 4 channels, but got 3 channels")


opinfos = [
    OpInfo("conv1d", F.conv1d, _conv_samples(1), _CONV_DTYPES, error_inputs=_conv_errors(1), symbol="torch.nn.functional.conv1d", tolerances=_CONV_TOL),
    OpInfo("conv2d", F.conv2d, _conv_samples(2), _CONV_DTYPES, error_inputs=_conv_errors(2), symbol="torch.nn.functional.conv2d", tolerances=_CONV_TOL),
    OpInfo("conv3d", F.conv3d, _conv_samples(3), FLOATING, error_inputs=_conv_errors(3), symbol="torch.nn.functional.conv3d", tolerances=_CONV_TOL),
    OpInfo("conv_transpose1d", F.conv_transpose1d, _conv_transpose_samples(1), _CONV_DTYPES, error_inputs=_conv_transpose_errors(1), symbol="torch.nn.functional.conv_transpose1d", tolerances=_CONV_TOL),
    OpInfo("conv_transpose2d", F.conv_transpose2d, _conv_transpose_samples(2), _CONV_DTYPES, error_inputs=_conv_transpose_errors(2), symbol="torch.nn.functional.conv_transpose2d", tolerances=_CONV_TOL),
    OpInfo("conv_transpose3d", F.conv_transpose3d, _conv_transpose_samples(3), FLOATING, symbol="torch.nn.functional.conv_transpose3d", tolerances=_CONV_TOL),
    OpInfo("convolution", torch.convolution, _convolution_samples, _CONV_DTYPES, error_inputs=_convolution_errors, symbol="torch.convolution", tolerances=_CONV_TOL),
]



def _unfold_samples(dtype, device):
    x = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)
    yield SampleInput((x(2, 3, 5, 6), 2))
    yield SampleInput((x(3, 5, 6), (2, 3)), {"stride": 2, "padding": 1})  # unbatched
    yield SampleInput((x(2, 3, 7, 6, noncontiguous=True), 3), {"dilation": (2, 1), "padding": (1, 0), "stride": (1, 2)})
    yield SampleInput((x(0, 3, 5, 5), 2))


def _unfold_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(2, 3, 5, 5), 6)), RuntimeError, "must be at least one")
    yield ErrorInput(SampleInput((x(2, 3, 5, 5), (2, 2, 2))), RuntimeError, "expected kernel_size equals to 2")
    yield ErrorInput(SampleInput((x(2, 3, 5, 5), 2), {"padding": -1}), RuntimeError, "padding should be non-negative")
    yield ErrorInput(SampleInput((x(2, 3, 5, 5), 2), {"stride": 0}), RuntimeError, "stride should be greater than zero")
    yield ErrorInput(SampleInput((x(5, 5), 2)), RuntimeError, "Only 3D or 4D input", torch_raises=False)  # torch: IndexError


def _fold_samples(dtype, device):
    x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
    yield SampleInput((x(2, 12, 16), (5, 5), 2))
    yield SampleInput((x(12, 9), 5, 2), {"stride": 2, "padding": 1})  # unbatched, overlapping blocks
    yield SampleInput((x(2, 6, 4, noncontiguous=True), (6, 5), (3, 2)), {"dilation": (2, 1), "stride": (1, 2)})
    yield SampleInput((x(2, 4, 4), (7, 7), 2), {"stride": 3})  # blocks do not cover the output
    yield SampleInput((x(0, 12, 16), (5, 5), 2))


def _fold_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(2, 12, 15), (5, 5), 2)), RuntimeError, "match the calculated number of sliding blocks")
    yield ErrorInput(SampleInput((x(2, 13, 16), (5, 5), 2)), RuntimeError, "divisible by the product of kernel_size")
    yield ErrorInput(SampleInput((x(2, 12, 16), (5, 5, 5), 2)), RuntimeError, "expected output_size equals to 2")
    yield ErrorInput(SampleInput((x(2, 12, 16, 1), (5, 5), 2)), RuntimeError, "Expected 2D or 3D")


opinfos += [
    OpInfo("unfold_im2col", F.unfold, _unfold_samples, FLOATING + (torch.bool,), error_inputs=_unfold_errors, symbol="torch.nn.functional.unfold"),
    OpInfo("fold_col2im", F.fold, _fold_samples, FLOATING + (torch.bool,), error_inputs=_fold_errors, symbol="torch.nn.functional.fold", tolerances=_CONV_TOL),
]
