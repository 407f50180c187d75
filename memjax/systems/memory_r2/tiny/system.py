"""`memory_r2_tiny`: the tiny Memory-R2 task (memory_r2/tiny/task.py) as a System of the one training loop.

Owns the section and the System: the shipped noisy-teacher warm start with the task's word tokenizer, the tiny
engine, a training stream of fresh episodes (data seed `RL_DATA_SEED + 1000 * seed`, disjoint from the warm
start's and the held-out seeds), LoGo-GRPO credit through the LoCoMo system's `logo_unit_advantages`, and held-out
evaluation (`evaluate_r2`: greedy, one rollout, mean F1 on the final bank; with `eval_samples` > 0 also sampled).
`logo = False` is plain GRPO at the session level (no local branch, the same per-session global credit).
`credit = "outcome"` gives every global unit its trajectory's reward (the mean of its session rewards), so every
session of a rollout gets one advantage (`outcome_unit_rewards`); with `logo = False` that is plain outcome GRPO,
the baseline whose credit the paper says cannot tell sessions apart. `rollout_calls_per_episode` gives the
expected calls per episode (group_size * sessions + local sessions * local_rollouts), so a plain-GRPO run can
match a LoGo run's budget.
Invariants: the stream's episode i depends only on (task, seed, i) (CountingStream), so a resumed run sees the
same episodes; evaluation is deterministic for fixed weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....rl.estimators import SINGLETONS
from ....tiny.model import engine_config
from .agent import TinyR2Workflow, evaluate_r2
from .task import HELDOUT_SEED, R2TaskConfig, make_r2_split, r2_tokenizer
from ...base import AgentSection, CountingStream, System, register
from ..system import logo_unit_advantages

RL_DATA_SEED = 27
CREDITS = ("session", "outcome")


def outcome_unit_rewards(batch):
    """The batch with every global row's (local_group -1) unit_reward set to its trajectory's reward."""
    if batch.unit_reward is None:
        raise ValueError("outcome_unit_rewards: the batch has no unit_reward (not a Memory-R2 batch)")
    local = batch.local_group if batch.local_group is not None else np.full(batch.num_rows, -1, np.int32)
    ur = np.where(local < 0, batch.reward[batch.sample], batch.unit_reward).astype(np.float32)
    return batch.replace(unit_reward=ur)


@dataclass(frozen=True)
class MemoryR2TinySection(AgentSection):
    name: str = "memory_r2_tiny"
    task: R2TaskConfig = field(default_factory=R2TaskConfig)
    warmstart: str = ""  # directory from memjax.systems.memory_r2.tiny.warmstart; "" = the shipped one
    logo: bool = True  # False: plain GRPO (no local branch)
    credit: str = "session"  # global units: "session" (paper) or "outcome" (one trajectory reward per rollout)
    group_size: int = 8
    temperature: float = 1.0
    heldout_size: int = 128
    eval_samples: int = 0  # > 0: held-out evaluation adds f1_sampled over this many temperature-1 rollouts
    adv_eps: float = 1e-6
    adv_singleton: str = "zero"  # a group of one: "zero" or "reward" (the official rule; MemoryR2Section)
    max_slots: int = 64

    def __post_init__(self):
        for f in ("group_size", "heldout_size", "max_slots"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemoryR2TinySection.{f} must be > 0, got {getattr(self, f)}")
        if self.eval_samples < 0:
            raise ValueError(f"MemoryR2TinySection.eval_samples must be >= 0, got {self.eval_samples}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"MemoryR2TinySection.temperature must be finite and >= 0, got {self.temperature}")
        if self.adv_eps <= 0:
            raise ValueError(f"MemoryR2TinySection.adv_eps must be > 0, got {self.adv_eps}")
        if self.credit not in CREDITS:
            raise ValueError(f"MemoryR2TinySection.credit must be one of {CREDITS}, got {self.credit!r}")
        if self.adv_singleton not in SINGLETONS:
            raise ValueError(f"MemoryR2TinySection.adv_singleton must be one of {SINGLETONS}, "
                             f"got {self.adv_singleton!r}")

    def rollout_calls_per_episode(self) -> float:
        t = self.task
        local = t.sessions * t.local_prob * t.local_rollouts if self.logo else 0.0
        return self.group_size * t.sessions + local


@register
class MemoryR2TinySystem(System):
    name = "memory_r2_tiny"
    section = MemoryR2TinySection

    def __init__(self, cfg, *, seed: int = 0):
        super().__init__(cfg, seed=seed)
        self.heldout = make_r2_split(cfg.task, HELDOUT_SEED, cfg.heldout_size)

    def load_model(self, source):
        # deferred: `python -m ...warmstart` then loads that module once
        from .warmstart import load_r2_warmstart
        model, _ = load_r2_warmstart(self.cfg.warmstart or None, self.cfg.task)
        return model, r2_tokenizer()

    def engine_config(self, default):
        return engine_config(max_slots=self.cfg.max_slots)

    def train_data(self, batch_size: int, seed: int):
        task = self.cfg.task
        return CountingStream(lambda start, n: make_r2_split(task, RL_DATA_SEED + 1000 * seed, n, start), batch_size)

    def workflow(self, engine, tokenizer, *, train: bool = True):
        c = self.cfg
        if train:
            return TinyR2Workflow(tokenizer, c.task, group_size=c.group_size, temperature=c.temperature, local=c.logo)
        return TinyR2Workflow(tokenizer, c.task, group_size=1, temperature=0.0, local=False)

    def advantages(self, batch, cfg):
        if self.cfg.credit == "outcome":
            batch = outcome_unit_rewards(batch)
        return logo_unit_advantages(batch, eps=self.cfg.adv_eps, singleton=self.cfg.adv_singleton)

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        return evaluate_r2(engine, tokenizer, self.cfg.task, self.heldout, sampled=self.cfg.eval_samples)
