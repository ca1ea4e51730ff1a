"""squall-cupy-ops without a GPU: discovery, availability, checkers, the translation table, codegen.

The generated kernels are compiled with nvcc (for sm_80, which needs no GPU) as a real
well-formedness check; GPU runs are in test_cupy_ops_gpu.py.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import squall
from squall import prims
from squall.compiler.planner import plan
from squall.extend import FusionRegion, assume_available
from squall.frontend.tracing import TracingContext
from squall.frontend.tracing import trace_program
from squall.market.plugins import Marketplace
from squall.prims.base import PrimIDs
from squall.proxies import NumberProxy, TensorProxy, tracing

from squall_cupy_ops import availability_from, claimed_prims, make_executor
from squall_cupy_ops.kernels import plan_region
from squall_cupy_ops.translate import C_TYPES, PREAMBLE, TRANSLATIONS, literal, translation_key

DIST = "squall-cupy-ops"


def _installed() -> bool:
    try:
        importlib.metadata.distribution(DIST)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


needs_install = pytest.mark.skipif(not _installed(), reason=f"{DIST} is not pip-installed (pip install -e plugins/cupy_ops)")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed (the CUDA toolkit's compiler)")


def _torch_executor():
    return squall.market.plugins.default_marketplace().get("torch")


def _trace_cuda(fn, *spec):
    """Trace `fn` on CUDA-device stand-ins, as squall.jit would on CUDA tensors (no GPU needed)."""
    stand_ins = tuple(TensorProxy(f"a{i}", shape=s, dtype=d, device="cuda") for i, (s, d) in enumerate(spec))
    return trace_program(fn, stand_ins, {})[0]


# --- installation, discovery, availability --------------------------------------------------


@needs_install
def test_discovered_through_its_entry_point():
    market = Marketplace()
    ex = market.get("cupy")
    assert ex is not None, [str(e) for e in market.load_errors]
    assert (ex.distribution, market.plugin_of("cupy"), ex.version) == (DIST, "cupy", importlib.metadata.version(DIST))
    assert ex.claimed_ops() == claimed_prims()


@needs_install
def test_squall_executors_lists_it_with_its_availability():
    done = subprocess.run([sys.executable, "-m", "squall", "executors", "--json"], capture_output=True, text=True, timeout=120)
    row = {r["name"]: r for r in json.loads(done.stdout)["executors"]}["cupy"]
    assert row["distribution"] == DIST
    expected = make_executor().availability()
    assert (row["available"], row["reason"]) == (bool(expected), expected.reason)


def test_optional_extras_name_the_cupy_wheels():
    requires = importlib.metadata.requires(DIST) if _installed() else None
    if requires is None:
        pytest.skip(f"{DIST} is not pip-installed (pip install -e plugins/cupy_ops)")
    assert any(r.startswith("cupy-cuda12x") and 'extra == "cuda12"' in r for r in requires)
    assert any(r.startswith("cupy-cuda13x") and 'extra == "cuda13"' in r for r in requires)
    assert not any(r.startswith("cupy") and "extra" not in r for r in requires)  # never a hard dependency


def test_availability_names_what_is_missing():
    no_cupy = availability_from(has_cupy=False, has_cuda=True)
    assert not no_cupy and no_cupy.reason.startswith("cupy is not installed") and "squall-cupy-ops[cuda12]" in no_cupy.reason
    no_cuda = availability_from(has_cupy=True, has_cuda=False)
    assert not no_cuda and no_cuda.reason == "CUDA is not available (no CUDA device)"
    assert availability_from(has_cupy=True, has_cuda=True)
    here = make_executor().availability()
    has_cupy = importlib.util.find_spec("cupy") is not None
    assert bool(here) is (has_cupy and torch.cuda.is_available())


# --- checkers ---------------------------------------------------------------------------------------


def _offer(prim_id, *args, **kwargs):
    """The checker's answer for a call, given in the one form squall records calls in."""
    ex = make_executor()
    checker = ex.supported[prim_id]
    args, kwargs = squall.extend.all_prims()[prim_id].normalize(args, kwargs)
    return checker(*args, **kwargs)


