"""Seed study for the tiny RL default: held-out accuracy before/after RL, real vs ablated, over seeds.

    python scripts/tiny_seeds.py [--seeds 0 1 2] [--steps 30] [--ablations none shuffle_rewards]
                                 [--out benchmarks/results/tiny_rl_seeds_cpu.json] [--replot]

Runs memjax.cli.train.train with configs/tiny.py's settings for every (seed, ablation), evaluating the held-out
split every `eval_every` steps; prints one row per run, then per ablation and per evaluated step the mean and
std (ddof=1, over seeds) of the rise in sampled (T=1) and greedy accuracy, and writes them as JSON plus a PNG
(held-out accuracy vs step, one line per run). The numbers quoted in tests/unit/systems/memagent/tiny/test_tiny.py, the README and
BUILD.md come from this script.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import sys
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from memjax.cli.train import train  # noqa: E402
from memjax.core.config import load_config_file  # noqa: E402

METRICS = ("accuracy_sampled", "accuracy")


def summarize(rows: list[dict]) -> dict:
    """{ablation: {step: {metric: {mean, std, values}}}} of the rise (eval at step - eval at step 0)."""
    out: dict = {}
    for abl in dict.fromkeys(r["ablation"] for r in rows):
        sel = [r for r in rows if r["ablation"] == abl]
        steps = sorted({e["step"] for r in sel for e in r["evals"]} - {0})
        out[abl] = {}
        for s in steps:
            out[abl][s] = {}
            for k in METRICS:
                v = np.asarray([next(e[k] for e in r["evals"] if e["step"] == s) - r["evals"][0][k] for r in sel])
                out[abl][s][k] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                                  "values": v.round(4).tolist()}
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    colors = {"none": "tab:blue", "shuffle_rewards": "tab:red", "zero_advantages": "tab:gray"}
    names = {"none": "real rewards", "shuffle_rewards": "rewards shuffled across groups (ablation)",
             "zero_advantages": "all advantages zero (ablation)"}
    for ax, k, title in zip(axes, METRICS, ("sampled (T=1, 4 per question)", "greedy")):
        for r in rows:
            ax.plot([e["step"] for e in r["evals"]], [e[k] for e in r["evals"]], "o-", ms=3,
                    color=colors.get(r["ablation"], "k"), alpha=0.8,
                    label=names.get(r["ablation"], r["ablation"]) if r["seed"] == rows[0]["seed"] else None)
        ax.set(xlabel="RL step", title=f"held-out accuracy, {title}", ylim=(0, 1))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (256 held-out questions)")
    axes[0].legend(title="one line per seed", loc="lower left")
    fig.suptitle("tiny MemAgent, Multi-Conv GRPO from the shipped warm start (configs/tiny.py), CPU")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="default: configs/tiny.py's")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--ablations", nargs="+", default=["none", "shuffle_rewards"])
    ap.add_argument("--out", default="benchmarks/results/tiny_rl_seeds_cpu.json")
    ap.add_argument("--replot", action="store_true", help="only redraw the PNG from an existing --out JSON")
    args = ap.parse_args(argv)
    if args.replot:
        plot(json.loads(Path(args.out).read_text())["rows"], Path(args.out).with_suffix(".png"))
        return 0
    base = load_config_file(ROOT / "configs" / "tiny.py")
    rows = []
    for abl in args.ablations:
        for seed in args.seeds:
            cfg = dataclasses.replace(base, steps=args.steps or base.steps, seed=seed, ablation=abl,
                                      eval_every=args.eval_every, out_dir=f"out/tiny_seeds/{abl}_{seed}",
                                      resume=False)
            t0 = time.perf_counter()
            shutil.rmtree(cfg.out_dir, ignore_errors=True)  # a fresh run each time
            r = train(cfg)
            hist = r["history"]
            row = {"ablation": abl, "seed": seed, "steps": cfg.steps, "seconds": round(time.perf_counter() - t0, 1),
                   "evals": [{k: e[k] for k in ("step", *METRICS, "accuracy_hop1", "accuracy_hop2") if k in e}
                             for e in r["evals"]],
                   "reward_first5": float(np.mean([h["reward"] for h in hist[:5]])),
                   "reward_last5": float(np.mean([h["reward"] for h in hist[-5:]])),
                   "step_seconds": float(np.median([h["rollout_s"] + h["update_s"] for h in hist]))}
            rows.append(row)
            b, a = row["evals"][0], row["evals"][-1]
            print(f"{abl:16s} seed {seed}: sampled {b['accuracy_sampled']:.3f} -> {a['accuracy_sampled']:.3f}  "
                  f"greedy {b['accuracy']:.3f} -> {a['accuracy']:.3f}  ({row['seconds']:.0f}s)", flush=True)
    summary = summarize(rows)
    for abl, by_step in summary.items():
        for s, m in by_step.items():
            print(f"{abl:16s} step {s:3d}: " + "  ".join(
                f"{k} rise {v['mean']:+.3f} +- {v['std']:.3f}" for k, v in m.items()))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"device": f"{jax.devices()[0].platform} ({platform.processor() or platform.machine()})",
            "command": "python scripts/tiny_seeds.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "config": dataclasses.asdict(base)}
    out.write_text(json.dumps({**meta, "rows": rows, "summary": summary}, indent=1, default=str) + "\n")
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
