"""nvFuser itself checks every translation: a real FusionDefinition for every region the plugin forms.

Runs where `nvfuser_direct` imports — no GPU is needed to *define* a fusion, only to run
one. `plugins/nvfuser/verify/verify.sh` builds that environment (Python 3.12, torch 2.10.0,
nvfuser-cu126-torch210) and runs this module; elsewhere it skips, saying so.

For every sample of every OpInfo in squall's tests/opinfos, and for the demo GPT block,
the program is traced for a CUDA device (TensorProxy stand-ins, no GPU) and planned with
the nvFuser executor first (`assume_available`). Each region it forms goes through the
executor's own `compile_region`, which builds a `nvfuser_direct.FusionDefinition` with
`translate_region`: nvFuser accepts it or raises (a rejection). Every accepted region is
then defined again and read back: each call's nvFuser value must have the dtype and shape
the trace gives its result, reductions must reduce exactly the trace's dims, broadcasts
must broadcast exactly the dims the trace adds, and the printed definition may only use
the `fd.ops` the region's translators declare. The region is also defined for a
non-contiguous (reversed) stride layout, as `RegionRunner` does at run time.

The counts (definitions built, accepted, rejected and why) are written as JSON to
$SQUALL_NVFUSER_REPORT when it is set.
"""
from __future__ import annotations

import collections
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from squall.extend import FusionRegion, PrimIDs, TensorProxy, assume_available

from squall_nvfuser import frontend
from squall_nvfuser.executor import NvFuserExecutor, RegionRunner, contiguous_strides
from squall_nvfuser.translate import NV_DTYPES, TRANSLATORS, translate_region

HOW = "run plugins/nvfuser/verify/verify.sh (Python 3.12, torch 2.10.0, nvfuser-cu126-torch210)"
try:
    nvfuser_direct = frontend.load()
except Exception as e:  # noqa: BLE001 - not installed, or built for another torch
    pytest.skip(f"nvfuser_direct cannot be imported here ({type(e).__name__}: {str(e)[:200]}); {HOW}", allow_module_level=True)

from squall.compiler.planner import plan  # noqa: E402
from squall.frontend.tracing import trace_program  # noqa: E402 - after the skip: only this environment needs them
from squall.market.plugins import default_marketplace  # noqa: E402

# squall's OpInfos live in its tests/ folder, beside this plugin in the source tree
_CORE_TESTS = Path(__file__).resolve().parents[3] / "tests"
if str(_CORE_TESTS) not in sys.path:
    sys.path.insert(0, str(_CORE_TESTS))
from opinfos import all_opinfos  # noqa: E402

OPINFOS = all_opinfos()
_REDUCTIONS = {PrimIDs.SUM, PrimIDs.PROD, PrimIDs.AMAX, PrimIDs.AMIN, PrimIDs.VAR}
# nvFuser prints its lowered operations, so an fd.ops call that nvFuser composes from others
# prints as those (read from nvfuser_direct 0.2.36's printed definitions); every other op
# prints as itself
_PRINTS_AS = {
    "broadcast_in_dim": {"broadcast", "expand"},
    "var": {"sum", "sub", "mul", "div", "reciprocal", "ge", "where", "broadcast", "expand", "cast", "squeeze"},
    "reshape": {"reshape", "broadcast", "squeeze"},  # adding or removing only size-1 dims
    "cat": {"cat", "pad", "add"},
    "sign": {"gt", "lt", "where", "cast"},
    "bitwise_and": {"bitwise_and", "logical_and"},  # on bool
    "bitwise_or": {"bitwise_or", "logical_or"},
    "bitwise_xor": {"bitwise_xor", "ne"},
    "bitwise_not": {"bitwise_not", "logical_not"},
    # a reduction over a size-1 (broadcast) axis is a squeeze
    **{op: {op, "squeeze"} for op in ("sum", "prod", "max", "min")},
}