def test_checkers_accept_cuda_tensors_of_translated_dtypes():
    with tracing(TracingContext()):
        f32, f16 = TensorProxy(shape=(4, 3), dtype=torch.float32, device="cuda"), TensorProxy(shape=(4, 3), dtype=torch.float16, device="cuda:0")
        i64, b8 = TensorProxy(shape=(4, 3), dtype=torch.int64, device="cuda"), TensorProxy(shape=(4, 3), dtype=torch.bool, device="cuda")
        assert _offer(PrimIDs.ADD, f32, 2.5)
        assert _offer(PrimIDs.EXP, f32)
        assert _offer(PrimIDs.GT, f16, 0.3)
        assert _offer(PrimIDs.WHERE, b8, f32, 1.0)
        assert _offer(PrimIDs.CONVERT_ELEMENT_TYPE, f32, torch.float16)
        assert _offer(PrimIDs.DIV, i64, i64, "floor") and _offer(PrimIDs.DIV, i64, i64, rounding_mode="trunc")
        assert _offer(PrimIDs.BITWISE_LEFT_SHIFT, i64, 3)
        assert _offer(PrimIDs.LOGICAL_NOT, b8)
        assert _offer(PrimIDs.BROADCAST_IN_DIM, f32, (2, 4, 3), (1, 2))


def test_checkers_decline_what_they_cannot_run():
    with tracing(TracingContext()):
        cpu = TensorProxy(shape=(4,), dtype=torch.float32, device="cpu")
        bf16 = TensorProxy(shape=(4,), dtype=torch.bfloat16, device="cuda")
        c64 = TensorProxy(shape=(4,), dtype=torch.complex64, device="cuda")
        f32 = TensorProxy(shape=(4,), dtype=torch.float32, device="cuda")
        i64 = TensorProxy(shape=(4,), dtype=torch.int64, device="cuda")
        assert not _offer(PrimIDs.ADD, cpu, cpu)
        assert not _offer(PrimIDs.EXP, bf16)
        assert not _offer(PrimIDs.MUL, c64, c64)
        assert not _offer(PrimIDs.CONVERT_ELEMENT_TYPE, f32, torch.bfloat16)
        f16 = TensorProxy(shape=(4,), dtype=torch.float16, device="cuda")
        assert not _offer(PrimIDs.POW, i64, i64)  # integer pow is not translated
        assert not _offer(PrimIDs.NEXTAFTER, f16, f16)  # computing it in float would change nothing
        assert not _offer(PrimIDs.ADD, i64, 2**70)  # no int64 literal for it
        assert not _offer(PrimIDs.MUL, f32, 1j)
        assert not _offer(PrimIDs.BROADCAST_IN_DIM, cpu, (2, 4), (1,))
    ex = make_executor()
    assert PrimIDs.DIGAMMA not in ex.supported and PrimIDs.SUM not in ex.supported  # left to other executors


def test_checkers_leave_run_time_numbers_to_torch():
    # a dynamic number's __class__ is float or int, so an isinstance check alone would take it
    # as a constant and bake this call's value into the kernel as a literal
    with tracing(TracingContext()) as ctx:
        f32 = TensorProxy(shape=(4,), dtype=torch.float32, device="cuda")
        i64 = TensorProxy(shape=(4,), dtype=torch.int64, device="cuda")
        scale, step = NumberProxy("s", float, 0.5), NumberProxy("n", int, 3)
        assert isinstance(scale, float) and isinstance(step, int)
        assert not _offer(PrimIDs.MUL, f32, scale)
        assert not _offer(PrimIDs.ADD, i64, step)
        assert not _offer(PrimIDs.WHERE, TensorProxy(shape=(4,), dtype=torch.bool, device="cuda"), f32, scale)
        assert not ctx.scopes[0]  # and nothing was read (a read records a guard)
        assert _offer(PrimIDs.MUL, f32, 0.5)


