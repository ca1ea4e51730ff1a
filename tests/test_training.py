"""Training through squall's own gradients: forward and backward traces planned on the marketplace."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import squall
from squall import prims
from squall.extend import GradRule, add_operator_executor
from squall.market.plugins import Marketplace


def _differentiated_by_squall(jfn) -> bool:
    return squall.last_traces(jfn).backward is not None


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def test_optimizer_steps_match_eager_and_squall_differentiates():
    torch.manual_seed(0)
    eager = MLP().double()
    compiled_model = copy.deepcopy(eager)
    jm = squall.jit(compiled_model)
    x, target = torch.randn(8, 16, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(compiled_model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no fallback to PyTorch autograd
        for _ in range(3):
            for model, opt in ((eager, opt_e), (jm, opt_c)):
                opt.zero_grad()
                loss = ((model(x) - target) ** 2).mean()
                loss.backward()
                opt.step()
    assert _differentiated_by_squall(jm)
    for pe, pc in zip(eager.parameters(), compiled_model.parameters()):
        torch.testing.assert_close(pc, pe)


def test_only_inputs_that_require_grad_get_gradients():
    def f(x, w):
        return (x @ w).exp().sum()

    x = torch.randn(3, 4)
    w = torch.randn(4, 5, requires_grad=True)
    jf = squall.jit(f)
    (gw,) = torch.autograd.grad(jf(x, w), w)
    (expected,) = torch.autograd.grad(f(x, w), w)
    torch.testing.assert_close(gw, expected)
    assert x.grad is None and _differentiated_by_squall(jf)
    # the backward reads only what w's gradient needs: x and exp's result, never w itself
    saved = {p.name for p in squall.last_traces(jf).backward.inputs}
    assert "w" not in saved and "x" in saved


def test_non_differentiable_outputs_and_retain_graph():
    def f(x):
        y = torch.sin(x)
        return y, y.argmax(-1)

    x = torch.randn(3, 5, requires_grad=True)
    jf = squall.jit(f)
    y, idx = jf(x)
    assert not idx.requires_grad and idx.dtype == torch.int64
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    torch.testing.assert_close(x.grad, 2 * torch.cos(x.detach()))


def test_the_same_tensor_returned_twice_gets_both_gradients():
    jf = squall.jit(lambda x: (x * 2, x * 2))
    x = torch.randn(4, requires_grad=True)
    a, b = jf(x)
    (a.sum() + 3 * b.sum()).backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 8.0))


class TwoHeads(nn.Module):
    """Logits and a loss, as language models return them, plus a head only the auxiliary output reads."""

    def __init__(self):
        super().__init__()
        self.body, self.head, self.aux = nn.Linear(8, 16), nn.Linear(16, 4), nn.Linear(16, 2)

    def forward(self, x, target):
        h = torch.tanh(self.body(x))
        logits = self.head(h)
        return logits, self.aux(h), F.cross_entropy(logits, target)


@pytest.mark.parametrize(
    "used",
    [
        pytest.param(lambda logits, aux, loss: loss, id="loss"),
        pytest.param(lambda logits, aux, loss: aux.pow(2).sum(), id="aux"),
        pytest.param(lambda logits, aux, loss: loss + logits.sum() + aux.sum(), id="all"),
    ],
)
def test_outputs_that_get_no_gradient_are_left_out_of_the_backward_as_in_eager(used):
    torch.manual_seed(0)
    eager = TwoHeads()
    compiled_model = copy.deepcopy(eager)
    jm = squall.jit(compiled_model)
    x, target = torch.randn(6, 8), torch.randint(0, 4, (6,))
    for _ in range(2):  # the second call reuses the backward built for this case
        for model in (eager, compiled_model):
            model.zero_grad(set_to_none=True)
        used(*eager(x, target)).backward()
        used(*jm(x, target)).backward()
        for (name, expected), actual in zip(eager.named_parameters(), compiled_model.parameters()):
            # a head that only an output without a gradient reads gets None, as in eager (not zeros)
            assert (actual.grad is None) == (expected.grad is None), name
            if expected.grad is not None:
                torch.testing.assert_close(actual.grad, expected.grad, msg=name)
    assert _differentiated_by_squall(jm)


def test_one_of_two_places_a_tensor_is_returned_gets_no_gradient():
    jf = squall.jit(lambda x: (x * 2, x * 2))
    x = torch.randn(4, requires_grad=True)
    a, b = jf(x)
    b.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 2.0))


def test_dropout_backward_uses_the_forward_mask():
    torch.manual_seed(0)
    jf = squall.jit(lambda x: F.dropout(x, 0.5, training=True))
    x = torch.ones(1000, requires_grad=True)
    out = jf(x)
    out.sum().backward()
    torch.testing.assert_close(x.grad, (out != 0).to(x.dtype) * 2.0)
    assert _differentiated_by_squall(jf)


def test_no_grad_calls_compile_separately():
    jf = squall.jit(lambda x: x.exp())
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        assert not jf(x).requires_grad
    assert jf(x).requires_grad
    assert jf.cache_info().misses == 2


def test_in_place_on_a_leaf_that_requires_grad_fails_as_in_eager():
    def f(x):
        x.mul_(2)
        return x

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        f(x)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        squall.jit(f)(x)


def test_double_backward_is_refused_with_a_clear_error():
    jf = squall.jit(lambda x: (x * x).sum())
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(jf(x), x, create_graph=True)


def test_an_operation_without_a_rule_falls_back_to_pytorch_autograd_with_a_warning():
    market = Marketplace(entry_point_group=None)
    op = market.operations.define(
        "mylib.cube", meta=lambda a: squall.extend.TensorProxy(like=a), reference=lambda a: a * a * a
    )
    torch_ex = market.get("torch")
    torch_ex.register_implementation(op.symbol, op.reference)
    jf = squall.jit(lambda x: op(x).sum(), executors=[torch_ex])
    x = torch.randn(4, requires_grad=True)
    with pytest.warns(squall.SquallWarning, match="no gradient rule for mylib.cube"):
        jf(x).backward()
    torch.testing.assert_close(x.grad, 3 * x.detach() ** 2)
    assert not _differentiated_by_squall(jf)


def test_an_executors_grad_transform_defines_the_backward_of_what_it_takes():
    backward_calls = []

    def exp_backward(call):
        backward_calls.append(call)
        return (prims.mul(call.g, call.output),)

    market = Marketplace(entry_point_group=None)
    ex = add_operator_executor(
        "my_exp", {"torch.exp": ("fast_exp", None, torch.exp, GradRule(exp_backward))}, marketplace=market
    )
    jf = squall.jit(lambda x: torch.exp(x).sum(), executors=[ex, market.get("torch")])
    x = torch.randn(5, requires_grad=True)
    jf(x).backward()
    torch.testing.assert_close(x.grad, torch.exp(x.detach()))
    assert len(backward_calls) == 1  # the executor's rule, not the default one
    forward = squall.last_traces(jf).planned
    assert [b.executor.name for b in forward.bsyms if b.sym.id != "prims.sum"][0] == "my_exp"


def test_a_grad_transform_must_be_a_grad_rule():
    with pytest.raises(TypeError, match="grad_transform must be a squall.extend.GradRule"):
        add_operator_executor("bad", {"torch.exp": ("e", None, torch.exp, lambda call: None)}, marketplace=Marketplace(entry_point_group=None))


def test_explain_shows_where_the_backward_operations_went():
    w = torch.randn(4, 5, requires_grad=True)
    report = squall.explain(lambda x, w: torch.tanh(x @ w).sum(), torch.randn(3, 4), w)
    assert report.backward_rows and all(r.executor for r in report.backward_rows if r.depth == 0)
    text = str(report)
    assert "backward (squall's gradient transform" in text
    assert report.to_dict()["backward_operations"]


def test_detach_and_no_grad_regions_stop_the_gradient_as_in_eager():
    def f(x, w):
        y = x * w
        with torch.no_grad():
            scale = y.abs().max()
        return (y / scale + y.detach() * y).sum()

    x = torch.randn(5, requires_grad=True)
    w = torch.randn(5, requires_grad=True)
    jf = squall.jit(f)
    got = torch.autograd.grad(jf(x, w), (x, w))
    expected = torch.autograd.grad(f(x, w), (x, w))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    assert _differentiated_by_squall(jf)


def test_a_value_computed_from_a_frozen_input_still_passes_gradients_back():
    # t = x * a: only `a` requires grad, and the gradient must reach it through linear's input
    def f(x, a, w):
        return F.linear(x * a, w).sum()

    x, a, w = torch.randn(3, 4), torch.randn(4, requires_grad=True), torch.randn(5, 4, requires_grad=True)
    got = torch.autograd.grad(squall.jit(f)(x, a, w), (a, w))
    expected = torch.autograd.grad(f(x, a, w), (a, w))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("norm", [nn.GroupNorm(2, 10), nn.LayerNorm(32), nn.BatchNorm1d(10)], ids=["group", "layer", "batch"])
def test_fused_backward_kernels_take_the_expanded_gradient_a_sum_gives(norm):
    # sum()'s backward hands on an expanded (stride 0) gradient; some CPU kernels read it as dense
    norm = norm.double()
    twin = copy.deepcopy(norm)
    x = torch.randn(4, 10, 32, dtype=torch.float64)
    jm = squall.jit(twin)
    jm(x).sum().backward()
    norm(x).sum().backward()
    assert _differentiated_by_squall(jm)
    for a, b in zip(norm.parameters(), twin.parameters()):
        torch.testing.assert_close(b.grad, a.grad)


def _laid_out_otherwise(case: str):
    """(aten backward kernel, its arguments as eager's autograd hands them over, {position: the same
    value laid out as squall may hand it over}): a fused forward returns the values only its backward
    reads in the layout its kernels chose, and the torch plan's gradients stay contiguous."""
    aten = torch.ops.aten
    w, b = torch.randn(8), torch.randn(8)
    channels_last = lambda t: t.contiguous(memory_format=torch.channels_last)  # noqa: E731
    if case == "layer norm statistics":
        x, dy = torch.randn(3, 5, 5, 8), torch.randn(3, 5, 5, 8)
        _, mean, rstd = aten.native_layer_norm(x, [8], w, b, 1e-5)
        # (3, 5, 5, 1) laid out channels-last: "dense", so only the kernel's own rule copies it
        return aten.native_layer_norm_backward.default, [dy, x, [8], mean, rstd, w, b, [True] * 3], {3: channels_last(mean), 4: channels_last(rstd)}
    x, dy = torch.randn(3, 8, 5, 5), torch.randn(3, 8, 5, 5)
    _, mean, rstd = aten.native_group_norm(x, w, b, 3, 8, 25, 4, 1e-5)
    args = [dy, x, mean, rstd, w, 3, 8, 25, 4, [True] * 3]
    if case == "group norm statistics":
        return aten.native_group_norm_backward.default, args, {2: mean.t().contiguous().t(), 3: rstd.t().contiguous().t()}
    if case == "group norm input channels-last, gradient contiguous":
        return aten.native_group_norm_backward.default, args, {1: channels_last(x)}
    assert case == "nll_loss2d input channels-last", case
    logits = torch.randn(2, 5, 3, 3).log_softmax(1)
    target = torch.randint(0, 5, (2, 3, 3))
    _, total = aten.nll_loss2d_forward(logits, target, None, 1, -100)
    return aten.nll_loss2d_backward.default, [torch.tensor(1.0), logits, target, None, 1, -100, total], {1: channels_last(logits)}


