#!/usr/bin/env bash
# The nvFuser verification environment: nvFuser itself checks every translation, no GPU needed.
#
#   bash plugins/nvfuser/verify/verify.sh [REPORT.json]
#
# Builds (once) a Python 3.12 venv with torch 2.10.0 (PyPI's CUDA build: about 7 GB
# installed; 5-20 minutes the first time, by the registry's speed) and nvfuser-cu126-torch210, whose
# `nvfuser_direct` imports and defines fusions on a machine without a GPU. Then runs
#   1. plugins/nvfuser/tests/test_nvfuser_definitions.py: a real FusionDefinition for
#      every region squall forms from every OpInfo sample and the demo GPT block; the
#      counts (built, accepted, rejected and why) go to REPORT.json;
#   2. squall's own suite and the nvFuser plugin's tests on torch 2.10 (what squall's
#      declared torch range promises).
# The venv is built once per machine and reused (a stamp records what was installed), so a
# warm run needs no registry; .ci/run runs this after the 2.13 suite. Exit status: 0 when the
# definitions check ran with nothing rejected and no mismatch and the suite passed; 1 when
# either failed; 3 when the environment could not be built.
# Environment: SQUALL_NVFUSER_VENV (where the venv lives), PYTHON312 (the interpreter).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${SQUALL_NVFUSER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/squall/venv-nvfuser-torch210}"
REPORT="$(realpath -m "${1:-$ROOT/nvfuser-verify-report.json}")"
TORCH_PIN="torch==2.10.0"
NVFUSER_PIN="nvfuser-cu126-torch210==0.2.36.dev20260301"

find_python312() {
    if [ -n "${PYTHON312:-}" ]; then echo "$PYTHON312"; return; fi
    for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            echo "$candidate"; return
        fi
    done
    echo "verify.sh: no Python 3.12 found (the nvFuser wheel is cp312); set PYTHON312" >&2
    exit 2
}

# squall's own dependencies, read from its pyproject.toml (torch is pinned above instead)
squall_dependencies() {
    "$1" - "$ROOT/pyproject.toml" <<'PYEOF'
import re, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() != "torch"))
PYEOF
}

# The environment is built once per machine and reused: a stamp holds what was installed, and
# only a change of it (new pins, new dependencies in pyproject.toml) installs again.
build_failed() {
    echo "verify.sh: could not build the torch 2.10 / nvFuser environment in $VENV ($1)." >&2
    echo "  It installs $TORCH_PIN and $NVFUSER_PIN from the package registry (about 7 GB);" >&2
    echo "  without a registry this step cannot run, and it fails rather than pass untested." >&2
    exit 3
}
if [ ! -x "$VENV/bin/python" ]; then
    "$(find_python312)" -m venv "$VENV" || build_failed "creating the venv"
fi
PY="$VENV/bin/python"
mapfile -t DEPS < <(squall_dependencies "$PY")
# setuptools: squall and the plugin install with --no-build-isolation, so a warm run needs no registry
WANTED="$(printf '%s\n' "$TORCH_PIN" "$NVFUSER_PIN" "${DEPS[@]}" "setuptools>=64" "pytest>=7" "pytest-xdist>=3")"
STAMP="$VENV/.squall-verify-installed"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANTED" ]; then
    echo "== installing into $VENV (the first time on a machine: about 7 GB):"
    echo "$WANTED" | sed 's/^/     /'
    rm -f "$STAMP"
    mapfile -t WANTED_LIST <<<"$WANTED"
    "$PY" -m pip install -q "${WANTED_LIST[@]}" || build_failed "pip install failed"
    echo "$WANTED" > "$STAMP"
else
    echo "== $VENV already has $TORCH_PIN, $NVFUSER_PIN and squall's dependencies"
fi
# squall and the plugin from this tree; --no-deps so pip never swaps the pinned torch (their
# dependencies are installed above)
"$PY" -m pip install -q --no-deps --no-build-isolation -e "$ROOT" -e "$ROOT/plugins/nvfuser" || build_failed "installing squall from $ROOT"
"$PY" -c 'import torch, numpy, nvfuser_direct; print("torch", torch.__version__, "| numpy", numpy.__version__, "| nvfuser_direct", nvfuser_direct.__version__, "| CUDA device:", torch.cuda.is_available())' \
    || build_failed "torch, numpy or nvfuser_direct does not import"

cd "$ROOT"
status=0
echo "== 1. every translation defined by nvFuser (report: $REPORT)"
rm -f "$REPORT"  # a report from an earlier run must not stand in for this one
SQUALL_NVFUSER_REPORT="$REPORT" "$PY" -m pytest -q -p no:cacheprovider plugins/nvfuser/tests/test_nvfuser_definitions.py || status=1
"$PY" - "$REPORT" <<'PYEOF' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
print(f"nvfuser_direct {r['nvfuser_direct']}, torch {r['torch']}: {r['samples_traced']} samples traced "
      f"({r['samples_with_nvfuser_regions']} formed nvFuser regions, {len(r['untraceable_samples'])} untraceable); "
      f"definitions built {r['definitions_built']}, accepted {r['definitions_accepted']}, rejected {r['definitions_rejected']}; "
      f"non-contiguous layouts accepted {r['non_contiguous_definitions_accepted']}; meaning mismatches {len(r['meaning_mismatches'])}")
for x in r["rejections"][:20]:
    print("  rejected:", x["source"], "|", x["ops"], "|", x["error"])
# the check ran (not skipped) and nvFuser took every definition as squall meant it
sys.exit(0 if r["definitions_built"] > 0 and r["definitions_rejected"] == 0 and not r["meaning_mismatches"] else 1)
PYEOF
echo "== 2. squall's suite and the nvFuser plugin's tests on $("$PY" -c 'import torch; print(torch.__version__)')"
# torch 2.10 itself dies with SIGFPE on arange(0.0, 2.5, 0.5, dtype=torch.int64), the
# reference call of this error case (torch 2.13 raises ValueError): deselected, not squall's
"$PY" -m pytest -q -p no:cacheprovider -n 2 tests plugins/nvfuser \
    --deselect "tests/test_ops.py::test_errors[arange]" || status=1
exit $status
