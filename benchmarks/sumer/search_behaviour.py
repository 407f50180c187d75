"""SUMER's search behaviour in miniature: does GRPO change how the tiny agent searches while its reward rises?

    python -m benchmarks.sumer.search_behaviour [--seeds 0 1 2] [--steps 8] [--prompts 16] [--heldout 64]
        [--ablation none|shuffle_rewards] [--window 3] [--root /tmp/sumer_search]
        [--json benchmarks/results/sumer_search_behaviour_cpu.json]
        [--png benchmarks/results/sumer_search_behaviour_cpu.png]

RL: `memjax.cli.train.train` on configs/sumer/tiny.py (GRPO, the shipped warm start, group 8) with `steps`,
`prompts_per_step`, `agent.heldout_size` and `seed` set, temperature-1 held-out episodes off (eval_samples 0)
and held-out greedy evaluation only before and after; `--ablation shuffle_rewards` is the control (rewards
permuted within the batch: no signal about which episodes were good).
Per training step, from the metrics the loop logs for the rollout batch the step trains on (prompts x 8
temperature-1 episodes; SumerWorkflow.stats): `reward`, `calls` (tool calls per episode, submit included),
`searches` (executed search_memory calls per episode), `search_hit_rate` (searches whose results show the
record that answers, over all searches), `evidence_found` (episodes that saw that record at least once),
`filtered_search_frac` (searches with the session filter), `records_per_search` (records a search shows: 1
for a filtered search of a filtered question, 2-3 for an unfiltered one) and `end_submitted`. Held-out greedy
before/after: reward, accuracy and the search measures. Summary per seed: the mean of the first and of the
last `window` steps of each measure and their change; across seeds mean, std (ddof=1), min and max of the
changes. Writes the JSON after every seed (partial results survive a stop) and the plot at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CONFIG = ROOT / "configs" / "sumer" / "tiny.py"
STEP_MEASURES = {"reward": "reward", "calls": "rollout_mean_calls", "searches": "rollout_mean_searches",
                 "search_hit_rate": "rollout_search_hit_rate", "evidence_found": "rollout_evidence_found",
                 "filtered_search_frac": "rollout_filtered_search_frac",
                 "records_per_search": "rollout_records_per_search", "end_submitted": "rollout_end_submitted"}
HELDOUT_MEASURES = ("reward", "accuracy", "mean_searches", "search_hit_rate", "evidence_found", "filtered_search_frac",
                    "records_per_search")


def rl_config(out_dir: Path, *, seed: int, steps: int, prompts: int, heldout: int, ablation: str = "none"):
    """configs/sumer/tiny.py with the study's (or the CI test's) sizes."""
    from memjax.core.config import load_config_file

    cfg = load_config_file(CONFIG)
    agent = dataclasses.replace(cfg.agent, heldout_size=heldout, eval_samples=0)
    return dataclasses.replace(cfg, agent=agent, seed=seed, steps=steps, prompts_per_step=prompts, eval_every=0,
                               checkpoint_every=steps, out_dir=str(out_dir), ablation=ablation)


def run_seed(out_dir: Path, **kw) -> dict:
    """One training run; its per-step measures and held-out greedy evaluation before/after."""
    from memjax.cli.train import train

    t0 = time.perf_counter()
    res = train(rl_config(out_dir, **kw))
    steps = {name: [h.get(key) for h in res["history"]] for name, key in STEP_MEASURES.items()}
    held = {when: {k: res[when].get(k) for k in HELDOUT_MEASURES} for when in ("before", "after")}
    return {"steps": steps, "heldout": held, "seconds": time.perf_counter() - t0}


def summarize(runs: dict[str, dict], window: int) -> dict:
    """Per measure: each seed's mean over the first and last `window` steps and their change; across seeds."""
    out: dict = {}
    for m in STEP_MEASURES:
        changes = {}
        for seed, r in runs.items():
            v = [x for x in r["steps"][m] if x is not None]
            w = min(window, len(v) // 2) or 1
            first, last = statistics.fmean(v[:w]), statistics.fmean(v[-w:])
            changes[seed] = {"first": first, "last": last, "change": last - first}
        ch = [c["change"] for c in changes.values()]
        out[m] = {"per_seed": changes, "mean_change": statistics.fmean(ch),
                  "std_change": statistics.stdev(ch) if len(ch) > 1 else 0.0, "min_change": min(ch),
                  "max_change": max(ch)}
    return out


def plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = ("reward", "searches", "search_hit_rate", "evidence_found", "filtered_search_frac")
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.2))
    for ax, m in zip(axes, panels):
        for seed, r in result["runs"].items():
            v = r["steps"][m]
            ax.plot(range(1, len(v) + 1), v, marker="o", ms=3, label=f"seed {seed}")
        ax.set_title(m.replace("_", " ") + " (rollouts)")
        if m != "reward":  # a fixed scale: a flat measure looks flat
            ax.set_ylim(0, 2 if m == "searches" else 1.02)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    abl = result["settings"].get("ablation", "none")
    fig.suptitle("tiny SUMER, GRPO from the warm start" + ("" if abl == "none" else f" ({abl})")
                 + ": reward and search behaviour per step")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--heldout", type=int, default=64)
    ap.add_argument("--ablation", default="none", choices=("none", "shuffle_rewards"))
    ap.add_argument("--window", type=int, default=3, help="steps averaged at the start and at the end")
    ap.add_argument("--root", default="/tmp/sumer_search")
    ap.add_argument("--json", default=str(RESULTS / "sumer_search_behaviour_cpu.json"))
    ap.add_argument("--png", default=str(RESULTS / "sumer_search_behaviour_cpu.png"))
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    t0 = time.perf_counter()
    result = {"machine": platform.machine(), "cpus": os.cpu_count(), "config": "configs/sumer/tiny.py",
              "command": "python -m benchmarks.sumer.search_behaviour " + " ".join(argv or sys.argv[1:]),
              "settings": {k: getattr(args, k) for k in ("seeds", "steps", "prompts", "heldout", "window",
                                                         "ablation")},
              "runs": {}}
    for s in args.seeds:
        r = run_seed(Path(args.root) / f"seed_{s}", seed=s, steps=args.steps, prompts=args.prompts,
                     heldout=args.heldout, ablation=args.ablation)
        result["runs"][str(s)] = r
        result["summary"] = summarize(result["runs"], args.window)
        result["seconds"] = time.perf_counter() - t0
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"seed {s} ({r['seconds']:.0f} s): " + "  ".join(
            f"{m} {' '.join(f'{x:.2f}' for x in r['steps'][m] if x is not None)}" for m in
            ("reward", "searches", "search_hit_rate", "evidence_found", "filtered_search_frac")), flush=True)
    for m, row in result["summary"].items():
        print(f"{m:16s} change first->last {args.window} steps: {row['mean_change']:+.3f} +- {row['std_change']:.3f} "
              f"(min {row['min_change']:+.3f}, max {row['max_change']:+.3f})")
    plot(result, Path(args.png))
    print(f"wrote {args.json} and {args.png} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
