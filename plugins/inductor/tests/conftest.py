"""Every inductor plugin test starts with no compiled region kept on disk: a region an earlier
test or run compiled would otherwise load from inductor's cache folder without the worker, and
a test that expects its region compiled (in the worker, in process) would depend on the order
tests run in."""
from __future__ import annotations

import os

import pytest

# each test's jits start static, whatever an earlier test's jit of the same code learned
# (squall.runtime.dims_profile, on by default for users)
os.environ.setdefault("SQUALL_REMEMBER_DYNAMIC", "0")

try:
    import squall_inductor.worker as inductor_worker
except ImportError:  # not installed: the tests skip themselves, saying why
    inductor_worker = None


@pytest.fixture(autouse=True)
def _own_kept_folder(monkeypatch, tmp_path):
    if inductor_worker is not None:
        monkeypatch.setattr(inductor_worker, "kept_folder", lambda: str(tmp_path / "kept"))