class RecordingExecutor(NvFuserExecutor):
    """The nvFuser executor, keeping every region it compiled and every rejection (nvFuser's error)."""

    def __init__(self) -> None:
        super().__init__()
        self.accepted: list[tuple[FusionRegion, RegionRunner]] = []
        self.rejected: list[tuple[FusionRegion, BaseException]] = []

    def compile_region(self, region: FusionRegion) -> RegionRunner:
        try:
            runner = super().compile_region(region)
        except Exception as e:
            self.rejected.append((region, e))
            raise
        self.accepted.append((region, runner))
        return runner


def _stand_in(x: Any, names: Iterator[str] | None = None) -> Any:
    """A CUDA TensorProxy for a CPU sample tensor, recursively through lists, tuples and dicts."""
    names = names if names is not None else (f"a{k}" for k in itertools.count())
    if isinstance(x, torch.Tensor):
        return TensorProxy(next(names), shape=tuple(x.shape), dtype=x.dtype, device="cuda", requires_grad=False)
    if type(x) in (list, tuple):
        return type(x)(_stand_in(v, names) for v in x)
    if type(x) is dict:
        return {k: _stand_in(v, names) for k, v in x.items()}
    return x


def _plan_on_cuda(fn, args: tuple, kwargs: dict, *, module: torch.nn.Module | None = None, dims: dict | None = None) -> RecordingExecutor:
    ex = RecordingExecutor()
    with torch.no_grad(), assume_available(ex):
        names = (f"a{k}" for k in itertools.count())
        trace, _ = trace_program(fn, _stand_in(args, names), _stand_in(kwargs, names), module=module, dims=dims)
        plan(trace, [ex, default_marketplace().get("torch")])
    return ex


# --- reading a definition back ---------------------------------------------------------------------


_AXIS = re.compile(r"^([a-z]+)[A-Za-z]*\d+\{(.+)\}[a-z]*$")  # 'iS2{8}', 'rS3{4}', 'bS7{1 ex 3}', 'iS6{128}rf' (a reshape's)


def _axes(tv: Any) -> list[tuple[str, int]]:
    """(kind, size) per logical axis as nvFuser prints it: 'i' iteration, 'r' reduction, 'b' broadcast."""
    axes = []
    for domain in tv.get_logical_domain():
        found = _AXIS.match(str(domain))
        assert found, f"cannot read nvFuser's axis {domain}"
        kind, extent = found.group(1)[0], found.group(2)
        size = extent.split(" ex ")[-1]  # an expanded broadcast: 1, expanded to its logical size
        axes.append((kind, int(size) if size.isdigit() else -1))
    return axes


def _problems(region: FusionRegion) -> list[str]:
    """What a fresh definition of `region` says that the trace does not mean (empty when they agree)."""
    descriptors = []
    for p in region.inputs:
        contiguity, stride_order = nvfuser_direct.compute_tensor_descriptor(list(p.shape), list(_contiguous(p.shape)))
        descriptors.append((tuple(p.shape), contiguity, stride_order))
    found: list[str] = []
    with nvfuser_direct.FusionDefinition() as fd:
        t = translate_region(region.calls, region.inputs, region.outputs, fd, data_type=nvfuser_direct.DataType, descriptors=descriptors)
        for call in region.calls:
            for p in call.output_proxies():
                found += [f"{call.sym.id} -> {p.name}: {why}" for why in _value_problems(call, p, t.values[p.name])]
    printed = repr(fd)
    used = set(re.findall(r"fd\.ops\.(\w+)\(", printed))
    # translate_region casts a result back to the trace's dtype where nvFuser computed it wider
    declared = {"cast"} | {shown for call in region.calls for op in TRANSLATORS[call.sym.id].ops for shown in _PRINTS_AS.get(op, {op})}
    if any(0 in p.shape for p in (*region.inputs, *region.outputs)):
        declared.add("full")  # nvFuser defines what an empty tensor produces as a `full`
    if used - declared:
        found.append(f"the printed definition uses {sorted(used - declared)}, which no translator here declares")
    return found


