"""OpInfos for nn ops: activations, softmax and its relatives, glu."""
from __future__ import annotations

import torch

from opinfos import FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor

F = torch.nn.functional
_SHAPES = ((), (5,), (4, 3), (2, 0, 3))
_INT_FLOAT = FLOATING + (torch.int64,)


def _unary_samples(low=None, high=None, **kwargs):
    """Each shape (0-d, empty included), a non-contiguous input, and each keyword form."""

    def samples(dtype, device):
        for shape in _SHAPES:
            yield SampleInput((make_tensor(shape, dtype, device, low=low, high=high),))
        yield SampleInput((make_tensor((4, 6), dtype, device, low=low, high=high, noncontiguous=True),))
        for name, values in kwargs.items():
            for v in values:
                yield SampleInput((make_tensor((3, 4), dtype, device, low=low, high=high),), {name: v})

    return samples


def _with_specials(samples, *, infinities=True):
    """Add inputs with NaN, infinities and large values, where formulas tend to go wrong."""

    def gen(dtype, device):
        yield from samples(dtype, device)
        if dtype.is_floating_point:
            values = [float("nan"), 30.0, -30.0, 0.0, 3.0, -3.0] + ([float("inf"), -float("inf")] if infinities else [1.0, -1.0])
            yield SampleInput((torch.tensor(values, dtype=dtype, device=device),))

    return gen


def _int_input(name, exc=NotImplementedError, match="not implemented"):
    def errors(device):
        yield ErrorInput(SampleInput((torch.tensor([1, -2, 3], device=device),)), exc, match)

    return errors


def _bool_input(match):
    def errors(device):
        yield ErrorInput(SampleInput((torch.tensor([True, False], device=device),)), RuntimeError, match)

    return errors


def _activation(name, op, symbol, dtypes=FLOATING, samples=None, errors=None, infinities=True, **kw):
    return OpInfo(name, op, _with_specials(samples or _unary_samples(), infinities=infinities), dtypes, error_inputs=errors or _int_input(name), symbol=symbol, **kw)


# --- softmax family -----------------------------------------------------------------------


# --- per-op samples ---------------------------------------------------------------------------


def _glu_samples(dtype, device):
    yield SampleInput((make_tensor((4,), dtype, device),))
    yield SampleInput((make_tensor((3, 6), dtype, device),))
    yield SampleInput((make_tensor((4, 3), dtype, device), 0))
    yield SampleInput((make_tensor((2, 4, 6), dtype, device, noncontiguous=True),), {"dim": -2})
    yield SampleInput((make_tensor((0, 4), dtype, device),), {"dim": 1})


def _glu_errors(device):
    yield ErrorInput(SampleInput((make_tensor((), torch.float32, device),)), RuntimeError, "does not support scalars")
    yield ErrorInput(SampleInput((make_tensor((3, 5), torch.float32, device),)), RuntimeError, "Halving dimension must be even")
    yield ErrorInput(SampleInput((make_tensor((4, 2), torch.float32, device), 2)), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput((torch.tensor([1, 2], device=device),)), NotImplementedError, "floating point")


def _gelu_errors(device):
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device),), {"approximate": "erf"}), RuntimeError, "none or tanh")
    yield from _int_input("gelu")(device)


def _hardtanh_errors(device):
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device), 2.0, 1.0)), ValueError, "min_val cannot be greater")
    yield from _bool_input("Bool inputs not supported")(device)


def _threshold_samples(dtype, device):
    yield SampleInput((make_tensor((4, 3), dtype, device), 0.5, -2.0))
    yield SampleInput((make_tensor((), dtype, device), 0, 1))
    yield SampleInput((make_tensor((2, 0), dtype, device), 0, 1))
    yield SampleInput((make_tensor((3, 4), dtype, device, noncontiguous=True),), {"threshold": 1.5, "value": 2.5})


def _threshold_errors(device):
    yield ErrorInput(SampleInput((torch.tensor([True, False], device=device), 0, 1)), NotImplementedError, "not implemented")


def _celu_errors(device):
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device),), {"alpha": 0.0}), RuntimeError, "alpha cannot be 0")
    yield from _int_input("celu")(device)


def _softshrink_errors(device):
    yield ErrorInput(SampleInput((make_tensor((3,), torch.float32, device),), {"lambd": -1.0}), RuntimeError, "lambda must be greater or equal to 0")
    yield from _int_input("softshrink")(device)


def _inplace(fn, **kwargs):
    """A program that modifies a copy of its input in place and returns both, like eager."""

    def run(a):
        b = a * 1
        c = fn(b, **kwargs)
        return b, c

    return run


def _inplace_input(fn, **kwargs):
    """A program whose in-place op writes into the caller's own tensor."""

    def run(a):
        fn(a, **kwargs)
        return a * 2

    return run


