"""The tiny tasks' model and engine: one Qwen2-architecture model size and one engine setting that every paper's tiny
task (memjax/systems/<paper>/tiny/) trains and rolls out with, on any CPU.

Owns WINDOW (48 tokens: the longest conversation of a tiny task fits), MODEL_VOCAB (64 embedding rows: every tiny
vocabulary fits), `model_config()` and `engine_config()`.
Invariants: the defaults are the shipped warm starts' shapes (memjax/assets/tiny/*/config.json); changing them
retrains every warm start.
"""

from __future__ import annotations

from ..engine import EngineConfig, KVCacheOptions, KernelOptions
from ..model import ModelConfig, presets

MODEL_VOCAB = 64  # model embedding rows (>= every tiny task's vocabulary, rounded up)
WINDOW = 48


def model_config(hidden: int = 128, layers: int = 4, heads: int = 4, kv_heads: int = 2) -> ModelConfig:
    """The tiny task's Qwen2-architecture model (600,192 parameters at the defaults). Measured supervised
    runs (dev greedy accuracy, lr 3e-3): width/layers 64/2 and 128/2 stay near 0.30 after 1,500 steps, 64/4
    and 96/3 near 0.25-0.35 after 1,200; 128/4 (lr 2e-3) reaches 0.82 after 1,500: the task's key -> object
    copy needs the depth and the width."""
    return presets.get("tiny", vocab_size=MODEL_VOCAB, hidden_size=hidden, intermediate_size=2 * hidden,
                       num_layers=layers, num_heads=heads, num_kv_heads=kv_heads, max_position_embeddings=WINDOW)


def engine_config(max_slots: int = 64, window: int = WINDOW) -> EngineConfig:
    """The tiny tasks' engine (`window`: SUMER's task has its own, memjax/systems/sumer/tiny/task.py).
    No small rounds (EngineConfig.kernels.small_rounds=0): each row bucket is one more full forward in the compiled loop,
    and at these shapes the smaller rounds saved nothing measurable. configs/tiny.py, 6 steps on 2 CPU cores:
    rollout 1.80 s per step with the default 2 buckets and 1.79 s without them, the same samples and accuracies; the
    loop's cold compile 12.1 -> 6.9 CPU-s (every process that builds a tiny engine pays it); configs/sumer/tiny.py,
    6 steps: rollout 0.37 -> 0.30 s per step, 39.9 -> 32.6 CPU-s for the run, the same rewards and accuracies.
    An engine of 256 slots or more (MemAgent's tiny default: a step's 256 trajectories at once) has one small bucket,
    max_slots / 4: a run with a handful of trajectories (the launch and fault tests' 8) keeps 64-row rounds. Without
    it, at 256 slots, such a run's rollout took 0.31 s per step instead of 0.18 s at 64 slots."""
    return EngineConfig(max_slots=max_slots, page_size=8, window=window, prefill_slots=min(16, max_slots),
                        prefill_chunk=window, rounds_per_sync=64, progress=False,
                        kv=KVCacheOptions(kv_cache_bytes=64 << 20),
                        kernels=KernelOptions(small_rounds=1 if max_slots >= 256 else 0))
