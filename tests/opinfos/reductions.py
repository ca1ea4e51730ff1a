"""OpInfos for reductions, scans, selection (topk, sort) and norms."""
from __future__ import annotations

import math

import torch

from opinfos import ALL_TYPES, FLOATING, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor


def _t(shape, dtype, device, **kwargs):
    return make_tensor(shape, dtype, device, **kwargs)


def _reduction_samples(*, full: bool = True, multi: bool = True, empty: bool = True, extra_kwargs: tuple[dict, ...] = (), over_no_dims: bool = False):
    """dim=None/int/negative/tuple, keepdim, 0-d, empty and non-contiguous inputs (and an empty dim list)."""

    def samples(dtype, device):
        if full:
            yield SampleInput((_t((4, 3), dtype, device),))
            yield SampleInput((_t((), dtype, device),))
        yield SampleInput((_t((4, 3), dtype, device), 1))
        yield SampleInput((_t((2, 3, 4), dtype, device), -1), {"keepdim": True})
        yield SampleInput((_t((), dtype, device), 0))
        yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), 0))
        if multi:
            yield SampleInput((_t((2, 3, 4), dtype, device), (0, 2)))
            yield SampleInput((_t((2, 3, 4), dtype, device), (-1, 0)), {"keepdim": True})
        if empty:
            yield SampleInput((_t((2, 0, 3), dtype, device), 1))
            yield SampleInput((_t((2, 0, 3), dtype, device), 2), {"keepdim": True})
        for kw in extra_kwargs:
            yield SampleInput((_t((3, 5), dtype, device), 1), dict(kw))
        if over_no_dims:
            yield SampleInput((_t((3, 5), dtype, device), ()))  # an empty dim list: torch reduces every dim
            yield SampleInput((_t((3, 5), dtype, device), []), {"keepdim": True})

    return samples


def _dim_errors(*, multi: bool = True):
    def errors(device):
        x = _t((2, 3), torch.float32, device)
        yield ErrorInput(SampleInput((x, 2)), IndexError, "Dimension out of range")
        if multi:
            yield ErrorInput(SampleInput((x, (0, -2))), RuntimeError, "appears multiple times")

    return errors


def _count_nonzero_samples(dtype, device):
    yield SampleInput((_t((4, 3), dtype, device),))
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((4, 3), dtype, device, low=-1, high=1),), {"dim": 1})
    yield SampleInput((_t((2, 3, 4), dtype, device), (0, -1)))
    yield SampleInput((_t((2, 0, 3), dtype, device), 1))
    yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), 0))


def _with_nans(dtype, device):
    for shape, dim in (((4, 5), None), ((4, 5), 1), ((2, 3, 4), (0, 2)), ((0, 3), 0)):
        x = _t(shape, dtype, device)
        if x.numel():
            x.view(-1)[::3] = math.nan
        yield SampleInput((x,) if dim is None else (x, dim))


def _mean_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.int64, device),)), RuntimeError, "could not infer output dtype. Input dtype")
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device),), {"dtype": torch.int64}), RuntimeError, "Optional dtype must be")
    yield from _dim_errors()(device)


def _extremum_errors(device):
    empty = _t((2, 0), torch.float32, device)
    yield ErrorInput(SampleInput((empty, 1)), IndexError, "Expected reduction dim 1 to have non-zero size")
    yield ErrorInput(SampleInput((empty,)), RuntimeError, "Expected reduction dim to be specified")
    yield from _dim_errors()(device)


def _max_samples(dtype, device):
    yield SampleInput((_t((4, 3), dtype, device),))
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((4, 3), dtype, device), 1))
    yield SampleInput((_t((2, 3, 4), dtype, device), -2, True))
    yield SampleInput((_t((2, 3, 4), dtype, device),), {"dim": 0, "keepdim": True})
    yield SampleInput((_t((), dtype, device), 0))
    yield SampleInput((_t((2, 0, 3), dtype, device), 2))
    yield SampleInput((_t((4, 3), dtype, device), _t((3,), dtype, device)))
    yield SampleInput((_t((4, 1), dtype, device), _t((2, 1, 3), dtype, device)))


