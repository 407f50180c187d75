"""The schedule table: the tiny MemAgent task with a length tail under `sync` and `colocated_async`, same seeds.

  python -m benchmarks.async_schedules [--seeds 0 1 2] [--steps 8] [--max-staleness 1] [--out-dir DIR]
      [--set key=value ...]

Per seed, one `sync` and one `colocated_async` run of configs/tiny.py (in this process, one after the other) with
documents of 3, 3, 3, 3, 6 or 12 chunks drawn per sample (`agent.train_chunks`: a tail of long trajectories, as
memory agents have), 8 questions x group 8 per step, held-out accuracy on 64 questions before and after. Reports
per run the held-out accuracy after `steps`, the mean wall seconds per step over steps 2.. (step 1 compiles), the
rollout and update seconds, and the staleness of the trained tokens; per schedule the mean and standard deviation
over seeds and the s/step ratio against `sync`, all measured in this one process. Writes
DIR/async_schedules_<device>.json and .md (DIR defaults to a fresh folder under /tmp; benchmarks/results only when
given).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import jax

from memjax.core.config import apply_overrides, load_config_file
from memjax.loop.run import Run

ROOT = Path(__file__).resolve().parents[1]
BASE = ["prompts_per_step=8", "agent.group_size=8", "agent.heldout_size=64", "agent.eval_samples=0", "eval_every=0",
        "agent.train_chunks=3,3,3,3,6,12", "update.micro_rows=64", "filter_flat_groups=false", "checkpoint_every=1000"]
SCHEDULES = ("sync", "colocated_async")


def one(out: Path, schedule: str, seed: int, steps: int, staleness: int, extra: list[str]) -> dict:
    sets = [*BASE, f"steps={steps}", f"seed={seed}", f"schedule={schedule}", f"max_staleness={staleness}",
            f"out_dir={out / f'{schedule}_{seed}'}", *extra]
    cfg = apply_overrides(load_config_file(ROOT / "configs" / "tiny.py"), sets)
    t0 = time.perf_counter()
    run = Run(cfg)
    hist = run.run()
    wall = time.perf_counter() - t0
    evals = run.state.evals
    later = hist[1:] or hist
    mean = lambda k: statistics.fmean(float(h.get(k) or 0.0) for h in later)
    return {"schedule": schedule, "seed": seed, "steps": steps, "max_staleness": staleness if schedule != "sync" else 0,
            "heldout_accuracy_before": evals[0]["accuracy"], "heldout_accuracy": evals[-1]["accuracy"],
            "s_per_step": mean("step_s"), "rollout_s": mean("rollout_s"), "update_s": mean("update_s"),
            "staleness_token_mean": mean("rollout_staleness_token_mean"),
            "paused_requests": mean("rollout_async_paused_requests"), "reward_mean": mean("reward"),
            "wall_s": wall, "sets": sets}


def summary(rows: list[dict]) -> dict:
    out = {}
    for s in SCHEDULES:
        rs = [r for r in rows if r["schedule"] == s]
        acc = [r["heldout_accuracy"] for r in rs]
        out[s] = {"runs": len(rs), "heldout_accuracy_mean": statistics.fmean(acc),
                  "heldout_accuracy_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                  "s_per_step_mean": statistics.fmean(r["s_per_step"] for r in rs),
                  "rollout_s_mean": statistics.fmean(r["rollout_s"] for r in rs)}
    out["s_per_step_ratio"] = out["colocated_async"]["s_per_step_mean"] / out["sync"]["s_per_step_mean"]
    out["rollout_s_ratio"] = out["colocated_async"]["rollout_s_mean"] / out["sync"]["rollout_s_mean"]
    return out


def table(rows: list[dict], summ: dict, name: str) -> str:
    lines = ["| schedule | seed | steps | held-out accuracy (before -> after) | s/step | rollout s | update s | "
             "staleness | file |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['schedule']} | {r['seed']} | {r['steps']} | {r['heldout_accuracy_before']:.3f} -> "
                     f"{r['heldout_accuracy']:.3f} | {r['s_per_step']:.2f} | {r['rollout_s']:.2f} | "
                     f"{r['update_s']:.2f} | {r['staleness_token_mean']:.2f} | {name} |")
    for s in SCHEDULES:
        m = summ[s]
        lines.append(f"| **{s}** | mean of {m['runs']} | | {m['heldout_accuracy_mean']:.3f} +- "
                     f"{m['heldout_accuracy_std']:.3f} | {m['s_per_step_mean']:.2f} | {m['rollout_s_mean']:.2f} | | | |")
    lines.append(f"\ns/step colocated_async / sync: {summ['s_per_step_ratio']:.3f}; rollout s: "
                 f"{summ['rollout_s_ratio']:.3f} (measured, one process)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument("--out-dir", default="", help="folder for the JSON and the table (default: a new /tmp folder)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more TrainConfig overrides")
    ap.add_argument("--update-committed", action="store_true", help="replace committed result files in --out-dir")
    a = ap.parse_args(argv)
    if a.steps < 2 or a.max_staleness < 0:
        ap.error("--steps must be >= 2 and --max-staleness >= 0")
    out = Path(a.out_dir) if a.out_dir else Path(tempfile.mkdtemp(prefix="async_schedules_"))
    device = "cpu" if jax.default_backend() == "cpu" else jax.devices()[0].device_kind.lower().replace(" ", "_")
    name = f"async_schedules_{device}.json"
    from . import guard_committed

    refused = guard_committed([out / name, out / name.replace(".json", ".md")], a.update_committed,
                              "benchmarks.async_schedules")
    if refused:
        raise SystemExit(refused)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="async_runs_") as runs:
        for seed in a.seeds:  # the schedules alternate, so a busy machine slows both alike
            for s in SCHEDULES:
                rows.append(one(Path(runs), s, seed, a.steps, a.max_staleness, a.set))
                print(f"{s} seed {seed}: accuracy {rows[-1]['heldout_accuracy']:.3f}, "
                      f"{rows[-1]['s_per_step']:.2f} s/step", flush=True)
    summ = summary(rows)
    res = {"benchmark": "async_schedules", "device": device, "host": platform.node(), "cpus": jax.device_count(),
           "rows": rows, "summary": summ}
    (out / name).write_text(json.dumps(res, indent=1) + "\n")
    md = table(rows, summ, name)
    (out / name.replace(".json", ".md")).write_text(md)
    print(md + f"wrote {out / name}")


if __name__ == "__main__":
    main()
