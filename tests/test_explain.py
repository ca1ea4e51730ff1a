"""squall.explain and squall.executors: the report of what the marketplace did."""
from __future__ import annotations

import json

import torch

import squall
from squall.extend import OperatorExecutor
from squall.market.torch_executor import make_executor
from squall.proxies import TensorProxy
from test_planner import PyFuser


def program(x):
    y = torch.exp(x)
    z = torch.special.bessel_j0(y)
    return torch.sin(z) * 2.0


def test_report_names_executors_reasons_sources_regions_and_opaque_calls():
    picky = OperatorExecutor("picky")
    picky.register_implementation("torch.sin", torch.sin, checker=lambda a: isinstance(a, TensorProxy) and a.dtype == torch.float64)
    jitted = squall.jit(program, executors=[picky, PyFuser(), make_executor()])
    report = squall.explain(jitted, torch.randn(3))
    exp = next(r for r in report.rows if r.op == "torch.exp")
    assert exp.executor == "pyfuse" and exp.region == 0
    assert exp.source[0].endswith("test_explain.py") and exp.source[2] == "y = torch.exp(x)"
    sin = next(r for r in report.rows if r.op == "torch.sin")
    assert sin.executor == "torch"
    assert ("picky", "checker declined") in sin.declined
    assert report.opaque == ["torch.special.bessel_j0"]
    assert any("bessel_j0" in w for w in report.warnings)
    text = str(report)
    assert "test_explain.py:16" in text and "y = torch.exp(x)" in text
    assert "picky: checker declined" in text
    assert "region 0 (pyfuse)" in text and "opaque fallbacks: torch.special.bessel_j0" in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["executors"] == ["picky", "pyfuse", "torch"]
    assert data["regions"][0]["executor"] == "pyfuse"
    # explaining compiles nothing and runs nothing
    assert jitted.cache_info().misses == 0


def test_plain_functions_use_the_configuration_in_force():
    report = squall.explain(lambda x: torch.exp(x), torch.randn(2))
    assert report.executors[-1] == "torch" and report.taken_by("torch.exp") == ["torch"]


def test_executors_table():
    table = squall.executors()
    row = table["torch"]
    assert row.available and row.distribution == "squall" and row.default
    assert "prims.exp" in row.ops and "torch.nn.functional.softmax" in row.ops
    assert "torch" in str(table) and json.loads(json.dumps(table.to_dict()))["executors"][-1]["name"] == "torch"
