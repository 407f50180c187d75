"""MemAgent's published RULER-HotpotQA numbers, to print and plot beside a run's own.

Owns: `TABLE2` (the RL-MemAgent rows of the paper's Table 2), `OFFICIAL_LENGTHS` (the document counts of the
official evaluation script), `CITATION`, `paper_row(num_docs)`.
Source: Yu et al., "MemAgent: Reshaping Long-Context LLM with Multi-Conv RL-based Memory Agent" (arXiv:2507.02259),
Table 2 in §4.3 "Main Results": accuracy (%) on 128 questions synthesised from HotpotQA dev, at contexts of
7K ... 896K tokens and, for MemAgent only, 1.75M and 3.5M (no page numbers are cited). The document counts per
column come from the official code (BytedTsinghua-SIA/MemAgent @76b7a65, taskutils/memory_eval/run.py:
RULER_HQA_TESTS = 50 ... 6400 "50~7K tokens, 100~14K tokens and so on", RULER_HQA_TESTS_OVER_1M = 12800, 25600,
run by ruler_hqa_over1m.py). The paper calls its number accuracy; its script prints F1, EM and sub-EM, and memjax
sets sub-EM beside it (the metric the paper's training and its RULER-QA tasks use; an inference, not a statement
of the paper).
Invariants: values are the paper's, as printed; nothing here is computed.
"""

from __future__ import annotations

CITATION = ("MemAgent (arXiv:2507.02259), Table 2, §4.3 Main Results: RULER-HotpotQA accuracy (%), 128 questions")
OFFICIAL_LENGTHS = (50, 100, 200, 400, 800, 1600, 3200, 6400)   # taskutils/memory_eval/run.py RULER_HQA_TESTS
OVER_1M_LENGTHS = (12800, 25600)                                # RULER_HQA_TESTS_OVER_1M (ruler_hqa_over1m.py)

# num_docs: (context length as the paper labels it, RL-MemAgent-7B, RL-MemAgent-14B)
TABLE2: dict[int, tuple[str, float, float]] = {
    50: ("7K", 82.03, 83.59),
    100: ("14K", 79.69, 82.03),
    200: ("28K", 78.91, 84.38),
    400: ("56K", 77.34, 80.47),
    800: ("112K", 79.69, 76.56),
    1600: ("224K", 72.66, 81.25),
    3200: ("448K", 74.22, 75.00),
    6400: ("896K", 76.56, 77.34),
    12800: ("1.75M", 75.78, 76.56),
    25600: ("3.5M", 71.09, 78.12),
}


def paper_row(num_docs: int) -> dict[str, object]:
    """The paper's columns for a length ({} where the paper has no column for it)."""
    if num_docs not in TABLE2:
        return {}
    label, m7, m14 = TABLE2[num_docs]
    return {"paper_tokens": label, "paper_7b": m7, "paper_14b": m14}
