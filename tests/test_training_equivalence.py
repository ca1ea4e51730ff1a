"""Training steps that gave other numbers than eager's, without a word: a reentrant checkpoint
(its layers got no gradient), attention dropout (another mask for the same seed), and state
written inside a checkpointed function (eager's backward writes it again)."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

import squall


class _Checkpointed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.head(checkpoint.checkpoint(self.inner, x, use_reentrant=True)).sum() + x.sum()


def test_reentrant_checkpoint_gives_the_checkpointed_layer_its_gradient():
    # CheckpointFunction (torch's own autograd.Function) ran its forward on proxies without grad:
    # the checkpointed layer's output carried no gradient, and the loss still had one through x
    torch.manual_seed(0)
    model = _Checkpointed()
    compiled_model = copy.deepcopy(model)
    jitted = squall.jit(compiled_model)
    x = torch.randn(3, 4, requires_grad=True)
    model(x).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted(x.detach().requires_grad_()).backward()
    assert any("autograd.Function of torch's own" in str(w.message) for w in caught)
    for (name, p), q in zip(model.named_parameters(), compiled_model.parameters()):
        assert q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad)


def test_attention_dropout_draws_eagers_mask_under_gradients():
    q = torch.randn(2, 2, 5, 4, requires_grad=True)

    def attend(q):
        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)

    g = torch.randn(2, 2, 5, 4)
    torch.manual_seed(3)
    expected = attend(q)
    (expected_grad,) = torch.autograd.grad(expected, q, g)
    qs = q.detach().requires_grad_()
    torch.manual_seed(3)
    out = squall.jit(attend)(qs)
    (grad,) = torch.autograd.grad(out, qs, g)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, expected_grad)


def test_an_input_returned_as_itself_with_symbolic_sizes_gets_every_gradient():
    # x comes back as the caller's own tensor, so its cotangent slot never gets a gradient; the
    # backward built without it computed with s0, which no input of it carried (it raised), and
    # the zeros made instead took the traced symbolic shape
    def program(x):
        return x, x[0], x.view(-1)

    jitted = squall.jit(program, dynamic=True)
    for rows in (4, 6):
        x = torch.randn(rows, 5, requires_grad=True)
        xs = x.detach().requires_grad_()
        weights = [torch.randn(o.shape) for o in program(x)]
        sum((o * w).sum() for o, w in zip(program(x), weights)).backward()
        sum((o * w).sum() for o, w in zip(jitted(xs), weights)).backward()
        torch.testing.assert_close(xs.grad, x.grad)


class _HookedIntermediate(torch.nn.Module):
    def __init__(self, kept: bool):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.kept = kept

    def forward(self, x):
        y = self.lin(x)
        if self.kept:
            y.retain_grad()
            self.y = y
        else:
            y.register_hook(lambda g: g * 3)
        return y.tanh()


def test_a_hook_or_retained_gradient_on_an_intermediate_runs_eagerly():
    # they raised: the op is outside the torch language and fails on the meta device
    for kept in (False, True):
        torch.manual_seed(0)
        model = _HookedIntermediate(kept)
        compiled_model = copy.deepcopy(model)
        x = torch.randn(3, 4)
        model(x).sum().backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            squall.jit(compiled_model)(x).sum().backward()
        assert any("belongs to eager's autograd graph" in str(w.message) for w in caught)
        torch.testing.assert_close(compiled_model.lin.weight.grad, model.lin.weight.grad)
        if kept:
            torch.testing.assert_close(compiled_model.y.grad, model.y.grad)


def test_a_train_step_that_calls_backward_inside_runs_eagerly():
    # loss.backward() inside the program raised (an op outside the torch language, failing on
    # the meta device); it runs eagerly now, so the step updates the weights as eager's does
    # (the optimizer reached through a closure, so that the backward is what the trace meets first:
    # an optimizer given as an argument runs the call eagerly on its own, tests/test_reached_state.py)
    def train_step_with(optimizer):
        def train_step(model, x):
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss

        return train_step

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    compiled_model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled_optimizer = torch.optim.SGD(compiled_model.parameters(), lr=0.1)
    train_step, jitted = train_step_with(optimizer), squall.jit(train_step_with(compiled_optimizer))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            x = torch.randn(5, 4)
            expected = train_step(model, x)
            loss = jitted(compiled_model, x)
            torch.testing.assert_close(loss, expected)
            torch.testing.assert_close(compiled_model.weight, model.weight)
    assert any("torch.Tensor.backward" in str(w.message) for w in caught)


def test_a_backward_from_some_outputs_with_symbolic_sizes_leaves_the_others_none():
    # the backward built without the unused outputs' cotangents had no input carrying s0; zeros
    # made for them instead would give w a zero gradient where eager's is None
    def program(x, w):
        return x, x[0] * w[0, 0], x.view(-1)

    jitted = squall.jit(program, dynamic=True)
    for rows in (3, 5):
        x = torch.randn(rows, 4, requires_grad=True)
        w = torch.randn(4, 4, requires_grad=True)
        g = torch.randn(rows * 4)
        expected = torch.autograd.grad(program(x, w)[2], (x, w), g, allow_unused=True)
        got = torch.autograd.grad(jitted(x, w)[2], (x, w), g, allow_unused=True)
        assert got[1] is None and expected[1] is None
        torch.testing.assert_close(got[0], expected[0])


class _CheckpointedState(torch.nn.Module):
    """A block under torch.utils.checkpoint (non-reentrant, as transformers' and timm's gradient
    checkpointing) that writes state: batch norm's running statistics, a counter."""

    def __init__(self, counted: bool):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.counted, self.calls = counted, 0

    def block(self, x):
        if self.counted:
            self.calls += 1
        return self.norm(self.lin(x)).relu()

    def forward(self, x):
        return checkpoint.checkpoint(self.block, x, use_reentrant=False).pow(2).mean()


