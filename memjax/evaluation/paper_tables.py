"""The LoCoMo-family papers' own table layouts, with their published numbers, beside a memjax LoCoMo evaluation.

Owns: `PAPER_TABLES` (per paper: its column order of question categories, its metric set, a few published rows,
the citation) and `paper_markdown(table, metrics)` (a LoCoMo score table, as memjax.evaluation.locomo.score_table
gives it, laid out as the paper whose metric profile it was scored with lays out its Table 1, followed by the
paper's rows). An evaluation writes it as `paper_table.md` beside results.md.
Sources (each paper's Table 1): Memory-R2 ("LoCoMo main results", Qwen2.5-7B-Instruct; multi-hop, open-domain,
single-hop, temporal, overall; F1, B1, J; profile `memory_r2`) and SUMER ("main results on LoCoMo validation",
9 held-out conversations; single-hop, multi-hop, open-domain, temporal, overall; F1, B1, J; profiles `sumer` and
`mem0`, as SUMER's Mem0 / A-MEM numbers came from that code's evaluation). Memory-R1's values are not held (only
its layout is known), and LoCoMo's own evaluation (`locomo`) has no paper table: no layout is written for them.
Invariants: the numbers are the papers', as printed (two-decimal percentages); nothing here is computed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperTable:
    paper: str
    citation: str
    columns: tuple[str, ...]          # memjax category names (memjax.data.locomo.CATEGORY_NAMES) and "overall"
    metrics: tuple[str, ...]
    rows: dict[str, tuple[float, ...]]  # method -> values, column-major (col 0's metrics, then col 1's, ...)


_R2_COLS = ("multi-hop", "open-domain", "single-hop", "temporal", "overall")
_SUMER_COLS = ("single-hop", "multi-hop", "open-domain", "temporal", "overall")
MEMORY_R2 = PaperTable(
    "Memory-R2", "Memory-R2, Table 1 (LoCoMo main results, Qwen2.5-7B-Instruct backbone)",
    _R2_COLS, ("F1", "B1", "J"), {
        "Memory-R2": (38.41, 30.90, 80.93, 20.76, 16.78, 67.53, 54.06, 48.73, 86.80, 59.65, 50.05, 69.90,
                      50.60, 44.01, 80.99),
        "Memory-R2 (GPT-OSS)": (36.37, 29.79, 85.07, 30.22, 24.50, 74.14, 50.98, 45.79, 90.58, 62.48, 55.33, 83.33,
                                49.67, 43.77, 87.10),
        "Memory-R1": (33.64, 26.06, 62.34, 23.55, 20.71, 40.96, 46.86, 40.92, 67.81, 47.75, 38.49, 49.61,
                      43.14, 36.44, 61.51),
        "MemAgent": (35.95, 24.56, 70.65, 29.20, 25.48, 62.07, 50.55, 43.89, 78.61, 23.15, 16.55, 56.96,
                     40.72, 33.36, 71.52),
        "Mem0": (24.96, 18.05, 61.92, 20.31, 15.82, 48.19, 32.74, 25.27, 65.20, 33.16, 26.28, 38.76, 30.61, 23.55, 53.30),
    })
SUMER = PaperTable(
    "SUMER", "SUMER, Table 1 (LoCoMo validation, 9 held-out conversations)",
    _SUMER_COLS, ("F1", "B1", "J"), {
        "SUMER-GRPO": (61.82, 56.55, 79.53, 28.45, 21.85, 44.83, 19.98, 17.45, 39.53, 42.23, 37.66, 62.72,
                       48.65, 43.44, 66.79),
        "SUMER-Base": (34.98, 30.30, 64.45, 16.90, 13.36, 36.78, 13.48, 11.53, 36.05, 25.10, 21.22, 22.22,
                       28.07, 23.95, 48.55),
        "MemMachine": (48.18, 41.78, 44.35, 32.86, 23.18, 24.82, 14.76, 11.20, 19.79, 37.60, 28.85, 17.76,
                       41.09, 33.77, 33.70),
        "Mem0": (34.38, 29.76, 46.25, 27.83, 20.27, 31.56, 14.97, 11.65, 31.25, 36.20, 28.89, 22.43, 32.35, 26.71, 37.66),
        "Full Context": (27.10, 18.25, 63.02, 19.42, 14.62, 33.69, 12.88, 11.35, 39.58, 10.59, 7.95, 17.45,
                         21.37, 15.01, 46.69),
    })
PAPER_TABLES = {"memory_r2": MEMORY_R2, "sumer": SUMER, "mem0": SUMER}   # metric profile -> the paper's table


def paper_markdown(table: dict[str, dict], metrics: str, label: str = "this run") -> str | None:
    """`table` ({category | "overall": {F1, B1, J, ...}} in percent) in the layout of the paper that scores with the
    profile `metrics`, above the paper's published rows; None when no paper of the family uses that profile."""
    pt = PAPER_TABLES.get(metrics)
    if pt is None:
        return None
    head = ("| method | " + " | ".join(f"{c} {m}" for c in pt.columns for m in pt.metrics) + " |\n|---|"
            + "---:|" * (len(pt.columns) * len(pt.metrics)) + "\n")
    ours = [table.get(c, {}).get(m) for c in pt.columns for m in pt.metrics]
    lines = [f"| **{label}** | " + " | ".join("—" if v is None else f"{v:.2f}" for v in ours) + " |"]
    lines += [f"| {name} (paper) | " + " | ".join(f"{v:.2f}" for v in vals) + " |" for name, vals in pt.rows.items()]
    return (f"# In {pt.paper}'s layout\n\nScored with the `{metrics}` profile; the paper's rows: {pt.citation}.\n\n"
            + head + "\n".join(lines) + "\n")
