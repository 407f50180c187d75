"""SQuAD-normalised EM / F1 / sub-EM, as MemAgent's evaluation computes them (its reported "accuracy" is sub-EM).

Owns: `normalize_answer` (the official SQuAD normaliser: lower-case, drop ASCII punctuation, drop the articles
a/an/the, collapse whitespace), the per-gold metrics `exact_match`, `squad_f1` (multiset token F1, HotpotQA's
yes/no rule) and `sub_exact_match` (two-sided containment), and `squad_scores` (max over golds). Definitions
follow MemAgent `taskutils/memory_eval/utils` (from the HotpotQA evaluation script); each function's docstring
gives its edge cases.

Invariants: every value is in [0, 1]; each metric is maximised over the golds independently; a missing prediction
(None or not a str) scores 0 on all three and is counted in `stats`; never raises on model output.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from .boxed import RewardStats
from .golds import as_golds

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = frozenset({"yes", "no", "noanswer"})


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official SQuAD order)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(pred: str, gold: str) -> float:
    return float(normalize_answer(pred) == normalize_answer(gold))


def squad_f1(pred: str, gold: str, *, hotpot_yes_no: bool = True) -> float:
    """SQuAD token F1 of one (prediction, gold) pair: multiset overlap of normalised tokens.

    With `hotpot_yes_no=True` (default, as MemAgent / HotpotQA), if either side normalises to "yes", "no" or
    "noanswer" and they differ, f1 is 0. When either token list is empty, f1 = 1.0 if both are empty else 0.0
    (official SQuAD rule)."""
    p, g = normalize_answer(pred), normalize_answer(gold)
    if hotpot_yes_no and (p in _YES_NO or g in _YES_NO) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    if not pt or not gt:
        return float(pt == gt)
    same = sum((Counter(pt) & Counter(gt)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall)


def sub_exact_match(pred: str, gold: str) -> float:
    """Normalised gold in normalised prediction OR prediction in gold (MemAgent's definition is two-sided).

    Guard added here: an empty normalised prediction or gold (e.g. "the") is a substring of everything, so
    either scores sub_em = em instead of 1."""
    p, g = normalize_answer(pred), normalize_answer(gold)
    if not p or not g:  # "" is in every string: only an exact (empty) match counts
        return float(p == g)
    return float(g in p or p in g)


def squad_scores(pred: str | None, golds: str | Sequence[object], *, hotpot_yes_no: bool = True,
                 stats: RewardStats | None = None) -> dict[str, float]:
    """{"em", "f1", "sub_em"}, each the max over `golds`."""
    gs = as_golds(golds, "squad_scores")
    if stats is not None:
        stats.record(not isinstance(pred, str))
    if not isinstance(pred, str):
        return {"em": 0.0, "f1": 0.0, "sub_em": 0.0}
    return {"em": max(exact_match(pred, g) for g in gs),
            "f1": max(squad_f1(pred, g, hotpot_yes_no=hotpot_yes_no) for g in gs),
            "sub_em": max(sub_exact_match(pred, g) for g in gs)}
