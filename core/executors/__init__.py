"""Executors that ship with squall (only the torch executor; the rest are plugins).

The package is also callable: `squall.executors()` lists every installed executor
(see `squall.explain.executors`), while `squall.executors.torch` stays importable.
"""
from __future__ import annotations

import sys
import types

from ..explain import ExecutorTable
from ..explain import executors as _installed_executors


class _CallableExecutorsPackage(types.ModuleType):
    def __call__(self, marketplace=None) -> ExecutorTable:
        """The installed executors, with availability, rank and the operations each claims."""
        return _installed_executors(marketplace)


sys.modules[__name__].__class__ = _CallableExecutorsPackage
