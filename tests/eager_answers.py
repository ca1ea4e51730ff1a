"""What the tests of programs squall does not model check: the jitted call answers as eager does
(squall.ltorch.unmodelled: it runs eagerly), writes into its inputs as eager does, and says so
once with a SquallWarning."""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable

import torch
from torch.testing import assert_close

import squall


def runs_eagerly_saying(fn: Callable, make: Callable[[], tuple], reason: str) -> None:
    """`fn` on `make()`'s arguments, jitted, at a first and a cached call: eager's answer and eager's
    writes into the arguments; the first call warns once that it runs eagerly, matching `reason`."""
    jitted = squall.jit(fn)
    said = []
    for _ in range(2):
        eager_args, squall_args = make(), make()
        expected = fn(*eager_args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = jitted(*squall_args)
        assert_close(got, expected)
        assert_close([a for a in squall_args if isinstance(a, torch.Tensor)], [a for a in eager_args if isinstance(a, torch.Tensor)])
        said.append([str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning) and "runs eagerly" in str(w.message)])
    first, cached = said
    assert len(first) == 1 and re.search(reason, first[0], re.S), first
    assert not cached, cached
