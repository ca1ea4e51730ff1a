"""In the compile worker: a one-unit region's C++ built as two units side by side, where a core is spare.

A static CPU region with a matmul compiles with inductor's C++ wrapper as one translation unit
(worker_main.compile_static): one compiler run, 3.6-4.1 s of CPU for gpt2's whole-model region
cold, about 3 s of it parsing ATen's headers (the wrapper's `cpp_wrapper/cpu.h` and the kernels'
`cpp_prefix.h`, 1.9 and 1.8 s alone). None of that can start before lowering ends: g++ lexes a
whole unit before it parses any of it (a unit started early on the headers, its rest piped in
later, took as long after the rest arrived as a whole compile), and a precompiled header of the
wrapper's headers costs more to build (5.3 s) than it saves that compile (1.2 s).

With `cpp_wrapper_build_separate`, inductor writes the wrapper (built at -O1) and the kernels
(built at -O3, as in one unit) as two units and links them: 2.0 + 2.4 + 0.35 s of CPU one after
the other, more than one unit's 3.6-4.1 s, but 2.4 + 0.35 s of wall time side by side on two
cores. So `side_by_side` builds them in two compiler processes at once, where `spare_cores`
finds a core nobody runs on (the user's calls, other jobs): on a 2-core machine whose user waits
for the upgrade; not while the user's thread computes (then two compilers would share the one
core the worker has, and take longer than one unit). SQUALL_INDUCTOR_SPLIT_BUILD=1 or =0 decides
instead.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch._inductor.config as inductor_config
from torch._inductor import codecache
from torch.utils._filelock import FileLock

from squall_inductor.timeline import mark
from squall_inductor.worker import env_flag, usable_cores

__all__ = ["SPLIT_BUILD_ENV", "spare_cores", "split_build_settings", "side_by_side"]

SPLIT_BUILD_ENV = "SQUALL_INDUCTOR_SPLIT_BUILD"

# how many times, and how far apart, the runnable tasks are counted (the largest count counts):
# a user's loop of calls is runnable nearly all the time, so a few looks find it
_LOOKS, _LOOK_APART_S = 5, 0.01


def spare_cores() -> int:
    """How many of the cores this process may run on no runnable task uses now: those cores less
    the runnable tasks the kernel counts (/proc/loadavg's fourth field, this process included),
    the largest count of a few looks 10 ms apart. 0 where the count cannot be read (not Linux)."""
    cores = usable_cores()
    busiest = 0
    try:
        for look in range(_LOOKS):
            with open("/proc/loadavg") as f:
                busiest = max(busiest, int(f.read().split()[3].split("/")[0]))
            if look + 1 < _LOOKS:
                time.sleep(_LOOK_APART_S)
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, cores - busiest)


def split_build_settings() -> dict[str, Any]:
    """The inductor settings that split a one-unit region's C++ into wrapper and kernels (to be
    built by `side_by_side`), where that pays now: as SQUALL_INDUCTOR_SPLIT_BUILD says where set, else
    where `spare_cores` finds one; {} where not, or where this inductor has no such setting."""
    if not hasattr(inductor_config, "cpp_wrapper_build_separate") or not hasattr(codecache, "_worker_compile_cpp"):
        return {}
    if os.environ.get(SPLIT_BUILD_ENV, "").strip():
        split = env_flag(SPLIT_BUILD_ENV, False)
    else:
        split = spare_cores() >= 1
    return {"cpp_wrapper_build_separate": True} if split else {}


@contextlib.contextmanager
def side_by_side() -> Iterator[None]:
    """While inside: where inductor builds a split C++ wrapper (its wrapper, its kernels, then the
    link), the first two are built at once, each in its own compiler process; any other build runs
    as inductor runs it. Builds are inductor's own (`CppBuilder.build`), under its file lock."""
    inductor_build = codecache._worker_compile_cpp

    def build(lock_path: str, builders: Sequence[Any]) -> None:
        if len(builders) != 3:  # one unit, or anything else: as inductor does
            return inductor_build(lock_path, builders)
        with FileLock(lock_path, timeout=codecache.LOCK_TIMEOUT):
            errors: list[BaseException] = []

            def one(builder: Any) -> None:
                try:
                    if not os.path.exists(builder.get_target_file_path()):
                        builder.build()  # a compiler process: this thread waits without the GIL
                except BaseException as e:  # noqa: BLE001 - raised below, in the caller's thread
                    errors.append(e)

            threads = [threading.Thread(target=one, args=(b,), name="squall-inductor-build") for b in builders[:2]]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
            mark("worker: wrapper and kernels built side by side")
            if not os.path.exists(builders[2].get_target_file_path()):
                builders[2].build()

    codecache._worker_compile_cpp = build
    try:
        yield
    finally:
        codecache._worker_compile_cpp = inductor_build