def _value_problems(call: Any, p: TensorProxy, tv: Any) -> list[str]:
    problems = []
    dtype = getattr(nvfuser_direct.DataType, NV_DTYPES[p.dtype])
    if tv.dtype() != dtype:
        problems.append(f"dtype {tv.dtype()} where the trace has {p.dtype}")
    axes = _axes(tv)
    kept = [(kind, size) for kind, size in axes if kind != "r"]
    shape = tuple(size for _, size in kept)
    if shape != tuple(p.shape):
        problems.append(f"shape {shape} where the trace has {tuple(p.shape)}")
    if call.sym.id in _REDUCTIONS and 0 not in call.args[0].shape:
        # nvFuser squeezes a size-1 axis instead of reducing it: compare the reduced extents
        # (a reduction of an empty tensor is a `full` of its initial value: the shape says it all)
        # (a reduction of size-1 axes only is a squeeze there, and the nearest reduction above it
        # is an earlier call's: its shape, checked above, says it all)
        a, dims = call.args[0], call.args[1]
        expected = sorted(a.shape[int(d) % a.ndim] for d in dims if a.shape[int(d) % a.ndim] != 1)
        reducing = _reduction_producing(tv) if expected else None
        reduced = sorted(size for kind, size in _axes(reducing) if kind == "r") if reducing is not None else []
        if reduced != expected:
            problems.append(f"reduces axes of sizes {reduced} where the trace reduces dims {list(dims)} of {tuple(a.shape)}")
    elif call.sym.id not in _REDUCTIONS and any(kind == "r" for kind, _ in axes):
        problems.append(f"reduction axes in {call.sym.id}'s result")
    if call.sym.id == PrimIDs.BROADCAST_IN_DIM:
        _, out_shape, kept_dims = call.args
        added = [i for i in range(len(out_shape)) if i not in kept_dims]
        broadcast = [i for i, (kind, _) in enumerate(kept) if kind == "b"]
        # every dim the call adds must be a broadcast axis (a size-1 input dim may stay one too)
        if not set(added) <= set(broadcast):
            problems.append(f"broadcast axes {broadcast}, but the trace adds {added}")
    return problems


def _inputs_of(expr: Any) -> list[Any]:
    found = []
    while True:  # Expr binds input(i), not a list
        try:
            found.append(expr.input(len(found)))
        except IndexError:
            return found


def _reduction_producing(tv: Any, depth: int = 8) -> Any | None:
    """The nearest tensor at or above `tv` in its definition with reduction axes (a cast or
    var's arithmetic may follow the reduction itself)."""
    frontier = [tv]
    for _ in range(depth):
        nxt = []
        for v in frontier:
            if v.is_tensor() and any(kind == "r" for kind, _ in _axes(v)):
                return v
            expr = v.definition()
            if expr is not None:
                nxt += [x for x in _inputs_of(expr) if x.is_tensor()]
        frontier = nxt
    return None


