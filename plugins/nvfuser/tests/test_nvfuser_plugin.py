"""squall-nvfuser without nvFuser and without CUDA: discovery, availability, checkers, the table.

Nothing here runs nvFuser; `test_nvfuser_gpu.py` does, where nvFuser and CUDA exist.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import json
import re
import warnings
from pathlib import Path

import pytest
import torch

import squall
from squall import ltorch, prims
from squall.extend import assume_available
from squall.frontend.tracing import TracingContext
from squall.market.plugins import Marketplace
from squall.proxies import TensorProxy, tracing
from squall.runtime import tiers
from squall.runtime.jit import jitted_state
from squall.tools.cli import main

import squall_nvfuser
from squall_nvfuser import checkers, executor, frontend, translate
from squall_nvfuser.nvfuser_api import DATA_TYPES, FD_METHODS, FD_OPS, MODULE_FUNCTIONS
from squall_nvfuser.translate import TRANSLATORS

HAS_NVFUSER = importlib.util.find_spec("nvfuser_direct") is not None
PACKAGE = Path(squall_nvfuser.__file__).parent


def _expected_reason() -> str:
    found = frontend.frontend_availability()
    if not found:
        return found.reason
    if not torch.cuda.is_available():
        return "no CUDA device"
    return ""


def _cuda(shape=(4, 8), dtype=torch.float32, device="cuda") -> TensorProxy:
    return TensorProxy(shape=shape, dtype=dtype, device=device)


@pytest.fixture
def proxies():
    with tracing(TracingContext()) as ctx:
        yield ctx


@pytest.fixture
def ex():
    return squall_nvfuser.make_executor()


def _checker(ex, prim_id):
    return ex.supported[prim_id]


# --- which nvFuser: the frontend and the version range ---


def test_version_tuple_reads_release_numbers():
    assert frontend.version_tuple("0.2.36.dev20260301") == (0, 2, 36)
    assert frontend.version_tuple("0.2.36+git7e04d26") == (0, 2, 36)
    assert frontend.version_tuple("1.0") == (1, 0) and frontend.version_tuple("unknown") == ()


def test_availability_names_the_frontend_and_version_problem():
    reason = lambda **kw: frontend.frontend_availability(**kw).reason  # noqa: E731
    assert reason(has_direct=False, has_legacy=False) == (
        "library 'nvfuser_direct' is not installed; pip install the nvFuser wheel built for your CUDA and torch, "
        "e.g. nvfuser-cu126-torch210"
    )
    legacy = reason(has_direct=False, has_legacy=True)
    assert legacy.startswith("only nvFuser's legacy frontend 'nvfuser' is installed") and "uses 'nvfuser_direct'" in legacy
    assert reason(has_direct=True, version="0.2.35") == "nvfuser_direct 0.2.35 is older than the oldest supported (0.2.36)"
    assert reason(has_direct=True, version="0.3.0").startswith("nvfuser_direct 0.3.0 is newer than supported (< 0.3;")
    assert reason(has_direct=True, version="garbage").startswith("cannot tell the version of 'nvfuser_direct'")
    for ok in ("0.2.36.dev20260301", "0.2.36+git7e04d26", "0.2.99"):
        assert frontend.frontend_availability(has_direct=True, version=ok), ok


@pytest.mark.skipif(HAS_NVFUSER, reason="nvfuser_direct is installed here")
def test_without_nvfuser_direct_the_executor_says_what_to_install(ex):
    availability = ex.is_available()
    assert not availability and "'nvfuser_direct'" in availability.reason


# --- installation and discovery ---


def test_installed_distribution_declares_the_entry_point():
    dist = importlib.metadata.distribution("squall-nvfuser")
    eps = [ep for ep in dist.entry_points if ep.group == "squall"]
    assert [(ep.name, ep.value) for ep in eps] == [("nvfuser", "squall_nvfuser")]


def test_discovered_by_a_marketplace_through_package_metadata():
    market = Marketplace()
    assert "nvfuser" in market.names()
    nv = market.get("nvfuser")
    assert market.plugin_of("nvfuser") == "nvfuser"
    assert (nv.distribution, nv.version) == ("squall-nvfuser", "0.1.0")
    assert market.load_error_for("nvfuser") is None


@pytest.mark.skipif(HAS_NVFUSER and torch.cuda.is_available(), reason="nvFuser and CUDA are both present here")
def test_unavailable_with_the_reason_and_left_out_of_the_defaults():
    market = Marketplace()
    availability = market.get("nvfuser").availability()
    assert not availability and availability.reason == _expected_reason()
    assert "nvfuser" not in [e.name for e in market.default_executors()]


@pytest.mark.skipif(HAS_NVFUSER and torch.cuda.is_available(), reason="nvFuser and CUDA are both present here")
def test_cli_lists_it_as_unavailable_with_the_reason(capsys):
    main(["executors", "--json"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["executors"]}
    row = rows["nvfuser"]
    assert (row["available"], row["reason"], row["distribution"]) == (False, _expected_reason(), "squall-nvfuser")
    assert sorted(row["ops"]) == sorted(TRANSLATORS)


def test_cli_ops_lists_every_claimed_prim_with_its_nvfuser_ops(capsys):
    assert main(["executors", "--ops", "nvfuser", "--json"]) == 0
    listed = {r["op"]: r["note"] for r in json.loads(capsys.readouterr().out)["ops"]}
    assert set(listed) == set(TRANSLATORS)
    assert listed["prims.transpose"] == "fd.ops.permute"
    assert listed["prims.div"] == "fd.ops.div  (only: rounding_mode=None)"
    assert main(["executors", "--ops", "nvfuser"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(TRANSLATORS) and lines[0].startswith("prims.abs") and lines[0].endswith("fd.ops.abs")


def test_cli_ops_names_an_unknown_executor(capsys):
    assert main(["executors", "--ops", "no_such_executor"]) == 2
    assert "no executor named 'no_such_executor'" in capsys.readouterr().err


# --- planning: passed over with its reason, CPU programs unaffected ---


@pytest.mark.skipif(HAS_NVFUSER and torch.cuda.is_available(), reason="nvFuser and CUDA are both present here")
def test_explain_shows_it_passed_over_with_its_reason():
    def fn(x):
        return torch.nn.functional.gelu(x) * 2 + 1

    x = torch.randn(4, 8)
    with pytest.warns(UserWarning, match="nvfuser"):
        report = squall.explain(squall.jit(fn, executors=["nvfuser", "torch"]), x)
    assert report.unavailable == {"nvfuser": _expected_reason()}
    assert f"passed over: nvfuser ({_expected_reason()})" in str(report)
    assert not report.regions and all(r.executor in ("torch", None) for r in report.rows)
    # it claims these ops only through their decompositions, so the planner says it has none directly
    for row in report.rows:
        reasons = [why for name, why in row.declined if name == "nvfuser"]
        assert reasons and all(why in ("not implemented", f"unavailable: {_expected_reason()}") for why in reasons)


def test_cpu_programs_run_as_before(ex):
    def fn(x, w):
        y = torch.nn.functional.layer_norm(x, (8,), w, None)
        return torch.softmax(y @ w.reshape(8, 1).expand(8, 8), dim=-1).sum(dim=0)

    x, w = torch.randn(4, 8), torch.randn(8)
    expected = fn(x, w)
    torch_ex = squall.market.plugins.default_marketplace().get("torch")
    for executors in (["nvfuser", "torch"], [ex, torch_ex], None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # naming an unavailable executor warns (asserted above)
            jfn = squall.jit(fn, executors=executors)
            torch.testing.assert_close(jfn(x, w), expected)
        traces = squall.last_traces(jfn)
        assert "nvfuser" not in traces.source
        assert all(d.executor != "nvfuser" for d in traces.plan.decisions)


# --- the background upgrade and the in-context judge (squall.runtime.tiers) ---


def test_its_regions_wait_for_the_background_upgrade_and_are_judged_in_context():
    judged, untimed = squall_nvfuser.make_executor(), squall_nvfuser.make_executor(judge_in_context=False)
    assert judged.compiles_in_background and judged.judge_in_context
    assert untimed.compiles_in_background and not untimed.judge_in_context
    torch_ex = squall.market.plugins.default_marketplace().get("torch")
    with assume_available(judged):
        # the first call plans without it; the upgrade plans with it
        first = tiers.background_priority([judged, torch_ex])
        assert [e.name for e in first] == ["torch"] and "without nvfuser until the background upgrade" in first.source
        ((label, offered),) = tiers.fusion_offers([judged, torch_ex])
        assert [e.name for e in offered] == ["nvfuser", "torch"] and offered[0] is judged
    if not judged.availability():  # unavailable here (no nvFuser, or no GPU): nothing waits for an upgrade
        assert tiers.background_priority([judged, torch_ex]) is None


@pytest.mark.parametrize("judge_in_context", [True, False])
def test_an_upgrade_with_nvfuser_regions_is_timed_in_context_unless_it_opts_out(monkeypatch, judge_in_context):
    """The judging path, without running nvFuser: a plan with an nvFuser region goes to the judge
    (which times it beside the torch plan) unless the executor asked to keep its regions untimed: then
    the judge only compares its results."""
    nv = squall_nvfuser.make_executor(judge_in_context=judge_in_context)
    torch_ex = squall.market.plugins.default_marketplace().get("torch")
    f = squall.jit(lambda x: torch.exp(x) * 2.0, executors=[torch_ex])
    f(torch.randn(4))
    base = jitted_state(f).last_entry.compilation
    job = tiers.UpgradeJob(tiers.Upgrade("f"), base, {"takes_params": False, "nargs": 1, "takes_kwargs": False},
                           [nv, torch_ex], tiers.call_specs(None, (torch.randn(4),), {}), lambda *a: True)
    timed = tiers.Verdict("fused", 2e-3, 1e-3, "in context: timed")
    asked = []

    def judge(fused, untimed=""):
        asked.append(untimed)
        return timed if not untimed else tiers.Verdict("fused", None, None, f"{untimed}; its results matched")

    monkeypatch.setattr(job, "_judge", judge)
    verdict = job._verdict(base, {"nvfuser"}, None)
    if judge_in_context:
        assert verdict is timed and asked == [""]
    else:  # not timed, but its results are still compared with the torch plan's
        assert asked == ["not timed in context: nvfuser asked not to be"]
        assert verdict.keep == "fused" and verdict.torch_s is None and "nvfuser asked not to be" in verdict.reason


# --- checkers, called directly with CUDA-device proxies ---


def test_checkers_accept_supported_dtypes_on_cuda(proxies, ex):
    add = _checker(ex, "prims.add")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool):
        a = _cuda(dtype=dtype)
        assert add(a, a), dtype
    assert add(_cuda(), 2.0) and add(3, _cuda(dtype=torch.int64))


def test_checkers_decline_cpu_complex_and_unsupported_dtypes(proxies, ex):
    add, exp = _checker(ex, "prims.add"), _checker(ex, "prims.exp")
    cpu = _cuda(device="cpu")
    assert not add(cpu, cpu) and not exp(cpu)
    assert not add(_cuda(), cpu)
    for dtype in (torch.complex64, torch.uint8, torch.int8, torch.int16, torch.float8_e4m3fn):
        assert not add(_cuda(dtype=dtype), _cuda(dtype=dtype)), dtype
    assert not add(_cuda(), 1j)
    assert checkers.why_not(cpu) == "a tensor is on cpu, not CUDA"
    assert checkers.why_not(_cuda(dtype=torch.complex64)) == "dtype torch.complex64 is not supported"


def test_checkers_bound_the_rank(proxies, ex):
    exp = _checker(ex, "prims.exp")
    assert exp(_cuda(shape=(1,) * checkers.MAX_RANK))
    assert not exp(_cuda(shape=(1,) * (checkers.MAX_RANK + 1)))
    assert exp(_cuda(shape=()))
    assert checkers.why_not(_cuda(shape=(1,) * 9)) == "rank 9 is above 8"


def test_checkers_apply_each_translators_limits(proxies, ex):
    f32, i32, f16 = _cuda(), _cuda(dtype=torch.int32), _cuda(dtype=torch.float16)
    c = lambda op: _checker(ex, f"prims.{op}")
    assert c("div")(f32, f32) and not c("div")(f32, f32, rounding_mode="floor")
    assert c("pow")(f32, 2.0) and not c("pow")(i32, i32)
    assert c("remainder")(f32, f32) and not c("remainder")(i32, i32) and not c("fmod")(i32, 3)
    assert c("sum")(f32, (1,)) and c("sum")(f16, (0, 1)) and not c("sum")(i32, (1,)) and not c("sum")(f32, ())
    assert c("amax")(i32, (0,)) and not c("amax")(_cuda(dtype=torch.bool), (0,))
    assert c("var")(f32, (1,), correction=1) and not c("var")(f32, (1,), correction=0.5)
    assert c("sign")(f32) and not c("sign")(_cuda(dtype=torch.bool))
    assert c("slice")(f32, (0, 0), (4, 8), (1, 1)) and not c("slice")(f32, (0, 0), (4, 8), (1, 2))
    assert c("pad")(f32, 0.0, ((1, 1, 0), (0, 2, 0))) and not c("pad")(f32, 0.0, ((0, 0, 1), (0, 0, 0)))
    assert not c("pad")(f32, 0.0, ((-1, 0, 0), (0, 0, 0)))
    assert c("convert_element_type")(f32, torch.bfloat16) and not c("convert_element_type")(f32, torch.complex64)
    assert c("cat")([f32, f32], 0) and not c("cat")([f32, _cuda(device="cpu")], 0)
    pred = _cuda(dtype=torch.bool)
    assert c("where")(pred, f32, 0.0) and not c("where")(pred, _cuda(dtype=torch.complex64), 0.0)


def test_torch_ops_are_claimed_through_their_decompositions_on_cuda_only(proxies, ex):
    ops = ltorch.names_to_symbols()
    x, w = _cuda(shape=(2, 8, 32)), _cuda(shape=(32,))
    calls = {
        "torch.nn.functional.layer_norm": (x, (32,), w, w),
        "torch.nn.functional.gelu": (x,),
        "torch.nn.functional.softmax": (x, -1),
    }
    for name, args in calls.items():
        ops[name](*args)
        bsym = proxies.scopes[0][-1]
        impl, why = ex.offer(bsym)
        assert impl is not None and why == "", (name, why)
    xc = _cuda(shape=(2, 8, 32), device="cpu")
    ops["torch.nn.functional.gelu"](xc)
    impl, why = ex.offer(proxies.scopes[0][-1])
    assert impl is None and "checker declined" in why


# --- the translation table, against nvFuser's API as read from its source ---


def test_every_claimed_prim_has_a_translator_and_is_a_real_prim(ex):
    assert set(ex.claimed_ops()) == set(TRANSLATORS)
    assert set(TRANSLATORS) <= set(prims.all_prims())


def test_every_translator_names_fd_ops_that_nvfuser_has():
    for prim_id, translator in TRANSLATORS.items():
        assert translator.ops and set(translator.ops) <= FD_OPS, (prim_id, set(translator.ops) - FD_OPS)
        # an fd.ops name spelled in the translator's own source must be one it declares
        source = inspect.getsource(translator.emit)
        spelled = set(re.findall(r"\.ops\.(\w+)\(", source))
        assert spelled <= set(translator.ops), (prim_id, spelled - set(translator.ops))
        if not spelled:  # a generic translator reaches its op through getattr(fd.ops, op)
            assert "getattr(t.fd.ops, op)" in source, prim_id


def test_dtypes_map_to_nvfuser_data_types():
    assert set(translate.NV_DTYPES.values()) <= DATA_TYPES
    assert {name for _, name in translate._NUMBER_DTYPES} <= DATA_TYPES


def test_the_plugin_uses_only_verified_fusion_definition_methods_and_module_names():
    sources = "\n".join(p.read_text() for p in PACKAGE.glob("*.py") if p.name != "nvfuser_api.py")
    methods = set(re.findall(r"\bfd\.(\w+)", sources))
    assert methods <= FD_METHODS, methods - FD_METHODS
    module_names = set(re.findall(r"\bnvfuser_direct\.(\w+)", sources))
    assert module_names <= MODULE_FUNCTIONS, module_names - MODULE_FUNCTIONS


def test_contiguous_strides():
    assert executor.contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert executor.contiguous_strides(()) == ()
    assert executor.contiguous_strides((0, 5)) == (5, 1)
    assert executor.contiguous_strides((2, 3, 4)) == torch.empty(2, 3, 4).stride()
