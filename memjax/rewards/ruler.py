"""RULER's scorers: `string_match_all` (multi-answer tasks) and `string_match_part` (QA tasks).

Owns: the per-sample versions of RULER's `string_match_all` / `string_match_part` (RULER averages them over samples
and reports x100; here a sample scores in [0, 1]).

Definitions: `string_match_all(pred, refs)` = fraction of refs `r` with `r.lower() in pred.lower()`;
`string_match_part(pred, refs)` = 1.0 if any ref is contained (case-insensitive), else 0.0.

Invariants: never raises on model output (a non-str prediction scores 0 and is counted in `stats`); empty `refs`
is a data error and raises ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence

from .boxed import RewardStats
from .golds import as_golds


def _refs(refs: str | Sequence[object], where: str) -> list[str]:
    return [r.lower() for r in as_golds(refs, where, "refs")]


def string_match_all(pred: str | None, refs: str | Sequence[object], *, stats: RewardStats | None = None) -> float:
    """Fraction of references contained in the prediction (case-insensitive)."""
    rs = _refs(refs, "string_match_all")
    if stats is not None:
        stats.record(not isinstance(pred, str))
    if not isinstance(pred, str):
        return 0.0
    p = pred.lower()
    return sum(r in p for r in rs) / len(rs)


def string_match_part(pred: str | None, refs: str | Sequence[object], *, stats: RewardStats | None = None) -> float:
    """1.0 if any reference is contained in the prediction (case-insensitive), else 0.0."""
    rs = _refs(refs, "string_match_part")
    if stats is not None:
        stats.record(not isinstance(pred, str))
    if not isinstance(pred, str):
        return 0.0
    p = pred.lower()
    return float(any(r in p for r in rs))


METRICS = {"string_match_all": string_match_all, "string_match_part": string_match_part}
