"""The entry point's fast path (squall.runtime.entry_point): the entry it hit last is tried with one
C check of the tensors' metadata; every input the key holds must still pick a new entry."""
import torch
from torch.testing import assert_close

import squall


def _jitted():
    def f(a, b):
        return a * b + a

    return f, squall.jit(f)


def _hit_then(call, jf, *args):
    """Call `jf` twice on `args` (the second call comes through the fast path), then `call`."""
    jf(*args)
    jf(*args)
    return call()


def test_changed_dtype_shape_requires_grad_and_type_miss_the_recent_entry():
    f, jf = _jitted()
    a, b = torch.randn(3), torch.randn(3)
    jf(a, b), jf(a, b)
    for x, y in [
        (a.double(), b.double()),
        (torch.randn(4), torch.randn(4)),
        (torch.randn(2, 3), torch.randn(3)),
        (a.clone().requires_grad_(), b),
        (torch.nn.Parameter(a.clone()), b),
        (a.to(torch.int64), b.to(torch.int64)),
    ]:
        misses = jf.cache_info().misses
        out = jf(x, y)
        assert jf.cache_info().misses == misses + 1, (x, y)
        assert out.dtype == f(x, y).dtype and out.requires_grad == f(x, y).requires_grad
        assert_close(out, f(x, y))
        assert_close(jf(a, b), f(a, b))  # and back to the first entry


def test_grad_mode_and_default_dtype_after_a_cached_call_miss():
    f, jf = _jitted()
    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    out = _hit_then(lambda: jf(a, b), jf, a, b)
    assert out.requires_grad
    misses = jf.cache_info().misses
    with torch.no_grad():
        out = jf(a, b)
    assert not out.requires_grad and jf.cache_info().misses == misses + 1
    with torch.inference_mode():
        out = jf(a.detach(), b)
    assert_close(out, f(a.detach(), b))
    misses = jf.cache_info().misses
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        jf(a, b)
    finally:
        torch.set_default_dtype(old)
    assert jf.cache_info().misses == misses + 1


def test_other_strides_same_key_run_correctly_and_count_hits():
    f, jf = _jitted()
    a, b = torch.randn(3, 2), torch.randn(3, 2)
    jf(a, b), jf(a, b)
    t = torch.randn(2, 3).t()  # same shape and dtype, transposed strides: the key's entry, not the fast check's
    hits = jf.cache_info().hits
    assert_close(jf(t, b), f(t, b))
    assert_close(jf(a, b), f(a, b))
    assert jf.cache_info().hits == hits + 2 and jf.cache_info().misses == 1


def test_numbers_and_keywords_go_to_the_key():
    f, jf = _jitted()
    a = torch.randn(3)
    jf(a, a), jf(a, a)
    assert_close(jf(a, 2.0), f(a, 2.0))
    assert_close(jf(a, b=a), f(a, a))
    assert jf.cache_info().misses >= 2


def test_an_evicted_entry_is_forgotten():
    f = lambda a, b: a - b  # noqa: E731
    jf = squall.jit(f, cache_size=1)
    a, b = torch.randn(3), torch.randn(3)
    jf(a, b), jf(a, b)
    jf(a.double(), b.double())  # evicts the float32 entry
    assert jf.cache_info().evictions == 1
    state = jf.__squall__
    assert state._last[0] is None and len(state._fast_checks) == 0  # the evicted entry is forgotten
    misses = jf.cache_info().misses
    assert_close(jf(a, b), f(a, b))
    assert jf.cache_info().misses == misses + 1  # compiled again: the fast path did not run the evicted entry


