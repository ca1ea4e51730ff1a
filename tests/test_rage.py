"""Compile records (squall.runtime.rage), `squall rage` bundles, reproducers and SQUALL_LOGS topics."""
from __future__ import annotations

import io
import json
import logging
import os
import re
import stat
import subprocess
import sys
import textwrap
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

import squall
from squall.market import plugins
from squall.market.plugins import Marketplace
from squall.runtime import rage
from squall.tools import bundle
from squall.tools.cli import build_parser
from squall.tools.cli import main as cli_main

PLANTED = '''
import squall.extend

def checker(*args, **kwargs):
    raise RuntimeError("planted checker exploded")

def impl(*args, **kwargs):
    raise RuntimeError("planted kernel crashed")

squall.extend.add_operator_executor("planted", {"torch.nn.functional.softmax": ("softmax", checker, impl)})
squall.extend.add_operator_executor("crashing", {"torch.nn.functional.softmax": ("softmax", None, impl)})
'''


@pytest.fixture
def records(tmp_path, monkeypatch):
    """A recorder of the test's own (and a marketplace with only the torch executor)."""
    monkeypatch.setenv("SQUALL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SQUALL_RAGE", raising=False)
    recorder = rage.Recorder()
    monkeypatch.setattr(rage, "_default", recorder)
    monkeypatch.setattr(plugins, "_default", Marketplace(entry_point_group=None))
    return recorder


