"""Python side effects of a compiled program happen as in eager, at every call: writes into
containers it was given or closes over are replayed on the real objects with real tensors; a
write squall cannot replay, or the user's code raising while traced, runs the call eagerly."""
from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
import torch
from torch.testing import assert_close

import squall
from squall.proxies import TensorProxy


def _no_proxies(container) -> None:
    values = container.values() if isinstance(container, dict) else container
    assert not any(isinstance(v, TensorProxy) for v in values), container


def test_closure_defaultdict_gets_real_tensors_and_comes_back_as_itself():
    def make():
        dd = collections.defaultdict(lambda: torch.zeros(2))

        def f(x):
            dd["a"] = x + 1
            dd["c"] = x * 2
            return dd["b"], dd

        return dd, f

    eager_dd, eager_f = make()
    dd, f = make()
    j = squall.jit(f)
    x = torch.randn(2)
    b, out = j(x)
    eb, eout = eager_f(x)
    assert out is dd and eout is eager_dd
    assert list(dd) == list(eager_dd) == ["a", "c", "b"]
    _no_proxies(dd)
    for k in dd:
        assert_close(dd[k], eager_dd[k])
    assert_close(b, eb)
    x2 = torch.randn(2)
    j(x2), eager_f(x2)  # "b" is there now: the next call reads it, as eager does
    assert list(dd) == list(eager_dd)
    for k in dd:
        assert_close(dd[k], eager_dd[k])


def test_dict_argument_written_by_the_program_gets_the_entry_at_every_call():
    def f(x, cache):
        if x.shape not in cache:
            cache[x.shape] = x
        return x + 1

    j = squall.jit(f)
    for shape in [(2,), (2,), (3, 1)]:
        x = torch.randn(shape)
        mine, eager = {}, {}
        assert_close(j(x, mine), f(x, eager))
        assert list(mine) == list(eager) == [x.shape] and type(next(iter(mine))) is torch.Size
        assert mine[x.shape] is x  # the caller's tensor itself, as eager stores it


def test_closure_set_that_grows_is_guarded_and_replayed():
    seen = set()

    def f(x):
        seen.add(x.shape[0])
        return x * len(seen)

    j = squall.jit(f)
    x = torch.ones(2)
    assert_close(j(x), x)
    assert seen == {2}
    seen.add(7)
    assert_close(j(x), x * 2)  # len(seen) is read again: the set changed
    assert seen == {2, 7}


def test_closure_ordered_dict_keeps_eager_order_and_real_values():
    od = collections.OrderedDict(first=1.0)

    def f(x):
        od["z"] = x.sum()
        od["a"] = x.mean()
        return x * od["first"]

    x = torch.randn(3)
    squall.jit(f)(x)
    assert list(od) == ["first", "z", "a"]
    _no_proxies(od)
    assert_close(od["z"], x.sum())


def test_closure_list_returned_is_the_callers_list():
    log = []

    def f(x):
        log.append(x * 2)
        return log

    j = squall.jit(f)
    x = torch.randn(2)
    assert j(x) is log and j(x) is log
    assert len(log) == 2
    _no_proxies(log)
    assert_close(log[1], x * 2)


def test_a_set_changed_other_than_by_adding_runs_eagerly_naming_the_line():
    pending = {1, 2}

    def f(x):
        pending.discard(2)
        return x * len(pending)

    with pytest.warns(squall.SquallWarning, match=r"other than by adding to it \(discard, at .*test_side_effects.py:\d+\).*runs eagerly"):
        assert_close(squall.jit(f)(torch.ones(2)), torch.ones(2))
    assert pending == {1}


