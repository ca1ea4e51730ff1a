"""A sweep of real models squall's tests do not run: each built from its library with a tiny config
and random weights (nothing is downloaded), compiled as a user would (`squall.jit(model)`), and
checked against eager.

Run: python bench/sweep_models.py [name-substring ...]   (default: every model of bench/sweep_model_list.py; prints a markdown table)
     python bench/sweep_models.py --list                 (the models' names)
     python bench/sweep_models.py --fused [name ...]     (every jit with the installed fusion executors
                                                          and wait=True: what is checked is the fused plan
                                                          each upgrade kept; the last column says, per jit,
                                                          what its entries' upgrades did: u upgraded, t kept
                                                          the torch plan, n nothing to fuse, f failed)

Per model:
- inference: `squall.jit(model)(**inputs)` twice under no_grad, eval mode, against eager's output
  (tests/real_models.py's assert_same_output; the worst difference relative to the largest value);
- other sizes: the same jitted model called at three other input sizes (batch 3, 1 and 4; token
  sequences 2, 3 and 1 shorter), each against eager (the second size makes the changed dimensions
  symbolic, squall's default `dynamic="auto"`);
- padded: for a text model that takes an attention mask, one call (a new squall.jit) with a mask whose
  last row ends in padding, against eager;
- generate: for a model that generates, `squall.jit(model).generate(...)` (greedy, 4 new tokens, the
  first prompt row left-padded) against eager's tokens;
- training: one step in train mode with every dropout, drop-path and layerdrop probability 0 (batch
  norm then normalizes with the batch's statistics and updates its running ones): the loss
  (the model's own where it takes labels, else the mean square of its first output),
  `loss.backward()` through `squall.jit(model)`, against eager on a copy of the same model:
  the loss, every parameter's gradient and every buffer afterwards (running statistics);
- 3 SGD steps: the training step, then SGD (lr 0.05) and two more steps at other sizes (batch 3 and
  4, sequences shorter), then SGD: every parameter and buffer against eager's (and float64's where over tolerance);
- every SquallWarning any of these calls raised (opaque calls, fallbacks), and any exception;
- compile seconds: the first compiled inference call, and the first training step (forward and
  backward), wall clock: both include tracing, planning and generating.

A difference is the largest |squall - eager| over a tensor divided by eager's largest |value| in it
(at least 1e-6), the worst over all tensors compared. "ok" means within 1e-4 for outputs and the
loss and 1e-3 for gradients and buffers (float32 sums in another order), as tests/test_real_models.py.
Where a tensor is over, the step is run again in float64: "ok*" (with how many tensors were over) when
each is as close to float64 as eager's own float32 answer (within 4 times its error), or as close as
eager's float32 answer once every weight changes by 4 rounding errors (two such copies: where the step
is that sensitive, a plan's own rounding moves it as far; the judge's conditioning check,
squall.runtime.tiers, asks the same), or eager's error is over 1% of the tensor (noise in both: a bias
before a train-mode batch norm, whose exact gradient is 0; batch norm over 4 values of a 1x1 map);
"DIFF" otherwise. "eager fails" marks inputs eager itself
rejects there (a fixed sequence length), which say nothing of squall.

Measured 2026-11-27 (CPU, torch 2.13, transformers 5.24, timm 1.0.31, torchvision 0.28; load 1.3 at
the start, 5.1 at the end, from two other jobs; compile seconds are wall clock and loaded), 74 models
after this branch's fixes (before them, funnel raised TypeError at `torch.cat(..., axis=)`, and
nn.MultiheadAttention, torchvision's ViT and SigLIP's pooling head ran
multi_head_attention_forward as one opaque call, their training on PyTorch's autograd):

| model | inference | other sizes | padded | generate | step | 3 SGD steps | SquallWarnings | compile s |
|---|---|---|---|---|---|---|---|---|
| gemma | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.3 / 1.5 |
| gemma2 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.5 |
| gemma3 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.3 / 0.4 |
| phi | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| phi3 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| qwen3 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.4 |
| qwen3_moe | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.8e-07 | ok 1.2e-07 | - | 0.2 / 0.6 |
| olmo2 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.4 |
| falcon | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 2.1e-07 | ok 2.2e-07 | - | 0.1 / 0.2 |
| gptj | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| gpt_neox | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| opt | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.1 |
| bart | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| pegasus | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.5 |
| whisper | ok 0.0e+00 | ok 0.0e+00 | - | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 1.6 |
| distilbert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.2 |
| roberta | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| deberta_v2 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 1.1e-07 | ok 2.1e-08 | - | 0.1 / 0.2 |
| electra | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| albert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| modernbert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| mobilebert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| xlnet | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 1.6 |
| funnel | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 9.3e-07 | ok 1.7e-04 | - | 0.2 / 0.4 |
| vit | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.1 |
| swin | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.1 |
| convnext | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 8.8e-08 | ok 5.3e-08 | - | 0.0 / 0.0 |
| timm/efficientvit_b0 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 4.8e-01 (4 noise) | ok* 2.3e-02 (5 noise) | - | 0.2 / 1.0 |
| timm/mobilevit_xxs | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.4 / 1.1 |
| timm/levit_128s | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 3.0e-04 | ok* 2.0e+00 (116 noise) | - | 0.3 / 1.7 |
| timm/regnety_002 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 5.6e-04 | - | 0.4 / 1.1 |
| timm/resnest14d | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 3.0 |
| timm/dla34 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.5 / 2.2 |
| timm/hrnet_w18_small | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 3.4e-03 (1 noise) | DIFF 1.0e-03 (err vs f64 9.8e-04, eager's 1.1e-04) | - | 0.9 / 6.1 |
| timm/poolformer_s12 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.4 / 1.0 |
| timm/eva02_tiny_patch14_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| timm/xcit_nano_12_p16_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 1.1e-06 | ok 3.6e-05 | - | 0.2 / 1.0 |
| torchvision/resnet18 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 0.7 |
| torchvision/mobilenet_v2 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.5 / 6.6 |
| torchvision/efficientnet_b0 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 2.0e+00 (15 noise) | ok 0.0e+00 | - | 0.5 / 1.6 |
| torchvision/shufflenet_v2_x0_5 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.3 / 1.1 |
| torchvision/squeezenet1_0 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.1 |
| torchvision/googlenet | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.5 / 2.7 |
| torchvision/mnasnet0_5 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.4 / 2.2 |
| torchvision/regnet_y_400mf | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 1.3e-05 | ok* 2.1e+13 (287 noise) | - | 0.7 / 3.4 |
| torchvision/convnext_tiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.6 / 2.2 |
| torchvision/swin_t | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 1.4 / 5.7 |
| torchvision/maxvit (tiny config) | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 2.6e-06 | ok 1.4e-05 | - | 0.3 / 1.2 |
| torchvision/vit (tiny config) | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 0.3 |
| longformer | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | as_strided opaque | 4.1 / 3.1 |
| big_bird | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 1.4e-07 | ok 1.5e-08 | unsqueeze_ in place | 0.6 / 0.8 |
| reformer | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | eager fails (ValueError) | ok 2.0e-07 | eager fails (ValueError) | Tensor.new opaque, RNG changed, autograd.Function opaque (autograd fallback) | 1.3 / 1.6 |
| canine | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 4.3e-14 | ok 4.0e-10 | - | 0.1 / 0.7 |
| convbert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 2.4e-07 | ok 2.5e-07 | - | 0.1 / 0.2 |
| squeezebert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.1 |
| nystromformer | ok 0.0e+00 | eager fails (RuntimeError) | eager fails (RuntimeError) | - | ok 8.2e-08 | eager fails (RuntimeError) | - | 0.1 / 0.8 |
| esm | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.1 |
| rwkv | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 8.5e-07 | ok 2.9e-07 | - | 0.1 / 1.9 |
| recurrent_gemma | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | autograd.Function opaque (autograd fallback) | 0.2 / 0.6 |
| jamba | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.2e-07 | ok 8.4e-08 | - | 0.3 / 1.0 |
| mamba2 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 1.7e-07 | ok 2.6e-07 | - | 0.2 / 0.9 |
| led | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 5.7e-07 | ok 2.8e-08 | as_strided opaque | 3.2 / 2.2 |
| mt5 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 0.8 |
| longt5 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.3 / 1.0 |
| switch_transformers | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | eager fails (IndexError) | ok 4.9e-07 | ok 1.4e-07 | _has_compatible_shallow_copy_type | 1.7 / 6.7 |
| gpt_bigcode | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.4 |
| mpt | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| codegen | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.5 |
| deepseek_v3 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.2e-07 | ok 1.1e-07 | - | 0.5 / 1.2 |
| gpt_oss | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.2e-07 | ok 3.0e-07 | - | 0.4 / 1.0 |
| hubert | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 2.6e-07 | ok 1.1e-07 (rerun with layerdrop 0) | requires_grad set (eager split) | 0.1 / 0.6 |
| dinov2 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| siglip_vision | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| swinv2 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 5.5e-07 | ok 8.2e-07 | - | 0.2 / 0.4 |

Read: no output differs from eager (every inference, other-size and padded call 0.0 or within
1e-4; every generate's tokens equal). The one DIFF, hrnet_w18_small after 3 SGD steps, is the
conditioning of that setup, not found to be squall's: its first step is ok*, and eager's own
3-step result moves by 1e7 (relative) when its parameters are perturbed by 1e-7 (relative), batch
norms normalizing over 4 values of 1x1 maps. The warnings are squall's fallbacks, each with the
right answer: as_strided (longformer, led), an in-place unsqueeze_ (big_bird), a user
torch.autograd.Function under gradients (recurrent_gemma, reformer: PyTorch's autograd runs it),
`x.requires_grad = True` (hubert: that forward runs eagerly), torch._has_compatible_shallow_copy_type
(switch_transformers), Tensor.new and a generator reseed (reformer). hubert's 3-step row is from a
rerun after layerdrop (random in train mode) was set to 0 here as dropout is; the full run had
compared different dropped layers.

--fused, 2026-11-28 (fresh squall and inductor cache folders, load 1-3 with other jobs beside it;
the sweep was stopped after nine models, each taking 3-14 minutes of inductor compiles):

| model | inference | other sizes | padded | generate | step | 3 SGD steps | upgrades (inference; training) |
|---|---|---|---|---|---|---|---|
| qwen3 | ok 2.0e-07 | ok 0.0e+00 | ok 2.5e-07 | ok | ok 5.2e-07 | ok 1.2e-07 | ut u uu; ut |
| qwen3_moe | ok 2.1e-07 | ok 2.1e-07 | ok 3.0e-07 | ok | ok 1.0e-06 | ok 1.1e-07 | uu u uu; u |
| gptj | ok 2.8e-07 | ok 2.7e-07 | ok 2.6e-07 | ok | ok 6.3e-07 | ok 7.1e-07 | uu u uu; u |
| bart | ok 1.8e-07 | ok 2.3e-07 | ok 1.8e-07 | ok | ok 3.4e-06 | ok 4.8e-07 | uu u u; u |
| whisper | ok 3.0e-07 | ok 3.0e-07 | - | ok | ok 1.2e-06 | ok 1.6e-06 | uu u; u |
| distilbert | ok 2.4e-07 | ok 2.6e-07 | ok 2.4e-07 | - | ok 1.1e-06 | ok 4.2e-07 | uu u; u |
| deberta_v2 | ok 3.0e-07 | ok 3.0e-07 | ok 2.6e-07 | - | ok 1.1e-06 | ok 3.4e-07 | uu u; u |
| timm/efficientvit_b0 | ok 2.8e-07 | ok 2.8e-07 | - | - | ok* 5.3e-01 (8 tensors) | DIFF 8.3e-02 | uu; u |
| timm/levit_128s | ok 4.4e-07 | ok 4.8e-07 | - | - | ok 3.0e-04 | ok* 2.0e+00 (116 tensors) | uu; t |

Every output equals eager's within 1e-4 on the fused plans. efficientvit_b0's DIFF is a batch
norm's bias after 3 steps whose values reach about 5e-4: squall's error against float64 3.8e-5,
eager's 4.3e-6, which is 0.93% of that tensor's largest exact value, just under the 1% counted as
float32 noise (on the torch plan the same row is ok* with 5 tensors counted as noise). Looked into
(2026-11-28, a script doing what the sweep does): with every weight changed by 4 rounding errors,
eager's own float32 steps land up to 5.1e-5 from float64 on that bias (2.8e-6 unchanged): the step
is that sensitive there, so squall's 3.8e-5 is rounding. A fused run of the same steps then (large
regions upgraded, 30.5 against 44.9 ms a step) was within the changed weights' spread on every
tensor. The verdict now asks that question itself (ok* then). levit_128s's training upgrade kept the torch plan, with a warning that its
fused plan "computes other results" on drawn values: there its batch norms over drawn weights
make the program chaotic (eager's own float32 answer is 23-35% off float64's). Since the judge's
conditioning check (squall.runtime.judge_compare.CONDITIONING_FACTOR) the same step is fused, without a
warning: 0.53x the torch plan's time, its gradients ok* against eager (73 tensors over
tolerance, each as close to float64 as eager's or noise, as on the torch plan).

The third batch (THIRD_BATCH in bench/sweep_model_list.py: 54 models added 2026-11-29), with
hubert and gpt_neox again, after 1bb7c31 (CPU, torch 2.13, transformers 5.24, timm 1.0.31; load
1.1-2.1; the torch plan):

| model | inference | other sizes | padded | generate | step | 3 SGD steps | SquallWarnings | compile s |
|---|---|---|---|---|---|---|---|---|
| gpt_neox | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.8 |
| hubert | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 2.6e-07 | ok 4.0e-09 | - | 0.4 / 0.3 |
| gpt_neo | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.3 / 1.6 |
| stablelm | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.6 |
| starcoder2 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| cohere | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.2 |
| granite | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.4 |
| nemotron | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| persimmon | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.2 |
| qwen2_moe | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 2.5e-07 | ok 3.6e-07 | - | 0.2 / 1.5 |
| olmoe | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.9e-07 | ok 1.1e-07 | - | 0.2 / 0.3 |
| biogpt | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.1 |
| xglm | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.6e-07 | ok 2.6e-08 | - | 0.0 / 0.1 |
| ctrl | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.1 |
| diffllama | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 7.5e-05 | ok 1.1e-07 | - | 0.0 / 0.7 |
| falcon_mamba | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 1.6e-07 | ok 1.6e-07 | - | 0.1 / 0.3 |
| bamba | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 3.6e-09 | ok 0.0e+00 | - | 0.1 / 0.4 |
| lfm2 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.1 |
| bitnet | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.0 / 0.2 |
| glm4 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.4 |
| granitemoe | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 4.1e-07 | ok 1.1e-07 | - | 0.2 / 0.4 |
| mbart | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 2.6 |
| umt5 | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | ok | ok 5.5e-07 | ok 1.2e-07 | - | 0.2 / 1.6 |
| roformer | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 7.0e-07 | ok 1.4e-07 | - | 0.0 / 0.2 |
| megatron_bert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 2.5e-05 | ok 2.1e-06 | - | 0.1 / 0.2 |
| rembert | ok 0.0e+00 | ok 0.0e+00 | ok 0.0e+00 | - | ok 7.5e-07 | ok 5.0e-08 | - | 0.1 / 0.3 |
| wav2vec2 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 4.6e-07 | ok 6.4e-08 | - | 0.1 / 0.2 |
| segformer | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 3.7e-05 | - | 0.1 / 0.0 |
| mobilevitv2 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.5 |
| convnextv2 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 3.2e-08 | ok 1.2e-07 | - | 0.0 / 0.1 |
| timm/mixer_s16_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.6 |
| timm/ghostnet_050 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 2.3e+00 (13 tensors) | ok* 2.2e+00 (413 tensors) | - | 0.6 / 3.7 |
| timm/rexnet_100 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 4.0e+00 (15 tensors) | ok* 4.0e+00 (58 tensors) | - | 0.4 / 1.0 |
| timm/cait_xxs24_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 2.2e-13 | ok 3.5e-12 | - | 0.0 / 0.1 |
| timm/pit_ti_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 6.0e-07 | ok 5.4e-07 | - | 0.1 / 0.3 |
| timm/fastvit_t8 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 3.1e-04 | ok* 2.9e-02 (6 tensors) | - | 0.2 / 2.5 |
| timm/repvit_m1 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 2.8e-02 (3 tensors) | ok* 1.4e-01 (202 tensors) | - | 0.2 / 2.0 |
| timm/edgenext_xx_small | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 3.6e-09 | ok 1.4e-08 | - | 0.1 / 0.3 |
| timm/hiera_tiny_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.2 / 0.7 |
| timm/mambaout_femto | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 6.5e-07 | ok 7.9e-07 | - | 0.1 / 0.3 |
| timm/pvt_v2_b0 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.3 |
| timm/gcvit_xxtiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 1.2e-06 | ok 8.3e-07 | - | 0.3 / 2.8 |
| timm/sequencer2d_s | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | torch.lstm opaque (autograd fallback) | 1.1 / 1.4 |
| timm/volo_d1_224 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 5.1e-07 | ok 1.2e-06 | - | 0.2 / 0.6 |
| timm/visformer_tiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.4 |
| timm/inception_next_tiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.1 / 0.7 |
| timm/convit_tiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 6.0e-04 | ok 1.9e-05 | - | 0.0 / 0.1 |
| timm/res2net50_14w_8s | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.9 / 7.8 |
| timm/coat_lite_tiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 1.8e-06 | ok 8.9e-07 | - | 0.1 / 0.4 |
| timm/davit_tiny | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 1.3e-06 | ok 1.4e-06 | - | 0.2 / 0.9 |
| torchvision/inception_v3 | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.5 / 2.1 |
| torchvision/mobilenet_v3_small | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 1.4e-03 (2 tensors) | ok* 2.0e-01 (67 tensors) | - | 0.2 / 1.0 |
| torchvision/resnext50_32x4d | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.4 / 1.1 |
| torchvision/efficientnet_v2_s | ok 0.0e+00 | ok 0.0e+00 | - | - | ok* 2.0e+00 (30 tensors) | ok* 2.3e+00 (60 tensors) | - | 0.8 / 3.3 |
| torchvision/swin_v2_t | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 1.3e-06 | ok 1.2e-05 | - | 0.4 / 1.1 |
| torchvision/regnet_x_400mf | ok 0.0e+00 | ok 0.0e+00 | - | - | ok 0.0e+00 | ok 0.0e+00 | - | 0.3 / 1.5 |

Every row ok or ok*: no wrong answer. The ok* rows are batch norms' biases and running statistics
whose gradients are float32 noise in eager too (checked against float64, as above). Found and
fixed on the way: wav2vec2's and hubert's feature encoders set `hidden_states.requires_grad =
True` in training, which ran their forwards eagerly around their compiled submodules (hubert's
"requires_grad set (eager split)" above); a computed tensor made to require grad is now modelled
(squall.frontend.grad_roots), and both train as one squall program. Left as it is:
sequencer2d_s's nn.LSTM is `torch.lstm`, which is not in squall's torch language: it runs as an
opaque torch call with no gradient rule, so that program's training is differentiated by
PyTorch's autograd (correct, with a warning).
"""
from __future__ import annotations