@pytest.mark.parametrize("case", ["layer norm statistics", "group norm statistics", "group norm input channels-last, gradient contiguous",
                                  "nll_loss2d input channels-last"])
def test_the_torch_executors_backward_kernels_take_values_laid_out_as_a_fused_forward_returns_them(case):
    # aten's CPU norm kernels read mean and rstd in memory order whatever their strides (a fused
    # forward returning them channels-last, convnextv2's layer norms through inductor, paired each row
    # with another's statistics: the stem's gradients off by half their size), group norm's reads its
    # gradient in its input's layout, and nll_loss2d's refuses a channels-last input
    from squall.extend import TORCH_KERNEL_IMPLS

    op, args, relaid = _laid_out_otherwise(case)
    expected = op(*args)
    for k, t in relaid.items():
        assert not t.is_contiguous() and torch.equal(t, args[k])
        args[k] = t
    got = TORCH_KERNEL_IMPLS[f"aten.{op._opname}"](*args)
    for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(g, e)


def _two_heads(x, y):
    return (x.sin() * 2).exp(), torch.tanh(y @ y.T)


def _one_trunk(x, y):
    h = x.sin() * y.sum(1)
    return h.exp(), h.tanh()


@pytest.mark.parametrize("program, eager_raises", [(_two_heads, False), (_one_trunk, True)])
def test_outputs_backpropagated_in_separate_calls_run_as_eager(program, eager_raises):
    # eager frees only the nodes a backward reached: the second output's backward runs where its
    # graph shares no node with the first's, and raises where it does; squall's one node per call
    # keeps what the first backward left unread for the other outputs' backward
    x, y = torch.randn(5, requires_grad=True), torch.randn(5, 3, requires_grad=True)
    results = []
    for fn in (program, squall.jit(program), squall.jit(program, dynamic=True)):  # (sizes read from saved tensors too)
        x.grad = y.grad = None
        a, b = fn(x, y)
        a.sum().backward()
        if eager_raises:
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                b.sum().backward()
        else:
            b.sum().backward()
        results.append((x.grad, y.grad))
    torch.testing.assert_close(results[1], results[0])
    torch.testing.assert_close(results[2], results[0])


