"""Silent wrong answers once known and left alone: a change after compiling that a cached
program did not see. Each test calls a jitted function, makes one change, and calls it again
beside eager: every later call must answer as eager does."""
from __future__ import annotations

import pytest
import torch
from torch.backends import cudnn
from torch.testing import assert_close

import squall
from squall.ltorch.base import SquallWarning


class Config:
    scale = 2.0
    name = "double"


class DerivedConfig(Config):
    pass


def _by_config(x):
    return x * Config.scale if Config.name == "double" else x - Config.scale


def _by_derived_config(x):
    return x * DerivedConfig.scale


def test_a_class_attribute_read_off_a_global_class_changed():
    x = torch.randn(3)
    j, jd = squall.jit(_by_config), squall.jit(_by_derived_config)
    try:
        assert_close(j(x), _by_config(x))
        assert_close(jd(x), _by_derived_config(x))
        Config.scale = 3.0
        assert_close(j(x), _by_config(x))
        assert_close(jd(x), _by_derived_config(x))  # inherited
        DerivedConfig.scale = 7  # a subclass's own now, an int
        assert_close(jd(x), _by_derived_config(x))
        Config.name = "minus"
        assert_close(j(x), _by_config(x))
    finally:
        Config.scale, Config.name = 2.0, "double"
        if "scale" in vars(DerivedConfig):
            del DerivedConfig.scale
    assert_close(j(x), _by_config(x))
    assert_close(jd(x), _by_derived_config(x))


def _absolute_shift(x):
    return x + abs(-2) + len(x.shape)


def test_a_global_that_later_shadows_a_builtin_the_program_called():
    x = torch.randn(3)
    j = squall.jit(_absolute_shift)
    assert_close(j(x), _absolute_shift(x))
    try:
        globals()["abs"] = lambda v: 10 * v
        assert_close(j(x), _absolute_shift(x))
        del globals()["abs"]
        globals()["len"] = lambda v: 100
        assert_close(j(x), _absolute_shift(x))
    finally:
        globals().pop("abs", None)
        globals().pop("len", None)
    assert_close(j(x), _absolute_shift(x))


_exp_cached = torch.distributions.transforms.ExpTransform(cache_size=1)
_composed = torch.distributions.transforms.ComposeTransform(
    [torch.distributions.transforms.AffineTransform(0.0, 2.0), torch.distributions.transforms.ExpTransform(cache_size=1)])


def _through_cached_transform(x):
    return _exp_cached(x) * 2 + _composed(x)


def test_a_caching_distributions_transform_runs_eagerly_and_keeps_real_tensors():
    # cache_size=1 keeps the last (input, output) on the transform: the trace left its proxies there
    j = squall.jit(_through_cached_transform)
    x = torch.randn(3)
    with pytest.warns(SquallWarning, match="cache_size=1"):
        got = j(x)
    assert_close(got, _through_cached_transform(x))
    for t in (_exp_cached, _composed.parts[1]):
        assert all(type(v) is torch.Tensor for v in t._cached_x_y)
    y = _exp_cached(x)
    assert _exp_cached.inv(y) is x  # the cache eager keeps, working


def _by_settings(x):
    threads = x * torch.get_num_threads()
    scale = 2.0 if torch.are_deterministic_algorithms_enabled() else 3.0
    return threads + [scale if torch.get_float32_matmul_precision() == "highest" else -scale for _ in range(1)][0]


def test_torch_settings_the_program_reads_changed():
    x = torch.randn(3)
    j = squall.jit(_by_settings)
    threads, precision = torch.get_num_threads(), torch.get_float32_matmul_precision()
    assert_close(j(x), _by_settings(x))
    try:
        torch.set_num_threads(threads + 1)
        assert_close(j(x), _by_settings(x))
        torch.use_deterministic_algorithms(True)
        assert_close(j(x), _by_settings(x))
        torch.set_float32_matmul_precision("high" if precision == "highest" else "highest")
        assert_close(j(x), _by_settings(x))  # read in a comprehension
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(False)
        torch.set_float32_matmul_precision(precision)
    assert_close(j(x), _by_settings(x))


def _by_backend_flags(x):
    if torch.backends.mkldnn.enabled:
        x = x * 2
    return x + 1 if torch.is_anomaly_enabled() else x - 1


class _ByCudnnFlag(torch.nn.Module):
    def forward(self, x):
        return x * 3 if cudnn.deterministic else x * 5


def test_backend_flags_and_anomaly_mode_the_program_reads_changed():
    # read as attributes of torch.backends' modules, or queried: baked into the trace before 2026-11-27
    x = torch.randn(3)
    j, m = squall.jit(_by_backend_flags), _ByCudnnFlag()
    jm = squall.jit(m)
    assert_close(j(x), _by_backend_flags(x))
    assert_close(jm(x), m(x))
    with torch.backends.mkldnn.flags(enabled=False):
        assert_close(j(x), _by_backend_flags(x))
    with torch.autograd.set_detect_anomaly(True):
        assert_close(j(x), _by_backend_flags(x))
    with torch.backends.cudnn.flags(deterministic=True):
        assert_close(jm(x), m(x))
    assert_close(j(x), _by_backend_flags(x))
    assert_close(jm(x), m(x))
