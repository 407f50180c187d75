"""Mem0's LoCoMo answer metrics (mem0ai/mem0 @373709f, evaluation/metrics/utils.py, as evaluation/evals.py calls
them), value for value. The file says it is borrowed from A-Mem's utils.py (WujiangXu/AgenticMemory).

Owns: `mem0_f1` (`calculate_metrics(pred, gold)["f1"]`: both sides `str()`-ed, 0 when either is empty
before stripping; tokens are `simple_tokenize` — lower-case, `. , ! ?` turned into spaces, whitespace split —
and F1 is over token *sets*, divided by the set sizes) and `mem0_bleu1` (`calculate_bleu_scores(pred, gold)["bleu1"]`:
`nltk.word_tokenize` of both lower-cased sides, `sentence_bleu` with weights (1, 0, 0, 0) and smoothing method1:
an exception scores 0, as there). Tokenisation is `memjax.evaluation.nltk_text.word_tokenize_lower` (nltk's
`word_tokenize` with the shipped Punkt parameters, no nltk data needed); BLEU is nltk's own `sentence_bleu`.
Invariants: equal to the official functions (nltk 3.9.1) on tests/fixtures/metric_goldens_mem0.json
(scripts/gen_locomo_mem0_goldens.py); a non-str prediction scores 0.0 (evals.py would score str(None)).
"""

from __future__ import annotations

from .nltk_text import nltk_module, word_tokenize_lower


def simple_tokenize(text: str) -> list[str]:
    return text.lower().replace(".", " ").replace(",", " ").replace("!", " ").replace("?", " ").split()


def mem0_f1(pred: object, gold: object, category: int | None = None) -> float:
    if not isinstance(pred, str):
        return 0.0
    gold = str(gold)
    if not pred or not gold:
        return 0.0
    p, g = set(simple_tokenize(pred.strip())), set(simple_tokenize(gold.strip()))
    if not p or not g:
        return 0.0
    common = p & g
    precision, recall = len(common) / len(p), len(common) / len(g)
    return 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0


def mem0_bleu1(pred: object, gold: object) -> float:
    if not isinstance(pred, str):
        return 0.0
    hyp, ref = word_tokenize_lower(pred), word_tokenize_lower(str(gold))
    bleu = nltk_module().translate.bleu_score
    try:
        return float(bleu.sentence_bleu([ref], hyp, weights=(1, 0, 0, 0),
                                        smoothing_function=bleu.SmoothingFunction().method1))
    except Exception:       # the official loop's `except Exception: score = 0.0` (an empty prediction divides by 0)
        return 0.0
