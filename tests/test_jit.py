"""The front door: inputs and outputs, caching, modules, in-place ops, fallbacks, errors."""
from __future__ import annotations

import traceback
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.runtime.jit import DEFAULT_CACHE_SIZE
from squall.sources import load_source
from squall.symbol import Tags


def test_pytree_inputs_and_outputs():
    def f(x, pair, table, scale, flag, nothing=None):
        a, b = pair
        y = x * scale + a - table["w"] * b
        return {"y": y, "parts": [a, (b, scale)], "flag": flag, "none": nothing}

    x, a, b, w = (torch.randn(3, 4) for _ in range(4))
    jf = squall.jit(f)
    out = jf(x, [a, b], {"w": w}, 2.5, True)
    assert_close(out["y"], f(x, [a, b], {"w": w}, 2.5, True)["y"])
    assert out["parts"][0] is a  # a returned input is the caller's tensor
    assert out["parts"][1][1] == 2.5 and out["flag"] is True and out["none"] is None
    assert isinstance(out["parts"], list) and isinstance(out["parts"][1], tuple)


def test_keyword_arguments_and_python_control_flow_on_numbers_and_shapes():
    def f(x, *, power=2, mode="add"):
        for _ in range(power):
            x = x * x if x.shape[0] > 2 else x + 1
        return x + 1 if mode == "add" else x - 1

    jf = squall.jit(f)
    x = torch.rand(3)
    assert_close(jf(x, power=3), f(x, power=3))
    assert_close(jf(x, power=1, mode="sub"), f(x, power=1, mode="sub"))
    small = torch.rand(2)
    assert_close(jf(small), f(small))
    assert jf.cache_info().misses == 3


def test_cache_hits_and_recompiles_on_signature_changes():
    jf = squall.jit(lambda a, b: a + b)
    a = torch.randn(4)
    jf(a, a)
    jf(a, a)
    jf(torch.randn(4), torch.randn(4))
    assert (jf.cache_info().hits, jf.cache_info().misses) == (2, 1)
    jf(a.double(), a.double())  # dtype
    jf(torch.randn(5), torch.randn(5))  # shape
    jf(a, 1)  # a number instead of a tensor
    jf(a, 2)  # its value
    jf(a, 2.0)  # its type, though 2 == 2.0
    assert jf.cache_info().misses == 6
    assert_close(jf(a, 2.0), a + 2.0)


def test_repeated_recompiles_warn_naming_the_changing_input():
    jf = squall.jit(lambda x, y: x * y, recompile_limit=3, dynamic=False)
    y = torch.randn(1)
    with pytest.warns(squall.SquallWarning, match="argument 'x' keeps changing"):
        for n in range(1, 6):
            jf(torch.randn(n), y)


def test_nn_module_parameters_buffers_and_training_flag():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4))
            self.register_buffer("shift", torch.randn(4))

        def forward(self, x):
            y = x * self.w + self.shift
            return y * 2 if self.training else y

    net = Net()
    jnet = squall.jit(net)
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert_close(jnet(x), net(x))
        net.eval()
        assert_close(jnet(x), net(x))
        # parameters are read at every call, not baked in
        net.w.copy_(torch.ones(4))
        assert_close(jnet(x), net(x))
    assert list(jnet.parameters())[0] is net.w


def test_gradients_flow_through_torch_executor():
    def f(x, w):
        return torch.tanh(x * w).exp()

    x = torch.randn(5, requires_grad=True)
    w = torch.randn(5, requires_grad=True)
    jf = squall.jit(f)
    out = jf(x, w)
    gx, gw = torch.autograd.grad(out.sum(), (x, w))
    ex, ew = torch.autograd.grad(f(x, w).sum(), (x, w))
    assert_close(gx, ex)
    assert_close(gw, ew)


def test_no_grad_and_grad_modes_compile_separately():
    jf = squall.jit(lambda x: x * 2)
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        assert not jf(x).requires_grad
    assert jf(x).requires_grad
    assert jf.cache_info().misses == 2


def test_last_traces_show_decomposition_annotations_and_executors():
    jf = squall.jit(lambda x: torch.exp(x) + 1)
    jf(torch.randn(2, 3))
    traces = squall.last_traces(jf)
    traced, planned, executed = traces
    text = str(traced)
    assert 't0 = ltorch.exp(x)  # t0: "cpu f32[2, 3]"' in text
    assert "    # t0 = prims.exp(x)" in text
    assert 't0 = torch.exp(x)  # t0: "cpu f32[2, 3]"' in str(planned)
    assert "del x" in str(executed)
    assert "torch_exp(x)" in traces.source
    assert [d.executor for d in traces.plan.decisions] == ["torch", "torch"]


