"""Training-step benchmark on CPU: eager, torch.compile, squall (torch only), squall (installed defaults).

    python bench/training.py [--rounds R] [--only gpt gpt_block llama ...] [--skip-compile] [--skip-defaults] [--profile] [--cpu-time] [--channels-last]

One thread, all contenders side by side in one process. For each workload a step is
forward + loss + backward (gradients are zeroed between steps, not applied, so every
step sees the same parameters); `gpt` is the demo's GPT (`squall demo`), returning its
logits and loss as nanoGPT does, only the loss backpropagated. The contenders' steps are
timed in alternation, round after round (each round times every contender once; the best
round counts), so a load that comes and goes on a shared machine hits them alike. `llama` is a
transformers LlamaForCausalLM (tiny config, random weights) returning the loss of its labels.
Printed per contender: the first step (compile and run), the best per-step time and its
ratio to eager, the bytes of tensors saved for the backward (summed by a saved-tensors
hook: what a step keeps alive between forward and backward, eager and compiled alike),
and, for squall, whether squall's own gradient transform ran ("squall") or it fell back
to PyTorch's autograd ("autograd"). "squall (defaults)" is compiled with `wait=True`:
what is timed is the upgraded tier (inductor's fused regions where they won their timing); its
upgrades (`squall.upgrades`: which plan runs, and why) are printed under the table.

`--profile` adds, per workload, torch.profiler's self time per aten op (and autograd
node) over a few steps of eager and of squall (torch only), side by side, largest first:
where squall's step spends more than eager's, op by op; and of torch.compile and squall
(defaults) where both run (a compiled region's kernels count as the self time of the
autograd node that calls them: `SquallFunction_computation`, `CompiledFxGraph`).
`--channels-last` lays out the convolution workloads' (cnn, resnet) weights and images
channels-last (`model.to(memory_format=torch.channels_last)`) for every contender: what
torch.compile's inductor does by itself inside its graphs on CPU (`decide_layout_opt`).

Measured 2026-11-26 (--only gpt llama --cpu-time --rounds 7, load 3-4, thread CPU time): gpt eager
67.4 ms, torch.compile 75.7 ms (1.12x), squall torch only 77.1 ms (1.14x), squall defaults 72.6 ms
(1.08x; 0.96 of torch.compile's); llama eager 7.41 ms, torch.compile 5.04 ms (0.68x), squall torch
only 7.10 ms (0.96x), squall defaults 3.84 ms (0.52x; 0.76 of torch.compile's). squall's own
gradients on both; torch.compile's first step 30-39 s.

`llama_lora` is that Llama fine-tuned with PEFT's LoRA (`LoraLoss`), when peft is installed.
Measured 2026-11-29 (--only llama llama_lora --skip-defaults --cpu-time --rounds 7, load 1.6-1.9):
llama_lora eager 11.15 ms, torch.compile 8.91 ms (0.80x), squall torch only 9.31 ms (0.83x); llama
in the same run 0.89x and torch.compile 0.76x. Before squall modelled `requires_grad_` on a
computed tensor (squall.frontend.grad_roots, which the hook calls), LlamaForCausalLM's and
LlamaModel's forwards ran eagerly around their compiled submodules: 1.25x eager (14.30 against
11.45 ms, the same command at 9dafd06 without torch.compile, load 1.1-1.6).

`resnet` is timm's test_resnet (batch norms in training mode, 8 images of 64x64, 10 classes).
Measured 2026-11-26 (--only resnet cnn --cpu-time --rounds 5, load 1-2, thread CPU time), after the
judge ran each plan from the call's values and measured gradients against the largest of them:
cnn eager 5.88 ms, torch.compile 3.66 ms (0.62x), squall torch only 6.02 ms, squall defaults
3.84 ms (0.65x; 1.05 of torch.compile's: large regions kept); resnet eager 20.79 ms, torch.compile
15.62 ms (0.75x), squall torch only 20.37 ms, squall defaults 18.20 ms (0.88x; 1.16 of
torch.compile's: islands kept, 16.5 ms in context against large regions' 16.9 ms). Before those
two judge fixes (300ea46, same sitting) the cnn's fused plans were refused ("its results differ":
a conv bias's gradient before a batch norm is rounding noise) and squall defaults ran the torch
plan, 6.24 ms (1.04x eager); resnet (no conv biases) was fused either way. Where resnet's step
still loses to torch.compile's: the batch norm and ReLU backwards (aten's native_batch_norm_backward,
threshold_backward) run unfused between the convolution backwards in the kept islands plan.

Measured 2026-11-27 (--only resnet cnn --cpu-time --rounds 5 [--channels-last] [--profile], load
1-3.5, thread CPU time). Contiguous, as before: cnn eager 6.25 ms, torch.compile 3.82 (0.61x),
squall torch only 6.55, squall defaults 4.06 (0.65x; 1.06 of torch.compile's, large regions);
resnet eager 22.98, torch.compile 16.32 (0.71x), squall torch only 23.06, squall defaults 22.87
(1.00x; large regions kept at 0.78x the torch plan in context, so islands, 17.7 ms in an earlier
sitting, were not compiled). Where torch.compile's lead comes from: the layout. On CPU inductor
lays every graph with a convolution out channels-last (`decide_layout_opt`: its profile shows one
weight copy per convolution), and AOTAutograd keeps the saved activations so. resnet's 15
convolutions alone, forward and backward, each timed by itself on its shapes: 15.3 ms contiguous,
13.2 channels-last (converting to and from channels-last around each one instead: slower than
contiguous). The same model laid out channels-last by its user: eager 17.1 ms, near
torch.compile's 16.4 (profiles under load swung too much to split this finer). squall's torch plan took 26.6 ms there (1.55x eager; cnn 1.43x): the torch
executor copied every tensor it handed an aten backward kernel (batch norm's forward too) to
contiguous, so everything after the first batch norm ran contiguous, with copies. It now hands
them on channels-last, as eager's autograd does (main against this branch, alternating, load 2.5-3.5:
resnet 1.49x and 1.51x eager against 1.29x and 1.05x, cnn 1.81x and 1.43x against 0.95x and 0.89x).
After it, channels-last: cnn eager 5.29, torch.compile 3.67, squall torch only 4.24 (0.80x), squall
defaults 3.90 (0.74x; 1.06 of torch.compile's); resnet eager 14.06, torch.compile 13.46, squall
torch only 14.47 (1.03x), squall defaults 14.64 (the torch plan: the judge refused both fused
plans, whose gradients differ from the torch plan's by up to 9.4e-4 where they reach 0.31).
That difference is eager's own: on this CPU the channels-last step's gradients are far from
float64's (the stem convolution's weight gradient by 9.4e-4, against 9e-7 contiguous), and the
fused plans' backward runs contiguous. So the gap left on a contiguous conv net is the layout
torch.compile picks for the user, at that cost in accuracy; squall keeps eager's layout.
After that merge (2026-11-27, `--only resnet cnn --cpu-time --rounds 3`, load about 2):
cnn squall defaults 4.045 ms against torch.compile's 4.097 (0.99x; large regions kept), eager
6.99; resnet 18.28 against 16.14 (1.13x; islands kept, the judge timing large regions at 19.0 and
islands at 16.5 in context), eager 21.97, squall torch only 20.80 (0.95x eager).

Why squall's regions miss inductor's layout, 2026-11-28 (resnettrain; checked with compile_fx on
two small graphs, torch 2.13, not timed): a region's graph is compiled by `compile_fx` alone, forward
and backward apart. A forward region with a convolution does get inductor's channels-last plan inside
(`GraphLowering.decide_layout_opt` is True) but returns its outputs, saved activations included, in
the eager strides (`keep_output_stride`): a conv2d + relu region's two outputs come back contiguous,
so each saved activation is converted back at the region's edge. A backward region calls
`aten.convolution_backward`, not `aten.convolution`, so `decide_layout_opt` (which counts only
`convolution` nodes) is False there and every backward convolution runs contiguous; under
AOTAutograd the backward inherits channels-last from the saved tensors' strides. The way to close
it: let a forward region containing a convolution return the tensors only its backward reads in
the layout inductor chose (keep_output_stride off for those outputs; `note_strides` already hands
their strides to the backward region's compile), user-visible outputs keeping eager's strides;
the judge's gradient check then decides (channels-last gradients are further from float64's, as
above). Not built in that session. Its profile (--only resnet --cpu-time --rounds 3 --profile, load
3.3-4.5, thread CPU time): eager 32.3 ms, torch.compile 23.5 (0.73x), squall torch only 32.4, squall
defaults 26.8 (0.83x; 1.14 of torch.compile's; islands kept: judged in context torch plan 31.7 ms,
large regions 27.5, islands 26.5). Self time per step, torch.compile against squall defaults:
convolution_backward 8.55 ms against 10.64 (15 calls each), mkldnn_convolution 4.08 against 5.33,
the compiled code itself 4.57 + 2.96 (CompiledFxGraph forward, backward) against 4.21 + 2.64
(SquallFunction_computation and its backward), copy_ 1.09 against 0.23 (torch.compile's
channels-last copies of the weights), ops squall's islands leave out of its regions 2.05
(native_batch_norm_backward once, avg_pool2d_backward, fill_, threshold_backward, max_pool2d's
backward); all ops 24.3 against 27.3. The convolutions, forward and backward, are 3.3 ms of the 3.0
ms gap: the layout; squall's fused kernels are already faster than inductor's.

Built 2026-11-28 (cltrain): a forward region returns the values only its backward reads (saved,
not the user's, read by no other forward call: `FusionRegion.layout_free`) in inductor's layout
(a post-grad pass takes them off compile_fx's user-visible outputs,
`squall_inductor.regions.output_layouts`), so a convolution region's saved activations come back
channels-last and `note_strides` compiles the backward region for them: its convolution backwards
then run channels-last (inductor's fallback follows the saved input's layout). The user's outputs
keep eager's strides. In the large-regions plan of test_resnet 77 of the 144 saved 4-D tensors are
channels-last (20 of 192 before); gradients and running statistics still match eager's (largest
gradient difference 1.5e-6, 6.8e-7 before), and the judge keeps large regions (its gradient check
passed). Main against this branch, alternating, --only resnet cnn --cpu-time --rounds 3, thread CPU
time (tests ran beside some runs: absolute times swing, ratios to torch.compile count):
main 11:11-11:19, load 0.7-2.9: resnet squall defaults 40.78 ms against torch.compile 37.79 (1.08x;
islands kept, large regions 42.4 in context), cnn 8.58 against 7.63 (1.12x); branch 11:02-11:08,
load 1.4-3.5: resnet 25.83 against 27.01 (0.96x; large regions kept at 0.68x the torch plan), cnn
8.09 against 8.88 (0.91x); branch 11:32-11:39, load 2.3-4.7: resnet 41.40 against 43.40 (0.95x;
large regions, 0.67x the torch plan), cnn 11.22 against 11.99 (0.94x); main 11:41-11:48, load 1.5-3.8: resnet 28.82 against 25.32
(1.14x; islands kept, large regions 27.9 in context), cnn 7.07 against 6.89 (1.03x). So on main the
judge picks islands (in context 26.9 against large regions' 27.9), and on this branch large regions
win outright (0.67-0.68x the torch plan: islands are not compiled). Not a ResNet rule: any region with a convolution, forward
and backward. Left: a backward region's weight gradient follows its channels-last input, so
`torch.autograd.grad` of such a weight comes back channels-last where eager's is contiguous (equal
values; `.grad` through `backward()` keeps the weight's layout, as AccumulateGrad restrides it).
--only gpt llama --cpu-time --rounds 3, branch 11:42-11:46, load 2.8-3.8: gpt squall defaults 82.93
ms against torch.compile 83.31 (1.00x), llama 6.96 against 8.69 (0.80x); main 11:50-11:52, load
0.2-2.1: gpt 78.59 against 79.06 (0.99x), llama 11.04 against 12.23 (0.90x): no change beyond noise
(no convolution: no output of theirs is laid out otherwise).
After merging, each gradient is returned in its input's layout where a forward region kept saved
values its own way (75bdcfa; the `torch.autograd.grad` case above), main 2026-11-28 12:00,
--only resnet --cpu-time --rounds 3, load 0.9-3.2 (CI's suite beside it): eager 36.38 ms,
torch.compile 29.21 (0.80x), squall torch only 38.40, squall defaults 26.94 (0.74x eager, 0.92 of
torch.compile's; large regions kept at 0.70x the torch plan in context).

Kernels per step, 2026-11-27 (trainplan). On an H100 (bench/gpu_models.py --train-only) squall's
torch plan took 1.21x eager's ResNet-50 step and 1.07x its LLaMA step: there a step is its kernels
and their launches. bench/kernel_counts.py counts the aten ops a step calls below autograd (views
and allocations left out), eager against squall (torch only), on CPU: before, timm resnet50 (2
images of 64x64) 567 to eager's 408, test_resnet 171 to 126, this llama 318 to 251, a tiny GPT-2
189 to 191. Where: every training batch norm wrote its running statistics back with two copies
after a functional kernel, and its step count with an add and a copy, where eager's kernel
updates them in place (now `passes.write_backs_folded`: the torch executor runs such a call in
place where its write-back follows); grouped-query attention took the math path (softmax, bmm,
masks, head copies) where eager's CPU flash kernel takes grouped heads (asked of
`torch._fused_sdp_choice`); tanh's backward was three kernels to eager's tanh_backward, rsqrt's
four to three; a slice of the whole tensor (`logits[:, -0:]`) padded its gradient into a new
tensor of zeros, a contiguous copy converted its gradient to its own dtype, and a mean's
broadcast gradient was copied dense before threshold_backward. After: resnet50 408 to 408,
test_resnet 126 to 126, llama 255 to 251 (eager's 8 slice_backward are 2 kernels each, zeros and a
copy, as squall's 8 pads are a full and a copy: 255 to 259 kernels), GPT-2 179 to 191. CPU time
(--only resnet llama --skip-compile --skip-defaults --cpu-time --rounds 7, load 4-4.6, two runs):
llama squall torch only 0.88x and 0.96x eager (0.91x and 1.04x before, load 2.6-2.9), resnet 0.97x
and 0.98x (0.86x and 1.25x before: noise at that load). Left for the GPU: on CUDA the sdpa rule
still takes the math path (squall has no CUDA flash or memory-efficient attention kernel: LLaMA's
attention there is softmax and bmm over the whole score matrix), and eager's CUDA batch norm is
cuDNN's (`_batch_norm_impl_index`), squall's the native kernels (`_batch_norm_with_update` and
`batch_norm_backward`, with cuDNN's reserve space, would be eager's): neither could be checked here.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-inductor-"))
os.environ.setdefault("SQUALL_CACHE_DIR", tempfile.mkdtemp(prefix="bench-squall-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import squall  # noqa: E402
from squall.tools.demo import GPT, Block, GPTConfig  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import import_torchvision  # noqa: E402  (transformers imports torchvision)


class MLP(nn.Module):
    def __init__(self, d: int = 512, hidden: int = 2048):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x, target):
        return F.mse_loss(self.fc2(F.gelu(self.fc1(x))), target)


class BlockWithLoss(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.block = Block(cfg)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, x, target):
        logits = self.head(self.block(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))


class CrossEntropy(nn.Module):
    def __init__(self, rows: int = 4096, classes: int = 8192):
        super().__init__()
        self.logits = nn.Parameter(torch.randn(rows, classes) * 0.1)

    def forward(self, target):
        return F.cross_entropy(self.logits, target)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x, target):
        return F.cross_entropy(self.head(self.body(x).flatten(1)), target)


class CausalLMLoss(nn.Module):
    """A transformers causal LM (a tiny Llama, random weights) returning the loss of its labels."""

    def __init__(self):
        super().__init__()
        import_torchvision()
        import transformers  # optional: only this workload needs it

        config = transformers.LlamaConfig(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
        self.lm = transformers.LlamaForCausalLM(config).train()

    def forward(self, ids, labels):
        return self.lm(input_ids=ids, labels=labels).loss


class LoraLoss(CausalLMLoss):
    """The tiny Llama fine-tuned with PEFT's LoRA (rank 4 on the attention's q and v projections),
    set up as PEFT's docs do it: `enable_input_require_grads()`, a forward hook making the input
    embeddings' output require grad. LoRA's B starts at zero; it is drawn here, so that every
    adapter gets a gradient."""

    def __init__(self):
        super().__init__()
        import peft  # optional: only this workload needs it

        self.lm = peft.get_peft_model(self.lm, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
        self.lm.enable_input_require_grads()
        with torch.no_grad():
            for name, p in self.lm.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.02)


class ImageClassifierLoss(nn.Module):
    """A timm ResNet (its tiny test config, random weights; batch norms in training mode) returning
    the cross-entropy of its labels."""

    def __init__(self):
        super().__init__()
        import_torchvision()
        import timm  # optional: only this workload needs it

        self.net = timm.create_model("test_resnet", pretrained=False, num_classes=10).train()

    def forward(self, images, labels):
        return F.cross_entropy(self.net(images), labels)


def workloads() -> dict:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=8192, block_size=128, n_layer=1, n_head=4, n_embd=256)
    return {
        "gpt": (GPT(GPTConfig()).train(), (torch.randint(0, 8192, (4, 128)), torch.randint(0, 8192, (4, 128)))),
        "mlp": (MLP(), (torch.randn(256, 512), torch.randn(256, 512))),
        "gpt_block": (BlockWithLoss(cfg), (torch.randn(4, 128, 256), torch.randint(0, 8192, (4, 128)))),
        "cross_entropy": (CrossEntropy(), (torch.randint(0, 8192, (4096,)),)),
        "cnn": (SmallCNN().train(), (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))),
        **({"llama": (CausalLMLoss(), (torch.randint(0, 1024, (4, 64)), torch.randint(0, 1024, (4, 64)))),
            **({"llama_lora": (LoraLoss(), (torch.randint(0, 1024, (4, 64)), torch.randint(0, 1024, (4, 64))))}
               if importlib.util.find_spec("peft") else {})}
           if importlib.util.find_spec("transformers") else {}),
        **({"resnet": (ImageClassifierLoss(), (torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))))}
           if importlib.util.find_spec("timm") else {}),
    }


def channels_last(model: nn.Module, inputs: tuple) -> tuple[nn.Module, tuple]:
    """`model` and its 4-D inputs laid out channels-last (other inputs as they are)."""
    laid_out = tuple(t.contiguous(memory_format=torch.channels_last) if t.ndim == 4 else t for t in inputs)
    return model.to(memory_format=torch.channels_last), laid_out


def contenders(model: nn.Module, skip: set[str]) -> dict:
    made = {
        "eager": lambda: model,
        "torch.compile": lambda: torch.compile(copy.deepcopy(model)),
        "squall (torch only)": lambda: squall.jit(copy.deepcopy(model), executors=["torch"]),
        "squall (defaults)": lambda: squall.jit(copy.deepcopy(model), wait=True),
    }
    return {label: make() for label, make in made.items() if label not in skip}


def loss_of(out):
    """The loss a model returned: the output itself, or the last of several (`logits, loss`)."""
    return out[-1] if isinstance(out, tuple) else out


def step(model, args) -> None:
    for p in model.parameters():
        p.grad = None
    loss_of(model(*args)).backward()


def saved_bytes(model, args) -> int:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(model(*args))
    loss.backward()
    return total


def steps_per_round(model, args, budget_s: float) -> int:
    """How many steps of `model` take about `budget_s` (at least one)."""
    start, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - start < budget_s / 2:
        step(model, args)
        n += 1
    return max(1, int(n * budget_s / (time.perf_counter() - start)))


def alternating_best(fns: dict, args, rounds: int, budget_s: float = 0.25, clock=time.perf_counter) -> dict[str, float]:
    """Best per-step seconds of each contender, timed in alternation: each round times them all."""
    numbers = {label: steps_per_round(fn, args, budget_s) for label, fn in fns.items()}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for label, fn in fns.items():
            start = clock()
            for _ in range(numbers[label]):
                step(fn, args)
            best[label] = min(best[label], (clock() - start) / numbers[label])
    return best


def op_times(model, args, steps: int = 3) -> dict[str, tuple[float, int]]:
    """torch.profiler's self CPU time (microseconds per step) and calls per step, by op name."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(model, args)
    return {e.key: (e.self_cpu_time_total / steps, e.count // steps) for e in prof.key_averages()}


def print_op_breakdown(eager, compiled, args, top: int = 25, labels: tuple[str, str] = ("eager", "squall")) -> None:
    by_eager, by_squall = op_times(eager, args), op_times(compiled, args)
    names = sorted(set(by_eager) | set(by_squall), key=lambda k: -max(by_eager.get(k, (0, 0))[0], by_squall.get(k, (0, 0))[0]))
    print(f"  self time per step by op: {labels[0] + ' us':>10}{'calls':>6}{labels[1] + ' us':>11}{'calls':>6}")
    for name in names[:top]:
        (e_us, e_n), (s_us, s_n) = by_eager.get(name, (0.0, 0)), by_squall.get(name, (0.0, 0))
        print(f"    {name[:46]:46}{e_us:10.0f}{e_n:6}{s_us:11.0f}{s_n:6}")
    total_e, total_s = sum(t for t, _ in by_eager.values()), sum(t for t, _ in by_squall.values())
    print(f"    {'all ops':46}{total_e:10.0f}{'':6}{total_s:11.0f}")


def how_differentiated(model) -> str:
    state = getattr(model, "_jitted", None)
    if state is None or state.last_entry is None:
        return ""
    return "squall" if state.last_entry.compilation.backward is not None else "autograd"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, help="workloads to run (default: all)")
    parser.add_argument("--skip-compile", action="store_true", help="leave out torch.compile (it takes seconds per workload)")
    parser.add_argument("--skip-defaults", action="store_true", help="leave out squall with the installed plugins (inductor compiles for minutes)")
    parser.add_argument("--profile", action="store_true",
                        help="also print eager's and squall's (torch only) self time per op, and torch.compile's and squall's (defaults)")
    parser.add_argument("--channels-last", action="store_true",
                        help="lay out the convolution workloads' weights and images channels-last for every contender")
    parser.add_argument(
        "--cpu-time", action="store_true",
        help="time steps by this thread's CPU time (time.thread_time: torch runs on this one thread), which other "
        "processes on a loaded machine do not inflate; the first step stays wall time",
    )
    args = parser.parse_args()
    skip = {"torch.compile"} if args.skip_compile else set()
    if args.skip_defaults:
        skip.add("squall (defaults)")
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    clock = "thread CPU time" if args.cpu_time else "wall time"
    print(f"training step (forward + backward), one thread, torch {torch.__version__}, best of {args.rounds} alternating rounds, {clock}")
    for key, (model, inputs) in workloads().items():
        if args.only and key not in args.only:
            continue
        if args.channels_last and any(isinstance(m, nn.Conv2d) for m in model.modules()):
            model, inputs = channels_last(model, inputs)
            key += " (channels-last)"
        print(f"\n{key}")
        print(f"  {'contender':24}{'first step':>12}{'per step':>12}{'vs eager':>10}{'saved MB':>10}  gradients")
        fns = contenders(model, skip)
        first = {}
        for label, fn in fns.items():
            start = time.perf_counter()
            step(fn, inputs)
            first[label] = time.perf_counter() - start
        best = alternating_best(fns, inputs, args.rounds, clock=time.thread_time if args.cpu_time else time.perf_counter)
        for label, fn in fns.items():
            saved = saved_bytes(fn, inputs) / 2**20
            print(f"  {label:24}{first[label] * 1e3:10.1f}ms{best[label] * 1e3:10.3f}ms{best[label] / best['eager']:9.2f}x{saved:10.1f}  {how_differentiated(fn)}")
        for upgrade in squall.upgrades(fns["squall (defaults)"]) if "squall (defaults)" in fns else ():
            print(f"    squall (defaults): {upgrade}")  # which plan runs, and each offer's in-context times
        if args.profile and "squall (torch only)" in fns:
            print_op_breakdown(fns["eager"], fns["squall (torch only)"], inputs)
        if args.profile and "squall (defaults)" in fns and "torch.compile" in fns:
            print_op_breakdown(fns["torch.compile"], fns["squall (defaults)"], inputs, labels=("compile", "defaults"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
