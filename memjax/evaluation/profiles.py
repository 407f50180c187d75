r"""Metric profiles: each paper's answer metrics, reproduced value for value from its official code.

Owns: `MetricProfile` (kind "answer": a named pair of free-text F1 and BLEU-1 functions, for LoCoMo-style tables),
`BoxedProfile` (kind "boxed": scores a model's whole output with a `\boxed{}` answer against the gold list, for the
RULER-HotpotQA evaluation), the registry `PROFILES` and `get_profile(name, kind)`; an evaluation config's `metrics`
field names one (`--set metrics=<profile>`), and results name it.
Profiles (one per paper, only those listed exist): `memory_r2` (Memory-R2's rema.py `compute_f1` / `compute_bleu`,
here `memory_r2_f1` / `memory_r2_bleu1`), `locomo` (LoCoMo's task_eval/evaluation.py, memjax.evaluation.metrics_locomo;
no BLEU), `mem0` (Mem0's evaluation/metrics/utils.py, memjax.evaluation.metrics_mem0), `sumer` (the `mem0` functions:
an inference from SUMER's paper, which has no public code), `memagent` (boxed: MemAgent's ruler_hqa.py,
memjax.rewards.memagent_official), and memjax's own lenient choices `memagent_lenient` (boxed) and `memjax`.
Sources with commits, quirks kept on purpose, golden counts, how much a profile moves a score: docs/metric_profiles.md.
Invariants: values are floats in [0, 1]; a non-str prediction scores 0.0. Checked against the official code's outputs
in tests/fixtures/metric_goldens_<profile>.json (scripts/gen_metric_goldens.py, scripts/gen_locomo_mem0_goldens.py).
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
    """Memory-R2's `compute_f1` (rema.py): the overlap of token *sets* divided by the token *list* lengths (repeats
    lower the score); both sides empty scores 1, one side empty 0."""
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
    """Memory-R2's `compute_bleu` (rema.py): BLEU-1 of the SQuAD-normalised tokens, no smoothing; the brevity
    penalty is 1 when the prediction is at least as long as the gold (0 when the gold is empty)."""
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
