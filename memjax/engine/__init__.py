"""memjax.engine: paged KV cache, on-device scheduling and the jitted sampling loop.

Invariant: importing the package imports none of its modules; `EngineConfig`, `KVCacheOptions`, `KernelOptions`,
`SamplingParams`, ... come from config.py (no jax) and `Engine` from engine.py (jax) when first used (memjax/core/lazy.py),
so a config that names EngineConfig does not load the engine."""

from ..core.lazy import exports, names

__all__ = ["Completion", "Engine", "EngineConfig", "KVCacheOptions", "KVHandle", "KernelOptions", "SamplingParams"]
__getattr__, __dir__ = exports(globals(), {**names(".config", "Completion", "EngineConfig", "KVCacheOptions", "KVHandle",
                                                 "KernelOptions", "SamplingParams"),
                                          **names(".engine", "Engine")})