def test_every_stage_is_a_trace_with_its_provenance_in_order():
    jf = squall.jit(lambda x: torch.softmax(x, -1) * 2)
    jf(torch.randn(3, 4))
    traces = squall.last_traces(jf)
    assert [type(t) for t in traces] == [squall.trace.Trace] * 3
    assert traces.traced is traces[0] and traces.planned is traces[1] and traces.executed is traces[2]
    firsts = [str(t).splitlines()[0] for t in traces]
    assert firsts[0].startswith("# traced from")
    assert firsts[1].startswith("# planned for torch")
    assert firsts[2].startswith("# execution trace")
    for t in traces:
        compile(str(t), "<trace>", "exec")  # each prints as Python


def test_a_later_stage_never_changes_an_earlier_trace():
    from squall.compiler.codegen import generate
    from squall.compiler.passes import free_after_last_use
    from squall.compiler.planner import plan
    from squall.frontend.tracing import trace_program

    def f(x, w):
        y = x @ w
        y.add_(1)  # in place: functionalized while tracing
        return torch.nn.functional.gelu(y).sum(-1)

    traced, bindings = trace_program(f, (torch.randn(2, 3), torch.randn(3, 4)), {})
    before = str(traced)
    planned = plan(traced, squall.market.config.resolve_executors(["torch"]))
    planned_text = str(planned)
    executed = free_after_last_use(planned)
    generate(executed, bindings, takes_params=False, nargs=2, takes_kwargs=False)
    assert str(traced) == before
    assert str(planned) == planned_text
    assert "del" not in planned_text and "del" in str(executed)


def test_calls_are_recorded_in_one_form_whatever_form_the_program_used():
    seen = []

    def f(x):
        a = torch.softmax(x, -1)
        b = torch.softmax(x, dim=-1)
        c = x.softmax(-1)
        return a + b + c

    jf = squall.jit(f)
    jf(torch.randn(2, 3))
    for b in squall.last_traces(jf).traced.bsyms:
        if b.sym.id == "torch.softmax":
            seen.append((b.args[1:], b.kwargs))
    assert len(seen) == 3 and seen[0] == seen[1] == seen[2]


def test_generated_source_appears_in_tracebacks():
    jf = squall.jit(lambda x, y: x + y)
    jf(torch.ones(2), torch.ones(2))
    generated = squall.last_traces(jf).fn
    with pytest.raises(RuntimeError) as info:
        generated(torch.ones(2), torch.ones(3))  # the shapes the code was generated for are bypassed
    frames = traceback.extract_tb(info.value.__traceback__)
    generated_frames = [f for f in frames if f.filename.startswith("<squall-generated")]
    assert generated_frames and "torch_add(x, y)" in generated_frames[0].line


def test_the_same_source_loaded_twice_runs_under_two_names():
    # the second load reuses the first's compiled code: each still has its own file name and text
    source = "def fail(x):\n    return x / 0\n"
    spaces = [{}, {}]
    names = [load_source(source, "test", space) for space in spaces]
    assert names[0] != names[1]
    for name, space in zip(names, spaces):
        assert space["fail"].__code__.co_filename == name
        with pytest.raises(ZeroDivisionError) as info:
            space["fail"](1)
        frame = traceback.extract_tb(info.value.__traceback__)[-1]
        assert frame.filename == name and frame.line == "return x / 0"


def test_inplace_on_intermediate_is_functional():
    def f(x):
        y = x * 2
        y.add_(1)
        y *= 3
        return y

    jf = squall.jit(f)
    x = torch.randn(4)
    assert_close(jf(x), f(x))
    traced = squall.last_traces(jf).traced
    assert all("_" != b.sym.name[-1] for b in traced.bsyms)


def test_inplace_on_input_writes_back():
    def f(x, y):
        x.mul_(2)
        x += y
        return x * 1

    x1, y = torch.randn(4), torch.randn(4)
    x2 = x1.clone()
    jf = squall.jit(f)
    out = jf(x1, y)
    expected = f(x2, y)
    assert_close(out, expected)
    assert_close(x1, x2)  # the caller's tensor was updated like eager's
    # written in place, as eager writes it: a chain of in-place kernels, no new tensor copied back
    source = squall.last_traces(jf).source
    assert "torch_mul_(x, 2)" in source and "torch_add_(x, y" in source and "copy_" not in source, source


def test_captured_tensor_becomes_a_constant():
    table = torch.randn(4)

    def f(x):
        return x + table

    jf = squall.jit(f)
    x = torch.randn(4)
    assert_close(jf(x), x + table)
    assert "c0" in str(squall.last_traces(jf).traced)


