"""OpInfos for unary elementwise ops (collected by opinfos.elementwise)."""
from __future__ import annotations

import math

import torch

from opinfos import ALL_TYPES, FLOATING, INTEGRAL, NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor

_SHAPES = ((), (5,), (4, 3), (2, 0, 3))
_SPECIAL = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.5, 0.5, -0.5)


def _int_range(low, high):
    """The integers in [low, high], or the default range when there are too few of them."""
    low = None if low is None else math.ceil(low)
    high = None if high is None else math.floor(high)
    if low is not None and high is not None and high - low < 2:
        return None, None
    return low, high


def _unary_samples(low=None, high=None, special=True, **kwargs):
    def samples(dtype, device):
        lo, hi = low, high
        if dtype == torch.bool:
            lo = hi = None
        elif not dtype.is_floating_point:
            lo, hi = _int_range(lo, hi)
        for shape in _SHAPES:
            yield SampleInput((make_tensor(shape, dtype, device, low=lo, high=hi),), dict(kwargs))
        yield SampleInput((make_tensor((4, 6), dtype, device, low=lo, high=hi, noncontiguous=True),), dict(kwargs))
        if special and dtype.is_floating_point:
            yield SampleInput((torch.tensor(_SPECIAL, dtype=dtype, device=device),), dict(kwargs))

    return samples


def _unary_errors(*dtype_errors, tensor_required=True):
    """A non-tensor input, then each (dtype, exception, message regex) torch refuses."""
    if not dtype_errors and not tensor_required:
        return None

    def errors(device):
        if tensor_required:
            yield ErrorInput(SampleInput((2.0,)), TypeError, "must be Tensor")
        for dtype, exc, match in dtype_errors:
            yield ErrorInput(SampleInput((make_tensor((3,), dtype, device),)), exc, match)

    return errors


def _u(name, op=None, dtypes=ALL_TYPES, low=None, high=None, *, errors=(), symbol=None, special=True, tensor_required=True, **kw):
    return OpInfo(
        name,
        op or getattr(torch, name),
        _unary_samples(low, high, special),
        dtypes,
        error_inputs=_unary_errors(*errors, tensor_required=tensor_required),
        symbol=symbol or f"torch.{name}",
        **kw,
    )


_NO_BOOL = ((torch.bool, NotImplementedError, "not implemented for torch.bool"),)
_FLOAT_ONLY = ((torch.int64, NotImplementedError, "not implemented for torch.int64"),)
_BF16_LOOSE = {torch.bfloat16: (3e-2, 3e-2)}

