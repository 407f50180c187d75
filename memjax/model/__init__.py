"""memjax.model: the Qwen2.5 decoder, its config, presets and parameter counting."""

from . import presets
from .attention import AttentionFn, DenseCausal, grouped_attention
from .config import ModelConfig
from .qwen2 import Qwen2, abstract_model, count_params, init_model, param_shapes
from .reference_generate import greedy_generate

__all__ = ["presets", "AttentionFn", "DenseCausal", "grouped_attention", "ModelConfig", "Qwen2",
           "abstract_model", "count_params", "init_model", "param_shapes", "greedy_generate"]
