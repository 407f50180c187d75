"""Curves for the report, drawn by matplotlib (Agg) and returned as inline SVG text (no file, no network).

Owns: `PANELS` (which metrics.jsonl keys go on which panel: reward, loss, KL, clip fraction, entropy,
throughput, step time), `panels_for(keys)` and `curve_svg(title, steps, series)`.
Invariants: a panel is drawn only from keys the run actually logged (None / non-finite values are gaps);
the SVG keeps its text as text (svg.fonttype none) and carries class "curve", data-title (the panel) and
data-series (the number of series drawn), so a browser test can check which curves were drawn.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from html import escape

# (panel title, key patterns in order); a key is shown on the first panel whose pattern matches it fully
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward", (r"reward", r"reward_mean", r"rollout_mean_reward", r"groups_with_signal")),
    ("loss", (r"loss", r"pg_loss", r"value_loss", r"entropy_loss", r"kl_loss")),
    ("KL", (r"approx_kl", r"kl", r"kl_.*", r"logp_mismatch_mean")),
    ("clip fraction", (r"clipfrac", r"clipfrac_high", r"clipfrac_low", r"value_clipfrac")),
    ("entropy", (r"entropy",)),
    ("throughput (tokens/s)", (r"tokens_per_s",)),
    ("step time (s)", (r"rollout_s", r"update_s")),
    ("time per phase (s)", (r"step_s", r"time_.*_s")),
)


def panels_for(keys: Sequence[str]) -> list[tuple[str, list[str]]]:
    """[(panel title, [keys present, in pattern order])] for the panels that have at least one key."""
    out, used = [], set()
    for title, pats in PANELS:
        got = []
        for pat in pats:
            for k in keys:
                if k not in used and re.fullmatch(pat, k):
                    got.append(k)
                    used.add(k)
        if got:
            out.append((title, got))
    return out


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else math.nan


def curve_svg(title: str, steps: Sequence[float], series: dict[str, Sequence], *, xlabel: str = "step",
              marker: str = ".-") -> str:
    """One small line chart as an <svg> element string."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401  (matplotlib.ticker.MaxNLocator below)

    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": title, "font.size": 8}):
        fig, ax = plt.subplots(figsize=(4.2, 2.6))
        for name, ys in series.items():
            ax.plot(list(steps), [_num(y) for y in ys], marker, label=name, markersize=3)
        ax.set_title(title)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        if len(series) > 1 or title not in series:
            ax.legend(fontsize=7)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    return svg.replace("<svg", f'<svg class="curve" data-title="{escape(title, quote=True)}" data-series="{len(series)}"', 1)
