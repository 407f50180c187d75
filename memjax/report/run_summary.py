"""A run's terminal summary and reward-curve PNG (what memjax.train, memjax.evaluate and memjax.demo print and save at
the end of a run): the curve PNG, a terminal sparkline/table, example memory traces.

Owns: `plot(result, path)` (matplotlib, Agg backend: per-step mean rollout reward and held-out greedy
accuracy at every evaluation), `sparkline(values)` and `print_report(result, png)` (rich). Reads only the
dict `memjax.cli.train.train` returns (result.json); computes nothing that the run did not measure. The plot
takes any system's result (held-out `accuracy` when the system reports it, else its first metric); the
terminal report is the tiny task's (per-hop accuracy and memory traces).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], lo: float = 0.0, hi: float = 1.0) -> str:
    span = max(hi - lo, 1e-9)
    return "".join(_BARS[min(len(_BARS) - 1, max(0, int((v - lo) / span * len(_BARS))))] for v in values)


def plot(result: dict[str, Any], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    hist, evals = result["history"], result.get("evals") or []
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([h["step"] for h in hist], [h["reward"] for h in hist], ".-", label="rollout reward (mean over G)")
    keys = [k for k in (evals[0] if evals else {}) if k != "step" and isinstance(evals[0][k], (int, float))]
    main = "accuracy" if "accuracy" in keys else (keys[0] if keys else None)
    if main is not None:
        ax.plot([e["step"] for e in evals], [e[main] for e in evals], "s-", label=f"held-out {main} (greedy)")
    if "accuracy_sampled" in keys:
        ax.plot([e["step"] for e in evals], [e["accuracy_sampled"] for e in evals], "^-",
                label="held-out accuracy (T=1 samples)")
    abl = result["config"].get("ablation", "none")
    ax.set(xlabel="RL step", ylabel="reward / held-out metric",
           title=f"{result.get('system', 'tiny')}: RL from the initial policy (ablation: {abl})")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def print_report(result: dict[str, Any], png: Path | None = None, console: Console | None = None,
                 traces: int = 3) -> None:
    con = console or Console()
    hist, b, a = result["history"], result["before"], result["after"]
    rewards = [h["reward"] for h in hist]
    con.print(f"rollout reward per step  {sparkline(rewards)}  ({rewards[0]:.2f} -> {rewards[-1]:.2f})")
    t = Table(title="held-out accuracy (MemAgent workflow; hop columns greedy)")
    for c in ("", "sampled T=1", "greedy", "1-hop", "2-hop"):
        t.add_column(c, justify="right")
    for name, e in (("before RL", b), ("after RL", a)):
        t.add_row(name, f"{e.get('accuracy_sampled', float('nan')):.3f}", f"{e['accuracy']:.3f}",
                  f"{e.get('accuracy_hop1', float('nan')):.3f}", f"{e.get('accuracy_hop2', float('nan')):.3f}")
    t.add_row("change", f"{a.get('accuracy_sampled', 0) - b.get('accuracy_sampled', 0):+.3f}",
              f"{a['accuracy'] - b['accuracy']:+.3f}",
              f"{a.get('accuracy_hop1', 0) - b.get('accuracy_hop1', 0):+.3f}",
              f"{a.get('accuracy_hop2', 0) - b.get('accuracy_hop2', 0):+.3f}")
    con.print(t)
    con.print("[bold]example memory traces after RL (held-out):")
    for s, tr in list(zip(result["heldout"], result["traces_after"]))[:traces]:
        con.print(f"  Q: {s['query']}   gold: {s['answers'][0]}   ({s['hops']}-hop)")
        con.print(f"     doc: {s['context']}")
        for i, m in enumerate(tr["memories"]):
            con.print(f"     memory after chunk {i + 1}: {m}")
        con.print(f"     final: {tr['final']}   reward {tr['reward']:.0f}")
    if png is not None:
        con.print(f"reward curve: {png}")
    con.print(f"total {result['seconds']:.0f}s")
