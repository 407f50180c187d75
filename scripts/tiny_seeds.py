"""Seed study for the tiny RL default: held-out accuracy before/after RL, real vs ablated, over seeds.

    python scripts/tiny_seeds.py [--seeds 0 1 2] [--steps 40] [--ablations none shuffle_rewards] [--out out/tiny_seeds.json]

Runs memjax.tiny.rl.run with configs/tiny.py's settings (eval only before and after) for every (seed, ablation),
prints one row per run and the mean / std (ddof=1) of the change per ablation, and writes them as JSON.
The numbers quoted in tests/test_tiny.py and memjax/tiny/NOTES.md come from this script.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from memjax.config import load_config_file  # noqa: E402
from memjax.tiny.rl import run  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ablations", nargs="+", default=["none", "shuffle_rewards"])
    ap.add_argument("--out", default="out/tiny_seeds.json")
    args = ap.parse_args(argv)
    base = load_config_file(Path(__file__).resolve().parent.parent / "configs" / "tiny.py")
    rows = []
    for abl in args.ablations:
        for seed in args.seeds:
            cfg = dataclasses.replace(base, steps=args.steps, seed=seed, ablation=abl, eval_every=0,
                                      out_dir=f"out/tiny_seeds/{abl}_{seed}")
            t0 = time.perf_counter()
            r = run(cfg, log=lambda *a: None)
            row = {"ablation": abl, "seed": seed, "steps": args.steps, "seconds": time.perf_counter() - t0,
                   **{f"{w}_{k}": r[w][k] for w in ("before", "after") for k in ("accuracy", "accuracy_sampled")},
                   "reward_first5": float(np.mean([h["reward"] for h in r["history"][:5]])),
                   "reward_last5": float(np.mean([h["reward"] for h in r["history"][-5:]]))}
            row["rise_greedy"] = row["after_accuracy"] - row["before_accuracy"]
            row["rise_sampled"] = row["after_accuracy_sampled"] - row["before_accuracy_sampled"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for abl in args.ablations:
        sel = [r for r in rows if r["ablation"] == abl]
        for k in ("rise_greedy", "rise_sampled"):
            v = np.asarray([r[k] for r in sel])
            summary[f"{abl}_{k}"] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                                     "values": v.tolist()}
    out = {"device": f"{jax.devices()[0].platform} ({platform.processor() or platform.machine()})",
           "rows": rows, "summary": summary}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
