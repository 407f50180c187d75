"""Answer extraction and scoring for memory agents.

Public contract (docs/architecture.md): `last_boxed(text)`, `memagent_reward(text, ground_truths)`,
`squad_scores(pred, golds)`, `string_match_all(pred, refs)`. Every scorer returns values in [0, 1], never raises on
model output, and counts a missing answer (scored 0) in an optional `RewardStats`.
"""

from .boxed import BoxedScore, RewardStats, last_boxed, memagent_reward, memagent_score, strip_string
from .ruler import METRICS, string_match_all, string_match_part
from .golds import as_golds
from .squad import exact_match, normalize_answer, squad_f1, squad_scores, sub_exact_match
from .text import bleu1, token_f1_multiset

__all__ = ["BoxedScore", "RewardStats", "last_boxed", "memagent_reward", "memagent_score", "strip_string",
           "METRICS", "string_match_all", "string_match_part", "exact_match", "normalize_answer", "squad_scores",
           "sub_exact_match", "bleu1", "token_f1_multiset", "squad_f1", "as_golds"]
