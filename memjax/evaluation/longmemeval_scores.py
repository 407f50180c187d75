"""LongMemEval scores from predictions records: the official QA aggregates, evidence recall, the table and chart.

Owns: `qa_table(records)` -- per question type accuracy (the official `print_qa_metrics.py`: abstention questions
count in their type too), "task-averaged" (the mean of the per-type accuracies of the types present), "overall"
(all scored questions) and "abstention" (the `_abs` questions); a record whose judge call failed (`label` None) is
never scored: it is counted as `unscored` in its columns --, `recall_at_k(retrieved, gold, k)` (the official
`evaluate_retrieval`'s recall_any / recall_all over the first k retrieved ids), `retrieval_metrics(...)`, `markdown`
and `chart`. Accuracy and recall in percent, rounded to 2 places; a column with nothing scored shows None.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.longmemeval import QUESTION_TYPES

SHORT = {"single-session-user": "SSU", "single-session-assistant": "SSA", "single-session-preference": "SSP",
         "multi-session": "MS", "temporal-reasoning": "TR", "knowledge-update": "KU"}
COLUMNS = (*QUESTION_TYPES, "task-averaged", "overall", "abstention")


def _pct(xs: Sequence[float]) -> float | None:
    return round(100.0 * sum(xs) / len(xs), 2) if xs else None


def recall_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> tuple[float, float]:
    """(recall_any@k, recall_all@k) of the gold ids among the first k retrieved ids (LongMemEval's definition)."""
    top = set(retrieved[:k])
    return float(any(g in top for g in gold)), float(all(g in top for g in gold))


def retrieval_metrics(retrieved_turns: Sequence[str], answer_turns: Sequence[str], answer_sessions: Sequence[str],
                      ks: Sequence[int]) -> dict[str, float]:
    """Turn- and session-level recall_any / recall_all at each k. `retrieved_turns` are dia_ids "D<s>:<t>" best
    first; a retrieved session is the session of a retrieved turn, in first-seen order (LongMemEval's turn-to-session
    view); gold sessions are dia_id session prefixes "D<s>"."""
    sessions = list(dict.fromkeys(d.split(":")[0] for d in retrieved_turns))
    out = {}
    for k in ks:
        if answer_turns:
            out[f"turn_recall_any@{k}"], out[f"turn_recall_all@{k}"] = recall_at_k(list(retrieved_turns), answer_turns, k)
        if answer_sessions:
            out[f"session_recall_any@{k}"], out[f"session_recall_all@{k}"] = recall_at_k(sessions, answer_sessions, k)
    return out


def qa_table(records: Sequence[dict]) -> dict[str, dict[str, Any]]:
    """{column: {"accuracy", "n", "unscored", <recall metrics>}} over COLUMNS present (see the module docstring)."""
    table: dict[str, dict[str, Any]] = {}
    per_type: dict[str, list[float]] = {}

    def column(recs: list[dict]) -> dict[str, Any]:
        scored = [float(r["label"]) for r in recs if r.get("label") is not None]
        row: dict[str, Any] = {"accuracy": _pct(scored), "n": len(scored), "unscored": len(recs) - len(scored)}
        names = list(dict.fromkeys(m for r in recs for m in (r.get("recall") or {})))
        for m in names:
            row[m] = _pct([r["recall"][m] for r in recs if m in (r.get("recall") or {})])
        return row

    for t in QUESTION_TYPES:
        recs = [r for r in records if r["question_type"] == t]
        if recs:
            table[t] = column(recs)
            per_type[t] = [float(r["label"]) for r in recs if r.get("label") is not None]
    accs = [100.0 * sum(v) / len(v) for v in per_type.values() if v]
    table["task-averaged"] = {"accuracy": round(sum(accs) / len(accs), 2) if accs else None, "n": len(accs),
                              "unscored": 0}
    table["overall"] = column(list(records))
    abst = [r for r in records if r.get("abstention")]
    if abst:
        table["abstention"] = column(abst)
    return table


def markdown(table: dict[str, dict[str, Any]], title: str) -> str:
    """The paper's layout: one column per question type, then task-averaged, overall and abstention; rows accuracy,
    n, unscored and each recall metric."""
    cols = [c for c in COLUMNS if c in table]
    metrics = list(dict.fromkeys(m for c in cols for m in table[c]))
    fmt = lambda v: "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = [f"## {title}", "", "| | " + " | ".join(SHORT.get(c, c) for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    lines += [f"| {m} | " + " | ".join(fmt(table[c].get(m)) for c in cols) + " |" for m in metrics]
    lines += ["", "Accuracy and recall in percent. " + ", ".join(f"{v} = {k}" for k, v in SHORT.items()) +
              ". Task-averaged: the mean of the per-type accuracies; abstention questions (`_abs`) count in their type "
              "and in the abstention column; unscored: judge call failed (never a score)."]
    return "\n".join(lines) + "\n"


def chart(table: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [c for c in COLUMNS if c in table and table[c]["accuracy"] is not None]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar([SHORT.get(c, c) for c in cols], [table[c]["accuracy"] for c in cols], color="#4c72b0")
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
