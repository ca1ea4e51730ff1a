"""OpInfos for the ops of squall.ltorch.pooling: max, average and adaptive pooling."""
from __future__ import annotations

import torch

from opinfos import FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor

F = torch.nn.functional
_CONV_TOL = {torch.bfloat16: (3e-2, 8e-2)}


def _t(shape, dtype, device, **kw):
    return make_tensor(shape, dtype, device, low=-3, high=3, **kw)


def _max_pool_samples(n: int):
    def samples(dtype, device):
        s = (7, 6, 5)[:n]
        x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
        yield SampleInput((x(2, 3, *s), 2))
        yield SampleInput((x(3, *s), 3), {"stride": 2, "padding": 1})  # unbatched
        yield SampleInput((x(2, 3, *s), (2, 3, 2)[:n]), {"stride": 1, "dilation": 2})
        yield SampleInput((x(2, 3, *s, noncontiguous=True), 3), {"stride": 2, "ceil_mode": True})
        yield SampleInput((x(1, 2, *s), 2), {"stride": 3, "padding": 1, "ceil_mode": True})
        yield SampleInput((x(0, 3, *s), 2))
        yield SampleInput((x(2, 3, *s), 1), {"stride": 1})  # a 1-wide window: the identity
        if dtype.is_floating_point:
            t = x(1, 2, *s)
            t.view(-1)[3] = float("nan")
            yield SampleInput((t, 2))

    return samples


def _pool_errors(fn, n: int, max_pool: bool):
    def errors(device):
        f = torch.float32
        s = (5,) * n
        x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
        # torch's avg_pool2d fails this one with an IndexError from its own size lookup
        yield ErrorInput(SampleInput((x(*s), 2)), RuntimeError, "Expected", torch_raises=fn is not F.avg_pool2d)
        yield ErrorInput(SampleInput((x(1, 2, 0, *s[1:]), 2)), RuntimeError, "Expected")
        yield ErrorInput(SampleInput((x(1, 2, *s), 3), {"padding": 2}), RuntimeError, "pad should be at most half of")
        yield ErrorInput(SampleInput((x(1, 2, *s), 2), {"stride": 0}), RuntimeError, "stride should not be zero")
        yield ErrorInput(SampleInput((x(1, 2, *(1,) * n), 2)), RuntimeError, "Output size is too small")
        yield ErrorInput(SampleInput((x(1, 2, *s), (2,) * (n + 1))), RuntimeError, "kernel_size must either be a single int, or a tuple of")
        yield ErrorInput(SampleInput((x(1, 2, *s, dtype=torch.bool), 2)), NotImplementedError, "Bool")
        if max_pool:
            yield ErrorInput(SampleInput((x(1, 2, *s), 2), {"dilation": 0}), RuntimeError, "dilation should be greater than zero")
        elif n > 1:
            yield ErrorInput(SampleInput((x(1, 2, *s), 2), {"divisor_override": 0}), RuntimeError, "divisor must be not zero")

    return errors


def _avg_pool_samples(n: int):
    def samples(dtype, device):
        s = (7, 6, 5)[:n]
        x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
        yield SampleInput((x(2, 3, *s), 2))
        yield SampleInput((x(3, *s), 3), {"stride": 2, "padding": 1})  # unbatched
        yield SampleInput((x(2, 3, *s), 3), {"stride": 2, "padding": 1, "count_include_pad": False})
        yield SampleInput((x(2, 3, *s, noncontiguous=True), 3), {"stride": 2, "ceil_mode": True})
        yield SampleInput((x(1, 2, *s), 2), {"stride": 3, "padding": 1, "ceil_mode": True, "count_include_pad": False})
        yield SampleInput((x(1, 2, *s), tuple(range(2, n + 2))), {"stride": 1, "padding": 1, "ceil_mode": True})
        yield SampleInput((x(0, 3, *s), 2))
        yield SampleInput((x(2, 3, *s), 1))  # a 1-wide window: the identity
        if n > 1:
            yield SampleInput((x(1, 2, *s), 3), {"padding": 1, "divisor_override": 4})

    return samples


# torch's CPU kernels lack int64 max_pool1d and bfloat16 avg_pool3d; squall's decompositions have no such gaps
_POOL_DTYPES = {"max_pool1d": FLOATING, "avg_pool3d": (torch.float32, torch.float64, torch.int64)}

