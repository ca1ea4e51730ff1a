"""OpInfos for elementwise ops: binary and ternary here, unary in opinfos.elementwise_unary."""
from __future__ import annotations

import operator

import torch

from opinfos import ALL_TYPES, FLOATING, INTEGRAL, NUMERIC, Directive, ErrorInput, OpInfo, SampleInput, make_tensor

_SHAPES = ((), (5,), (4, 3), (2, 0, 3))
_BROADCASTS = (((4, 3), (3,)), ((4, 1), (1, 3)), ((), (2, 3)), ((2, 1, 3), (4, 1)))
_INT = (torch.int64,)


def _binary_samples(rhs_low=None, *, numbers=(2, 1.5), number_first=False, high=None, zero_d=torch.float64):
    """Same shapes, broadcasts, a non-contiguous pair, a 0-d tensor of another dtype, numbers."""

    def samples(dtype, device):
        t = lambda shape, low=None, **kw: make_tensor(shape, dtype, device, low=low, high=high, **kw)  # noqa: E731
        for shape in _SHAPES:
            yield SampleInput((t(shape), t(shape, rhs_low)))
        for a, b in _BROADCASTS:
            yield SampleInput((t(a), t(b, rhs_low)))
        yield SampleInput((t((4, 6), noncontiguous=True), t((4, 6), rhs_low, noncontiguous=True)))
        yield SampleInput((t((3, 2)), make_tensor((), zero_d, device, low=rhs_low, high=high)))
        for n in numbers:
            yield SampleInput((t((3, 2)), n))
            if number_first:
                yield SampleInput((n, t((3, 2), rhs_low)))

    return samples


def _tensors_only_samples(rhs_low=None):
    return _binary_samples(rhs_low, numbers=())


def _errors(*extra, broadcast=True, dtype=torch.float32):
    """Shapes that do not broadcast, then `extra` (sample args, exception, regex)."""
    if not extra and not broadcast:
        return None

    def errors(device):
        if broadcast:
            yield ErrorInput(SampleInput((make_tensor((4, 3), dtype, device), make_tensor((2, 3), dtype, device))), RuntimeError, "must match the size")
        for args, exc, match in extra:
            yield ErrorInput(SampleInput(tuple(a(device) if callable(a) else a for a in args)), exc, match)

    return errors


def _t(dtype, shape=(3,)):
    return lambda device: make_tensor(shape, dtype, device)


_BOOL_SUB = ((_t(torch.bool), _t(torch.bool)), RuntimeError, "with two bool tensors is not supported")


def _b(name, op, samples, dtypes, *errors, symbol=None, broadcast=True, **kw):
    error_dtype = torch.float32 if torch.float32 in dtypes or not dtypes else dtypes[0]
    return OpInfo(name, op, samples, dtypes, error_inputs=_errors(*errors, broadcast=broadcast, dtype=error_dtype), symbol=symbol, **kw)


def _clamp_samples(dtype, device):
    t = lambda shape, low=None, high=None: make_tensor(shape, dtype, device, low=low, high=high)  # noqa: E731
    yield SampleInput((t((4, 3)), -2, 3))
    yield SampleInput((t((4, 3)),), {"min": 0.5})
    yield SampleInput((t((4, 3)),), {"max": -1})
    yield SampleInput((t(()), 1, -1))  # min > max: every element becomes max
    yield SampleInput((t((2, 0)), 0, 1))
    yield SampleInput((t((4, 3)), t((3,), -9, 0), t((4, 1), 0, 9)))
    yield SampleInput((t((4, 3)),), {"min": t((4, 3))})
    if dtype.is_floating_point:
        yield SampleInput((torch.tensor([float("nan"), 5.0, -5.0], dtype=dtype, device=device), -1.0, 1.0))


def _where_samples(dtype, device):
    cond = lambda shape: make_tensor(shape, torch.bool, device)  # noqa: E731
    t = lambda shape: make_tensor(shape, dtype, device)  # noqa: E731
    yield SampleInput((cond((4, 3)), t((4, 3)), t((4, 3))))
    yield SampleInput((cond((4, 1)), t((3,)), t((1, 3))))
    yield SampleInput((cond(()), t((2, 3)), t(())))
    yield SampleInput((cond((2, 0)), t((2, 0)), t((2, 0))))
    yield SampleInput((cond((3, 2)), t((3, 2)), 2))
    yield SampleInput((cond((3, 2)), 1.5, t((3, 2))))
    yield SampleInput((cond((3, 2)), t((3, 2)), make_tensor((), torch.float64, device)))
    yield SampleInput((cond((3, 2)), 1.0, 0.0))
    yield SampleInput((cond((3, 2)), 1, 0))


