"""Reading compile records back, and the bug-report bundle `squall rage` writes.

A run is one process's record file (see `squall.runtime.rage`). A bundle is one zip file holding a
run's records: `README.md` (what happened, in prose: environment, each compilation, its
outcome), `records.json` (every record, whole), `traces/` (each stage of each compilation as
Python), `generated/` (the generated source) and, for failures, `repro/` (standalone
reproducer scripts). With redaction, the user's file paths become placeholders
(`<user-file-1>`) and the text of the user's source lines is removed.
"""
from __future__ import annotations

import json
import os
import re
import sys
import sysconfig
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import squall

from ..runtime.rage import Recorder, rage_dir

__all__ = ["Run", "load_runs", "bundle_files", "redact", "write_bundle", "describe_bundle"]

FAILED = ("failed", "first call failed")


@dataclass
class Run:
    """One process's records: its header and its compilations (traces and first-call failures merged in)."""

    path: Path
    header: dict[str, Any]
    compilations: list[dict[str, Any]] = field(default_factory=list)
    damaged_lines: int = 0

    @property
    def time(self) -> float:
        """When the run started (seconds since the epoch)."""
        return self.header.get("time") or self.path.stat().st_mtime

    @property
    def command(self) -> str:
        """The command line, its program by file name."""
        argv = self.header.get("argv") or ["?"]
        return " ".join([os.path.basename(argv[0]), *argv[1:]])

    @property
    def functions(self) -> list[str]:
        """The functions compiled, each once, in order."""
        return list(dict.fromkeys(str(c.get("function")) for c in self.compilations))

    @property
    def failed(self) -> bool:
        """Whether a compilation or a first call failed."""
        return any(c.get("outcome") in FAILED for c in self.compilations)

    @property
    def outcome(self) -> str:
        """'ok', 'plugin errors', 'no compilations', or the first failure and its exception type."""
        for c in self.compilations:
            if c.get("outcome") in FAILED:
                return f"{c['outcome']}: {c['error']['type'].rsplit('.', 1)[-1]}"
        if any(c.get("outcome") == "plugin errors" for c in self.compilations):
            return "plugin errors"
        return "ok" if self.compilations else "no compilations"

    def line(self, number: int) -> str:
        """One line of `squall rage`'s list."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        functions = ", ".join(self.functions[:3]) + (f" +{len(self.functions) - 3}" if len(self.functions) > 3 else "")
        n = len(self.compilations)
        command = self.command if len(self.command) <= 40 else self.command[:39] + "…"
        return f"{number:>3}  {when}  {command:<40}  {functions} ({n} compilation{'s' * (n != 1)})  {self.outcome}"


def load_run(path: Path) -> Run | None:
    """The run in `path`; None when it has no readable header. Damaged lines (a process that died
    mid-write) are counted and skipped."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    run: Run | None = None
    by_seq: dict[Any, dict[str, Any]] = {}
    damaged = 0
    for raw in text.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            damaged += 1
            continue
        kind = rec.get("kind") if isinstance(rec, dict) else None
        if kind == "run" and run is None:
            run = Run(path, rec)
        elif run is None:
            damaged += 1
        elif kind == "compilation":
            by_seq[rec.get("seq")] = rec
            run.compilations.append(rec)
        elif kind == "traces" and rec.get("seq") in by_seq:
            by_seq[rec["seq"]]["traces"] = rec.get("traces")
        elif kind == "first_call" and rec.get("seq") in by_seq:
            target = by_seq[rec["seq"]]
            target.update(outcome=rec.get("outcome"), error=rec.get("error"), stage="first call")
            if rec.get("reproducer"):
                target["reproducer"] = rec["reproducer"]
    if run is not None:
        run.damaged_lines = damaged
    return run


def load_runs(directory: Path) -> list[Run]:
    """Every run in `directory`, newest first."""
    runs = [r for r in (load_run(p) for p in directory.glob("run-*.jsonl")) if r is not None]
    return sorted(runs, key=lambda r: r.time, reverse=True)


# --- the bundle ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60] or "fn"


