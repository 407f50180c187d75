"""LoCoMo's own answer F1 (snap-research/locomo, branch `code` @9228632, task_eval/evaluation.py), value for value.

Owns: `locomo_normalize` (`normalize_answer` there: drop commas, lower-case, drop ASCII punctuation, drop the words
a/an/the/and, collapse whitespace), `locomo_f1_score` (`f1_score`: multiset F1 of Porter-stemmed tokens, 0 when
nothing overlaps, so an empty side scores 0) and `locomo_qa_f1(pred, gold, category)` (what
`eval_question_answering` appends per QA: category 3 keeps the gold up to its first ';'; category 1 splits both sides
on ',' and averages, over gold parts, the best `f1_score` against any predicted part; categories 2-4 `f1_score`).
Category 5 is not scored here (memjax refuses it; LoCoMo scores it by a refusal phrase). LoCoMo has no BLEU.

The words are removed, as there, with the `regex` module (whose `\\b` counts Unicode marks as word characters,
unlike `re`); category 1's average is numpy's mean (pairwise summation); stemming is nltk's default PorterStemmer
(`memjax.evaluation.nltk_text.porter_stem`). nltk, regex and numpy are dependencies, so each step is the official one.
Invariants: equal to the official functions (run with nltk 3.9.1 and regex; nltk 3.10.4 gives the same) on the pairs in
tests/fixtures/metric_goldens_locomo.json (scripts/gen_metric_goldens.py).
"""

from __future__ import annotations

import string
from collections import Counter

import numpy as np
import regex

from .nltk_text import porter_stem

_PUNCT = frozenset(string.punctuation)
_WORDS_RE = regex.compile(r"\b(a|an|the|and)\b")


def locomo_normalize(s: str) -> str:
    s = s.replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(_WORDS_RE.sub(" ", s).split())


def locomo_f1_score(pred: str, gold: str) -> float:
    p = [porter_stem(w) for w in locomo_normalize(pred).split()]
    g = [porter_stem(w) for w in locomo_normalize(gold).split()]
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return (2 * precision * recall) / (precision + recall)


def _multi_f1(pred: str, gold: str) -> float:
    preds = [p.strip() for p in pred.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    vals = [max(locomo_f1_score(p, g) for p in preds) for g in golds]
    return float(np.mean(vals))


def locomo_qa_f1(pred: object, gold: object, category: int | None = None) -> float:
    """The per-QA score of LoCoMo's eval_question_answering for categories 1-4 (None: treated as 4)."""
    if not isinstance(pred, str):
        return 0.0
    gold = str(gold)
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        return _multi_f1(pred, gold)
    return locomo_f1_score(pred, gold)
