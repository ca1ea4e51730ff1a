"""Python side effects of a compiled program happen as in eager, at every call: what it prints
and logs, the clocks and iterators it reads, the identities it asks, and the classes it changes
(the containers it writes: tests/test_side_effects.py)."""
from __future__ import annotations

import itertools
import logging
import re
import time
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall


def _prints_a_tensor(x):
    print("sum", x.sum(), "shape", tuple(x.shape))  # THE PRINT LINE
    return x * 2


class _PrintingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        print("mean", y.mean())
        return y.relu()


@pytest.mark.parametrize("make", [lambda: _prints_a_tensor, _PrintingModule], ids=["function", "module"])
def test_print_prints_at_every_call_as_eager_does(make, capsys):
    """print while traced printed once, at trace time, and a tensor as its proxy
    (`<TensorProxy t0: ...>`); cached calls printed nothing. The call runs eagerly, saying so."""
    program = make()
    jitted = squall.jit(program)
    module = isinstance(program, torch.nn.Module)
    for i, size in enumerate((4, 4, 5)):
        x = torch.randn(size, 3) if module else torch.randn(size)
        expected = program(x)
        want = capsys.readouterr().out
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = jitted(x)
        assert capsys.readouterr().out == want
        assert_close(got, expected)
        if i == 0:
            assert any(re.search(r"the program prints \(.*test_side_effects_io.py:\d+\)", str(w.message)) for w in caught), caught


_LOGGER = logging.getLogger("squall.tests.user_program")


def _logs(x):
    _LOGGER.info("rows %d", x.shape[0])
    _LOGGER.debug("detail")
    return x + 1


def test_a_logger_logs_at_every_call_as_eager_does(caplog):
    """logger.info while traced logged once, at trace time; cached calls logged nothing. A
    message the logger would emit runs the call eagerly; one whose level is off is skipped, and
    turning the level on is seen at the next call."""
    jitted = squall.jit(_logs)
    messages = lambda: [r.getMessage() for r in caplog.records if r.name == _LOGGER.name]  # noqa: E731
    for level, expected in ((logging.WARNING, []), (logging.WARNING, []), (logging.INFO, ["rows 3"]),
                            (logging.INFO, ["rows 3"]), (logging.DEBUG, ["rows 3", "detail"])):
        caplog.clear()
        caplog.set_level(level, logger=_LOGGER.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)
            assert_close(jitted(torch.zeros(3)), torch.ones(3))
        assert messages() == expected


class _TimedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.elapsed = None

    def forward(self, x):
        start = time.perf_counter()
        y = self.lin(x)
        self.elapsed = time.perf_counter() - start
        return y


def test_a_clock_read_while_traced_is_read_at_every_call():
    """time.perf_counter() while traced was frozen at the first call's answer: the elapsed time
    set on the module was the same number at every call. The call runs eagerly, saying why."""
    module = _TimedLinear()
    jitted = squall.jit(module)
    elapsed = []
    with pytest.warns(squall.SquallWarning, match="the time module"):
        jitted(torch.randn(2, 3))
    for _ in range(3):
        jitted(torch.randn(2, 3))
        elapsed.append(module.elapsed)
    assert len(set(elapsed)) == 3, elapsed


_COUNTER = itertools.count()
_NUMBERS = iter(range(100))


def _counts(x):
    return x + next(_COUNTER)


def _takes_next(x):
    return x * next(_NUMBERS)


def _closing_over(iterator):
    return lambda x: x + next(iterator)


@pytest.mark.parametrize("make_program", [lambda: _counts, lambda: _takes_next, lambda: _closing_over(itertools.count()),
                                          lambda: _closing_over(i for i in range(9))],
                         ids=["itertools.count", "iterator", "count in a closure", "generator in a closure"])
def test_an_iterator_that_lives_between_calls_advances_at_every_call(make_program):
    """next() of an iterator kept between calls gave the first call's item at every call (it was
    advanced once, at trace time; one in a closure cell, silently). The call runs eagerly: each
    call takes the next item."""
    jitted = squall.jit(make_program())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        got = [jitted(torch.ones(1)).item() for _ in range(4)]
    assert len(set(got)) == 4, got


def _same_memory(x, y):
    return x + 1 if x.data_ptr() == y.data_ptr() else x - 1