def _contiguous(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _reversed_strides(shape) -> tuple[int, ...]:
    """Strides of a column-major layout (what a .t() of a contiguous matrix has)."""
    strides, step = [], 1
    for n in shape:
        strides.append(step)
        step *= max(n, 1)
    return tuple(strides)


# --- the counts ---------------------------------------------------------------------------------


class Counts:
    """Definitions built, accepted and rejected (with nvFuser's reason), per source."""

    def __init__(self) -> None:
        self.samples = 0
        self.samples_with_regions = 0
        self.untraceable: list[str] = []
        self.built = 0
        self.accepted = 0
        self.strided_accepted = 0
        self.rejected: list[dict[str, str]] = []
        self.mismatches: list[str] = []
        self.by_op: dict[str, int] = collections.Counter()

    def add(self, source: str, ex: RecordingExecutor) -> None:
        self.samples += 1
        if ex.accepted or ex.rejected:
            self.samples_with_regions += 1
        self.built += len(ex.accepted) + len(ex.rejected)
        self.accepted += len(ex.accepted)
        for region, error in ex.rejected:
            ops = sorted({c.sym.id for c in region.calls})
            self.rejected.append({"source": source, "ops": ", ".join(ops), "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"})
        for region, runner in ex.accepted:
            self.by_op.update(c.sym.id for c in region.calls)
            self.mismatches += [f"{source}: {why}" for why in _problems(region)]
            if any(len(p.shape) >= 2 for p in region.inputs):
                runner.define(tuple(_reversed_strides(p.shape) for p in region.inputs))
                self.strided_accepted += 1

    def as_json(self) -> dict[str, Any]:
        return {
            "nvfuser_direct": getattr(nvfuser_direct, "__version__", "?"),
            "torch": torch.__version__,
            "samples_traced": self.samples,
            "samples_with_nvfuser_regions": self.samples_with_regions,
            "untraceable_samples": self.untraceable,
            "definitions_built": self.built,
            "definitions_accepted": self.accepted,
            "non_contiguous_definitions_accepted": self.strided_accepted,
            "definitions_rejected": len(self.rejected),
            "rejections": self.rejected,
            "meaning_mismatches": self.mismatches,
            "prims_defined": dict(sorted(self.by_op.items())),
        }


COUNTS = Counts()


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    path = os.environ.get("SQUALL_NVFUSER_REPORT")
    if path:
        Path(path).write_text(json.dumps(COUNTS.as_json(), indent=2) + "\n")


def _assert_none(rejected: list[dict[str, str]], mismatches: list[str]) -> None:
    lines = [f"rejected by nvFuser: {r['source']} ({r['ops']}): {r['error']}" for r in rejected] + mismatches
    assert not lines, "\n".join(lines)


# --- the checks -------------------------------------------------------------------------------


@pytest.mark.parametrize("info", OPINFOS, ids=[o.name for o in OPINFOS])
def test_every_opinfo_sample_defines_in_nvfuser(info):
    rejected_before, mismatches_before = len(COUNTS.rejected), len(COUNTS.mismatches)
    for dtype in info.dtypes:
        for k, sample in enumerate(info.sample_inputs(dtype, "cpu")):
            source = f"{info.name}[{str(dtype).removeprefix('torch.')}#{k}]"
            program = lambda *args, **kwargs: info.op(*args, **kwargs)  # noqa: E731
            try:
                ex = _plan_on_cuda(program, sample.args, sample.kwargs)
            except Exception as e:  # noqa: BLE001 - a sample squall cannot trace for CUDA is counted, not hidden
                COUNTS.untraceable.append(f"{source}: {type(e).__name__}: {str(e)[:200]}")
                continue
            COUNTS.add(source, ex)
    _assert_none(COUNTS.rejected[rejected_before:], COUNTS.mismatches[mismatches_before:])


def _cuda_gpt_block() -> tuple[torch.nn.Module, torch.Tensor]:
    """The demo GPT block with CUDA stand-ins for its parameters (traced as on a GPU), and an input."""
    from squall.tools.demo import Block, GPTConfig

    cfg = GPTConfig()
    block = Block(cfg).eval()
    names = (f"p{k}" for k in itertools.count())
    for sub in block.modules():
        for store in (sub._parameters, sub._buffers):
            for key, value in list(store.items()):
                if value is not None:
                    store[key] = _stand_in(value.detach(), names)
    return block, torch.empty(2, 32, cfg.n_embd)


def test_the_gpt_blocks_regions_define_in_nvfuser():
    block, x = _cuda_gpt_block()
    ex = _plan_on_cuda(None, (x,), {}, module=block)
    rejected_before, mismatches_before = len(COUNTS.rejected), len(COUNTS.mismatches)
    COUNTS.add("demo.Block", ex)
    assert len(ex.accepted) >= 2  # the layer norms, attention's softmax, the MLP's gelu
    _assert_none(COUNTS.rejected[rejected_before:], COUNTS.mismatches[mismatches_before:])


def test_the_background_upgrade_plans_the_regions_the_first_call_left_out():
    """squall.runtime.tiers, as on a GPU: the first call's plan leaves nvFuser out, and the
    upgrade's plan defines its regions (running and judging them needs the GPU)."""
    from squall.runtime import tiers

    block, x = _cuda_gpt_block()
    ex, torch_ex = RecordingExecutor(), default_marketplace().get("torch")
    with torch.no_grad(), assume_available(ex):
        trace, _ = trace_program(None, (_stand_in(x),), {}, module=block)
        first = plan(trace, tiers.background_priority([ex, torch_ex]))
        assert not first.plan.regions and not ex.accepted
        ((_, offered),) = tiers.fusion_offers([ex, torch_ex])
        upgraded = plan(trace, offered)
    assert {r.executor for r in upgraded.plan.regions} == {"nvfuser"} and len(ex.accepted) >= 2
    assert not ex.rejected, [str(e) for _, e in ex.rejected]


def test_claimed_ops_exist_in_this_nvfuser():
    """Every fd.ops name the table declares is bound by the installed nvfuser_direct."""
    have = set(dir(nvfuser_direct.ops))
    missing = {prim: sorted(set(tr.ops) - have) for prim, tr in TRANSLATORS.items() if set(tr.ops) - have}
    assert missing == {}
    assert all(hasattr(nvfuser_direct.DataType, name) for name in NV_DTYPES.values())


def _softmax_flatten_bias(x, bias):
    b, n, h = x.shape
    y = torch.softmax(x * 2 + bias, -1).reshape(b, n * h)  # a reshape to sizes computed from symbols
    return torch.tanh(y[:, : n * h - 1])  # a slice with a symbolic bound


def _softmax_flatten_bias_of_two_or_more(x, bias):
    b, n, h = x.shape
    assert b > 1 and n > 1 and h > 1  # the trace relies on sizes of 2 or more: guarded so
    return _softmax_flatten_bias(x, bias)


def test_a_region_whose_sizes_may_be_1_is_declined():
    # nvFuser is not known (unverified without a GPU) to compute a symbolic extent of 1 as squall's
    # trace means it, so a call whose size symbols may be 1 stays on torch (squall.symbolic.ShapeEnv.ones)
    from squall.frontend.tracing import ALL_DIMS

    x, bias = torch.empty(4, 6, 16), torch.empty(16)
    ex = _plan_on_cuda(_softmax_flatten_bias, (x, bias), {}, dims={("args", 0): ALL_DIMS})
    assert not ex.accepted and not ex.rejected


def test_a_region_with_symbolic_sizes_defines_once_for_every_length():
    from squall.frontend.tracing import ALL_DIMS

    x, bias = torch.empty(4, 6, 16), torch.empty(16)
    ex = _plan_on_cuda(_softmax_flatten_bias_of_two_or_more, (x, bias), {}, dims={("args", 0): ALL_DIMS})
    assert not ex.rejected, [str(e) for _, e in ex.rejected]
    assert ex.accepted
    (symbolic,) = [(region, runner) for region, runner in ex.accepted if runner.symbolic]
    region, runner = symbolic
    (fd,) = runner.definitions.values()
    printed = repr(fd)
    # the input's symbolic extents are -1 (any); the reshape's and the slice's sizes are
    # computed from the input's sizes inside the definition
    assert "shape=[-1, -1, -1]" in printed and "fd.ops.size(" in printed and "fd.ops.reshape(" in printed
    # another length and batch with the same layout reuses the definition; another layout defines anew
    sizes = [tuple(n if type(n) is int else 7 for n in p.shape) for p in runner.inputs]
    contiguous = tuple(contiguous_strides(shape) for shape in sizes)
    assert runner._key(sizes, contiguous) == next(iter(runner.definitions))
    reversed_order = tuple(tuple(reversed(contiguous_strides(tuple(reversed(shape))))) for shape in sizes)
    assert runner._key(sizes, reversed_order) != next(iter(runner.definitions))
