"""The memory bank: immutable records, cheap snapshots, size accounting and JSON round trip.

Owns: `MemoryRecord` (the superset of what the three papers store: id, conversation, speaker, session,
session time, dia_ids, content, embedding), `MemoryBank`, `BankSnapshot`.

Invariants:
- records are frozen; every change replaces a record, so a snapshot is a shallow copy of the id -> record dict
  (O(n) pointers, no record copied) and restoring it can never be disturbed by later edits of either side;
- ids are unique; new ids are 8 lower-case hex digits drawn deterministically from (seed, counter) — the counter
  travels with snapshots, so a re-rolled session from a snapshot draws the same ids as the first roll-out;
- insertion order is kept (it is the order prompts list memories in);
- `words()` counts `\\b\\w+\\b` matches over the contents (Memory-R2's code Tok); `tokens(tokenize)` sums the length of
  `tokenize(content)` for any tokenizer callable (e.g. `memjax.Tokenizer.encode`).
Operations that change the bank in the two styles the papers use live in `memjax.memory.ops`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

_HEX8 = re.compile(r"[0-9a-f]{8}")
_WORD = re.compile(r"\b\w+\b")


@dataclass(frozen=True)
class MemoryRecord:
    id: str
    content: str
    conversation: str = ""
    speaker: str = ""
    session: int | None = None
    session_time: str | None = None
    dia_ids: tuple[str, ...] = ()
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("MemoryRecord.id: must be a non-empty string")
        if not isinstance(self.content, str):
            raise ValueError(f"MemoryRecord.content: expected str, got {type(self.content).__name__} ({self.id})")
        if not isinstance(self.dia_ids, tuple):
            object.__setattr__(self, "dia_ids", tuple(self.dia_ids))
        if self.embedding is not None:
            e = np.asarray(self.embedding, dtype=np.float32)
            if e.ndim != 1:
                raise ValueError(f"MemoryRecord.embedding: expected a 1-D vector, got shape {e.shape} ({self.id})")
            e.setflags(write=False)
            object.__setattr__(self, "embedding", e)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "conversation": self.conversation, "speaker": self.speaker, "session": self.session,
                "session_time": self.session_time, "dia_ids": list(self.dia_ids), "content": self.content,
                "embedding": None if self.embedding is None else self.embedding.tolist()}

    @staticmethod
    def from_json(d: dict[str, Any]) -> MemoryRecord:
        if not isinstance(d, dict) or "id" not in d or "content" not in d:
            raise ValueError("MemoryRecord: JSON object needs 'id' and 'content'")
        emb = d.get("embedding")
        return MemoryRecord(id=d["id"], content=d["content"], conversation=d.get("conversation", ""),
                            speaker=d.get("speaker", ""), session=d.get("session"),
                            session_time=d.get("session_time"), dia_ids=tuple(d.get("dia_ids", ())),
                            embedding=None if emb is None else np.asarray(emb, dtype=np.float32))


@dataclass(frozen=True)
class BankSnapshot:
    """A frozen view of a bank at one moment (records are shared with the bank, never copied)."""

    records: MappingProxyType
    seed: int
    counter: int


def is_hex_id(s: object) -> bool:
    return isinstance(s, str) and _HEX8.fullmatch(s) is not None


class MemoryBank:
    """An ordered id -> `MemoryRecord` map; mutate through `put`/`remove` (or `memjax.memory.ops`)."""

    def __init__(self, records: Iterable[MemoryRecord] = (), *, seed: int = 0, counter: int = 0):
        self._records: dict[str, MemoryRecord] = {}
        self.seed, self.counter = int(seed), int(counter)
        for r in records:
            if r.id in self._records:
                raise ValueError(f"MemoryBank: duplicate id {r.id!r}")
            self._records[r.id] = r

    # -- reading -------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[MemoryRecord]:
        return iter(self._records.values())

    def __contains__(self, rid: object) -> bool:
        return rid in self._records

    def get(self, rid: str) -> MemoryRecord | None:
        return self._records.get(rid)

    def ids(self) -> list[str]:
        return list(self._records)

    def dia_ids(self) -> frozenset[str]:
        return frozenset(d for r in self._records.values() for d in r.dia_ids)

    def find(self, speaker: str, content: str) -> MemoryRecord | None:
        for r in self._records.values():
            if r.speaker == speaker and r.content == content:
                return r
        return None

    def words(self) -> int:
        return sum(len(_WORD.findall(r.content)) for r in self._records.values())

    def tokens(self, tokenize: Callable[[str], list[int]]) -> int:
        return sum(len(tokenize(r.content)) for r in self._records.values())

    # -- writing -------------------------------------------------------------------------------------------------
    def new_id(self) -> str:
        """A fresh 8-hex id, deterministic in (seed, counter); skips the (rare) collisions."""
        while True:
            h = hashlib.sha256(f"{self.seed}:{self.counter}".encode()).hexdigest()[:8]
            self.counter += 1
            if h not in self._records:
                return h

    def put(self, record: MemoryRecord) -> MemoryRecord:
        self._records[record.id] = record
        return record

    def add(self, content: str, **fields: Any) -> MemoryRecord:
        return self.put(MemoryRecord(id=self.new_id(), content=content, **fields))

    def replace(self, rid: str, **changes: Any) -> MemoryRecord:
        return self.put(replace(self._records[rid], **changes))

    def remove(self, rid: str) -> MemoryRecord:
        return self._records.pop(rid)

    # -- snapshots -----------------------------------------------------------------------------------------------
    def snapshot(self) -> BankSnapshot:
        return BankSnapshot(MappingProxyType(dict(self._records)), self.seed, self.counter)

    @staticmethod
    def restore(snap: BankSnapshot) -> MemoryBank:
        return MemoryBank(snap.records.values(), seed=snap.seed, counter=snap.counter)

    def copy(self) -> MemoryBank:
        return MemoryBank.restore(self.snapshot())

    # -- JSON ----------------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "counter": self.counter, "records": [r.to_json() for r in self]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> MemoryBank:
        if not isinstance(d, dict) or not isinstance(d.get("records"), list):
            raise ValueError("MemoryBank: JSON object needs a 'records' list")
        return MemoryBank((MemoryRecord.from_json(r) for r in d["records"]), seed=d.get("seed", 0),
                          counter=d.get("counter", 0))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json()), encoding="utf-8")

    @staticmethod
    def load(path: str | Path) -> MemoryBank:
        try:
            return MemoryBank.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError, ValueError) as e:
            raise ValueError(f"{path}: not a memory bank ({str(e).splitlines()[0]})") from None
