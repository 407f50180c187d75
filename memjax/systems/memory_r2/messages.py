"""Memory-R2 message building and model-output parsing: the turn view, extractor / manager / answer-agent messages,
candidate memories for the manager, fact and answer parsing.

Owns pure functions over memjax.memory records; the texts are memory_r2/prompts.py's, unchanged, and each function
fills them exactly as the public code does (its docstring says how):
- `format_turns(turns)` -> [{"speaker", "text", "dia_id"}]: the public code's turn view, a blip caption appended
  to the text as " [Sent an image showing <caption>]";
- `extractor_message`, `manager_payload` / `manager_message`, `qa_prompt`: the three roles' user messages;
- `select_candidates(...)`: per fact, the top memories of the fact's speaker, de-duplicated, at most 25 in all;
- `parse_facts(text)` -> (facts, FactStats), `parse_answer` (answer parser "last_tag") and `parse_answer_official`
  (answer parser "official", Memory-R2's `extract_answer_from_text`), `answer_parser(name)`;
- `VectorCache`: embeddings of memory contents, each distinct text encoded once per cache.
Invariants: parsers never raise on model output; a malformed fact or object is dropped and counted; ties keep bank
order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...memory import MemoryRecord, parse_json_object, r2_view
from .prompts import (EXTRACTOR_PREFIX, EXTRACTOR_USER, IMAGE_CAPTION, MANAGER_PREFIX, MANAGER_TEMPLATE,
                                QA_TEMPLATE)

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
# Memory-R2 @357b4ec parse_response.py extract_answer_from_text, as (pattern, strip) in the order tried
_OFFICIAL_RULES = ((re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE), True),
                   (re.compile(r"\*\*Answer:\*\*\s*(.*)"), False),
                   (re.compile(r"\*\*Answer:\s*(.*?)\*\*"), False),
                   (re.compile(r"Answer:\s*(.*)"), False))
ANSWER_PARSERS = ("official", "last_tag")


def _get(turn: Any, name: str, default: Any = None) -> Any:
    return turn.get(name, default) if isinstance(turn, dict) else getattr(turn, name, default)


def format_turns(turns: Iterable[Any]) -> list[dict[str, str]]:
    """LoCoMo turns (memjax.data.locomo.Turn or dicts with speaker/text/dia_id[/blip_caption])."""
    out = []
    for t in turns:
        text = _get(t, "text", "")
        caption = _get(t, "image_caption") or _get(t, "blip_caption")
        if caption:
            text = IMAGE_CAPTION.format(text=text, caption=caption)
        out.append({"speaker": _get(t, "speaker", "Unknown"), "text": text, "dia_id": _get(t, "dia_id", "")})
    return out


def extractor_message(turns: Iterable[Any], *, first: bool) -> str:
    """EXTRACTOR_USER with `{turns}` = Python `str()` of `format_turns(turns)` (not JSON: the public code formats the
    list object itself); a chat's later messages (first=False) start with EXTRACTOR_PREFIX."""
    body = EXTRACTOR_USER.replace("{turns}", str(format_turns(turns)))
    return body if first else EXTRACTOR_PREFIX + body


@dataclass(frozen=True)
class Fact:
    speaker: str
    dia_id: str
    fact: str


@dataclass
class FactStats:
    bad_json: int = 0  # no JSON object with a "facts" list
    malformed: int = 0  # an item dropped (not an object, no string fact / speaker)
    bad_dia_id: int = 0  # kept with dia_id "" (missing or not a string)
    log: list[str] = field(default_factory=list)


def parse_facts(text: object, stats: FactStats | None = None) -> tuple[list[Fact], FactStats]:
    """(facts, stats): the first JSON object of the text (``` fences allowed) must hold a "facts" list.

    Each item needs a non-empty string "fact" and a string "speaker"; "dia_id" must be a string (anything else
    becomes "" and is counted). Never raises; a bad object is a counted no-op (no facts)."""
    stats = stats if stats is not None else FactStats()
    obj = parse_json_object(text)
    items = obj.get("facts") if obj is not None else None
    if not isinstance(items, list):
        stats.bad_json += 1
        stats.log.append(f"no 'facts' list in {str(text)[:80]!r}")
        return [], stats
    facts = []
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("fact"), str) or not it["fact"].strip() \
                or not isinstance(it.get("speaker"), str):
            stats.malformed += 1
            stats.log.append(f"fact dropped: {str(it)[:80]!r}")
            continue
        dia = it.get("dia_id")
        if not isinstance(dia, str):
            stats.bad_dia_id += 1
            dia = ""
        facts.append(Fact(it["speaker"], dia, it["fact"]))
    return facts, stats


class VectorCache:
    """content -> L2-normalised vector under one embedder; `vectors(texts)` encodes only unseen texts."""

    def __init__(self, embedder):
        self.embedder, self._v = embedder, {}

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self._v))
        if new:
            for t, v in zip(new, np.asarray(self.embedder.encode(new), np.float32)):
                self._v[t] = v
        if not texts:
            return np.zeros((0, int(self.embedder.dim)), np.float32)
        return np.stack([self._v[t] for t in texts])


