"""Memory-R1's inputs: dialogue turns, QA items, retrieval over a changing bank, and the training tuples.

Owns: `TurnInput`, `QA`, `ManagerSample` (one single-step manager tuple), `AnswerSample` (one question with its
retrieved memories), `turn_inputs(conv)`, `qa_items(questions)`; `MemoryIndex` (cosine retrieval over a changing
`MemoryBank`: a record is embedded once, and again only after `apply_mem0` changed its text); `manager_samples`
(Alg. 1's training tuples in the single-step form) and `answer_sample` (Alg. 2's).
Choices where the paper is silent (memjax's own): one bank whose records carry their turn's speaker, retrieval
filtering by speaker; the manager's related memories are, as in Mem0, the top `related_k` (5) of the speaker's
memories per fact, merged in retrieval order; the answer agent gets the top `answer_top_k` (30) per speaker, best
first, with session dates; a turn's tuple uses the bank after the previous turn restricted to records from the
previous `history_turns` (50; Alg. 1 says 50, Appendix B 24) turns, "QAs linked to turn t" are those whose
evidence includes t's dia_id, and a turn with no fact or no linked question gives no tuple.
Invariants: snapshots are never mutated (a sample's bank is restored into a fresh MemoryBank per trajectory);
retrieval ties keep bank order; everything is deterministic given the embedder.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ...data.locomo import Conversation, Question
from ...memory import BankSnapshot, MemoryBank, MemoryRecord
from ...memory.embedders import Embedder


@dataclass(frozen=True)
class TurnInput:
    conversation: str
    speaker: str
    text: str
    dia_id: str = ""
    session: int | None = None
    session_time: str | None = None


@dataclass(frozen=True)
class QA:
    question: str
    answer: str
    qid: str = ""
    category: int = 0
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class ManagerSample:
    turn: TurnInput
    facts: tuple[str, ...]
    bank: BankSnapshot
    questions: tuple[QA, ...]
    speakers: tuple[str, str]


Memories = tuple[tuple[str | None, str], ...]          # (date_time, text), best first


@dataclass(frozen=True)
class AnswerSample:
    qa: QA
    speakers: tuple[str, str]
    memories: tuple[Memories, Memories]                # per speaker, in `speakers` order
    memory_dia_ids: tuple[str, ...] = ()               # dia_ids behind the retrieved memories (for M-Fail)


def turn_inputs(conv: Conversation) -> list[TurnInput]:
    """The conversation's turns in order (image captions appended as LoCoMo's `display_text`)."""
    times = {s.index: s.date_time for s in conv.sessions}
    return [TurnInput(conv.sample_id, t.speaker, t.display_text(), t.dia_id, t.session, times[t.session])
            for t in conv.turns]


def qa_items(questions: Iterable[Question]) -> list[QA]:
    return [QA(q.question, "" if q.answer is None else q.answer, q.qid, q.category, tuple(q.evidence))
            for q in questions]


class MemoryIndex:
    """Cosine top-k over a MemoryBank's records (see the module docstring)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def embed(self, bank: MemoryBank) -> None:
        missing = [r for r in bank if r.embedding is None]
        if missing:
            vecs = self.embedder.encode([r.content for r in missing])
            for r, v in zip(missing, vecs):
                bank.replace(r.id, embedding=v)

    def top_k(self, bank: MemoryBank, query: str, k: int, *, speaker: str | None = None) -> list[MemoryRecord]:
        self.embed(bank)
        recs = [r for r in bank if speaker is None or r.speaker == speaker]
        if not recs or k <= 0:
            return []
        q = self.embedder.encode([query])[0]
        scores = np.stack([r.embedding for r in recs]) @ q
        return [recs[i] for i in np.argsort(-scores, kind="stable")[:k]]

    def related(self, bank: MemoryBank, facts: Sequence[str], speaker: str, k: int) -> list[MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        for f in facts:
            for r in self.top_k(bank, f, k, speaker=speaker):
                out.setdefault(r.id, r)
        return list(out.values())


def answer_sample(bank: MemoryBank, qa: QA, speakers: tuple[str, str], index: MemoryIndex, k: int) -> AnswerSample:
    per = [index.top_k(bank, qa.question, k, speaker=s) for s in speakers]
    dia = tuple(dict.fromkeys(d for recs in per for r in recs for d in r.dia_ids))
    mems = tuple(tuple((r.session_time, r.content) for r in recs) for recs in per)
    return AnswerSample(qa, speakers, (mems[0], mems[1]), dia)


def window_snapshot(snap: BankSnapshot, window: frozenset[str]) -> BankSnapshot:
    """The snapshot restricted to records with at least one dia_id in `window` (records are shared)."""
    bank = MemoryBank((r for r in snap.records.values() if set(r.dia_ids) & window), seed=snap.seed,
                      counter=snap.counter)
    return bank.snapshot()


def manager_samples(conv: Conversation, facts: Sequence[Sequence[str]], snapshots: Sequence[BankSnapshot],
                    questions: Iterable[Question], *, history_turns: int = 50) -> list[ManagerSample]:
    """Alg. 1's single-step tuples of one conversation, from a construction pass over it (`facts[i]` extracted
    from turn i, `snapshots[i]` the bank after turn i); see the module docstring."""
    turns = turn_inputs(conv)
    if not (len(facts) == len(snapshots) == len(turns)):
        raise ValueError(f"manager_samples: {conv.sample_id} has {len(turns)} turns but {len(facts)} fact lists "
                         f"and {len(snapshots)} snapshots")
    if history_turns <= 0:
        raise ValueError(f"manager_samples.history_turns must be > 0, got {history_turns}")
    qas = qa_items(q for q in questions if q.category != 5)
    linked: dict[str, list[QA]] = {}
    for qa in qas:
        for d in qa.evidence:
            linked.setdefault(d, []).append(qa)
    speakers = (conv.speaker_a, conv.speaker_b)
    out = []
    for t, turn in enumerate(turns):
        if not facts[t] or turn.dia_id not in linked:
            continue
        window = frozenset(x.dia_id for x in turns[max(0, t - history_turns): t])
        prev = snapshots[t - 1] if t else MemoryBank(seed=0).snapshot()
        out.append(ManagerSample(turn, tuple(facts[t]), window_snapshot(prev, window), tuple(linked[turn.dia_id]),
                                 speakers))
    return out


EMBEDDERS = ("wordllama", "hashbow")


def make_embedder(name: str) -> Embedder:
    """The retrieval embedder by name: "wordllama" (static 256-d LLM-distilled embedding, offline; the default for
    real runs) or "hashbow" (hashed bag of words, no model: tests and lexical baselines)."""
    from ...memory.embedders import HashedBowEmbedder, WordLlamaEmbedder

    if name == "wordllama":
        return WordLlamaEmbedder()
    if name == "hashbow":
        return HashedBowEmbedder()
    raise ValueError(f"embedder: one of {EMBEDDERS}, got {name!r}")