def _where_errors(device):
    x = make_tensor((3,), torch.float32, device)
    yield ErrorInput(SampleInput((x, x, x)), RuntimeError, "where expected condition to be a boolean tensor")
    yield ErrorInput(SampleInput((make_tensor((4,), torch.bool, device), x, x)), RuntimeError, "must match the size")
    yield ErrorInput(SampleInput((make_tensor((3,), torch.bool, device), x, "a")), TypeError, "where")


def _lerp_samples(dtype, device):
    t = lambda shape: make_tensor(shape, dtype, device)  # noqa: E731
    w = lambda shape: make_tensor(shape, dtype, device, low=-0.5, high=1.5)  # noqa: E731
    for weight in (0.3, 0.75, -0.2, 1.0):
        yield SampleInput((t((4, 3)), t((4, 3)), weight))
    yield SampleInput((t((4, 3)), t((3,)), w((4, 1))))
    yield SampleInput((t(()), t(()), w(())))
    yield SampleInput((t((2, 0)), t((2, 0)), 0.5))
    yield SampleInput((t((4, 6)), make_tensor((4, 6), dtype, device, noncontiguous=True), w((4, 6))))


def _lerp_errors(device):
    f, d = make_tensor((3,), torch.float32, device), make_tensor((3,), torch.float64, device)
    yield ErrorInput(SampleInput((f, d, 0.5)), RuntimeError, "expected dtype torch.float32 for `end`")
    yield ErrorInput(SampleInput((f, f, d)), RuntimeError, "expected dtype torch.float32 for `weight`")
    yield ErrorInput(SampleInput((make_tensor((3,), torch.int64, device), make_tensor((3,), torch.int64, device), 1)), NotImplementedError, "lerp")


def _addc_samples(rhs_low=None):
    def samples(dtype, device):
        t = lambda shape, low=None: make_tensor(shape, dtype, device, low=low)  # noqa: E731
        yield SampleInput((t((4, 3)), t((4, 3)), t((4, 3), rhs_low)))
        yield SampleInput((t((4, 3)), t((3,)), t((4, 1), rhs_low)), {"value": 2})
        yield SampleInput((t(()), t((2, 3)), t((), rhs_low)), {"value": -0.5})
        yield SampleInput((t((2, 0)), t((2, 0)), t((2, 0), rhs_low)))
        yield SampleInput((t((3,)), make_tensor((3,), torch.float64, device), t((3,), rhs_low)))

    return samples


def _inplace(method):
    """`a.<method>(b)` on a copy of `a`, so the sample stays as it was for the reference."""
    return lambda a, *args, **kwargs: getattr(a.clone(), method)(*args, **kwargs)


def _same_shape_samples(rhs_low=None, numbers=(2,)):
    # in-place ops cannot broadcast their first operand
    def samples(dtype, device):
        t = lambda shape, low=None: make_tensor(shape, dtype, device, low=low)  # noqa: E731
        yield SampleInput((t((4, 3)), t((4, 3), rhs_low)))
        yield SampleInput((t((4, 3)), t((3,), rhs_low)))
        yield SampleInput((t(()), t((), rhs_low)))
        for n in numbers:
            yield SampleInput((t((2, 3)), n))

    return samples


_INPLACE_ERRORS = (
    ((_t(torch.int64), 1.5), RuntimeError, "can't be cast to the desired output type"),
    ((_t(torch.float32, (3,)), _t(torch.float32, (2, 3))), RuntimeError, "doesn't match the broadcast shape"),
)
_NEG_POW = ((_t(torch.int64), -1), RuntimeError, "Integers to negative integer powers are not allowed")
_BITWISE_FLOAT = ((_t(torch.float32), _t(torch.float32)), NotImplementedError, "not implemented for torch.float32")
_TENSOR_OTHER = ((_t(torch.float32), 2.0), TypeError, "must be Tensor")