def top_memories(records: Sequence[MemoryRecord], vecs: np.ndarray, query: np.ndarray, *, k: int,
                 threshold: float, speaker: str | None = None) -> list[int]:
    """Indices of the best k records (cosine >= threshold, optional speaker equality), best first."""
    if not len(records):
        return []
    scores = vecs @ query
    ok = scores >= threshold
    if speaker is not None:
        ok &= np.array([r.speaker == speaker for r in records], bool)
    idx = np.flatnonzero(ok)
    return [int(i) for i in idx[np.argsort(-scores[idx], kind="stable")][:k]]


def select_candidates(records: Sequence[MemoryRecord], facts: Sequence[Fact], cache: VectorCache, *,
                      top_k: int = 5, threshold: float = 0.1, max_total: int = 25,
                      same_speaker: bool = True) -> tuple[list[MemoryRecord], list[list[str]]]:
    """(candidate records, per-fact related memory ids).

    Per fact, the top `top_k` memories of the fact's speaker (same_speaker=True, as the code's search(speaker=...))
    with cosine >= threshold, best first; de-duplicated across facts in first-seen order, at most `max_total`.
    Ties keep bank order."""
    related: list[list[str]] = [[] for _ in facts]
    if not records or not facts:
        return [], related
    vecs = cache.vectors([r.content for r in records])
    fvecs = cache.vectors([f.fact for f in facts])
    chosen: dict[str, MemoryRecord] = {}
    for j, f in enumerate(facts):
        for i in top_memories(records, vecs, fvecs[j], k=top_k, threshold=threshold,
                              speaker=f.speaker if same_speaker else None):
            r = records[i]
            if r.id not in chosen:
                if len(chosen) >= max_total:
                    continue
                chosen[r.id] = r
            related[j].append(r.id)
    return list(chosen.values()), related


def manager_payload(facts: Sequence[Fact], related: Sequence[Sequence[str]],
                    candidates: Sequence[MemoryRecord]) -> dict[str, Any]:
    return {"memories": r2_view(candidates),
            "facts": [{"speaker": f.speaker, "dia_id": f.dia_id, "fact": f.fact, "related_memory_ids": list(ids)}
                      for f, ids in zip(facts, related)]}


def manager_message(payload: dict[str, Any], *, first: bool) -> str:
    """MANAGER_TEMPLATE with `{new_facts}` = json.dumps({"memories": [...], "facts": [...]}, indent=2) (json's defaults,
    ASCII escapes, as the code); a fact carries {"speaker", "dia_id", "fact", "related_memory_ids"}
    (`manager_payload`); later messages (first=False) start with MANAGER_PREFIX."""
    body = MANAGER_TEMPLATE.replace("{new_facts}", json.dumps(payload, indent=2))
    return body if first else MANAGER_PREFIX + body


def qa_memories(records: Sequence[MemoryRecord]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for r in records:
        if r.content not in seen:
            seen.add(r.content)
            out.append({"session_time": r.session_time, "content": r.content})
    return out


def qa_prompt(speaker_1: str, speaker_2: str, memories_1: Sequence[MemoryRecord],
              memories_2: Sequence[MemoryRecord], question: str) -> str:
    """QA_TEMPLATE with each speaker's memories as json.dumps([{"session_time", "content"}], indent=2), contents
    de-duplicated (first kept), in retrieval order."""
    return (QA_TEMPLATE.replace("{{speaker_1}}", speaker_1).replace("{{speaker_2}}", speaker_2)
            .replace("{{speaker_1_memories}}", json.dumps(qa_memories(memories_1), indent=2))
            .replace("{{speaker_2_memories}}", json.dumps(qa_memories(memories_2), indent=2))
            .replace("{{question}}", question))


def parse_answer(text: object) -> str | None:
    """The text inside the last <answer>...</answer> (stripped), None when absent (memjax's earlier reader; answer
    parser "last_tag")."""
    if not isinstance(text, str):
        return None
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def parse_answer_official(text: object) -> str | None:
    """The answer as Memory-R2's official `extract_answer_from_text` reads it (@357b4ec
    src/verl/verl/rema_trainer/memory/utils/parse_response.py; answer parser "official"): the first rule that matches,
      1. the FIRST <answer>...</answer>, tag names case-insensitive, content stripped;
      2. `**Answer:**` then optional whitespace (newlines included): the rest of that line, not stripped;
      3. `**Answer:` then optional whitespace: the shortest text up to the next `**`;
      4. `Answer:` anywhere then optional whitespace: the rest of that line, not stripped.
    Rules 2-4 are case-sensitive. None when no rule matches (the official code returns "", which is what the answer
    agent then uses; None lets it count the miss). Non-strings: None."""
    if not isinstance(text, str):
        return None
    for pattern, strip in _OFFICIAL_RULES:
        m = pattern.search(text)
        if m is not None:
            return m.group(1).strip() if strip else m.group(1)
    return None


def answer_parser(name: str):
    """The parser called `name` (ANSWER_PARSERS): "official" or "last_tag"."""
    if name not in ANSWER_PARSERS:
        raise ValueError(f"answer parser must be one of {ANSWER_PARSERS}, got {name!r}")
    return parse_answer_official if name == "official" else parse_answer