def _fresh_input_samples(dtype, device):
    # each call mutates its input: the reference must get an untouched copy, so the
    # generator yields a new tensor for every use
    for shape in ((4, 3), (), (2, 0)):
        yield SampleInput((make_tensor(shape, dtype, device),))


def _clone_reference(fn):
    def run(a):
        return fn(a.clone())

    return run


opinfos = [
    _activation("relu", torch.relu, "torch.relu", _INT_FLOAT, errors=_bool_input("Boolean inputs not supported for relu")),
    _activation("nn.functional.relu", F.relu, "torch.relu", _INT_FLOAT, errors=_bool_input("Boolean inputs not supported for relu")),
    _activation("relu6", F.relu6, "torch.nn.functional.relu6", _INT_FLOAT, errors=_bool_input("Bool inputs not supported")),
    _activation("hardtanh", F.hardtanh, "torch.nn.functional.hardtanh", _INT_FLOAT, samples=_unary_samples(min_val=(-0.5, -2), max_val=(0.25, 2.5)), errors=_hardtanh_errors),
    _activation("leaky_relu", F.leaky_relu, "torch.nn.functional.leaky_relu", samples=_unary_samples(negative_slope=(0.2, -1.5))),
    OpInfo("threshold", F.threshold, _threshold_samples, _INT_FLOAT, error_inputs=_threshold_errors, symbol="torch.nn.functional.threshold"),
    _activation("elu", F.elu, "torch.nn.functional.elu", samples=_unary_samples(alpha=(0.5, 2.0))),
    _activation("selu", F.selu, "torch.nn.functional.selu"),
    _activation("celu", F.celu, "torch.nn.functional.celu", samples=_unary_samples(alpha=(0.5, 2.0)), errors=_celu_errors),
    _activation("gelu", F.gelu, "torch.nn.functional.gelu", errors=_gelu_errors, infinities=False),
    _activation("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), "torch.nn.functional.gelu"),
    _activation("silu", F.silu, "torch.nn.functional.silu"),
    _activation("mish", F.mish, "torch.nn.functional.mish"),
    _activation("softplus", F.softplus, "torch.nn.functional.softplus", samples=_unary_samples(-30, 30, beta=(2, 0.5), threshold=(1.0, 5))),
    _activation("hardsigmoid", F.hardsigmoid, "torch.nn.functional.hardsigmoid", samples=_unary_samples(-5, 5)),
    _activation("hardswish", F.hardswish, "torch.nn.functional.hardswish", samples=_unary_samples(-5, 5)),
    _activation("logsigmoid", F.logsigmoid, "torch.nn.functional.logsigmoid", samples=_unary_samples(-30, 30)),
    _activation("softsign", F.softsign, "torch.nn.functional.softsign", _INT_FLOAT, errors=_bool_input("not")),
    _activation("tanhshrink", F.tanhshrink, "torch.nn.functional.tanhshrink", _INT_FLOAT, errors=_bool_input("not")),
    _activation("hardshrink", F.hardshrink, "torch.nn.functional.hardshrink", samples=_unary_samples(lambd=(0.1, 2.0))),
    _activation("softshrink", F.softshrink, "torch.nn.functional.softshrink", samples=_unary_samples(lambd=(0.1, 2.0)), errors=_softshrink_errors),
    OpInfo("glu", F.glu, _glu_samples, FLOATING, error_inputs=_glu_errors, symbol="torch.nn.functional.glu"),
    OpInfo("relu_inplace_flag", _inplace(F.relu, inplace=True), _fresh_input_samples, _INT_FLOAT, symbol="torch.relu"),
    OpInfo("relu_", _inplace(torch.relu_), _fresh_input_samples, _INT_FLOAT, symbol="torch.relu"),
    OpInfo("relu_method_", _inplace(lambda t: t.relu_()), _fresh_input_samples, _INT_FLOAT, symbol="torch.relu"),
    OpInfo("leaky_relu_inplace_flag", _inplace(F.leaky_relu, negative_slope=0.3, inplace=True), _fresh_input_samples, FLOATING, symbol="torch.nn.functional.leaky_relu"),
    OpInfo("hardtanh_", _inplace(F.hardtanh_, min_val=-0.5, max_val=0.5), _fresh_input_samples, FLOATING, symbol="torch.nn.functional.hardtanh"),
    OpInfo("elu_inplace_flag", _inplace(F.elu, alpha=0.5, inplace=True), _fresh_input_samples, FLOATING, symbol="torch.nn.functional.elu"),
    OpInfo("silu_inplace_flag", _inplace(F.silu, inplace=True), _fresh_input_samples, FLOATING, symbol="torch.nn.functional.silu"),
    OpInfo(
        "relu_inplace_writes_input",
        _inplace_input(F.relu, inplace=True),
        _fresh_input_samples,
        FLOATING,
        reference=_clone_reference(_inplace_input(F.relu, inplace=True)),
        symbol="torch.relu",
    ),
]
