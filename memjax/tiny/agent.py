"""Wiring of the tiny task to memjax's real pieces: model preset, Engine, MemAgent, held-out evaluation.

Owns: `model_config()` (the Qwen2-architecture tiny model for the 64-row vocabulary), `engine_config()`,
`memagent_config(task, ...)` (compact templates, budgets that fit the task exactly), `make_agent` and
`evaluate` (held-out accuracy through the same MemAgent workflow RL trains, greedy or sampled).
Invariants: nothing here is task-specific beyond the budgets derived from TaskConfig; evaluation with a
fixed seed is deterministic (the engine's sampling keys depend only on (seed, trajectory, turn)).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..agents import MemAgent, MemAgentConfig
from ..agents.heldout import run_heldout
from ..engine import Engine, EngineConfig
from ..model import ModelConfig, presets
from .task import FINAL_TEMPLATE, MEMORY_TEMPLATE, MODEL_VOCAB, NO_MEMORY, TaskConfig, TinyTokenizer

WINDOW = 48


def model_config(hidden: int = 128, layers: int = 4, heads: int = 4, kv_heads: int = 2) -> ModelConfig:
    """The tiny task's Qwen2-architecture model (600,192 parameters at the defaults). Measured supervised
    runs (dev greedy accuracy, lr 3e-3): width/layers 64/2 and 128/2 stay near 0.30 after 1,500 steps, 64/4
    and 96/3 near 0.25-0.35 after 1,200; 128/4 (lr 2e-3) reaches 0.82 after 1,500: the task's key -> object
    copy needs the depth and the width."""
    return presets.get("tiny", vocab_size=MODEL_VOCAB, hidden_size=hidden, intermediate_size=2 * hidden,
                       num_layers=layers, num_heads=heads, num_kv_heads=kv_heads, max_position_embeddings=WINDOW)


def engine_config(max_slots: int = 64) -> EngineConfig:
    return EngineConfig(max_slots=max_slots, page_size=8, window=WINDOW, prefill_slots=min(16, max_slots),
                        prefill_chunk=WINDOW, rounds_per_sync=64, progress=False, kv_cache_bytes=64 << 20)


def memagent_config(task: TaskConfig, *, group_size: int = 1, temperature: float = 1.0, seed: int = 0
                    ) -> MemAgentConfig:
    return MemAgentConfig(chunk_tokens=task.chunk_tokens, max_query_tokens=4,
                          max_memory_tokens=task.max_memory_tokens, max_final_tokens=task.max_final_tokens,
                          group_size=group_size, temperature=temperature, seed=seed,
                          memory_template=MEMORY_TEMPLATE, final_template=FINAL_TEMPLATE, no_memory=NO_MEMORY)


def make_agent(engine: Engine, tok: TinyTokenizer, cfg: MemAgentConfig) -> MemAgent:
    return MemAgent(engine, tok, cfg, stop_token_ids=(tok.eos_id,))


def evaluate(engine: Engine, tok: TinyTokenizer, task: TaskConfig, samples: list[dict[str, Any]], *,
             sampled: int = 0, seed: int = 12345) -> dict[str, Any]:
    """Held-out accuracy of the engine's current weights: greedy (`accuracy`, per hop, traces) and, when
    sampled > 0, the mean reward of `sampled` temperature-1 answers per question (`accuracy_sampled`)."""
    cfg = dataclasses.replace(memagent_config(task, temperature=0.0, seed=seed), record_conversations=False)
    res = _heldout(make_agent(engine, tok, cfg), samples)
    r = np.asarray(res.rewards, np.float64)
    hops = np.asarray([s["hops"] for s in samples])
    out = {"accuracy": float(r.mean()), "traces": res.traces, "stats": res.stats}
    for h in (1, 2):
        if (hops == h).any():
            out[f"accuracy_hop{h}"] = float(r[hops == h].mean())
    if sampled:
        cfg = dataclasses.replace(cfg, temperature=1.0, group_size=sampled)
        out["accuracy_sampled"] = float(np.mean(_heldout(make_agent(engine, tok, cfg), samples).rewards))
    return out


def _heldout(agent: MemAgent, samples):
    """agent.run(samples) without conversations, each process of a run taking its share (agents/heldout.py)."""
    c = agent.cfg
    return run_heldout(agent.engine, agent, samples, group_size=c.group_size, seed=c.seed, max_active=c.max_active)