def _max_errors(device):
    empty = _t((0, 2), torch.float32, device)
    yield ErrorInput(SampleInput((empty,)), RuntimeError, "Expected reduction dim to be specified")
    yield ErrorInput(SampleInput((empty, 0)), IndexError, "Expected reduction dim 0 to have non-zero size")
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 3)), IndexError, "Dimension out of range")


def _arg_samples(dtype, device):
    yield SampleInput((_t((4, 3), dtype, device),))
    yield SampleInput((_t((4, 3), dtype, device),), {"keepdim": True})
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((), dtype, device), 0, True))
    yield SampleInput((_t((4, 3), dtype, device), 1))
    yield SampleInput((_t((2, 3, 4), dtype, device), -1, True))
    yield SampleInput((_t((2, 0, 3), dtype, device), 2))
    yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), 0))


def _arg_errors(device):
    yield ErrorInput(SampleInput((_t((0, 2), torch.float32, device),)), IndexError, "Expected reduction dim to be specified")
    yield ErrorInput(SampleInput((_t((0, 2), torch.float32, device), 0)), IndexError, "Expected reduction dim 0 to have non-zero size")


def _aminmax_samples(dtype, device):
    yield SampleInput((_t((4, 3), dtype, device),))
    yield SampleInput((_t((), dtype, device),))
    yield SampleInput((_t((4, 3), dtype, device),), {"dim": 1})
    yield SampleInput((_t((2, 3, 4), dtype, device),), {"dim": -1, "keepdim": True})
    yield SampleInput((_t((2, 0, 3), dtype, device),), {"dim": 2})


def _var_samples(dtype, device):
    yield SampleInput((_t((4, 5), dtype, device),))
    yield SampleInput((_t((4, 5), dtype, device), False))
    yield SampleInput((_t((4, 5), dtype, device), 1))
    yield SampleInput((_t((4, 5), dtype, device), 1, False, True))
    yield SampleInput((_t((2, 3, 4), dtype, device), (0, -1)), {"keepdim": True})
    yield SampleInput((_t((2, 3, 4), dtype, device),), {"dim": 1, "correction": 0})
    yield SampleInput((_t((3, 6), dtype, device),), {"dim": 1, "correction": 2})
    yield SampleInput((_t((3, 6), dtype, device, noncontiguous=True), 0), {"unbiased": False})
    yield SampleInput((_t((), dtype, device),), {"correction": 0})


def _var_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.int64, device),)), RuntimeError, "only support floating point and complex")
    # torch's argument parser rejects this before the op runs, while tracing too
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 0), {"unbiased": True, "correction": 1}), TypeError, "invalid combination of arguments")
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 2)), IndexError, "Dimension out of range")


def _logsumexp_samples(dtype, device):
    yield from _reduction_samples(full=False)(dtype, device)
    if dtype.is_floating_point:
        inf = math.inf
        yield SampleInput((torch.tensor([[-inf, -inf], [1.0, inf], [-inf, 2.0]], dtype=dtype, device=device), 1))
        yield SampleInput((_t((3, 4), dtype, device, low=50, high=80), 0))


def _scan_samples(dtype, device):
    yield SampleInput((_t((4, 3), dtype, device), 1))
    yield SampleInput((_t((2, 3, 4), dtype, device), -3))
    yield SampleInput((_t((), dtype, device), 0))
    yield SampleInput((_t((0, 3), dtype, device), 0))
    yield SampleInput((_t((5,), dtype, device, low=-2, high=2), 0))
    yield SampleInput((_t((4, 6), dtype, device, noncontiguous=True), 1), {"dtype": torch.float64})


def _scan_errors(device):
    yield ErrorInput(SampleInput((_t((2, 3), torch.float32, device), 2)), IndexError, "Dimension out of range")


_SUM_KWARGS = ({"dtype": torch.float64}, {"keepdim": True, "dtype": torch.int64})

