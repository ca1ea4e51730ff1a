"""torch.autocast in traces (squall.ltorch.autocast): a call made under autocast, and a program that
enters or leaves it, compile with autocast's casts in the trace, and answer as eager does: the same
dtypes, values within bfloat16's rounding, gradients of float32 parameters in float32. CPU autocast
with bfloat16 is the vehicle (CUDA autocast is the same mechanism, asked of torch the same way)."""
from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import squall
from squall.ltorch.base import UnmodelledMode
from squall.runtime.jit import jitted_state

from real_models import TIMM_MODELS, TRANSFORMERS_MODELS, assert_same_output, import_torchvision

BF16 = dict(rtol=1.6e-2, atol=1e-2)  # bfloat16's rounding, where eager's kernels and squall's decompositions differ


def _bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


@contextlib.contextmanager
def _no_squall_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        yield


def _assert_like_eager(out, expected, **tolerances):
    outs, exps = torch.utils._pytree.tree_leaves(out), torch.utils._pytree.tree_leaves(expected)
    assert [type(o) for o in outs] == [type(e) for e in exps]
    for o, e in zip(outs, exps):
        if isinstance(e, torch.Tensor):
            assert o.dtype == e.dtype, f"{o.dtype} where eager returns {e.dtype}"
            assert_close(o, e, **(tolerances or BF16))
        else:
            assert o == e


def _mix(x, w, b, k):
    y = nn.functional.linear(x, w, b)  # lower precision
    s = torch.softmax(y, -1)
    n = nn.functional.layer_norm(y, (y.shape[-1],))
    c = torch.cat([y, x[..., :3]], -1)  # promotes to the widest dtype
    m = x @ w.t() + y  # bfloat16 + bfloat16
    conv = nn.functional.conv1d(x.unsqueeze(1), k)
    q = y.unsqueeze(1)
    a = nn.functional.scaled_dot_product_attention(q, q, q)
    return s, n, c, m, conv, a, y.float().sum(), torch.log_softmax(y.float(), -1)


def _mix_inputs():
    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randn(6, 8), torch.randn(6), torch.randn(2, 1, 3)


def test_a_mix_of_ops_under_autocast_compiles_with_eagers_dtypes_and_values():
    jf = squall.jit(_mix)
    args = _mix_inputs()
    with _bf16():
        expected = _mix(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)
            out = jf(*args)
            again = jf(*args)
    assert {t.dtype for t in expected[:6]} >= {torch.bfloat16, torch.float32}  # both kinds are made
    _assert_like_eager(out, expected)
    _assert_like_eager(again, expected)
    under = jf.cache_info().autocast  # the stats of that autocast state's own jitted function
    assert {state: stats.misses for state, stats in under.items()} == {((("cpu", torch.bfloat16),), True): 1}
    # the trace holds autocast's casts as conversions
    assert "ltorch.to(w, torch.bfloat16)" in str(squall.last_traces(jf)[0])


def test_calls_with_and_without_autocast_compile_apart_and_each_answers_as_eager():
    jf = squall.jit(_mix)
    args = _mix_inputs()
    for under in (False, True, False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=under):
            expected = _mix(*args)
            out = jf(*args)
        _assert_like_eager(out, expected, **(BF16 if under else {}))
    # another autocast dtype is another state
    with torch.autocast("cpu", dtype=torch.float16):
        expected = _mix(*args)
        out = jf(*args)
    assert out[0].dtype == expected[0].dtype and out[3].dtype == torch.float16
    _assert_like_eager(out, expected, rtol=2e-3, atol=2e-3)
    stats = jf.cache_info()
    assert stats.misses == 1 and stats.hits == 1  # the plain calls: one entry, hit again after autocast
    assert [(s.misses, s.hits) for s in stats.autocast.values()] == [(1, 1), (1, 0)]  # bfloat16, float16


def _positional_linear(x, w):
    return nn.functional.linear(x, w)


def test_the_fast_path_never_serves_an_entry_across_autocast_states():
    jf = squall.jit(_positional_linear)
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    with _no_squall_warnings():
        _alternate(jf, x, w)
    assert_close(jf(x, w), _positional_linear(x, w))


def _alternate(jf, x, w):
    for _ in range(2):
        assert jf(x, w).dtype == torch.float32
        with _bf16():
            assert jf(x, w).dtype == torch.bfloat16
        with torch.autocast("cpu", dtype=torch.float16):
            assert jf(x, w).dtype == torch.float16


