"""Splits at module granularity: a module whose program cannot stay stable runs its forward
eagerly, with each submodule it calls compiled (squall.runtime.split)."""
from __future__ import annotations

import copy
import re
import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils import prune
from torch.testing import assert_close

import squall
from squall.frontend.speculation import SPECULATION_LIMIT


def _line_of(text: str) -> int:
    """The line of this file that holds `text` (what a warning must name)."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line_of" not in line)


class Looping(nn.Module):
    """Its loop count is read from a tensor: a new value at every call thrashes the guard."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.out = nn.Linear(8, 4)

    def forward(self, x, steps):
        h = self.lin(x)
        for _ in range(int(steps)):  # the thrashing read
            h = torch.tanh(h) * 1.5
        return self.out(self.norm(h))


def _split_calls(jm, model, calls: int, make_args):
    """Call `jm` and `model` alike `calls` times, checking each result against eager's."""
    for i in range(calls):
        args = make_args(i)
        out = jm(*args)
        ref = model(*args)
        assert_close(out, ref)


def test_a_thrashing_value_splits_the_module_its_children_stay_compiled():
    torch.manual_seed(0)
    model = Looping()
    jm = squall.jit(model)
    args = lambda i: (torch.randn(3, 8), torch.tensor(i + 1))  # noqa: E731
    line = _line_of("# the thrashing read")
    with pytest.warns(squall.SquallWarning, match=rf"test_split.py:{line} \(int\) changed .* Looping's forward now runs eagerly .* each submodule it calls compiled"):
        _split_calls(jm, model, SPECULATION_LIMIT + 2, args)
    info = jm.cache_info()
    assert info.misses == SPECULATION_LIMIT + 1  # no compilation of the whole after the split
    assert info.split is not None and f"test_split.py:{line}" in info.split.because[0]
    assert set(info.split.children) == {"lin", "norm", "out"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no more warnings: the split is made once
        _split_calls(jm, model, 4, lambda i: (torch.randn(3, 8), torch.tensor(10 + i)))
    info = jm.cache_info()
    assert info.misses == SPECULATION_LIMIT + 1
    for path, child in info.split.children.items():
        assert child.misses == 1 and child.hits >= 4, (path, child)  # each child compiled once, then cached
        assert squall.last_traces(info.split.compiled[path]).source  # a real compiled program
    text = str(squall.explain(jm, torch.randn(3, 8), torch.tensor(2)))
    assert re.search(r"split: Looping runs its forward eagerly, each submodule it calls compiled: lin \(1 compiled, \d+ cached calls\), norm", text)


class Masked(nn.Module):
    """Picks the rows whose flag is set: a data-dependent shape that changes at every call."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        h = self.lin(x)
        kept = h[x[:, 0] > 0]  # the shape that thrashes
        return self.norm(h + kept.mean(0, keepdim=True))


def test_a_data_dependent_shape_that_keeps_changing_splits_around_it():
    torch.manual_seed(0)
    model = Masked()
    jm = squall.jit(model)

    def rows(i):
        x = torch.randn(12, 8)
        x[:, 0] = -1.0
        x[: i + 1, 0] = 1.0  # i + 1 rows kept: a new shape at every call
        return (x,)

    line = _line_of("# the shape that thrashes")
    with pytest.warns(squall.SquallWarning, match=rf"test_split.py:{line} \(shape\) changed .* Masked's forward now runs eagerly"):
        _split_calls(jm, model, SPECULATION_LIMIT + 4, rows)
    info = jm.cache_info()
    assert info.misses == SPECULATION_LIMIT + 1
    assert {p: c.misses for p, c in info.split.children.items()} == {"lin": 1, "norm": 1}


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.n = 0

    def forward(self, x):
        self.n += 1
        return self.norm(self.lin(x) * self.n)


def test_a_python_counter_on_the_module_stops_recompiling_and_counts_as_eager():
    torch.manual_seed(0)
    model = Counting()
    twin = copy.deepcopy(model)
    jm = squall.jit(model)
    calls = SPECULATION_LIMIT + 6
    with pytest.warns(squall.SquallWarning, match=r"attribute 'n' of the module changed at \d+ calls .* Counting's forward now runs eagerly"):
        for _ in range(calls):
            x = torch.randn(2, 4)
            assert_close(jm(x), twin(x))
    assert model.n == twin.n == calls
    info = jm.cache_info()
    assert info.misses == SPECULATION_LIMIT + 1  # it compiled at every call before the split, never after
    assert {p: c.misses for p, c in info.split.children.items()} == {"lin": 1, "norm": 1}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 4)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_a_python_hook_on_an_inner_submodule_is_traced_with_the_forward():
    torch.manual_seed(0)
    model = Stack()
    twin = copy.deepcopy(model)
    seen = []

    def doubling(module, args, out):
        seen.append(module)
        return out * 2  # changes the result: a hook that did not run would be seen

    model.blocks[1].first.register_forward_hook(doubling)
    twin.blocks[1].first.register_forward_hook(lambda m, a, o: o * 2)
    jm = squall.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for i in range(3):
            x = torch.randn(3, 4)
            assert_close(jm(x), twin(x))
            assert len(seen) == i + 1 and seen[-1] is model.blocks[1].first  # the real module, at every call
    info = jm.cache_info()
    assert info.split is None and info.misses == 1


def test_a_hook_squall_cannot_trace_on_an_inner_submodule_runs_at_every_call_and_the_rest_stays_compiled():
    # pruning's forward pre-hook is an object of torch's (it recomputes the weight at every call)
    torch.manual_seed(0)
    model = Stack()
    twin = copy.deepcopy(model)
    for m in (model, twin):
        prune.l1_unstructured(m.blocks[1].first, "weight", amount=0.5)
    jm = squall.jit(model)
    with pytest.warns(squall.SquallWarning, match=r"'blocks'.1.first has a forward pre hooks hook .*L1Unstructured.*the module's forward \(each submodule it calls compiled\) runs eagerly"):
        for i in range(3):
            x = torch.randn(3, 4)
            assert_close(jm(x), twin(x))
    info = jm.cache_info()
    assert {p: c.misses for p, c in info.split.children.items()} == {"blocks.0": 1, "blocks.1": 1, "head": 1}
    inner = info.split.children["blocks.1"].split  # the block with the hooked layer splits too
    assert {p: c.misses for p, c in inner.children.items()} == {"first": 1, "second": 1}
    assert info.split.children["blocks.0"].split is None  # a block without hooks: compiled whole


def test_gradients_through_a_split_module_match_eager():
    torch.manual_seed(0)
    model = Looping()
    twin = copy.deepcopy(model)
    jm = squall.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(SPECULATION_LIMIT + 3):
            x = torch.randn(3, 8, requires_grad=True)
            x_ref = x.detach().clone().requires_grad_()
            steps = torch.tensor(i + 1)
            out, ref = jm(x, steps), twin(x_ref, steps)
            assert_close(out, ref)
            out.square().sum().backward()
            ref.square().sum().backward()
            assert_close(x.grad, x_ref.grad)
            for (name, p), q in zip(model.named_parameters(), twin.parameters()):
                assert_close(p.grad, q.grad, msg=name)
    assert jm.cache_info().split is not None


def test_routing_views_behave_as_the_modules_and_never_change_them():
    class Reader(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
            self.named = nn.ModuleDict({"a": nn.Linear(4, 4)})

        def forward(self, x, steps):
            for _ in range(int(steps)):
                x = x * 0.9
            x = x + self.layers[2].weight.sum() + len(self.layers)  # attributes read as on the module
            for layer in self.layers[:2]:  # slicing and iterating route each item
                x = layer(x)
            x = self.layers[-1](self.seq[:1](x))
            return self.named["a"](self.seq(x))

    torch.manual_seed(0)
    model = Reader()
    classes = [type(m) for m in model.modules()]
    jm = squall.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _split_calls(jm, model, SPECULATION_LIMIT + 3, lambda i: (torch.randn(2, 4), torch.tensor(i)))
    info = jm.cache_info()
    assert set(info.split.children) == {"layers.0", "layers.1", "layers.2", "seq.0", "seq", "named.a"}
    assert [type(m) for m in model.modules()] == classes  # the user's modules are what they were
    assert all(type(m) in (Reader, nn.ModuleList, nn.Sequential, nn.ModuleDict, nn.Linear, nn.ReLU) for m in model.modules())


def test_a_plain_function_still_runs_eagerly_and_says_why():
    def f(x):
        return x + int(x.sum())

    jf = squall.jit(f)
    with pytest.warns(squall.SquallWarning, match=r"runs the original function eagerly .* only a module's forward can be split"):
        for i in range(SPECULATION_LIMIT + 2):
            x = torch.full((2,), float(i))
            assert_close(jf(x), f(x))


def test_alias_fallback_of_a_module_splits_too():
    class Writer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, a, b):
            a.add_(1)
            return self.lin(b)

    torch.manual_seed(0)
    model = Writer()
    jm = squall.jit(model)
    with torch.no_grad():
        jm(torch.zeros(4, 4), torch.zeros(4, 4))  # compiled for separate tensors
        base, ref = torch.zeros(5, 4), torch.zeros(5, 4)
        with pytest.warns(squall.SquallWarning, match=r"share memory .* the module's forward eagerly, with each submodule it calls compiled"):
            out = jm(base[:4], base[1:])  # overlapping views: the write must be seen through both
        assert_close(out, model(ref[:4], ref[1:]) - 0)  # eager on a copy made the same way
        ref2 = torch.zeros(5, 4)
        ref2[:4].add_(1)
        assert_close(base, ref2)
    assert set(jm.cache_info().split.children) == {"lin"}


# --- fusion executors on both sides of the eager code ---------------------------------------------


class Sandwich(nn.Module):
    """Elementwise chains in compiled children before and after data-dependent eager code."""

    class Chain(nn.Module):
        def forward(self, x):
            return torch.tanh(x * 2 + 1) * 3 - 1

    def __init__(self):
        super().__init__()
        self.before = Sandwich.Chain()
        self.after = Sandwich.Chain()

    def forward(self, x, steps):
        h = self.before(x)
        for _ in range(int(steps)):
            h = h.flip(0)
        return self.after(h)


def test_splits_with_fusion_plugins_on_both_sides(tmp_path):
    squall_inductor = pytest.importorskip("squall_inductor", reason="squall-inductor is not installed (pip install -e plugins/inductor)")
    if squall_inductor.cpp_compiler() is None:
        pytest.skip("no C++ compiler for inductor's CPU backend")
    # regions this small would not pay back: min_eager_seconds=0 compiles them anyway
    inductor = squall_inductor.InductorExecutor(autotune=False, choices_path=tmp_path / "choices.json", min_eager_seconds=0)
    model = Sandwich()
    jm = squall.jit(model, executors=[inductor, "torch"], wait=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _split_calls(jm, model, SPECULATION_LIMIT + 3, lambda i: (torch.randn(8, 8), torch.tensor(i)))
    split = jm.cache_info().split
    assert set(split.children) == {"before", "after"}
    for path in ("before", "after"):
        child = split.compiled[path]
        assert child._jitted.executors is jm._jitted.executors  # the parent's options
        plan = squall.last_traces(child).plan
        assert [r.executor for r in plan.regions] == ["inductor"], (path, squall.upgrades(child))
        assert "inductor_region(" in squall.last_traces(child).source


# --- a real transformers model ------------------------------------------------------------------


def test_a_transformers_model_under_a_module_that_thrashes_stays_compiled():
    transformers = pytest.importorskip("transformers")

    class TrimmedEncoder(nn.Module):
        """Drops the trailing columns that are padding in every row before running the model
        (right padding), then classifies from the first token: a length read from the mask."""

        def __init__(self, model):
            super().__init__()
            self.model = model
            self.head = nn.Linear(32, 2)

        def forward(self, input_ids, attention_mask):
            longest = int(attention_mask.sum(-1).max())  # the length that thrashes
            out = self.model(input_ids=input_ids[:, :longest], attention_mask=attention_mask[:, :longest], use_cache=False)
            return self.head(out.last_hidden_state[:, 0])

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        llama = transformers.LlamaModel(transformers.LlamaConfig(num_hidden_layers=1, hidden_size=32, intermediate_size=64,
                                                                 num_attention_heads=2, num_key_value_heads=1, vocab_size=64))
    model = TrimmedEncoder(llama.eval()).eval()
    jm = squall.jit(model, executors=["torch"])  # fusion on both sides is the test above's
    ids = torch.randint(0, 64, (2, 10))

    def masks(i):
        mask = torch.zeros(2, 10, dtype=torch.long)
        mask[0, : 3 + i % 7] = 1  # the longest row: 3 to 9 real tokens
        mask[1, :2] = 1
        return ids, mask

    line = _line_of("# the length that thrashes")
    with torch.no_grad(), pytest.warns(squall.SquallWarning, match=rf"test_split.py:{line} \(int\) changed .* TrimmedEncoder's forward now runs eagerly"):
        for i in range(9):
            args = masks(i)
            assert_close(jm(*args), model(*args))
    info = jm.cache_info()
    assert info.misses == SPECULATION_LIMIT + 1
    children = info.split.children
    assert set(children) == {"model", "head"}
    # compiled whole after the split: for 8 tokens, then for 9 with the length symbolic (automatic
    # dynamic), which 3 and 4 tokens run too
    assert children["model"].misses == 2 and children["model"].split is None
    with torch.no_grad():
        for i in range(5, 9):  # the same lengths again: served by the compiled model
            args = masks(i)
            assert_close(jm(*args), model(*args))
    children = jm.cache_info().split.children
    assert children["model"].misses == 2 and children["model"].hits == 6


def test_a_submodule_assigned_in_the_eager_frame_is_stored_as_the_real_module():
    class Remembering(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, steps):
            n = int(steps)
            if n > SPECULATION_LIMIT:  # reached only once the module split (squall can't trace it)
                self.last = self.lin  # eager stores the submodule itself
            return self.lin(x) * n

    model = Remembering()
    jm = squall.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _split_calls(jm, model, SPECULATION_LIMIT + 3, lambda i: (torch.randn(2, 4), torch.tensor(i)))
    assert jm.cache_info().split is not None
    assert type(model.last) is nn.Linear and model.last is model.lin


def test_an_activation_hook_inside_a_llama_is_traced_and_sees_eagers_values():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.LlamaModel(transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                                                 num_attention_heads=2, num_key_value_heads=1, vocab_size=64))
    twin = copy.deepcopy(model)
    captured, expected = [], []
    model.layers[1].mlp.register_forward_hook(lambda module, args, out: captured.append(out.detach()))
    twin.layers[1].mlp.register_forward_hook(lambda module, args, out: expected.append(out.detach()))
    jm = squall.jit(model, executors=["torch"])
    ids = torch.randint(0, 64, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, :2] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            out = jm(input_ids=ids, attention_mask=mask, use_cache=False)
            ref = twin(input_ids=ids, attention_mask=mask, use_cache=False)
            assert type(out) is type(ref)
            assert_close(out.last_hidden_state, ref.last_hidden_state)
            assert_close(captured[-1], expected[-1])  # the hook saw what eager's saw, at every call
            out.last_hidden_state.square().mean().backward()
            ref.last_hidden_state.square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert_close(p.grad, q.grad, msg=name)
    assert len(captured) == 2
    assert jm.cache_info().split is None  # the hook (a Python function) is traced with the forward


def test_a_child_that_thrashes_too_splits_on_its_own():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Looping()
            self.proj = nn.Linear(4, 4)

        def forward(self, x, steps):
            scale = float(steps.float().sqrt())  # thrashes here too
            return self.proj(self.inner(x, steps)) * scale

    torch.manual_seed(0)
    model = Outer()
    jm = squall.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _split_calls(jm, model, 2 * SPECULATION_LIMIT + 4, lambda i: (torch.randn(3, 8), torch.tensor(i + 1)))
    split = jm.cache_info().split
    assert set(split.children) == {"inner", "proj"}
    inner = split.children["inner"]
    assert inner.misses == SPECULATION_LIMIT + 1 and inner.split is not None  # its own variants, then its own split
    assert set(inner.split.children) == {"lin", "norm", "out"}
