"""memjax: RL-trained LLM memory agents (MemAgent, SUMER, Memory-R1, Memory-R2) in JAX / Flax NNX.

Public names (see docs/architecture.md, "Public contract"): `memjax.model` (decoder, presets, count_params),
`memjax.load_hf` / `memjax.save_hf` (Hugging Face checkpoints), `memjax.Tokenizer`,
`memjax.Engine` / `EngineConfig` / `SamplingParams` (rollout engine), `memjax.model.flops` (FLOP estimates, MFU).

Invariants: importing memjax (which every `import memjax.X` does first) imports nothing else: each name of
`__all__` is resolved on first use (memjax/core/lazy.py, PEP 562) and then kept in this namespace, so
`from memjax import Engine`, `memjax.load_hf(...)` and `import memjax.train` behave as eager imports did, while
`python -m memjax.launch`, `--help`-less bad input and a bad launch environment fail before jax, flax or orbax
load (tests/e2e/test_imports.py). `__all__` lists exactly the names of `_LAZY` plus `__version__`.
"""

from __future__ import annotations

from .core.lazy import exports, names

__version__ = "0.1.0"

_LAZY = {
    **{m: (f".{m}", None) for m in ("agents", "checkpoint", "data", "model", "parallel", "rewards", "rl")},
    "flops": (".model.flops", None),
    **names(".checkpoint", "CheckpointError", "load_hf", "save_hf"),
    **names(".model", "ModelConfig", "Qwen2", "count_params"),
    **names(".core.tokenizer", "TokenIds", "Tokenizer"),
    **names(".engine", "Completion", "Engine", "EngineConfig", "KVCacheOptions", "KernelOptions", "SamplingParams"),
}
__all__ = ["agents", "checkpoint", "data", "flops", "model", "parallel", "rewards", "rl", "CheckpointError", "load_hf", "save_hf", "ModelConfig", "Qwen2",
           "count_params", "TokenIds", "Tokenizer", "Completion", "Engine", "EngineConfig", "KVCacheOptions",
           "KernelOptions", "SamplingParams",
           "__version__"]
__getattr__, __dir__ = exports(globals(), _LAZY)
