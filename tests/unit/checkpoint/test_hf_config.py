"""memjax.checkpoint.hf_config: every preset survives ModelConfig -> HF config -> ModelConfig."""

import pytest

from memjax.checkpoint import from_hf_config, to_hf_config
from memjax.model import presets


@pytest.mark.parametrize("name", presets.names())
def test_preset_roundtrip(name):
    cfg = presets.get(name)
    back = from_hf_config(to_hf_config(cfg))
    assert back == cfg  # `name` is excluded from equality


def test_transformers5_style_and_defaults():
    hf = to_hf_config(presets.get("qwen2.5-7b"))
    del hf["rope_theta"], hf["rope_scaling"]
    hf["rope_parameters"] = {"rope_type": "default", "rope_theta": 123.0}
    assert from_hf_config(hf).rope_theta == 123.0
    del hf["rope_parameters"]
    assert from_hf_config(hf).rope_theta == 10_000.0  # transformers' Qwen2Config default


def test_explicit_head_dim_written_only_when_nonstandard():
    assert "head_dim" not in to_hf_config(presets.get("tiny"))
    odd = presets.get("tiny", head_dim=32)
    assert to_hf_config(odd)["head_dim"] == 32 and from_hf_config(to_hf_config(odd)).head_dim == 32


def test_missing_field_named():
    hf = to_hf_config(presets.get("tiny"))
    del hf["hidden_size"]
    with pytest.raises(ValueError, match="missing required field.*hidden_size"):
        from_hf_config(hf)