@pytest.mark.parametrize("counted", [False, True])
def test_state_written_inside_a_checkpoint_is_written_again_by_the_backward_as_in_eager(counted):
    # eager's backward recomputes the checkpointed block, updating the running statistics (and
    # the counter) a second time; squall's program, differentiated as a whole, ran it once
    torch.manual_seed(0)
    model = _CheckpointedState(counted)
    compiled_model = copy.deepcopy(model)
    jitted = squall.jit(compiled_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(2):
            x = torch.randn(6, 4)
            model(x).backward()
            jitted(x).backward()
            torch.testing.assert_close(compiled_model.norm.running_mean, model.norm.running_mean)
            torch.testing.assert_close(compiled_model.norm.running_var, model.norm.running_var)
            assert compiled_model.norm.num_batches_tracked.item() == model.norm.num_batches_tracked.item() == 2 * (step + 1)
            assert compiled_model.calls == model.calls
            for p, q in zip(model.parameters(), compiled_model.parameters()):
                torch.testing.assert_close(q.grad, p.grad)
    assert any("inside torch.utils.checkpoint" in str(w.message) for w in caught)


def test_a_checkpoint_that_writes_no_state_compiles_or_runs_without_grad():
    model = _CheckpointedState(counted=False).eval()  # eval: batch norm reads its statistics only
    x = torch.randn(6, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = squall.jit(model)(x)
        with torch.no_grad():  # nothing is recomputed without a backward
            train_model = _CheckpointedState(counted=True)
            squall.jit(train_model)(x)
    assert not any("runs eagerly" in str(w.message) for w in caught), [str(w.message) for w in caught]
    torch.testing.assert_close(out, model(x))
    assert train_model.calls == 1


class _AuxiliaryLoss(torch.nn.Module):
    """As a mixture of experts' router: a loss kept on the module, added to the task's loss
    outside the call."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 8)
        self.gate = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.lin(x).relu()
        self.aux_loss = self.gate(h).softmax(-1).mean(0).pow(2).sum()
        return h


@pytest.mark.parametrize("rows", [pytest.param([6, 6, 6], id="warmed-up-eagerly"), pytest.param([6, 4, 5], id="recompiled")])
def test_a_tensor_attribute_overwritten_unread_does_not_link_the_last_calls_graph(rows):
    # the last call's aux_loss, an input of the compiled program as every tensor attribute is,
    # got an edge in its autograd node although the program never reads it: each backward ran
    # the last call's backward again (its saved tensors freed: it raised) and every call kept
    # the one before alive
    torch.manual_seed(0)
    model = _AuxiliaryLoss()
    compiled_model = copy.deepcopy(model)
    compiled_model(torch.randn(6, 4))  # the attribute exists when the program is traced
    jitted = squall.jit(compiled_model)
    for n in rows:
        x = torch.randn(n, 4)
        (model(x).sum() + model.aux_loss).backward()
        out = jitted(x)
        (out.sum() + compiled_model.aux_loss).backward()
        for p, q in zip(model.parameters(), compiled_model.parameters()):
            torch.testing.assert_close(q.grad, p.grad)


def test_two_views_through_batch_norm_in_training_before_one_backward():
    # as contrastive learning's two augmented views: each call updates the running statistics in
    # place, and squall's backward had saved them (its batch norm rule passed them to the
    # backward kernel, which reads the batch's statistics in training): autograd's version check
    # failed at the backward, where eager's succeeds
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    compiled_model = copy.deepcopy(model)
    jitted = squall.jit(compiled_model)
    for _ in range(2):
        x = torch.randn(6, 4)
        F.cosine_similarity(model(x), model(x.flip(0) * 0.5)).mean().backward()
        F.cosine_similarity(jitted(x), jitted(x.flip(0) * 0.5)).mean().backward()
        for p, q in zip(model.parameters(), compiled_model.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
        torch.testing.assert_close(compiled_model[1].running_var, model[1].running_var)


class _CarriedState(torch.nn.Module):
    """A recurrent state kept on the module between calls, read detached (truncated backpropagation)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.h = torch.zeros(2, 4)

    def forward(self, x):
        h = torch.tanh(self.lin(x) + self.h.detach() * 0.5)
        self.h = h
        return h


def test_a_state_read_detached_from_the_last_call_does_not_link_its_graph():
    # the last call's h, read only through detach(), had an edge in this call's autograd node:
    # the backward ran the last call's backward again, whose saved tensors were freed
    torch.manual_seed(0)
    model = _CarriedState()
    compiled_model = copy.deepcopy(model)
    jitted = squall.jit(compiled_model)
    for _ in range(3):
        x = torch.randn(2, 4)
        model(x).sum().backward()
        jitted(x).sum().backward()
        torch.testing.assert_close(compiled_model.h, model.h)
        for p, q in zip(model.parameters(), compiled_model.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
