"""MemAgent's official scoring, quirks included: the training reward and the RULER-HotpotQA evaluation per item.

Owns: `official_last_boxed`, `memagent_reward_official` (MemAgent @76b7a65 verl/utils/reward_score/hotpotqa.py
`compute_score`) and `ruler_hqa_item` / `ruler_hqa_summary` (taskutils/memory_eval/ruler_hqa.py with the boxed
extractor of taskutils/memory_eval/utils/__init__.py). memjax's lenient reader (`memjax.rewards.boxed.memagent_score`)
stays the non-default option; the two differ exactly where the reference extractor is brittle (`official_last_boxed`
and `ruler_hqa_item` say how). Golden cases and mismatches: docs/metric_profiles.md, the `memagent` rows.
Invariants: never raises on model output (a non-str response scores 0); a response on which the reference
evaluation script would stop is reported as `crashed`, scored 0 and counted; empty gold lists raise ValueError.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .boxed import strip_string
from .golds import as_golds

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPACE_BOX, _BRACE_BOX = "\\boxed ", "\\boxed{"


def official_last_boxed(text: str) -> str | None:
    """The reference `last_boxed_only_string`: the box text (command included) or None.

    Any `\\boxed ` (with a space) anywhere wins over a later `\\boxed{...}`, and its answer runs to the first `$`
    or the end of the text (newlines included, removed later by `strip_string`); otherwise the last `\\boxed`
    (else the last `\\fbox`) is brace-matched from its own position. The answer is read (`_unbox`) only when the
    box text starts `\\boxed{`: `\\boxed {x}`, `\\boxed\\n{x}`, `\\fbox{x}` and `\\boxedx{..}` fail the
    reference's assertion: the training reward catches it (0.0), the evaluation script does not (it stops)."""
    if _SPACE_BOX in text:
        return _SPACE_BOX + text.split(_SPACE_BOX)[-1].split("$")[0]
    idx = text.rfind("\\boxed")
    if idx < 0:
        idx = text.rfind("\\fbox")
        if idx < 0:
            return None
    depth = 0
    for i in range(idx, len(text)):
        if text[i] == "{":
            depth += 1
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[idx:i + 1]
    return None


def _unbox(box: str) -> str | None:
    """The reference `remove_boxed`; None where its assertions fail."""
    if _SPACE_BOX in box:
        return box[len(_SPACE_BOX):] if box.startswith(_SPACE_BOX) else None
    if box.startswith(_BRACE_BOX) and box.endswith("}"):
        return box[len(_BRACE_BOX):-1]
    return None


def memagent_reward_official(text: object, ground_truths: str | Sequence[object]) -> float:
    """The training reward: last 300 characters, lower-cased; 1.0 if the boxed answer equals a truth after strip_string."""
    truths = as_golds(ground_truths, "memagent_reward_official", "ground_truths")
    if not isinstance(text, str):
        return 0.0
    box = official_last_boxed(text[-300:].lower())
    answer = None if box is None else _unbox(box)
    if answer is None:
        return 0.0
    got = strip_string(answer)
    return float(any(got == strip_string(t.lower()) for t in truths))


def _normalize(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _f1(pred: str, gold: str) -> float:
    p, g = _normalize(pred), _normalize(gold)
    if (p in ("yes", "no", "noanswer") or g in ("yes", "no", "noanswer")) and p != g:
        return 0.0
    same = sum((Counter(p.split()) & Counter(g.split())).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p.split()), same / len(g.split())
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class RulerHqaItem:
    pred: str | None      # the extracted answer (None: no box, or the reference would have stopped)
    crashed: bool         # the reference script raises AssertionError on this response
    skipped: bool         # output == "": the script leaves the item out of its means
    f1: float
    em: float
    sub_em: float


def ruler_hqa_item(output: object, answers: Sequence[object]) -> RulerHqaItem:
    """One item as ruler_hqa.py (boxed API) scores it, against `answers[0]` only, each metric rounded to 2 decimals.

    The boxed answer is read after the last `</think>` (if present and non-empty after stripping; else from the
    whole response); an empty or missing answer scores 0 on every metric; an empty output (before stripping) is
    left out of the means; a response on which the reference raises is `crashed`, scored 0 and counted. SQuAD F1
    with the HotpotQA yes/no rule; an empty normalised prediction (e.g. "the") has F1 0 but sub-EM 1 (the empty
    string is a substring of every gold)."""
    gold = as_golds(answers, "ruler_hqa_item", "answers")[0]
    if not isinstance(output, str) or output == "":
        return RulerHqaItem(None, False, output == "", 0.0, 0.0, 0.0)
    response = output.strip()
    tail = response.split("</think>")[-1].strip() if "</think>" in response else response
    source = tail if tail else response
    box = official_last_boxed(source)
    pred = None if box is None else _unbox(box)
    crashed = box is not None and pred is None
    if not pred:
        return RulerHqaItem(pred, crashed, False, 0.0, 0.0, 0.0)
    p, g = _normalize(pred), _normalize(gold)
    return RulerHqaItem(pred, False, False, round(_f1(pred, gold), 2), round(float(p == g), 2), float(g in p or p in g))


def ruler_hqa_summary(items: Sequence[RulerHqaItem]) -> dict[str, float]:
    """The script's printed summary: each metric's mean x100 rounded to 2 decimals over the items not skipped, plus
    the crash count (the reference would have stopped at the first crash)."""
    items = [it for it in items if not it.skipped]
    if not items:
        raise ValueError("ruler_hqa_summary: no scored items")
    out = {k: round(sum(getattr(it, k) for it in items) * 100 / len(items), 2) for k in ("f1", "em", "sub_em")}
    out["crashed"] = float(sum(it.crashed for it in items))
    return out
