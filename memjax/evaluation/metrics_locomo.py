"""LoCoMo's own answer F1 (snap-research/locomo, branch `code` @9228632, task_eval/evaluation.py), value for value.

Owns: `locomo_normalize` (`normalize_answer` there: drop commas, lower-case, drop ASCII punctuation, drop the words
a/an/the/and, collapse whitespace), `locomo_f1_score` (`f1_score`: multiset F1 of Porter-stemmed tokens, 0 when
nothing overlaps, so an empty side scores 0) and `locomo_qa_f1(pred, gold, category)` (what
`eval_question_answering` appends per QA: category 3 keeps the gold up to its first ';'; category 1 splits both sides
on ',' and averages, over gold parts, the best `f1_score` against any predicted part; categories 2-4 `f1_score`).
Category 5 is not scored here (memjax refuses it; LoCoMo scores it by a refusal phrase). LoCoMo has no BLEU.

The official code removes the words with the `regex` module's `\\b`, whose word characters are Unicode letters, marks,
decimal digits, letter numbers, connector punctuation, the join controls and the other-alphabetic symbols; Python's
`re` differs (it counts other numbers such as '²' and not marks), so the boundary test is written out here.
Stemming is `memjax.evaluation.porter.porter_stem` (nltk's default PorterStemmer, re-implemented).
Invariants: equal to the official functions (run with nltk 3.9.1 and regex; nltk 3.10.4 gives the same) on the pairs in
tests/fixtures/metric_goldens_locomo.json (scripts/gen_metric_goldens.py).
"""

from __future__ import annotations

import string
import unicodedata
from collections import Counter

from .porter import porter_stem

_PUNCT = frozenset(string.punctuation)
_WORDS = ("a", "an", "the", "and")             # alternation order of r'\b(a|an|the|and)\b'
# Other_Alphabetic characters outside the mark categories (circled / squared / negative squared Latin letters)
_OTHER_ALPHA = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))


def _is_word(ch: str) -> bool:
    """Whether the `regex` module's Unicode `\\w` matches `ch` (version 0, no WORD flag)."""
    cat = unicodedata.category(ch)
    if cat[0] in "LM" or cat in ("Nd", "Nl", "Pc") or ch in "\u200c\u200d":
        return True
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _OTHER_ALPHA)


def _remove_words(text: str) -> str:
    """regex.sub(r'\\b(a|an|the|and)\\b', ' ', text): leftmost match, alternatives tried in order."""
    out, i, n, last = [], 0, len(text), 0
    while i < n:
        if i == 0 or not _is_word(text[i - 1]):
            for w in _WORDS:
                j = i + len(w)
                if text.startswith(w, i) and (j == n or not _is_word(text[j])):
                    out.append(text[last:i])
                    out.append(" ")
                    i = last = j
                    break
            else:
                i += 1
            continue
        i += 1
    out.append(text[last:])
    return "".join(out)


def locomo_normalize(s: str) -> str:
    s = s.replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(_remove_words(s).split())


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
    return _np_mean(vals)


def _pairwise(a: list[float]) -> float:
    """numpy's pairwise_sum for float64 (8 accumulators, blocks of 128)."""
    n = len(a)
    if n < 8:
        res = 0.0
        for x in a:
            res += x
        return res
    if n <= 128:
        r = a[:8]
        i = 8
        while i < n - (n % 8):
            r = [r[j] + a[i + j] for j in range(8)]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for x in a[i:]:
            res += x
        return res
    n2 = (n // 2) - ((n // 2) % 8)
    return _pairwise(a[:n2]) + _pairwise(a[n2:])


def _np_mean(a: list[float]) -> float:
    """np.mean of a 1-D float64 list (numpy >= 2: the pairwise sum of all items, over their count)."""
    return _pairwise([float(x) for x in a]) / len(a)


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