def test_an_entry_with_symbolic_sizes_takes_the_fast_path_and_sizes_0_and_1_do_not():
    """Once sizes are symbolic, a call of a new length hits through the C check (sizes left open)
    plus a check that each open size is 2 or more: a size 1 or 0 still picks its own entry (a
    size 1 one that runs the symbolic program, which never asked whether its size is 1)."""
    from squall.runtime.jit import jitted_state

    f, jf = _jitted()
    for n in (5, 6, 7):
        a, b = torch.randn(n), torch.randn(n)
        assert_close(jf(a, b), f(a, b))
    state = jitted_state(jf)
    symbolic_slot, symbolic_entry = state.cache.last[0][0], state.last_entry
    assert jf.cache_info().misses == 2  # static, then symbolic
    for n in (9, 33, 2):
        a, b = torch.randn(n), torch.randn(n)
        assert_close(jf(a, b), f(a, b))
        assert state.cache.last[0][0] is symbolic_slot
    assert jf.cache_info().misses == 2
    for x, y in [(torch.randn(1), torch.randn(1)), (torch.randn(0), torch.randn(0)), (torch.randn(4, 2), torch.randn(4, 2)),
                 (torch.randn(8).double(), torch.randn(8).double())]:
        before = jf.cache_info()
        misses, eager = before.misses, before.eager_before_compile
        assert_close(jf(x, y), f(x, y))
        # not the symbolic entry's key: size 1 runs its program under a key of its own (`a * b + a` never
        # asks whether a size is 1), size 0 runs eagerly until it paid for a compile (squall.runtime.ski_rental),
        # the others compile
        after = jf.cache_info()
        expected = {1: (misses, eager), 0: (misses, eager + 1)}.get(x.shape[0], (misses + 1, eager))
        assert (after.misses, after.eager_before_compile) == expected, (x.shape, x.dtype)
        if x.shape[0] == 1:  # two keys, one program
            assert [state.cache.compiled(k) for k in state.cache.slots].count(symbolic_entry) == 2
        assert_close(jf(torch.ones(6), torch.ones(6)), f(torch.ones(6), torch.ones(6)))  # back to the symbolic entry


# --- positional tensors and numbers (`step(cache, kv, pos)`) --------------------------------------


def _slot_hit_last():
    from squall.runtime.jit import jitted_state

    return lambda jf: (jitted_state(jf).cache.last[0] or (None,))[0]


def test_numbers_as_the_key_holds_them_take_the_recent_entry():
    """A call of tensors and numbers found by its key becomes the fast path's recent entry, its
    numbers checked as the key holds them: a dynamic number (a scale that changes) any value of its
    type, a size symbol (a slice bound) any value of 2 or more, a number keyed by value (a flag)
    that value. Anything else goes to the key, and answers as eager."""
    hit_last = _slot_hit_last()

    def step(x, scale, n, flag):
        y = x[:n] * scale
        return y + 1 if flag else y

    jf = squall.jit(step)
    x = torch.randn(16)
    for scale, n in [(2.0, 3), (3.0, 4), (0.5, 5)]:  # scale a dynamic number, n a size symbol
        assert_close(jf(x, scale, n, True), step(x, scale, n, True))
    slot, misses = hit_last(jf), jf.cache_info().misses
    assert slot is not None
    for scale, n in [(1.5, 7), (-2.0, 2), (4.0, 16)]:
        assert_close(jf(x, scale, n, True), step(x, scale, n, True))
        assert hit_last(jf) is slot
    assert jf.cache_info().misses == misses
    for args in [(x, 2.0, 1, True), (x, 2.0, 0, True), (x, 2.0, 5, False), (x, 2, 5, True), (x, 2.0, True, True), (x.double(), 2.0, 5, True)]:
        hits = slot[1]
        assert_close(jf(*args), step(*args))
        assert slot[1] == hits, args  # not served by the recent entry
        assert_close(jf(x, 1.25, 6, True), step(x, 1.25, 6, True))  # and back
        assert slot[1] == hits + 1


# --- keyword tensors (a transformers model's `model(input_ids=..., attention_mask=...)`) --------


class _Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x=None, mask=None):
        return self.lin(x) * mask.unsqueeze(-1)


def test_keyword_tensors_take_the_recent_entry_and_anything_else_goes_to_the_key():
    from squall.runtime.jit import jitted_state

    m = _Masked()
    jm = squall.jit(m)
    state = jitted_state(jm)
    x, mask = torch.randn(2, 3, 4), torch.ones(2, 3)
    jm(x=x, mask=mask), jm(x=x, mask=mask)
    recent = state.cache.last[1]
    assert recent is not None and recent[5] == ("x", "mask")
    hits = jm.cache_info().hits
    assert_close(jm(x=x, mask=mask), m(x=x, mask=mask))
    assert jm.cache_info().hits == hits + 1 and state.cache.last[1] is recent  # through the C check
    # each of these differs in something the key holds, the names' order or the strides: not the recent
    # entry's C check, and correct
    t = torch.randn(2, 4, 3).transpose(1, 2)
    for kwargs in [dict(x=x.clone().requires_grad_(), mask=mask), dict(mask=mask, x=x), dict(x=t, mask=mask),
                   dict(x=x, mask=mask[:1].expand(2, 3)), dict(x=x.double(), mask=mask)]:
        if kwargs["x"].dtype is torch.float64:
            m.double()
        try:
            out, expected = jm(**kwargs), m(**kwargs)
        finally:
            m.float()
        assert out.dtype == expected.dtype and out.requires_grad == expected.requires_grad
        assert_close(out, expected)
        assert_close(jm(x=x, mask=mask), m(x=x, mask=mask))  # and back
    with torch.no_grad():
        out = jm(x=x.clone().requires_grad_(), mask=mask)
    assert not out.requires_grad


