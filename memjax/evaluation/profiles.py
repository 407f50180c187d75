"""Metric profiles: each paper's lexical answer metrics, reproduced value for value from its official code.

Owns: `MetricProfile` (a named pair of F1 and BLEU-1 functions) and `PROFILES` / `get_profile`.

Profiles (this module grows one per paper; only those listed exist):
- `memory_r2`: Memory-R2 (`ahmedehabb/Memory-R2` @357b4ec, src/verl/verl/workers/reward_manager/rema.py,
  `compute_f1` / `compute_bleu`). Quirks kept on purpose: F1 divides the overlap of token *sets* by the token *list*
  lengths (repeats lower the score); both sides empty scores 1, one side empty 0; BLEU-1 tokenises the SQuAD-normalised
  text (lower-case, punctuation and a/an/the removed), has no smoothing, and its brevity penalty is 1 when the
  prediction is at least as long as the gold (0 when the gold is empty).
- `memjax`: memjax's earlier, more lenient pair (token-set F1 divided by set sizes, as SUMER's text defines it; BLEU-1
  on raw word/punctuation tokens), kept as a named non-default choice.

Invariants: values are floats in [0, 1]; a non-str prediction scores 0.0. Checked against the official code's outputs
on generated (prediction, gold) pairs in tests/fixtures/metric_goldens_memory_r2.json (scripts/gen_metric_goldens.py).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..rewards.locomo import token_set_f1
from ..rewards.text import bleu1 as _memjax_bleu1

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def squad_normalize(s: str) -> str:
    """Lower-case, drop ASCII punctuation, then the articles a/an/the, and collapse whitespace (HF squad order)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def memory_r2_f1(pred: object, gold: object) -> float:
    if not isinstance(pred, str):
        return 0.0
    p, g = squad_normalize(pred).split(), squad_normalize(str(gold)).split()
    if not p or not g:
        return float(p == g)
    common = len(set(p) & set(g))
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(g)
    return 2 * (prec * rec) / (prec + rec)


def memory_r2_bleu1(pred: object, gold: object) -> float:
    if not isinstance(pred, str):
        return 0.0
    p, g = squad_normalize(pred).split(), squad_normalize(str(gold)).split()
    if not p:
        return 0.0
    gc, pc = Counter(g), Counter(p)
    clipped = sum(min(pc[t], gc[t]) for t in pc)
    precision = clipped / len(p)
    if g:
        bp = 1.0 if len(p) >= len(g) else math.exp(1 - len(g) / len(p))
    else:
        bp = 0.0
    return bp * precision


def _memjax_bleu(pred: object, gold: object) -> float:
    return _memjax_bleu1(pred if isinstance(pred, str) else None, str(gold))


@dataclass(frozen=True)
class MetricProfile:
    name: str
    source: str                                   # repository @ commit : path it reproduces ("" for memjax's own)
    f1: Callable[[object, object], float]
    bleu1: Callable[[object, object], float]


PROFILES: dict[str, MetricProfile] = {
    "memory_r2": MetricProfile("memory_r2", "ahmedehabb/Memory-R2@357b4ec:src/verl/verl/workers/reward_manager/rema.py",
                               memory_r2_f1, memory_r2_bleu1),
    "memjax": MetricProfile("memjax", "", token_set_f1, _memjax_bleu),
}


def get_profile(name: str) -> MetricProfile:
    if name not in PROFILES:
        raise ValueError(f"metrics: unknown profile {name!r}; known: {sorted(PROFILES)}")
    return PROFILES[name]
