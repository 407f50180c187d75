"""Seed study for the tiny searchable-memory task: held-out reward before/after RL, real vs shuffled rewards.

    python scripts/tiny_sumer_seeds.py [--seeds 0 1 2] [--ablations none shuffle_rewards] [--runs-dir out/tiny_sumer_seeds]
                                       [--summarize-only] [--out benchmarks/results/tiny_sumer_seeds_cpu.json]

Runs `python -m memjax.train configs/sumer/tiny.py --set seed=S --set ablation=A --set out_dir=RUNS/A_S` for every
(seed, ablation) (skipped when RUNS/A_S/result.json exists), then reads each run's evals.jsonl and prints, per
ablation and evaluated step, the mean and std (ddof=1, over seeds) of the rise in greedy reward and in the
mean reward of temperature-1 episodes; writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("reward", "reward_sampled")


def summarize(runs_dir: Path, seeds, ablations) -> dict:
    out: dict = {"machine": platform.machine(), "config": "configs/sumer/tiny.py", "runs": {}, "rise": {}}
    for abl in ablations:
        evals = {}
        for s in seeds:
            path = runs_dir / f"{abl}_{s}" / "evals.jsonl"
            if path.is_file():
                evals[s] = {e["step"]: e for e in map(json.loads, path.read_text().splitlines())}
                out["runs"][f"{abl}_{s}"] = [{k: e.get(k) for k in ("step", *METRICS, "accuracy")}
                                            for e in evals[s].values()]
        steps = sorted({st for ev in evals.values() for st in ev} - {0})
        out["rise"][abl] = {}
        for st in steps:
            row = {}
            for m in METRICS:
                vals = [ev[st][m] - ev[0][m] for ev in evals.values() if st in ev]
                row[m] = {"mean": float(np.mean(vals)), "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0,
                          "values": vals}
            out["rise"][abl][st] = row
            print(f"{abl:16s} step {st:3d}  " + "  ".join(
                f"{m} rise {row[m]['mean']:+.3f} +- {row[m]['std']:.3f} ({', '.join(f'{v:+.3f}' for v in row[m]['values'])})"
                for m in METRICS))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--ablations", nargs="+", default=["none", "shuffle_rewards"])
    ap.add_argument("--runs-dir", default="out/tiny_sumer_seeds")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tiny_sumer_seeds_cpu.json"))
    args = ap.parse_args(argv)
    runs = Path(args.runs_dir)
    if not args.summarize_only:
        for abl in args.ablations:
            for s in args.seeds:
                if not (runs / f"{abl}_{s}" / "result.json").is_file():
                    subprocess.run([sys.executable, "-m", "memjax.train", str(ROOT / "configs" / "sumer" / "tiny.py"),
                                    "--set", f"seed={s}", "--set", f"ablation={abl}", "--set",
                                    f"out_dir={runs / f'{abl}_{s}'}"], check=True, cwd=ROOT)
    res = summarize(runs, args.seeds, args.ablations)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
