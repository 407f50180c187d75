"""Translation between Hugging Face Qwen2 `config.json` dicts and ModelConfig.

Accepts both config styles: top-level `rope_theta` / `rope_scaling` (transformers 4) and
`rope_parameters` (transformers 5). Rejects, with a CheckpointError naming the field, anything the
decoder cannot honour instead of silently ignoring it: another architecture, a non-default rope type
(yarn, dynamic, linear, ...), sliding-window attention switched on, an activation other than SiLU.
Written configs use the transformers-4 style (top-level rope_theta), which transformers 5 also reads.
"""

from __future__ import annotations

from typing import Any

from ..model.config import ModelConfig
from .errors import CheckpointError

_ARCH = "Qwen2ForCausalLM"


def _rope(hf: dict[str, Any], where: str) -> float:
    params = hf.get("rope_parameters")
    scaling = hf.get("rope_scaling")
    theta = hf.get("rope_theta")
    for name, block in (("rope_parameters", params), ("rope_scaling", scaling)):
        if block is None:
            continue
        if not isinstance(block, dict):
            raise CheckpointError(f"{where}: {name} must be an object, got {block!r}")
        kind = block.get("rope_type", block.get("type", "default"))
        if kind != "default":
            raise CheckpointError(f"{where}: {name}.rope_type={kind!r} is not supported (only 'default' "
                                  "rotary embeddings); refusing to load rather than run the wrong positions")
        if "rope_theta" in block:
            if theta is not None and float(theta) != float(block["rope_theta"]):
                raise CheckpointError(f"{where}: rope_theta={theta} disagrees with {name}.rope_theta="
                                      f"{block['rope_theta']}")
            theta = block["rope_theta"]
    if theta is None:
        theta = 10_000.0  # transformers' Qwen2Config default
    return float(theta)


def _int(hf: dict[str, Any], key: str, where: str, default: Any = None) -> int:
    v = hf.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise CheckpointError(f"{where}: {key} must be an integer, got {v!r}")
    return v


def from_hf_config(hf: dict[str, Any], *, where: str = "config.json", param_dtype: str = "float32",
                   dtype: str | None = None) -> ModelConfig:
    if not isinstance(hf, dict):
        raise CheckpointError(f"{where}: must hold a JSON object, got a {type(hf).__name__}")
    archs = hf.get("architectures") or [_ARCH]
    if hf.get("model_type", "qwen2") != "qwen2" or _ARCH not in archs:
        raise CheckpointError(f"{where}: architecture {archs} / model_type {hf.get('model_type')!r} is not "
                              f"supported; expected {_ARCH} with model_type 'qwen2'")
    if hf.get("use_sliding_window", False):
        raise CheckpointError(f"{where}: use_sliding_window=true is not supported (memjax attends to the "
                              "full window)")
    act = hf.get("hidden_act", "silu")
    if act != "silu":
        raise CheckpointError(f"{where}: hidden_act={act!r} is not supported (Qwen2 uses 'silu')")
    required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    missing = [k for k in required if k not in hf]
    if missing:
        raise CheckpointError(f"{where}: missing required field(s) {', '.join(missing)}")
    heads = _int(hf, "num_attention_heads", where)
    try:
        return ModelConfig(
            vocab_size=_int(hf, "vocab_size", where),
            hidden_size=_int(hf, "hidden_size", where),
            intermediate_size=_int(hf, "intermediate_size", where),
            num_layers=_int(hf, "num_hidden_layers", where),
            num_heads=heads,
            num_kv_heads=_int(hf, "num_key_value_heads", where, None) if hf.get("num_key_value_heads") else heads,
            head_dim=_int(hf, "head_dim", where) if hf.get("head_dim") else 0,
            rope_theta=_rope(hf, where),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            max_position_embeddings=_int(hf, "max_position_embeddings", where, 32_768),
            param_dtype=param_dtype,
            dtype=dtype or param_dtype,
            name=str(hf.get("_name_or_path") or "hf"),
        )
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{where}: {e}") from None


def to_hf_config(cfg: ModelConfig, *, torch_dtype: str | None = None,
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "architectures": [_ARCH],
        "model_type": "qwen2",
        "hidden_act": "silu",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "use_sliding_window": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": torch_dtype or cfg.param_dtype,
    }
    if cfg.head_dim != cfg.hidden_size // cfg.num_heads:
        out["head_dim"] = cfg.head_dim
    out.update(extra or {})
    return out
