"""Real models from timm, torchvision and transformers (small configs, random weights, no downloads)
against eager: outputs with their types and fields, no opaque fallback, gradients for a few.

Most transformers models are called without an attention mask here; tests/test_speculation.py
calls 13 of them with padding masks. The full CLIP and T5 encoder-decoder are called both ways,
and a LLaMA decoder generates with its KV cache."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

import squall
from real_models import SEGFORMER, SMALL_IMAGE_CNN, TIMM_MODELS, TORCHVISION_MODELS, TRANSFORMERS_MODELS, RealModel, assert_same_output, import_torchvision
from squall.frontend.speculation import guards_of

import_torchvision()
pytest.importorskip("timm", reason="timm is a test extra: pip install -e '.[test]'")
pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e '.[test]'")


def _params(models):
    return [pytest.param(m, id=m.name) for m in models]


def _no_opaque_calls(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    opaque = sorted({str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning)})
    assert not opaque, "\n".join(opaque)
    return out


@pytest.mark.parametrize("model", _params(TIMM_MODELS + TORCHVISION_MODELS + TRANSFORMERS_MODELS))
def test_real_model_matches_eager(model: RealModel):
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    with torch.no_grad():
        expected = module(**inputs)
        jitted = squall.jit(module)
        first = _no_opaque_calls(jitted, **inputs)
        second = jitted(**inputs)
    tolerances = dict(atol=model.tolerance, rtol=model.tolerance)
    assert_same_output(first, expected, **tolerances)
    assert_same_output(second, expected, **tolerances)
    if not isinstance(expected, torch.Tensor):
        assert first is not second, "every call returns a new output object, as eager does"


_WITH_GRADIENTS = [m for m in TIMM_MODELS + TRANSFORMERS_MODELS if m.name in ("timm/test_resnet", "timm/test_vit", "gpt2", "llama", "mixtral", "bloom")]
# issue 26: ending on a 1x1 map, 41 of its 134 parameter gradients were twice eager's
_WITH_GRADIENTS.append(SMALL_IMAGE_CNN)


@pytest.mark.parametrize("model", _params(_WITH_GRADIENTS))
def test_real_model_gradients_match_eager(model: RealModel):
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    params = [p for p in module.parameters() if p.requires_grad]

    def loss(out):
        logits = out if isinstance(out, torch.Tensor) else out["logits"]
        return logits.square().mean()

    expected = torch.autograd.grad(loss(module(**inputs)), params, allow_unused=True)
    actual = torch.autograd.grad(loss(squall.jit(module)(**inputs)), params, allow_unused=True)
    for p, a, e in zip(params, actual, expected):
        if e is None:
            assert a is None or not a.any()
        else:
            torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("eager_first", [True, False], ids=["eager_first", "compiled_first"])
def test_segformer_compiles_whole_with_its_output_capture_hooks(eager_first):
    """transformers installs forward hooks on its stages on the first call, to collect the hidden
    states its decode head reads: the hooks are traced with the forward, so it compiles whole. A
    first call made compiled registers them eagerly (once, not also from the trace)."""
    torch.manual_seed(0)
    module, inputs = SEGFORMER.build(), SEGFORMER.inputs()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        expected = module(**inputs) if eager_first else None
        jitted = squall.jit(module)
        outs = [jitted(**inputs) for _ in range(3)]
        expected = module(**inputs) if expected is None else expected  # after squall's calls: hooks installed once
    for out in outs:
        assert_same_output(out, expected, atol=SEGFORMER.tolerance, rtol=SEGFORMER.tolerance)
    info = jitted.cache_info()
    # one compilation; a compiled first call ran eagerly, registering the hooks
    assert info.split is None and info.size == 1 and info.misses == (1 if eager_first else 2)


_PADDED = [m for m in TRANSFORMERS_MODELS if m.name.endswith("/padded")]


@pytest.mark.parametrize("model", _params(_PADDED))
def test_padded_encoder_models_compile_to_one_guarded_trace(model: RealModel):
    """A padding mask is read while tracing (transformers checks it for padding): guarded, and a
    mask with other padding needs no second compilation."""
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    jitted = squall.jit(module)
    other = {**inputs, "attention_mask": inputs["attention_mask"].flip(0)}  # the other row padded
    with torch.no_grad():
        for call in (inputs, other):
            assert_same_output(_no_opaque_calls(jitted, **call), module(**call), atol=model.tolerance, rtol=model.tolerance)
    assert guards_of(squall.last_traces(jitted))
    info = jitted._jitted.cache_info()
    assert (info.misses, info.guard_failures) == (1, 0)


def test_t5_training_step_with_labels_matches_eager_gradients():
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "t5/padded"]
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    inputs["labels"][1, 3:] = -100  # positions the loss ignores, as a padded target has them
    params = list(module.parameters())
    expected = module(**inputs)
    expected.loss.backward()
    expected_grads = [p.grad.clone() for p in params]
    module.zero_grad(set_to_none=True)
    actual = squall.jit(module)(**inputs)
    actual.loss.backward()
    assert_same_output(actual.loss, expected.loss, atol=1e-5, rtol=1e-5)
    for (name, p), e in zip(module.named_parameters(), expected_grads):
        torch.testing.assert_close(p.grad, e, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def test_llama_decodes_with_its_kv_cache_as_generate_calls_it():
    """A prompt with use_cache=True, then one token at a time with the returned DynamicCache and
    a longer mask: logits and the cache's tensors as eager's at every step."""
    import transformers

    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "llama"]
    torch.manual_seed(0)
    module = model.build()
    prompt = torch.randint(0, 97, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, :2] = 0  # left padding, as batched generation pads

    def decode(fn, steps=3):
        outputs, ids, m = [], prompt, mask
        out = fn(input_ids=ids, attention_mask=m, use_cache=True)
        for _ in range(steps):
            outputs.append(out)
            ids = out.logits[:, -1:].argmax(-1)
            m = torch.cat([m, torch.ones(2, 1, dtype=torch.long)], dim=1)
            out = fn(input_ids=ids, attention_mask=m, past_key_values=out.past_key_values, use_cache=True)
        return [*outputs, out]

    jitted = squall.jit(module)
    with torch.no_grad():
        expected = decode(module)
        actual = _no_opaque_calls(decode, jitted)
    for step, (a, e) in enumerate(zip(actual, expected)):
        assert type(a.past_key_values) is transformers.DynamicCache
        assert_same_output(a, e, f"step {step}", atol=1e-5, rtol=1e-5)
    assert expected[-1].past_key_values.get_seq_length() == actual[-1].past_key_values.get_seq_length() == 9
    # eager updates the cache passed in and returns it: so does the compiled model, at every step
    assert all(e.past_key_values is expected[0].past_key_values for e in expected)
    assert all(a.past_key_values is actual[0].past_key_values for a in actual)


def test_generate_on_the_compiled_model_runs_its_compiled_forward_and_matches_eager():
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "llama"]
    torch.manual_seed(0)
    module = model.build()
    prompt = torch.randint(0, 97, (2, 5))
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, :2] = 0
    jitted = squall.jit(module)
    options = dict(attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
    expected = module.generate(prompt, **options)
    actual = _no_opaque_calls(jitted.generate, prompt, **options)
    assert torch.equal(actual, expected)
    info = jitted._jitted.cache_info()
    # the prompt, then the first step with the KV cache's sizes symbolic: later steps run that
    # program, whose mask length became symbolic at the first step (it differs from the prompt's)
    assert (info.misses, info.hits) == (2, 2)
    assert type(module) is type(model.build()) and "_squall_compiled" not in vars(module)


@pytest.mark.parametrize("name", ["timm/test_resnet"])
def test_timm_training_step_matches_eager(name):
    """model.train(), cross-entropy on labels, loss.backward(): gradients, and batch norm's running
    statistics, as eager's."""
    (model,) = [m for m in TIMM_MODELS if m.name == name]
    torch.manual_seed(0)
    eager, inputs = model.build().train(), model.inputs()
    compiled_model = model.build().train()
    compiled_model.load_state_dict(eager.state_dict())
    labels = torch.randint(0, 10, (inputs["x"].shape[0],))
    jitted = squall.jit(compiled_model)
    for module, fn in ((eager, eager), (compiled_model, jitted)):
        torch.nn.functional.cross_entropy(fn(**inputs), labels).backward()
    for (name_, a), e in zip(compiled_model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a.grad, e.grad, atol=1e-4, rtol=1e-3, msg=lambda m: f"{name_}.grad: {m}")
    for (name_, a), e in zip(compiled_model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(a, e, msg=lambda m: f"{name_}: {m}")


def test_wav2vec2_training_step_compiles_whole_and_matches_eager():
    """In training, wav2vec2's feature encoder makes its input's view require grad
    (`hidden_states.requires_grad = True`): squall compiles and differentiates the whole model
    (it ran the model's forwards eagerly around their compiled submodules before, 2026-11-29)."""
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "wav2vec2"]
    torch.manual_seed(0)
    eager, inputs = model.build().train(), model.inputs()
    for module in eager.modules():  # its dropouts and layer drop off: both runs then compute the same
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    eager.config.layerdrop = eager.config.mask_time_prob = 0.0
    compiled_model = copy.deepcopy(eager)
    jitted = squall.jit(compiled_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        loss = jitted(**inputs).logits.square().mean()
    loss.backward()
    expected = eager(**inputs).logits.square().mean()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    assert squall.last_traces(jitted).backward is not None  # squall's own gradients, not PyTorch's autograd
    for (name, a), e in zip(compiled_model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a.grad, e.grad, atol=1e-4, rtol=1e-3, msg=lambda m: f"{name}.grad: {m}")


def test_peft_lora_fine_tuning_step_compiles_whole_and_matches_eager():
    """PEFT's LoRA on the tiny Llama, set up as its docs fine-tune (`enable_input_require_grads`,
    whose hook makes the embeddings' output require grad): one squall program differentiated by
    squall, the adapters' gradients as eager's (the whole forward ran eagerly before, 2026-11-29)."""
    peft = pytest.importorskip("peft", reason="peft is a test extra: pip install -e '.[test]'")
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "llama"]
    torch.manual_seed(0)
    eager = peft.get_peft_model(model.build().train(), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    eager.enable_input_require_grads()
    with torch.no_grad():  # LoRA's B starts at zero, which would leave A without a gradient
        for name, p in eager.named_parameters():
            if "lora_B" in name:
                p.normal_()
    compiled_model = copy.deepcopy(eager)
    inputs = model.inputs()
    jitted = squall.jit(compiled_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        loss = jitted(**inputs, labels=inputs["input_ids"]).loss
    loss.backward()
    expected = eager(**inputs, labels=inputs["input_ids"]).loss
    expected.backward()
    torch.testing.assert_close(loss, expected)
    assert squall.last_traces(jitted).backward is not None
    trained = [(name, p.grad, e.grad) for (name, p), e in zip(compiled_model.named_parameters(), eager.parameters()) if p.requires_grad]
    assert len(trained) == 8  # A and B of q_proj and v_proj in both layers
    for name, a, e in trained:
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}.grad: {m}")


# mistral: its cache is sliding-window layers, each counting the tokens it saw in an int (a size symbol)
@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2", "mistral"])
def test_generate_compiles_prefill_and_decode_once_and_later_generates_reuse_them(name):
    """The KV cache's tensors are symbolic from the first decoding step, so a generate compiles
    twice (prompt, step) however many tokens; the next generate makes a new DynamicCache, keyed
    by its layout, not its identity, and compiles nothing; the prompt's length was symbolic from
    the start (the call passes a cache), so new prompt lengths compile nothing either."""
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == name]
    torch.manual_seed(0)
    module = model.build()
    jitted = squall.jit(module)
    compiles = []
    for length in (6, 6, 9, 13):
        prompt = torch.randint(1, 97, (1, length))
        options = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
        before = jitted.cache_info().misses
        with torch.no_grad():
            expected = module.generate(prompt, **options)
            actual = jitted.generate(prompt, **options)
        assert torch.equal(actual, expected), f"prompt of {length}"
        compiles.append(jitted.cache_info().misses - before)
    assert compiles == [2, 0, 0, 0]


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_generate_from_a_one_token_prompt_compiles_prefill_and_decode_once(name):
    """A prompt of one token: the first decoding step's KV cache is one token long. Its length is
    a symbol traced at 1 (squall.symbolic.ShapeEnv.traced_at_one), not a constant, so that step's
    program runs every later step: two compiles (prefill, step), none in the next generate."""
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == name]
    torch.manual_seed(0)
    module = model.build()
    assert _compiles_per_generate(module, prompt_length=1, max_new_tokens=8) == [2, 0]


