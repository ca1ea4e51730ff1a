"""Whole models trained with squall's own gradients: N optimizer steps equal N steps in eager."""
from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import squall
from squall.tools.demo import GPT, GPTConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """A LLaMA-style decoder block: RMSNorm, rotary attention with grouped KV heads, SwiGLU."""

    def __init__(self, dim: int = 64, heads: int = 4, kv_heads: int = 2, hidden: int = 128, seq: int = 16):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        self.register_buffer("cos", torch.cat((angles, angles), -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((angles, angles), -1).sin(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q = q * self.cos[:t] + rotate_half(q) * self.sin[:t]
        k = k * self.cos[:t] + rotate_half(k) * self.sin[:t]
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, 10)

    def forward(self, x, target):
        return F.cross_entropy(self.head(self.features(x).flatten(1)), target)


def _train(model, loss_of, steps: int = 3):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        loss_of(model).backward()
        opt.step()


def _same_training(make_model, loss_of, *, rtol=1e-5, atol=1e-6):
    torch.manual_seed(0)
    eager = make_model().double()
    compiled_model = copy.deepcopy(eager)
    jm = squall.jit(compiled_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # squall's own gradients, no fallback
        _train(jm, loss_of)
    _train(eager, loss_of)
    assert squall.last_traces(jm).backward is not None
    for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters()):
        torch.testing.assert_close(pc, pe, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")
    for (name, be), bc in zip(eager.named_buffers(), compiled_model.buffers()):
        torch.testing.assert_close(bc, be, rtol=rtol, atol=atol, msg=lambda m: f"buffer {name}: {m}")
    return jm


def test_nanogpt_with_loss_trains_like_eager():
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    idx = torch.randint(0, 64, (2, 16))
    targets = torch.randint(0, 64, (2, 16))
    _same_training(lambda: GPT(cfg), lambda m: m(idx, targets)[1])


def test_llama_style_block_trains_like_eager():
    x = torch.randn(2, 16, 64, dtype=torch.float64)
    _same_training(LlamaBlock, lambda m: m(x).pow(2).mean())


def test_cnn_with_batch_norm_in_training_mode_trains_like_eager():
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    target = torch.randint(0, 10, (4,))
    _same_training(lambda: SmallCNN().train(), lambda m: m(x, target))


def test_cnn_ending_on_a_1x1_map_gets_eager_gradients_and_trains_like_eager():
    # a 2x2 image is 1x1 after the max pool: the global average pool is then the identity,
    # whose gradient must pass once (issue 26: it came out twice eager's, the loss right).
    # Gradients compared directly: Adam's steps barely see a gradient scaled by 2
    x = torch.randn(4, 3, 2, 2, dtype=torch.float64)
    target = torch.randint(0, 10, (4,))
    torch.manual_seed(0)
    eager = SmallCNN().train().double()
    compiled_model = copy.deepcopy(eager)
    eager(x, target).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # squall's own gradients, no fallback
        squall.jit(compiled_model)(x, target).backward()
    for (name, pe), pc in zip(eager.named_parameters(), compiled_model.parameters()):
        torch.testing.assert_close(pc.grad, pe.grad, msg=lambda m: f"{name}.grad: {m}")
    _same_training(lambda: SmallCNN().train(), lambda m: m(x, target))
