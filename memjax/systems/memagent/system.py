"""MemAgent on the one training loop: RULER-HotpotQA documents read chunk by chunk (memagent/workflow.py).

Owns `MemAgentSection` (the `agent` section: the workflow's MemAgentConfig, the HotpotQA data, DAPO's overlong
shaping) and `MemAgentSystem`. `agent.data.path` is a raw HotpotQA JSON (RULER-HotpotQA synthesised at
`data.num_docs` documents) or a file of ready questions detected by content (memjax/data/memagent_files.py), read
as it is, validated when the system is built (so `--check` names a bad row), its last `eval_questions` records held
out and never trained on.
Invariants: the training stream is grain's (make_pipeline over HotpotQASource, shuffled by `data.seed`, endless,
drop_remainder, as a PipelineStream: each process reads only its block of every batch) and its iterator state is
what checkpoints save; the overlong penalty (DAPO) applies to the final-answer conversation's response length only
(memory updates have a hard budget and no penalty); held-out evaluation is off unless `eval_questions` > 0 (greedy
sub-EM on questions synthesised with a different data seed, so never trained on).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.config import ConfigError
from ...data import (
    HotpotQASource,
    PipelineStream,
    RulerHotpotQAConfig,
    load_hotpotqa,
    make_pipeline,
)
from ...data.memagent_files import QAFile, detect_layout, load_qa_file
from ...rl.dapo import overlong_penalty
from ..base import AgentSection, CountingStream, System, register
from .workflow import MemAgent, MemAgentConfig


@dataclass(frozen=True)
class HotpotQAData:
    path: str = ""  # HotpotQA JSON (RULER-HotpotQA synthesis), or official parquet / eval_{N}.json / plain JSONL
    num_docs: int = 200  # documents per synthesised context (200 ~ 28K tokens: the paper's training set)
    seed: int = 0

    def __post_init__(self):
        if self.num_docs <= 0:
            raise ValueError(f"HotpotQAData.num_docs must be > 0, got {self.num_docs}")


@dataclass(frozen=True)
class MemAgentSection(AgentSection):
    name: str = "memagent"
    memagent: MemAgentConfig = field(default_factory=lambda: MemAgentConfig(
        chunk_tokens=256, max_query_tokens=64, max_memory_tokens=64, max_final_tokens=32, group_size=4))
    data: HotpotQAData = field(default_factory=HotpotQAData)
    overlong_buffer: int = 0  # > 0: DAPO overlong penalty on the final answer in its last N tokens
    overlong_penalty: float = 1.0
    eval_questions: int = 0  # held-out questions for System.evaluate (0 = no held-out evaluation)

    def __post_init__(self):
        if self.overlong_buffer < 0 or not np.isfinite(self.overlong_penalty):
            raise ValueError("MemAgentSection: overlong_buffer must be >= 0 and overlong_penalty finite")
        if self.eval_questions < 0:
            raise ValueError(f"MemAgentSection.eval_questions must be >= 0, got {self.eval_questions}")


def _has_grain() -> bool:
    try:
        import grain  # noqa: F401
    except ImportError:
        return False
    return True


def _epoch_order(size: int, seed: int, start: int, n: int) -> list[int]:
    """Records start..start+n-1 of the endless stream that visits every record once per epoch, each epoch in the
    order numpy.random.default_rng([seed, epoch]).permutation(size) (the stream without grain)."""
    out = []
    for pos in range(start, start + n):
        epoch, i = divmod(pos, size)
        out.append(int(np.random.default_rng([seed, epoch]).permutation(size)[i]))
    return out


EVAL_DATA_SEED_OFFSET = 10_007  # held-out contexts: data.seed + this (another shuffle and distractor draw)


@register
class MemAgentSystem(System):
    name = "memagent"
    section = MemAgentSection

    def __init__(self, cfg: MemAgentSection, *, seed: int = 0):
        super().__init__(cfg, seed=seed)
        if not cfg.data.path:
            raise ConfigError("agent.data.path is not set: give a HotpotQA JSON file (--set agent.data.path=...)")
        if not Path(cfg.data.path).is_file():
            raise ConfigError(f"agent.data.path={cfg.data.path}: file not found")
        self._corpus = None
        self._questions: QAFile | None = None
        try:
            if detect_layout(cfg.data.path) != "hotpotqa":
                self._questions = load_qa_file(cfg.data.path)
        except ValueError as e:
            raise ConfigError(f"agent.data.path: {e}") from None
        if self._questions is not None and cfg.eval_questions >= len(self._questions):
            raise ConfigError(f"agent.eval_questions={cfg.eval_questions} leaves no training record of the "
                              f"{len(self._questions)} in {cfg.data.path}")

    @property
    def group_size(self) -> int:
        return self.cfg.memagent.group_size

    @property
    def temperature(self) -> float:
        return self.cfg.memagent.temperature

    @property
    def max_active(self) -> int:
        return self.cfg.memagent.max_active

    def corpus(self):
        if self._corpus is None:
            self._corpus = load_hotpotqa(self.cfg.data.path)
        return self._corpus

    def train_data(self, batch_size: int, seed: int):
        d = self.cfg.data
        if self._questions is not None:  # a file of ready questions: all but the held-out tail
            source = _Head(self._questions, len(self._questions) - self.cfg.eval_questions)
        else:
            source = HotpotQASource(self.corpus(), RulerHotpotQAConfig(num_docs=d.num_docs, seed=d.seed))
        if not _has_grain():  # the GPU image: the same records, numpy's shuffle order
            print("memjax: grain is not installed: MemAgent's training stream shuffles with numpy (same records, "
                  "another order; its checkpoints resume only without grain)", file=sys.stderr)
            return CountingStream(lambda start, n: [source[i] for i in _epoch_order(len(source), d.seed, start, n)],
                                  batch_size)
        return PipelineStream(lambda shard: make_pipeline(source, batch_size=batch_size, seed=d.seed, num_epochs=None,
                                                          drop_remainder=True, shard=shard))

    def workflow(self, engine, tokenizer, *, train: bool = True):
        mcfg = self.cfg.memagent if train else dataclasses.replace(self.cfg.memagent, temperature=0.0, group_size=1)
        return MemAgent(engine, tokenizer, mcfg)

    def shape(self, batch, traces: list[dict]):
        c = self.cfg
        if c.overlong_buffer <= 0:
            return batch
        final = batch.is_final
        resp_len = np.zeros(batch.num_samples, np.int64)
        resp_len[batch.sample[final]] = (batch.lengths - batch.prompt_len)[final]
        pen = overlong_penalty(resp_len, c.memagent.max_final_tokens, c.overlong_buffer, c.overlong_penalty)
        return batch.replace(reward=(batch.reward + pen).astype(np.float32))

    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        n = self.cfg.eval_questions
        if not n:
            return {}
        from ...agents.heldout import run_heldout

        d = self.cfg.data
        if self._questions is not None:
            source = self._questions
        else:
            source = HotpotQASource(self.corpus(), RulerHotpotQAConfig(num_docs=d.num_docs,
                                                                       seed=d.seed + EVAL_DATA_SEED_OFFSET))
        samples = [source[len(source) - 1 - i] for i in range(min(n, len(source)))]
        res = run_heldout(engine, self.workflow(engine, tokenizer, train=False), samples, seed=12345)
        return {"accuracy": float(np.mean(res.rewards)), "traces": res.traces[:8]}


class _Head:
    """The first `n` records of a random-access source (a grain MapDataset source)."""

    def __init__(self, source, n: int):
        self.source, self.n = source, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:
            raise IndexError(f"record {i} out of range [0, {self.n})")
        return self.source[i]