def test_a_decoding_loop_stops_compiling_once_its_lengths_are_symbolic():
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "llama"]
    torch.manual_seed(0)
    module = model.build()
    jitted = squall.jit(module)
    ids = torch.randint(1, 97, (1, 5))
    with torch.no_grad():
        expected, actual = module(input_ids=ids, use_cache=True), jitted(input_ids=ids, use_cache=True)
        for step in range(6):
            token = expected.logits[:, -1:].argmax(-1)
            expected = module(input_ids=token, past_key_values=expected.past_key_values, use_cache=True)
            actual = jitted(input_ids=token, past_key_values=actual.past_key_values, use_cache=True)
            assert_same_output(actual.logits, expected.logits, f"step {step}", atol=1e-5, rtol=1e-5)
    assert jitted.cache_info().misses == 2  # the prompt, the first step (the cache's sizes symbolic from it)
    assert "s0" in squall.last_traces(jitted).source  # the cache's length, read from its keys


def test_an_encoder_over_a_stream_of_lengths_compiles_two_or_three_times():
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "bert"]
    torch.manual_seed(0)
    module = model.build()
    jitted = squall.jit(module)
    with torch.no_grad():
        for batch, length in [(4, 9), (4, 13), (4, 30), (4, 17), (8, 11), (8, 25), (2, 7), (1, 12), (1, 20), (8, 9)]:
            ids = torch.randint(1, 97, (batch, length))
            assert_same_output(jitted(input_ids=ids), module(input_ids=ids), f"{batch}x{length}", atol=1e-5, rtol=1e-5)
    # static; then the length symbolic, and the batch with it; a batch of 1 runs the symbolic
    # entry's program (its trace never relies on the batch being 2 or more): no compile, no rental
    info = jitted.cache_info()
    assert (info.misses, info.eager_before_compile) == (2, 0), info


