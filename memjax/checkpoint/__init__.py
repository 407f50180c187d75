"""memjax.checkpoint: Hugging Face safetensors in/out and orbax parameter checkpoints."""

from .errors import CheckpointError
from .hf import hf_tensors, load_config, load_hf, save_hf
from .hf_config import from_hf_config, to_hf_config

__all__ = ["CheckpointError", "hf_tensors", "load_config", "load_hf", "save_hf", "from_hf_config", "to_hf_config"]
