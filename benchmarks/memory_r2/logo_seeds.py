"""LoGo-GRPO vs plain GRPO (local branch off) at the same rollout budget on the tiny Memory-R2 task, 3 seeds each,
with a shuffled-reward control; held-out learning curves, a summary JSON and a plot.

    python -m benchmarks.memory_r2.logo_seeds [--seeds 0 1 2] [--arms logo grpo shuffle] [--steps 40]
        [--eval-every 5] [--heldout 128] [--jobs 2] [--root /tmp/r2tiny/runs]
        [--json benchmarks/results/tiny_r2_logo_seeds_cpu.json] [--png docs/img/tiny_r2_logo_seeds.png]
        [--sessions 3]

Each run is `python -m memjax.train configs/memory_r2/tiny.py --set seed=S --set steps=N --set eval_every=E
--set agent.heldout_size=H --set out_dir=ROOT/ARM_sS` plus the arm's settings. Arms: `logo` = the config (n = 8
global rollouts per episode + every session re-rolled m = 4 times: 36 calls per 3-session episode); `grpo` =
agent.logo=false, agent.group_size=12 (36 calls); `shuffle` = the logo arm with ablation=shuffle_rewards
(trajectory and credit-unit rewards permuted over the batch); `outcome` = agent.logo=false,
agent.group_size=12, agent.credit=outcome (outcome-only GRPO: one trajectory reward for every session).
`--sessions S` (S != 3) runs the many-session variant instead: S sessions of ONE fact each
(agent.task.facts_per_session=1, agent.task.sessions=S) from its own warm start
(agent.warmstart=memjax/assets/tiny/r2_warmstart_sS), at the same per-session budget (8 x S + 4 x S calls per
episode for logo, 12 x S for grpo / outcome); its default files end in _sS. `--jobs J` runs J runs at a time, run i pinned to
core i mod J (taskset), so parallel runs do not share a core; the training numbers
do not depend on it (CPU, same seed -> same numbers), only the seconds do.
After every run the JSON is rewritten (partial results survive a stop): per run the command, the held-out
evaluations on the way (greedy, mean F1 of every question on the final bank, per-case correct-op rates),
per-step mean reward and rollout calls, rollout / update seconds and the wall time; per arm the mean and
sample std (ddof 1) of the F1 rise over its seeds. The plot: held-out F1 against step, one line per run,
the arm mean bold.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARMS = {"logo": [], "grpo": ["agent.logo=false", "agent.group_size=12"], "shuffle": ["ablation=shuffle_rewards"],
        "outcome": ["agent.logo=false", "agent.group_size=12", "agent.credit=outcome"]}
COLOURS = {"logo": "tab:blue", "grpo": "tab:orange", "shuffle": "tab:grey", "outcome": "tab:red"}
DEFAULT_SESSIONS = 3
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def task_sets(sessions: int) -> list[str]:
    """The --set overrides of the many-session variant (none for the default task)."""
    if sessions == DEFAULT_SESSIONS:
        return []
    return ["agent.task.facts_per_session=1", f"agent.task.sessions={sessions}",
            f"agent.warmstart=memjax/assets/tiny/r2_warmstart_s{sessions}"]


def command(arm: str, seed: int, steps: int, eval_every: int, heldout: int, root: Path,
            sessions: int = DEFAULT_SESSIONS) -> list[str]:
    sets = [f"seed={seed}", f"steps={steps}", f"checkpoint_every={steps}", f"eval_every={eval_every}",
            f"agent.heldout_size={heldout}", f"out_dir={root / f'{arm}_s{seed}'}", *ARMS[arm], *task_sets(sessions)]
    return [sys.executable, "-m", "memjax.train", "configs/memory_r2/tiny.py",
            *[a for s in sets for a in ("--set", s)]]


def _eval(row: dict) -> dict:
    return {k: v for k, v in row.items() if isinstance(v, (int, float))}


def row(arm: str, seed: int, cmd: list[str], res: dict, wall: float) -> dict:
    h = res["history"]
    return {"arm": arm, "seed": seed, "command": " ".join(cmd[1:]), "before": _eval(res["before"]),
            "after": _eval(res["after"]), "evals": [_eval(e) for e in res["evals"]],
            "f1_rise": res["after"]["f1"] - res["before"]["f1"],
            "reward": [x["reward"] for x in h], "rollout_calls": [x.get("conversations") for x in h],
            "local_branches": [x.get("rollout_local_branches") for x in h],
            "rollout_s": sum(x["rollout_s"] for x in h), "update_s": sum(x["update_s"] for x in h), "wall_s": wall}


def summary(rows: list[dict]) -> dict:
    out = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        rs = [r for r in rows if r["arm"] == arm]
        rise, after = [r["f1_rise"] for r in rs], [r["after"]["f1"] for r in rs]
        std = (lambda v: statistics.stdev(v) if len(v) > 1 else None)
        out[arm] = {"seeds": [r["seed"] for r in rs], "f1_rise": rise, "f1_rise_mean": statistics.mean(rise),
                    "f1_rise_std": std(rise), "f1_after_mean": statistics.mean(after), "f1_after_std": std(after),
                    "rollout_calls_per_step": statistics.mean(c for r in rs for c in r["rollout_calls"])}
        steps = sorted({e["step"] for r in rs for e in r["evals"]})
        out[arm]["curve"] = [{"step": s, "f1_mean": statistics.mean(e["f1"] for r in rs for e in r["evals"]
                                                                      if e["step"] == s)} for s in steps]
    return out


def plot(rows: list[dict], path: Path, sessions: int = DEFAULT_SESSIONS) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    summ = summary(rows)
    for arm, s in summ.items():
        for r in (r for r in rows if r["arm"] == arm):
            ax.plot([e["step"] for e in r["evals"]], [e["f1"] for e in r["evals"]], color=COLOURS.get(arm), alpha=0.3,
                    lw=1)
        label = f"{arm} (rise {s['f1_rise_mean']:+.3f}" + (f" ± {s['f1_rise_std']:.3f})" if s["f1_rise_std"] is not None else ")")
        ax.plot([c["step"] for c in s["curve"]], [c["f1_mean"] for c in s["curve"]], color=COLOURS.get(arm), lw=2.5,
                label=label)
    calls = round(statistics.mean(c for r in rows for c in r["rollout_calls"] if c is not None))
    heldout = rows[0]["command"].split("agent.heldout_size=")[1].split()[0]
    ax.set_xlabel(f"training step (4 episodes, {calls} rollout calls each)")
    ax.set_ylabel(f"held-out greedy F1 ({heldout} episodes)")
    ax.set_ylim(-0.02, 1.02)
    what = "" if sessions == DEFAULT_SESSIONS else f", {sessions} sessions of one fact"
    ax.set_title(f"tiny Memory-R2{what}: LoGo-GRPO vs plain GRPO at equal rollout budget", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory_r2.logo_seeds", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=["logo", "grpo", "shuffle"], choices=sorted(ARMS))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--heldout", type=int, default=128)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--root", default="/tmp/r2tiny/runs")
    ap.add_argument("--json", default=None, help="default benchmarks/results/tiny_r2_logo_seeds[_sS]_cpu.json")
    ap.add_argument("--png", default=None, help="default docs/img/tiny_r2_logo_seeds[_sS].png")
    ap.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS)
    ap.add_argument("--device", default=f"cpu ({platform.machine()})")
    args = ap.parse_args(argv)
    if args.jobs < 1 or args.steps < 1 or args.eval_every < 0 or args.sessions < 1:
        ap.error("--jobs, --steps and --sessions must be >= 1 and --eval-every >= 0")
    tail = "" if args.sessions == DEFAULT_SESSIONS else f"_s{args.sessions}"
    args.json = args.json or str(RESULTS / f"tiny_r2_logo_seeds{tail}_cpu.json")
    args.png = args.png or str(ROOT / "docs" / "img" / f"tiny_r2_logo_seeds{tail}.png")
    path = Path(args.json)
    old = json.loads(path.read_text()) if path.is_file() else {}
    keep = old.get("steps") == args.steps and old.get("eval_every") == args.eval_every \
        and old.get("sessions", DEFAULT_SESSIONS) == args.sessions
    rows = [r for r in old.get("runs", []) if keep and (r["arm"], r["seed"]) not in
            {(a, s) for s in args.seeds for a in args.arms}]
    todo = [(s, a) for s in args.seeds for a in args.arms]  # seeds outer: every arm gets seed 0 first
    running: list[tuple[subprocess.Popen, str, int, list[str], float]] = []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    slot = 0
    while todo or running:
        while todo and len(running) < args.jobs:
            seed, arm = todo.pop(0)
            cmd = command(arm, seed, args.steps, args.eval_every, args.heldout, Path(args.root), args.sessions)
            pin = ["taskset", "-c", str(slot % (os.cpu_count() or 1))] if args.jobs > 1 else []
            slot += 1
            print("$", " ".join(cmd[1:]), flush=True)
            Path(args.root).mkdir(parents=True, exist_ok=True)  # before the log beside it (a fresh --root)
            log = open(Path(args.root).parent / f"{arm}_s{seed}.log", "w") if args.jobs > 1 else None
            running.append((subprocess.Popen(pin + cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                                             if log else None), arm, seed, cmd, time.perf_counter()))
        time.sleep(1.0)
        for job in [j for j in running if j[0].poll() is not None]:
            running.remove(job)
            proc, arm, seed, cmd, t0 = job
            if proc.returncode != 0:
                raise SystemExit(f"{arm} seed {seed} failed (exit {proc.returncode}); log under {Path(args.root).parent}")
            res = json.loads((Path(args.root) / f"{arm}_s{seed}" / "result.json").read_text())
            rows.append(row(arm, seed, cmd, res, time.perf_counter() - t0))
            rows.sort(key=lambda r: (list(ARMS).index(r["arm"]), r["seed"]))
            out = {"device": args.device, "config": "configs/memory_r2/tiny.py", "sessions": args.sessions,
                   "task_sets": task_sets(args.sessions), "steps": args.steps,
                   "eval_every": args.eval_every, "heldout": args.heldout, "jobs": args.jobs, "runs": rows,
                   "summary": summary(rows)}
            path.write_text(json.dumps(out, indent=1, default=str) + "\n")
            plot(rows, Path(args.png), args.sessions)
            r = rows[[(x["arm"], x["seed"]) for x in rows].index((arm, seed))]
            print(f"{arm} seed {seed}: F1 {r['before']['f1']:.3f} -> {r['after']['f1']:.3f} ({r['wall_s']:.0f} s)",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