def test_generate_with_hf_static_cache_matches_eager_and_reuses_its_programs():
    """transformers' static-cache recipe (`cache_implementation="static"`, a StaticCache made per
    generate, written in place): tokens as eager's, prefill and decode compiled once, nothing
    compiled by a second generate with a new cache of the same layout. Each decoding step writes
    its keys and values into the cache in place, as eager does, not the whole cache into a copy
    and back (squall.compiler.passes.write_backs_folded)."""
    (model,) = [m for m in TRANSFORMERS_MODELS if m.name == "llama"]
    torch.manual_seed(0)
    module = model.build()
    jitted = squall.jit(module, executors=["torch"])
    assert _compiles_per_generate(module, prompt_length=6, max_new_tokens=6, jitted=jitted, cache_implementation="static") == [2, 0]
    decoding_step = squall.last_traces(jitted).source
    assert decoding_step.count("index_copy_(") == 4 and "torch_copy_(" not in decoding_step, decoding_step


def _compiles_per_generate(module: torch.nn.Module, prompt_length: int, max_new_tokens: int, jitted=None, **options) -> list[int]:
    """Two greedy `generate`s of `jitted` (by default a fresh squall.jit of `module`) from random
    prompts of `prompt_length`: each one's tokens asserted equal to eager's, and how many compiles each took."""
    jitted = squall.jit(module) if jitted is None else jitted
    compiles = []
    for _ in range(2):
        prompt = torch.randint(1, 97, (1, prompt_length))
        options = dict(options, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
                       do_sample=False, pad_token_id=0)
        before = jitted.cache_info().misses
        with torch.no_grad():
            expected = module.generate(prompt, **options)
            actual = _no_opaque_calls(jitted.generate, prompt, **options)
        assert torch.equal(actual, expected)
        compiles.append(jitted.cache_info().misses - before)
    return compiles


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_vision_transformer_over_batches_and_image_sizes_matches_eager_without_running_eagerly(dynamic):
    """timm's ViT with dynamic_img_size: its class token expanded to the batch (a parameter's
    method given a symbolic size), its position embedding resampled to each new grid (bicubic,
    antialiased: an opaque torch call); no call runs the forward eagerly."""
    import timm

    torch.manual_seed(0)
    module = timm.create_model("test_vit", pretrained=False, num_classes=10, img_size=64, dynamic_img_size=True).eval()
    jitted = squall.jit(module, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        warnings.filterwarnings("ignore", "squall: torch.nn.functional.interpolate .* opaque torch call")
        with torch.no_grad():
            for batch, size in [(2, 64), (3, 64), (5, 64), (2, 48), (3, 48), (2, 80)]:
                x = torch.randn(batch, 3, size, size)
                assert_same_output(jitted(x), module(x), f"{batch}x{size}", atol=1e-4, rtol=1e-4)
    assert jitted.cache_info().split is None
