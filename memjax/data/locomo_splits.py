"""Named LoCoMo splits used by SUMER, Memory-R1 and Memory-R2, as their papers (and Memory-R2's public code) define them.

Owns: `SPLITS` (name -> parts) and `split_questions(data, name)` -> {part: [Question]}, `split_conversations`.

Invariants: category 5 (adversarial) is excluded from every split; parts are disjoint by conversation;
questions keep file order within a conversation and conversations keep the order the split lists them in.
- `sumer`: train = the first id of `random.seed(42); random.shuffle(ids in file order)` (conv-48 on the shipped
  file), validation = the other conversations in file order;
- `memory_r1`: train conv-26, validation conv-30, test the other eight (file order);
- `memory_r2`: train conv-43, conv-47; validation conv-44; test conv-41, 49, 50, 42, 48, 30, 26; questions whose
  evidence is empty (after the loader's repairs) are dropped as well.
"""

from __future__ import annotations

import random

from .locomo import Conversation, Locomo, Question

SPLITS = ("sumer", "memory_r1", "memory_r2")

_R2 = {"train": ("conv-43", "conv-47"), "validation": ("conv-44",),
       "test": ("conv-41", "conv-49", "conv-50", "conv-42", "conv-48", "conv-30", "conv-26")}


def sumer_train_id(ids: list[str]) -> str:
    """SUMER's training conversation: the first id after seeding Python's `random` with 42 and shuffling."""
    shuffled = list(ids)
    rng = random.Random(42)      # same stream as random.seed(42); random.shuffle(...)
    rng.shuffle(shuffled)
    return shuffled[0]


def split_conversations(data: Locomo, name: str) -> dict[str, list[Conversation]]:
    ids = [c.sample_id for c in data.conversations]
    if name == "sumer":
        train = sumer_train_id(ids)
        parts = {"train": (train,), "validation": tuple(i for i in ids if i != train)}
    elif name == "memory_r1":
        parts = {"train": ("conv-26",), "validation": ("conv-30",),
                 "test": tuple(i for i in ids if i not in ("conv-26", "conv-30"))}
    elif name == "memory_r2":
        parts = _R2
    else:
        raise KeyError(f"unknown LoCoMo split {name!r}; known: {', '.join(SPLITS)}")
    known = set(ids)
    for part, members in parts.items():
        missing = [m for m in members if m not in known]
        if missing:
            raise KeyError(f"split {name}.{part}: {data.path} has no conversation {', '.join(missing)}")
    return {part: [data.conversation(m) for m in members] for part, members in parts.items()}


def split_questions(data: Locomo, name: str) -> dict[str, list[Question]]:
    out: dict[str, list[Question]] = {}
    for part, convs in split_conversations(data, name).items():
        qs = [q for c in convs for q in c.questions if q.category != 5]
        if name == "memory_r2":
            qs = [q for q in qs if q.evidence]
        out[part] = qs
    return out
