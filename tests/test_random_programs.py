"""Seeded random programs (tests/random_programs.py) against eager, each called over several
size sets: sizes that change between calls, become 0 or 1 and come back, broadcast operands of
1 or the batch, size-derived slices, splits, factories and control flow. Under the default
policy (automatic dynamic), `dynamic=True`, and with transposed inputs at every other call.
A failure prints the program; `python tests/random_programs.py FIRST COUNT` runs more."""
from __future__ import annotations

import pytest

import squall
from random_programs import check_program, generate

# 300 programs, each called 4 to 7 times: a few seconds per group
_GROUPS = range(0, 300, 50)


def _check_all(seeds, jit, transposed=False):
    failed = {seed: problems for seed in seeds if (problems := check_program(seed, jit, transposed))}
    report = [f"program {seed}:\n{generate(seed)}" + "\n".join(problems) for seed, problems in list(failed.items())[:3]]
    assert not failed, f"{len(failed)} of {len(seeds)} programs differ from eager (seeds {sorted(failed)}); the first:\n" + "\n\n".join(report)


@pytest.mark.parametrize("first", _GROUPS)
def test_random_programs_match_eager_under_automatic_dynamic(first):
    _check_all(range(first, first + 50), squall.jit)


@pytest.mark.parametrize("first", _GROUPS[:2])
def test_random_programs_match_eager_with_every_size_symbolic(first):
    _check_all(range(first, first + 50), lambda fn: squall.jit(fn, dynamic=True))


def test_random_programs_match_eager_when_inputs_change_strides():
    _check_all(range(1000, 1050), squall.jit, transposed=True)