def test_a_keyword_that_is_not_a_tensor_goes_to_the_key_every_call():
    from squall.runtime.jit import jitted_state

    def f(x=None, scale=None):
        return x * 2 if scale is None else x * scale

    jf = squall.jit(f)
    x = torch.randn(3)
    for _ in range(3):
        assert_close(jf(x=x, scale=None), f(x=x, scale=None))
    assert jitted_state(jf).cache.last[1] is None
    assert_close(jf(x=x, scale=3.0), f(x=x, scale=3.0))


def test_keyword_tensors_of_a_symbolic_entry_take_it_for_new_lengths_and_not_for_size_1():
    from squall.runtime.jit import jitted_state

    m = _Masked()
    jm = squall.jit(m)
    state = jitted_state(jm)
    with torch.no_grad():
        for n in (5, 6, 7):
            x, mask = torch.randn(2, n, 4), torch.ones(2, n)
            assert_close(jm(x=x, mask=mask), m(x=x, mask=mask))
        symbolic = state.cache.last[1][0]
        misses = jm.cache_info().misses
        for n in (9, 2, 30):
            x, mask = torch.randn(3, n, 4), torch.rand(3, n)
            assert_close(jm(x=x, mask=mask), m(x=x, mask=mask))
            assert state.cache.last[1][0] is symbolic
        assert jm.cache_info().misses == misses
        x, mask = torch.randn(3, 1, 4), torch.rand(3, 1)  # a size of 1: a key of its own, never the symbolic one's
        served = symbolic[1]
        assert_close(jm(x=x, mask=mask), m(x=x, mask=mask))
        assert symbolic[1] == served


def test_an_evicted_keyword_entry_is_forgotten():
    f = lambda x=None, y=None: x - y  # noqa: E731
    jf = squall.jit(f, cache_size=1)
    a, b = torch.randn(3), torch.randn(3)
    jf(x=a, y=b), jf(x=a, y=b)
    jf(x=a.double(), y=b.double())  # evicts the float32 entry
    state = jf.__squall__
    assert jf.cache_info().evictions == 1 and state._last[1] is None  # the evicted entry is forgotten
    misses = jf.cache_info().misses
    assert_close(jf(x=a, y=b), f(x=a, y=b))
    assert jf.cache_info().misses == misses + 1


def test_a_keyword_call_under_autocast_is_not_served_by_the_recent_entry():
    import pytest

    from squall.runtime.jit import jitted_state

    m = _Masked()
    jm = squall.jit(m)
    x, mask = torch.randn(2, 3, 4), torch.ones(2, 3)
    jm(x=x, mask=mask), jm(x=x, mask=mask)  # the second one's entry is the recent one
    assert jitted_state(jm).cache.last[1] is not None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = m(x=x, mask=mask)
        out = jm(x=x, mask=mask)
        again = jm(x=x, mask=mask)  # the autocast state's own entry point, its own recent entry
    assert out.dtype == again.dtype == expected.dtype
    assert_close(out, expected, rtol=1.6e-2, atol=1e-2)  # the linear's bfloat16 rounding, as eager's
    assert_close(again, out, rtol=0, atol=0)
    assert not torch.equal(out, m(x=x, mask=mask))  # (that rounding shows)
    assert_close(jm(x=x, mask=mask), m(x=x, mask=mask), rtol=0, atol=0)  # and the plain call's recent entry is still its own


def test_a_negative_size_takes_the_recent_entry_only_for_negative_values():
    # an int bound of -2 or less is a negated size symbol (keyed apart from its values of 2 or more)
    hit_last = _slot_hit_last()

    def head(x, n):
        return x[:n] * 2

    jf, x = squall.jit(head), torch.randn(16)
    for n in (-3, -4, -5, -6):
        assert_close(jf(x, n), head(x, n))
    slot, misses = hit_last(jf), jf.cache_info().misses
    for n in (-2, -7, -15):
        hits = slot[1]
        assert_close(jf(x, n), head(x, n))
        assert slot[1] == hits + 1 and jf.cache_info().misses == misses
    for n in (5, -1, 1, 0, -16, -40):
        hits = slot[1]
        assert_close(jf(x, n), head(x, n))
        assert slot[1] == hits or n <= -16, n  # past the start the negated symbol's guards fail: not this program