class RaisesFirst(torch.nn.Module):
    """Its first call counts, bumps a buffer, then raises (a warm-up check, say)."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.register_buffer("buf", torch.zeros(2))

    def forward(self, x):
        self.calls += 1
        self.buf.add_(1)
        if self.calls == 1:
            raise RuntimeError("not warmed up")
        return x + self.buf


def test_a_module_raising_on_its_first_call_keeps_eagers_state_and_then_compiles():
    m, e = RaisesFirst(), RaisesFirst()
    j = squall.jit(m)
    x = torch.randn(2)
    for module in (j, e):
        with pytest.raises(RuntimeError, match="not warmed up"):
            module(x)
    assert m.calls == e.calls == 1
    assert_close(m.buf, e.buf)
    assert_close(j(x), e(x))
    assert m.calls == e.calls == 2
    assert_close(m.buf, e.buf)


# --- type() of what the program reads --------------------------------------------------------------


class Plain:
    def __init__(self):
        self.x = 2.0

    def scale(self):
        return 3.0


def test_type_of_a_users_object_and_module_is_their_own_class():
    obj = Plain()

    class Tagged(torch.nn.Module):
        def forward(self, t):
            if type(self) is Tagged and self.__class__ is Tagged:
                t = t * 2
            if "scale" in type(obj).__dict__ and "x" not in type(obj).__dict__:
                t = t + type(obj).scale(obj)
            if type(obj) is Plain and obj.__class__ is Plain:
                t = t - 1
            if type(t) is torch.Tensor:
                t = t * 5
            return t

    m, x = Tagged(), torch.randn(3)
    assert_close(squall.jit(m)(x), m(x))


def test_type_of_a_container_the_program_reads_is_its_own_class():
    table, order = {"a": 1.0}, collections.OrderedDict(b=2.0)

    def f(x):
        if type(table) is dict and type(order) is collections.OrderedDict:
            return x + table["a"] + order["b"]
        return x

    x = torch.randn(2)
    assert_close(squall.jit(f)(x), f(x))


# --- random number generators the program seeds or draws from -----------------------------------


def test_manual_seed_inside_the_program_draws_eagers_numbers_at_every_call():
    def f(x):
        torch.manual_seed(3)
        return x + torch.rand(2)

    j, x = squall.jit(f), torch.zeros(2)
    with pytest.warns(squall.SquallWarning, match=r"changes torch's random number generator \(.*test_side_effects.py:\d+\).*runs eagerly"):
        first = j(x)
    torch.manual_seed(0)
    assert_close(j(x), f(x))
    assert_close(first, f(x))
    assert_close(torch.rand(3), (torch.manual_seed(3), torch.rand(2), torch.rand(3))[2])  # the state after is eager's


@pytest.mark.parametrize("draw", ["python", "numpy"])
def test_python_and_numpy_random_draws_are_not_frozen_into_the_trace(draw):
    np = pytest.importorskip("numpy")
    import random

    def f(x):
        return x * (random.uniform(0, 1) if draw == "python" else float(np.random.rand()))

    def seed(n):
        random.seed(n), np.random.seed(n)

    j, x = squall.jit(f), torch.ones(2)
    seed(1)
    with pytest.warns(squall.SquallWarning, match=r"changes (Python's random module|numpy.random) \(.*test_side_effects.py:\d+\)"):
        a = j(x)
    seed(1)
    assert_close(a, f(x))
    assert not torch.equal(a, j(x))  # drawn again at every call
    seed(2)
    b = j(x)
    seed(2)
    assert_close(b, f(x))


# --- outputs that are inputs written in place -----------------------------------------------------


def test_an_input_written_in_place_and_returned_is_the_input_itself():
    def f(x, y):
        x.mul_(2)
        y.add_(1)
        return x, y * 3, {"again": x}

    j = squall.jit(f)
    for _ in range(2):
        x, y = torch.randn(3), torch.randn(3)
        ex, ey = x.clone(), y.clone()
        out = j(x, y)
        expected = f(ex, ey)
        assert out[0] is x and out[2]["again"] is x
        assert_close(out, expected)
        assert_close((x, y), (ex, ey))


def test_a_buffer_written_in_place_and_returned_is_the_buffer_itself():
    class Counts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(2))

        def forward(self, x):
            self.seen.add_(x)
            return self.seen

    m = Counts()
    j = squall.jit(m)
    assert j(torch.ones(2)) is m.seen
    assert j(torch.ones(2)) is m.seen
    assert_close(m.seen, torch.full((2,), 2.0))


VIEWS_OF_A_WRITTEN_INPUT = {
    "x[0]": lambda x: (x.mul_(2), x[0])[1],
    "taken before the write": lambda x: (lambda v: (x.add_(1), v)[1])(x[:, 1:]),
    "x.t()": lambda x: (x.sub_(1), x.t())[1],
    "x.view(-1)": lambda x: (x.mul_(3), x.view(-1))[1],
    "x.reshape(-1)": lambda x: (x.mul_(3), x.reshape(-1))[1],
    "x.split(1)": lambda x: (x.add_(2), x.split(1))[1],
    "x.unsqueeze(0)[..., ::2]": lambda x: (x.mul_(-1), x.unsqueeze(0)[..., ::2])[1],
}


@pytest.mark.parametrize("make", VIEWS_OF_A_WRITTEN_INPUT.values(), ids=VIEWS_OF_A_WRITTEN_INPUT.keys())
@pytest.mark.parametrize("dynamic", [None, True])
def test_a_returned_view_of_an_input_written_in_place_shares_the_input_s_memory(make, dynamic):
    """As eager's: a write through the returned view reaches the input, and a later write into the
    input reaches the view (it came back as a view of a copy of the new value)."""
    j = squall.jit(make, dynamic=dynamic)
    for shape in ((3, 4), (3, 4), (5, 6)):
        x = torch.randn(shape)
        ex = x.clone()
        out, expected = j(x), make(ex)
        assert_close(out, expected)
        assert_close(x, ex)
        outs, expecteds = (out, expected) if isinstance(out, tuple) else ((out,), (expected,))
        for o, e in zip(outs, expecteds):
            o.add_(1)
            e.add_(1)
        assert_close(x, ex)
        x.mul_(2)
        ex.mul_(2)
        assert_close(out, expected)


def test_a_returned_view_of_a_buffer_written_in_place_shares_the_buffer_s_memory():
    class Window(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(2, 8))

        def forward(self, x, at: int):
            self.cache[:, at] = x
            return self.cache[:, : at + 1]

    m = Window()
    j = squall.jit(m)
    for at in range(3):
        out = j(torch.full((2,), float(at + 1)), at)
        assert out.data_ptr() == m.cache.data_ptr()
    m.cache.zero_()
    assert not out.any()


@pytest.mark.parametrize("returns", ["itself", "in_a_tuple", "in_a_dict"])
def test_dict_argument_returned_is_the_callers_dict_with_the_writes(returns):
    def f(x, d):
        d["y"] = x + 1
        if returns == "itself":
            return d
        return (x * 2, d) if returns == "in_a_tuple" else {"d": d, "x": x * 2}

    j = squall.jit(f)
    for _ in range(2):
        x, mine, eager = torch.randn(2), {"a": 1}, {"a": 1}
        got, expected = j(x, mine), f(x, eager)
        returned = got if returns == "itself" else got[1] if returns == "in_a_tuple" else got["d"]
        assert returned is mine
        assert list(mine) == list(eager) == ["a", "y"]
        _no_proxies(mine)
        assert_close(got, {**expected, "d": mine} if returns == "in_a_dict" else (expected[0], mine) if returns == "in_a_tuple" else mine)
        assert_close(mine["y"], eager["y"])


def test_dict_argument_returned_unwritten_is_the_callers_dict():
    def f(x, d):
        return d, x + 1

    j = squall.jit(f)
    for _ in range(2):
        d = {"scale": 2}
        got, _ = j(torch.ones(2), d)
        assert got is d


def test_list_argument_appended_to_gets_the_items_at_every_call_and_is_returned_as_itself():
    def f(x, log):
        log.append(x * 2)
        return log, x + len(log)

    j = squall.jit(f)
    for n in range(3):
        x, mine, eager = torch.randn(2), [torch.zeros(2)] * n, [torch.zeros(2)] * n
        got, expected = j(x, mine), f(x, eager)
        assert got[0] is mine and len(mine) == len(eager) == n + 1
        _no_proxies(mine)
        assert_close(mine, eager)
        assert_close(got[1], expected[1])


def test_list_argument_changed_other_than_by_appending_or_setting_an_item_runs_eagerly_naming_the_line():
    def f(x, items):
        items[0:1] = [x]
        return x + 1

    items = [1]
    with pytest.warns(squall.SquallWarning, match=r"other than by appending to it \(__setitem__, at .*test_side_effects.py:\d+\)"):
        assert_close(squall.jit(f)(torch.ones(2), items), torch.full((2,), 2.0))
    assert items[0].shape == (2,)  # eager's write


def test_an_item_set_in_a_list_is_set_again_on_the_call_s_list_at_every_call():
    # (MiniMax's cache sets `self.linear_cache[layer_idx]` at every step: it ran eagerly)
    def f(x, items, cache):
        items[0] = x
        items[-1] = x * 2
        cache.states[1] = cache.states[1] * 0.5 + x
        return x + 1

    j = squall.jit(f)
    for step in range(3):
        x = torch.randn(2)
        mine, eager = [1, 2, 3], [1, 2, 3]
        ours, theirs = Holder([torch.ones(2), torch.ones(2)]), Holder([torch.ones(2), torch.ones(2)])
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)  # compiled, not run eagerly
            assert_close(j(x, mine, ours), f(x, eager, theirs))
        assert mine[0] is x and mine[1] == 2
        assert_close(mine[2], eager[2])
        assert_close(ours.states, theirs.states)
        _no_proxies(mine)
        _no_proxies(ours.states)
    assert j.cache_info().misses == 1


class Holder:
    def __init__(self, states: list):
        self.states = states


@pytest.mark.parametrize("maxlen", [None, 2])
def test_closure_deque_gets_real_tensors_at_every_call_and_its_length_is_guarded(maxlen):
    mine, eager = collections.deque(maxlen=maxlen), collections.deque(maxlen=maxlen)

    def program(log):
        def f(x):
            log.append(x + 1)
            return x * len(log), log

        return f

    j, f = squall.jit(program(mine)), program(eager)
    for _ in range(3):
        x = torch.randn(2)
        got, expected = j(x), f(x)
        assert got[1] is mine
        assert_close(got[0], expected[0])
        _no_proxies(mine)
        assert len(mine) == len(eager)
        assert_close(list(mine), list(eager))


def test_deque_argument_appended_to_and_returned_is_the_callers_deque():
    def f(x, log):
        log.append(x * 2)
        return log

    j = squall.jit(f)
    for _ in range(2):
        mine = collections.deque()
        assert j(torch.ones(2), mine) is mine
        assert len(mine) == 1
        _no_proxies(mine)
        assert_close(mine[0], torch.full((2,), 2.0))


def test_a_deque_changed_other_than_by_appending_runs_eagerly_naming_the_line():
    pending = collections.deque([1, 2])

    def f(x):
        return x * pending.popleft()

    with pytest.warns(squall.SquallWarning, match=r"other than by appending to it on the right \(popleft, at .*test_side_effects.py:\d+\)"):
        assert_close(squall.jit(f)(torch.ones(2)), torch.ones(2))
    assert list(pending) == [2]


def test_closure_array_changed_runs_eagerly_and_one_only_read_is_guarded():
    import array

    grows, fixed = array.array("d", [1.0]), array.array("d", [2.0])

    def f(x):
        grows.append(3.0)
        return x * len(grows)

    def g(x):
        return x * fixed[0]

    x = torch.ones(2)
    with pytest.warns(squall.SquallWarning, match=r"changes closure variable 'grows' .*array.*runs eagerly"):
        assert_close(squall.jit(f)(x), x * 2)
    assert list(grows) == [1.0, 3.0]  # eager's one append, not the trace's too
    jg = squall.jit(g)
    assert_close(jg(x), x * 2)
    fixed[0] = 5.0
    assert_close(jg(x), x * 5)


_TABLE = np.array([1.0, 2.0], dtype=np.float32)


def test_a_numpy_array_read_is_guarded_and_one_changed_runs_eagerly():
    """float(ARR[0]) of a global numpy array was kept in the trace: after ARR[0] = 5 the cached
    program still scaled by 1. Its contents are guarded as an array.array's are, and the program
    changing it runs eagerly (the change made once, by eager)."""

    def scaled(x):
        return x * float(_TABLE[0]) + torch.from_numpy(_TABLE)

    def writes(x):
        _TABLE[1] += 1
        return x * float(_TABLE[1])

    _TABLE[:] = [1.0, 2.0]
    jitted = squall.jit(scaled)
    x = torch.ones(2)
    assert_close(jitted(x), scaled(x))
    _TABLE[0] = 5.0
    assert_close(jitted(x), scaled(x))
    _TABLE[:] = [np.nan, 2.0]  # NaN is NaN: the guard holds, and the answer is eager's
    assert_close(jitted(x), scaled(x), equal_nan=True)
    _TABLE[:] = [1.0, 2.0]
    with pytest.warns(squall.SquallWarning, match=r"changes .*_TABLE.*runs eagerly"):
        assert_close(squall.jit(writes)(x), x * 3)
    assert _TABLE.tolist() == [1.0, 3.0]


def test_heappush_on_a_closure_list_runs_eagerly_and_a_users_setitem_is_replayed():
    import heapq

    heap = [3, 1]

    def f(x):
        heapq.heappush(heap, 0)
        return x * heap[0] + len(heap)

    with pytest.warns(squall.SquallWarning, match="runs eagerly"):
        for n in range(2):
            assert_close(squall.jit(f)(torch.ones(2)), torch.full((2,), 3.0 + n))
    assert heap[0] == 0 and len(heap) == 4

    class Store:
        def __init__(self):
            self.items = {}

        def __setitem__(self, k, v):
            self.items[k] = v

    store = Store()

    def g(x):
        store[len(store.items)] = x + 1
        return x * len(store.items)

    j = squall.jit(g)
    for n in range(1, 3):
        assert_close(j(torch.ones(2)), torch.full((2,), float(n)))
    assert list(store.items) == [0, 1]
    _no_proxies(store.items)


def _counted(x, calls=[]):  # noqa: B006 - the mutable default is the point: eager keeps it between calls
    calls.append(x.sum())
    return x * len(calls)


def _counted_by_keyword(x, *, seen={}):  # noqa: B006
    seen["n"] = seen.get("n", 0) + 1
    return x * seen["n"]


@pytest.mark.parametrize("fn", [_counted, _counted_by_keyword])
def test_a_mutable_default_written_by_the_program_keeps_eagers_writes_between_calls(fn):
    # the default object is the function's, kept between calls: read, it is guarded; written, the write replays
    state = fn.__defaults__[0] if fn.__defaults__ else fn.__kwdefaults__["seen"]
    jitted = squall.jit(fn)
    for n in range(1, 5):
        assert_close(jitted(torch.ones(2)), torch.full((2,), float(n)))
    assert len(state) == 4 if isinstance(state, list) else state["n"] == 4
    # eager carries on from the same object
    assert_close(fn(torch.ones(2)), torch.full((2,), 5.0))