def test_every_claimed_prim_has_a_translator_and_every_translator_a_prim():
    prim_ids = set(prims.all_prims())
    for key in TRANSLATIONS:
        assert key.split("/")[0] in prim_ids, key
    for prim in claimed_prims():
        if prim == PrimIDs.BROADCAST_IN_DIM:
            continue  # a view, not a kernel expression
        entry = TRANSLATIONS[prim] if prim != PrimIDs.DIV else TRANSLATIONS[translation_key(prim, {})]
        assert any(entry.template(d) for d in C_TYPES), prim
    assert translation_key(PrimIDs.DIV, {"rounding_mode": "floor"}) == "prims.div/floor"


def test_literals_keep_every_value():
    assert literal(2.5, torch.float16) == "((float)(2.5))"
    assert literal(-3, torch.int8) == "((signed char)(-3LL))"
    assert literal(True, torch.bool) == "((bool)(true))"
    assert literal(float("inf"), torch.float32) == "((float)__longlong_as_double(9218868437227405312LL))"
    assert "__longlong_as_double" in literal(float("nan"), torch.float64)


# --- regions: planning and the generated kernels ------------------------------------------------------


def _plan(fn, *spec):
    ex = make_executor()
    with assume_available(ex):  # planned as on a machine with CuPy and a GPU: planning runs nothing
        result = plan(_trace_cuda(fn, *spec), [ex, _torch_executor()])
    return ex, result


def _gelu_block(x, bias, residual):
    h = F.gelu(x + bias, approximate="tanh")
    return residual + h * 0.5, (h > 0).logical_and(residual < 1)


def test_a_region_with_broadcast_inputs_is_one_kernel_over_views():
    ex, result = _plan(_gelu_block, ((8, 16), torch.float32), ((16,), torch.float32), ((8, 16), torch.float32))
    assert [b.sym.id for b in result.bsyms] == ["cupy.region"]
    (program,) = ex.programs
    assert len(program.kernels) == 1
    assert [(v.source, v.shape, v.broadcast_dimensions) for v in program.views.values()] == [("a1", (8, 16), (1,))]
    kernel = program.kernels[0]
    assert kernel.in_params_decl == "float32 in0, float32 in1, float32 in2"
    assert kernel.out_params_decl == "float32 out0, bool out1"
    assert "tanhf(" in kernel.operation and result.plan.errors == []


