"""Wiring of the tiny task to memjax's real pieces: Engine, MemAgent, held-out evaluation (the tiny model and
engine settings are memjax/tiny/model.py's).

Owns: `memagent_config(task, ...)` (compact templates, budgets that fit the task exactly), `make_agent` and
`evaluate` (held-out accuracy through the same MemAgent workflow RL trains, greedy or sampled).
Invariants: nothing here is task-specific beyond the budgets derived from TaskConfig; evaluation with a
fixed seed is deterministic (the engine's sampling keys depend only on (seed, trajectory, turn)).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..workflow import MemAgent, MemAgentConfig
from ....agents.heldout import run_heldout
from ....engine import Engine
from .task import FINAL_TEMPLATE, MEMORY_TEMPLATE, NO_MEMORY, TaskConfig, TinyTokenizer

def memagent_config(task: TaskConfig, *, group_size: int = 1, temperature: float = 1.0, seed: int = 0
                    ) -> MemAgentConfig:
    return MemAgentConfig(chunk_tokens=task.chunk_tokens, max_query_tokens=4,
                          max_memory_tokens=task.max_memory_tokens, max_final_tokens=task.max_final_tokens,
                          group_size=group_size, temperature=temperature, seed=seed,
                          memory_template=MEMORY_TEMPLATE, final_template=FINAL_TEMPLATE, no_memory=NO_MEMORY,
                          reward="lenient")  # memjax's own task: its recorded results were taken with this reader


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
