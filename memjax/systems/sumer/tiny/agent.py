"""Wiring of the tiny searchable-memory task to memjax's real pieces: model, Engine, SumerWorkflow, evaluation.

Owns: `model_config()` (a 3-layer, width-64 Qwen2-architecture model over the 64-row vocabulary: 115,520
parameters, so the shipped warm start is 466 KB; measured supervised runs: width 64 / 2 layers sat at dev
accuracy ~0.1 for 500 steps -- it copied the person into the search call but never the place out of the tool
result -- while 64/3 and 96/3 jumped after ~450 and ~250 steps), `engine_config()`, `workflow(...)` (SumerWorkflow on
TinySumerFormat with the rule judge: the answers are single words, so J x F1 is exact match) and `evaluate`
(held-out mean reward, greedy and sampled, through the same workflow RL trains).
Invariants: evaluation with a fixed seed is deterministic (sampling keys depend on (seed, trajectory, turn)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....agents.heldout import run_heldout
from ..workflow import SumerConfig, SumerWorkflow
from ....engine import EngineConfig
from ....model import ModelConfig, presets
from ....rewards.locomo import RuleBasedJudge
from ....tiny.model import engine_config as tiny_engine_config
from .task import MODEL_VOCAB, WINDOW, TinySumerFormat


def model_config(hidden: int = 64, layers: int = 3, heads: int = 4, kv_heads: int = 2) -> ModelConfig:
    return presets.get("tiny", vocab_size=MODEL_VOCAB, hidden_size=hidden, intermediate_size=2 * hidden,
                       num_layers=layers, num_heads=heads, num_kv_heads=kv_heads, max_position_embeddings=WINDOW)


def engine_config(max_slots: int = 64) -> EngineConfig:
    """The tiny tasks' engine (memjax/tiny/model.py) at this task's window."""
    return tiny_engine_config(max_slots, window=WINDOW)


def sumer_config(temperature: float = 1.0, max_turns: int = 4) -> SumerConfig:
    """Episode limits scaled to the 64-token window (the LoCoMo recipe's are 20 turns / 8K + 24K tokens)."""
    return SumerConfig(max_turns=max_turns, max_calls_per_turn=5, max_prompt_tokens=16, max_response_tokens=WINDOW,
                       max_turn_tokens=12, temperature=temperature)


def workflow(temperature: float = 1.0, max_turns: int = 4) -> SumerWorkflow:
    return SumerWorkflow(TinySumerFormat(), RuleBasedJudge(), sumer_config(temperature, max_turns), window=WINDOW,
                         trace_text=True)


def evaluate(engine, samples: list, *, sampled: int = 0, seed: int = 12345, max_turns: int = 4) -> dict[str, Any]:
    """Held-out mean reward of the engine's weights: greedy (`reward`, `submitted`, `accuracy`, per question
    kind, and SumerWorkflow.stats' search metrics: `mean_searches`, `search_hit_rate`, `evidence_found`,
    `filtered_search_frac`, `records_per_search`) and, when sampled > 0, the mean reward of `sampled`
    temperature-1 episodes per question."""
    res = run_heldout(engine, workflow(0.0, max_turns), samples, seed=seed, progress=False)
    r = np.asarray(res.rewards, np.float64)
    kind = np.asarray([s.category for s in samples])
    out = {"reward": float(r.mean()), "accuracy": float((r > 0).mean()),
           "submitted": float(res.stats["end_submitted"]), "mean_turns": float(res.stats["mean_turns"]),
           **{k: float(res.stats[k]) for k in ("mean_searches", "search_hit_rate", "evidence_found",
                                                     "filtered_search_frac", "records_per_search")},
           "traces": res.traces}
    for k, name in ((1, "plain"), (2, "filtered")):
        if (kind == k).any():
            out[f"reward_{name}"] = float(r[kind == k].mean())
    if sampled:
        res = run_heldout(engine, workflow(1.0, max_turns), samples, group_size=sampled, seed=seed,
                           progress=False)
        out["reward_sampled"] = float(np.mean(res.rewards))
    return out
