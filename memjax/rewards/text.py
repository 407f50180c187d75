"""Free-text answer overlap: token F1 and BLEU-1 (the lexical metrics LoCoMo-style evaluations report).

Owns: `token_f1_multiset` and `bleu1`, each maximised over golds when several are given.

Definitions:
- token_f1_multiset: F1 of the multiset overlap of SQuAD-normalised tokens (`memjax.rewards.squad.normalize_answer`; no
  yes/no rule, no stemming — LoCoMo's own script also Porter-stems, which needs nltk);
- bleu1: sentence BLEU with unigram weight 1 — clipped unigram precision times the brevity penalty
  `exp(1 - len(gold) / len(pred))` when the prediction is shorter — on lower-cased word/punctuation tokens
  (`\\w+|[^\\w\\s]`, close to nltk's `word_tokenize` on plain text). Unsmoothed: no overlap scores 0.0.

Invariants: values in [0, 1]; a non-str prediction scores 0.0 (counted in `stats`); never raises on model output.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from .boxed import RewardStats
from .golds import as_golds
from .squad import squad_f1

_WORD = re.compile(r"\w+|[^\w\s]")


def word_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _bleu1(pred: str, gold: str) -> float:
    p, g = word_tokens(pred), word_tokens(gold)
    if not p or not g:
        return 0.0
    clipped = sum((Counter(p) & Counter(g)).values())
    if clipped == 0:
        return 0.0
    bp = 1.0 if len(p) > len(g) else math.exp(1.0 - len(g) / len(p))
    return bp * clipped / len(p)


def bleu1(pred: str | None, golds: str | Sequence[object], *, stats: RewardStats | None = None) -> float:
    """BLEU-1 of `pred` against each gold, maximised over golds."""
    gs = as_golds(golds, "bleu1")
    if stats is not None:
        stats.record(not isinstance(pred, str))
    if not isinstance(pred, str):
        return 0.0
    return max(_bleu1(pred, g) for g in gs)


def token_f1_multiset(pred: str | None, golds: str | Sequence[object], *,
                      stats: RewardStats | None = None) -> float:
    """Multiset token F1 of `pred` against each gold, maximised over golds."""
    gs = as_golds(golds, "token_f1_multiset")
    if stats is not None:
        stats.record(not isinstance(pred, str))
    if not isinstance(pred, str):
        return 0.0
    return max(squad_f1(pred, g, hotpot_yes_no=False) for g in gs)
