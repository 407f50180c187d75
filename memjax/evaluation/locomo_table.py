"""The LoCoMo score table of an evaluation's records: per category and overall, in percent as the papers print it,
its Markdown and its bar chart, and the count of items that failed (not results).

Owns `ORDER` (the papers' category order: single-hop, multi-hop, open-domain, temporal), `score_table(records, f1,
metrics)` ({category name | "overall": {n, F1, B1, J, M-Fail}}; F1 / B1 from the answer metric profile `metrics`,
memjax.evaluation.profiles, the `memjax` profile reading the stored values; M-Fail only where memory dia_ids were
given; B1 None for profiles without BLEU), `table_markdown` (results.md: the failure warning first when items
failed), `table_chart` (scores.png: grouped F1 / B1 / J bars), `failed(rec)`, `failures(records)` and
`failure_line(fails)` (a record whose judge request failed, whose reply had no label, or whose predictor raised).
Invariants: a value is None where nothing counts (a J the judge profile dropped is left out, not scored 0); the
records are predictions.jsonl lines (memjax/evaluation/locomo_harness.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..data.locomo import CATEGORY_NAMES
from ..rewards.locomo import m_fail
from .profiles import get_profile

ORDER = (4, 1, 3, 2)    # single-hop, multi-hop, open-domain, temporal (SUMER / Memory-R2 table order)


def _pct(xs: Sequence[float | None]) -> float | None:
    """Mean in percent of the values that are not None (a J dropped by the judge profile is None)."""
    xs = [x for x in xs if x is not None]
    return None if not xs else round(100.0 * sum(xs) / len(xs), 2)


def score_table(records: Iterable[dict], *, f1: str = "set", metrics: str = "memjax") -> dict[str, dict[str, Any]]:
    """{category name | "overall": {n, F1, B1, J, M-Fail}} in percent; M-Fail None where no memory was given.

    F1/B1 come from the answer metric profile `metrics` (memjax.evaluation.profiles), recomputed from each record's
    prediction and gold; the `memjax` profile reads the stored values (`f1` picks its set or multiset F1).
    """
    if f1 not in ("set", "multiset"):
        raise ValueError(f"score_table.f1: 'set' or 'multiset', got {f1!r}")
    prof = get_profile(metrics, "answer")
    key = "f1_set" if f1 == "set" else "f1"
    if metrics != "memjax":
        records = [{**r, key: prof.f1(r["prediction"], r["gold"], r["category"]),
                    "b1": None if prof.bleu1 is None else prof.bleu1(r["prediction"], r["gold"])} for r in records]
    groups: dict[str, list[dict]] = {CATEGORY_NAMES[c]: [] for c in ORDER}
    recs = list(records)
    for r in recs:
        groups[CATEGORY_NAMES[r["category"]]].append(r)
    groups["overall"] = recs
    table = {}
    for name, rs in groups.items():
        with_mem = [r for r in rs if r.get("memory_dia_ids") is not None]
        mf = None
        if with_mem:
            ratios = [m_fail([r["evidence"]], r["memory_dia_ids"]) for r in with_mem]
            ev = [len(r["evidence"]) for r in with_mem]
            missing = sum(x * n for x, n in zip(ratios, ev) if x is not None)
            mf = None if sum(ev) == 0 else round(100.0 * missing / sum(ev), 2)
        b1 = None if prof.bleu1 is None else _pct([r["b1"] for r in rs])     # LoCoMo's own evaluation has no BLEU
        table[name] = {"n": len(rs), "F1": _pct([r[key] for r in rs]), "B1": b1,
                       "J": _pct([r["j"] for r in rs]), "M-Fail": mf}
    return table


def table_markdown(table: dict, title: str, f1: str, metrics: str = "memjax", fails: dict | None = None,
                   notes=()) -> str:
    cols = list(table)
    head = "| metric | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols) + "\n"
    rows = []
    for m in ("n", "F1", "B1", "J", "M-Fail"):
        cells = ["—" if table[c][m] is None else (str(table[c][m]) if m == "n" else f"{table[c][m]:.2f}")
                 for c in cols]
        rows.append(f"| {m} | " + " | ".join(cells) + " |")
    note = (f"\nF1 is over token {'sets' if f1 == 'set' else 'multisets'} of SQuAD-normalised answers; values in %.\n"
            if metrics == "memjax" else f"\nAnswer metrics profile: `{metrics}` (memjax.evaluation.profiles); values in %.\n")
    warn = f"**{failure_line(fails)}**\n\n" if fails and fails["items"] else ""
    return f"# {title}\n\n" + warn + "".join(f"{n}\n\n" for n in notes) + head + "\n".join(rows) + "\n" + note


def table_chart(table: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = list(table)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.26
    for i, m in enumerate(("F1", "B1", "J")):
        vals = [table[c][m] or 0.0 for c in cols]
        ax.bar([x + (i - 1) * width for x in range(len(cols))], vals, width, label=m)
    ax.set_xticks(range(len(cols)), [f"{c}\n(n={table[c]['n']})" for c in cols])
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def failed(rec: dict) -> bool:
    """A record whose score is not one: the judge request failed or its reply had no label (and the profile did
    not drop it), or the predictor raised."""
    return "error" in rec or rec.get("judge_source") == "error" or (rec.get("judge_source") == "none"
                                                                     and rec.get("j") is not None)


def failures(records: Sequence[dict]) -> dict[str, int]:
    """{items, judge_errors, judge_unparsed, predictor_errors} over the table's records (a resume included)."""
    return {"items": sum(failed(r) for r in records),
            "judge_errors": sum(r.get("judge_source") == "error" for r in records),
            "judge_unparsed": sum(r.get("judge_source") == "none" and r.get("j") is not None for r in records),
            "predictor_errors": sum("error" in r for r in records), "of": len(records)}


def failure_line(fails: dict) -> str:
    return (f"WARNING: {fails['items']} of {fails['of']} items failed ({fails['judge_errors']} judge errors, "
            f"{fails['judge_unparsed']} unparsable judge replies, {fails['predictor_errors']} predictor errors): they "
            "are left out of J or scored 0 and are not results; run again into the same out dir to retry them")