opinfos = [
    OpInfo("sum", torch.sum, _reduction_samples(extra_kwargs=_SUM_KWARGS, over_no_dims=True), ALL_TYPES, error_inputs=_dim_errors(), symbol="torch.sum"),
    OpInfo("sum_method", lambda x, *a, **k: x.sum(*a, **k), _reduction_samples(empty=False), NUMERIC, symbol="torch.sum"),
    OpInfo("nansum", torch.nansum, _with_nans, FLOATING, symbol="torch.nansum"),
    OpInfo("nansum_int", torch.nansum, _reduction_samples(multi=False), (torch.int64,), symbol="torch.nansum"),
    OpInfo("mean", torch.mean, _reduction_samples(extra_kwargs=({"dtype": torch.float64},), over_no_dims=True), FLOATING, error_inputs=_mean_errors, symbol="torch.mean"),
    OpInfo("mean_int_dtype", lambda x, *a, **k: torch.mean(x, *a, dtype=torch.float32, **k), _reduction_samples(empty=False), (torch.int64,), symbol="torch.mean"),
    OpInfo("nanmean", torch.nanmean, _with_nans, FLOATING, symbol="torch.nanmean"),
    OpInfo("prod", torch.prod, _reduction_samples(multi=False, extra_kwargs=({"dtype": torch.float64},)), ALL_TYPES, error_inputs=_dim_errors(multi=False), symbol="torch.prod"),
    OpInfo("amax", torch.amax, _reduction_samples(full=False, empty=False), ALL_TYPES, error_inputs=_extremum_errors, symbol="torch.amax"),
    OpInfo("amax_all", lambda x: torch.amax(x), lambda dt, dev: (SampleInput((_t(s, dt, dev),)) for s in ((4, 3), (), (2, 3, 1))), NUMERIC, symbol="torch.amax"),
    OpInfo("amin", torch.amin, _reduction_samples(full=False, empty=False), ALL_TYPES, error_inputs=_extremum_errors, symbol="torch.amin"),
    OpInfo("max", torch.max, _max_samples, NUMERIC, error_inputs=_max_errors, symbol="torch.max"),
    OpInfo("max_other_kw", lambda a, b: torch.max(a, other=b), lambda dt, dev: [SampleInput((_t((3, 4), dt, dev), _t((4,), dt, dev)))], NUMERIC, symbol="torch.max"),
    OpInfo("min", torch.min, _max_samples, NUMERIC, error_inputs=_max_errors, symbol="torch.min"),
    OpInfo("min_method", lambda x, *a, **k: x.min(*a, **k), _max_samples, NUMERIC, symbol="torch.min"),
    OpInfo("argmax", torch.argmax, _arg_samples, NUMERIC, error_inputs=_arg_errors, symbol="torch.argmax"),
    OpInfo("argmin", torch.argmin, _arg_samples, NUMERIC, error_inputs=_arg_errors, symbol="torch.argmin"),
    OpInfo("aminmax", torch.aminmax, _aminmax_samples, NUMERIC, symbol="torch.aminmax"),
    OpInfo("any", torch.any, _reduction_samples(), ALL_TYPES, error_inputs=_dim_errors(), symbol="torch.any"),
    OpInfo("all", torch.all, _reduction_samples(), ALL_TYPES, error_inputs=_dim_errors(), symbol="torch.all"),
    OpInfo("count_nonzero", torch.count_nonzero, _count_nonzero_samples, ALL_TYPES, error_inputs=_dim_errors(), symbol="torch.count_nonzero"),
    OpInfo("var", torch.var, _var_samples, FLOATING, error_inputs=_var_errors, symbol="torch.var"),
    OpInfo("std", torch.std, _var_samples, FLOATING, error_inputs=_var_errors, symbol="torch.std"),
    OpInfo("var_mean", torch.var_mean, _var_samples, FLOATING, symbol="torch.var_mean"),
    OpInfo("std_mean", torch.std_mean, _var_samples, FLOATING, symbol="torch.std_mean"),
    OpInfo("logsumexp", torch.logsumexp, _logsumexp_samples, NUMERIC, error_inputs=_dim_errors(), symbol="torch.logsumexp"),
    OpInfo("cumsum", torch.cumsum, _scan_samples, ALL_TYPES, error_inputs=_scan_errors, symbol="torch.cumsum"),
    OpInfo("cumprod", torch.cumprod, _scan_samples, ALL_TYPES, error_inputs=_scan_errors, symbol="torch.cumprod"),
]