def _summary(run: Run) -> str:
    h = run.header
    v = h.get("versions", {})
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(run.time))
    lines = [
        "# squall rage bundle",
        "",
        f"One run of `{run.command}` at {when} (pid {h.get('pid')}): {len(run.compilations)} compilation(s), outcome: {run.outcome}.",
        "",
        "## Environment",
        "",
        f"- squall {v.get('squall')}, torch {v.get('torch')} (CUDA {v.get('cuda')}), Python {v.get('python')}, numpy {v.get('numpy')}, pluggy {v.get('pluggy')}",
        f"- OS: {v.get('os')}; GPU: {v.get('gpu') or 'none'}",
        f"- working directory: {h.get('cwd')}",
        f"- squall settings: {', '.join(f'{k}={val}' for k, val in h.get('squall_env', {}).items()) or 'none'}",
    ]
    for ex in h.get("executors") or []:
        state = "available" if ex["available"] else f"unavailable: {ex['reason']}"
        lines.append(f"- executor {ex['name']} {ex['version'] or ''} ({ex['distribution'] or 'no distribution'}): {state}")
    for error in h.get("plugin_errors", []):
        lines.append(f"- plugin error: {error}")
    for i, c in enumerate(run.compilations, 1):
        lines += ["", f"## {i}. {c.get('function')}: {c.get('outcome')}", ""]
        lines.append(f"- defined at {c.get('file')}:{c.get('line')}")
        inputs = ", ".join(
            f"{x['where']} {x['device']} {x['dtype']}{x['shape']}" + (" requires_grad" if x["requires_grad"] else "") if x.get("tensor")
            else f"{x['where']} {x['type']} {x.get('value', x.get('repr'))}"
            for x in c.get("inputs", [])
        )
        lines.append(f"- inputs: {inputs or 'none'}; grad mode {'on' if c.get('grad_enabled') else 'off'}")
        ex = c.get("executors", {})
        lines.append(f"- executors: {' > '.join(ex.get('order', []))} (from {ex.get('source')})")
        for op, names in ex.get("per_op", {}).items():
            lines.append(f"  - for {op}: {' > '.join(names)}")
        seconds = ", ".join(f"{k} {s * 1e3:.1f} ms" for k, s in c.get("seconds", {}).items())
        lines.append(f"- compile time {c.get('compile_seconds', 0) * 1e3:.1f} ms ({seconds or 'no stage finished'})")
        r = c.get("recompilation", {})
        if r.get("changes"):
            lines.append(f"- compilation {r['compilations']} of this function; inputs that changed: " + ", ".join(f"{k} x{n}" for k, n in r["changes"].items()))
        for plan in c.get("plans", []):
            taken: dict[str, int] = {}
            for _, _, executor, _, _ in plan["decisions"]:
                if executor:
                    taken[executor] = taken.get(executor, 0) + 1
            lines.append(f"- {plan['trace']}: {plan['provenance']}; operations taken: " + ", ".join(f"{k} {n}" for k, n in taken.items()))
            lines += [f"  - region {j} ({g['executor']}): {', '.join(g['ops'])}" for j, g in enumerate(plan["regions"])]
            lines += [f"  - passed over {n}: {why}" for n, why in plan["unavailable"].items()]
            lines += [f"  - plugin error: {e}" for e in plan["errors"]]
        for w in c.get("warnings", []):
            lines.append(f"- warning ({w['category']}): {w['message']}")
        if c.get("error"):
            lines += ["", f"Failed at {c.get('stage')}:", "", "```", c["error"]["traceback"].rstrip(), "```"]
        if c.get("reproducer"):
            lines.append(f"- reproducer: `python repro/{i}_{_slug(str(c.get('function')))}.py` (exit 1 when it reproduces)")
        if c.get("stage") == "trace":
            lines.append("- failed while tracing: there is no trace to rebuild a reproducer from; the traceback says where")
        elif c.get("traces") is None and not c.get("truncated"):
            lines.append("- traces: not recorded (printed at exit: the process did not exit normally, or the function was gone by then)")
    if run.damaged_lines:
        lines += ["", f"({run.damaged_lines} damaged record line(s) skipped)"]
    return "\n".join(lines) + "\n"


def bundle_files(run: Run) -> dict[str, str]:
    """The bundle of `run`, file name -> text."""
    files = {"README.md": _summary(run), "records.json": json.dumps({"run": run.header, "compilations": run.compilations}, indent=1, default=str)}
    for i, c in enumerate(run.compilations, 1):
        stem = f"{i}_{_slug(str(c.get('function')))}"
        for j, t in enumerate(c.get("traces") or [], 1):
            files[f"traces/{stem}/{j}_{_slug(t['name'])}.py"] = t["text"] + "\n"
        if c.get("source"):
            files[f"generated/{stem}.py"] = c["source"] + "\n"
        if c.get("reproducer"):
            files[f"repro/{stem}.py"] = c["reproducer"]
    return files