def test_a_value_kept_for_a_later_backward_and_written_in_place_meanwhile_raises_as_in_eager():
    # tanh saves its result, the output itself: eager's unpacking sees the write and raises
    def two_heads(x, y):
        return x.exp(), torch.tanh(y)

    x, y = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    for fn in (two_heads, squall.jit(two_heads)):
        a, b = fn(x, y)
        a.sum().backward()
        with torch.no_grad():
            b.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            b.sum().backward()


def test_a_backward_that_reached_every_saved_tensor_keeps_none_for_another_output():
    # logits, loss = model(...), then loss.backward(): the loss's backward reads what the logits'
    # would, so nothing is kept for it (eager frees the logits' graph too), while the logits live on
    def logits_and_loss(x, w):
        logits = torch.tanh(x @ w)
        return logits, logits.logsumexp(-1).mean()

    x, w = torch.randn(4, 3), torch.randn(3, 5, requires_grad=True)
    jf = squall.jit(logits_and_loss)
    logits, loss = jf(x, w)
    loss.backward()
    assert _differentiated_by_squall(jf)
    assert not getattr(logits.grad_fn, "kept", None)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        logits.sum().backward()


def test_a_second_backward_without_retain_graph_fails_as_in_eager():
    # the backward frees its saved tensors as it goes (unless retain_graph), as eager's autograd does
    def f(x):
        return torch.tanh(x * 3).sum()

    x = torch.randn(5, requires_grad=True)
    jf = squall.jit(f)
    loss = jf(x)
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    assert _differentiated_by_squall(jf)
    x.grad = None
    kept = jf(x)
    kept.backward(retain_graph=True)
    kept.backward()
    torch.testing.assert_close(x.grad, 2 * 3 * (1 - torch.tanh(3 * x.detach()) ** 2))