def test_unknown_torch_op_runs_opaque_with_one_warning():
    def f(x):
        return torch.special.bessel_j0(x) + 1

    jf = squall.jit(f)
    x = torch.randn(5)
    with pytest.warns(squall.SquallWarning, match=r"torch\.special\.bessel_j0 is not in squall's torch language"):
        out = jf(x)
    assert_close(out, f(x))
    traced = squall.last_traces(jf).traced
    assert any(Tags.OPAQUE in b.sym.tags for b in traced.bsyms)


def test_data_dependent_ops_raise_naming_the_op_in_strict_mode():
    jf = squall.jit(lambda x: torch.nonzero(x), strict=True)
    with pytest.raises(squall.DataDependentError, match=r"torch\.nonzero"):
        jf(torch.randn(4))


def test_control_flow_on_tensor_values_is_a_clear_error_in_strict_mode():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(squall.DataDependentError, match="value of tensor"):
        squall.jit(f, strict=True)(torch.randn(3))


def test_bad_inputs_are_clear_errors():
    with pytest.raises(TypeError, match="expects a function or an nn.Module"):
        squall.jit(42)

    # an unhashable object squall does not read through (a bytearray) cannot key calls
    with pytest.raises(TypeError, match="argument.*bytearray.*not hashable"):
        squall.jit(lambda x, o: x)(torch.ones(1), bytearray(b"ab"))
    with pytest.raises(RuntimeError, match="not been compiled yet"):
        squall.last_traces(squall.jit(lambda x: x))
    with pytest.raises(TypeError, match="returned by squall.jit"):
        squall.last_traces(lambda x: x)


def test_prim_meta_errors_name_the_problem():
    from squall import prims
    from squall.proxies import TensorProxy, tracing
    from squall.frontend.tracing import TracingContext

    with tracing(TracingContext()):
        a = TensorProxy(shape=(2, 3), dtype=torch.float32, device="cpu")
        b = TensorProxy(shape=(3,), dtype=torch.float32, device="cpu")
        i = TensorProxy(shape=(2, 3), dtype=torch.int64, device="cpu")
        with pytest.raises(ValueError, match=r"one shape, got \[2, 3\] and \[3\]"):
            prims.add(a, b)
        with pytest.raises(TypeError, match="one dtype"):
            prims.add(a, i)
        with pytest.raises(TypeError, match="floating point or complex tensor, got torch.int64"):
            prims.exp(i)
        with pytest.raises(TypeError, match="cannot combine a float with a torch.int64 tensor"):
            prims.mul(i, 2.5)


def test_warnings_filter_is_not_left_modified():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        squall.jit(lambda x: x + 1)(torch.ones(1))


def test_inplace_through_a_view_is_eagers():
    # the full set of view cases is in test_inplace_views.py
    def writes_view_then_drops_base(x):
        y = x * 2
        v = y.view(-1)
        v.add_(1)
        return v

    def reads_base_after_view_write(x):
        y = x * 2
        y[0].mul_(3)  # eager changes y through the view
        return y + 1

    def modifies_a_view_of_an_input(x):
        x[0].zero_()
        return x.shape[0]

    for f in (writes_view_then_drops_base, reads_base_after_view_write, modifies_a_view_of_an_input):
        x_eager = torch.randn(2, 2)
        x_squall = x_eager.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)  # zero_ runs as an opaque torch call
            assert_close(squall.jit(f)(x_squall), f(x_eager))
        assert_close(x_squall, x_eager)


def test_opaque_op_returning_a_tuple_with_none(monkeypatch):
    # nn.MultiheadAttention's forward returns (output, None) from multi_head_attention_forward, here
    # run as one opaque call (squall otherwise traces through it: squall.ltorch.inlined)
    from squall.ltorch.inlined import INLINED

    monkeypatch.delitem(INLINED, torch.nn.functional.multi_head_attention_forward)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad(), pytest.warns(squall.SquallWarning, match="multi_head_attention_forward"):
        out = squall.jit(layer)(x)
    with torch.no_grad():
        assert_close(out, layer(x))


def test_op_returning_a_structure_unpacks_in_generated_code():
    def f(x):
        mins, maxs = torch.aminmax(x, dim=0)
        return {"range": maxs - mins, "both": torch.aminmax(x, dim=1)}

    jf = squall.jit(f)
    x = torch.randn(3, 4)
    out, expected = jf(x), f(x)
    assert_close(out["range"], expected["range"])
    assert_close(tuple(out["both"]), tuple(expected["both"]))
    assert type(out["both"]) is type(expected["both"])


def test_a_jitted_function_called_while_tracing_is_traced_inline():
    inner = squall.jit(lambda x: torch.exp(x) * 2)
    outer = squall.jit(lambda x: inner(x) + 1)
    x = torch.randn(3)
    assert_close(outer(x), torch.exp(x) * 2 + 1)
    assert [b.sym.id for b in squall.last_traces(outer).traced.bsyms] == ["torch.exp", "torch.mul", "torch.add"]
    assert inner.cache_info().misses == 0  # nothing was compiled or cached for proxies
    assert_close(inner(x), torch.exp(x) * 2)


