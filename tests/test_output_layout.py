"""Outputs laid out as eager lays them out: strides, memory formats, whether a result is its input."""
from __future__ import annotations

import pytest
import torch

import squall

CL = torch.channels_last


def _inputs():
    x = torch.randn(2, 3, 4, 5)
    return {
        "contiguous": x,
        "channels_last": x.contiguous(memory_format=CL),
        "one_channel": torch.randn(2, 1, 4, 5),  # ambiguous: is_contiguous(channels_last) holds, eager's to() copies
        "transposed": x.transpose(2, 3),
    }


def _same_layout(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected)
    assert actual.stride() == expected.stride()
    for fmt in (torch.contiguous_format, CL):
        assert actual.is_contiguous(memory_format=fmt) == expected.is_contiguous(memory_format=fmt)


def to_cl_times_two(x):
    return x.to(memory_format=CL) * 2


def to_cl(x):
    return x.to(memory_format=CL)


def float_cl(x):
    return x.float(memory_format=CL)


def to_cl_written(x):
    y = x.to(memory_format=CL)
    y.add_(1)  # reaches x only where eager's to() returned x itself
    return y * 1


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("layout", list(_inputs()))
@pytest.mark.parametrize("fn", [to_cl_times_two, to_cl, float_cl], ids=lambda f: f.__name__)
def test_to_memory_format_lays_out_as_eager(fn, layout, dynamic):
    # squall answered `x.to(memory_format=...)` with `x` itself: contiguous where eager's is channels-last
    x = _inputs()[layout]
    jfn = squall.jit(fn, dynamic=dynamic)
    expected = fn(x)
    actual = jfn(x)
    _same_layout(actual, expected)
    assert (actual is x) == (expected is x)
    assert (actual.data_ptr() == x.data_ptr()) == (expected.data_ptr() == x.data_ptr())


@pytest.mark.parametrize("layout", list(_inputs()))
def test_a_write_through_to_memory_format_reaches_the_input_only_where_eager_aliases(layout):
    fn = to_cl_written
    x = _inputs()[layout]
    x_eager, x_jit = x.clone(memory_format=torch.preserve_format), x.clone(memory_format=torch.preserve_format)
    expected = fn(x_eager)
    actual = squall.jit(fn)(x_jit)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x_jit, x_eager)


def test_one_program_serves_both_layouts_as_eager():
    # the key holds no strides: a channels-last call after a contiguous one runs the same program
    jfn = squall.jit(to_cl_written)
    for layout in ("contiguous", "channels_last", "contiguous", "channels_last"):
        x = _inputs()[layout]
        x_eager, x_jit = x.clone(memory_format=torch.preserve_format), x.clone(memory_format=torch.preserve_format)
        expected = to_cl_written(x_eager)
        actual = jfn(x_jit)
        _same_layout(actual, expected)
        torch.testing.assert_close(x_jit, x_eager)


_W = torch.randn(4, 3, 3, 3)
_LAYOUT_KEEPING = {
    "mul": lambda t: t * 2,
    "sigmoid_mul": lambda t: torch.sigmoid(t) * t,
    "zeros_like": torch.zeros_like,
    "empty_like": lambda t: torch.empty_like(t).zero_(),
    "clone": torch.clone,
    "contiguous_cl": lambda t: t.contiguous(memory_format=CL),
    "conv": lambda t: torch.nn.functional.conv2d(t, _W, padding=1),
    "max_pool": lambda t: torch.nn.functional.max_pool2d(t, 2),
    "batch_norm": lambda t: torch.nn.functional.batch_norm(t, None, None, training=True),
    "permuted": lambda t: t.permute(0, 2, 3, 1),
    "sliced": lambda t: t[:, 1:],
}


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("name", list(_LAYOUT_KEEPING))
def test_results_keep_eagers_layout_across_input_layouts(name, dynamic):
    # one program (no strides in the key) called with each layout in turn: eager's strides each time
    fn = _LAYOUT_KEEPING[name]
    jfn = squall.jit(fn, dynamic=dynamic)
    for layout in ("contiguous", "channels_last", "transposed", "contiguous"):
        x = _inputs()[layout]
        expected, actual = fn(x), jfn(x)
        _same_layout(actual, expected)
        assert actual.storage_offset() == expected.storage_offset()


_W4 = torch.randn(4, 3, 3, 3)
_TRAINING = {
    "batch_norm_relu": lambda t, w: torch.relu(torch.nn.functional.batch_norm(t, None, None, w, w * 0.5, training=True)),
    "conv_batch_norm_pool": lambda t, w: torch.nn.functional.max_pool2d(
        torch.relu(torch.nn.functional.batch_norm(torch.nn.functional.conv2d(t * w[:, None, None], _W4, padding=1), None, None, training=True)), 2),
}


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("name", list(_TRAINING))
def test_training_results_and_gradients_keep_eagers_layout(name, layout):
    # squall's own gradients call aten's backward kernels (batch norm's forward and backward, relu's,
    # the pool's, the convolution's) with the layouts eager's autograd hands them: a channels-last
    # activation stays channels-last through the step, as in eager (it was copied to contiguous
    # before each kernel, and every kernel after it ran on that layout)
    fn = _TRAINING[name]
    jfn = squall.jit(fn)
    x = _inputs()[layout].clone(memory_format=torch.preserve_format).requires_grad_()
    w = torch.randn(3, requires_grad=True)
    expected, actual = fn(x, w), jfn(x, w)
    _same_layout(actual, expected)
    assert squall.last_traces(jfn).backward is not None  # squall's gradients, not PyTorch's autograd
    g = torch.randn_like(expected)
    for a, e in zip(torch.autograd.grad(actual, (x, w), g), torch.autograd.grad(expected, (x, w), g)):
        _same_layout(a, e)
