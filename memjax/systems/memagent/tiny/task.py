r"""The tiny memory task: "where is K?" over a document of `a in b .` facts read chunk by chunk.

Owns: the fixed word-level vocabulary `WORDS` (memjax/tiny/vocab.py's lists plus MemAgent's template words; tokenise
with `TinyTokenizer(WORDS)`; why word-level: docs/memagent.md), the compact MemAgent templates, the sample generator,
and the correct (teacher) memory trace of every sample used by the warm start.
The task (TaskConfig): a document of `num_chunks x facts_per_chunk` facts `subject in object .`; the question
`where is K ?` comes first, the answer is a place written as `\boxed{ P }`. hops=1: the document holds `K in P .`
somewhere, the other facts are distractors; hops=2 (probability `multihop_frac`): `K in C .` (C a container) in one
chunk and `C in P .` in a strictly later chunk, both to be kept in memory and combined. Distractors never mention K
nor C, so the answer is unique at any length; a document of more than 22 facts (23 for one hop) repeats distractor
subjects in successive shuffled rounds (docs/memagent.md, 'Documents of any length'), so short documents are
unchanged. Correct memory after chunk t: the relevant facts seen so far, in document order (`none` before any).
Invariants: generation is a pure function of (config, seed, index); every document word is in WORDS; a fact is 4
tokens, so fixed-size id chunks never cut one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ....tiny.model import MODEL_VOCAB
from ....tiny.vocab import CONTAINERS, PEOPLE, PLACES, SPECIALS, TinyTokenizer  # noqa: F401  (TinyTokenizer: re-exported)

TEMPLATE_WORDS = ("question", "memory", "chunk", "update", "answer", "none", "where", "is", "?", "in", ".",
                  "\\boxed{", "}")
WORDS = SPECIALS + TEMPLATE_WORDS + PEOPLE + CONTAINERS + PLACES
assert len(WORDS) <= MODEL_VOCAB

MEMORY_TEMPLATE = "question {prompt} memory {memory} chunk {chunk} update"
FINAL_TEMPLATE = "question {prompt} memory {memory} answer"
NO_MEMORY = "none"


@dataclass(frozen=True)
class TaskConfig:
    num_chunks: int = 3
    facts_per_chunk: int = 3
    multihop_frac: float = 0.3  # fraction of two-hop questions

    def __post_init__(self):
        if self.num_chunks < 2 or self.facts_per_chunk < 1:
            raise ValueError(f"TaskConfig: num_chunks must be >= 2 and facts_per_chunk >= 1 (got {self})")
        if not 0.0 <= self.multihop_frac <= 1.0:
            raise ValueError(f"TaskConfig.multihop_frac must be in [0, 1], got {self.multihop_frac}")

    @property
    def num_facts(self) -> int:
        return self.num_chunks * self.facts_per_chunk

    @property
    def chunk_tokens(self) -> int:
        return 4 * self.facts_per_chunk

    @property
    def max_memory_tokens(self) -> int:  # two facts + <end>
        return 9

    @property
    def max_final_tokens(self) -> int:  # \boxed{ P } <end>
        return 4


def _fact(s: str, o: str) -> str:
    return f"{s} in {o} ."


def make_sample(cfg: TaskConfig, seed: int, index: int) -> dict[str, Any]:
    """One sample: query, context, answers, hops, and its correct memory trace and final answer."""
    rng = np.random.default_rng([seed, index])
    hops = 2 if rng.random() < cfg.multihop_frac else 1
    n, f = cfg.num_facts, cfg.facts_per_chunk
    key = str(rng.choice(PEOPLE))
    place = str(rng.choice(PLACES))
    if hops == 1:
        rel_pos = [int(rng.integers(n))]
        rel = [_fact(key, place)]
        container = None
    else:
        container = str(rng.choice(CONTAINERS))
        c1 = int(rng.integers(cfg.num_chunks - 1))
        c2 = int(rng.integers(c1 + 1, cfg.num_chunks))
        rel_pos = [c1 * f + int(rng.integers(f)), c2 * f + int(rng.integers(f))]
        rel = [_fact(key, container), _fact(container, place)]
    pool = [p for p in PEOPLE if p != key] + [c for c in CONTAINERS if c != container]
    rounds = -(-(n - hops) // len(pool))  # 1 for a document of at most len(pool) distractors
    subjects = [str(s) for _ in range(rounds) for s in rng.permutation(pool)][: n - hops]
    objects = [p for p in PLACES] + [c for c in CONTAINERS if c != container]
    facts: list[str] = []
    others = iter(subjects)
    for i in range(n):
        if i in rel_pos:
            facts.append(rel[rel_pos.index(i)])
            continue
        s = next(others)
        o = str(rng.choice([x for x in objects if x != s]))
        facts.append(_fact(s, o))
    memories, seen = [], []
    for c in range(cfg.num_chunks):
        seen += [facts[i] for i in rel_pos if c * f <= i < (c + 1) * f]
        memories.append(" ".join(seen) if seen else NO_MEMORY)
    return {"query": f"where is {key} ?", "context": " ".join(facts), "answers": [place], "hops": hops,
            "memories": memories, "final": f"\\boxed{{ {place} }}"}


def make_split(cfg: TaskConfig, seed: int, count: int, start: int = 0) -> list[dict[str, Any]]:
    """`count` samples with indices start..start+count-1 (train and held-out splits use different seeds)."""
    return [make_sample(cfg, seed, start + i) for i in range(count)]


TRAIN_SEED, HELDOUT_SEED = 1, 2  # data seeds of the training stream and the held-out set
