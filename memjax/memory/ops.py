"""Memory operations in the two styles the papers use, applied to a `MemoryBank` with every failure counted.

Owns: `parse_json_object` (first JSON object in model text, ``` fences allowed), `OpStats`, the prompt views
`mem0_view` / `r2_view` (what a manager prompt lists) and `apply_mem0` (Mem0 / Memory-R1 events over small
integer prompt ids) / `apply_r2` (Memory-R2's INSERT / UPDATE / DELETE over 8-hex ids); each apply function's
docstring gives its operation format and rules.

Invariants: never raises on model output; a changed content drops the stale embedding; each operation is either
applied or counted in exactly one reject bucket.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .bank import MemoryBank, MemoryRecord, is_hex_id

_DECODER = json.JSONDecoder()


def parse_json_object(text: object) -> dict | None:
    """The first JSON object that decodes at some '{' of `text` (None when there is none)."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        return None
    i = text.find("{")
    while i != -1:
        try:
            obj, _ = _DECODER.raw_decode(text, i)
            if isinstance(obj, dict):
                return obj
        except (json.JSONDecodeError, RecursionError):
            pass
        i = text.find("{", i + 1)
    return None


@dataclass
class OpStats:
    applied: dict[str, int] = field(default_factory=dict)
    merged: int = 0
    bad_json: int = 0
    bad_id: int = 0
    malformed: int = 0          # not an object, unknown event/type, missing or non-string content
    log: list[str] = field(default_factory=list)

    def ok(self, kind: str) -> None:
        self.applied[kind] = self.applied.get(kind, 0) + 1

    def reject(self, bucket: str, why: str) -> None:
        setattr(self, bucket, getattr(self, bucket) + 1)
        self.log.append(why)


def _dia(x: Any) -> tuple[str, ...]:
    if isinstance(x, str) and x:
        return (x,)
    if isinstance(x, list):
        return tuple(str(d) for d in x if isinstance(d, str) and d)
    return ()