class _Block(nn.Module):
    """A pre-norm transformer block, as nanoGPT writes it."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def test_a_transformer_block_under_autocast():
    torch.manual_seed(0)
    m = nn.Sequential(_Block(), _Block(), _Block())
    jm = squall.jit(m)
    x = torch.randn(2, 5, 16)
    with _bf16(), _no_squall_warnings():
        expected = m(x)
        out = jm(x)
    _assert_like_eager(out, expected, rtol=3e-2, atol=3e-2)


def test_training_under_autocast_gives_eagers_gradients_in_float32():
    torch.manual_seed(0)
    m = nn.Sequential(_Block(), nn.Linear(16, 3))
    twin = nn.Sequential(_Block(), nn.Linear(16, 3))
    twin.load_state_dict(m.state_dict())
    jm = squall.jit(twin)
    x, target = torch.randn(2, 5, 16), torch.randint(0, 3, (2, 5))
    for model in (m, jm):
        with _bf16(), _no_squall_warnings():
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())
        loss.backward()  # outside autocast, as users write it
    for (name, p), q in zip(m.named_parameters(), twin.parameters()):
        assert q.grad.dtype == torch.float32 == p.grad.dtype, name
        assert_close(q.grad, p.grad, rtol=5e-2, atol=5e-3, msg=lambda s: f"{name}: {s}")


def test_a_grad_scaler_loop_under_autocast():
    torch.manual_seed(0)
    m, twin = nn.Linear(8, 4), nn.Linear(8, 4)
    twin.load_state_dict(m.state_dict())
    jm = squall.jit(twin)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    for model, params in ((m, m.parameters()), (jm, twin.parameters())):
        opt = torch.optim.SGD(list(params), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        for _ in range(3):
            opt.zero_grad()
            with _bf16(), _no_squall_warnings():
                loss = nn.functional.mse_loss(model(x).float(), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    for p, q in zip(m.parameters(), twin.parameters()):
        assert_close(q, p, rtol=1e-2, atol=1e-3)


def _enters_autocast(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        with torch.autocast("cpu", enabled=False):  # as transformers' rotary embeddings do
            z = torch.sin(y.float()) @ w
        u = z @ w
    return y, z, u, u.dtype


@torch.autocast("cpu", dtype=torch.bfloat16)
def _decorated(x, w):
    return x @ w, torch.amp.autocast("cpu", enabled=False)(torch.matmul)(x, w)


def test_autocast_entered_and_left_inside_the_program_compiles():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    for fn in (_enters_autocast, _decorated):
        jf = squall.jit(fn)
        with _no_squall_warnings():
            out = jf(x, w)
            again = jf(x, w)
        expected = fn(x, w)
        _assert_like_eager(out, expected)
        _assert_like_eager(again, expected)
        assert jf.cache_info().misses == 1


def test_autocast_disabled_inside_a_call_made_under_it():
    def f(x):
        with torch.autocast("cpu", enabled=False):
            a = x @ x
        return a, x @ x

    jf = squall.jit(f)
    x = torch.randn(3, 3)
    with _bf16(), _no_squall_warnings():
        expected = f(x)
        out = jf(x)
    assert [t.dtype for t in out] == [torch.float32, torch.bfloat16]
    _assert_like_eager(out, expected)


def test_what_torch_cannot_answer_on_fake_tensors_runs_eagerly_saying_so():
    # an op whose fake run fails (a custom op without a fake kernel): not modelled, never a guessed dtype
    lib = torch.library.Library("squall_autocast_test", "FRAGMENT")
    lib.define("mm(Tensor a, Tensor b) -> Tensor")
    lib.impl("mm", lambda a, b: a @ b, "CPU")
    lib.impl("mm", lambda a, b: torch.ops.aten.mm(a.to(torch.bfloat16), b.to(torch.bfloat16)), "AutocastCPU")

    def f(x):
        return torch.ops.squall_autocast_test.mm(x, x) + 1

    jf = squall.jit(f)
    x = torch.randn(3, 3)
    with _bf16():
        expected = f(x)
        with pytest.warns(squall.SquallWarning, match="under torch.autocast.*runs eagerly"):
            out = jf(x)
    assert out.dtype == expected.dtype == torch.bfloat16
    assert_close(out, expected, rtol=0, atol=0)
    # without autocast the same function compiles
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)  # (the opaque op)
        assert_close(jf(x), f(x))
    del lib


def test_a_cast_of_a_value_computed_inside_the_op_is_refused():
    from squall.ltorch.autocast import AutocastCasts, autocast_state

    # torch.einsum casts the views it makes of its operands (modelled: a cast commutes with a view);
    # a composite that computes before its cast is refused
    casts = AutocastCasts()
    x = torch.randn(4, 8)
    leaves, spec = torch.utils._pytree.tree_flatten((("ij,kj->ik", x, x), {}))
    with _bf16():
        found, outputs = casts.casts(torch.einsum, "torch.einsum", leaves, spec, autocast_state())
        assert found == {1: torch.bfloat16, 2: torch.bfloat16} and outputs == (torch.bfloat16,)

        def scaled_mm(a, b):
            return torch.mm(a * 2, b)  # the multiplication in float32, then autocast's cast

        lib = torch.library.Library("squall_autocast_test2", "FRAGMENT")
        lib.define("smm(Tensor a, Tensor b) -> Tensor")
        lib.impl("smm", scaled_mm, "CompositeImplicitAutograd")
        sq = torch.randn(4, 4)
        leaves, spec = torch.utils._pytree.tree_flatten(((sq, sq), {}))
        with pytest.raises(UnmodelledMode, match="converts a value computed inside it"):
            casts.casts(torch.ops.squall_autocast_test2.smm, "smm", leaves, spec, autocast_state())
        del lib


@pytest.mark.parametrize("real", [m for m in TRANSFORMERS_MODELS if m.name in ("llama", "t5/padded")] + [m for m in TIMM_MODELS if m.name == "timm/test_resnet"],
                         ids=lambda m: m.name)
def test_real_models_under_autocast(real):
    pytest.importorskip("timm" if real.name.startswith("timm/") else "transformers")
    import_torchvision()
    torch.manual_seed(0)
    model = real.build()
    inputs = real.inputs()
    jm = squall.jit(model)
    with _bf16(), torch.no_grad():
        expected = model(**inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", squall.SquallWarning)
            out = jm(**inputs)
    assert_same_output(out, expected, rtol=5e-2, atol=5e-2)
    under = jitted_state(jm)._under_autocast_states.values()
    assert [j.cache_info().misses for j in under] == [1]
    assert [j._eager_keys for j in under] == [{}]  # compiled, not run eagerly


class _TwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.b(self.a(x))


class _BlocksUnderTwoStates(nn.Module):
    """Its blocks (a class called four times: recorded once and replayed, squall.frontend.module_replays)
    run under two autocast states: a recording made under one is never replayed under the other."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_TwoLinears() for _ in range(4)])

    def forward(self, x):
        outs = []
        for i, block in enumerate(self.blocks):
            with torch.autocast("cpu", dtype=torch.float16 if i % 2 else torch.bfloat16):
                outs.append(block(x))
        return outs


