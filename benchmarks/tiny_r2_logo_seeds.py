"""LoGo-GRPO vs plain GRPO (local branch off) at the same rollout budget on the tiny Memory-R2 task, seeds in turn.

    python -m benchmarks.tiny_r2_logo_seeds [--seeds 0 1 2] [--arms logo grpo shuffle] [--steps 12]
        [--heldout 128] [--root /tmp/r2tiny/runs] [--json benchmarks/results/tiny_r2_logo_seeds_cpu.json]

Each run is `nice -n 10 python -m memjax.train configs/memory_r2_tiny.py --set seed=S --set steps=N
--set agent.heldout_size=H --set out_dir=ROOT/ARM_sS` plus the arm's settings, one after another (never in
parallel). Arms: `logo` = the config (n = 8 global rollouts per episode + every session re-rolled m = 4
times: 36 calls per 3-session episode); `grpo` = agent.logo=false, agent.group_size=12 (36 calls); `shuffle`
= the logo arm with ablation=shuffle_rewards (trajectory and credit-unit rewards permuted over the batch).
After every run the JSON is rewritten (partial results survive a stop): per run the command, the held-out
evaluation before / after (greedy, mean F1 of every question on the final bank), per-step mean reward and
rollout calls, rollout / update seconds and the wall time; per arm the mean and sample std (ddof 1) of the
F1 rise over its seeds.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARMS = {"logo": [], "grpo": ["agent.logo=false", "agent.group_size=12"], "shuffle": ["ablation=shuffle_rewards"]}
RESULTS = Path(__file__).resolve().parent / "results"


def command(arm: str, seed: int, steps: int, heldout: int, root: Path) -> list[str]:
    sets = [f"seed={seed}", f"steps={steps}", f"checkpoint_every={steps}", f"agent.heldout_size={heldout}",
            f"out_dir={root / f'{arm}_s{seed}'}", *ARMS[arm]]
    return ["nice", "-n", "10", sys.executable, "-m", "memjax.train", "configs/memory_r2_tiny.py",
            *[a for s in sets for a in ("--set", s)]]


def row(arm: str, seed: int, cmd: list[str], res: dict, wall: float) -> dict:
    h = res["history"]
    return {"arm": arm, "seed": seed, "command": " ".join(cmd[3:]), "before": res["before"], "after": res["after"],
            "f1_rise": res["after"]["f1"] - res["before"]["f1"],
            "reward": [x["reward"] for x in h], "rollout_calls": [x.get("conversations") for x in h],
            "local_branches": [x.get("rollout_local_branches") for x in h],
            "rollout_s": sum(x["rollout_s"] for x in h), "update_s": sum(x["update_s"] for x in h), "wall_s": wall}


def summary(rows: list[dict]) -> dict:
    out = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        rise = [r["f1_rise"] for r in rows if r["arm"] == arm]
        after = [r["after"]["f1"] for r in rows if r["arm"] == arm]
        out[arm] = {"seeds": [r["seed"] for r in rows if r["arm"] == arm], "f1_rise": rise,
                    "f1_rise_mean": statistics.mean(rise), "f1_rise_std": statistics.stdev(rise) if len(rise) > 1 else None,
                    "f1_after_mean": statistics.mean(after),
                    "f1_after_std": statistics.stdev(after) if len(after) > 1 else None,
                    "rollout_calls_per_step": statistics.mean(c for r in rows if r["arm"] == arm
                                                              for c in r["rollout_calls"])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tiny_r2_logo_seeds", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=["logo", "grpo"], choices=sorted(ARMS))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--heldout", type=int, default=128)
    ap.add_argument("--root", default="/tmp/r2tiny/runs")
    ap.add_argument("--json", default=str(RESULTS / "tiny_r2_logo_seeds_cpu.json"))
    ap.add_argument("--device", default=f"cpu ({platform.machine()})")
    args = ap.parse_args(argv)
    path = Path(args.json)
    old = json.loads(path.read_text()) if path.is_file() else {}
    rows = [r for r in old.get("runs", []) if (r["arm"], r["seed"]) not in
            {(a, s) for s in args.seeds for a in args.arms}]
    order = [(s, a) for s in args.seeds for a in args.arms]  # seeds outer: every arm gets seed 0 first
    for seed, arm in order:
        cmd = command(arm, seed, args.steps, args.heldout, Path(args.root))
        print("$", " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        res = json.loads((Path(args.root) / f"{arm}_s{seed}" / "result.json").read_text())
        rows.append(row(arm, seed, cmd, res, time.perf_counter() - t0))
        out = {"device": args.device, "config": "configs/memory_r2_tiny.py", "steps": args.steps,
               "heldout": args.heldout, "runs": rows, "summary": summary(rows)}
        path.write_text(json.dumps(out, indent=1, default=str) + "\n")
        r = rows[-1]
        print(f"{arm} seed {seed}: F1 {r['before']['f1']:.3f} -> {r['after']['f1']:.3f} ({r['wall_s']:.0f} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
