"""Real models for the suite and bench/models.py: timm, torchvision and transformers models built
from small configs with random weights (nothing is downloaded), and the checks that compare them
with eager."""
from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable
from typing import Any

import torch
from torch.testing import assert_close

__all__ = ["import_torchvision", "tiny_encoder_decoder", "TIMM_MODELS", "SMALL_IMAGE_CNN", "TORCHVISION_MODELS", "TRANSFORMERS_MODELS", "SEGFORMER", "RealModel", "assert_same_output"]

_torchvision_ops: torch.library.Library | None = None


def import_torchvision() -> None:
    """Make torchvision importable on the CPU build of torch, whatever build of it pip chose.

    The registry's torchvision wheels are built against CUDA torch: with CPU torch their C++
    ops do not load, and torchvision 0.28 then fails at import, registering a fake kernel for
    `torchvision::nms`, an op that was never defined. Defining the two ops it registers fakes
    for unconditionally lets it import (timm and transformers import it); its models and
    transforms work, and calling those two detection ops raises torch's "no kernel" error.
    """
    global _torchvision_ops
    spec = importlib.util.find_spec("torchvision")
    if spec is None or _torchvision_ops is not None or not spec.submodule_search_locations:
        return
    try:
        torch.ops.load_library(os.path.join(spec.submodule_search_locations[0], "_C.so"))
    except OSError:
        _torchvision_ops = torch.library.Library("torchvision", "DEF")
        _torchvision_ops.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _torchvision_ops.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


@dataclasses.dataclass
class RealModel:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], dict[str, Any]]  # keyword arguments of one call
    tolerance: float = 1e-4


def tiny_encoder_decoder(name: str) -> torch.nn.Module:
    """A tiny T5 (`name` "t5") or BART ("bart") for conditional generation, random weights
    (seeded), in eval mode: what tests/test_dynamic_factories.py and bench/encoder_decoder.py generate with."""
    import_torchvision()
    import transformers

    torch.manual_seed(0)
    if name == "t5":
        config = transformers.T5Config(vocab_size=97, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0)
        return transformers.T5ForConditionalGeneration(config).eval()
    config = transformers.BartConfig(
        vocab_size=97, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2,
    )  # fmt: skip
    return transformers.BartForConditionalGeneration(config).eval()


def _timm(name: str, size: int = 64, **kwargs) -> RealModel:
    def build():
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, **kwargs).eval()

    return RealModel(f"timm/{name}", build, lambda: {"x": torch.randn(2, 3, size, size)})


# timm's test_* models are its own tiny variants of each family, made for tests
TIMM_MODELS = [
    _timm("test_resnet"),
    _timm("test_efficientnet"),
    _timm("mobilenetv3_small_050"),
    _timm("test_convnext"),
    _timm("test_vit", img_size=64),
    _timm("test_byobnet"),
    _timm("test_nfnet"),
    _timm("test_coatnet", img_size=64),
    # attention in windows (swin), with a distillation token (deit), with relative position bias (beit)
    _timm("swin_tiny_patch4_window7_224", embed_dim=16, depths=(1, 1), num_heads=(1, 2), img_size=64, window_size=4),
    _timm("deit_tiny_distilled_patch16_224", embed_dim=32, depth=2, num_heads=2, img_size=64),
    _timm("beit_base_patch16_224", embed_dim=32, depth=2, num_heads=2, img_size=64),
]

# at 32x32 its last stage ends on a 1x1 map, where global average pooling is the identity
SMALL_IMAGE_CNN = _timm("regnetx_002", size=32)


def _torchvision(name: str, size: int = 32) -> RealModel:
    def build():
        import_torchvision()
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=10).eval()

    return RealModel(f"torchvision/{name}", build, lambda: {"x": torch.randn(1, 3, size, size)})


TORCHVISION_MODELS = [
    # every dense layer appends its output to the list of features it concatenates (32 pixels:
    # the smallest input its five halvings leave a pixel of)
    _torchvision("densenet121"),
]


V = 97  # vocabulary size


def _ids(*shape):
    return lambda: {"input_ids": torch.randint(0, V, shape)}


def _decoder(config_name: str, model_name: str, **extra) -> Callable[[], torch.nn.Module]:
    def build():
        import transformers

        config = getattr(transformers, config_name)(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, **extra,
        )  # fmt: skip
        return getattr(transformers, model_name)(config).eval()

    return build


def _built(config_name: str, model_name: str, **config) -> Callable[[], torch.nn.Module]:
    def build():
        import transformers

        return getattr(transformers, model_name)(getattr(transformers, config_name)(**config)).eval()

    return build


_TEXT = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32)

def _padded(batch: int, length: int) -> torch.Tensor:
    """An attention mask whose last row is padded at its end (1: a token, 0: padding)."""
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, length // 2 :] = 0
    return mask


_T5 = dict(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0)
_CLIP = dict(
    projection_dim=16,
    text_config={**_TEXT, "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2},
    vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8),
)