def test_an_address_read_off_a_tensor_is_the_calls_own():
    """data_ptr() ran as an opaque call on meta tensors, where every address is 0: two distinct
    tensors compared equal, and the first call's answer stayed in the trace. A number or string
    an opaque call reads off its tensors runs the call eagerly, saying so."""
    jitted = squall.jit(_same_memory)
    a, b = torch.ones(2), torch.ones(2)
    with pytest.warns(squall.SquallWarning, match=r"data_ptr answers with a Python int"):
        jitted(a, b)
    for x, y in ((a, a), (a, b), (a, a[:]), (a, b)):
        assert_close(jitted(x, y), _same_memory(x, y))


_BY_ID: dict = {}


class _CountsByIdentity(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        _BY_ID[id(self)] = _BY_ID.get(id(self), 0) + 1
        return self.lin(x) * _BY_ID[id(self)]


def test_id_answers_for_the_object_a_view_stands_for():
    """id(self) in a forward was the id of squall's recording view, not of the module: a dict
    keyed by it missed the caller's entries. It is the module's own id now."""
    module = _CountsByIdentity()
    jitted = squall.jit(module)
    with torch.no_grad():
        got = [jitted(torch.ones(1, 2)) for _ in range(3)]
    assert _BY_ID == {id(module): 3}
    with torch.no_grad():
        one = module.lin(torch.ones(1, 2))
    for i, out in enumerate(got, 1):
        assert_close(out, one * i)


def test_id_of_a_traced_tensor_runs_the_call_eagerly():
    """`table[id(x)]` with a table the caller filled raised KeyError (the id was the proxy's),
    and a trace would keep the first call's id: the call runs eagerly."""

    def scaled(x, table):
        return table[id(x)] * x

    jitted = squall.jit(scaled)
    a, b = torch.ones(2), torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        assert_close(jitted(a, {id(a): 2.0}), a * 2)
        assert_close(jitted(b, {id(b): 3.0}), b * 3)


def _registry():
    class Registry:
        calls = 0
        seen: list = []
        table: dict = {}

    return Registry


def _counting(registry):
    def counted(x):
        registry.calls += 1
        registry.seen.append(x.shape[0])
        registry.table[x.shape[0]] = registry.table.get(x.shape[0], 0) + 1
        return x * registry.calls

    return counted


def test_a_class_the_program_changes_changes_at_every_call():
    """A class attribute set, or a list or dict a class holds changed, while traced changed once
    (at trace time), and the trace kept the count it read: every call returned x * 1. The class
    is put back as it was and the call runs eagerly, naming the class."""
    eager, compiled = _registry(), _registry()
    jitted = squall.jit(_counting(compiled))
    with pytest.warns(squall.SquallWarning, match=r"changes class .*Registry \(calls, seen, table\)"):
        first = jitted(torch.ones(2))
    got = [first] + [jitted(torch.ones(2)) for _ in range(2)]
    want = [_counting(eager)(torch.ones(2)) for _ in range(3)]
    for g, w in zip(got, want):
        assert_close(g, w)
    assert (compiled.calls, compiled.seen, compiled.table) == (eager.calls, eager.seen, eager.table) == (3, [2, 2, 2], {2: 3})


def test_a_class_the_program_only_reads_stays_compiled():
    registry = _registry()
    registry.calls = 4

    def scaled(x):
        return x * registry.calls + len(registry.seen)

    jitted = squall.jit(scaled)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        assert_close(jitted(torch.ones(2)), torch.full((2,), 4.0))
        registry.calls = 5  # a class's number is guarded: the next call compiles again
        assert_close(jitted(torch.ones(2)), torch.full((2,), 5.0))


def test_a_class_list_of_tuples_changed_by_the_program_is_put_back_whole():
    """The check compares a class's lists item by item by identity (tuples of any length) and a
    dict's keys and values, so the eager run makes each change exactly once."""

    class Log:
        entries = [(0,)]
        totals = {"a": 1}

    def f(x):
        Log.entries.append((x.shape[0],))
        Log.totals["b"] = Log.totals.get("b", 0) + 1
        return x * len(Log.entries)

    jitted = squall.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        got = [jitted(torch.ones(2)) for _ in range(2)]
    assert_close(got[1], torch.full((2,), 3.0))
    assert Log.entries == [(0,), (2,), (2,)] and Log.totals == {"a": 1, "b": 2}


def test_a_logger_read_by_the_program_is_still_a_logger():
    """The stand-in a traced program reads a logger through answers isinstance and __class__ as
    the logger does (a branch on isinstance(log, logging.Logger) took the other side)."""

    def f(x):
        return x + 1 if isinstance(_LOGGER, logging.Logger) and _LOGGER.__class__ is logging.Logger else x - 1

    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        assert_close(squall.jit(f)(torch.zeros(2)), torch.ones(2))
