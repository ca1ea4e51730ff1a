"""What makes a compile cheaper must leave it as it was: the cyclic collector paused while a
program is traced (squall.compiler.collection), a hookless module called straight to its
forward through its view (squall.frontend.state_views), calls bound without inspect, guards
held as tuples until read, and each recorded call's source line found as before."""
from __future__ import annotations

import gc
import inspect
import threading

import pytest
import torch

import squall
from squall.compiler import collection, pipeline
from squall.frontend.tracing import trace_program
from squall.guard_set import GuardSet
from squall.runtime.jit import jitted_state
from squall.symbol import _Binder


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_paused_for_the_block_and_enabled_after_it(collector_enabled):
    with collection.collection_paused():
        assert not gc.isenabled()
        with collection.collection_paused():  # nested: one pause
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_process_disabled_stays_disabled(collector_enabled):
    gc.disable()
    with collection.collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_pause_ends_after_the_last_of_two_threads_tracing_at_once(collector_enabled):
    inside, release = threading.Event(), threading.Event()

    def other_trace():
        with collection.collection_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_trace)
    with collection.collection_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread still traces
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_the_pause_ends_when_the_traced_program_raises(collector_enabled):
    def broken(x):
        raise ValueError("the user's own error")

    with pytest.raises(ValueError, match="the user's own error"):
        pipeline.compile_program(broken, (torch.randn(2),), {}, executors=[])
    assert gc.isenabled()


def test_a_jitted_call_traces_with_the_collector_paused_and_matches_eager(collector_enabled, monkeypatch):
    seen = []
    real_trace = pipeline.trace_program

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return real_trace(*args, **kwargs)

    monkeypatch.setattr(pipeline, "trace_program", watched)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    torch.testing.assert_close(squall.jit(model)(x), model(x))
    assert seen == [False]
    assert gc.isenabled()


class _Twice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.outer = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.outer(self.inner(x))


def _guard_labels(fn) -> list[str]:
    state = jitted_state(fn)
    compilation = state.last_entry.compilation
    return state._guards(compilation).describe()


def test_a_hook_added_after_the_compile_is_seen_by_the_submodule_call_guard():
    model, x = _Twice(), torch.randn(2, 4)
    jitted = squall.jit(model, executors=["torch"])
    torch.testing.assert_close(jitted(x), model(x))
    assert any("hooks of" in label for label in _guard_labels(jitted))
    model.inner.register_forward_hook(lambda module, args, out: out * 3)
    torch.testing.assert_close(jitted(x), model(x))  # eager's hook runs: the result is 3x inner's


@pytest.mark.parametrize("where", ["pre hook", "compiled", "overridden _call_impl"])
def test_a_submodule_with_hooks_or_its_own_call_path_is_called_as_torch_calls_it(where):
    model, x = _Twice(), torch.randn(2, 4)
    if where == "pre hook":
        model.inner.register_forward_pre_hook(lambda module, args: (args[0] + 1,))
    elif where == "compiled":
        model.outer.compile(backend="eager")
    else:
        class Doubled(torch.nn.Linear):
            def _call_impl(self, *args, **kwargs):
                return super()._call_impl(*args, **kwargs) * 2
        model.outer = Doubled(4, 4)
    expected = model(x)
    torch.testing.assert_close(squall.jit(model, executors=["torch"])(x), expected)


def test_a_trace_through_hookless_submodules_reads_each_hook_dict_once_per_module():
    model, x = _Twice(), torch.randn(2, 4)
    trace, _ = trace_program(model, (x,), {}, module=model)
    labels = [label for _, label in trace.context.state.guards._empty.values()]
    # the global hook dicts, then each submodule's four, in the one emptiness check (squall.guard_set.stays_empty)
    assert labels == ["the global module hooks"] * 4 + ["the hooks of submodule 'inner'"] * 4 + ["the hooks of submodule 'outer'"] * 4


@pytest.mark.parametrize("call", [(1,), (1, 2, 3), (1, (2, 3)), (1, 5, 6, 7)])
def test_a_call_spreading_into_star_args_binds_as_inspect_binds_it(call):
    # (the binder's own path for a `*shape` parameter, as `reshape(a, *shape)` has)
    def spread(a, *shape, size=None, keep=True):
        pass

    bound = inspect.signature(spread).bind(*call)
    bound.apply_defaults()
    args, kwargs = _Binder(spread)(call, {})
    assert (args, kwargs) == (bound.args, bound.kwargs) and list(kwargs) == list(bound.kwargs)


