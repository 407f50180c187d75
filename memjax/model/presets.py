"""Presets for every published Qwen2.5 size plus tiny test models.

Owns: the architecture numbers of Qwen2.5 0.5B-72B as published in their Hugging Face config.json
(Instruct variants: 32K position window). 0.5B-3B tie the LM head to the embedding and use vocab 151,936;
7B and larger are untied with vocab 152,064. `get(name, **overrides)` returns a validated ModelConfig.
"""

from __future__ import annotations

from .config import ModelConfig

_QWEN = dict(rope_theta=1_000_000.0, rms_norm_eps=1e-6, max_position_embeddings=32_768)

_PRESETS: dict[str, dict] = {
    "qwen2.5-0.5b": dict(vocab_size=151_936, hidden_size=896, intermediate_size=4_864, num_layers=24,
                         num_heads=14, num_kv_heads=2, tie_word_embeddings=True, **_QWEN),
    "qwen2.5-1.5b": dict(vocab_size=151_936, hidden_size=1_536, intermediate_size=8_960, num_layers=28,
                         num_heads=12, num_kv_heads=2, tie_word_embeddings=True, **_QWEN),
    "qwen2.5-3b": dict(vocab_size=151_936, hidden_size=2_048, intermediate_size=11_008, num_layers=36,
                       num_heads=16, num_kv_heads=2, tie_word_embeddings=True, **_QWEN),
    "qwen2.5-7b": dict(vocab_size=152_064, hidden_size=3_584, intermediate_size=18_944, num_layers=28,
                       num_heads=28, num_kv_heads=4, tie_word_embeddings=False, **_QWEN),
    "qwen2.5-14b": dict(vocab_size=152_064, hidden_size=5_120, intermediate_size=13_824, num_layers=48,
                        num_heads=40, num_kv_heads=8, tie_word_embeddings=False, **_QWEN),
    "qwen2.5-32b": dict(vocab_size=152_064, hidden_size=5_120, intermediate_size=27_648, num_layers=64,
                        num_heads=40, num_kv_heads=8, tie_word_embeddings=False, **_QWEN),
    "qwen2.5-72b": dict(vocab_size=152_064, hidden_size=8_192, intermediate_size=29_568, num_layers=80,
                        num_heads=64, num_kv_heads=8, tie_word_embeddings=False, **_QWEN),
    # Test models: odd sizes on purpose (GQA group 2, head_dim 16).
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                 num_kv_heads=2, tie_word_embeddings=True, rope_theta=10_000.0, rms_norm_eps=1e-6,
                 max_position_embeddings=2_048),
    # Tiny depth/width with the real Qwen2.5 vocabulary, for end-to-end runs with the real tokenizer.
    "tiny-qwen-vocab": dict(vocab_size=151_936, hidden_size=64, intermediate_size=128, num_layers=2,
                            num_heads=4, num_kv_heads=2, tie_word_embeddings=True, rope_theta=1_000_000.0,
                            rms_norm_eps=1e-6, max_position_embeddings=8_192),
}

# Parameter counts of the published Hugging Face checkpoints (sum of numel over model.parameters()).
PUBLISHED_PARAM_COUNTS: dict[str, int] = {
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-1.5b": 1_543_714_304,
    "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-14b": 14_770_033_664,
    "qwen2.5-32b": 32_763_876_352,
    "qwen2.5-72b": 72_706_203_648,
}


def names() -> list[str]:
    return list(_PRESETS)


def get(name: str, **overrides) -> ModelConfig:
    key = name.lower()
    if key not in _PRESETS:
        raise KeyError(f"unknown model preset {name!r}; known: {', '.join(_PRESETS)}")
    return ModelConfig(**{**_PRESETS[key], **overrides, "name": key})
