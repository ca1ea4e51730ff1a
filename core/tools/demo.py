"""`squall demo`: compile a small GPT on the CPU and show what squall did with it.

The model follows nanoGPT's structure (token and position embeddings, pre-norm blocks
of causal self-attention and a GELU MLP, tied output head, cross-entropy loss), so it
exercises the ops real language models use.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import squall
from ..runtime.jit import jitted_state

__all__ = ["GPTConfig", "GPT", "Block", "main"]


@dataclass
class GPTConfig:
    vocab_size: int = 8192  # a realistic vocabulary makes the loss a real workload
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    flash: bool = True  # scaled_dot_product_attention; False spells attention out with a mask


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout
        self.flash = cfg.flash
        if not cfg.flash:
            mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size)).view(1, 1, cfg.block_size, cfg.block_size)
            self.register_buffer("bias", mask)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
            )
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
                wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
                drop=nn.Dropout(cfg.dropout),
                h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
                ln_f=nn.LayerNorm(cfg.n_embd, bias=cfg.bias),
            )
        )
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as in GPT-2

    def forward(self, idx, targets=None):
        b, t = idx.size()
        if t > self.cfg.block_size:
            raise ValueError(f"sequence of length {t} is longer than the block size {self.cfg.block_size}")
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def _best_times(fns, *args, rounds: int = 5, number: int = 10) -> list[float]:
    """Each function's best per-call time, the functions taking turns within every round: a
    background upgrade (or anything else) competing for the CPU meanwhile slows them alike."""
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(number):
                fn(*args)
            best[i] = min(best[i], (time.perf_counter() - start) / number)
    return best


def main(executors: list[str] | None = None, *, batch: int = 4, seq: int = 128, excerpt_lines: int = 14) -> int:
    """Compile the demo GPT, print what happened, return an exit code."""
    torch.manual_seed(0)
    model = GPT(GPTConfig()).eval()
    idx = torch.randint(0, model.cfg.vocab_size, (batch, seq))
    targets = torch.randint(0, model.cfg.vocab_size, (batch, seq))
    jitted = squall.jit(model, executors=executors) if executors else squall.jit(model)

    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", squall.SquallWarning)
        start = time.perf_counter()
        logits, loss = jitted(idx, targets)
        first_call_s = time.perf_counter() - start
        expected_logits, expected_loss = model(idx, targets)
        eager_s, compiled_s = _best_times((model, jitted), idx, targets)

    compilation = squall.last_traces(jitted)
    traced, plan = compilation.traced, compilation.plan
    print(f"squall demo: a {model.cfg.n_layer}-layer GPT ({sum(p.numel() for p in model.parameters()):,} parameters), "
          f"input {list(idx.shape)}, torch {torch.__version__}\n")
    lines = str(traced).splitlines()
    body = [i for i, line in enumerate(lines) if not line.lstrip().startswith("#")][1]  # after the inputs
    print(f"trace excerpt (lines {body + 1}-{body + excerpt_lines} of {len(lines)}; inputs are "
          f"{len(traced.inputs)} parameters and the token ids):")
    for line in lines[body : body + excerpt_lines]:
        print("  " + line)
    print("\nwhich executor took which operation:")
    taken = Counter((d.executor, d.bsym.sym.id) for d in plan.decisions if d.executor is not None)
    by_executor: dict[str, list[str]] = {}
    for (executor, op), n in sorted(taken.items()):
        by_executor.setdefault(executor, []).append(f"{op.removeprefix('torch.')} x{n}" if n > 1 else op.removeprefix("torch."))
    for executor, ops in by_executor.items():
        print(f"  {executor}: {', '.join(ops)}")
    for region in plan.regions:
        print(f"  {region.executor} region{' (reused)' if region.reused else ''}: {', '.join(op.removeprefix('torch.') for op in region.ops)}")
    handed_back = Counter(name for d in plan.decisions for name, why in d.declined if "fusion pass left it out" in why)
    for name, n in handed_back.items():
        print(f"  {name} claimed {n} operations but handed them back (see its README: e.g. torch timed faster here)")
    for name, why in plan.unavailable.items():
        print(f"  passed over: {name} ({why})")
    decomposed = sorted({d.bsym.sym.id for d in plan.decisions if d.decomposed})
    if decomposed:
        print(f"  decomposed (no executor took them whole): {', '.join(decomposed)}")
    opaque = sorted({b.sym.id.removeprefix("opaque.") for top in traced.bsyms for b in top.walk() if squall.symbol.Tags.OPAQUE in b.sym.tags})
    print(f"  opaque fallbacks (torch calls squall does not model): {', '.join(opaque) if opaque else 'none'}")
    other_warnings = sorted({str(w.message) for w in caught if "opaque" not in str(w.message)})
    for message in other_warnings:
        print(f"  warning: {message}")
    diff = max((logits - expected_logits).abs().max().item(), (loss - expected_loss).abs().item())
    compile_s = jitted_state(jitted).last_entry.compile_seconds
    print(f"\ncompile (trace + plan + generate): {compile_s * 1e3:.1f} ms; first call (compile and run): {first_call_s * 1e3:.1f} ms")
    print(f"per call: eager {eager_s * 1e3:.3f} ms, squall {compiled_s * 1e3:.3f} ms ({compiled_s / eager_s:.2f}x eager)")
    print(f"max |squall - eager| over logits and loss: {diff:.3g}")
    grad_diff = _training_step(model, jitted, idx, targets)
    return 0 if diff < 1e-4 and grad_diff < 1e-4 else 1


def _training_step(model: GPT, jitted, idx: torch.Tensor, targets: torch.Tensor) -> float:
    """One optimizer step compiled and eager side by side; returns the largest gradient difference."""
    model.train()
    twin = copy.deepcopy(model)  # the eager reference trains a copy, so both start from the same weights
    compiled_model = jitted_state(jitted).module
    optimizer = torch.optim.SGD(compiled_model.parameters(), lr=1e-2)
    eager_optimizer = torch.optim.SGD(twin.parameters(), lr=1e-2)

    def compiled_step():
        optimizer.zero_grad()
        jitted(idx, targets)[1].backward()
        optimizer.step()

    def eager_step():
        eager_optimizer.zero_grad()
        twin(idx, targets)[1].backward()
        eager_optimizer.step()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", squall.SquallWarning)
        start = time.perf_counter()
        compiled_step()
        first_s = time.perf_counter() - start
    eager_step()
    grad_diff = max((a.grad - b.grad).abs().max().item() for a, b in zip(compiled_model.parameters(), twin.parameters()))
    compilation = squall.last_traces(jitted)
    print("\ntraining step (forward, backward, SGD step; dropout off, so eager's numbers are comparable):")
    if compilation.backward is None:
        reasons = sorted({str(w.message) for w in caught})
        print("  differentiated by PyTorch's autograd (squall fell back):" + "".join(f"\n    {r}" for r in reasons))
    else:
        for label, trace in (("forward", compilation.planned), ("backward", compilation.backward)):
            taken = Counter(b.executor.name for b in trace.bsyms)
            regions = len(trace.plan.regions)
            print(f"  {label}: {len(trace.bsyms)} calls, " + ", ".join(f"{n} {name}" for name, n in taken.most_common())
                  + (f" ({regions} fusion regions)" if regions else ""))
        print(f"  saved for backward: {len(compilation.backward.inputs)} tensors")
    eager_s, compiled_s = _best_times((eager_step, compiled_step), rounds=3, number=3)
    print(f"  first step (trace, differentiate, plan both, generate, run): {first_s * 1e3:.1f} ms")
    print(f"  per step: eager {eager_s * 1e3:.2f} ms, squall {compiled_s * 1e3:.2f} ms ({compiled_s / eager_s:.2f}x eager)")
    print(f"  max |squall - eager| over the first step's gradients: {grad_diff:.3g}")
    return grad_diff


if __name__ == "__main__":
    raise SystemExit(main())