def test_a_module_replay_is_keyed_by_the_autocast_state():
    torch.manual_seed(0)
    m = _BlocksUnderTwoStates()
    jm = squall.jit(m)
    x = torch.randn(3, 8)
    with _no_squall_warnings():
        out = jm(x)
    expected = m(x)
    assert [t.dtype for t in out] == [torch.bfloat16, torch.float16] * 2
    _assert_like_eager(out, expected)


def test_backward_called_inside_the_autocast_block():
    # eager's backward casts its listed ops again there; squall's runs its backward trace as traced
    # (autocast off), so its gradients are as precise as outside the block, and close to eager's
    torch.manual_seed(0)
    m, twin = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 1)), nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 1))
    twin.load_state_dict(m.state_dict())
    jm = squall.jit(twin)
    x = torch.randn(16, 8)
    for model in (m, jm):
        with _bf16(), _no_squall_warnings():
            model(x).float().pow(2).mean().backward()
    for p, q in zip(m.parameters(), twin.parameters()):
        assert q.grad.dtype == p.grad.dtype == torch.float32
        assert_close(q.grad, p.grad, rtol=5e-2, atol=5e-3)


def test_symbolic_sizes_under_autocast():
    torch.manual_seed(0)
    m = _Block()
    jm = squall.jit(m)
    with _bf16(), _no_squall_warnings():
        for t in (5, 7, 9, 6):
            x = torch.randn(2, t, 16)
            _assert_like_eager(jm(x), m(x), rtol=3e-2, atol=3e-2)
    (under,) = jm.cache_info().autocast.values()
    assert under.misses == 2  # the first length, then one symbolic entry for the rest


def _old_spellings(x, w):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.cpu.amp.autocast is deprecated for torch.amp.autocast
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            a = x @ w
    with torch.amp.autocast("cpu", dtype=torch.float16):
        b = x @ w
    return a, b


