r"""Memory-R2's reward: question crediting, the frozen answer agent, F1 minus the compression penalty.

Owns:
- `word_count(text)`: Tok of the paper = the number of `\b\w+\b` matches (the public code's count; a memory's size
  is `MemoryBank.words()`); words, not tokenizer tokens, so the count does not depend on the policy's tokenizer.
  C_t, the dialogue size of sessions 1..t, counts the turn texts only (docs/metric_profiles.md, 'Memory-R2 C_t').
- `compression_penalty(memory_words, dialogue_words, lam, alpha)` = lam * max(0, Tok(M) - alpha C_t) / C_t (0 when
  C_t = 0); `session_reward(f1s, ...)` = mean(f1s) - penalty (no credited question: the penalty alone).
- `credit_sessions(questions, sessions)`: session index -> questions with any evidence id in that session (the
  public code's global crediting: a question counts for EVERY session holding some of its evidence).
- Frozen answer agents `answer(bank, speakers, questions) -> list[str]`, each retrieving per speaker the top
  `top_k` (30) memories with cosine >= `threshold`: `OverlapAnswerAgent` (NOT a model; tests and smoke runs) and
  `EngineAnswerAgent` (qa.txt on a memjax Engine at temperature 0, read by `parser`: "official" or "last_tag"; a
  reply the parser finds nothing in is a counted empty answer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...data.locomo import Question
from ...engine import SamplingParams
from ...memory import MemoryBank
from .messages import VectorCache, answer_parser, qa_prompt, top_memories

_WORD = re.compile(r"\b\w+\b")
_DIA = re.compile(r"D(\d+):\d+")


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def compression_penalty(memory_words: float, dialogue_words: float, *, lam: float, alpha: float) -> float:
    if dialogue_words <= 0:
        return 0.0
    return lam * max(0.0, memory_words - alpha * dialogue_words) / dialogue_words


def session_reward(f1s: Sequence[float], memory_words: float, dialogue_words: float, *, lam: float,
                   alpha: float) -> float:
    f1 = float(np.mean(f1s)) if len(f1s) else 0.0
    return f1 - compression_penalty(memory_words, dialogue_words, lam=lam, alpha=alpha)


def evidence_sessions(q: Question) -> set[int]:
    return {int(m.group(1)) for d in q.evidence if (m := _DIA.fullmatch(d))}


def credit_sessions(questions: Sequence[Question], sessions: Sequence[int]) -> dict[int, list[int]]:
    """session index -> positions (in `questions`) of the questions credited to it."""
    out: dict[int, list[int]] = {s: [] for s in sessions}
    for i, q in enumerate(questions):
        for s in sorted(evidence_sessions(q)):
            if s in out:
                out[s].append(i)
    return out


class AnswerAgent(Protocol):
    name: str

    def answer(self, bank: MemoryBank, speakers: tuple[str, str], questions: Sequence[str]) -> list[str]: ...


@dataclass
class AnswerStats:
    asked: int = 0
    no_answer_tag: int = 0


class _Retrieving:
    def __init__(self, embedder, *, top_k: int = 30, threshold: float = 0.1):
        if top_k <= 0:
            raise ValueError(f"answer agent: top_k must be > 0, got {top_k}")
        self.cache, self.top_k, self.threshold, self.stats = VectorCache(embedder), top_k, threshold, AnswerStats()

    def retrieve(self, bank: MemoryBank, speakers: tuple[str, str], questions: Sequence[str]):
        """Per question: (memories of speaker 1, memories of speaker 2, best overall record or None)."""
        records = list(bank)
        vecs = self.cache.vectors([r.content for r in records])
        qv = self.cache.vectors(list(questions))
        out = []
        for j in range(len(questions)):
            per = [[records[i] for i in top_memories(records, vecs, qv[j], k=self.top_k, threshold=self.threshold,
                                                     speaker=s)] for s in speakers]
            best = None
            if records:
                scores = vecs @ qv[j]
                cand = [i for i, r in enumerate(records) if r.speaker in speakers and scores[i] >= self.threshold]
                if cand:
                    best = records[max(cand, key=lambda i: (scores[i], -i))]
            out.append((per[0], per[1], best))
        return out


class OverlapAnswerAgent(_Retrieving):
    """NOT a language model: the answer is the content of the memory closest to the question (by the
    embedder's cosine, either speaker), or "" when none passes the threshold. For tests and smoke runs."""

    name = "overlap"

    def answer(self, bank: MemoryBank, speakers: tuple[str, str], questions: Sequence[str]) -> list[str]:
        self.stats.asked += len(questions)
        return ["" if best is None else best.content for _, _, best in self.retrieve(bank, speakers, questions)]


class EngineAnswerAgent(_Retrieving):
    """qa.txt answered by a frozen model served by its own memjax Engine (greedy)."""

    name = "engine"

    def __init__(self, engine, tokenizer, embedder, *, top_k: int = 30, threshold: float = 0.1,
                 max_tokens: int = 512, stop_token_ids: Sequence[int] | None = None, parser: str = "official"):
        super().__init__(embedder, top_k=top_k, threshold=threshold)
        self.parse = answer_parser(parser)
        self.engine, self.tok = engine, tokenizer
        stops = stop_token_ids if stop_token_ids is not None else sorted({tokenizer.eos_id, tokenizer.endoftext_id})
        self.params = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop_token_ids=tuple(stops))

    def prompts(self, bank: MemoryBank, speakers: tuple[str, str], questions: Sequence[str]) -> list[str]:
        return [qa_prompt(speakers[0], speakers[1], m1, m2, q)
                for q, (m1, m2, _) in zip(questions, self.retrieve(bank, speakers, questions))]

    def answer(self, bank: MemoryBank, speakers: tuple[str, str], questions: Sequence[str]) -> list[str]:
        if not questions:
            return []
        ids = [self.tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)
               for p in self.prompts(bank, speakers, questions)]
        outs = self.engine.generate(ids, self.params)
        answers = []
        for o in outs:
            a = self.parse(self.tok.decode([t for t in o.token_ids if t not in self.params.stop_token_ids],
                                             skip_unknown=True))
            self.stats.no_answer_tag += a is None
            answers.append(a or "")
        self.stats.asked += len(questions)
        return answers
