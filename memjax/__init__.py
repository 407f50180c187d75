"""memjax: RL-trained LLM memory agents (MemAgent, SUMER, Memory-R1, Memory-R2) in JAX / Flax NNX.

Public names (see docs/architecture.md, "Public contract"): `memjax.model` (decoder, presets, count_params),
`memjax.load_hf` / `memjax.save_hf` (Hugging Face checkpoints), `memjax.Tokenizer`,
`memjax.Engine` / `EngineConfig` / `SamplingParams` (rollout engine), `memjax.flops` (FLOP estimates, MFU).
"""

from . import agents, checkpoint, data, flops, model, parallel, rewards, rl
from .checkpoint import CheckpointError, load_hf, save_hf
from .model import ModelConfig, Qwen2, count_params
from .engine import Completion, Engine, EngineConfig, SamplingParams
from .tokenizer import TokenIds, Tokenizer

__version__ = "0.1.0"
__all__ = ["agents", "checkpoint", "data", "flops", "model", "parallel", "rewards", "rl", "CheckpointError", "load_hf", "save_hf", "ModelConfig", "Qwen2",
           "count_params", "TokenIds", "Tokenizer", "Completion", "Engine", "EngineConfig", "SamplingParams",
           "__version__"]
