"""Random number generators a traced program touches: eager's draws, never the trace's.

A trace replays torch's random operations at every call, from torch's global generator. What
it cannot replay is the program changing a generator while it runs: `torch.manual_seed(3)`
inside the compiled function would seed once, at trace time, and every cached call after it
would draw other numbers than eager; `random.uniform(0, 1)` or `numpy.random.rand()` would be
drawn once and frozen into the trace as a constant. So tracing notes the state of torch's CPU
generator, Python's `random` and numpy's global `RandomState` (once numpy.random is imported)
before the program runs and compares after: a change is put back as it was
(the traced run draws nothing eager would not) and refused as an `UnreplayableWrite` naming the
source line that made it, so the call runs eagerly (squall.jit), drawing eager's numbers.
"""
from __future__ import annotations

import dis
import importlib
import random
import sys
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..proxies import real_tensor
from .state_views import UnreplayableWrite

__all__ = ["random_state_kept", "torch_generators", "restore_torch_generators"]

# names a program calls to seed or draw: torch's seeding, Python's and numpy's module functions
_TORCH_SEEDING = frozenset({"manual_seed", "seed", "set_rng_state", "fork_rng"})
_PYTHON_RANDOM = frozenset(name for name in dir(random.Random) if not name.startswith("_")) | {"random"}
_NUMPY_RANDOM = _PYTHON_RANDOM | {"rand", "randn", "random_sample", "standard_normal", "normal", "permutation", "set_state", "default_rng"}


def torch_generators() -> tuple:
    """The state of torch's default generators a program's random operations draw from: the
    CPU's and, once CUDA is initialized, each CUDA device's (`restore_torch_generators` puts it back)."""
    return torch.get_rng_state(), (torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None)


def restore_torch_generators(state: tuple) -> None:
    """Put torch's default generators back as `torch_generators()` found them."""
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _numpy_random() -> Any:
    # numpy loads numpy.random lazily, and torch or a library may first import it in the middle of
    # a trace: once numpy itself is loaded, import it before the program runs (once per process)
    # so its state can be compared. Without numpy loaded, it is noted only if the program loads it.
    if "numpy" in sys.modules and "numpy.random" not in sys.modules:
        importlib.import_module("numpy.random")
    return sys.modules.get("numpy.random")


def _states() -> dict[str, Any]:
    states = {"torch's random number generator": torch.get_rng_state(), "Python's random module": random.getstate()}
    numpy_random = _numpy_random()
    if numpy_random is not None:
        states["numpy.random"] = numpy_random.get_state()
    return states


def _same(what: str, a: Any, b: Any) -> bool:
    if real_tensor(a):
        return torch.equal(a, b)
    if what == "numpy.random":  # ('MT19937', key array, pos, has_gauss, cached_gaussian)
        return a[0] == b[0] and bool((a[1] == b[1]).all()) and a[2:] == b[2:]
    return a == b  # Python's: a tuple of ints, compared in C


def _restore(what: str, state: Any) -> None:
    if what.startswith("torch"):
        torch.set_rng_state(state)
    elif what.startswith("Python"):
        random.setstate(state)
    else:
        _numpy_random().set_state(state)


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _line_naming(codes: Iterable[types.CodeType], names: frozenset[str]) -> str | None:
    """Where one of `codes` reads one of `names` (an attribute, method or global), as file:line."""
    for top in codes:
        for code in _code_objects(top):
            for ins in dis.get_instructions(code):
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "IMPORT_FROM") and ins.argval in names:
                    return f"{code.co_filename}:{ins.positions.lineno}"
    return None


@contextmanager
def random_state_kept(codes: Any) -> Iterator[None]:
    """Trace inside: a random number generator the program changed is put back, and the
    change refused (UnreplayableWrite) naming the line; `codes()` gives the code objects of the
    functions the program ran (to find that line)."""
    before = _states()
    failed = True
    try:
        yield
        failed = False
    finally:
        after = _states()
        changed = [what for what, state in before.items() if not _same(what, state, after[what])]
        for what in changed:
            _restore(what, before[what])
        # numpy.random first imported while traced: refused only where the program's own code
        # names a numpy.random function (importing it is no draw; whatever it drew is not put back)
        if any(what not in before for what in after) and _line_naming(codes(), _NUMPY_RANDOM) is not None:
            changed.append("numpy.random")
    if changed and not failed:
        names = _TORCH_SEEDING if changed[0].startswith("torch") else _PYTHON_RANDOM
        where = _line_naming(codes(), names) or "the compiled function"
        raise UnreplayableWrite(
            f"squall: the program changes {' and '.join(changed)} ({where}): seeding or drawing there at trace "
            "time would be done once, not at every call as eager does"
        )