def _append(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    return old + tuple(d for d in new if d not in old)


def mem0_view(records: Sequence[MemoryRecord]) -> tuple[list[dict[str, str]], list[str]]:
    """Mem0's prompt list `[{"id": "0", "text": ...}, ...]` and the id_map (prompt id i -> real id) for apply_mem0."""
    return [{"id": str(i), "text": r.content} for i, r in enumerate(records)], [r.id for r in records]


def r2_view(records: Sequence[MemoryRecord]) -> list[dict[str, Any]]:
    """Memory-R2's prompt list `[{memory_id, speaker, content, session_time, dia_ids}]` (real 8-hex ids)."""
    return [{"memory_id": r.id, "speaker": r.speaker, "content": r.content, "session_time": r.session_time,
             "dia_ids": list(r.dia_ids)} for r in records]


def apply_mem0(bank: MemoryBank, output: object, id_map: Sequence[str], *, speaker: str = "",
               conversation: str = "", session: int | None = None, session_time: str | None = None,
               dia_ids: Sequence[str] = (), stats: OpStats | None = None) -> OpStats:
    """Apply `{"memory": [{"id", "text", "event", "old_memory"?}]}` (Mem0's update-memory output).

    Mem0 / Memory-R1 style (the Memory-R1 paper, Fig. 9): the prompt lists memories with small integer ids ("0",
    "1", ...); `id_map[i]` is the real id the prompt called `i`. Events: ADD (new record, fresh real id), UPDATE
    (same real id, new text, dia_ids appended), DELETE, NONE. An id that is not a prompt id is rejected and
    counted."""
    stats = stats if stats is not None else OpStats()
    obj = parse_json_object(output)
    events = obj.get("memory") if obj is not None else None
    if not isinstance(events, list):
        stats.reject("bad_json", f"no 'memory' list in {str(output)[:80]!r}")
        return stats
    prompt_ids = {str(i): rid for i, rid in enumerate(id_map)}
    dia = tuple(dia_ids)
    for ev in events:
        if not isinstance(ev, dict):
            stats.reject("malformed", f"event is not an object: {ev!r}")
            continue
        kind = str(ev.get("event", "")).upper()
        text = ev.get("text")
        if kind in ("NONE", "NOOP"):
            stats.ok("NONE")
            continue
        if kind == "ADD":
            if not isinstance(text, str) or not text.strip():
                stats.reject("malformed", f"ADD without text: {ev!r}")
                continue
            bank.add(text, conversation=conversation, speaker=speaker, session=session,
                     session_time=session_time, dia_ids=dia)
            stats.ok("ADD")
            continue
        if kind not in ("UPDATE", "DELETE"):
            stats.reject("malformed", f"unknown event {kind!r}")
            continue
        rid = prompt_ids.get(str(ev.get("id")))
        if rid is None or rid not in bank:
            stats.reject("bad_id", f"{kind} with id {ev.get('id')!r} not in the prompt")
            continue
        if kind == "DELETE":
            bank.remove(rid)
        else:
            if not isinstance(text, str) or not text.strip():
                stats.reject("malformed", f"UPDATE without text: {ev!r}")
                continue
            bank.replace(rid, content=text, embedding=None, dia_ids=_append(bank.get(rid).dia_ids, dia),
                         session=session if session is not None else bank.get(rid).session,
                         session_time=session_time or bank.get(rid).session_time)
        stats.ok(kind)
    return stats


def apply_r2(bank: MemoryBank, output: object, *, conversation: str = "", session: int | None = None,
             session_time: str | None = None, stats: OpStats | None = None) -> OpStats:
    """Apply Memory-R2's `{"operations": [...]}` (its public code's operation format).

    `{"operations": [INSERT{speaker, content, dia_id} | UPDATE{memory_id, content, dia_id} | DELETE{memory_id}]}`
    with 8-hex ids. INSERT of an existing (speaker, content) merges the dia_id into that record (counted as
    `merged`); UPDATE keeps the id, replaces the content and appends the dia_id; DELETE drops the record with its
    dia_ids; a missing / unknown id fails that one operation (counted); bad JSON means no operation."""
    stats = stats if stats is not None else OpStats()
    obj = parse_json_object(output)
    ops = obj.get("operations") if obj is not None else None
    if not isinstance(ops, list):
        stats.reject("bad_json", f"no 'operations' list in {str(output)[:80]!r}")
        return stats
    for op in ops:
        if not isinstance(op, dict):
            stats.reject("malformed", f"operation is not an object: {op!r}")
            continue
        kind = str(op.get("type", op.get("operation", op.get("op", "")))).upper()
        content, dia = op.get("content"), _dia(op.get("dia_id", op.get("dia_ids")))
        if kind == "INSERT":
            speaker = op.get("speaker")
            if not isinstance(content, str) or not content.strip() or not isinstance(speaker, str):
                stats.reject("malformed", f"INSERT needs string speaker and content: {op!r}")
                continue
            same = bank.find(speaker, content)
            if same is not None:
                bank.replace(same.id, dia_ids=_append(same.dia_ids, dia))
                stats.merged += 1
            else:
                bank.add(content, conversation=conversation, speaker=speaker, session=session,
                         session_time=session_time, dia_ids=dia)
            stats.ok("INSERT")
            continue
        if kind not in ("UPDATE", "DELETE"):
            stats.reject("malformed", f"unknown operation {kind!r}")
            continue
        rid = op.get("memory_id")
        if not is_hex_id(rid) or rid not in bank:
            stats.reject("bad_id", f"{kind} with memory_id {rid!r}")
            continue
        if kind == "DELETE":
            bank.remove(rid)
        else:
            if not isinstance(content, str) or not content.strip():
                stats.reject("malformed", f"UPDATE without content: {op!r}")
                continue
            old = bank.get(rid)
            bank.replace(rid, content=content, embedding=None, dia_ids=_append(old.dia_ids, dia),
                         session=session if session is not None else old.session,
                         session_time=session_time or old.session_time)
        stats.ok(kind)
    return stats
