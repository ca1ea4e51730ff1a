"""Hooks on a compiled module and on the module it compiles run eagerly at every call,
around the compiled forward, as nn.Module.__call__ runs them (squall.runtime.wrappers)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import squall
from squall.ltorch.base import SquallWarning


def _model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


@pytest.mark.parametrize("on", ["jitted", "original"])
def test_forward_hooks_run_at_every_call(on):
    eager = _model()
    model = _model()
    model.load_state_dict(eager.state_dict())
    compiled = squall.jit(model)
    calls = []

    def pre(module, args):
        calls.append("pre")
        return (args[0] * 2,)

    def post(module, args, output):
        calls.append("post")
        return output + 1

    target = compiled if on == "jitted" else model
    handles = [target.register_forward_pre_hook(pre), target.register_forward_hook(post)]
    eager.register_forward_pre_hook(pre)
    eager.register_forward_hook(post)
    x = torch.randn(2, 4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), eager(x))
    assert calls == ["pre", "post"] * 6  # eager's three calls and the compiled module's three
    for h in handles:
        h.remove()
    calls.clear()
    torch.testing.assert_close(compiled(x), model(x))  # no hook left: the plain compiled forward
    assert calls == []


def test_hooks_with_kwargs_and_always_call():
    model = _model()
    compiled = squall.jit(model)
    seen = []

    def pre(module, args, kwargs):
        seen.append(sorted(kwargs))
        return (args[0] + 1,), {}

    def post(module, args, kwargs, output):
        seen.append("post")

    model.register_forward_pre_hook(pre, with_kwargs=True)
    model.register_forward_hook(post, with_kwargs=True, always_call=True)
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model.forward(x + 1))
    assert seen == [[], "post"]
    seen.clear()
    with pytest.raises(RuntimeError):
        compiled(torch.randn(2, 5))  # a shape the linear layer refuses: the always_call hook still runs
    assert seen == [[], "post"]


def test_full_backward_hook_sees_eager_gradients():
    eager = _model()
    model = _model()
    model.load_state_dict(eager.state_dict())
    compiled = squall.jit(model)
    grads = {"eager": [], "compiled": []}
    eager.register_full_backward_hook(lambda m, gi, go: grads["eager"].append((gi[0].clone(), go[0].clone())))
    model.register_full_backward_hook(lambda m, gi, go: grads["compiled"].append((gi[0].clone(), go[0].clone())))
    x = torch.randn(2, 4, requires_grad=True)
    eager(x).pow(2).sum().backward()
    compiled(x).pow(2).sum().backward()
    assert len(grads["compiled"]) == 1
    torch.testing.assert_close(grads["compiled"], grads["eager"])


def test_global_forward_hook_runs_as_in_eager():
    model = _model()
    compiled = squall.jit(model)
    with torch.no_grad():
        compiled(torch.randn(2, 4))  # compiled first: the hook comes after
    calls = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: calls.append(m))
    x = torch.randn(2, 4)
    try:
        with torch.no_grad():
            expected = model(x)
            eager_calls, calls[:] = list(calls), []
            with pytest.warns(SquallWarning, match=r"global module forward hook .*test_wrappers.py:\d+"):
                torch.testing.assert_close(compiled(x), expected)
    finally:
        handle.remove()
    # at every module call, with that module (the original, not the JittedModule), as eager
    assert [id(m) for m in calls] == [id(m) for m in eager_calls] and len(calls) > 1


def test_hooks_are_not_traced():
    model = _model()
    compiled = squall.jit(model)
    model.register_forward_hook(lambda m, a, o: o * 3)
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
    ops = [b.sym.id for b in squall.last_traces(compiled).traced.bsyms]
    assert "torch.mul" not in ops and "torch.Tensor.__mul__" not in ops


class _Decoder(torch.nn.Module):
    """A model with a generation loop of its own, as transformers' `generate` calls `self(...)`."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.steps = 3

    def forward(self, x):
        return torch.tanh(self.lin(x))

    def generate(self, x):
        outputs = []
        for _ in range(self.steps):
            x = self(x)
            outputs.append(x)
        return torch.stack(outputs)


def test_methods_of_the_original_reached_through_the_compiled_module_call_it_compiled():
    model = _Decoder()
    compiled = squall.jit(model)
    before = (dict(vars(model)), dict(model._modules), type(model))
    x = torch.randn(2, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled.generate(x), model.generate(x))
    info = compiled._jitted.cache_info()
    assert (info.misses, info.hits) == (1, 2)  # each self(x) of the loop ran the compiled forward
    assert compiled.steps == 3 and compiled.lin is model.lin
    assert (dict(vars(model)), dict(model._modules), type(model)) == before  # the original is untouched
    model.steps = 1  # the method sees the original's attributes as they are now
    with torch.no_grad():
        assert compiled.generate(x).shape == (1, 2, 4)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        compiled.missing
    assert compiled.state_dict().keys() == {"_orig_mod." + k for k in model.state_dict()}


def test_jit_does_not_import_fsdp():
    # no module is an FSDP one before FSDP is imported; importing it took 1.6 s of the first jit
    code = ("import sys, torch, squall; squall.jit(torch.nn.Linear(2, 2))(torch.ones(1, 2)); "
            "print('torch.distributed.fsdp' in sys.modules, 'torch.distributed.tensor' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
