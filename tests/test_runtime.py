"""Call time (squall.runtime): one record per cache entry, one place that swaps its program."""
from __future__ import annotations

import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.runtime.entry import CompiledEntry
from squall.runtime.jit import jitted_state


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale


def test_an_entry_set_aside_lives_in_its_record_and_comes_back_with_its_state():
    m = Scaled()
    j = squall.jit(m)
    x = torch.randn(2, 3)
    assert_close(j(x), m(x))
    state = jitted_state(j)
    (record,) = state.cache.entries.values()
    first = record.compiled
    assert record.slot is state._cache[record.key] and record.set_aside == []
    m.scale = 3.0
    assert_close(j(x), m(x))
    assert record.set_aside == [first] and record.compiled is not first
    m.scale = 2.0
    assert_close(j(x), m(x))
    assert record.compiled is first and state.cache_info().misses == 2  # back, not compiled again
    assert len(state.cache.entries) == 1  # one key, one record


def test_swap_changes_a_slot_only_where_it_still_runs_what_it_replaces():
    j = squall.jit(lambda a: a * 2)
    a = torch.randn(3)
    j(a)
    state = jitted_state(j)
    (record,) = state.cache.entries.values()
    program = record.slot[0]
    replaced = CompiledEntry(record.compiled.compilation, 0.0)
    assert not state.cache.swap(record, lambda a: a * 3, replacing=lambda a: a)
    assert record.slot[0] is program
    assert state.cache.swap(record, lambda a: a * 3, compiled=replaced, replacing=program)
    assert record.compiled is replaced
    assert_close(j(a), a * 3)  # the hot path runs what the slot holds now


def test_an_evicted_entry_with_nothing_to_remember_is_forgotten():
    j = squall.jit(lambda a: a + 1, cache_size=1)
    j(torch.randn(2))
    j(torch.randn(3))
    state = jitted_state(j)
    assert state.cache_info().evictions == 1
    assert len(state.cache.entries) == 1 and len(state._cache) == 1
    assert_close(j(torch.ones(2)), torch.full((2,), 2.0))