_F, _A, _N = FLOATING, ALL_TYPES, NUMERIC
opinfos = [
    # arithmetic
    _b("add", torch.add, _binary_samples(number_first=True), _A, symbol="torch.add"),
    _b("add_alpha", lambda a, b, alpha=2: torch.add(a, b, alpha=alpha), _binary_samples(), _N, ((_t(torch.int64), _t(torch.int64), 0.5), RuntimeError, "alpha must not be a floating point"), ((_t(torch.float32), _t(torch.float32), True), RuntimeError, "Boolean alpha only supported"), symbol="torch.add"),
    _b("sub", torch.sub, _binary_samples(number_first=True), _N, _BOOL_SUB, ((_t(torch.bool), 1), RuntimeError, "with a bool tensor is not supported"), symbol="torch.sub"),
    # torch's kernel fuses the multiply-add, which can differ by an ulp under cancellation
    _b("sub_alpha", lambda a, b: torch.sub(a, b, alpha=-3), _binary_samples(), _N, symbol="torch.sub", tolerances={torch.bfloat16: (2e-2, 3e-2)}),
    _b("rsub", lambda a, b: torch.rsub(a, b, alpha=2), _binary_samples(), _N, symbol="torch.rsub"),
    _b("rsub_operator", lambda a, b: 2.5 - a - b, _binary_samples(), _F, symbol="torch.rsub"),
    _b("radd_rmul", lambda a, b: 2 + a * 3 + 1.5 * b, _binary_samples(), _N, symbol="torch.Tensor.__radd__"),
    _b("mul", torch.mul, _binary_samples(number_first=True), _A, symbol="torch.mul"),
    _b("div", torch.div, _binary_samples(rhs_low=0.5, number_first=True), _A, symbol="torch.div"),
    _b("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), _binary_samples(rhs_low=0.5), _N, symbol="torch.div"),
    _b("div_rounding_mode", lambda a, b, mode: torch.div(a, b, rounding_mode=mode), _binary_samples(), (), ((_t(torch.float32), _t(torch.float32), "round"), RuntimeError, "rounding_mode to be one of None, 'trunc', or 'floor'"), broadcast=False, symbol="torch.div"),
    _b("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), _binary_samples(rhs_low=0.5), _N, symbol="torch.div"),
    _b("true_divide", torch.true_divide, _binary_samples(rhs_low=0.5), _A, symbol="torch.true_divide"),
    _b("floor_divide", torch.floor_divide, _binary_samples(rhs_low=0.5), _N, ((_t(torch.bool), _t(torch.bool)), NotImplementedError, "not implemented for torch.bool"), symbol="torch.floor_divide"),
    _b("rtruediv_rfloordiv", lambda a, b: 3 / b + 7 // b, _binary_samples(rhs_low=0.5), _N, broadcast=False, symbol="torch.Tensor.__rtruediv__"),
    _b("pow", torch.pow, _binary_samples(number_first=True, high=3), _N, _NEG_POW, ((_t(torch.bool), _t(torch.bool)), NotImplementedError, "not implemented for torch.bool"), symbol="torch.pow", tolerances={torch.float32: (1e-5, 1e-5)}),
    _b("__pow__", lambda a, b: a**b, _binary_samples(rhs_low=0, high=3), _N, symbol="torch.pow"),
    _b("__rpow__", lambda a, b: 2**b, _binary_samples(rhs_low=0, high=3), _A, broadcast=False, symbol="torch.Tensor.__rpow__"),
    _b("float_power", torch.float_power, _binary_samples(number_first=True, high=3), _A, symbol="torch.float_power"),
    _b("remainder", torch.remainder, _binary_samples(rhs_low=0.5, number_first=True), _N, symbol="torch.remainder"),
    _b("__mod__", lambda a, b: a % b + 5 % b, _binary_samples(rhs_low=0.5), _N, symbol="torch.Tensor.__rmod__"),
    _b("fmod", torch.fmod, _binary_samples(rhs_low=0.5), _N, ((_t(torch.bool), _t(torch.bool)), NotImplementedError, "fmod"), symbol="torch.fmod"),
    _b("atan2", torch.atan2, _tensors_only_samples(), _A, _TENSOR_OTHER, symbol="torch.atan2"),
    _b("arctan2", torch.arctan2, _tensors_only_samples(), _F, symbol="torch.atan2"),
    _b("hypot", torch.hypot, _tensors_only_samples(), _F, ((_t(torch.int64), _t(torch.int64)), NotImplementedError, "hypot"), symbol="torch.hypot"),
    _b("copysign", torch.copysign, _binary_samples(numbers=(-2, 1.5)), _A, symbol="torch.copysign"),
    _b("nextafter", torch.nextafter, _tensors_only_samples(), _F, ((_t(torch.int64), _t(torch.int64)), NotImplementedError, "nextafter"), symbol="torch.nextafter"),
    _b("maximum", torch.maximum, _tensors_only_samples(), _A, _TENSOR_OTHER, symbol="torch.maximum"),
    _b("minimum", torch.minimum, _tensors_only_samples(), _A, symbol="torch.minimum"),
    _b("fmax", lambda a, b: torch.fmax(a, torch.where(b > 0, b, float("nan")) if b.is_floating_point() else b), _tensors_only_samples(), _A, symbol="torch.fmax"),
    _b("fmin", lambda a, b: torch.fmin(torch.where(a > 0, a, float("nan")) if a.is_floating_point() else a, b), _tensors_only_samples(), _A, symbol="torch.fmin"),
    # comparisons
    *[
        _b(name, getattr(torch, name), _binary_samples(), _A, symbol=f"torch.{sym}")
        for name, sym in (("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"), ("not_equal", "ne"), ("less_equal", "le"), ("greater", "gt"))
    ],
    _b("comparison_operators", lambda a, b: ((a == b) & (a != 2)) | (a < b) ^ (a <= 1.5) | (a > b) & (a >= b), _binary_samples(), _A, symbol="torch.Tensor.__rand__"),
    # logical and bitwise
    _b("logical_and", torch.logical_and, _tensors_only_samples(), _A, symbol="torch.logical_and"),
    _b("logical_or", torch.logical_or, _tensors_only_samples(), _A, symbol="torch.logical_or"),
    _b("logical_xor", torch.logical_xor, _tensors_only_samples(), _A, _TENSOR_OTHER, symbol="torch.logical_xor"),
    _b("bitwise_and", torch.bitwise_and, _binary_samples(numbers=(3, True), zero_d=torch.int32), INTEGRAL, _BITWISE_FLOAT, symbol="torch.bitwise_and"),
    _b("bitwise_or", torch.bitwise_or, _binary_samples(numbers=(3, True), zero_d=torch.int32), INTEGRAL, symbol="torch.bitwise_or"),
    _b("bitwise_xor", torch.bitwise_xor, _binary_samples(numbers=(3, True), zero_d=torch.int32), INTEGRAL, symbol="torch.bitwise_xor"),
    _b("bitwise_operators", lambda a, b: (a & b) | (3 & a) ^ (b | 1) ^ (2 ^ a) | (True | b), _binary_samples(numbers=(5,), zero_d=torch.int32), INTEGRAL, symbol="torch.Tensor.__ror__"),
    _b("bitwise_left_shift", torch.bitwise_left_shift, _binary_samples(rhs_low=0, numbers=(3,), high=8, zero_d=torch.int32), _INT, ((_t(torch.bool), _t(torch.bool)), NotImplementedError, "not implemented for torch.bool"), symbol="torch.bitwise_left_shift"),
    _b("bitwise_right_shift", torch.bitwise_right_shift, _binary_samples(rhs_low=0, numbers=(3,), high=8, zero_d=torch.int32), _INT, symbol="torch.bitwise_right_shift"),
    _b("shift_operators", lambda a, b: (a << b) + (a >> 1) + (1 << b) + (256 >> b), _binary_samples(rhs_low=0, numbers=(2,), high=8, zero_d=torch.int32), _INT, symbol="torch.Tensor.__rlshift__"),
    # ternary
    OpInfo("where", torch.where, _where_samples, _A, error_inputs=_where_errors, symbol="torch.where"),
    OpInfo("Tensor.where", lambda c, a, b: a.where(c, b) if isinstance(a, torch.Tensor) else torch.where(c, a, b), _where_samples, _A, symbol="torch.Tensor.where"),
    OpInfo(
        "where_condition_only",
        lambda c: torch.where(c)[0],
        lambda dtype, device: [SampleInput((make_tensor((3,), dtype, device),)), SampleInput((make_tensor((2, 4), dtype, device),))],
        (torch.bool, torch.float32),
        symbol="torch.where",
        # the one-argument form's output shape depends on data: read from the call, and guarded
        directives=(Directive("its output shape depends on data: it runs whole as its torch call, guarded, never as prims", configs=("decomposed",)),),
    ),
    OpInfo(
        "clamp",
        torch.clamp,
        _clamp_samples,
        _N,
        error_inputs=_errors(
            ((_t(torch.float32),), RuntimeError, "At least one of 'min' or 'max' must not be None"),
            ((_t(torch.bool), True, True), NotImplementedError, "not implemented for torch.bool"),
            broadcast=False,
        ),
        symbol="torch.clamp",
    ),
    OpInfo("clip", torch.clip, _clamp_samples, _N, symbol="torch.clamp"),
    OpInfo("clamp_min", torch.clamp_min, _binary_samples(numbers=(0, 0.5)), _N, symbol="torch.clamp_min"),
    OpInfo("clamp_max", torch.clamp_max, _binary_samples(numbers=(0, 0.5)), _N, symbol="torch.clamp_max"),
    OpInfo("lerp", torch.lerp, _lerp_samples, _F, error_inputs=_lerp_errors, symbol="torch.lerp"),
    OpInfo("addcmul", torch.addcmul, _addc_samples(), _N, error_inputs=_errors(((_t(torch.bool), _t(torch.bool), _t(torch.bool)), NotImplementedError, "addcmul"), broadcast=False), symbol="torch.addcmul"),
    OpInfo(
        "addcdiv",
        torch.addcdiv,
        _addc_samples(rhs_low=0.5),
        _F,
        error_inputs=_errors(((_t(torch.int64), _t(torch.int64), _t(torch.int64)), RuntimeError, "Integer division with addcdiv is no longer supported"), broadcast=False),
        symbol="torch.addcdiv",
    ),
    # in-place forms
    _b("Tensor.add_", _inplace("add_"), _same_shape_samples(), _N, *_INPLACE_ERRORS, broadcast=False, symbol="torch.add"),
    _b("Tensor.__iadd__", lambda a, b: operator.iadd(a.clone(), b), _same_shape_samples(), _N, symbol="torch.add"),
    _b("Tensor.sub_", _inplace("sub_"), _same_shape_samples(), _N, symbol="torch.sub"),
    _b("Tensor.mul_", _inplace("mul_"), _same_shape_samples(numbers=(2, 1.5)), _F, symbol="torch.mul"),
    _b("Tensor.__itruediv__", lambda a, b: operator.itruediv(a.clone(), b), _same_shape_samples(0.5), _F, symbol="torch.div"),
    _b("Tensor.pow_", _inplace("pow_"), _same_shape_samples(0), _F, symbol="torch.pow"),
    _b("Tensor.float_power_", _inplace("float_power_"), _same_shape_samples(0), (torch.float64,), ((_t(torch.float32), 2), RuntimeError, "float_power_ has dtype torch.float32"), broadcast=False, symbol="torch.float_power"),
    _b("Tensor.__imod__", lambda a, b: operator.imod(a.clone(), b), _same_shape_samples(0.5), _N, symbol="torch.remainder"),
    _b("Tensor.__ifloordiv__", lambda a, b: operator.ifloordiv(a.clone(), b), _same_shape_samples(0.5), _N, symbol="torch.floor_divide"),
    _b("Tensor.__ipow__", lambda a, b: operator.ipow(a.clone(), b), _same_shape_samples(0), _F, symbol="torch.pow"),
    _b("Tensor.lt_", _inplace("lt_"), _same_shape_samples(), _A, symbol="torch.lt"),
    _b("Tensor.__iand__", lambda a, b: operator.iand(a.clone(), b), _same_shape_samples(numbers=(True,)), INTEGRAL, symbol="torch.bitwise_and"),
    _b("Tensor.logical_or_", _inplace("logical_or_"), _same_shape_samples(numbers=()), _A, symbol="torch.logical_or"),
    _b("Tensor.atan2_", _inplace("atan2_"), _same_shape_samples(numbers=()), _F, symbol="torch.atan2"),
    OpInfo("Tensor.clamp_", _inplace("clamp_"), _clamp_samples, _F, symbol="torch.clamp"),
    OpInfo("Tensor.lerp_", _inplace("lerp_"), lambda dtype, device: list(_lerp_samples(dtype, device))[:4], _F, symbol="torch.lerp"),
    OpInfo("Tensor.addcmul_", _inplace("addcmul_"), lambda dtype, device: list(_addc_samples()(dtype, device))[:2], _F, symbol="torch.addcmul"),
]