def test_the_amp_spellings_of_autocast():
    from squall.ltorch.autocast import autocast_state

    x, w = torch.randn(4, 4), torch.randn(4, 4)
    jf = squall.jit(_old_spellings)
    with _no_squall_warnings():
        out = jf(x, w)
    expected = _old_spellings(x, w)
    assert [t.dtype for t in out] == [torch.bfloat16, torch.float16]
    _assert_like_eager(out, expected)
    with torch.amp.autocast("cpu", dtype=torch.bfloat16):
        state = autocast_state()
        _assert_like_eager(squall.jit(torch.matmul)(x, w), torch.matmul(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_state() == state == ((("cpu", torch.bfloat16),), True)
    assert autocast_state() is None


def _scaled(x, w, scale):
    return torch.softmax(nn.functional.linear(x, w) * scale, -1), scale * 2


def test_run_time_numbers_under_autocast():
    # a number that changed from call to call is read at run time (a NumberProxy while traced)
    jf = squall.jit(_scaled)
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    with _bf16(), _no_squall_warnings():
        for scale in (0.5, 0.7, 0.9, 1.1):
            _assert_like_eager(jf(x, w, scale), _scaled(x, w, scale))
    (under,) = jf.cache_info().autocast.values()
    assert under.misses == 2  # the first value, then one entry for every value


def test_an_in_place_op_under_autocast():
    def f(x, w):
        y = x @ w
        y.add_(1)
        y.mul_(x.sum())
        return y, y.exp()

    jf = squall.jit(f)
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    with _bf16(), _no_squall_warnings():
        _assert_like_eager(jf(x, w), f(x, w))


def _matmul_then_loss(x, w):
    y = x @ w
    return y, torch.exp(y.float()).sum()


def test_a_replan_after_a_fault_in_the_backward_traces_under_the_entrys_autocast_state():
    # the backward runs outside the autocast block; its fault replans the entry made under autocast
    from squall.extend import OperatorExecutor

    faulty = OperatorExecutor("faulty")
    faulty.register_implementation("prims.mul", lambda a, b: (a * b).reshape(-1))  # a plugin bug
    jf = squall.jit(_matmul_then_loss, executors=[faulty, "torch"])
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)
    with _bf16():
        y, loss = jf(x, w)
        expected_y, expected_loss = _matmul_then_loss(x, w)
    with pytest.warns(squall.SquallWarning, match="executor 'faulty'"):
        (got,) = torch.autograd.grad(loss, x)
    (expected,) = torch.autograd.grad(expected_loss, x)
    assert_close(got, expected, **BF16)
    (under,) = jf.cache_info().autocast.values()
    assert under.replans == 1
    with _bf16(), _no_squall_warnings():
        again = jf(x, w)  # the replanned entry: still autocast's casts
    _assert_like_eager(again, (expected_y, expected_loss))


def _reads_values(x, w):
    y = x @ w
    if y.sum() > 0:  # a value read, guarded
        y = y * 2
    return y, int(y.abs().argmax()), torch.nonzero(y > 0), y[y > 0]  # shapes made by the data


def test_value_reads_and_data_shaped_outputs_under_autocast():
    jf = squall.jit(_reads_values)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with _bf16(), _no_squall_warnings():
        expected = _reads_values(x, w)
        _assert_like_eager(jf(x, w), expected)
        _assert_like_eager(jf(x, w), expected)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: CUDA autocast")


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_cuda_autocast_training_of_transformer_blocks(dtype):
    # CUDA autocast casts other ops than CPU's (its own lists): squall asks torch, as on CPU; the
    # attention then runs on bfloat16/float16 operands, the flash kernel's case
    torch.manual_seed(0)
    m = nn.Sequential(_Block(64, 4), _Block(64, 4), nn.Linear(64, 10)).cuda()
    twin = nn.Sequential(_Block(64, 4), _Block(64, 4), nn.Linear(64, 10)).cuda()
    twin.load_state_dict(m.state_dict())
    jm = squall.jit(twin)
    x, target = torch.randn(4, 32, 64, device="cuda"), torch.randint(0, 10, (4, 32), device="cuda")
    logits = {}
    for model in (m, jm):
        with torch.autocast("cuda", dtype=dtype), _no_squall_warnings():
            logits[model] = model(x)
            loss = nn.functional.cross_entropy(logits[model].flatten(0, 1), target.flatten())
        loss.backward()
    _assert_like_eager(logits[jm], logits[m], rtol=3e-2, atol=3e-2)
    for (name, p), q in zip(m.named_parameters(), twin.parameters()):
        assert q.grad.dtype == torch.float32 == p.grad.dtype, name
        assert_close(q.grad, p.grad, rtol=5e-2, atol=5e-3, msg=lambda s: f"{name}: {s}")
    (under,) = jitted_state(jm)._under_autocast_states.values()
    assert under._eager_keys == {}  # compiled, not run eagerly


@needs_cuda
def test_cuda_autocast_on_a_real_model():
    pytest.importorskip("transformers")
    import_torchvision()
    torch.manual_seed(0)
    real = next(m for m in TRANSFORMERS_MODELS if m.name == "llama")
    model = real.build().cuda()
    inputs = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in real.inputs().items()}
    jm = squall.jit(model)
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad(), _no_squall_warnings():
        expected = model(**inputs)
        out = jm(**inputs)
    assert_same_output(out, expected, rtol=5e-2, atol=5e-2)
    (under,) = jitted_state(jm)._under_autocast_states.values()
    assert under._eager_keys == {}
