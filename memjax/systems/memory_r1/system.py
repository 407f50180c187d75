"""Memory-R1 on the one training loop: `memory_r1_manager` (stage 1) and `memory_r1_answer` (stage 2).

Owns the two config sections and Systems. Both train on the `memory_r1` LoCoMo split (train conv-26, held-out
evaluation on conv-30), PPO (GAE with the critic) or GRPO (group_size > 1), as configs/memory_r1/ choose.
Decisions (the paper leaves them open; memjax's own):
- ONE frozen helper model (`setup`: a copy of the initial policy in its compute dtype, fresh buffers since the trainer
  may donate the policy's, or `frozen_hf_path`) on its own bounded-pool Engine plays every untrained part: the fact
  extractor, the bank-building manager and, in stage 1, the frozen answer agent that scores the manager (its pool
  sleeps through the update); in stage 2 it is the fixed manager, freed once the banks are built; on `frozen_devices`.
- Banks are built once in `setup` by a greedy construction pass over each conversation, kept in memory.
- Stage 1 samples are Alg. 1's single-step tuples, reward = the frozen agent's mean EM over the turn's linked
  questions after the sampled operations; stage 2 samples are the questions with 30 + 30 retrieved memories,
  reward = EM. The stream cycles through a fresh permutation per epoch drawn from (seed, epoch).
- `evaluate` runs the workflow greedily on the evaluation part (stage 1: `em`, op counts; stage 2: EM, F1, unmarked).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...agents.heldout import run_heldout
from ...engine import EngineConfig, KVCacheOptions
from ...rewards.locomo import token_set_f1
from ..base import (
    AgentSection,
    CountingStream,
    HeldModel,
    System,
    check_frozen_devices,
    frozen_copy,
    frozen_engine,
    register,
)
from .data import (
    EMBEDDERS,
    MemoryIndex,
    answer_sample,
    make_embedder,
    manager_samples,
    qa_items,
)
from .workflow import (
    AnswerWorkflow,
    FrozenAnswerer,
    ManagerWorkflow,
    MemoryR1Config,
    construct,
)


@dataclass(frozen=True)
class MemoryR1Section(AgentSection):
    data_path: str = ""                  # locomo10.json (the user's copy; CC BY-NC)
    split: str = "memory_r1"
    train_part: str = "train"
    eval_part: str = "validation"
    group_size: int = 1                  # 1 for PPO; > 1 for GRPO groups
    temperature: float = 1.0             # training rollouts; evaluation is greedy
    related_k: int = 5
    answer_top_k: int = 30
    distill: bool = True
    max_prompt_tokens: int = 4096
    max_response_tokens: int = 2048
    max_extract_tokens: int = 512
    embedder: str = "wordllama"
    frozen_hf_path: str = ""             # "" = a copy of the initial policy
    frozen_kv_cache_bytes: int = 4 << 30
    frozen_max_slots: int = 32          # per device of the frozen engine, as frozen_kv_cache_bytes
    frozen_devices: str = "engine"       # "engine": data-parallel over the policy engine's devices | "one"
    eval_limit: int = 0

    def __post_init__(self):
        if self.group_size <= 0:
            raise ValueError(f"{type(self).__name__}.group_size must be > 0, got {self.group_size}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"{type(self).__name__}.temperature must be finite and >= 0, got {self.temperature}")
        if self.embedder not in EMBEDDERS:
            raise ValueError(f"{type(self).__name__}.embedder: one of {EMBEDDERS}, got {self.embedder!r}")
        for f in ("frozen_kv_cache_bytes", "frozen_max_slots"):
            if getattr(self, f) <= 0:
                raise ValueError(f"{type(self).__name__}.{f} must be > 0, got {getattr(self, f)}")
        check_frozen_devices(type(self).__name__, self.frozen_devices)
        if self.eval_limit < 0:
            raise ValueError(f"{type(self).__name__}.eval_limit must be >= 0, got {self.eval_limit}")
        self.r1(temperature=self.temperature)         # validates the shared fields

    def r1(self, *, temperature: float) -> MemoryR1Config:
        return MemoryR1Config(related_k=self.related_k, answer_top_k=self.answer_top_k, distill=self.distill,
                              max_prompt_tokens=self.max_prompt_tokens, max_extract_tokens=self.max_extract_tokens,
                              max_manager_tokens=self.max_response_tokens, max_answer_tokens=self.max_response_tokens,
                              temperature=temperature)


@dataclass(frozen=True)
class MemoryR1ManagerSection(MemoryR1Section):
    name: str = "memory_r1_manager"
    history_turns: int = 50              # Alg. 1: the bank holds what the previous 50 turns produced

    def __post_init__(self):
        super().__post_init__()
        if self.history_turns <= 0:
            raise ValueError(f"MemoryR1ManagerSection.history_turns must be > 0, got {self.history_turns}")


    def held_models(self) -> tuple[HeldModel, ...]:
        # the frozen answer agent scores every op
        return (HeldModel("answer_agent", self.frozen_kv_cache_bytes, self.frozen_devices),)


@dataclass(frozen=True)
class MemoryR1AnswerSection(MemoryR1Section):
    name: str = "memory_r1_answer"
    # the frozen manager / extractor builds the banks in setup, then its engine is freed: nothing held in training


class _MemoryR1(System):
    """Shared setup: data, embedder, frozen engine, construction passes."""

    def __init__(self, cfg, *, seed: int = 0):
        super().__init__(cfg, seed=seed)
        self.frozen_engine = None
        self.index: MemoryIndex | None = None
        self.train_samples: list = []
        self.eval_samples: list = []
        self.construction_stats: dict[str, float] = {}

    def frozen_engines(self) -> list:
        return [self.frozen_engine] if self.frozen_engine is not None else []

    def engine_config(self, default):
        c = self.cfg
        need = c.max_prompt_tokens + c.max_response_tokens
        if default.window < need:
            default = dataclasses.replace(default, window=-(-need // default.page_size) * default.page_size)
        return default

    def make_frozen_engine(self, frozen_model):
        """The frozen model's own Engine (built in `setup`, before the run's engine): per device a window for the
        longest prompt + response, page 64, `frozen_max_slots` slots and a `frozen_kv_cache_bytes` KV pool, so
        that both engines fit each device; on the devices `frozen_devices` names (`frozen_engine`)."""
        c = self.cfg
        window = -(-(c.max_prompt_tokens + c.max_response_tokens) // 64) * 64
        one = EngineConfig(max_slots=c.frozen_max_slots, page_size=64, window=window,
                           prefill_slots=min(4, c.frozen_max_slots), prefill_chunk=1024, progress=False,
                           kv=KVCacheOptions(kv_cache_bytes=c.frozen_kv_cache_bytes))
        return frozen_engine(frozen_model, one, c.frozen_devices, self.frozen_on)

    def _parts(self):
        from ...data.locomo import load_locomo
        from ...data.locomo_splits import split_conversations

        if not self.cfg.data_path:
            raise FileNotFoundError("agent.data_path is empty: give locomo10.json (--set agent.data_path=...)")
        parts = split_conversations(load_locomo(self.cfg.data_path), self.cfg.split)
        for p in (self.cfg.train_part, self.cfg.eval_part):
            if p not in parts:
                raise KeyError(f"split {self.cfg.split} has no part {p!r}; parts: {', '.join(parts)}")
        return parts[self.cfg.train_part], parts[self.cfg.eval_part]

    def setup(self, model, tokenizer) -> None:
        from ...checkpoint.source import ModelSource

        c = self.cfg
        train, held = self._parts()
        frozen = ModelSource(hf_path=c.frozen_hf_path).load()[0] if c.frozen_hf_path else frozen_copy(model)
        self.frozen_engine = self.make_frozen_engine(frozen)
        self.index = MemoryIndex(make_embedder(c.embedder))
        built, self.construction_stats = construct(self.frozen_engine, tokenizer, self.index, train + held,
                                                   c.r1(temperature=0.0), seed=self.seed)
        self.train_samples = self._samples(train, built)
        self.eval_samples = self._samples(held, built)
        if not self.train_samples:
            raise ValueError(f"{self.name}: the {c.split}/{c.train_part} part gave no training samples")

    @abc.abstractmethod
    def _samples(self, convs, built) -> list:
        """The system's samples of these conversations, from their construction passes."""

    def train_data(self, batch_size: int, seed: int):
        def make(start: int, n: int) -> list:
            pool, out = self.train_samples, []
            for i in range(start, start + n):
                epoch, k = divmod(i, len(pool))
                perm = np.random.default_rng([seed, epoch]).permutation(len(pool))
                out.append(pool[perm[k]])
            return out

        return CountingStream(make, batch_size)

    def _eval_set(self) -> list:
        n = self.cfg.eval_limit
        return self.eval_samples[:n] if n else self.eval_samples


