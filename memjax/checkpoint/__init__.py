"""memjax.checkpoint: Hugging Face safetensors in/out and orbax parameter checkpoints.

The package's names resolve on first use (memjax/core/lazy.py): importing memjax.checkpoint, or memjax.checkpoint.errors,
does not import jax, flax or safetensors (tests/e2e/test_imports.py)."""

from ..core.lazy import exports, names

__getattr__, __dir__ = exports(globals(), {**names(".errors", "CheckpointError"),
                                          **names(".hf", "hf_tensors", "load_config", "load_hf", "save_hf"),
                                          **names(".hf_config", "from_hf_config", "to_hf_config")})

__all__ = ["CheckpointError", "hf_tensors", "load_config", "load_hf", "save_hf", "from_hf_config", "to_hf_config"]
