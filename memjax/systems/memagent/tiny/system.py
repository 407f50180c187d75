"""The embedded tiny memory task on the one training loop (memjax/tiny: task, warm start, evaluation).

Owns `TinySection` (the `agent` section of configs/tiny.py, what `make demo` trains) and `TinySystem`.
Invariants: the model and tokenizer are the tiny task's own (the shipped supervised warm start and the
64-row word vocabulary), whatever the TrainConfig's `model` section says; the engine is the tiny task's
(memjax/tiny/model.py engine_config); the training stream is `make_split(task, RL_DATA_SEED + 1000 *
seed, ...)` sample by sample (a CountingStream), the held-out split uses HELDOUT_SEED and is never trained
on; evaluation is greedy accuracy (+ per hop) and, with `eval_samples`, the mean reward of temperature-1
answers. `eval_lengths` (num_chunks values) adds the same evaluation at each document length, under the keys
`chunks<N>/<metric>` (e.g. `chunks96/accuracy_hop2`): the same held-out questions (HELDOUT_SEED, indices
0..heldout_size-1) with documents of N chunks (memjax/systems/memagent/tiny/task.py: only the distractors grow). It is how
`python -m memjax.evaluate configs/memagent/tiny_eval.py --set agent.eval_lengths=3,6,12,24,48,96` measures length
extrapolation (benchmarks/memagent/length_extrapolation.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....tiny.model import engine_config
from .agent import evaluate, make_agent, memagent_config
from .task import HELDOUT_SEED, WORDS, TaskConfig, TinyTokenizer, make_sample, make_split
from ...base import AgentSection, CountingStream, System, register

RL_DATA_SEED = 7


@dataclass(frozen=True)
class TinySection(AgentSection):
    name: str = "tiny"
    task: TaskConfig = field(default_factory=TaskConfig)
    warmstart: str = ""  # directory from memjax.systems.memagent.tiny.warmstart; "" = the shipped one
    group_size: int = 8
    temperature: float = 1.0
    max_slots: int = 256  # engine slots: a step's 256 trajectories (32 questions x group 8) at once; the samples do not
    # depend on it (engine invariant). configs/tiny.py, 3 steps + 2 held-out evaluations of 256 x 5 answers on 2 CPU
    # cores: 64 slots 55.6 CPU-s (rollout 1.7 s per step, evaluation 8.1 s), 256 slots 35.5 CPU-s (0.6 s, 3.9 s), every
    # reward, gradient norm and accuracy the same; 512 slots no faster. Its engine keeps a 64-row round size for runs
    # with few trajectories (memjax/tiny/model.py engine_config)
    heldout_size: int = 256
    eval_samples: int = 4  # temperature-1 answers per held-out question for `accuracy_sampled` (0 = off)
    eval_lengths: tuple[int, ...] = ()  # also evaluate at these num_chunks (keys chunks<N>/...); () = off
    train_chunks: tuple[int, ...] = ()  # a length tail: each training document's num_chunks drawn (per sample,
    # from its index) from these values; () = task.num_chunks for every sample (benchmarks/async_schedules.py)

    def __post_init__(self):
        for f in ("group_size", "heldout_size", "max_slots"):
            if getattr(self, f) <= 0:
                raise ValueError(f"TinySection.{f} must be > 0, got {getattr(self, f)}")
        if any(int(n) < 2 for n in self.eval_lengths) or len(set(self.eval_lengths)) != len(self.eval_lengths):
            raise ValueError(f"TinySection.eval_lengths must list distinct num_chunks values >= 2, got "
                             f"{self.eval_lengths}")
        if any(int(n) < 2 for n in self.train_chunks):
            raise ValueError(f"TinySection.train_chunks must hold num_chunks values >= 2, got {self.train_chunks}")
        if self.eval_samples < 0 or not self.temperature >= 0:
            raise ValueError(f"TinySection: eval_samples and temperature must be >= 0 (got eval_samples="
                             f"{self.eval_samples}, temperature={self.temperature})")


@register
class TinySystem(System):
    name = "tiny"
    section = TinySection

    def load_model(self, source):
        # deferred: `python -m ...warmstart` then loads that module once
        from .warmstart import load_warmstart
        model, self.warmstart_info = load_warmstart(self.cfg.warmstart or None, log=lambda m: None)
        return model, TinyTokenizer(WORDS)

    def engine_config(self, default):
        return engine_config(max_slots=self.cfg.max_slots)

    def train_data(self, batch_size: int, seed: int):
        task, tail, data_seed = self.cfg.task, self.cfg.train_chunks, RL_DATA_SEED + 1000 * seed
        if not tail:
            return CountingStream(lambda start, n: make_split(task, data_seed, n, start=start), batch_size)

        def split(start: int, n: int) -> list:
            chunks = [int(tail[np.random.default_rng([data_seed, i, 1]).integers(len(tail))])
                      for i in range(start, start + n)]
            return [make_sample(dataclasses.replace(task, num_chunks=k), data_seed, i)
                    for k, i in zip(chunks, range(start, start + n))]
        return CountingStream(split, batch_size)

    def workflow(self, engine, tokenizer, *, train: bool = True):
        c = self.cfg
        return make_agent(engine, tokenizer, memagent_config(c.task, group_size=c.group_size,
                                                             temperature=c.temperature if train else 0.0))

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        c = self.cfg
        heldout = make_split(c.task, HELDOUT_SEED, c.heldout_size)
        ev = evaluate(engine, tokenizer, c.task, heldout, sampled=c.eval_samples)
        out = {k: v for k, v in ev.items() if k.startswith("accuracy")}
        for n in c.eval_lengths:
            task = dataclasses.replace(c.task, num_chunks=int(n))
            ev_n = ev if task == c.task else evaluate(engine, tokenizer, task, make_split(task, HELDOUT_SEED,
                                                                                        c.heldout_size),
                                                      sampled=c.eval_samples)
            out.update({f"chunks{n}/{k}": v for k, v in ev_n.items() if k.startswith("accuracy")})
        return {**out, "traces": ev["traces"][:8], "samples": heldout[:8]}
