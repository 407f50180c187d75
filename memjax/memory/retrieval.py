r"""Search over memory records: cosine top-k, keyword AND, BM25, ±k neighbours and reciprocal-rank fusion.

Owns: `conversation_records` (one record per LoCoMo turn, SUMER's store), `Retriever`, `Hit`, `rrf`.

Invariants:
- a `Retriever` is built over a fixed, ordered list of records; it embeds them once (through `cached_encode`
  when `cache_dir` is given) and never mutates them;
- filters (speaker: case-insensitive equality; session: equality) apply before ranking; ties keep record order;
- `semantic`: cosine >= threshold, best first; `keyword`: records whose content or metadata contains ALL keywords
  (case-insensitive), in record order; `bm25`: the `bm25s` package over lower-cased `\w\w+` tokens minus English
  stop words, zero scores dropped;
- `neighbours(i, k)` is records i-k..i+k in record order (optionally within i's session); `with_context(hits, k)`
  gives each hit's window, merging windows that overlap or touch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.locomo import Conversation
from .bank import MemoryRecord
from .embedders import Embedder, cached_encode


@dataclass(frozen=True)
class Hit:
    index: int
    score: float
    record: MemoryRecord


def conversation_records(conv: Conversation, *, with_captions: bool = True,
                         with_speaker: bool = False) -> list[MemoryRecord]:
    """SUMER's memory: one record per message (id = dia_id), content = the text (+ image caption), optionally
    prefixed with "<speaker>: " (questions name people, message texts rarely name their own speaker)."""
    times = {s.index: s.date_time for s in conv.sessions}

    def content(t):
        c = t.display_text() if with_captions else t.text
        return f"{t.speaker}: {c}" if with_speaker else c

    return [MemoryRecord(id=t.dia_id, content=content(t),
                         conversation=conv.sample_id, speaker=t.speaker, session=t.session,
                         session_time=times[t.session], dia_ids=(t.dia_id,)) for t in conv.turns]


def rrf(rankings: Sequence[Sequence[int]], *, k: int = 60) -> list[int]:
    """Reciprocal-rank fusion: sum of 1 / (k + rank) over the rankings (rank from 1), best first."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking, start=1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r)
    return sorted(score, key=lambda i: (-score[i], i))


class Retriever:
    def __init__(self, records: Sequence[MemoryRecord], embedder: Embedder | None = None, *,
                 cache_dir: str | os.PathLike | None = None):
        self.records = list(records)
        self.embedder = embedder
        self.vectors = None
        if embedder is not None:
            self.vectors = cached_encode(embedder, [r.content for r in self.records], cache_dir)
        self._bm25 = None
        self._meta = [" ".join([r.content, r.speaker, r.session_time or "",
                                "" if r.session is None else f"session {r.session}", *r.dia_ids]).lower()
                      for r in self.records]

    def _allowed(self, speaker: str | None, session: int | None) -> np.ndarray:
        ok = np.ones(len(self.records), bool)
        if speaker is not None:
            ok &= np.array([r.speaker.lower() == speaker.lower() for r in self.records], bool)
        if session is not None:
            ok &= np.array([r.session == session for r in self.records], bool)
        return ok

    def _top(self, scores: np.ndarray, ok: np.ndarray, k: int, floor: float) -> list[Hit]:
        idx = np.flatnonzero(ok & (scores >= floor))
        order = idx[np.argsort(-scores[idx], kind="stable")][:k]
        return [Hit(int(i), float(scores[i]), self.records[i]) for i in order]

    def semantic(self, query: str, k: int = 10, *, threshold: float = -1.0, speaker: str | None = None,
                 session: int | None = None) -> list[Hit]:
        if self.embedder is None or self.vectors is None:
            raise ValueError("Retriever.semantic: built without an embedder")
        if not self.records:
            return []
        q = self.embedder.encode([query])[0]
        return self._top(self.vectors @ q, self._allowed(speaker, session), k, threshold)

    def keyword(self, keywords: Sequence[str] | str, *, speaker: str | None = None,
                session: int | None = None) -> list[Hit]:
        kws = [w.lower() for w in ([keywords] if isinstance(keywords, str) else keywords) if w.strip()]
        if not kws:
            return []
        ok = self._allowed(speaker, session)
        return [Hit(i, 1.0, self.records[i]) for i, m in enumerate(self._meta) if ok[i] and all(w in m for w in kws)]

    def bm25(self, query: str, k: int = 10, *, speaker: str | None = None, session: int | None = None) -> list[Hit]:
        import bm25s

        if not self.records:
            return []
        if self._bm25 is None:
            self._bm25 = bm25s.BM25()
            self._bm25.index(bm25s.tokenize([r.content for r in self.records], stopwords="en", show_progress=False),
                             show_progress=False)
        toks = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        known = [t for t in toks if t in self._bm25.vocab_dict]
        if not known:
            return []
        scores = np.asarray(self._bm25.get_scores(known), np.float32)
        return self._top(scores, self._allowed(speaker, session) & (scores > 0), k, -np.inf)

    def neighbours(self, index: int, k: int = 2, *, same_session: bool = False) -> list[MemoryRecord]:
        if not 0 <= index < len(self.records):
            raise IndexError(f"Retriever.neighbours: index {index} outside 0..{len(self.records) - 1}")
        me = self.records[index]
        out = []
        for j in range(max(0, index - k), min(len(self.records), index + k + 1)):
            r = self.records[j]
            if r.conversation == me.conversation and (not same_session or r.session == me.session):
                out.append(r)
        return out

    def with_context(self, hits: Sequence[Hit], k: int = 2, *, same_session: bool = False) -> list[list[MemoryRecord]]:
        """SUMER's hit +- k messages; overlapping or touching windows of the same conversation are merged, windows
        come in the order of their best hit."""
        spans: list[tuple[int, int, int]] = []          # (start, end, first hit rank)
        for rank, h in enumerate(hits):
            win = [i for i in range(max(0, h.index - k), min(len(self.records), h.index + k + 1))
                   if self.records[i].conversation == self.records[h.index].conversation
                   and (not same_session or self.records[i].session == self.records[h.index].session)]
            spans.append((win[0], win[-1], rank))
        merged: list[list[int]] = []

        def joins(a: int, last: int) -> bool:
            x, y = self.records[a], self.records[last]
            return a <= last + 1 and x.conversation == y.conversation and (not same_session or x.session == y.session)

        for a, b, rank in sorted(spans):
            if merged and joins(a, merged[-1][1]):
                merged[-1][1] = max(merged[-1][1], b)
                merged[-1][2] = min(merged[-1][2], rank)
            else:
                merged.append([a, b, rank])
        return [[self.records[i] for i in range(a, b + 1)] for a, b, _ in sorted(merged, key=lambda m: m[2])]
