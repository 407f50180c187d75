"""memjax.engine: paged KV cache, on-device scheduling and the jitted sampling loop."""

from .config import Completion, EngineConfig, SamplingParams
from .engine import Engine

__all__ = ["Completion", "Engine", "EngineConfig", "SamplingParams"]