# --- redaction -----------------------------------------------------------------------------------


def _public_prefixes() -> dict[str, str]:
    """Folders whose files are not the user's: squall's own, the interpreter's, installed packages."""
    prefixes = {os.path.dirname(os.path.abspath(squall.__file__)): "<squall>"}  # the package, wherever this file is in it
    for key in ("purelib", "platlib"):
        prefixes[sysconfig.get_paths()[key]] = "<site-packages>"
    prefixes[sysconfig.get_paths()["stdlib"]] = "<python>"
    for root in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        prefixes[root] = "<python-prefix>"
    return prefixes


# absolute paths of two or more parts (POSIX or Windows); relative ones are caught by name below
_PATH = re.compile(r"(?<![\w>.~-])(?:[A-Za-z]:\\|/)[\w.@+~-]+(?:[\\/][\w.@+~-]+)+[\\/]?")
_SYSTEM = ("/usr/bin/env", "/dev/", "/proc/", "/tmp/torchinductor")  # not the user's, and useful to read


def _user_paths(run: Run) -> set[str]:
    """Paths the records name that are the user's: the command line's, files of functions and
    warnings, the working directory, squall settings that are paths."""
    h = run.header
    found = {a for a in (h.get("argv") or []) if os.sep in a or "/" in a or a.endswith((".py", ".pyw"))}
    found |= {h.get("cwd") or ""} | {v for v in (h.get("squall_env") or {}).values() if "/" in v or os.sep in v}
    for c in run.compilations:
        found |= {c.get("file") or ""} | {w.get("file") or "" for w in c.get("warnings", [])}
        found |= {w.rsplit(":", 1)[0] for p in c.get("plans", []) for w in p.get("where", [])}
        for m in re.finditer(r'File "([^"]+)"', (c.get("error") or {}).get("traceback", "")):
            found.add(m.group(1))
    public = tuple(_public_prefixes())
    return {p for p in found if len(p) >= 3 and not p.startswith(public) and not p.startswith("<")}


def _user_source_lines(run: Run) -> set[str]:
    """Lines of the user's source that records can carry (in tracebacks and warnings)."""
    found: set[str] = set()
    public = tuple(_public_prefixes())
    texts = [c.get("error", {}).get("traceback", "") for c in run.compilations if c.get("error")]
    texts += [w["message"] for c in run.compilations for w in c.get("warnings", [])]
    for text in texts:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r'\s*File "([^"]+)", line \d+', line)
            if m and not m.group(1).startswith(public) and i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File "):
                found.add(lines[i + 1].strip())
    for c in run.compilations:  # "... at /path/file.py:12: <source line>" in squall's messages
        for w in c.get("warnings", []):
            for m in re.finditer(r"\.py:\d+: (.+?)(?=: |$)", w["message"]):
                found.add(m.group(1).strip())
    return {line for line in found if len(line) >= 3}


def redact(files: dict[str, str], run: Run) -> dict[str, str]:
    """`files` with the user's file paths replaced by placeholders and the user's source lines removed.

    A path is the user's unless it lies under squall, the Python installation or site-packages
    (those become `<squall>/...`, `<site-packages>/...`). Command-line arguments and the working
    directory are paths of the user's too.
    """
    prefixes = sorted(_public_prefixes().items(), key=lambda kv: -len(kv[0]))
    placeholders: dict[str, str] = {}
    home = os.path.expanduser("~")

    def placeholder(p: str) -> str:
        if p not in placeholders:
            placeholders[p] = f"<user-file-{len(placeholders) + 1}>"
        return placeholders[p]

    def path(m: re.Match) -> str:
        p = m.group(0)
        if p.startswith(_SYSTEM):
            return p
        for prefix, name in prefixes:
            if p.startswith(prefix):
                return name + p[len(prefix):]
        return placeholder(p)

    # known paths first (longest first, so a file is not half-replaced by its folder), then their
    # bare names (a traceback may print a relative path), then any other absolute path
    known = sorted(_user_paths(run), key=len, reverse=True)
    names = sorted({os.path.basename(p) for p in known if os.path.basename(p).endswith((".py", ".pyw"))}, key=len, reverse=True)
    lines = sorted(_user_source_lines(run), key=len, reverse=True)
    out = {}
    for name, text in files.items():
        for line in lines:
            text = text.replace(line, "<source line>")
        for prefix, label in prefixes:  # before the user's paths: squall may live under the working directory
            text = text.replace(prefix + os.sep, label + "/")
        for p in known:
            text = text.replace(p, placeholder(p))
        for n in names:
            text = re.sub(rf"(?<![\w<-]){re.escape(n)}\b", placeholder(n), text)
        text = _PATH.sub(path, text)
        if home and len(home) > 1:
            text = text.replace(home, "<home>")
        out[name] = text
    return out


