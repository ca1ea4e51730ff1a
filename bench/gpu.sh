#!/usr/bin/env bash
# On a machine with a GPU: "does it work, how fast" in one command, one results file.
#
#   bash bench/gpu.sh [RESULTS_FILE]        # default: $OUT/gpu-results.txt, else ./gpu-results.txt
#
# Written for the lent GPU image (Python 3.12, torch 2.11 with CUDA 13, CuPy for CUDA 13,
# Triton, pytest; no apex, no nvFuser, no network). It
#   1. installs squall and its four plugins from this tree (editable, --no-deps,
#      --no-build-isolation: nothing is fetched), and any wheels carried in $WHEELS
#      (default: ./wheels; e.g. an nvFuser wheel built for this torch and CUDA);
#   2. prints the machine, the versions, and `squall executors` (available or why not);
#   3. runs every test of the three CUDA plugins (nvfuser, cupy_ops, apex_xentropy),
#      listing each skip with its reason;
#   4. runs bench/gpu_fusion.py: eager, torch.compile and squall with each available
#      executor on CUDA (elementwise, norms, the GPT block, a GPT training step);
#   5. runs bench/generation.py on CUDA: `generate` with dynamic shapes (tokens equal eager's,
#      compiles per generate, tokens/s against eager and torch.compile(dynamic=True));
#   6. runs bench/gpu_models.py: real models on CUDA, squall's whole-program fusion included;
#   7. runs bench/gpu_kernel_time.py: the GPU time of training steps, eager against squall's
#      torch plan, kernel by kernel (float32 and bfloat16).
# STEPS (default "2 3 4 5 6 7") picks steps to run after the install, e.g. STEPS="3 5" to
# split the work over two calls of a lent machine; each step is bounded by STEP_TIMEOUT s.
# Everything is written to the results file; the exit status is non-zero if any step failed.
# Run on an H100 (2026-11-25 and 2026-11-26, torch 2.11+cu130, CuPy 14.2): plugins/cupy_ops/README.md and
# plugins/inductor/README.md ("Run on a GPU") say what it found.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RESULTS="${1:-${OUT:-.}/gpu-results.txt}"
WHEELS="${WHEELS:-$ROOT/wheels}"
PY="${PYTHON:-python3}"
STEPS=" ${STEPS:-2 3 4 5 6 7} "
STEP_TIMEOUT="${STEP_TIMEOUT:-300}"
want() { [[ "$STEPS" == *" $1 "* ]]; }
mkdir -p "$(dirname "$RESULTS")"
RESULTS="$(cd "$(dirname "$RESULTS")" && pwd)/$(basename "$RESULTS")"
: >"$RESULTS"
status=0
step() { echo; echo "== $*"; }
run() {  # run a command (at most STEP_TIMEOUT s), keep its output in the results file, remember a failure
    timeout "$STEP_TIMEOUT" "$@" 2>&1 | tee -a "$RESULTS"
    local rc=${PIPESTATUS[0]}
    echo "-- exit $rc: $*" | tee -a "$RESULTS"
    [ "$rc" -eq 0 ] || status=1
}
cd "$ROOT"

step "1. install from the tree" | tee -a "$RESULTS"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    run "$PY" -m pip install --no-index --no-deps "$WHEELS"/*.whl
fi
run "$PY" -m pip install --no-index --no-deps --no-build-isolation -e . \
    -e plugins/nvfuser -e plugins/cupy_ops -e plugins/apex_xentropy -e plugins/inductor

if want 2; then
step "2. machine and versions" | tee -a "$RESULTS"
run nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
run "$PY" - <<'PYEOF'
import importlib, importlib.util, sys, torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda,
      "| device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
for name in ("cupy", "nvfuser_direct", "nvfuser", "triton", "apex", "pluggy", "pytest"):
    if importlib.util.find_spec(name) is None:
        print(f"{name}: not installed")
        continue
    try:
        print(f"{name}:", getattr(importlib.import_module(name), "__version__", "(no __version__)"))
    except Exception as e:  # a library that is there but does not import says why
        print(f"{name}: fails to import: {type(e).__name__}: {e}")
PYEOF
run "$PY" -m squall executors
fi

if want 3; then
step "3. the CUDA plugins' tests" | tee -a "$RESULTS"
run "$PY" -m pytest -q -rs -p no:cacheprovider plugins/nvfuser/tests plugins/cupy_ops/tests plugins/apex_xentropy/tests
# inductor's tests build C++ kernels too (minutes): last, in a run of their own, so a time-out keeps the above
run "$PY" -m pytest -q -rfE -p no:cacheprovider plugins/inductor/tests
fi

if want 4; then
step "4. fusion benchmark on CUDA" | tee -a "$RESULTS"
run "$PY" bench/gpu_fusion.py
fi

if want 5; then
step "5. generate with dynamic shapes on CUDA" | tee -a "$RESULTS"
run "$PY" bench/generation.py --device cuda --models "${GEN_MODELS:-llama,gpt2}" --rounds 2
fi

if want 6; then
step "6. real models on CUDA" | tee -a "$RESULTS"
run "$PY" bench/gpu_models.py ${MODELS_ARGS:-}
fi

if want 7; then
step "7. training steps' GPU time, kernel by kernel" | tee -a "$RESULTS"
run "$PY" bench/gpu_kernel_time.py --only resnet50 llama --top 12
run "$PY" bench/gpu_kernel_time.py --only llama --train-dtype bfloat16 --top 12
fi

echo "results: $RESULTS (status $status)"
exit $status
