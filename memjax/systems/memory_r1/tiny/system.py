"""`memory_r1_tiny`: the tiny Memory-R1 manager task (memjax/systems/memory_r1/tiny/task.py) as a System of the one training loop.

Owns the section and the System: the model is the shipped noisy-teacher warm start (memjax/systems/memory_r1/tiny/warmstart.py)
with the task's word tokenizer (not the run's ModelSource), the tiny engine, a training stream of fresh samples
(data seed `RL_DATA_SEED + 1000 * seed`, disjoint from the warm start's and the held-out seeds), and held-out
evaluation: greedy exact match (`em`, per case) and mean exact match of `eval_samples` temperature-1 answers
(`em_sampled`) on `heldout_size` samples of the held-out seed, and both again over every question about the
bank (`em_bank`, `em_bank_sampled`). `reward` picks the training reward: "fact" (the task's) or "bank"
(memjax/systems/memory_r1/tiny/task.py `bank_accuracy`).
Invariants: the stream's sample i depends only on (task, seed, i) (CountingStream), so a resumed run sees the
same samples; evaluation is deterministic for fixed weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ....tiny.model import engine_config
from .task import (HELDOUT_SEED, REWARDS, R1TaskConfig, TinyR1Workflow, evaluate_r1, make_r1_split,
                            r1_tokenizer)
from ...base import AgentSection, CountingStream, System, register

RL_DATA_SEED = 17


@dataclass(frozen=True)
class MemoryR1TinySection(AgentSection):
    name: str = "memory_r1_tiny"
    task: R1TaskConfig = field(default_factory=R1TaskConfig)
    warmstart: str = ""              # directory from memjax.systems.memory_r1.tiny.warmstart; "" = the shipped one
    group_size: int = 8
    temperature: float = 1.0
    heldout_size: int = 256
    eval_samples: int = 4            # temperature-1 answers per held-out sample for em_sampled (0 = off)
    max_slots: int = 64
    reward: str = "fact"             # "fact": the question about the fact's person; "bank": every bank question

    def __post_init__(self):
        for f in ("group_size", "heldout_size", "max_slots"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemoryR1TinySection.{f} must be > 0, got {getattr(self, f)}")
        if self.eval_samples < 0:
            raise ValueError(f"MemoryR1TinySection.eval_samples must be >= 0, got {self.eval_samples}")
        if self.reward not in REWARDS:
            raise ValueError(f"MemoryR1TinySection.reward: one of {REWARDS}, got {self.reward!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"MemoryR1TinySection.temperature must be finite and >= 0, got {self.temperature}")


@register
class MemoryR1TinySystem(System):
    name = "memory_r1_tiny"
    section = MemoryR1TinySection

    def __init__(self, cfg, *, seed: int = 0):
        super().__init__(cfg, seed=seed)
        self.heldout = make_r1_split(cfg.task, HELDOUT_SEED, cfg.heldout_size)

    def load_model(self, source):
        # deferred: `python -m ...warmstart` then loads that module once
        from .warmstart import load_r1_warmstart
        model, _ = load_r1_warmstart(self.cfg.warmstart or None)
        return model, r1_tokenizer()

    def engine_config(self, default):
        return engine_config(max_slots=self.cfg.max_slots)

    def train_data(self, batch_size: int, seed: int):
        task = self.cfg.task
        return CountingStream(lambda start, n: make_r1_split(task, RL_DATA_SEED + 1000 * seed, n, start), batch_size)

    def workflow(self, engine, tokenizer, *, train: bool = True):
        return TinyR1Workflow(tokenizer, temperature=self.temperature if train else 0.0, reward=self.cfg.reward)

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        return evaluate_r1(engine, tokenizer, self.heldout, sampled=self.cfg.eval_samples)
