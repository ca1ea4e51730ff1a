"""Every OpInfo sample through every executor configuration, against the torch reference."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils._pytree import tree_leaves, tree_map

import squall
from squall.ltorch.unmodelled import NotModelled
from squall.market.torch_executor import make_executor
from opinfos import ALL_TYPES, OpInfo, all_opinfos, prims_only_executor

OPINFOS = all_opinfos()




CONFIGS = {
    "torch": [make_executor()],
    "decomposed": [prims_only_executor()],
}


def _compile(op):
    def program(*args, **kwargs):
        return op(*args, **kwargs)

    return program


def _cases():
    for info in OPINFOS:
        for config in CONFIGS:
            for dtype in ALL_TYPES:
                if dtype not in info.dtypes:
                    continue
                marks = []
                reason = info.skip_reason(config, dtype)
                if reason:
                    marks.append(pytest.mark.skip(reason=reason))
                yield pytest.param(info, config, dtype, id=f"{info.name}-{config}-{str(dtype).removeprefix('torch.')}", marks=marks)


def _tolerance(info: OpInfo, dtype: torch.dtype) -> dict:
    if dtype in info.tolerances:
        rtol, atol = info.tolerances[dtype]
        return {"rtol": rtol, "atol": atol}
    if dtype == torch.bfloat16:
        return {"rtol": 1.6e-2, "atol": 1e-2}
    return {}


@pytest.mark.parametrize("info,config,dtype", list(_cases()))
def test_consistency(info: OpInfo, config: str, dtype: torch.dtype):
    assert _run_samples(info, dtype, CONFIGS[config]), f"{info.name} produced no samples for {dtype}"


def _run_samples(info: OpInfo, dtype: torch.dtype, executors: list, **options) -> int:
    """Every sample of `info` jitted with `executors` (and jit's `options`) against the torch
    reference; how many ran."""
    ran = 0
    for sample in info.sample_inputs(dtype, "cpu"):
        jfn = squall.jit(_compile(info.op), executors=executors, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)  # no op may fall back to opaque
            if info.random:
                torch.manual_seed(1234)
            actual = jfn(*sample.args, **sample.kwargs)
        if info.random:
            torch.manual_seed(1234)
        expected = info.ref()(*sample.args, **sample.kwargs)
        if info.random:
            _assert_same_structure(actual, expected, sample)
        else:
            torch.testing.assert_close(actual, expected, equal_nan=True, **_tolerance(info, dtype), msg=lambda m: f"{sample}: {m}")
        ran += 1
    return ran


def _assert_same_structure(actual, expected, sample):
    from torch.utils._pytree import tree_flatten

    a, sa = tree_flatten(actual)
    e, se = tree_flatten(expected)
    assert sa == se, f"{sample}: output structure {sa} != {se}"
    for x, y in zip(a, e):
        if isinstance(y, torch.Tensor):
            assert x.shape == y.shape and x.dtype == y.dtype and x.device == y.device, f"{sample}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}"


def _error_cases():
    for info in OPINFOS:
        if info.error_inputs is not None:
            yield pytest.param(info, id=info.name)


def _layouts(tree) -> list:
    return [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else t for t in tree_leaves(tree)]


@pytest.mark.parametrize("info", list(_error_cases()))
def test_errors(info: OpInfo):
    ran = 0
    for err in info.error_inputs("cpu"):
        s = err.sample
        jfn = squall.jit(_compile(info.op))
        if err.exc_type is NotModelled:  # valid in torch, not modelled by squall: the call runs eagerly, saying why
            expected = info.ref()(*s.args, **s.kwargs)
            with pytest.warns(squall.SquallWarning, match=f"(?s){err.match}.*runs eagerly"):
                got = jfn(*s.args, **s.kwargs)
            assert _layouts(got) == _layouts(expected)  # values: tests/test_not_modelled.py (a generator's draws differ)
            ran += 1
            continue
        if err.torch_raises:
            with pytest.raises(err.exc_type):
                info.ref()(*s.args, **s.kwargs)
        with pytest.raises(err.exc_type, match=err.match):
            jfn(*s.args, **s.kwargs)
        ran += 1
    assert ran


def test_opinfo_coverage_counts_ltorch_ops():
    from squall import ltorch

    covered = {info.symbol for info in OPINFOS if info.symbol}
    unknown = covered - set(ltorch.all_symbols())
    assert not unknown, f"OpInfos name ops that ltorch does not have: {sorted(unknown)}"


def test_opinfos_mirror_the_ltorch_modules():
    """An op's OpInfos live in tests/opinfos/<module>.py, named like the ltorch module defining the op."""
    import importlib

    from opinfos import FAMILIES
    from squall import ltorch

    defined_in = {}
    for module in ltorch.MODULES:
        for name in module.__all__:
            op = getattr(module, name)
            if isinstance(op, squall.symbol.Symbol):
                defined_in[op.id] = module.__name__.rsplit(".", 1)[-1]
    assert set(FAMILIES) <= set(defined_in.values()), f"OpInfo files with no ltorch module: {sorted(set(FAMILIES) - set(defined_in.values()))}"
    misplaced = [
        f"{info.name} ({info.symbol}) is in opinfos/{family}.py, its op in ltorch/{defined_in[info.symbol]}.py"
        for family in FAMILIES
        for info in importlib.import_module(f"opinfos.{family}").opinfos
        if info.symbol in defined_in and defined_in[info.symbol] != family
    ]
    assert not misplaced, "\n".join(misplaced)


def test_ltorch_modules_list_exactly_their_ops_in_all():
    """One convention: every op module's `__all__` lists the ops it defines, and only those."""
    import ast
    import inspect

    from squall import ltorch

    for module in ltorch.MODULES:
        tree = ast.parse(inspect.getsource(module))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        defined |= {x.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        ops = {n for n in defined if hasattr(getattr(module, n, None), "torchfns") and not isinstance(getattr(module, n), type)}
        assert set(module.__all__) == ops, f"{module.__name__}: __all__ lacks {sorted(ops - set(module.__all__))}, has extra {sorted(set(module.__all__) - ops)}"


# ops whose samples fail with every size symbolic, and why (each is a gap in symbolic shapes,
# not a wrong result: these raise while tracing)
SYMBOLIC_SKIPS: dict[str, str] = {}


def _symbolic_cases():
    for info in OPINFOS:
        dtypes = [d for d in ALL_TYPES if d in info.dtypes]
        if not dtypes:
            continue
        dtype = torch.float32 if torch.float32 in dtypes else dtypes[0]
        for config in CONFIGS:
            marks = []
            reason = info.skip_reason(config, dtype) or SYMBOLIC_SKIPS.get(info.name)
            if reason:
                marks.append(pytest.mark.skip(reason=reason))
            yield pytest.param(info, config, dtype, id=f"{info.name}-{config}-{str(dtype).removeprefix('torch.')}", marks=marks)


@pytest.mark.parametrize("info,config,dtype", list(_symbolic_cases()))
def test_consistency_with_symbolic_sizes(info: OpInfo, config: str, dtype: torch.dtype):
    """Every sample traced with every dimension of 2 or more symbolic (`dynamic=True`): the
    same results as eager, on the torch executor and decomposed to prims (what a fusion
    executor that compiles symbolic sizes is handed: a size expression in a decomposition,
    roll's `shift % numel`, is checked here)."""
    assert _run_samples(info, dtype, CONFIGS[config], dynamic=True), f"{info.name} produced no samples for {dtype}"


def _grown(x, generator: torch.Generator):
    """`x` one longer in each dimension of 2 or more, new values (an integer tensor's within its
    old range, so indices stay valid); anything else as it is."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.device.type != "cpu":
        return x
    shape = [n + 1 if n >= 2 else n for n in x.shape]
    if x.dtype == torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=x.dtype)
    low, high = (int(x.min()), int(x.max()) + 1) if x.numel() else (0, 1)
    return torch.randint(low, high, shape, generator=generator, dtype=x.dtype)


@pytest.mark.parametrize("info,config,dtype", list(_symbolic_cases()))
def test_a_symbolic_trace_reused_at_other_sizes(info: OpInfo, config: str, dtype: torch.dtype):
    """Every sample traced with every size symbolic, then called again with each size of 2 or more
    one longer (where eager takes those inputs): eager's results, whether the trace is reused or
    its guards send the call to a new compile (a size burned into a reused trace is a wrong answer)."""
    if info.random:
        pytest.skip("random ops compare only the structure of their results")
    generator = torch.Generator().manual_seed(0)
    reused = 0
    for sample in info.sample_inputs(dtype, "cpu"):
        if reused == 3:  # (a few samples an op: the suite's time)
            break
        jfn = squall.jit(_compile(info.op), executors=CONFIGS[config], dynamic=True)
        jfn(*sample.args, **sample.kwargs)
        args, kwargs = tree_map(lambda x: _grown(x, generator), (sample.args, sample.kwargs))
        try:
            expected = info.ref()(*args, **kwargs)
        except Exception:  # noqa: BLE001 - sizes this op does not take together: nothing to compare
            continue
        actual = jfn(*args, **kwargs)
        torch.testing.assert_close(actual, expected, equal_nan=True, **_tolerance(info, dtype), msg=lambda m: f"{sample} grown: {m}")
        reused += 1
    if not reused:
        pytest.skip("no sample of this op takes every size one longer (a size among its arguments)")
