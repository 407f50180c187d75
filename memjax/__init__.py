"""memjax: RL-trained LLM memory agents (MemAgent, SUMER, Memory-R1, Memory-R2) in JAX / Flax NNX.

Public names (see DESIGN.md, "Public contract"): `memjax.model` (decoder, presets, count_params),
`memjax.load_hf` / `memjax.save_hf` (Hugging Face checkpoints), `memjax.Tokenizer`.
"""

from . import checkpoint, model
from .checkpoint import CheckpointError, load_hf, save_hf
from .model import ModelConfig, Qwen2, count_params
from .tokenizer import TokenIds, Tokenizer

__version__ = "0.1.0"
__all__ = ["checkpoint", "model", "CheckpointError", "load_hf", "save_hf", "ModelConfig", "Qwen2",
           "count_params", "TokenIds", "Tokenizer", "__version__"]
