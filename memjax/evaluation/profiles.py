"""Metric profiles: each paper's answer metrics, reproduced value for value from its official code.

Owns: `MetricProfile` (kind "answer": a named pair of free-text F1 and BLEU-1 functions, for LoCoMo-style tables),
`BoxedProfile` (kind "boxed": scores a model's whole output with a `\\boxed{}` answer against the gold list, for the
RULER-HotpotQA evaluation), the registry `PROFILES` and `get_profile(name, kind)`; an evaluation config's `metrics`
field names one (`--set metrics=<profile>`), and results name it.

Profiles (this module grows one per paper; only those listed exist):
- `memory_r2`: Memory-R2 (`ahmedehabb/Memory-R2` @357b4ec, src/verl/verl/workers/reward_manager/rema.py,
  `compute_f1` / `compute_bleu`). Quirks kept on purpose: F1 divides the overlap of token *sets* by the token *list*
  lengths (repeats lower the score); both sides empty scores 1, one side empty 0; BLEU-1 tokenises the SQuAD-normalised
  text (lower-case, punctuation and a/an/the removed), has no smoothing, and its brevity penalty is 1 when the
  prediction is at least as long as the gold (0 when the gold is empty).
- `locomo`: LoCoMo's own evaluation (`snap-research/locomo` branch `code` @9228632, task_eval/evaluation.py):
  `memjax.evaluation.metrics_locomo.locomo_qa_f1` — commas and a/an/the/and removed, Porter-stemmed multiset F1,
  category-1 answers split on commas (mean over gold parts of the best predicted part), category-3 golds cut at ';'.
  LoCoMo computes no BLEU: the profile has none (tables show B1 as missing).
- `mem0`: Mem0's LoCoMo evaluation (`mem0ai/mem0` @373709f, evaluation/metrics/utils.py, as evaluation/evals.py
  calls it; borrowed from A-Mem): `memjax.evaluation.metrics_mem0` — F1 over `simple_tokenize` token *sets* divided by
  the set sizes (no article or punctuation removal beyond `. , ! ?`), BLEU-1 of `nltk.word_tokenize` tokens with
  smoothing method1 (nltk 3.9.1 itself, Punkt from the shipped parameters: `memjax.evaluation.nltk_text`).
- `sumer`: SUMER has no public code. Its F1 is "over token sets" and its Table 1 sets it beside Mem0 and A-MEM
  numbers it produced by running those projects' code, whose evaluation is Mem0's `utils.py`; the `sumer` profile is
  therefore the `mem0` functions (an inference from the paper, not checked against SUMER's own code). SUMER's set F1
  over SQuAD-normalised tokens, memjax's earlier reading, is the `memjax` profile.
- `memagent` (boxed): MemAgent (`BytedTsinghua-SIA/MemAgent` @76b7a65, taskutils/memory_eval/ruler_hqa.py with the
  boxed extractor): `memjax.rewards.memagent_official.ruler_hqa_item` — answers[0] only, 2-decimal rounding, the
  reference box reader (its crashes counted as `crashed`, scored 0).
- `memagent_lenient` (boxed): memjax's earlier reader (`memjax.rewards.last_boxed`: the last box of any form) and
  SQuAD EM/F1/sub-EM maximised over all golds; a named non-default choice.
- `memjax`: memjax's earlier, more lenient pair (token-set F1 divided by set sizes, as SUMER's text defines it; BLEU-1
  on raw word/punctuation tokens), kept as a named non-default choice.

Invariants: values are floats in [0, 1]; a non-str prediction scores 0.0. Checked against the official code's outputs
on generated (prediction, gold) pairs in tests/fixtures/metric_goldens_<profile>.json (scripts/gen_metric_goldens.py,
scripts/gen_locomo_mem0_goldens.py).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..rewards import last_boxed, squad_scores
from ..rewards.locomo import token_set_f1
from ..rewards.memagent_official import ruler_hqa_item
from ..rewards.text import bleu1 as _memjax_bleu1
from .metrics_locomo import locomo_qa_f1
from .metrics_mem0 import mem0_bleu1, mem0_f1

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def squad_normalize(s: str) -> str:
    """Lower-case, drop ASCII punctuation, then the articles a/an/the, and collapse whitespace (HF squad order)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def memory_r2_f1(pred: object, gold: object, category: int | None = None) -> float:
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


def _memagent_official(text: object, answers) -> dict[str, float]:
    it = ruler_hqa_item(text, list(answers))
    return {"sub_em": it.sub_em, "em": it.em, "f1": it.f1, "missing": float(not it.pred), "crashed": float(it.crashed)}


def _memagent_lenient(text: object, answers) -> dict[str, float]:
    pred = last_boxed(text) if isinstance(text, str) else None
    return {**squad_scores(pred, list(answers)), "missing": float(pred is None), "crashed": 0.0}


def _memjax_f1(pred: object, gold: object, category: int | None = None) -> float:
    return token_set_f1(pred, gold)


@dataclass(frozen=True)
class MetricProfile:
    """F1 is called as f1(prediction, gold, category) (LoCoMo's depends on the QA category; the others ignore it);
    bleu1(prediction, gold), or None where the official evaluation computes no BLEU-1."""

    name: str
    source: str                                   # repository @ commit : path it reproduces ("" for memjax's own)
    f1: Callable[..., float]
    bleu1: Callable[[object, object], float] | None
    kind: str = "answer"


@dataclass(frozen=True)
class BoxedProfile:
    name: str
    source: str
    score: Callable[[object, object], dict[str, float]]   # (output, answers) -> sub_em, em, f1, missing, crashed
    kind: str = "boxed"


_MEM0 = "mem0ai/mem0@373709f:evaluation/metrics/utils.py"
_MA = "BytedTsinghua-SIA/MemAgent@76b7a65:taskutils/memory_eval/ruler_hqa.py"
PROFILES: dict[str, MetricProfile | BoxedProfile] = {
    "memory_r2": MetricProfile("memory_r2", "ahmedehabb/Memory-R2@357b4ec:src/verl/verl/workers/reward_manager/rema.py",
                               memory_r2_f1, memory_r2_bleu1),
    "memjax": MetricProfile("memjax", "", _memjax_f1, _memjax_bleu),
    "mem0": MetricProfile("mem0", _MEM0, mem0_f1, mem0_bleu1),
    "sumer": MetricProfile("sumer", _MEM0 + " (inferred for SUMER, which has no public code)", mem0_f1, mem0_bleu1),
    "locomo": MetricProfile("locomo", "snap-research/locomo@9228632(code):task_eval/evaluation.py", locomo_qa_f1, None),
    "memagent": BoxedProfile("memagent", _MA, _memagent_official),
    "memagent_lenient": BoxedProfile("memagent_lenient", "", _memagent_lenient),
}


def get_profile(name: str, kind: str | None = None) -> MetricProfile | BoxedProfile:
    """The profile `name`; with `kind`, it must be of that kind ("answer" or "boxed")."""
    known = sorted(n for n, p in PROFILES.items() if kind is None or p.kind == kind)
    if name not in known:
        raise ValueError(f"metrics={name!r}: unknown{' ' + kind if kind else ''} profile; known: {known}")
    return PROFILES[name]