def _planted(tmp_path: Path, monkeypatch) -> Path:
    """Register the planted executors in this test's marketplace; the folder that holds them."""
    import importlib

    folder = tmp_path / "plugin"
    folder.mkdir(exist_ok=True)
    (folder / "planted.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "planted", raising=False)
    importlib.import_module("planted")
    return folder


def _user_program(tmp_path: Path) -> Path:
    """A user's file with recognizable source lines, values and path."""
    folder = tmp_path / "alice_private_project"
    folder.mkdir()
    path = folder / "secret_model.py"
    path.write_text(textwrap.dedent('''
        import torch

        def attention_scores(x, w):
            scores = torch.nn.functional.softmax(x @ w, dim=-1)  # proprietary_trick_42
            return scores * 2

        def data_dependent(x):
            return torch.nonzero(x > 0)  # confidential_filter_7
    '''))
    return path


def _load(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("secret_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs(recorder: rage.Recorder) -> list[bundle.Run]:
    recorder.flush()
    return bundle.load_runs(recorder.directory)


def test_a_successful_compilation_leaves_a_record(records):
    def f(x, w, scale):
        return torch.softmax(x @ w, dim=-1) * scale

    fn = squall.jit(f, executors=["torch"])
    x = torch.full((3, 4), 98765.4321)
    fn(x, torch.randn(4, 5), 2.5)
    fn(x, torch.randn(4, 5), 2.5)  # a cache hit: no second record
    fn(torch.randn(6, 4), torch.randn(4, 5), 2.5)  # a new shape: a second record, with the cause
    (run,) = _runs(records)
    assert run.header["versions"]["torch"] == torch.__version__
    assert run.header["argv"] == sys.argv
    first, second = run.compilations
    assert first["function"].endswith("f") and first["outcome"] == "ok" and first["line"] > 0
    assert first["inputs"][0] == {"where": "args[0]", "tensor": True, "shape": [3, 4], "dtype": "torch.float32", "device": "cpu", "requires_grad": False}
    assert first["inputs"][2] == {"where": "args[2]", "type": "float", "value": 2.5}
    assert first["executors"]["order"] == ["torch"] and first["executors"]["source"] == "jit(executors=...)"
    assert set(first["seconds"]) >= {"trace", "plan", "generate"}
    ops = [d[0] for d in first["plans"][0]["decisions"] if d[1] == 0]
    assert ops == ["torch.matmul", "torch.softmax", "torch.mul"]
    assert "def " in first["source"]
    assert [t["provenance"].split()[0] for t in first["traces"]] == ["traced", "planned", "execution"]
    assert second["recompilation"] == {"compilations": 2, "changes": {"argument 'x'": 1}}
    # never a tensor value (as JSON or torch would print it; a timing's digits may hold "98765")
    assert not re.search(r"98765\.4|9\.8765", records.path.read_text())


def test_a_failed_compilation_leaves_a_record_with_its_traceback(records, tmp_path):
    user = _load(_user_program(tmp_path))
    with pytest.raises(squall.DataDependentError, match="torch.nonzero"):
        squall.jit(user.data_dependent, strict=True)(torch.randn(5))
    (run,) = _runs(records)
    (c,) = run.compilations
    assert c["outcome"] == "failed" and c["stage"] == "trace"
    assert c["error"]["type"] == "squall.ltorch.base.DataDependentError"
    assert "confidential_filter_7" in c["error"]["traceback"]  # the user's line, kept unless redacted
    assert run.failed and run.outcome == "failed: DataDependentError"


def test_recording_keeps_warnings_visible_and_records_them(records):
    def f(x):
        return torch.special.bessel_j0(x) + 1  # not in squall's torch language: an opaque call

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        squall.jit(f, executors=["torch"])(torch.randn(3))
    assert any("opaque" in str(w.message) for w in caught)  # the user still sees it
    (run,) = _runs(records)
    assert any("opaque" in w["message"] for w in run.compilations[0]["warnings"])


def test_first_call_failure_is_recorded_and_reproduced(records, tmp_path, monkeypatch):
    folder = _planted(tmp_path, monkeypatch)

    def f(x):
        return torch.nn.functional.softmax(x, dim=-1) + 1

    # with checked execution on (the default), squall replans around the crashing executor;
    # off, the crash reaches the user, and the record is what a bug report needs
    monkeypatch.setenv("SQUALL_CHECK", "never")
    fn = squall.jit(f, executors=["crashing", "torch"])
    with pytest.raises(RuntimeError, match="planted kernel crashed"):
        fn(torch.randn(2, 3))
    (run,) = _runs(records)
    (c,) = run.compilations
    assert c["outcome"] == "first call failed" and "planted kernel crashed" in c["error"]["traceback"]
    script = tmp_path / "repro.py"
    script.write_text(c["reproducer"])
    result = _run_reproducer(script, folder)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "planted kernel crashed" in result.stderr and "reproduced" in result.stdout


def _run_reproducer(script: Path, plugin_folder: Path | None) -> subprocess.CompletedProcess:
    # the maintainer's machine: the plugin the user had installed is importable (or not)
    setup = f"import sys; sys.path.insert(0, {str(plugin_folder)!r}); import planted; " if plugin_folder else ""
    code = f"{setup}import runpy; runpy.run_path({str(script)!r}, run_name='__main__')"
    env = {**os.environ, "SQUALL_RAGE": "0"}
    env.pop("SQUALL_EXECUTORS", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_the_reproducer_reproduces_a_plugin_whose_checker_raises(records, tmp_path, monkeypatch):
    folder = _planted(tmp_path, monkeypatch)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 6)
            self.register_buffer("offset", torch.ones(6))

        def forward(self, x):
            return torch.nn.functional.softmax(self.lin(x) + self.offset, dim=-1)

    fn = squall.jit(Net(), executors=["planted", "torch"])
    out = fn(torch.randn(3, 4))  # a raising checker never breaks the program: torch takes the call
    assert out.shape == (3, 6)
    (run,) = _runs(records)
    (c,) = run.compilations
    assert c["outcome"] == "plugin errors" and run.outcome == "plugin errors"
    assert any("planted checker exploded" in e for p in c["plans"] for e in p["errors"])
    script = tmp_path / "repro.py"
    script.write_text(c["reproducer"])
    reproduced = _run_reproducer(script, folder)
    assert reproduced.returncode == 1, reproduced.stdout + reproduced.stderr
    assert "planted checker exploded" in reproduced.stdout
    missing = _run_reproducer(script, None)  # without the plugin: says so, exit 2
    assert missing.returncode == 2 and "unknown executor 'planted'" in missing.stderr


def test_a_reproducer_of_a_healthy_program_does_not_reproduce(tmp_path):
    """The reproducer rebuilds a real model's trace (the demo GPT's, with captured constants
    and a module's parameters) and compiles it cleanly: exit 0."""
    from squall.tools.demo import GPT, GPTConfig
    from squall.runtime.repro import reproducer

    model = GPT(GPTConfig(vocab_size=64, block_size=8, n_layer=1, n_head=2, n_embd=16, flash=False)).eval()
    idx = torch.randint(0, 64, (2, 8))
    fn = squall.jit(model, executors=["torch"])
    with torch.no_grad():
        fn(idx, idx)
    traced = squall.last_traces(fn).traced
    script = tmp_path / "repro.py"
    script.write_text(reproducer(traced, {"function": "GPT", "grad_enabled": False, "executors": {"order": ["torch"]}}))
    result = _run_reproducer(script, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "did not reproduce" in result.stdout


def test_pruning_keeps_the_newest_runs_within_count_and_size(tmp_path):
    directory = tmp_path / "rage"
    directory.mkdir()
    for i in range(12):
        path = directory / f"run-old-{i:02d}.jsonl"
        path.write_text(json.dumps({"kind": "run", "time": i}) + "\n" + "x" * 1000 + "\n")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    recorder = rage.Recorder(directory, max_runs=5, max_bytes=10 ** 9)
    assert recorder.write({"kind": "compilation", "seq": 1})
    names = sorted(p.name for p in directory.glob("run-*.jsonl"))
    assert len(names) == 5 and recorder.path.name in names
    assert set(names) - {recorder.path.name} == {f"run-old-{i:02d}.jsonl" for i in range(8, 12)}  # the oldest went first
    old_size = (directory / "run-old-11.jsonl").stat().st_size
    small = rage.Recorder(directory, max_runs=100, max_bytes=recorder.path.stat().st_size + 2 * old_size + 1)
    assert small.prune() == 2  # the newest and two old ones fit
    assert recorder.path.exists() and (directory / "run-old-11.jsonl").exists() and not (directory / "run-old-09.jsonl").exists()


def test_a_run_past_its_size_keeps_summaries_not_texts(tmp_path):
    recorder = rage.Recorder(tmp_path, max_run_bytes=3000)
    big = {"kind": "compilation", "seq": 1, "outcome": "ok", "source": "x" * 5000, "traces": [{"text": "y" * 5000}]}
    assert recorder.write(big)
    lines = recorder.path.read_text().splitlines()
    kept = json.loads(lines[-1])
    assert kept["truncated"] and "source" not in kept and kept["outcome"] == "ok"


def test_an_unwritable_directory_means_no_record_and_one_warning(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        blocker = tmp_path / "a_file"  # root writes anywhere: a file where the folder should be
        blocker.write_text("")
        directory = blocker / "rage"
    else:
        directory = tmp_path / "ro"
        directory.mkdir()
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    recorder = rage.Recorder(directory)
    monkeypatch.setattr(rage, "_default", recorder)
    fn = squall.jit(lambda x: x * 2, executors=["torch"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(fn(torch.ones(2)), torch.full((2,), 2.0))
        fn2 = squall.jit(lambda x: x + 2, executors=["torch"])
        fn2(torch.ones(2))
    about = [w for w in caught if "compile records are off" in str(w.message)]
    assert len(about) == 1 and recorder.disabled_because


def test_recording_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUALL_RAGE", "0")
    recorder = rage.Recorder(tmp_path / "rage")
    monkeypatch.setattr(rage, "_default", recorder)
    squall.jit(lambda x: x * 2, executors=["torch"])(torch.ones(2))
    assert not (tmp_path / "rage").exists()


_WRITER = '''
import sys, torch, squall
for i in range(int(sys.argv[1])):
    squall.jit(lambda x: x * i, executors=["torch"])(torch.ones(i + 1))
'''


def test_several_processes_write_at_once(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env = {**os.environ, "SQUALL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("SQUALL_RAGE", None)
    procs = [subprocess.Popen([sys.executable, str(script), "6"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    runs = bundle.load_runs(tmp_path / "cache" / "rage")
    assert len(runs) == 4 and len({r.header["pid"] for r in runs}) == 4
    for run in runs:
        assert run.damaged_lines == 0
        assert [c["seq"] for c in run.compilations] == [1, 2, 3, 4, 5, 6]
        assert all(c["traces"] for c in run.compilations[-1:])  # printed at exit


def test_threads_share_one_run_file(records):
    import threading

    errors = []

    def work(i):
        try:
            squall.jit(lambda x: x + i, executors=["torch"])(torch.ones(i + 1))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    (run,) = _runs(records)
    assert sorted(c["seq"] for c in run.compilations) == [1, 2, 3, 4, 5, 6] and run.damaged_lines == 0


# --- squall rage ---------------------------------------------------------------------------------


def _cli(*argv: str, capsys) -> tuple[int, str, str]:
    code = cli_main(["rage", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_lists_bundles_and_clears(records, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _cli(capsys=capsys)
    assert code == 0 and "no records yet" in out
    assert _cli("--failed", capsys=capsys)[0] == 1  # nothing to bundle
    user = _load(_user_program(tmp_path))
    # kept alive, as a user's compiled function is: its traces are printed when records are flushed
    scores = squall.jit(user.attention_scores, executors=["torch"])
    scores(torch.randn(2, 3), torch.randn(3, 3))
    with pytest.raises(squall.DataDependentError):
        squall.jit(user.data_dependent, executors=["torch"], strict=True)(torch.randn(4))
    records.flush()
    code, out, _ = _cli(capsys=capsys)
    assert code == 0
    assert "  1  " in out and "attention_scores, data_dependent (2 compilations)" in out and "failed: DataDependentError" in out
    assert _cli("7", capsys=capsys)[0] == 2  # no such run

    code, out, _ = _cli("--failed", "-o", str(tmp_path / "b.zip"), capsys=capsys)
    assert code == 0 and f"wrote {tmp_path / 'b.zip'}" in out and "records.json" in out  # shown before written
    with zipfile.ZipFile(tmp_path / "b.zip") as z:
        names = z.namelist()
        readme = z.read("squall-rage/README.md").decode()
    assert "squall-rage/records.json" in names
    assert any(n.startswith("squall-rage/traces/1_") for n in names) and any(n.startswith("squall-rage/generated/1_") for n in names)
    assert "## 2. " in readme and "DataDependentError" in readme and "torch " + torch.__version__ in readme

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    args = build_parser().parse_args(["rage", "--last", "-o", str(tmp_path / "asked.zip")])
    assert bundle.rage_command(args, stdin=Terminal("n\n")) == 1  # at a terminal, it asks first
    assert "write this bundle?" in capsys.readouterr().out and not (tmp_path / "asked.zip").exists()
    assert bundle.rage_command(args, stdin=Terminal("y\n")) == 0 and (tmp_path / "asked.zip").exists()

    code, out, _ = _cli("--last", "--show", capsys=capsys)
    assert code == 0 and "===== README.md =====" in out

    code, out, _ = _cli("--clear", capsys=capsys)
    assert code == 0 and "deleted 1 run record" in out
    assert _cli("--last", capsys=capsys)[0] == 1


def test_a_redacted_bundle_holds_no_source_path_or_value_of_the_users(records, tmp_path, capsys, monkeypatch):
    folder = _planted(tmp_path, monkeypatch)

    path = _user_program(tmp_path)
    user = _load(path)
    monkeypatch.chdir(path.parent)
    monkeypatch.setattr(sys, "argv", [str(path), "--data", str(tmp_path / "alice_private_project" / "data.bin")])
    records._pid = None  # a new run, with this command line
    x = torch.full((2, 3), 31415.9265)
    squall.jit(user.attention_scores, executors=["planted", "torch"])(x, torch.randn(3, 3))
    with pytest.raises(squall.DataDependentError):
        squall.jit(user.data_dependent, executors=["torch"], strict=True)(x)
    records.flush()
    code, out, _ = _cli("--failed", "--redact-source", "-o", str(tmp_path / "r.zip"), capsys=capsys)
    assert code == 0
    with zipfile.ZipFile(tmp_path / "r.zip") as z:
        texts = {n: z.read(n).decode() for n in z.namelist()}
    everything = "\n".join(texts.values())
    for private in ("proprietary_trick_42", "confidential_filter_7", "alice_private_project", "secret_model", "data.bin",
                    str(tmp_path), "31415"):
        assert private not in everything, private
    assert "<user-file-" in everything and "<source line>" in everything
    assert any(n.startswith("squall-rage/repro/") for n in texts)  # the reproducer stays: it holds no user source
    # unredacted, the same bundle does name them (so the test above can fail)
    code, _, _ = _cli("--failed", "-o", str(tmp_path / "plain.zip"), capsys=capsys)
    with zipfile.ZipFile(tmp_path / "plain.zip") as z:
        plain = "\n".join(z.read(n).decode() for n in z.namelist())
    assert "confidential_filter_7" in plain and "alice_private_project" in plain and "31415" not in plain


def test_cli_exit_codes_in_a_fresh_process(tmp_path):
    env = {**os.environ, "SQUALL_CACHE_DIR": str(tmp_path / "cache")}
    run = lambda *a: subprocess.run([sys.executable, "-m", "squall", "rage", *a], capture_output=True, text=True, env=env, timeout=120)
    assert run().returncode == 0
    assert run("--failed").returncode == 1
    assert run("3").returncode == 2
    assert run("--last", "--failed").returncode == 2  # argparse: not both


# --- logs ----------------------------------------------------------------------------------------


def test_logs_topics_go_through_logging(records, caplog):
    squall.set_logs("plan,cache")
    try:
        squall.jit(lambda x: torch.relu(x) * 2, executors=["torch"])(torch.randn(3))
    finally:
        squall.set_logs(None)
    names = {r.name for r in caplog.records if r.name.startswith("squall")}
    assert names == {"squall.plan", "squall.cache"}
    text = caplog.text
    assert "torch.relu -> torch" in text and "cache miss, compilation 1" in text
    with pytest.raises(ValueError, match="unknown log topic"):
        squall.set_logs("plans")


def test_squall_logs_environment_variable_prints_to_stderr(tmp_path):
    code = "import torch, squall; squall.jit(lambda x: x.sin(), executors=['torch'])(torch.ones(2))"
    env = {**os.environ, "SQUALL_LOGS": "compile,plan", "SQUALL_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "[squall.plan]" in result.stderr and "torch.sin -> torch" in result.stderr
    assert "[squall.compile]" in result.stderr and ": ok in " in result.stderr


def test_the_environment_line_names_what_the_slow_library_calls_would():
    # versions from the imported modules and the OS from uname (cheap), as importlib.metadata and
    # platform.platform() (a subprocess, ~20 ms of a process's first compile) would say them
    import platform
    from importlib import metadata

    versions = rage.environment()["versions"]
    for dist in ("squall", "numpy", "pluggy"):
        assert versions[dist] == metadata.version(dist), dist
    if sys.platform == "linux" and os.confstr("CS_GNU_LIBC_VERSION"):
        assert versions["os"] == platform.platform()
    assert versions["os"].startswith(platform.system())


def test_a_reproducer_of_a_program_with_symbolic_sizes_reads_them_from_its_inputs(tmp_path):
    """The trace of a `dynamic=True` program computes with size symbols (`view(x, s0, -1)`):
    the script's program reads each from its inputs, as the generated function does."""
    from squall.runtime.repro import reproducer

    def f(x):
        return x.reshape(x.shape[0] * x.shape[1], -1).sin() + x.shape[1]

    fn = squall.jit(f, executors=["torch"], dynamic=True)
    fn(torch.randn(3, 5, 4))
    traced = squall.last_traces(fn).traced
    script = tmp_path / "repro.py"
    script.write_text(reproducer(traced, {"function": "f", "grad_enabled": False, "executors": {"order": ["torch"]}}))
    assert "s0 = x.shape[0]" in script.read_text()
    result = _run_reproducer(script, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "did not reproduce" in result.stdout