import argparse
import copy
import inspect
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from real_models import import_torchvision  # noqa: E402

import squall  # noqa: E402

import_torchvision()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_model_list import MODELS, SweptModel  # noqa: E402

OUTPUT_TOLERANCE = 1e-4
GRADIENT_TOLERANCE = 1e-3


def _without_dropout(module: torch.nn.Module) -> torch.nn.Module:
    """Every dropout and drop-path in `module` set to probability 0 (so train mode is deterministic)."""
    for sub in module.modules():
        for attr in ("p", "drop_prob", "dropout", "dropout_p", "attention_dropout", "drop_rate"):
            value = getattr(sub, attr, None)
            if isinstance(value, float) and ("drop" in type(sub).__name__.lower() or "Depth" in type(sub).__name__ or attr != "p"):
                setattr(sub, attr, 0.0)
    return module


def _resized(inputs: dict[str, Any], batch: int, shorter: int) -> dict[str, Any]:
    """`inputs` at another batch size (rows repeated or dropped), token sequences `shorter` tokens shorter."""
    def resize(t):
        if not isinstance(t, torch.Tensor):
            return t
        t = t.repeat(*(((batch + t.shape[0] - 1) // t.shape[0],) + (1,) * (t.dim() - 1)))[:batch]
        return t[:, : t.shape[1] - shorter].contiguous() if not t.is_floating_point() and t.dim() == 2 else t

    return {k: resize(v) for k, v in inputs.items()}


def _padding_mask(batch: int, length: int) -> torch.Tensor:
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, length // 2 :] = 0
    return mask


def _tensors(out: Any, path: str = "output"):
    """(path, tensor) for every tensor in a model output."""
    if isinstance(out, torch.Tensor):
        yield path, out
    elif isinstance(out, (tuple, list)):
        for i, item in enumerate(out):
            yield from _tensors(item, f"{path}[{i}]")
    elif isinstance(out, dict):
        for k, item in out.items():
            yield from _tensors(item, f"{path}[{k!r}]")
    elif hasattr(out, "__dict__") and not isinstance(out, torch.nn.Module):
        for k, item in vars(out).items():
            yield from _tensors(item, f"{path}.{k}")


def relative_difference(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return float("inf")
    if not expected.is_floating_point():
        return 0.0 if torch.equal(actual, expected) else float("inf")
    a, e = actual.detach().double(), expected.detach().double()
    if not torch.equal(a.isnan(), e.isnan()):
        return float("inf")
    a, e = a.nan_to_num(0.0), e.nan_to_num(0.0)
    return ((a - e).abs().max() / e.abs().max().clamp_min(1e-6)).item() if e.numel() else 0.0


def worst(pairs) -> tuple[float, str]:
    result = (0.0, "")
    for name, a, e in pairs:
        d = relative_difference(a, e)
        if d > result[0]:
            result = (d, name)
    return result


def _training_state(model: torch.nn.Module, loss: torch.Tensor) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The loss, every parameter's gradient and every buffer after a step, by name; and the parameters without a gradient."""
    state = {"loss": loss.detach()}
    missing = []
    for name, p in model.named_parameters():
        if p.grad is None:
            missing.append(name)
        else:
            state[f"{name}.grad"] = p.grad
    state.update(model.named_buffers())
    return state, missing


def _float64_step(built: torch.nn.Module, inputs: dict[str, Any], later: list[dict[str, Any]] = ()) -> dict[str, torch.Tensor]:
    """The training step in float64: the reference that says how far eager's own float32 answer is from the exact one.
    With `later` inputs: the parameters and buffers after SGD steps on them too (`_later_steps`)."""
    model = _without_dropout(copy.deepcopy(built).double().train())

    def double(inputs):
        return {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in inputs.items()}

    return _eager_training(model, double(inputs), [double(i) for i in later])


def _eager_training(model: torch.nn.Module, inputs: dict[str, Any], later: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Eager's training step on `model` (train mode, no dropout), then SGD steps on `later` where given: the state then."""
    loss = _loss(model(**inputs))
    loss.backward()
    if later:
        return _later_steps(model, model, later)
    return _training_state(model, loss)[0]


# how far eager's own float32 answer moves when every weight changes by this many rounding errors (of
# float32): a float32 step's own rounding is such a change, so an error of that size is noise
PERTURBED_EPS = 4
PERTURBED_SEEDS = 2


def _perturbed_steps(built: torch.nn.Module, inputs: dict[str, Any], later: list[dict[str, Any]] = ()) -> list[dict[str, torch.Tensor]]:
    """Eager's float32 step (and SGD steps) on copies of the model whose weights are each changed by up to
    PERTURBED_EPS rounding errors, one copy per seed: how much rounding alone moves each tensor of the answer."""
    states = []
    for seed in range(PERTURBED_SEEDS):
        model = _without_dropout(copy.deepcopy(built).train())
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                if p.is_floating_point():
                    change = 2 * torch.rand(p.shape, generator=generator, dtype=torch.float64) - 1
                    p.copy_(p.double() * (1 + PERTURBED_EPS * torch.finfo(p.dtype).eps * change))
        states.append(_eager_training(model, inputs, later))
    return states


def _later_steps(model: torch.nn.Module, fn: Callable, later: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """After a first backward: an SGD step, then a step (forward, backward, SGD) on each of `later`; the
    parameters and buffers then, by name."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for inputs in later:
        optimizer.step()
        optimizer.zero_grad()
        _loss(fn(**inputs)).backward()
    optimizer.step()
    return {**{name: p.detach() for name, p in model.named_parameters()}, **dict(model.named_buffers())}


def _training_verdict(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], exact: Callable[[], dict[str, torch.Tensor]],
                      perturbed: Callable[[], list[dict[str, torch.Tensor]]]) -> str:
    """ok where squall's step is within tolerance of eager's; where it is not, ok* if squall is as close to the
    float64 step as eager is (within 4 times eager's own float32 error), or as close as eager's float32 answer is
    once the weights change by a few rounding errors (`_perturbed_steps`: where the step is that sensitive,
    rounding alone moves the answer that far), or eager's own error is over 1% of the tensor's largest exact
    value: a gradient that is zero in exact arithmetic (a bias before a batch norm in train mode) is float32
    noise in both, and SGD steps on such noise (a batch norm over 4 values of a 1x1 map) too."""
    def tolerance(name):
        return OUTPUT_TOLERANCE if name == "loss" else GRADIENT_TOLERANCE

    differences = sorted(((relative_difference(actual[k], expected[k]), k) for k in expected), reverse=True)
    difference, where = differences[0]
    over = [(d, k) for d, k in differences if d > tolerance(k)]
    if not over:
        return _verdict(difference, tolerance(where), where)
    try:
        reference = exact()
    except Exception as e:  # noqa: BLE001 - a model that cannot run in float64 is judged against eager alone
        return _verdict(difference, tolerance(where), where) + f" (no float64 reference: {type(e).__name__})"
    moved: list[dict[str, torch.Tensor]] | None = None
    sensitive = 0
    for d, k in over:
        exact_value = reference[k].double()
        squall_error = (actual[k].double() - exact_value).abs().max().item()
        eager_error = (expected[k].double() - exact_value).abs().max().item()
        scale = exact_value.abs().max().item()
        if eager_error > 0.01 * scale:
            continue  # eager's own float32 answer is more than 1% off the exact one: float32 noise, in both
        if squall_error <= max(tolerance(k) * scale, 4 * eager_error):
            continue
        moved = perturbed() if moved is None else moved
        rounding_error = max((state[k].double() - exact_value).abs().max().item() for state in moved)
        if squall_error <= rounding_error:
            sensitive += 1
            continue
        return (f"DIFF {d:.1e} ({k}: squall's error against float64 {squall_error:.1e}, eager's {eager_error:.1e}, "
                f"eager's with its weights changed by {PERTURBED_EPS} rounding errors {rounding_error:.1e})")
    within = f", {sensitive} of them no further off than eager's with its weights changed by {PERTURBED_EPS} rounding errors" if sensitive else ""
    return (f"ok* {difference:.1e} ({len(over)} tensors over tolerance, each as close to float64 as eager's or float32 noise in eager "
            f"too{within}, e.g. {where})")


def _loss(out: Any) -> torch.Tensor:
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    first = next(t for _, t in _tensors(out) if t.is_floating_point())
    return first.square().mean()


@dataclass
class Row:
    name: str
    inference: str = "-"
    resized: str = "-"
    padded: str = "-"
    generate: str = "-"
    steps: str = "-"
    training: str = "-"
    warnings: list[str] = field(default_factory=list)
    compile_s: str = "-"
    plans: list[str] = field(default_factory=list)  # with --fused: each jit's upgrades, as `squall.upgrades` says


# with --fused: every jit compiled with the installed fusion executors and wait=True
JIT_OPTIONS: dict[str, Any] = {}
_jits: list[Any] = []


def _jit(module: Any) -> Any:
    """`squall.jit(module)` as the sweep's mode asks (kept, so that its upgrades can be reported)."""
    jitted = squall.jit(module, **JIT_OPTIONS)
    _jits.append(jitted)
    return jitted


def _plans() -> str:
    """Per jit made since the last report, the statuses of its entries' upgrades (u: upgraded to a fused
    plan, t: kept the torch plan, n: nothing to fuse, f: failed, other: its first letter)."""
    codes = {"upgraded": "u", "kept the torch plan": "t", "nothing to fuse": "n", "failed": "f"}
    report = []
    for jitted in _jits:
        statuses = [codes.get(u.status, u.status[:1]) for u in squall.upgrades(jitted)]
        report.append("".join(statuses) or "-")
    _jits.clear()
    return " ".join(report)


def _caught(fn, warned: list[str]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    for w in caught:
        if issubclass(w.category, squall.SquallWarning):
            text = str(w.message).splitlines()[0][:160]
            if text not in warned:
                warned.append(text)
    return result


class EagerFailed(Exception):
    """Eager itself raised on these inputs: not squall's failure."""


def _eager(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        raise EagerFailed(e) from e


def _error(e: BaseException) -> str:
    if isinstance(e, EagerFailed):
        cause = e.args[0]
        return f"eager fails too ({type(cause).__name__}: {str(cause).splitlines()[0][:80] if str(cause) else ''})"
    return f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:140] if str(e) else ''}"


def _verdict(difference: float, tolerance: float, where: str) -> str:
    flag = "ok" if difference <= tolerance else "DIFF"
    return f"{flag} {difference:.1e}" + (f" ({where})" if difference > tolerance else "")


def sweep_one(model: SweptModel, verbose: bool = False) -> Row:
    row = Row(model.name)
    torch.manual_seed(0)
    try:
        built = model.build()
    except Exception as e:  # noqa: BLE001 - a model this library version cannot build is reported, not swept
        row.inference = row.training = f"build failed: {_error(e)}"
        return row
    inputs = model.inputs()
    compile_times = []

    # inference
    module = copy.deepcopy(built).eval()
    try:
        with torch.no_grad():
            expected = module(**inputs)
            jitted = _jit(module)
            start = time.perf_counter()
            first = _caught(lambda: jitted(**inputs), row.warnings)
            compile_times.append(time.perf_counter() - start)
            second = _caught(lambda: jitted(**inputs), row.warnings)
        pairs = [(p, a, e) for out in (first, second) for (p, a), (_, e) in zip(_tensors(out), _tensors(expected))]
        if len(list(_tensors(first))) != len(list(_tensors(expected))):
            row.inference = "DIFF (another number of output tensors)"
        else:
            difference, where = worst(pairs)
            row.inference = _verdict(difference, OUTPUT_TOLERANCE, where) if pairs else "ok (no tensors)"
    except Exception as e:  # noqa: BLE001
        row.inference = _error(e)
        if verbose:
            traceback.print_exc()

    # the same jitted model called at two other sizes (the second makes the changed dimensions symbolic)
    try:
        differences = []
        with torch.no_grad():
            for batch, shorter in ((3, 2), (1, 3), (4, 1)):
                other = _resized(inputs, batch, shorter)
                expected = _eager(lambda: module(**other))
                actual = _caught(lambda: jitted(**other), row.warnings)
                pairs = [(f"{batch}/-{shorter}: {p}", a, e) for (p, a), (_, e) in zip(_tensors(actual), _tensors(expected))]
                if len(pairs) != len(list(_tensors(expected))):
                    raise AssertionError(f"{len(pairs)} output tensors where eager has {len(list(_tensors(expected)))}")
                differences.append(worst(pairs))
        difference, where = max(differences)
        row.resized = _verdict(difference, OUTPUT_TOLERANCE, where)
    except Exception as e:  # noqa: BLE001
        row.resized = _error(e)
        if verbose:
            traceback.print_exc()

    # a padded batch: an attention mask whose last row ends in padding, for models that take one
    if "attention_mask" in inspect.signature(module.forward).parameters and "input_ids" in inputs and "attention_mask" not in inputs:
        try:
            padded = {**inputs, "attention_mask": _padding_mask(*inputs["input_ids"].shape)}
            with torch.no_grad():
                expected = _eager(lambda: module(**padded))
                actual = _caught(lambda: _jit(module)(**padded), row.warnings)
            difference, where = worst([(p, a, e) for (p, a), (_, e) in zip(_tensors(actual), _tensors(expected))])
            row.padded = _verdict(difference, OUTPUT_TOLERANCE, where)
        except Exception as e:  # noqa: BLE001
            row.padded = _error(e)
            if verbose:
                traceback.print_exc()

    # generate (greedy, 4 new tokens) on the jitted model, the prompt's first row left-padded, against eager's tokens
    if callable(getattr(module, "can_generate", None)) and module.can_generate():
        try:
            prompt = {k: v for k, v in inputs.items() if k != "labels"}
            if "input_ids" in prompt:
                mask = torch.ones_like(prompt["input_ids"])
                mask[0, :2] = 0
                prompt["attention_mask"] = mask
            options = dict(max_new_tokens=4, do_sample=False, pad_token_id=1)
            with torch.no_grad():
                expected = _eager(lambda: module.generate(**prompt, **options))
                actual = _caught(lambda: _jit(module).generate(**prompt, **options), row.warnings)
            row.generate = "ok" if torch.equal(actual, expected) else f"DIFF ({(actual != expected).sum().item()} tokens differ)" if actual.shape == expected.shape else "DIFF (lengths)"
        except Exception as e:  # noqa: BLE001
            row.generate = _error(e)
            if verbose:
                traceback.print_exc()

    row.plans.append(_plans())

    # training step
    eager_model = _without_dropout(copy.deepcopy(built).train())
    squall_model = _without_dropout(copy.deepcopy(built).train())
    try:
        eager_loss = _loss(eager_model(**inputs))
        eager_loss.backward()
    except Exception as e:  # noqa: BLE001
        row.training = f"eager fails: {_error(e)}"
        row.compile_s = " / ".join(f"{t:.1f}" for t in compile_times)
        row.plans.append(_plans())
        return row
    try:
        jitted = _jit(squall_model)

        def step():
            loss = _loss(jitted(**inputs))
            loss.backward()
            return loss

        start = time.perf_counter()
        loss = _caught(step, row.warnings)
        compile_times.append(time.perf_counter() - start)
        compared, missing = _training_state(squall_model, loss)
        expected, _ = _training_state(eager_model, eager_loss)
        if missing != _training_state(eager_model, eager_loss)[1]:
            row.training = f"DIFF (gradients missing or extra: {sorted(set(missing) ^ set(_training_state(eager_model, eager_loss)[1]))[:3]})"
        else:
            row.training = _training_verdict(compared, expected, lambda: _float64_step(built, inputs), lambda: _perturbed_steps(built, inputs))
    except Exception as e:  # noqa: BLE001
        row.training = _error(e)
        if verbose:
            traceback.print_exc()
    if row.training.startswith("ERROR"):
        row.compile_s = " / ".join(f"{t:.1f}" for t in compile_times)
        row.plans.append(_plans())
        return row
    # two more steps with SGD between, at other sizes (the second makes them symbolic), against eager's
    try:
        later = [_resized(inputs, 3, 2), _resized(inputs, 4, 1)]
        expected = _eager(lambda: _later_steps(eager_model, eager_model, later))
        actual = _caught(lambda: _later_steps(squall_model, jitted, later), row.warnings)
        row.steps = _training_verdict(actual, expected, lambda: _float64_step(built, inputs, later),
                                      lambda: _perturbed_steps(built, inputs, later))
    except Exception as e:  # noqa: BLE001
        row.steps = _error(e)
        if verbose:
            traceback.print_exc()
    row.compile_s = " / ".join(f"{t:.1f}" for t in compile_times)
    row.plans.append(_plans())
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="substrings of model names (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="print the traceback of every exception")
    parser.add_argument("--fused", action="store_true",
                        help="compile with the installed fusion executors and wait=True: the fused plans the upgrades keep are checked")
    args = parser.parse_args(argv)
    if args.fused:
        JIT_OPTIONS.update(executors=["inductor", "torch"], wait=True)
    models = [m for m in MODELS if not args.names or any(n in m.name for n in args.names)]
    if args.list:
        print("\n".join(m.name for m in models))
        return
    print(f"# load average before: {os.getloadavg()}", flush=True)
    fused = " | upgrades (inference; training)" if args.fused else ""
    print(f"| model | inference | other sizes | padded | generate | training step | 3 SGD steps | SquallWarnings | compile s (inference / training){fused} |")
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * bool(fused), flush=True)
    for model in models:
        row = sweep_one(model, args.verbose)
        print(f"| {row.name} | {row.inference} | {row.resized} | {row.padded} | {row.generate} | {row.training} | {row.steps} | {'; '.join(row.warnings) or '-'} | {row.compile_s} |"
              + (f" {'; '.join(row.plans)} |" if args.fused else ""), flush=True)
    print(f"# load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