def test_groups_of_different_shapes_run_in_dependency_order():
    fn = lambda a, b: torch.where(a > 0, a, b // 3) * torch.exp(b)
    ex, result = _plan(fn, ((4, 8), torch.float16), ((8,), torch.float16))
    (program,) = ex.programs
    assert [k.shape for k in program.kernels] == [(8,), (4, 8)]
    first, second = program.kernels
    # what the second kernel reads of the first goes through a view of the first's output
    assert set(first.outputs) <= {v.source for v in program.views.values()}
    assert "squall_floor_divide" in first.operation and "float16 v" in second.operation


def test_identical_regions_compile_once():
    def two_layers(x, w):
        for _ in range(2):
            x = torch.tanh(x) * 2 + 1
            x = x @ w
        return x
    ex, result = _plan(two_layers, ((4, 4), torch.float32), ((4, 4), torch.float32))
    regions = [b for b in result.bsyms if b.sym.id == "cupy.region"]
    assert len(regions) == 2 and regions[0].impl is regions[1].impl
    assert len(ex.programs) == 1 and [r.reused for r in result.plan.regions] == [False, True]


def _single_op_kernels():
    """One kernel per (translated prim, dtype) the prim's meta accepts, made through the real prims."""
    specs = []
    for key, entry in TRANSLATIONS.items():
        prim_id, _, mode = key.partition("/")
        prim = prims.all_prims()[prim_id]
        for dtype in C_TYPES:
            if entry.template(dtype) is None:
                continue
            with tracing(TracingContext()) as ctx:
                a = TensorProxy("a", shape=(5,), dtype=dtype, device="cuda")
                b = TensorProxy("b", shape=(5,), dtype=dtype, device="cuda")
                pred = TensorProxy("p", shape=(5,), dtype=torch.bool, device="cuda")
                args = {1: (a,), 2: (a, b), 3: (pred, a, b)}[_arity(prim_id)]
                if prim_id == PrimIDs.CONVERT_ELEMENT_TYPE:
                    args = (a, torch.float16 if dtype != torch.float16 else torch.int32)
                elif mode:
                    args = (a, b, mode)
                try:
                    out = prim(*args)
                except (TypeError, ValueError, RuntimeError):
                    continue  # the prim itself rejects this dtype: no checker ever sees it
                calls = list(ctx.scopes[0])
            inputs = [x for x in args if isinstance(x, TensorProxy)]
            region = FusionRegion("cupy", calls, calls, inputs, [out])
            specs.extend(plan_region(region).kernels)
    return specs


def _arity(prim_id: str) -> int:
    if prim_id == PrimIDs.WHERE:
        return 3
    binary = {PrimIDs.ADD, PrimIDs.SUB, PrimIDs.MUL, PrimIDs.DIV, PrimIDs.POW, PrimIDs.REMAINDER, PrimIDs.FMOD,
              PrimIDs.ATAN2, PrimIDs.HYPOT, PrimIDs.COPYSIGN, PrimIDs.NEXTAFTER, PrimIDs.MAXIMUM, PrimIDs.MINIMUM,
              PrimIDs.EQ, PrimIDs.NE, PrimIDs.LT, PrimIDs.LE, PrimIDs.GT, PrimIDs.GE, PrimIDs.LOGICAL_AND,
              PrimIDs.LOGICAL_OR, PrimIDs.LOGICAL_XOR, PrimIDs.BITWISE_AND, PrimIDs.BITWISE_OR, PrimIDs.BITWISE_XOR,
              PrimIDs.BITWISE_LEFT_SHIFT, PrimIDs.BITWISE_RIGHT_SHIFT}
    return 2 if prim_id in binary else 1


_REGIONS = [
    (_gelu_block, (((8, 16), torch.float32), ((16,), torch.float32), ((8, 16), torch.float32))),
    (lambda a, b: torch.where(a > 0, a, b // 3) * torch.exp(b), (((4, 8), torch.float16), ((8,), torch.float16))),
    (lambda a, b: ((a << 2) % b, (a.float() / 3).round().to(torch.int8) ^ 5), (((6,), torch.int64), ((6,), torch.int64))),
    (lambda a: torch.clamp(a, 0.0, float("inf")).to(torch.bool) | torch.isnan(a), (((3, 3), torch.float64),)),
]


def _all_kernels():
    """Every generated kernel: one per translated (prim, dtype) pair, and those of the multi-op regions."""
    kernels = _single_op_kernels()
    for fn, spec in _REGIONS:
        ex, _ = _plan(fn, *spec)
        kernels += [k for p in ex.programs for k in p.kernels]
    return list({k.name: k for k in kernels}.values())


def _cupy_or_skip():
    try:
        import cupy  # noqa: F401 - compiling needs CuPy and NVRTC, not a GPU
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001 - not installed, or no libnvrtc for this CuPy
        pytest.skip(f"CuPy's NVRTC is not usable here: {type(e).__name__}: {str(e)[:200]}")
    return cupy


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="cupy is not installed (pip install 'squall-cupy-ops[cuda12]' and nvidia-cuda-nvrtc-cu12)")
def test_cupy_compiles_every_generated_kernel_with_its_nvrtc():
    """What CuPy will load: CuPy writes each ElementwiseKernel's CUDA source and NVRTC compiles it.

    `cupy.ElementwiseKernel.__call__` needs a device, but its parts do not: the kernel's
    parameter types (`_decide_params_type`), its source (`_get_elementwise_kernel_code`
    with the argument descriptions a launch would make), CuPy's headers and compiler
    options (`assemble_cupy_compiler_options`) and CuPy's NVRTC program
    (`cupy.cuda.compiler._NVRTCProgram`), asked for PTX for compute_80 (what
    `compile_using_nvrtc` emits with CUPY_COMPILE_WITH_PTX=1; its default, a cubin for the
    device's sm_XX, is checked for one kernel: SASS for all of them takes minutes). Each
    kernel is described twice: contiguous (CuPy reduces it to one dimension) and as a
    strided 2-d view (broadcast inputs).
    """
    cupy = _cupy_or_skip()
    import numpy
    from cupy._core import _carray, _kernel, core
    from cupy.cuda import compiler

    from squall_cupy_ops.runtime import KernelCache
    from squall_cupy_ops.translate import CUPY_TYPES

    ndarray_kind, indexer_kind = 1, 2  # cupy/_core/_kernel.pxd: _ArgKind
    kernels = _all_kernels()
    assert len(kernels) > 150
    cache = KernelCache()
    options = core.assemble_cupy_compiler_options(()) + ("--device-as-default-execution-space",)
    headers = "".join(f"#include <{h}>\n" for h in core._cupy_header_list)
    for ndim, contiguous in ((1, True), (2, False)):
        bodies, names = [], []
        for spec in kernels:
            kernel = cache.get(spec)  # the cupy.ElementwiseKernel the runtime launches
            dtypes = lambda params: tuple(numpy.dtype(CUPY_TYPES[d]) for _, d in params)  # noqa: E731
            in_types, out_types, type_map = kernel._decide_params_type(dtypes(spec.in_params), dtypes(spec.out_params))
            arginfos = tuple(_kernel._ArgInfo(ndarray_kind, cupy.ndarray, t, ndim, contiguous, True) for t in in_types + out_types)
            arginfos += (_kernel._ArgInfo(indexer_kind, _carray.Indexer, None, ndim, True, True),)
            code = _kernel._get_elementwise_kernel_code(arginfos, type_map, kernel.params, kernel.operation, kernel.name, kernel.preamble)
            assert PREAMBLE in code and f'__global__ void {spec.name}(' in code
            bodies.append(code.replace(PREAMBLE, ""))  # one translation unit: the shared preamble once
            names.append(spec.name)
        # one kernel alone, exactly as CuPy would compile it, then all of them in one program
        single = compiler._NVRTCProgram(headers + code, "kern.cu", method="cubin").compile(options + ("-arch=sm_80",))[0]
        assert single[:4] == b"\x7fELF"
        try:
            ptx = compiler._NVRTCProgram(headers + PREAMBLE + "\n".join(bodies), "kern.cu", method="ptx").compile(options + ("-arch=compute_80",))[0]
        except compiler.CompileException as e:
            pytest.fail(f"NVRTC rejected the generated kernels ({ndim}-d): {str(e)[:4000]}")
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        assert ".target sm_80" in ptx and all(f".entry {name}(" in ptx for name in names)


@needs_nvcc
def test_generated_kernels_compile_with_nvcc(tmp_path):
    kernels = _single_op_kernels()
    covered = {k.name for k in kernels}
    assert len(covered) > 150  # every translated (prim, dtype) pair the prims accept
    for fn, spec in [
        (_gelu_block, (((8, 16), torch.float32), ((16,), torch.float32), ((8, 16), torch.float32))),
        (lambda a, b: torch.where(a > 0, a, b // 3) * torch.exp(b), (((4, 8), torch.float16), ((8,), torch.float16))),
        (lambda a, b: ((a << 2) % b, (a.float() / 3).round().to(torch.int8) ^ 5), (((6,), torch.int64), ((6,), torch.int64))),
        (lambda a: torch.clamp(a, 0.0, float("inf")).to(torch.bool) | torch.isnan(a), (((3, 3), torch.float64),)),
    ]:
        ex, _ = _plan(fn, *spec)
        kernels += [k for p in ex.programs for k in p.kernels]
    source = "\n".join(["#include <cuda_fp16.h>", "typedef __half float16;  // CuPy's float16 converts as __half does", PREAMBLE]
                       + [k.standalone_source() for k in {k.name: k for k in kernels}.values()])
    (tmp_path / "kernels.cu").write_text(source)
    done = subprocess.run(["nvcc", "--ptx", "-arch=sm_80", "-o", str(tmp_path / "kernels.ptx"), str(tmp_path / "kernels.cu")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    ptx = (tmp_path / "kernels.ptx").read_text()
    assert all(f".entry {name}(" in ptx for name in covered)


# --- CPU programs are unaffected --------------------------------------------------------------------


def test_cpu_program_unaffected_and_passed_over_with_reason():
    fn = lambda x, y: torch.tanh(x + y) * 2
    x, y = torch.randn(4, 5), torch.randn(5)
    defaults = squall.market.plugins.default_marketplace().default_executors()  # every installed plugin that is available
    jfn = squall.jit(fn, executors=defaults)
    torch.testing.assert_close(jfn(x, y), fn(x, y))
    assert "cupy" not in squall.last_traces(jfn).source

    expected = make_executor().availability()
    if expected:
        return  # available here: CPU tensors are declined by the checkers (test_checkers_decline...)
    with pytest.warns(Warning, match="executor 'cupy' is unavailable here"):
        named = squall.jit(fn, executors=["cupy"])
    torch.testing.assert_close(named(x, y), fn(x, y))
    report = squall.explain(named, x, y)
    assert report.unavailable["cupy"] == expected.reason
    assert report.regions == []



@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="cupy is not installed")
def test_cupy_parses_the_generated_kernel_declarations():
    try:
        import cupy  # noqa: F401 - building kernel objects needs CuPy, not a GPU
    except Exception as e:  # noqa: BLE001 - e.g. CUDA libraries missing
        pytest.skip(f"cupy cannot be imported here: {type(e).__name__}: {e}")
    ex, _ = _plan(_gelu_block, ((8, 16), torch.float32), ((16,), torch.float32), ((8, 16), torch.float32))
    for spec in ex.programs[0].kernels:
        kernel = ex.kernel_cache.get(spec)
        assert (kernel.nin, kernel.nout, kernel.name) == (len(spec.in_params), len(spec.out_params), spec.name)
        assert ex.kernel_cache.get(spec) is kernel  # built once


def test_a_region_with_symbolic_sizes_is_declined_saying_so():
    # cupy's kernels are generated for constant shapes: a symbolic size (a length that changes
    # between calls, squall.symbolic) stays with torch, and the plan says why
    from squall.frontend.tracing import ALL_DIMS

    ex = make_executor()
    stand_ins = (TensorProxy("a0", shape=(4, 8), dtype=torch.float32, device="cuda"),)
    trace, _ = trace_program(_gelu_block_one, stand_ins, {}, dims={("args", 0): ALL_DIMS})
    with assume_available(ex):
        result = plan(trace, [ex, _torch_executor()])
    assert "cupy.region" not in [b.sym.id for b in result.bsyms]
    reasons = [why for d in result.plan.decisions for name, why in d.declined if name == "cupy"]
    assert reasons and all("symbolic sizes (s0, s1): cupy compiles regions of static shapes only" in why for why in reasons)
    # the same program on constant shapes is one cupy region
    static, _ = trace_program(_gelu_block_one, stand_ins, {})
    with assume_available(ex):
        assert "cupy.region" in [b.sym.id for b in plan(static, [ex, _torch_executor()]).bsyms]


def _gelu_block_one(x):
    return F.gelu(x * 2 + 1, approximate="tanh")
