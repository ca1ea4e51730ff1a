"""Random ops: the torch configuration draws eager's exact numbers; decompositions draw the right distributions."""
from __future__ import annotations

import pytest
import torch

import squall
from squall.market.torch_executor import PRIM_IMPLS, make_executor
from squall.prims.base import PrimIDs
from opinfos import prims_only_executor




def _program(x):
    a = torch.rand(3, 4)
    b = torch.randn_like(x)
    c = torch.randint(0, 10, (5,))
    d = torch.nn.functional.dropout(x, 0.3)
    e = x.clone().uniform_(-1, 1)
    f = torch.normal(x, 2.0)
    g = torch.bernoulli(torch.full_like(x, 0.5))
    return a, b, c, d, e, f, g


def test_torch_configuration_reproduces_eager_numbers():
    x = torch.randn(4, 6)
    jfn = squall.jit(_program, executors=[make_executor()])
    torch.manual_seed(7)
    actual = jfn(x)
    torch.manual_seed(7)
    expected = _program(x)
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_decomposed_configuration_is_reproducible_under_manual_seed():
    x = torch.randn(4, 6)
    jfn = squall.jit(_program, executors=[prims_only_executor()])
    torch.manual_seed(3)
    first = jfn(x)
    torch.manual_seed(3)
    second = jfn(x)
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("config", ["torch", "decomposed"])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keeps_about_one_minus_p_and_scales(config, p):
    executors = [make_executor()] if config == "torch" else [prims_only_executor()]
    x = torch.rand(200_000) + 0.5  # no zeros, so a zero in the output means dropped
    out = squall.jit(lambda t: torch.nn.functional.dropout(t, p), executors=executors)(x)
    kept = out != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.01
    torch.testing.assert_close(out[kept], x[kept] / (1 - p))


def test_dropout_module_in_eval_mode_is_the_identity():
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).eval()
    x = torch.randn(3, 4)
    torch.testing.assert_close(squall.jit(module)(x), module(x))


@pytest.mark.parametrize("config", ["torch", "decomposed"])
def test_distributions(config):
    executors = [make_executor()] if config == "torch" else [prims_only_executor()]

    def sample():
        return torch.rand(100_000), torch.randn(100_000), torch.randint(2, 6, (100_000,)), torch.normal(3.0, 2.0, (100_000,))

    u, z, r, n = squall.jit(sample, executors=executors)()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    assert r.dtype == torch.int64 and set(r.unique().tolist()) == {2, 3, 4, 5}
    assert abs(n.mean() - 3) < 0.05 and abs(n.std() - 2) < 0.05


def test_uniform_philox_depends_only_on_seed_and_offset():
    impl = PRIM_IMPLS[PrimIDs.UNIFORM_PHILOX]
    kw = {"device": torch.device("cpu"), "dtype": torch.float32}
    a = impl((1000,), 0.0, 1.0, seed=42, offset=0, **kw)
    torch.rand(10)  # the global generator's state must not matter
    b = impl((1000,), 0.0, 1.0, seed=42, offset=0, **kw)
    c = impl((1000,), 0.0, 1.0, seed=42, offset=4, **kw)
    d = impl((1000,), -2.0, 2.0, seed=43, offset=0, **kw)
    assert torch.equal(a, b)
    assert not torch.equal(a, c) and not torch.equal(a[:10], d[:10])
    assert 0 <= a.min() and a.max() < 1 and -2 <= d.min() and d.max() < 2


def test_dropout_in_training_with_gradients_draws_eagers_mask():
    def f(x):
        return torch.nn.functional.dropout(x, 0.3, training=True).sum(), torch.nn.functional.dropout(x * 2, 0.5, training=True)

    x = torch.randn(6, 5, requires_grad=True)
    j = squall.jit(f)
    results = []
    for run in (j, f):
        torch.manual_seed(3)
        out = run(x)
        (out[0] + out[1].sum()).backward()
        results.append((out, x.grad.clone()))
        x.grad = None
    (out, grad), (expected, expected_grad) = results
    assert torch.equal(out[1], expected[1])
    torch.testing.assert_close(out[0], expected[0])
    assert torch.equal(grad, expected_grad)


class _DropoutThenBranch(torch.nn.Module):
    """Dropout, then a branch on an input's value: a value guard checked after the draw."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, flag):
        h = self.drop(self.bn(x))
        return h * 2 if flag.sum() > 0 else h * 3


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_guard_failing_after_a_draw_draws_eagers_numbers(grad):
    """A run stopped by a value guard had drawn dropout's mask: the variant that runs the call
    instead draws it again from the call's generator state, as eager draws it once (it drew the
    next numbers: another mask, and every later draw shifted)."""
    import copy

    eager = _DropoutThenBranch().train()
    compiled_module = copy.deepcopy(eager)
    jitted = squall.jit(compiled_module)
    for flag in (1.0, 1.0, -1.0, -1.0, 1.0, -1.0):
        x = torch.randn(8, 4, requires_grad=grad)
        results = []
        for run in (eager, jitted):
            torch.manual_seed(3)
            with torch.set_grad_enabled(grad):
                out = run(x, torch.full((3,), flag))
            results.append((out, torch.rand(2)))  # the generator as each left it
        (want, want_next), (got, got_next) = results
        assert torch.equal(got, want)
        assert torch.equal(got_next, want_next)
    for name, buffer in eager.bn.named_buffers():
        torch.testing.assert_close(getattr(compiled_module.bn, name), buffer)


def test_a_branch_on_a_random_draw_takes_eagers_branch():
    """A value guard on a random draw: the variant run after it failed draws the same number
    again (not the next one), so the branch and the result are eager's at every seed."""

    def f(x):
        if torch.rand(()) > 0.5:
            return x + torch.rand(3)
        return x - torch.rand(3)

    jitted = squall.jit(f)
    x = torch.zeros(3)
    for seed in range(12):
        torch.manual_seed(seed)
        want = f(x)
        torch.manual_seed(seed)
        got = jitted(x)
        assert torch.equal(got, want), seed
