"""Tensors and objects a program reaches besides its arguments' tensors, where a trace would hold
what it saw: a parameter's `.grad` (backward replaces it between calls), torch's optimizers (their
state is Python objects squall does not record), a function under `@torch.no_grad()` (its globals
and its object), no_grad regions and writes in a program PyTorch's autograd differentiates, and
torch calls outside the language on captured tensors. Each answers as eager does, at every call.
Each of these gave a silently wrong answer or a crash before (2026-11-26)."""
from __future__ import annotations

import collections
import copy
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall

GLOBAL = {}


def _calls(fn, steps, *, jit):
    """`fn(model)` after each of `steps` backward passes of a fresh Linear (zero_grad sets the
    gradients to None, so each step's are new tensors); the gradients and results after each."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    GLOBAL["model"] = model
    call = squall.jit(fn) if jit else fn
    seen = []
    for step in range(steps):
        model.zero_grad()
        (model(torch.randn(2, 4, generator=torch.Generator().manual_seed(step))) ** 2).sum().backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call(model)
        seen.append((model.weight.grad.clone(), model.bias.grad.clone(), out))
    return seen, [str(w.message) for w in caught]


@pytest.mark.parametrize("fn", [
    pytest.param(lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5), id="clip_grad_norm_"),
    pytest.param(lambda m: torch.nn.utils.clip_grad_norm_(GLOBAL["model"].parameters(), 0.5), id="clip_grad_norm_-of-a-global"),
    pytest.param(lambda m: torch.stack([p.grad.norm() for p in m.parameters()]).sum(), id="grad-norm"),
    pytest.param(lambda m: [p.grad.mul_(0.5) for p in m.parameters()] and None, id="grads-scaled-in-place"),
])
def test_gradients_of_parameters_are_read_at_every_call(fn):
    expected, _ = _calls(fn, 3, jit=False)
    got, _ = _calls(fn, 3, jit=True)
    assert_close(got, expected)


def test_reading_the_gradient_of_an_input_runs_eagerly():
    def fn(x):
        return x.grad * 2

    x = torch.ones(3, requires_grad=True)
    (x * 3).sum().backward()
    with pytest.warns(squall.SquallWarning, match=r"gradient \(\.grad\) of a tensor it did not compute.*runs eagerly"):
        assert_close(squall.jit(fn)(x), x.grad * 2)


@pytest.mark.parametrize("make", [
    pytest.param(lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9), id="SGD-momentum"),
    pytest.param(lambda params: torch.optim.Adam(params, lr=0.01), id="Adam"),
])
def test_a_torch_optimizers_step_runs_eagerly_and_keeps_real_state(make):
    results = []
    for jit in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        optimizer = make(model.parameters())
        step = squall.jit(optimizer.step) if jit else optimizer.step
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(3):
                optimizer.zero_grad()
                model(torch.randn(3, 4, generator=torch.Generator().manual_seed(i))).square().sum().backward()
                step()
        results.append([p.detach().clone() for p in model.parameters()])
        assert all(type(t) is torch.Tensor for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor))
    assert_close(results[1], results[0])
    assert any(type(optimizer).__qualname__ in m and "runs eagerly" in m for m in map(str, (w.message for w in caught)))


class _Momentum:
    """A hand-written optimizer: its state a defaultdict keyed by the parameters, its step under no_grad."""

    def __init__(self, params):
        self.params, self.state = list(params), collections.defaultdict(dict)

    @torch.no_grad()
    def step(self):
        for p in self.params:
            state = self.state[p]
            if "buffer" not in state:
                state["buffer"] = p.grad.detach().clone()
            else:
                state["buffer"].mul_(0.9).add_(p.grad)
            p.add_(state["buffer"], alpha=-0.1)


def test_a_hand_written_optimizer_under_no_grad_steps_as_eager():
    results = []
    for jit in (False, True):
        params = [torch.zeros(3), torch.zeros(2)]
        optimizer = _Momentum(params)
        step = squall.jit(optimizer.step) if jit else optimizer.step
        for i in range(4):
            for p in params:
                p.grad = torch.full_like(p, float(i + 1))  # a new gradient tensor at each step
            step()
        results.append([p.clone() for p in params] + [s["buffer"] for s in optimizer.state.values()])
        assert all(type(s["buffer"]) is torch.Tensor for s in optimizer.state.values())
    assert_close(results[1], results[0])


SCALE = 2.0


@torch.no_grad()
def _scaled(x):
    return x * SCALE


def test_a_function_under_no_grad_follows_its_globals():
    global SCALE
    jitted = squall.jit(_scaled)
    assert_close(jitted(torch.ones(2)), torch.full((2,), 2.0))
    SCALE = 5.0
    try:
        assert_close(jitted(torch.ones(2)), torch.full((2,), 5.0))
    finally:
        SCALE = 2.0


class _Keeper:
    def __init__(self):
        self.kept = {}

    @torch.no_grad()
    def keep(self, x):
        self.kept["last"] = x + 1
        return x


def test_a_method_under_no_grad_writes_real_tensors_into_its_object():
    keeper = _Keeper()
    jitted = squall.jit(keeper.keep)
    for value in (1.0, 3.0):
        jitted(torch.full((2,), value))
        assert type(keeper.kept["last"]) is torch.Tensor
        assert_close(keeper.kept["last"], torch.full((2,), value + 1))


def test_no_grad_inside_a_program_autograd_differentiates_passes_no_gradient():
    # the program reads a global module's parameters: PyTorch's autograd differentiates it, and
    # what it computes under no_grad must carry no gradient, as in eager
    torch.manual_seed(0)
    GLOBAL["linear"] = linear = torch.nn.Linear(3, 3)

    def fn(x):
        with torch.no_grad():
            scale = GLOBAL["linear"](x).sum()
        return GLOBAL["linear"](x) * scale

    grads = []
    for call in (fn, squall.jit(fn)):
        linear.zero_grad()
        x = torch.randn(2, 3, generator=torch.Generator().manual_seed(1), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)  # (differentiated by PyTorch's autograd)
            call(x).sum().backward()
        grads.append((linear.weight.grad.clone(), x.grad.clone()))
    assert_close(grads[1], grads[0])


def test_a_no_grad_write_into_a_captured_parameter_runs_eagerly():
    def fn(model, x):
        with torch.no_grad():
            model.weight.mul_(0.5)
        return model(x)

    results = []
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 3)
    for call, m in ((fn, model), (squall.jit(fn), copy.deepcopy(model))):
        x = torch.randn(2, 3, generator=torch.Generator().manual_seed(1), requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call(m, x)
        out.sum().backward()
        results.append((out.detach(), m.weight.detach().clone(), m.weight.grad, x.grad))
    assert_close(results[1], results[0])
    assert any("writes under torch.no_grad() into a tensor that requires grad" in str(w.message) for w in caught)


def test_a_torch_call_outside_the_language_on_captured_tensors_runs_at_every_call():
    held = [torch.ones(3), torch.ones(2)]

    def fn(x):
        return torch.stack(torch._foreach_norm(held)) + x

    jitted = squall.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # (an opaque torch call)
        assert_close(jitted(torch.zeros(2)), fn(torch.zeros(2)))
        held[0].mul_(3.0)
        assert_close(jitted(torch.zeros(2)), fn(torch.zeros(2)))


CAPTURED = torch.nn.Linear(3, 3)


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: (CAPTURED.weight.data.mul_(0.5), CAPTURED(x))[1], id="write-through-data-then-read"),
    pytest.param(lambda x: (setattr(CAPTURED.weight, "data", CAPTURED.weight.data * 0.5), CAPTURED(x))[1], id="data-set"),
])
def test_a_write_into_captured_memory_another_captured_tensor_shares_runs_eagerly(fn):
    results = []
    for call in (fn, squall.jit(fn)):
        torch.manual_seed(0)
        CAPTURED.reset_parameters()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs = [call(torch.ones(3)).detach() for _ in range(2)]
        results.append((outs, CAPTURED.weight.detach().clone()))
    assert_close(results[1], results[0])
    assert any("runs eagerly" in str(w.message) and ".data" in str(w.message) or "shares memory" in str(w.message) for w in caught)


def test_a_distribution_caching_what_it_derives_keeps_real_tensors():
    # Categorical(probs=...).logits is computed on first read and set on the object: traced, that
    # set had left a proxy on the caller's distribution (the call failed, and so did every later use)
    dist = torch.distributions.Categorical(probs=torch.tensor([0.2, 0.3, 0.5]))

    def fn(x):
        return dist.logits + x

    assert_close(squall.jit(fn)(torch.zeros(3)), torch.tensor([0.2, 0.3, 0.5]).log())
    assert type(dist.logits) is torch.Tensor
    assert_close(dist.logits, torch.tensor([0.2, 0.3, 0.5]).log())
