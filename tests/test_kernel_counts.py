"""A training step on squall's torch plan calls no more kernel-launching aten ops than eager's.

On a GPU every aten op a step calls is a kernel launch (or more), so a plan that decomposes
what eager runs as one kernel, or copies what eager does not, is slower there even where
its CPU time is not. Counted below autograd with a TorchDispatchMode (bench/kernel_counts.py
counts whole models the same way); gradients are compared with eager's too.
"""
from __future__ import annotations

import collections
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import squall
from kernel_calls import AtenCalls, launching

def _step_calls(fn, args) -> tuple[collections.Counter, torch.Tensor, tuple]:
    """The kernel calls of one forward + backward of `fn` (after a first, compiling one), its
    output and the gradients of its inputs that require them."""
    wanted = [a for a in args if a.requires_grad]
    fn(*args).sum().backward()
    for a in wanted:
        a.grad = None
    with AtenCalls() as counter:
        out = fn(*args)
        out.sum().backward()
    return launching(counter.calls), out, tuple(a.grad.clone() for a in wanted)


def _rms_norm_as_llama_writes_it(x, w):
    # transformers' LlamaRMSNorm, then the whole-sequence slice of its logits (`logits_to_keep=0`)
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (w * h.to(x.dtype))[:, -0:, :]


def _gelu_as_gpt2_writes_it(x):
    # transformers' NewGELUActivation (gelu_new)
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def _grouped_query_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def _heads_merged(x):
    # attention's output as transformers merges its heads: transposed, made contiguous, flattened
    return x.transpose(1, 2).contiguous().reshape(x.shape[0], x.shape[2], -1) * 2


def _bfloat16_arithmetic(x, w, y):
    # squall computes bfloat16 arithmetic in float32 and converts back; its derivatives convert
    # there and back between ops: a kernel per conversion on the torch plan, none in eager's
    return (x * w + x) * y - x / 2


def _bfloat16_arithmetic_with_numbers(x, y):
    # x's gradient (y times the cotangent) is computed in float32 and converted back at the end of
    # the backward: a round trip the backward returns, a kernel each way where eager has none
    return (1.0 + x) * y - 0.5 + (2 - y)


def _bfloat16_arithmetic_with_inexact_numbers(x, y):
    # numbers a bfloat16 does not hold: eager's add rounds them to bfloat16 first, its mul does not
    return (x + 0.044715) * 0.7978845608028654 - (0.1 - y) + (1.0 + x) * y


PROGRAMS = {
    # a contiguous copy's backward passes the gradient on, as eager's (no conversion to its own dtype)
    "heads_merged": (_heads_merged, lambda: (torch.randn(2, 3, 4, 5, requires_grad=True),)),
    # rsqrt's backward in three kernels as eager's, no copy for a conversion to the same dtype nor
    # a pad of nothing for a slice of the whole tensor
    "rms_norm": (_rms_norm_as_llama_writes_it, lambda: (torch.randn(2, 5, 8, requires_grad=True), torch.randn(8, requires_grad=True))),
    # tanh's backward is eager's one tanh_backward kernel
    "gelu_tanh": (_gelu_as_gpt2_writes_it, lambda: (torch.randn(3, 16, requires_grad=True),)),
    "bfloat16_arithmetic": (
        _bfloat16_arithmetic,
        lambda: tuple(torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)),
    ),
    "bfloat16_arithmetic_with_numbers": (
        _bfloat16_arithmetic_with_numbers,
        lambda: tuple(torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(2)),
    ),
    # grouped heads run on the CPU flash kernels where eager's does (not the math path)
    "grouped_query_attention": (
        _grouped_query_attention,
        lambda: (torch.randn(2, 4, 6, 8, requires_grad=True), torch.randn(2, 2, 6, 8, requires_grad=True), torch.randn(2, 2, 6, 8, requires_grad=True)),
    ),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_torch_plan_calls_no_more_kernels_than_eager_and_matches_its_gradients(name):
    fn, make_args = PROGRAMS[name]
    torch.manual_seed(0)
    args = make_args()
    eager_calls, expected, expected_grads = _step_calls(fn, args)
    calls, out, grads = _step_calls(squall.jit(fn, executors=["torch"]), args)
    torch.testing.assert_close(out, expected)
    for g, want in zip(grads, expected_grads):
        torch.testing.assert_close(g, want)
    more = {op: (n, eager_calls[op]) for op, n in calls.items() if n > eager_calls[op]}
    assert sum(calls.values()) <= sum(eager_calls.values()), f"squall {dict(calls)} against eager {dict(eager_calls)}; more of {more}"


class _ConvBatchNormReLU(nn.Module):
    def __init__(self, twice: bool = False):
        super().__init__()
        self.conv, self.bn, self.twice = nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), twice

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        # the same batch norm again: its running statistics updated twice in one step
        y = torch.relu(self.bn(y)) if self.twice else y
        return y.mean()  # a loss (a returned activation the backward reads too is cloned)


def _module_step_calls(model, x) -> collections.Counter:
    for p in model.parameters():
        p.grad = None
    with AtenCalls() as counter:
        model(x).sum().backward()
    return launching(counter.calls)


@pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])
def test_batch_norm_updates_its_running_statistics_in_its_kernel_as_eager(twice):
    # eager's batch norm writes the running statistics inside its kernel; copying them in after a
    # functional kernel (and the step count after an add) were three more kernels per batch norm
    torch.manual_seed(0)
    model = _ConvBatchNormReLU(twice).train()
    inner = copy.deepcopy(model)
    compiled = squall.jit(inner, executors=["torch"])
    x = torch.randn(2, 3, 6, 6)
    for _ in range(2):
        eager_calls, calls = _module_step_calls(model, x), _module_step_calls(compiled, x)
    for (name, want), got in zip(model.state_dict().items(), inner.state_dict().values()):
        torch.testing.assert_close(got, want, msg=name)  # running statistics and step counts, after two steps
    for (name, p), q in zip(model.named_parameters(), inner.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)
    if twice:
        return  # the first call's new statistics feed the second call, not a write-back: nothing is folded
    more = {op: (n, eager_calls[op]) for op, n in calls.items() if n > eager_calls[op]}
    assert sum(calls.values()) <= sum(eager_calls.values()), f"squall {dict(calls)} against eager {dict(eager_calls)}; more of {more}"


def test_the_statistics_read_before_the_batch_norm_are_the_old_ones():
    # the running mean read (and returned) before the batch norm that updates it in place: the old value
    def f(x, running_mean, running_var):
        old = running_mean.clone()
        out = F.batch_norm(x, running_mean, running_var, training=True)
        return out, old

    x = torch.randn(4, 3, 5)
    stats = (torch.zeros(3), torch.ones(3))
    copies = tuple(s.clone() for s in stats)
    out, old = squall.jit(f, executors=["torch"])(x, *copies)
    want_out, want_old = f(x, *stats)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(old, want_old)
    for got, want in zip(copies, stats):
        torch.testing.assert_close(got, want)


def test_statistics_are_updated_once_when_a_later_faulty_executor_makes_the_call_run_again():
    # a checked (non-torch) call after the batch norm: its fault runs the program again, which must
    # find the running statistics unwritten, so their write-back stays after it, not in the kernel
    from squall.extend import OperatorExecutor

    faulty = OperatorExecutor("faulty")
    faulty.register_implementation("torch.exp", lambda x: torch.exp(x).reshape(-1))

    def f(x, running_mean, running_var):
        return torch.exp(F.batch_norm(x, running_mean, running_var, training=True))

    x = torch.randn(4, 3, 5, requires_grad=True)  # differentiated: the batch norm runs as its training kernel
    stats = (torch.zeros(3), torch.ones(3))
    copies = tuple(s.clone() for s in stats)
    jf = squall.jit(f, executors=[faulty, "torch"])
    with pytest.warns(squall.SquallWarning, match="executor 'faulty'"):
        out = jf(x, *copies)
    assert "torch_batch_norm_updating" in squall.last_traces(jf).source  # the replanned program folds it
    torch.testing.assert_close(out, f(x, *stats))
    for got, want in zip(copies, stats):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("program", [_bfloat16_arithmetic, _bfloat16_arithmetic_with_numbers, _bfloat16_arithmetic_with_inexact_numbers],
                         ids=["tensors", "exact_numbers", "inexact_numbers"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA: its half-precision kernels compute in float32 too"))])
def test_bfloat16_arithmetic_and_its_gradients_are_eagers_bit_for_bit(device, program):
    # the torch plan runs each op as eager's kernel on the bfloat16 operands, which computes in
    # float32 and rounds once, as squall's float32 form did: the same bits, not merely close
    torch.manual_seed(0)
    n_args = program.__code__.co_argcount
    args = tuple(torch.randn(64, 33, dtype=torch.bfloat16, device=device, requires_grad=True) for _ in range(n_args))
    _, expected, expected_grads = _step_calls(program, args)
    _, out, grads = _step_calls(squall.jit(program, executors=["torch"]), args)
    assert torch.equal(out, expected)
    assert all(torch.equal(g, want) for g, want in zip(grads, expected_grads))


@pytest.mark.parametrize("program", [lambda x: x.float().bfloat16(), lambda x: x.t().float().bfloat16(), lambda x: (x.float().bfloat16(), x)],
                         ids=["input", "view", "input_returned"])
def test_a_returned_round_trip_of_an_input_or_a_view_stays_a_copy(program):
    # bfloat16 -> float32 -> bfloat16 is the value itself, but eager returns a copy: the result
    # shares no memory with the input (writing one must not change the other)
    x = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
    out = squall.jit(program, executors=["torch"])(x)
    first = out[0] if isinstance(out, tuple) else out
    assert torch.equal(first, program(x)[0] if isinstance(out, tuple) else program(x))
    assert first.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_a_gradient_rounded_through_bfloat16_stays_rounded():
    # float32 -> bfloat16 -> float32 loses bits: only a widening and its way back is the value itself
    def rounded(x, w):
        return x.to(torch.bfloat16).to(torch.float32) * w

    torch.manual_seed(0)
    args = (torch.randn(4, 8, requires_grad=True), torch.randn(4, 8) * 1.001)
    _, expected, (expected_grad,) = _step_calls(rounded, args)
    _, out, (grad,) = _step_calls(squall.jit(rounded, executors=["torch"]), args)
    assert torch.equal(out, expected) and torch.equal(grad, expected_grad)
    assert not torch.equal(grad, args[1])  # (the gradient is w rounded to bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_a_global_pool_is_differentiated_as_the_mean_eager_computes(dtype):
    # eager computes adaptive_avg_pool2d(x, 1) (every CNN's head) as a mean, and its gradient as
    # an expand and a divide: not the pooling backward kernel, atomic and slow in bfloat16 on CUDA
    def head(x):
        return F.adaptive_avg_pool2d(x, 1).flatten(1)

    torch.manual_seed(0)
    args = (torch.randn(4, 8, 5, 6, dtype=dtype, requires_grad=True),)
    eager_calls, expected, (expected_grad,) = _step_calls(head, args)
    calls, out, (grad,) = _step_calls(squall.jit(head, executors=["torch"]), args)
    assert calls == eager_calls, f"squall {dict(calls)} against eager {dict(eager_calls)}"
    assert torch.equal(out, expected) and torch.equal(grad, expected_grad)