@register
class MemoryR1ManagerSystem(_MemoryR1):
    name = "memory_r1_manager"
    section = MemoryR1ManagerSection

    def _samples(self, convs, built) -> list:
        out = []
        for conv in convs:
            b = built[conv.sample_id]
            out += manager_samples(conv, b["facts"], b["snapshots"], conv.questions,
                                   history_turns=self.cfg.history_turns)
        return out

    def workflow(self, engine, tokenizer, *, train: bool = True):
        temp = self.temperature if train else 0.0
        answerer = FrozenAnswerer(self.frozen_engine, tokenizer, self.cfg.r1(temperature=0.0))
        return ManagerWorkflow(tokenizer, self.index, answerer, self.cfg.r1(temperature=temp))

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        samples = self._eval_set()
        if not samples:
            return {}
        res = run_heldout(engine, self.workflow(engine, tokenizer, train=False), samples)
        return {"em": float(np.mean(res.rewards)), "samples": float(len(samples)),
                **{k: float(v) for k, v in res.stats.items() if k.startswith("ops_")}, "traces": res.traces[:4]}


@register
class MemoryR1AnswerSystem(_MemoryR1):
    name = "memory_r1_answer"
    section = MemoryR1AnswerSection

    def setup(self, model, tokenizer) -> None:
        super().setup(model, tokenizer)
        if hasattr(self.frozen_engine, "sleep"):  # the banks are built: the fixed manager is not needed again
            self.frozen_engine.sleep()  # frees its pool and weights now (not whenever the engine is collected)
        self.frozen_engine = None

    def _samples(self, convs, built) -> list:
        out = []
        for conv in convs:
            bank = built[conv.sample_id]["bank"]
            for qa in qa_items(q for q in conv.questions if q.category != 5):
                out.append(answer_sample(bank, qa, (conv.speaker_a, conv.speaker_b), self.index,
                                         self.cfg.answer_top_k))
        return out

    def workflow(self, engine, tokenizer, *, train: bool = True):
        return AnswerWorkflow(tokenizer, self.cfg.r1(temperature=self.temperature if train else 0.0))

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        samples = self._eval_set()
        if not samples:
            return {}
        res = run_heldout(engine, self.workflow(engine, tokenizer, train=False), samples)
        f1 = [token_set_f1(t["answer"], t["gold"]) for t in res.traces]
        return {"em": float(np.mean(res.rewards)), "f1": float(np.mean(f1)), "samples": float(len(samples)),
                "answer_unmarked": float(res.stats["answer_unmarked"]), "traces": res.traces[:4]}