TRANSFORMERS_MODELS = [
    RealModel("gpt2", _built("GPT2Config", "GPT2LMHeadModel", vocab_size=V, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0), _ids(2, 8)),
    RealModel("llama", _decoder("LlamaConfig", "LlamaForCausalLM"), _ids(2, 8)),
    RealModel("mistral", _decoder("MistralConfig", "MistralForCausalLM"), _ids(2, 8)),
    RealModel("qwen2", _decoder("Qwen2Config", "Qwen2ForCausalLM"), _ids(2, 8)),
    RealModel("mixtral", _decoder("MixtralConfig", "MixtralForCausalLM", num_local_experts=4, num_experts_per_tok=2), _ids(2, 8)),
    RealModel("bert", _built("BertConfig", "BertModel", **_TEXT), _ids(2, 8)),
    RealModel(
        "t5",
        _built("T5Config", "T5ForConditionalGeneration", **_T5),
        lambda: {"input_ids": torch.randint(0, V, (2, 8)), "decoder_input_ids": torch.randint(0, V, (2, 5))},
    ),
    # the full encoder-decoder as its documentation trains it: a padded source, labels (the loss)
    RealModel(
        "t5/padded",
        _built("T5Config", "T5ForConditionalGeneration", **_T5),
        lambda: {"input_ids": torch.randint(1, V, (2, 8)), "attention_mask": _padded(2, 8), "labels": torch.randint(1, V, (2, 5))},
    ),
    RealModel("clip", _built("CLIPConfig", "CLIPModel", **_CLIP), lambda: {"input_ids": torch.randint(3, V, (2, 8)), "pixel_values": torch.randn(2, 3, 32, 32)}),
    RealModel(
        "clip/padded",
        _built("CLIPConfig", "CLIPModel", **_CLIP),
        lambda: {"input_ids": torch.randint(3, V, (2, 8)), "attention_mask": _padded(2, 8), "pixel_values": torch.randn(2, 3, 32, 32)},
    ),
    # its GeLU is a torch.autograd.Function (traced as ops here; run whole, with its backward, under gradients)
    RealModel("bloom", _built("BloomConfig", "BloomForCausalLM", vocab_size=V, hidden_size=32, n_layer=2, n_head=4), _ids(2, 8)),
    # a state-space model: its cache's convolution and SSM states are written in place with copy_
    RealModel("mamba", _built("MambaConfig", "MambaForCausalLM", vocab_size=V, hidden_size=32, num_hidden_layers=2, state_size=4), _ids(2, 8)),
    # speech: a convolutional feature encoder, and a positional convolution under the weight_norm parametrization
    RealModel(
        "wav2vec2",
        _built(
            "Wav2Vec2Config", "Wav2Vec2ForCTC", vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
        ),  # fmt: skip
        lambda: {"input_values": torch.randn(2, 400)},
    ),
    # its pooling calls torch.cat(..., axis=...): numpy's name, which torch's argument parser takes for dim
    RealModel(
        "funnel",
        _built("FunnelConfig", "FunnelModel", vocab_size=V, d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1),
        _ids(2, 8),
    ),
    RealModel(
        "clip_vision",
        _built("CLIPVisionConfig", "CLIPVisionModel", **_CLIP["vision_config"]),
        lambda: {"pixel_values": torch.randn(2, 3, 32, 32)},
    ),
]


# transformers installs forward hooks on its submodules on the first call, to collect the hidden
# states its decode head reads (squall traces them with the forward)
SEGFORMER = RealModel(
    "segformer",
    _built(
        "SegformerConfig", "SegformerForSemanticSegmentation", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
        hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
        decoder_hidden_size=16, num_labels=3,
    ),  # fmt: skip
    lambda: {"pixel_values": torch.randn(2, 3, 32, 32)},
)

_ATOMS = (type(None), bool, int, float, str, torch.dtype, torch.device, type)


def assert_same_output(actual: Any, expected: Any, path: str = "output", **tolerances) -> None:
    """`actual` is what eager returned: the same types all the way down, equal values, tensors close."""
    assert type(actual) is type(expected), f"{path}: {type(actual).__qualname__} where eager returns {type(expected).__qualname__}"
    if isinstance(expected, torch.Tensor):
        assert_close(actual, expected, msg=lambda m: f"{path}: {m}", **tolerances)
        return
    if isinstance(expected, _ATOMS):
        assert actual == expected, f"{path}: {actual!r} where eager returns {expected!r}"
        return
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: {len(actual)} items where eager returns {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_output(a, e, f"{path}[{i}]", **tolerances)
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} where eager returns {list(expected)}"
        for k in expected:
            assert_same_output(actual[k], expected[k], f"{path}[{k!r}]", **tolerances)
    if hasattr(expected, "__dict__") and not isinstance(expected, torch.nn.Module):
        assert vars(actual).keys() == vars(expected).keys(), f"{path}: attributes {sorted(vars(actual))} where eager has {sorted(vars(expected))}"
        for k in vars(expected):
            assert_same_output(vars(actual)[k], vars(expected)[k], f"{path}.{k}", **tolerances)
