"""The tiny searchable-memory task on the one training loop: `agent.name = "tiny_sumer"` (configs/sumer/tiny.py).

Owns: `TinySumerSection` and `TinySumerSystem`: the tiny model and format from the shipped warm start
(memjax/systems/sumer/tiny/warmstart.py), the tiny engine, a training stream that never repeats the held-out split
(different data seed), SumerWorkflow on TinySumerFormat (the same episode code as the LoCoMo agent), and the
held-out evaluation (greedy mean reward, accuracy, submitted fraction, per question kind, and the mean reward
of `eval_samples` temperature-1 episodes per question).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .agent import engine_config, evaluate, workflow
from .task import HELDOUT_SEED, TinySumerFormat, TinySumerTask, make_split
from ...base import AgentSection, CountingStream, System, register

RL_DATA_SEED = 17


@dataclass(frozen=True)
class TinySumerSection(AgentSection):
    name: str = "tiny_sumer"
    task: TinySumerTask = field(default_factory=TinySumerTask)
    warmstart: str = ""  # directory from memjax.systems.sumer.tiny.warmstart; "" = the shipped one
    group_size: int = 8
    temperature: float = 1.0
    max_turns: int = 4  # the 64-token window holds about 3 tool rounds
    heldout_size: int = 256
    eval_samples: int = 4  # temperature-1 episodes per held-out question for `reward_sampled` (0 = off)
    max_slots: int = 64

    def __post_init__(self):
        for f in ("group_size", "max_turns", "heldout_size", "max_slots"):
            if getattr(self, f) < 1:
                raise ValueError(f"TinySumerSection.{f} must be >= 1, got {getattr(self, f)}")
        if self.eval_samples < 0 or not self.temperature > 0:
            raise ValueError(f"TinySumerSection: eval_samples must be >= 0 and temperature > 0 ({self})")


@register
class TinySumerSystem(System):
    name = "tiny_sumer"
    section = TinySumerSection

    def load_model(self, source):
        # deferred: `python -m ...warmstart` then loads that module once
        from .warmstart import load_warmstart
        model, self.warmstart_info = load_warmstart(self.cfg.warmstart or None)
        return model, TinySumerFormat()

    def engine_config(self, default):
        return engine_config(self.cfg.max_slots)

    def train_data(self, batch_size: int, seed: int):
        return CountingStream(lambda start, n: make_split(self.cfg.task, RL_DATA_SEED + 1000 * seed, n, start),
                              batch_size)

    def retained_kv(self) -> str:
        return "its tool loop continues each episode's retained KV after every tool call"

    def workflow(self, engine, tokenizer, *, train: bool = True):
        return workflow(self.temperature if train else 0.0, self.cfg.max_turns)

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        held = make_split(self.cfg.task, HELDOUT_SEED, self.cfg.heldout_size)
        out = evaluate(engine, held, sampled=self.cfg.eval_samples, max_turns=self.cfg.max_turns)
        out["traces"] = out["traces"][:4]
        return out
