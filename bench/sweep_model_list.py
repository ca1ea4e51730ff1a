"""The models bench/sweep_models.py sweeps: each built from its library (transformers, timm, torchvision)
with a tiny config and random weights (nothing is downloaded), every dropout probability in its config 0,
and the inputs of one call."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["SweptModel", "MODELS", "V"]

V = 97  # vocabulary size


@dataclass
class SweptModel:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], dict[str, Any]]


def _no_dropout_config(config):
    for key, value in list(vars(config).items()):
        if ("dropout" in key or key.endswith("_pdrop") or "drop_path" in key or "layerdrop" in key) and isinstance(value, float):
            setattr(config, key, 0.0)
    for sub in ("text_config", "vision_config", "encoder", "decoder"):
        if hasattr(getattr(config, sub, None), "to_dict"):
            _no_dropout_config(getattr(config, sub))
    return config


def _hf(config_name: str, model_name: str, **config) -> Callable[[], torch.nn.Module]:
    def build():
        import transformers

        return getattr(transformers, model_name)(_no_dropout_config(getattr(transformers, config_name)(**config)))

    return build


def _ids(*shape, labels: bool = False, **extra):
    def inputs():
        ids = torch.randint(3, V, shape)
        out = {"input_ids": ids, **{k: v() for k, v in extra.items()}}
        if labels:
            out["labels"] = ids.clone()
        return out

    return inputs


def _image(size: int, batch: int = 2, key: str = "x"):
    return lambda: {key: torch.randn(batch, 3, size, size)}


_DECODER = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
_ENCODER = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64)
_SEQ2SEQ = dict(
    vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
)  # fmt: skip
_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8, num_labels=10)


def _seq2seq(*shape):
    return lambda: {"input_ids": torch.randint(3, V, shape), "labels": torch.randint(3, V, (shape[0], 5))}


TRANSFORMERS = [
    SweptModel("gemma", _hf("GemmaConfig", "GemmaForCausalLM", head_dim=8, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("gemma2", _hf("Gemma2Config", "Gemma2ForCausalLM", head_dim=8, sliding_window=4, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("gemma3", _hf("Gemma3TextConfig", "Gemma3ForCausalLM", head_dim=8, sliding_window=4, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("phi", _hf("PhiConfig", "PhiForCausalLM", **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("phi3", _hf("Phi3Config", "Phi3ForCausalLM", pad_token_id=0, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("qwen3", _hf("Qwen3Config", "Qwen3ForCausalLM", head_dim=8, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel(
        "qwen3_moe",
        _hf("Qwen3MoeConfig", "Qwen3MoeForCausalLM", head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, **_DECODER),
        _ids(2, 8, labels=True),
    ),
    SweptModel("olmo2", _hf("Olmo2Config", "Olmo2ForCausalLM", **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("falcon", _hf("FalconConfig", "FalconForCausalLM", vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4), _ids(2, 8, labels=True)),
    SweptModel("gptj", _hf("GPTJConfig", "GPTJForCausalLM", vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64), _ids(2, 8, labels=True)),
    SweptModel("gpt_neox", _hf("GPTNeoXConfig", "GPTNeoXForCausalLM", **{**_DECODER, "num_key_value_heads": 4}), _ids(2, 8, labels=True)),
    SweptModel(
        "opt",
        _hf("OPTConfig", "OPTForCausalLM", vocab_size=V, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=64),
        _ids(2, 8, labels=True),
    ),
    SweptModel("bart", _hf("BartConfig", "BartForConditionalGeneration", **_SEQ2SEQ), _seq2seq(2, 8)),
    SweptModel("pegasus", _hf("PegasusConfig", "PegasusForConditionalGeneration", **_SEQ2SEQ), _seq2seq(2, 8)),
    SweptModel(
        "whisper",
        _hf(
            "WhisperConfig", "WhisperForConditionalGeneration", vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
            max_source_positions=16, max_target_positions=32, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
            suppress_tokens=None, begin_suppress_tokens=None,
        ),  # fmt: skip
        lambda: {"input_features": torch.randn(2, 8, 32), "labels": torch.randint(3, V, (2, 5))},
    ),
    SweptModel("distilbert", _hf("DistilBertConfig", "DistilBertForMaskedLM", vocab_size=V, dim=32, hidden_dim=64, n_layers=2, n_heads=2, max_position_embeddings=64), _ids(2, 8, labels=True)),
    SweptModel("roberta", _hf("RobertaConfig", "RobertaForMaskedLM", pad_token_id=1, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("deberta_v2", _hf("DebertaV2Config", "DebertaV2ForMaskedLM", **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("electra", _hf("ElectraConfig", "ElectraForMaskedLM", embedding_size=16, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("albert", _hf("AlbertConfig", "AlbertForMaskedLM", embedding_size=16, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel(
        "modernbert",
        _hf("ModernBertConfig", "ModernBertForMaskedLM", global_attn_every_n_layers=2, local_attention=4, pad_token_id=0, **_ENCODER),
        _ids(2, 8, labels=True),
    ),
    SweptModel("mobilebert", _hf("MobileBertConfig", "MobileBertForMaskedLM", embedding_size=16, intra_bottleneck_size=16, num_feedforward_networks=2, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("xlnet", _hf("XLNetConfig", "XLNetLMHeadModel", vocab_size=V, d_model=32, n_layer=2, n_head=2, d_inner=64), _ids(2, 8, labels=True)),
    SweptModel(
        "funnel",
        _hf("FunnelConfig", "FunnelForMaskedLM", vocab_size=V, d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1),
        _ids(2, 8, labels=True),
    ),
    SweptModel("vit", _hf("ViTConfig", "ViTForImageClassification", **_VISION), _image(32, key="pixel_values")),
    SweptModel(
        "swin",
        _hf("SwinConfig", "SwinForImageClassification", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4, num_labels=10),
        _image(32, key="pixel_values"),
    ),
    SweptModel(
        "convnext",
        _hf("ConvNextConfig", "ConvNextForImageClassification", num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10),
        _image(32, key="pixel_values"),
    ),
]

# a second batch: attention patterns and layers beyond the usual decoder (windows, block sparsity, hashing,
# recurrences, state spaces, mixtures of experts, reversible layers)
_T5_LIKE = dict(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0)
_AUDIO = dict(
    vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
    conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, mask_time_prob=0.0,
)  # fmt: skip
TRANSFORMERS_MORE = [
    SweptModel("longformer", _hf("LongformerConfig", "LongformerForMaskedLM", attention_window=4, pad_token_id=1, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel(
        "big_bird",
        _hf("BigBirdConfig", "BigBirdForMaskedLM", attention_type="block_sparse", block_size=4, num_random_blocks=1, **_ENCODER),
        _ids(2, 32, labels=True),
    ),
    SweptModel(
        "reformer",
        _hf(
            "ReformerConfig", "ReformerModelWithLMHead", vocab_size=V, hidden_size=32, num_attention_heads=2, attention_head_size=16,
            feed_forward_size=64, attn_layers=["local", "lsh"], axial_pos_shape=(4, 4), axial_pos_embds_dim=(16, 16),
            local_attn_chunk_length=4, lsh_attn_chunk_length=4, num_buckets=2, num_hashes=1, max_position_embeddings=16,
            is_decoder=True, hash_seed=0, pad_token_id=0, eos_token_id=2,
        ),  # fmt: skip
        _ids(2, 16, labels=True),
    ),
    SweptModel(
        "canine",
        _hf("CanineConfig", "CanineModel", hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, downsampling_rate=2,
            num_hash_functions=2, num_hash_buckets=64, local_transformer_stride=4, max_position_embeddings=64),
        _ids(2, 8),
    ),
    SweptModel("convbert", _hf("ConvBertConfig", "ConvBertForMaskedLM", embedding_size=32, head_ratio=2, conv_kernel_size=3, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel(
        "squeezebert",
        _hf("SqueezeBertConfig", "SqueezeBertForMaskedLM", embedding_size=32, q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
            intermediate_groups=2, output_groups=2, **_ENCODER),
        _ids(2, 8, labels=True),
    ),
    SweptModel(
        "nystromformer",
        _hf("NystromformerConfig", "NystromformerForMaskedLM", num_landmarks=4, segment_means_seq_len=8, conv_kernel_size=3, **_ENCODER),
        _ids(2, 8, labels=True),
    ),
    SweptModel("esm", _hf("EsmConfig", "EsmForMaskedLM", pad_token_id=1, mask_token_id=2, position_embedding_type="rotary", **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel(
        "rwkv",
        _hf("RwkvConfig", "RwkvForCausalLM", vocab_size=V, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64, context_length=64),
        _ids(2, 8, labels=True),
    ),
    SweptModel(
        "recurrent_gemma",
        _hf("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM", vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, lru_width=32, attention_window_size=8, conv1d_width=4, block_types=["recurrent", "attention"]),
        _ids(2, 8, labels=True),
    ),
    SweptModel(
        "jamba",
        _hf("JambaConfig", "JambaForCausalLM", vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2,
            attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False),
        _ids(2, 8, labels=True),
    ),
    SweptModel(
        "mamba2",
        _hf("Mamba2Config", "Mamba2ForCausalLM", vocab_size=V, hidden_size=32, num_hidden_layers=2, state_size=8, num_heads=4, head_dim=16, expand=2, n_groups=1, chunk_size=4),
        _ids(2, 8, labels=True),
    ),
    SweptModel(
        "led",
        _hf("LEDConfig", "LEDForConditionalGeneration", vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, attention_window=4, max_encoder_position_embeddings=64,
            max_decoder_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2),
        _seq2seq(2, 8),
    ),
    SweptModel("mt5", _hf("MT5Config", "MT5ForConditionalGeneration", **_T5_LIKE), _seq2seq(2, 8)),
    SweptModel(
        "longt5",
        _hf("LongT5Config", "LongT5ForConditionalGeneration", local_radius=2, global_block_size=4, encoder_attention_type="transient-global", **_T5_LIKE),
        _seq2seq(2, 8),
    ),
    SweptModel(
        "switch_transformers",
        _hf("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration", num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
            num_experts=4, expert_capacity=8, router_jitter_noise=0.0, **_T5_LIKE),
        _seq2seq(2, 8),
    ),
    SweptModel("gpt_bigcode", _hf("GPTBigCodeConfig", "GPTBigCodeForCausalLM", vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, multi_query=True), _ids(2, 8, labels=True)),
    SweptModel("mpt", _hf("MptConfig", "MptForCausalLM", vocab_size=V, d_model=32, n_heads=4, n_layers=2, max_seq_len=64), _ids(2, 8, labels=True)),
    SweptModel("codegen", _hf("CodeGenConfig", "CodeGenForCausalLM", vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, n_ctx=64), _ids(2, 8, labels=True)),
    SweptModel(
        "deepseek_v3",
        _hf("DeepseekV3Config", "DeepseekV3ForCausalLM", vocab_size=V, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
            first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4, v_head_dim=8, qk_nope_head_dim=4, max_position_embeddings=64),
        _ids(2, 8, labels=True),
    ),
    SweptModel(
        "gpt_oss",
        _hf("GptOssConfig", "GptOssForCausalLM", vocab_size=V, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4, max_position_embeddings=64),
        _ids(2, 8, labels=True),
    ),
    SweptModel("hubert", _hf("HubertConfig", "HubertForCTC", **_AUDIO), lambda: {"input_values": torch.randn(2, 400)}),
    SweptModel("dinov2", _hf("Dinov2Config", "Dinov2ForImageClassification", mlp_ratio=2, **{k: v for k, v in _VISION.items() if k != "intermediate_size"}), _image(32, key="pixel_values")),
    SweptModel("siglip_vision", _hf("SiglipVisionConfig", "SiglipVisionModel", **{k: v for k, v in _VISION.items() if k != "num_labels"}), _image(32, key="pixel_values")),
    SweptModel(
        "swinv2",
        _hf("Swinv2Config", "Swinv2ForImageClassification", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4, num_labels=10),
        _image(32, key="pixel_values"),
    ),
]


def _timm(name: str, size: int = 64, **kwargs) -> SweptModel:
    def build():
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, **kwargs)

    return SweptModel(f"timm/{name}", build, _image(size))


TIMM = [
    _timm("efficientvit_b0"),
    _timm("mobilevit_xxs"),
    _timm("levit_128s", img_size=64),
    _timm("regnety_002", size=32),
    _timm("resnest14d"),
    _timm("dla34", size=32),
    _timm("hrnet_w18_small", size=32),
    _timm("poolformer_s12", size=32),
    _timm("eva02_tiny_patch14_224", 28, img_size=28, embed_dim=32, depth=2, num_heads=2),
    _timm("xcit_nano_12_p16_224", img_size=32, depth=2),
]


def _torchvision(name: str, size: int = 32, **kwargs) -> SweptModel:
    def build():
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=10, **kwargs)

    return SweptModel(f"torchvision/{name}", build, _image(size))


TORCHVISION = [
    _torchvision("resnet18"),
    _torchvision("mobilenet_v2"),
    _torchvision("efficientnet_b0"),
    _torchvision("shufflenet_v2_x0_5"),
    _torchvision("squeezenet1_0", size=64),
    _torchvision("googlenet", aux_logits=False, init_weights=True),
    _torchvision("mnasnet0_5"),
    _torchvision("regnet_y_400mf"),
    _torchvision("convnext_tiny"),
    _torchvision("swin_t", size=64),
    SweptModel("torchvision/maxvit (tiny config)", lambda: _maxvit(), _image(64)),
    # nn.MultiheadAttention in every block (torch.nn.functional.multi_head_attention_forward)
    SweptModel("torchvision/vit (tiny config)", lambda: _vit(), _image(32)),
]


def _vit():
    from torchvision.models import VisionTransformer

    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10)


def _maxvit():
    from torchvision.models import MaxVit

    return MaxVit(
        input_size=(64, 64), stem_channels=16, partition_size=2, block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
        stochastic_depth_prob=0.2, num_classes=10,
    )  # fmt: skip


# a third batch (2026-11-29): more decoders (partial rotary, qk norms, multipliers, differential attention,
# state spaces, short convolutions, ternary weights), encoders, speech, segmentation, and timm/torchvision vision families
THIRD_BATCH = [
    SweptModel("gpt_neo", _hf("GPTNeoConfig", "GPTNeoForCausalLM", vocab_size=V, hidden_size=32, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=64), _ids(2, 8, labels=True)),
    SweptModel("stablelm", _hf("StableLmConfig", "StableLmForCausalLM", partial_rotary_factor=0.5, qk_layernorm=True, use_parallel_residual=True, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("starcoder2", _hf("Starcoder2Config", "Starcoder2ForCausalLM", sliding_window=4, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("cohere", _hf("CohereConfig", "CohereForCausalLM", logit_scale=0.5, use_qk_norm=True, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("granite", _hf("GraniteConfig", "GraniteForCausalLM", embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.3, logits_scaling=4.0, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("nemotron", _hf("NemotronConfig", "NemotronForCausalLM", partial_rotary_factor=0.5, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("persimmon", _hf("PersimmonConfig", "PersimmonForCausalLM", qk_layernorm=True, partial_rotary_factor=0.5, **{k: v for k, v in _DECODER.items() if k != "num_key_value_heads"}), _ids(2, 8, labels=True)),
    SweptModel("qwen2_moe", _hf("Qwen2MoeConfig", "Qwen2MoeForCausalLM", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=32, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("olmoe", _hf("OlmoeConfig", "OlmoeForCausalLM", num_experts=4, num_experts_per_tok=2, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("biogpt", _hf("BioGptConfig", "BioGptForCausalLM", **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("xglm", _hf("XGLMConfig", "XGLMForCausalLM", vocab_size=V, d_model=32, ffn_dim=64, num_layers=2, attention_heads=4, max_position_embeddings=64), _ids(2, 8, labels=True)),
    SweptModel("ctrl", _hf("CTRLConfig", "CTRLLMHeadModel", vocab_size=V, n_embd=32, dff=64, n_layer=2, n_head=4, n_positions=64), _ids(2, 8, labels=True)),
    SweptModel("diffllama", _hf("DiffLlamaConfig", "DiffLlamaForCausalLM", **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("falcon_mamba", _hf("FalconMambaConfig", "FalconMambaForCausalLM", vocab_size=V, hidden_size=32, num_hidden_layers=2, state_size=8, expand=2, conv_kernel=4, use_mambapy=False), _ids(2, 8, labels=True)),
    SweptModel("bamba", _hf("BambaConfig", "BambaForCausalLM", attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=8, mamba_chunk_size=4, mamba_expand=2, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("lfm2", _hf("Lfm2Config", "Lfm2ForCausalLM", layer_types=["conv", "full_attention"], conv_L_cache=3, block_auto_adjust_ff_dim=False, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("bitnet", _hf("BitNetConfig", "BitNetForCausalLM", **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("glm4", _hf("Glm4Config", "Glm4ForCausalLM", head_dim=8, pad_token_id=0, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("granitemoe", _hf("GraniteMoeConfig", "GraniteMoeForCausalLM", num_local_experts=4, num_experts_per_tok=2, **_DECODER), _ids(2, 8, labels=True)),
    SweptModel("mbart", _hf("MBartConfig", "MBartForConditionalGeneration", **_SEQ2SEQ), _seq2seq(2, 8)),
    SweptModel("umt5", _hf("UMT5Config", "UMT5ForConditionalGeneration", **_T5_LIKE), _seq2seq(2, 8)),
    SweptModel("roformer", _hf("RoFormerConfig", "RoFormerForMaskedLM", embedding_size=32, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("megatron_bert", _hf("MegatronBertConfig", "MegatronBertForMaskedLM", **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("rembert", _hf("RemBertConfig", "RemBertForMaskedLM", input_embedding_size=16, output_embedding_size=16, **_ENCODER), _ids(2, 8, labels=True)),
    SweptModel("wav2vec2", _hf("Wav2Vec2Config", "Wav2Vec2ForCTC", **_AUDIO), lambda: {"input_values": torch.randn(2, 400)}),
    SweptModel("segformer", _hf("SegformerConfig", "SegformerForSemanticSegmentation", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=5), _image(32, key="pixel_values")),
    SweptModel("mobilevitv2", _hf("MobileViTV2Config", "MobileViTV2ForImageClassification", image_size=64, width_multiplier=0.5, num_labels=10), _image(64, key="pixel_values")),
    SweptModel("convnextv2", _hf("ConvNextV2Config", "ConvNextV2ForImageClassification", num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10), _image(32, key="pixel_values")),
    _timm("mixer_s16_224", 32, img_size=32),
    _timm("ghostnet_050", 32),
    _timm("rexnet_100", 32),
    _timm("cait_xxs24_224", 32, img_size=32, depth=2, depth_token_only=1),
    _timm("pit_ti_224", 64, img_size=64),
    _timm("fastvit_t8", 64),
    _timm("repvit_m1", 64),
    _timm("edgenext_xx_small", 64),
    _timm("hiera_tiny_224", 64, img_size=64),
    _timm("mambaout_femto", 64),
    _timm("pvt_v2_b0", 64),
    _timm("gcvit_xxtiny", 64, img_size=64),
    _timm("sequencer2d_s", 32),
    _timm("volo_d1_224", 32, img_size=32),
    _timm("visformer_tiny", 64, img_size=64),
    _timm("inception_next_tiny", 32),
    _timm("convit_tiny", 32, img_size=32, depth=2),
    _timm("res2net50_14w_8s", 32),
    _timm("coat_lite_tiny", 64, img_size=64),
    _timm("davit_tiny", 64),
    _torchvision("inception_v3", 96, aux_logits=False, init_weights=True),
    _torchvision("mobilenet_v3_small"),
    _torchvision("resnext50_32x4d"),
    _torchvision("efficientnet_v2_s"),
    _torchvision("swin_v2_t", 64),
    _torchvision("regnet_x_400mf"),
]


MODELS = TRANSFORMERS + TIMM + TORCHVISION + TRANSFORMERS_MORE + THIRD_BATCH
