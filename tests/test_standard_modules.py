"""The standard library as a traced program uses it answers as in eager, at every call
(squall.frontend.standard_modules): warnings shown as the filters say, writes to sys.stdout,
logging through the module, the environment, datetime's clocks and random generators of the
program's own. Each of these was done or read once, at trace time, before 2026-11-27."""
from __future__ import annotations

import collections
import contextvars
import datetime
import logging
import os
import random
import sys
import uuid
import warnings

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import squall


def _quiet(call, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        return call(*args)


def _warns(x):
    warnings.warn("from the program")
    return x + 1


def _shown(call, action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        warnings.simplefilter("ignore", squall.SquallWarning)
        call(torch.ones(2))
    return sum("from the program" in str(w.message) for w in caught)


def test_a_warning_the_filters_show_at_every_call_shows_at_every_call():
    """Under an "always" filter eager shows the program's warning at every call; the trace had
    shown it once. The compiled call replays it at every call, so the filters decide as in eager:
    "always", "default" (once per place), "ignore"; an "error" filter raises eager's error."""
    jitted = squall.jit(_warns)
    assert [_shown(jitted, "always") for _ in range(3)] == [_shown(_warns, "always") for _ in range(3)] == [1, 1, 1]
    assert jitted.cache_info().hits == 2  # compiled, not run eagerly
    assert [_shown(jitted, "ignore") for _ in range(2)] == [0, 0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            jitted(torch.ones(2))
    assert sum("from the program" in str(w.message) for w in caught) == 1
    assert not [w for w in caught if issubclass(w.category, squall.SquallWarning)]
    with pytest.raises(UserWarning, match="from the program"):
        _shown(jitted, "error")


def _writes(x):
    sys.stdout.write(f"rows {x.shape[0]}\n")
    return x * 2


def test_a_write_to_sys_stdout_happens_at_every_call(capsys):
    jitted = squall.jit(_writes)
    for rows in (2, 2, 3):
        assert_close(_quiet(jitted, torch.ones(rows)), torch.full((rows,), 2.0))
        assert capsys.readouterr().out == f"rows {rows}\n"


def _logs_through_the_module(x):
    logging.info("rows %d", x.shape[0])
    return x + 1


def test_logging_through_the_module_logs_at_every_call(caplog):
    """`logging.info` through the module logs with the root logger: a message it emits runs the
    call eagerly (logged once before), one whose level is off is skipped, guarded."""
    jitted = squall.jit(_logs_through_the_module)
    for level, expected in ((logging.WARNING, []), (logging.WARNING, []), (logging.INFO, ["rows 3"]), (logging.INFO, ["rows 3"])):
        caplog.clear()
        caplog.set_level(level)
        assert_close(_quiet(jitted, torch.zeros(3)), torch.ones(3))
        assert [r.getMessage() for r in caplog.records if r.name == "root"] == expected


def _scaled_by_the_environment(x):
    if "SQUALL_TEST_OFF" in os.environ:
        return x
    return x * float(os.environ.get("SQUALL_TEST_SCALE", "1")) * float(os.getenv("SQUALL_TEST_BIAS", "1"))


def test_an_environment_variable_read_is_guarded(monkeypatch):
    jitted = squall.jit(_scaled_by_the_environment)
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # compiled, not run eagerly
        for scale, bias, off in (("2", None, False), ("3", None, False), ("3", "5", False), ("3", "5", True), ("2", None, False)):
            monkeypatch.setenv("SQUALL_TEST_SCALE", scale)
            if bias is None:
                monkeypatch.delenv("SQUALL_TEST_BIAS", raising=False)
            else:
                monkeypatch.setenv("SQUALL_TEST_BIAS", bias)
            if off:
                monkeypatch.setenv("SQUALL_TEST_OFF", "1")
            else:
                monkeypatch.delenv("SQUALL_TEST_OFF", raising=False)
            assert_close(jitted(x), _scaled_by_the_environment(x))
    assert jitted.cache_info().misses == 4  # the last state's program is found again


def _counts_in_the_environment(x):
    os.environ["SQUALL_TEST_CALLS"] = str(int(os.environ.get("SQUALL_TEST_CALLS", "0")) + 1)
    return x + 1


def test_setting_an_environment_variable_runs_eagerly(monkeypatch):
    monkeypatch.setenv("SQUALL_TEST_CALLS", "0")
    jitted = squall.jit(_counts_in_the_environment)
    with pytest.warns(squall.SquallWarning, match="changes the environment variables"):
        jitted(torch.ones(1))
    for _ in range(2):
        jitted(torch.ones(1))
    assert os.environ["SQUALL_TEST_CALLS"] == "3"


def _stamped(x):
    return x + datetime.datetime.now().microsecond


def test_datetime_now_is_read_at_every_call():
    jitted = squall.jit(_stamped)
    with pytest.warns(squall.SquallWarning, match=r"datetime\.datetime\.now"):
        first = jitted(torch.zeros(1))
    later = [_quiet(jitted, torch.zeros(1)) for _ in range(3)]
    assert len({t.item() for t in [first] + later}) > 1


_OWN_RANDOM = random.Random(0)
_OWN_NUMPY = np.random.default_rng(0)


def _draws(x):
    return x * _OWN_RANDOM.random() + float(_OWN_NUMPY.random())


def test_a_generator_of_the_programs_own_draws_at_every_call():
    """A `random.Random` or numpy `Generator` the program holds drew once, at trace time: every
    call got the first call's numbers."""
    jitted = squall.jit(_draws)
    got = [_quiet(jitted, torch.ones(1)).item() for _ in range(3)]
    _OWN_RANDOM.seed(0)
    globals()["_OWN_NUMPY"] = np.random.default_rng(0)
    expected = [_draws(torch.ones(1)).item() for _ in range(3)]
    assert_close(got, expected)


def _uuid_stamped(x):
    return x + uuid.uuid4().int % 1000 + os.urandom(1)[0]


def test_a_fresh_uuid_or_random_bytes_are_drawn_at_every_call():
    """`uuid.uuid4()` and `os.urandom()` read through their modules were drawn once, at trace time."""
    jitted = squall.jit(_uuid_stamped)
    with pytest.warns(squall.SquallWarning, match=r"uuid\.uuid4.*answers differently at every call"):
        first = jitted(torch.zeros(1))
    got = {first.item()} | {_quiet(jitted, torch.zeros(1)).item() for _ in range(4)}
    assert len(got) > 1


def _float64_ones(x):
    torch.set_default_dtype(torch.float64)
    try:
        return torch.ones(2) + x
    finally:
        torch.set_default_dtype(torch.float32)


def test_setting_the_default_dtype_inside_the_program_runs_eagerly():
    """The trace made `torch.ones(2)` float64, as eager; the compiled call ran `torch.ones(2)`
    under the call's default, float32: a float32 result where eager's is float64."""
    jitted = squall.jit(_float64_ones)
    with pytest.warns(squall.SquallWarning, match=r"torch\.set_default_dtype"):
        got = jitted(torch.ones(2))
    assert got.dtype == torch.float64 and _quiet(jitted, torch.ones(2)).dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32


_COUNTS: collections.Counter = collections.Counter()
_EAGER_COUNTS: collections.Counter = collections.Counter()


def _counted(x, counts):
    counts["calls"] += 1
    counts.update(["seen", "seen"])
    return x * counts["calls"] + counts["seen"] + counts["never"]


def test_a_counter_the_program_counts_in_counts_once_a_call():
    """A `collections.Counter` was not followed: written while traced, and read as the first
    call's counts at every later call (eager's 2, 3 were 1, 1)."""
    jitted = squall.jit(lambda x: _counted(x, _COUNTS))
    for _ in range(4):
        assert_close(_quiet(jitted, torch.ones(1)), _counted(torch.ones(1), _EAGER_COUNTS))
    assert _COUNTS == _EAGER_COUNTS == collections.Counter(calls=4, seen=8)


_SCALE_VAR: contextvars.ContextVar = contextvars.ContextVar("scale", default=1.0)


def _scaled_by_the_context(x):
    return x * _SCALE_VAR.get()


def test_a_context_variable_read_is_guarded():
    jitted = squall.jit(_scaled_by_the_context)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for scale in (None, 2.0, 3.0, None):
            token = _SCALE_VAR.set(scale) if scale is not None else None
            try:
                assert_close(jitted(torch.ones(2)), torch.full((2,), scale or 1.0))
            finally:
                if token is not None:
                    _SCALE_VAR.reset(token)
    inner = contextvars.ContextVar("inner", default=1.0)

    def set_around(x):  # set and reset around its work, as transformers' output capture does
        token = inner.set(_SCALE_VAR.get() * 2)
        try:
            return x * inner.get()
        finally:
            inner.reset(token)

    jitted = squall.jit(set_around)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for scale in (1.0, 5.0):
            token = _SCALE_VAR.set(scale)
            try:
                assert_close(jitted(torch.ones(2)), torch.full((2,), scale * 2))
            finally:
                _SCALE_VAR.reset(token)
    assert inner.get() == 1.0