def describe_bundle(files: dict[str, str]) -> str:
    """What goes in: each file with its size, and the kinds of information it carries."""
    lines = ["what goes in (no tensor values; input shapes, dtypes and devices only):"]
    for name, text in files.items():
        lines.append(f"  {name:<56} {len(text.encode()):>9,} bytes")
    lines.append("README.md and records.json hold: command line, working directory, versions, installed executors and plugin errors,")
    lines.append("each compilation's function and file, input metadata, executor list, planner decisions, warnings, errors with tracebacks")
    return "\n".join(lines)


def write_bundle(files: dict[str, str], path: Path) -> Path:
    """Write `files` into one zip at `path`."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(f"squall-rage/{name}", text)
    return path


# --- `squall rage` -------------------------------------------------------------------------------


def add_arguments(p: Any) -> None:
    """The arguments of `squall rage` (an argparse parser)."""
    pick = p.add_mutually_exclusive_group()
    pick.add_argument("number", nargs="?", type=int, help="the run to bundle, by its number in the list")
    pick.add_argument("--last", action="store_true", help="bundle the most recent run")
    pick.add_argument("--failed", action="store_true", help="bundle the most recent run with a failed compilation or first call")
    pick.add_argument("--clear", action="store_true", help="delete every record")
    p.add_argument("--redact-source", action="store_true", help="replace your file paths and source lines with placeholders")
    p.add_argument("-o", "--output", metavar="PATH", help="where to write the bundle (default ./squall-rage-<time>.zip)")
    p.add_argument("-y", "--yes", action="store_true", help="write without asking, even at a terminal")
    p.add_argument("--show", action="store_true", help="print the bundle's files instead of writing it")


def rage_command(args: Any, *, stdin: Any = None, stdout: Any = None) -> int:
    """`squall rage`: list runs, or bundle one. Exit 0 done, 1 nothing to bundle or declined, 2 no such run."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    directory = rage_dir()
    if args.clear:
        n = Recorder(directory).clear()
        print(f"squall rage: deleted {n} run record(s) from {directory}", file=out)
        return 0
    runs = load_runs(directory) if directory.is_dir() else []
    picking = args.number is not None or args.last or args.failed
    if not picking:
        if not runs:
            print(f"squall rage: no records yet in {directory} (every compilation adds one)", file=out)
            return 0
        print(f"compile records in {directory}, newest first:", file=out)
        for i, run in enumerate(runs, 1):
            print(run.line(i), file=out)
        print("bundle one for a bug report: squall rage NUMBER | --last | --failed  [--redact-source]", file=out)
        return 0
    if args.failed:
        run = next((r for r in runs if r.failed), None)
        if run is None:
            print(f"squall rage: no run with a failed compilation in {directory}", file=sys.stderr)
            return 1
    elif args.last:
        if not runs:
            print(f"squall rage: no records in {directory}", file=sys.stderr)
            return 1
        run = runs[0]
    else:
        if not 1 <= args.number <= len(runs):
            print(f"squall rage: error: no run number {args.number}; there are {len(runs)} (see `squall rage`)", file=sys.stderr)
            return 2
        run = runs[args.number - 1]
    files = bundle_files(run)
    if args.redact_source:
        files = redact(files, run)
    if args.show:
        for name, text in files.items():
            print(f"===== {name} =====\n{text}", file=out)
        return 0
    print(f"run: {run.line(runs.index(run) + 1).strip()}", file=out)
    print(describe_bundle(files), file=out)
    if not args.redact_source:
        print("(your file paths and the source lines in tracebacks are included: --redact-source replaces them)", file=out)
    if not args.yes and getattr(stdin, "isatty", lambda: False)():
        print("write this bundle? [y/N] ", end="", file=out, flush=True)
        answer = stdin.readline()
        if answer.strip().lower() not in ("y", "yes"):
            print("squall rage: nothing written", file=out)
            return 1
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(run.time))
    path = Path(args.output) if args.output else Path.cwd() / f"squall-rage-{stamp}.zip"
    write_bundle(files, path)
    print(f"wrote {path}: attach it to your bug report", file=out)
    return 0
