"""A jitted module's key (squall.runtime.entry_point): its parameters' metadata found with one C
check while it is the last call's, read attribute by attribute when that check fails; its
submodules' training flags; and the fast path its forward takes when it takes only tensors.
Every change the key held before must still pick another entry."""
import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.runtime import entry_point
from squall.runtime.jit import jitted_state


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)
        self.register_buffer("shift", torch.randn(4))

    def forward(self, x):
        return self.drop(self.lin(x)) + self.shift


class KeywordBlock(Block):
    def forward(self, x, *, scale=1.0):  # a keyword: no fast path, the general key
        return super().forward(x) * scale


def _calls(jitted, module, x, **kwargs):
    """Two calls (the second a hit), each against eager; the misses after them."""
    for _ in range(2):
        with torch.no_grad():
            assert_close(jitted(x, **kwargs), module(x, **kwargs))
    return jitted.cache_info().misses


@pytest.mark.parametrize("cls", [Block, KeywordBlock])
def test_each_parameter_change_picks_another_entry_and_matches_eager(cls):
    torch.manual_seed(0)
    m = cls().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    misses = _calls(j, m, x)
    changes = [
        lambda: m.lin.weight.requires_grad_(False),  # requires_grad flipped
        # a new parameter with the first entry's metadata: that entry again, reading its values
        lambda: setattr(m.lin, "weight", nn.Parameter(torch.randn(4, 4))),
        lambda: setattr(m, "shift", m.shift.double()),  # a buffer's dtype
        lambda: setattr(m, "shift", torch.randn(1)),  # a buffer's shape
    ]
    compiles = [1, 0, 1, 1]
    for change, expected in zip(changes, compiles):
        change()
        now = _calls(j, m, x)
        assert now == misses + expected, change
        misses = now


def test_a_training_flag_flipped_deep_inside_compiles_again_and_back_hits():
    torch.manual_seed(0)
    m = Block().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    misses = _calls(j, m, x)
    m.drop.train()  # one inner module only
    torch.manual_seed(1)
    with torch.no_grad():
        out = j(x)
    assert j.cache_info().misses == misses + 1
    assert (out == m.shift).any()  # dropout ran: some outputs are the shift alone
    m.drop.eval()
    assert _calls(j, m, x) == misses + 1  # the eval entry again


def test_grad_mode_and_the_same_parameters_hit_through_the_c_check():
    m = Block().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    misses = _calls(j, m, x)
    state = jitted_state(j)
    check, metadata = state._parameter_key.last
    assert check is not entry_point._never
    assert state._training_read[0] is entry_point._TRAINING_IN_DICT  # nn.Module keeps the flag in __dict__
    hits = j.cache_info().hits
    for _ in range(3):
        with torch.no_grad():
            j(x)
    assert j.cache_info().hits == hits + 3 and j.cache_info().misses == misses
    assert state._parameter_key.last[1] is metadata
    out = j(x)  # grad mode: another entry
    assert out.requires_grad and j.cache_info().misses == misses + 1
    assert_close(out, m(x))


def test_without_the_c_check_every_call_reads_the_metadata_and_stays_correct(monkeypatch):
    monkeypatch.setattr(entry_point, "_TensorGuards", None)
    m = Block().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    misses = _calls(j, m, x)
    assert jitted_state(j)._parameter_key.last[0] is entry_point._never
    m.lin.weight.requires_grad_(False)
    assert _calls(j, m, x) == misses + 1
    with torch.no_grad():
        m.lin.bias.add_(1.0)  # values are read at every call
    assert _calls(j, m, x) == misses + 1


def test_a_check_built_under_other_dispatch_state_is_built_again():
    m = Block().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _calls(j, m, x)
    with torch.inference_mode():  # the last check's dispatch keys differ here: found again, correct
        assert_close(j(x), m(x))
        assert_close(j(x), m(x))
    _calls(j, m, x)


def test_a_training_flag_a_class_defines_is_read_as_an_attribute():
    class Frozen(nn.Module):
        training = property(lambda self: self.__dict__.get("_mode", False), lambda self, v: self.__dict__.__setitem__("_mode", v))

        def forward(self, x):
            return x * 2 if self.training else x

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Frozen()

        def forward(self, x):
            return self.inner(x) + 1

    m = Outer().eval()
    j = squall.jit(m)
    assert jitted_state(j)._training_read[0] is entry_point._TRAINING_ATTRIBUTE
    x = torch.randn(3)
    misses = _calls(j, m, x)
    m.inner.train()
    assert _calls(j, m, x) == misses + 1


def test_a_removed_parameter_makes_the_module_compile_for_its_new_layout():
    m = Block().eval()
    j = squall.jit(m)
    x = torch.randn(2, 4)
    _calls(j, m, x)
    m.lin.bias = None
    _calls(j, m, x)
    del m.shift
    m.register_buffer("shift", torch.zeros(4))
    _calls(j, m, x)


def test_an_argument_the_key_cannot_tell_apart_is_refused_naming_it():
    class Takes(nn.Module):
        def forward(self, x, *, extra=None):
            return x + 1

    j = squall.jit(Takes())
    with pytest.raises(TypeError, match="keyword argument 'extra' is a set, which is neither a tensor"):
        j(torch.randn(2), extra={1, 2})



def test_a_module_with_symbolic_sizes_takes_the_fast_path_for_new_lengths():
    m = Block().eval()
    j = squall.jit(m)
    state = jitted_state(j)
    with torch.no_grad():
        for n in (3, 5, 7):  # the batch changes: symbolic from the second compile
            x = torch.randn(n, 4)
            assert_close(j(x), m(x))
        misses, symbolic = j.cache_info().misses, state.cache.last[0][0]
        for n in (9, 2, 40):
            x = torch.randn(n, 4)
            assert_close(j(x), m(x))
            assert state.cache.last[0][0] is symbolic  # through the fast path's C check
        assert j.cache_info().misses == misses
        m.lin.weight.requires_grad_(False)  # the parameters' metadata still picks another entry
        x = torch.randn(9, 4)
        assert_close(j(x), m(x))
        assert j.cache_info().misses == misses + 1
