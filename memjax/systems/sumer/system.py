"""SUMER on the one training loop: `agent.name = "sumer"` (configs/sumer/train.py is the paper's 7B recipe).

Owns: `SumerSection` (the system's config section) and `SumerSystem` (LoCoMo data stream of the `sumer` split's
training questions, one `MemoryTools` per conversation, the SumerWorkflow on Qwen2.5 function calling, the judge,
and the held-out evaluation: greedy, one episode per validation question).
Fields where the paper is silent (docs/sumer.md, 'Paper-silent choices'): `embedder` ("wordllama", the offline
default; "file:PATH" precomputed vectors, e.g. the paper's, keyed by message content; "hashed"; "none": keyword
search only), the user turn naming the speakers and the sessions' date range, and the judge ("rule":
RuleBasedJudge, tests / smoke runs only; "openai": an OpenAI-compatible endpoint serving the paper's gpt-oss-120b).
Invariants: the stream is a pure function of (seed, position) (a permutation per epoch), so it resumes exactly;
evaluation asks the judge about EVERY answer, training only where F1 > 0. Evaluation metrics: reward, J, F1
(token-set), B1 per category and overall (percent), mean turns and tool calls, episodes without an answer
(scored wrong) and rollout wall time per question; `python -m memjax.evaluate configs/sumer/eval.py` runs it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...agents.heldout import judge_heldout, run_heldout
from .workflow import DEFAULT_SYSTEM, QwenSumerFormat, SumerConfig, SumerSample, SumerWorkflow
from .tools import MemoryTools
from ...data.locomo import CATEGORY_NAMES, Conversation, Question, load_locomo
from ...data.locomo_splits import split_conversations
from ...evaluation.locomo_table import score_table
from ...evaluation.profiles import get_profile
from ...memory.embedders import FileEmbedder, HashedBowEmbedder, WordLlamaEmbedder
from ...memory.retrieval import Retriever, conversation_records
from ...rewards.locomo import OpenAIJudge, RuleBasedJudge, token_set_f1
from ...rewards.text import bleu1, token_f1_multiset
from ..base import AgentSection, System, register


@dataclass(frozen=True)
class SumerSection(AgentSection):
    name: str = "sumer"
    data_path: str = ""  # locomo10.json (CC BY-NC: the user's copy, never shipped)
    split: str = "sumer"
    train_part: str = "train"
    eval_part: str = "validation"
    eval_limit: int = 0  # validation questions per evaluation (0 = all 1,349)
    group_size: int = 8
    temperature: float = 1.0  # training rollouts (paper); evaluation is greedy
    episode: SumerConfig = field(default_factory=SumerConfig)
    system_prompt: str = DEFAULT_SYSTEM
    embedder: str = "wordllama"  # wordllama | hashed | none | file:PATH (see the module docstring)
    embed_cache: str = ""  # directory for cached_encode ("" = no cache)
    judge: str = "rule"  # rule (tests only) | openai
    judge_url: str = "http://127.0.0.1:8000/v1"
    judge_model: str = "gpt-oss-120b"
    max_active: int = 0  # trajectories in flight (0 = all)
    metrics: str = "sumer"  # evaluation F1/B1 profile (memjax.evaluation.profiles): sumer | mem0 | locomo | memjax | ...

    def __post_init__(self):
        get_profile(self.metrics, "answer")
        if self.group_size < 1 or self.eval_limit < 0:
            raise ValueError(f"SumerSection: group_size must be >= 1 and eval_limit >= 0 ({self})")
        if self.judge not in ("rule", "openai"):
            raise ValueError(f"SumerSection.judge must be rule or openai, got {self.judge!r}")
        if self.embedder not in ("wordllama", "hashed", "none") and not self.embedder.startswith("file:"):
            raise ValueError(f"SumerSection.embedder must be wordllama, hashed, none or file:PATH, got {self.embedder!r}")
        if not self.temperature > 0:
            raise ValueError(f"SumerSection.temperature must be > 0 for training rollouts, got {self.temperature}")


def user_turn(conv: Conversation, question: str) -> str:
    s = conv.sessions
    span = f", from {s[0].date_time} to {s[-1].date_time}" if s and s[0].date_time and s[-1].date_time else ""
    return (f"The conversation is between {conv.speaker_a} and {conv.speaker_b}; it has {len(s)} sessions{span}.\n"
            f"Question: {question}")


@register
class SumerSystem(System):
    name = "sumer"
    section = SumerSection

    def __init__(self, cfg: SumerSection, *, seed: int = 0):
        super().__init__(cfg, seed=seed)
        self._parts: dict[str, list[Question]] | None = None
        self._convs: dict[str, Conversation] = {}
        self._tools: dict[str, MemoryTools] = {}
        self._judge = None

    # -- data --------------------------------------------------------------------------------------------
    def _load(self) -> dict[str, list[Question]]:
        if self._parts is None:
            c = self.cfg
            if not c.data_path or not os.path.isfile(c.data_path):
                raise FileNotFoundError(f"agent.data_path={c.data_path!r}: LoCoMo file not found "
                                        "(--set agent.data_path=.../locomo10.json)")
            parts = split_conversations(load_locomo(c.data_path), c.split)
            for p in (c.train_part, c.eval_part):
                if p not in parts:
                    raise KeyError(f"split {c.split} has no part {p!r}; parts: {', '.join(parts)}")
            self._convs = {cv.sample_id: cv for convs in parts.values() for cv in convs}
            self._parts = {p: [q for cv in convs for q in cv.questions if q.category != 5] for p, convs in parts.items()}
        return self._parts

    def _embedder(self):
        e = self.cfg.embedder
        if e == "none":
            return None
        if e == "hashed":
            return HashedBowEmbedder()
        if e == "wordllama":
            return WordLlamaEmbedder()
        return FileEmbedder(e[len("file:"):])

    def tools(self, conv_id: str) -> MemoryTools:
        if conv_id not in self._tools:
            self._load()
            retriever = Retriever(conversation_records(self._convs[conv_id]), self._embedder(),
                                  cache_dir=self.cfg.embed_cache or None)
            self._tools[conv_id] = MemoryTools(retriever, self.cfg.episode.tools)
        return self._tools[conv_id]

    def sample(self, q: Question) -> SumerSample:
        return SumerSample(q.question, q.answer or "", self.tools(q.conversation),
                           user=user_turn(self._convs[q.conversation], q.question), qid=q.qid, category=q.category,
                           evidence=tuple(q.evidence))

    def train_data(self, batch_size: int, seed: int):
        from ..base import CountingStream

        questions = self._load()[self.cfg.train_part]
        n = len(questions)

        def make(start: int, count: int) -> list[SumerSample]:
            out = []
            for i in range(start, start + count):
                perm = np.random.default_rng([seed, i // n]).permutation(n)
                out.append(self.sample(questions[int(perm[i % n])]))
            return out

        return CountingStream(make, batch_size)

    # -- rollout -----------------------------------------------------------------------------------------
    def judge(self):
        if self._judge is None:
            c = self.cfg
            self._judge = RuleBasedJudge() if c.judge == "rule" else OpenAIJudge(
                c.judge_url, c.judge_model, api_key=os.environ.get("OPENAI_API_KEY"))
        return self._judge

    def retained_kv(self) -> str:
        return "its tool loop continues each episode's retained KV after every tool call"

    def workflow(self, engine, tokenizer, *, train: bool = True) -> SumerWorkflow:
        ep = dataclasses.replace(self.cfg.episode, temperature=self.temperature if train else 0.0)
        return SumerWorkflow(QwenSumerFormat(tokenizer, self.cfg.system_prompt), self.judge(), ep,
                             window=engine.config.window)

    # -- evaluation --------------------------------------------------------------------------------------
    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        qs = self._load()[self.cfg.eval_part]
        qs = qs[: self.cfg.eval_limit] if self.cfg.eval_limit else qs
        res = run_heldout(engine, self.workflow(engine, tokenizer, train=False), [self.sample(q) for q in qs],
                           seed=self.seed, max_active=self.cfg.max_active, progress=False)
        out = summarize(qs, res.traces, res.rewards, res.stats, self.judge(), metrics=self.cfg.metrics)
        out["seconds_per_question"] = float(res.stats["seconds"]) / max(len(qs), 1)
        return out


def summarize(questions: list[Question], traces: list[dict], rewards: list[float], stats: dict, judge, *,
              metrics: str = "sumer") -> dict:
    """Per-category and overall F1 / B1 / J (percent), reward, turns, calls and no-answer counts; F1 / B1 from the
    answer metric profile `metrics` (memjax.evaluation.profiles; `SumerSection.metrics`)."""
    answers = [t["answer"] for t in traces]
    verdicts = judge_heldout(judge, [(q.question, q.answer or "", a or "") for q, a in zip(questions, answers)])
    recs = [{"category": q.category, "prediction": a, "gold": q.answer or "", "f1_set": token_set_f1(a, q.answer),
             "f1": token_f1_multiset(a, [q.answer]), "b1": bleu1(a, [q.answer]), "j": float(v.correct and a is not None)}
            for q, a, v in zip(questions, answers, verdicts)]
    table = score_table(recs, metrics=metrics)
    out: dict[str, Any] = {"reward": float(np.mean(rewards)) if rewards else 0.0,
                           "no_answer": float(sum(a is None for a in answers)),
                           "mean_turns": float(stats.get("mean_turns", 0.0)),
                           "mean_calls": float(stats.get("mean_calls", 0.0))}
    for cat, row in table.items():
        for m in ("F1", "B1", "J"):
            if row[m] is not None:
                out[f"{m}_{cat}"] = float(row[m])
    for c in (1, 2, 3, 4):
        out[f"n_{CATEGORY_NAMES[c]}"] = float(sum(q.category == c for q in questions))
    out["traces"] = traces[:4]
    return out
