"""memjax.engine: paged KV cache, on-device scheduling and the jitted sampling loop."""

from .config import Completion, EngineConfig, KVHandle, SamplingParams
from .engine import Engine

__all__ = ["Completion", "Engine", "EngineConfig", "KVHandle", "SamplingParams"]
