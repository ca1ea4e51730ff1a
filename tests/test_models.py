"""Whole models: squall.jit(model) against eager, with no opaque fallbacks allowed."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

import squall
from eager_answers import runs_eagerly_saying
from squall.tools.demo import GPT, Block, GPTConfig
from opinfos import prims_only_executor




def _check(model: nn.Module, *inputs, decomposed: bool = True, **tolerances):
    """squall matches eager, whole ops on torch and (optionally) everything decomposed to prims."""
    configs = [None] + ([[prims_only_executor()]] if decomposed else [])
    with torch.no_grad():
        expected = model(*inputs)
        for executors in configs:
            jitted = squall.jit(model, executors=executors)
            with warnings.catch_warnings():
                warnings.simplefilter("error", squall.SquallWarning)
                actual = jitted(*inputs)
            assert_close(actual, expected, **tolerances)


@pytest.mark.parametrize("flash", [True, False])
def test_gpt_forward_with_loss(flash):
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=97, block_size=16, n_layer=2, n_head=2, n_embd=32, flash=flash)
    model = GPT(cfg).eval()
    idx = torch.randint(0, 97, (2, 16))
    targets = torch.randint(0, 97, (2, 16))
    targets[0, :3] = -1  # ignored positions
    _check(model, idx, targets, atol=1e-4, rtol=1e-4)


def test_gpt_block_gradients_match_eager():
    torch.manual_seed(0)
    block = Block(GPTConfig(n_embd=32, n_head=4, block_size=8))
    x = torch.randn(2, 8, 32, requires_grad=True)
    jitted = squall.jit(block)
    out = jitted(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *block.parameters()])
    expected = torch.autograd.grad(block(x).square().sum(), [x, *block.parameters()])
    for g, e in zip(grads, expected):
        assert_close(g, e, atol=1e-4, rtol=1e-4)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x):
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def _rotary(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.flatten(-2)


class LlamaBlock(nn.Module):
    def __init__(self, dim=64, n_heads=4, n_kv_heads=2, hidden=128, max_seq=32):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)
        freqs = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_seq).float(), freqs)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, x, mask=None):
        B, T, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(B, T, self.n_heads, self.head_dim)
        k = self.wk(h).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(h).view(B, T, self.n_kv_heads, self.head_dim)
        cos, sin = self.cos[:T].unsqueeze(1), self.sin[:T].unsqueeze(1)
        q, k = _rotary(q, cos, sin), _rotary(k, cos, sin)
        repeats = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(repeats, dim=2)
        v = v.repeat_interleave(repeats, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if mask is None:
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(self.head_dim))
        x = x + self.wo(attn.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def test_llama_block_causal():
    torch.manual_seed(0)
    _check(LlamaBlock().eval(), torch.randn(2, 16, 64), atol=1e-4, rtol=1e-4)


def test_llama_block_with_attention_mask_in_bfloat16():
    torch.manual_seed(0)
    block = LlamaBlock().to(torch.bfloat16).eval()
    x = torch.randn(2, 8, 64, dtype=torch.bfloat16)
    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    _check(block, x, mask, decomposed=False, atol=2e-2, rtol=2e-2)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.conv1d = nn.Conv1d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2, stride=1)
        x = F.adaptive_avg_pool2d(x, (2, 2))
        x = self.conv1d(x.flatten(2)).mean(-1)
        return F.log_softmax(self.head(torch.flatten(x, 1)), dim=1)


def test_small_cnn_eval():
    torch.manual_seed(0)
    model = SmallCNN()
    for bn in (model.bn1, model.bn2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    _check(model.eval(), torch.randn(2, 3, 16, 16), atol=1e-4, rtol=1e-4)


def test_batch_norm_training_updates_running_stats_like_eager():
    torch.manual_seed(0)
    eager, compiled = nn.BatchNorm2d(4), nn.BatchNorm2d(4)
    jitted = squall.jit(compiled)
    x = torch.randn(3, 4, 5, 5)
    with torch.no_grad():
        for _ in range(2):
            assert_close(jitted(x), eager(x))
    assert_close(compiled.running_mean, eager.running_mean)
    assert_close(compiled.running_var, eager.running_var)
    assert compiled.num_batches_tracked.item() == eager.num_batches_tracked.item() == 2


class PatchEmbedding(nn.Module):
    def __init__(self, patch=4, dim=32, channels=3, image=16):
        super().__init__()
        self.proj = nn.Conv2d(channels, dim, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim))
        self.norm = nn.LayerNorm(dim)

    def forward(self, images):
        x = self.proj(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        return self.norm(x + self.pos)


def test_vit_patch_embedding():
    torch.manual_seed(0)
    _check(PatchEmbedding().eval(), torch.randn(2, 3, 16, 16), atol=1e-4, rtol=1e-4)


def test_losses_on_a_classifier_head():
    torch.manual_seed(0)

    def losses(logits, target, probs, x, y):
        return (
            F.cross_entropy(logits, target, label_smoothing=0.1),
            F.cross_entropy(logits, target, weight=torch.linspace(0.5, 1.5, 5), reduction="sum"),
            F.nll_loss(F.log_softmax(logits, -1), target, reduction="none"),
            F.mse_loss(x, y),
            F.l1_loss(x, y),
            F.smooth_l1_loss(x, y, beta=0.5),
            F.binary_cross_entropy(torch.sigmoid(x), probs),
            F.binary_cross_entropy_with_logits(x, probs),
        )

    args = (torch.randn(6, 5), torch.randint(0, 5, (6,)), torch.rand(6, 5), torch.randn(6, 5), torch.randn(6, 5))
    jitted = squall.jit(losses)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        actual = jitted(*args)
    assert_close(actual, losses(*args))


def test_l1_loss_weight_that_torch_drops_runs_eagerly_not_a_wrong_answer():
    # torch's F.l1_loss leaves weight= out of its __torch_function__ call
    x, y, w = torch.randn(4), torch.randn(4), torch.rand(4)
    runs_eagerly_saying(lambda x, y, w: F.l1_loss(x, y, weight=w), lambda: (x, y, w), "does not pass weight=")