def test_the_cache_is_bounded_and_evicts_the_least_recently_used_entry():
    jf = squall.jit(lambda x: x + 1, cache_size=2, dynamic=False)
    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    jf(a), jf(b)
    jf(a)  # a is now more recently used than b
    jf(c)  # full: b goes
    info = jf.cache_info()
    assert (info.size, info.limit, info.evictions, info.misses, info.hits) == (2, 2, 1, 3, 1)
    jf(a)  # still cached; c, compiled after a's last use, has not been called since
    assert jf.cache_info().misses == 3
    assert_close(jf(b), b + 1)  # compiled again; c goes, not a
    info = jf.cache_info()
    assert (info.misses, info.evictions, info.size, info.hits) == (4, 2, 2, 2)
    jf(a)
    assert jf.cache_info().misses == 4
    jf(c)
    assert jf.cache_info().misses == 5


def test_cache_recency_counts_calls_between_compilations_not_insertion_order():
    jf = squall.jit(lambda x: x * 2, cache_size=3, dynamic=False)
    x1, x2, x3, x4 = (torch.ones(n) for n in (1, 2, 3, 4))
    jf(x1), jf(x2), jf(x3)  # inserted in this order
    jf(x3), jf(x1)  # x2 is the least recently used, though not the oldest
    jf(x4)
    jf(x1), jf(x3)
    assert (jf.cache_info().misses, jf.cache_info().evictions) == (4, 1)
    jf(x2)
    assert jf.cache_info().misses == 5


def test_cache_size_default_none_and_bad_values():
    jf = squall.jit(lambda x: -x, dynamic=False)
    assert jf.cache_info().limit == DEFAULT_CACHE_SIZE == 64
    unbounded = squall.jit(lambda x: -x, cache_size=None, recompile_limit=100, dynamic=False)
    for n in range(1, 70):
        unbounded(torch.ones(n))
    assert (unbounded.cache_info().size, unbounded.cache_info().evictions, unbounded.cache_info().limit) == (69, 0, None)
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="cache_size must be a positive int"):
            squall.jit(lambda x: x, cache_size=bad)


def test_a_module_cache_is_bounded_too():
    lin = torch.nn.Linear(3, 2)
    jm = squall.jit(lin, cache_size=1, dynamic=False)
    x = torch.randn(4, 3)
    y = torch.randn(5, 3)
    assert_close(jm(x), lin(x))
    assert_close(jm(y), lin(y))
    assert_close(jm(x), lin(x))
    info = jm._jitted.cache_info()
    assert (info.size, info.evictions, info.misses, info.hits) == (1, 2, 3, 0)


def test_recompiles_caused_by_eviction_say_so():
    # every size keyed by value (a size-1 call beside a symbolic entry would run eagerly, not evict it)
    jf = squall.jit(lambda x: x + 1, cache_size=1, recompile_limit=3, dynamic=False)
    a, b = torch.ones(1), torch.ones(2)
    with pytest.warns(squall.SquallWarning, match=r"evicted from the full cache \(cache_size=1\)"):
        for _ in range(3):
            jf(a), jf(b)


def test_a_slice_argument_is_keyed_by_its_values():
    jf = squall.jit(lambda x, s: x[s])
    x = torch.arange(6.0)
    for s in (slice(1, None), slice(None, 2), slice(1, None), slice(0, 6, 2)):
        assert_close(jf(x, s), x[s])
    assert jf.cache_info().misses == 3
    with pytest.raises(TypeError, match="is a slice, which is neither a tensor"):
        jf(x, slice(torch.tensor(1), None))  # a tensor bound would be traced as a constant


@pytest.mark.parametrize("nested", [False, True], ids=["lazy_module", "lazy_submodule"])
def test_a_lazy_module_runs_its_first_call_eagerly_then_compiles(nested):
    """nn.LazyLinear learns its weight's shape at its first call: before, squall's entry point read
    the uninitialized parameter's shape and raised where eager runs."""

    def make():
        return torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU()) if nested else torch.nn.LazyLinear(4)

    model, twin = make(), make()
    jitted = squall.jit(model)
    for seed in range(3):
        torch.manual_seed(seed)  # (materializing draws the initial weights)
        if seed == 0 and nested:  # (a lazy module jitted itself runs its own materializing hook first)
            with pytest.warns(squall.SquallWarning, match="not yet materialized"):
                got = jitted(torch.ones(2, 3))
        else:
            got = jitted(torch.ones(2, 3))
        torch.manual_seed(seed)
        torch.testing.assert_close(got, twin(torch.ones(2, 3)), rtol=0, atol=0)
    assert jitted.cache_info().misses == 1  # compiled once, at the second call