opinfos = [
    OpInfo(f"max_pool{n}d", fn, _max_pool_samples(n), _POOL_DTYPES.get(f"max_pool{n}d", NUMERIC), error_inputs=_pool_errors(fn, n, True), symbol=f"torch.nn.functional.max_pool{n}d")
    for n, fn in ((1, F.max_pool1d), (2, F.max_pool2d), (3, F.max_pool3d))
]
opinfos += [
    OpInfo(f"avg_pool{n}d", fn, _avg_pool_samples(n), _POOL_DTYPES.get(f"avg_pool{n}d", NUMERIC), error_inputs=_pool_errors(fn, n, False), symbol=f"torch.nn.functional.avg_pool{n}d")
    for n, fn in ((1, F.avg_pool1d), (2, F.avg_pool2d), (3, F.avg_pool3d))
]
opinfos.append(OpInfo("max_pool2d_torch_namespace", lambda x, k, **kw: torch.max_pool2d(x, k, **kw), _max_pool_samples(2), FLOATING, symbol="torch.nn.functional.max_pool2d"))


def _adaptive_samples(n: int):
    def samples(dtype, device):
        s = (7, 6, 5)[:n]
        x = lambda *shape, **kw: _t(shape, dtype, device, **kw)
        yield SampleInput((x(2, 3, *s), 3))  # unequal cells
        yield SampleInput((x(3, *s), 1))  # unbatched, global pooling
        yield SampleInput((x(2, 3, *s, noncontiguous=True), (4, 3, 5)[:n]))
        yield SampleInput((x(1, 2, *s), (7, 2, 5)[:n]))  # equal cells and identity
        yield SampleInput((x(1, 2, *s), (9, 8, 6)[:n]))  # more cells than inputs: overlapping
        yield SampleInput((x(0, 3, *s), 2))
        # the input's own size: pooling is the identity (a small image's last stage ends on 1x1)
        yield SampleInput((x(2, 3, *s), s))
        yield SampleInput((x(2, 3, *(1,) * n), 1))
        if n > 1:
            yield SampleInput((x(1, 2, *s), (None,) * n))
            yield SampleInput((x(1, 2, *s), (None,) * (n - 1) + (2,)))
            yield SampleInput((x(1, 2, *s), (0,) + (2,) * (n - 1)))
        if dtype.is_floating_point:
            t = x(1, 2, *s)
            t.view(-1)[5] = float("nan")
            yield SampleInput((t, 2))

    return samples


def _adaptive_errors(n: int):
    def errors(device):
        f = torch.float32
        s = (5,) * n
        x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
        yield ErrorInput(SampleInput((x(1, 2, 0, *s[1:]), 2)), RuntimeError, "non-zero size for non-batch dimensions")
        yield ErrorInput(SampleInput((x(1, 2, *s), (2,) * (n + 1))), RuntimeError, f"output_size must be {n}")
        yield ErrorInput(SampleInput((x(1, 2, *s, dtype=torch.int64), 2)), NotImplementedError, "not implemented")

    return errors


opinfos += [
    OpInfo(fn.__name__, fn, _adaptive_samples(n), FLOATING, error_inputs=_adaptive_errors(n), symbol=f"torch.nn.functional.{fn.__name__}", tolerances=_CONV_TOL)
    for n, fn in ((1, F.adaptive_avg_pool1d), (2, F.adaptive_avg_pool2d), (3, F.adaptive_avg_pool3d))
]
opinfos += [
    OpInfo(f"adaptive_max_pool{n}d", fn, _adaptive_samples(n), FLOATING, error_inputs=_adaptive_errors(n), symbol=f"torch.nn.functional.adaptive_max_pool{n}d")
    for n, fn in ((1, F.adaptive_max_pool1d), (2, F.adaptive_max_pool2d), (3, F.adaptive_max_pool3d))
]
opinfos += [
    OpInfo(f"max_pool{n}d_return_indices", lambda x, k, _fn=fn, **kw: _fn(x, k, return_indices=True, **kw), _max_pool_samples(n), FLOATING, symbol=f"torch.nn.functional.max_pool{n}d_with_indices")
    for n, fn in ((1, F.max_pool1d), (2, F.max_pool2d), (3, F.max_pool3d))
]
opinfos += [
    OpInfo(f"adaptive_max_pool{n}d_return_indices", lambda x, size, _fn=fn: _fn(x, size, return_indices=True), _adaptive_samples(n), FLOATING, symbol=f"torch.nn.functional.adaptive_max_pool{n}d_with_indices")
    for n, fn in ((1, F.adaptive_max_pool1d), (2, F.adaptive_max_pool2d), (3, F.adaptive_max_pool3d))
]