opinfos = [
    _u("abs", dtypes=NUMERIC, errors=_NO_BOOL),
    _u("absolute", dtypes=NUMERIC, symbol="torch.abs"),
    _u("__abs__", lambda a: abs(a), NUMERIC, symbol="torch.abs", tensor_required=False),
    _u("neg", dtypes=NUMERIC, errors=((torch.bool, RuntimeError, "Negation, the `-` operator, on a bool tensor"),)),
    _u("__neg__", lambda a: -a, NUMERIC, symbol="torch.neg", tensor_required=False),
    _u("positive", dtypes=NUMERIC, errors=((torch.bool, RuntimeError, r"The `\+` operator, on a bool tensor"),)),
    _u("__pos__", lambda a: +a, NUMERIC, symbol="torch.positive", tensor_required=False),
    _u("sign"),
    _u("sgn"),
    _u("signbit"),
    _u("exp", low=-5, high=5),
    _u("Tensor.exp", lambda a: a.exp(), low=-5, high=5, symbol="torch.exp", tensor_required=False),
    _u("expm1", low=-5, high=5),
    _u("special.expm1", torch.special.expm1, low=-5, high=5, symbol="torch.expm1"),
    _u("exp2", low=-5, high=5),
    _u("log", low=0.1),
    _u("log1p", low=-0.9),
    _u("log2", low=0.1),
    _u("log10", low=0.1),
    _u("sqrt", low=0),
    _u("rsqrt", low=0.1),
    _u("reciprocal", low=0.5),
    _u("square"),
    _u("sin"),
    _u("cos"),
    _u("tan", low=-1.2, high=1.2),
    _u("asin", low=-0.95, high=0.95),
    _u("arcsin", low=-0.95, high=0.95, symbol="torch.asin"),
    _u("acos", low=-0.95, high=0.95),
    _u("atan"),
    _u("sinh", low=-5, high=5),
    _u("cosh", low=-5, high=5),
    _u("tanh"),
    _u("F.tanh", torch.nn.functional.tanh, symbol="torch.tanh", tensor_required=False),
    _u("asinh"),
    _u("acosh", low=1.1),
    _u("arccosh", low=1.1, symbol="torch.acosh"),
    _u("atanh", low=-0.95, high=0.95),
    _u("erf"),
    _u("special.erf", torch.special.erf, symbol="torch.erf"),
    _u("erfc"),
    _u("erfinv", low=-0.95, high=0.95, tolerances=_BF16_LOOSE),
    _u("lgamma", low=0.1, tolerances=_BF16_LOOSE),
    _u("special.gammaln", torch.special.gammaln, low=0.1, symbol="torch.lgamma", tolerances=_BF16_LOOSE),
    _u("digamma", low=0.1, tolerances=_BF16_LOOSE),
    _u("special.psi", torch.special.psi, low=0.1, symbol="torch.digamma", tolerances=_BF16_LOOSE),
    _u("sigmoid"),
    _u("F.sigmoid", torch.nn.functional.sigmoid, symbol="torch.sigmoid", tensor_required=False),
    _u("special.expit", torch.special.expit, symbol="torch.sigmoid"),
    _u("logit", low=0.05, high=0.95),
    _u("logit_eps", lambda a: torch.logit(a, eps=0.2), symbol="torch.logit", tensor_required=False),
    _u("special.logit", lambda a: torch.special.logit(a, 0.1), symbol="torch.logit", tensor_required=False),
    _u("floor", dtypes=NUMERIC, errors=_NO_BOOL),
    _u("ceil", dtypes=NUMERIC, errors=_NO_BOOL),
    _u("trunc", dtypes=NUMERIC, errors=_NO_BOOL),
    _u("fix", dtypes=NUMERIC, symbol="torch.trunc"),
    _u("round", dtypes=NUMERIC, errors=_NO_BOOL),
    OpInfo(
        "round_decimals",
        lambda a, decimals: torch.round(a, decimals=decimals),
        lambda dtype, device: [SampleInput((make_tensor((4, 5), dtype, device, low=-50, high=50), d)) for d in (1, 2, -1)],
        FLOATING,
        error_inputs=lambda device: [
            ErrorInput(SampleInput((make_tensor((3,), torch.int64, device), 1)), NotImplementedError, "with decimals != 0"),
        ],
        symbol="torch.round",
    ),
    _u("frac", dtypes=FLOATING, errors=_FLOAT_ONLY),
    _u("isfinite"),
    _u("isnan"),
    _u("isinf"),
    _u("isposinf"),
    _u("isneginf"),
    _u("isreal"),
    _u("nan_to_num"),
    _u("nan_to_num_args", lambda a: torch.nan_to_num(a, nan=1.5, posinf=100.0, neginf=-7), symbol="torch.nan_to_num", tensor_required=False),
    _u("logical_not"),
    _u("bitwise_not", dtypes=INTEGRAL, errors=((torch.float32, NotImplementedError, "not implemented for torch.float32"),)),
    _u("__invert__", lambda a: ~a, INTEGRAL, errors=((torch.float32, TypeError, "only implemented on integer and Boolean"),), symbol="torch.Tensor.__invert__", tensor_required=False),
    # in-place forms, on a copy so the sample stays as it was for the reference
    _u("Tensor.exp_", lambda a: a.clone().exp_(), FLOATING, symbol="torch.exp", tensor_required=False),
    _u("Tensor.sigmoid_", lambda a: a.clone().sigmoid_(), FLOATING, symbol="torch.sigmoid", tensor_required=False),
    _u(
        "Tensor.sqrt_",
        lambda a: a.clone().sqrt_(),
        FLOATING,
        low=0,
        errors=((torch.int64, RuntimeError, "can't be cast to the desired output type"),),
        symbol="torch.sqrt",
        tensor_required=False,
    ),
    _u("Tensor.abs_", lambda a: a.clone().abs_(), NUMERIC, symbol="torch.abs", tensor_required=False),
    _u("Tensor.round_", lambda a: a.clone().round_(decimals=1), FLOATING, symbol="torch.round", tensor_required=False),
    _u("Tensor.nan_to_num_", lambda a: a.clone().nan_to_num_(), ALL_TYPES, symbol="torch.nan_to_num", tensor_required=False),
]
