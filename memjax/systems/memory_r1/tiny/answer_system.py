"""`memory_r1_answer_tiny`: the tiny Memory-R1 answer-agent task (memjax/systems/memory_r1/tiny/answer_task.py) as a System of the
one training loop, with or without memory distillation (`distill`, as memory_r1_answer's `agent.distill`).

Owns the section and the System: the model is the shipped noisy-teacher warm start
(memjax/systems/memory_r1/tiny/answer_warmstart.py, one model for both prompts) with the task's word tokenizer (not the run's
ModelSource), the tiny engine, a training stream of fresh samples (data seed `RL_DATA_SEED + 1000 * seed`,
disjoint from the warm start's and the held-out seeds; distractor counts drawn from the task's range), the
workflow (memjax/systems/memory_r1/workflow.py `AnswerWorkflow` with the tiny prompt and parser of the variant), and
held-out evaluation per distractor count in `eval_distractors` (`evaluate_answer`: greedy and sampled exact match,
the distillation variant's selection statistics).
Invariants: the stream's sample i depends only on (task, seed, i) (CountingStream), so a resumed run sees the
same samples; both variants are evaluated on the same held-out samples; evaluation is deterministic for fixed
weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ....tiny.model import engine_config
from .answer_task import R1AnswerTaskConfig, answer_tokenizer, answer_workflow, evaluate_answer, \
    make_answer_split
from ...base import AgentSection, CountingStream, System, register

RL_DATA_SEED = 37


@dataclass(frozen=True)
class MemoryR1AnswerTinySection(AgentSection):
    name: str = "memory_r1_answer_tiny"
    task: R1AnswerTaskConfig = field(default_factory=R1AnswerTaskConfig)
    distill: bool = True                 # False: the plain prompt (answer from all retrieved records)
    warmstart: str = ""                  # directory from memjax.systems.memory_r1.tiny.answer_warmstart; "" = the shipped one
    group_size: int = 8
    temperature: float = 1.0
    heldout_size: int = 128              # per distractor count
    eval_distractors: tuple[int, ...] = (1, 3, 5, 7)
    eval_samples: int = 4                # temperature-1 answers per held-out sample for em_sampled (0 = off)
    max_slots: int = 64

    def __post_init__(self):
        for f in ("group_size", "heldout_size", "max_slots"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemoryR1AnswerTinySection.{f} must be > 0, got {getattr(self, f)}")
        if self.eval_samples < 0:
            raise ValueError(f"MemoryR1AnswerTinySection.eval_samples must be >= 0, got {self.eval_samples}")
        if not self.eval_distractors or any(not 0 <= n <= 7 for n in self.eval_distractors):
            raise ValueError(f"MemoryR1AnswerTinySection.eval_distractors: counts in 0..7, got {self.eval_distractors}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"MemoryR1AnswerTinySection.temperature must be finite and >= 0, got {self.temperature}")


@register
class MemoryR1AnswerTinySystem(System):
    name = "memory_r1_answer_tiny"
    section = MemoryR1AnswerTinySection

    def load_model(self, source):
        # deferred: `python -m ...warmstart` then loads that module once
        from .answer_warmstart import load_r1_answer_warmstart
        model, _ = load_r1_answer_warmstart(self.cfg.warmstart or None)
        return model, answer_tokenizer()

    def engine_config(self, default):
        return engine_config(max_slots=self.cfg.max_slots)

    def train_data(self, batch_size: int, seed: int):
        task = self.cfg.task
        return CountingStream(lambda start, n: make_answer_split(task, RL_DATA_SEED + 1000 * seed, n, start),
                              batch_size)

    def workflow(self, engine, tokenizer, *, train: bool = True):
        return answer_workflow(tokenizer, distill=self.cfg.distill, temperature=self.temperature if train else 0.0)

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        c = self.cfg
        return evaluate_answer(engine, tokenizer, c.task, distill=c.distill, size=c.heldout_size,
                               distractors=c.eval_distractors, sampled=c.eval_samples)