_CALLS_WITH_REQUIRED_KEYWORDS = [((1, 2), {"correction": 0}), ((1,), {"dims": 2, "correction": 1}), ((1, 2), {}),
                                 ((1, 2), {"correction": 0, "other": 3}), ((1,), {"correction": 0}), ((1, 2, 3), {"correction": 0})]


@pytest.mark.parametrize("args, kwargs", _CALLS_WITH_REQUIRED_KEYWORDS)
def test_a_keyword_only_parameter_without_a_default_binds_as_inspect_binds_it(args, kwargs):
    # (prims.var's `correction`: bound by the binder's own path where the call names it; a call
    # that does not, or names an unknown parameter, comes back as made, for the meta to refuse)
    def var(a, dims, *, correction, keep=False):
        pass

    try:
        bound = inspect.signature(var).bind(*args, **kwargs)
        bound.apply_defaults()
        expected = (bound.args, bound.kwargs)
    except TypeError:
        expected = (args, kwargs)
    got = _Binder(var)(args, kwargs)
    assert got == expected and list(got[1]) == list(expected[1])


def test_var_and_layer_norm_with_the_correction_keyword_match_eager():
    def f(x, w, b):
        return torch.var(x, dim=1, correction=0) + torch.nn.functional.layer_norm(x, (4,), w, b).sum(1)

    x, w, b = torch.randn(3, 4), torch.randn(4), torch.randn(4)
    torch.testing.assert_close(squall.jit(f)(x, w, b), f(x, w, b))


def test_a_compile_walks_the_module_tree_once(monkeypatch):
    # the cache's layout check, the trace's inputs, the state recorder and the module replays
    # read one walk (ModuleLayout); check_wrapping makes the other. Each walk is a call of named_modules
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(4, 2)))
    jitted, x = squall.jit(model), torch.randn(3, 4)
    walks = []
    named_modules = torch.nn.Module.named_modules

    def counted(self, *args, **kwargs):
        if self is model:
            walks.append(kwargs.get("remove_duplicate", True))
        return named_modules(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "named_modules", counted)
    torch.testing.assert_close(jitted(x), model(x))
    assert len(walks) == 2, walks


def test_reshapes_by_spread_sizes_match_eager():
    def f(x):
        return x.reshape(2, 3, 4).view(6, -1).permute(1, 0) + 1

    x = torch.randn(24)
    torch.testing.assert_close(squall.jit(f)(x), f(x))


def test_guards_read_before_more_are_added_list_those_too():
    guards = GuardSet()
    guards.add("args[0] is None", "first")
    assert [g.label for g in guards.guards] == ["first"]
    guards.add("args[1] is None", "second")
    guards.add("args[0] is None", "first again")  # a condition already in the set: not added twice
    assert [g.label for g in guards.guards] == ["first", "second"]
    assert guards.conditions == ["args[0] is None", "args[1] is None"]


def _scaled_gelu(x):
    return torch.nn.functional.gelu(x) * 2  # the line each recorded call names


def test_each_recorded_call_names_the_programs_line_at_every_compile():
    line = inspect.getsourcelines(_scaled_gelu)[1] + 1
    for x in (torch.randn(3), torch.randn(5, 2)):  # a second compile finds the frames' answers kept
        j = squall.jit(_scaled_gelu)
        torch.testing.assert_close(j(x), _scaled_gelu(x))
        sources = {b.source for b in squall.last_traces(j).traced.bsyms}
        assert sources == {(__file__, line, "return torch.nn.functional.gelu(x) * 2  # the line each recorded call names")}


class _Scale(torch.nn.Module):
    def forward(self, x):
        return self.scaled(x)

    def scaled(self, x):
        return x * 2


class _TwoScales(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = _Scale(), _Scale()

    def forward(self, x):
        return self.second(self.first(x))


def test_a_method_two_modules_of_one_class_read_is_guarded_once_and_still_seen_replaced():
    m, x = _TwoScales(), torch.randn(4)
    j = squall.jit(m)
    torch.testing.assert_close(j(x), m(x))
    conditions = [c for c in squall.last_traces(j).guard_set.conditions if ".scaled is " in c]
    assert len(conditions) == 1  # the second module's read added nothing new
    original = _Scale.scaled
    try:
        _Scale.scaled = lambda self, x: x * 3
        torch.testing.assert_close(j(x), m(x))  # the class's method replaced: compiled again, as eager computes
    finally:
        _Scale.scaled = original
    torch.testing.assert_close(j(x), m(x))
