"""Generated source's compiled code kept on disk (squall.sources): a new process skips compile()."""
from __future__ import annotations

import marshal
import os
import subprocess
import sys

import pytest

from squall import sources
from squall.sources import load_source

# long enough to be kept on disk; the body's result tells a stale code object from the right one
LONG = "def f(x):\n" + "".join(f"    x = x + {i}\n" for i in range(400)) + "    return x\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sources, "_COMPILED", type(sources._COMPILED)())  # this test's own memory
    return tmp_path / "code"


def test_a_long_source_s_code_is_kept_on_disk_and_read_back_instead_of_compiled(cache, monkeypatch):
    space: dict = {}
    load_source(LONG, "test", space)
    (kept,) = cache.iterdir()
    assert marshal.loads(kept.read_bytes()).co_filename == "<squall>"
    sources._COMPILED.clear()  # as a new process

    def refuse(*args, **kwargs):
        raise AssertionError("compiled although its code was on disk")

    monkeypatch.setattr(sources, "compile", refuse, raising=False)
    again: dict = {}
    name = load_source(LONG, "test", again)
    assert again["f"](0) == space["f"](0) == sum(range(400))
    assert again["f"].__code__.co_filename == name  # tracebacks still name this load


def test_a_short_source_is_not_kept(cache):
    load_source("def g():\n    return 1\n", "test", {})
    assert not cache.exists()


def test_a_damaged_kept_file_is_compiled_again_and_replaced(cache):
    load_source(LONG, "test", {})
    (kept,) = cache.iterdir()
    kept.write_bytes(b"not marshal data")
    sources._COMPILED.clear()
    space: dict = {}
    load_source(LONG, "test", space)
    assert space["f"](1) == 1 + sum(range(400))
    assert marshal.loads(kept.read_bytes()).co_filename == "<squall>"


def test_a_different_source_never_reads_another_s_code(cache):
    other = LONG.replace("x + 399", "x + 1000")
    first: dict = {}
    second: dict = {}
    load_source(LONG, "test", first)
    sources._COMPILED.clear()
    load_source(other, "test", second)
    assert second["f"](0) - first["f"](0) == 1000 - 399
    assert len(list(cache.iterdir())) == 2


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a POSIX user for whom a read-only folder is read-only")
def test_an_unwritable_cache_folder_only_costs_compiling(tmp_path, monkeypatch):
    tmp_path.chmod(0o500)
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "inner"))
    space: dict = {}
    load_source(LONG, "test", space)
    assert space["f"](0) == sum(range(400))


def test_an_unwritable_cache_folder_only_costs_compiling_even_as_root(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would go")
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(blocker))
    monkeypatch.setattr(sources, "_COMPILED", type(sources._COMPILED)())
    space: dict = {}
    load_source(LONG, "test", space)
    assert space["f"](0) == sum(range(400))


def test_a_second_process_compiles_a_model_with_code_read_from_disk(tmp_path):
    script = ("import torch, squall\n"
              "from squall import sources\n"
              "m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(12)])\n"
              "torch.manual_seed(0); x = torch.randn(2, 8)\n"
              "torch.testing.assert_close(squall.jit(m)(x), m(x))\n")
    env = {**os.environ, "SQUALL_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], check=True, env=env)
    kept = sorted((tmp_path / "code").iterdir())
    assert kept
    subprocess.run([sys.executable, "-c", script], check=True, env=env)
    assert sorted((tmp_path / "code").iterdir()) == kept  # the same sources: nothing new written
