"""The schedule table: the tiny MemAgent task with a length tail under `sync`, `colocated_async` and `split_async`,
same seeds, on the same host devices.

  python -m benchmarks.async_schedules [--system memagent|sumer] [--seeds 0 1 2] [--steps 8] [--max-staleness 1]
      [--devices 8] [--rollout-split 4] [--schedules sync colocated_async split_async] [--out-dir DIR]
      [--set key=value ...]

`--system sumer`: the tiny SUMER task (its search loop: 1-4 tool turns per episode, drawn by the policy), held-out
on 32 questions, under sync and split_async (colocated_async pauses between turns; SUMER keeps KV across them);
writes async_schedules_sumer_<device>.json.

Per seed, one run of configs/tiny.py per schedule (in this process, one after the other) with documents of 3, 3, 3,
3, 6 or 12 chunks drawn per sample (`agent.train_chunks`: a tail of long trajectories, as memory agents have),
8 questions x group 8 per step, held-out accuracy on 64 questions before and after; the process has `--devices`
host devices (XLA's host platform device count, set before jax starts) and split_async rolls out on the first
`--rollout-split` of them. Reports per run the held-out accuracy after `steps`, the mean wall seconds per step over
steps 2.. (step 1 compiles), the rollout seconds (the wait for the batch), the update seconds and the staleness of
the trained tokens, and under "phases" the same mean of every per-phase time (time_<phase>_s) and rollout count
(conversations, prompt and generated tokens, tool calls); per schedule the mean and standard deviation over seeds
and the s/step ratio against `sync`, all measured in this one process. Writes DIR/async_schedules_<device>.json and
.md (DIR defaults to a fresh folder under /tmp; benchmarks/results only when given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import jax

from memjax.core.config import apply_overrides, load_config_file
from memjax.loop.run import Run

ROOT = Path(__file__).resolve().parents[1]
BASE = ["prompts_per_step=8", "agent.group_size=8", "agent.eval_samples=0", "eval_every=0", "update.micro_rows=64",
        "filter_flat_groups=false", "checkpoint_every=1000"]
SCHEDULES = ("sync", "colocated_async", "split_async")
# per-step metrics averaged into each row's "phases" (what benchmarks/schedule_sim_validate.py fits the simulator to)
PHASE_KEYS = ("time_", "rollout_", "engine_sleep_s", "conversations", "mean_conversation_tokens", "response_tokens",
              "trained_samples")
# per system: its tiny config, the overrides that give it a length tail, and the schedules it runs (colocated_async
# pauses between turns, which SUMER's tool loop cannot: it keeps KV across turns)
SYSTEMS = {
    "memagent": ("tiny.py", ["agent.heldout_size=64", "agent.train_chunks=3,3,3,3,6,12"], SCHEDULES),
    "sumer": ("sumer/tiny.py", ["agent.heldout_size=32"], ("sync", "split_async")),
}


def one(out: Path, schedule: str, seed: int, steps: int, staleness: int, extra: list[str], split: int = 0,
        system: str = "memagent") -> dict:
    config, tail, _ = SYSTEMS[system]
    sets = [*BASE, *tail, f"steps={steps}", f"seed={seed}", f"schedule={schedule}", f"max_staleness={staleness}",
            f"out_dir={out / f'{schedule}_{seed}'}", *([f"rollout_split={split}"] if schedule == "split_async" else []),
            *extra]
    cfg = apply_overrides(load_config_file(ROOT / "configs" / config), sets)
    t0 = time.perf_counter()
    run = Run(cfg)
    hist = run.run()
    wall = time.perf_counter() - t0
    evals = run.state.evals
    later = hist[1:] or hist
    mean = lambda k: statistics.fmean(float(h.get(k) or 0.0) for h in later)
    return {"system": system, "schedule": schedule, "seed": seed, "steps": steps, "max_staleness": staleness if schedule != "sync" else 0,
            "heldout_accuracy_before": evals[0]["accuracy"], "heldout_accuracy": evals[-1]["accuracy"],
            "s_per_step": mean("step_s"), "rollout_s": mean("rollout_s"), "update_s": mean("update_s"),
            "staleness_token_mean": mean("rollout_staleness_token_mean"),
            "paused_requests": mean("rollout_async_paused_requests"), "reward_mean": mean("reward"),
            "phases": {k: mean(k) for k in sorted(later[0]) if k.startswith(PHASE_KEYS)
                       and isinstance(later[0][k], (int, float)) and not isinstance(later[0][k], bool)},
            "wall_s": wall, "sets": sets}


def summary(rows: list[dict]) -> dict:
    """Per schedule present: runs, held-out accuracy mean and std over seeds, mean s/step and rollout s; and each
    async schedule's s/step and rollout-s ratio over sync's."""
    out: dict = {"s_per_step_ratio": {}, "rollout_s_ratio": {}}
    for s in [x for x in SCHEDULES if any(r["schedule"] == x for r in rows)]:
        rs = [r for r in rows if r["schedule"] == s]
        acc = [r["heldout_accuracy"] for r in rs]
        out[s] = {"runs": len(rs), "heldout_accuracy_mean": statistics.fmean(acc),
                  "heldout_accuracy_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                  "s_per_step_mean": statistics.fmean(r["s_per_step"] for r in rs),
                  "rollout_s_mean": statistics.fmean(r["rollout_s"] for r in rs)}
    for s in [x for x in SCHEDULES[1:] if x in out]:
        out["s_per_step_ratio"][s] = out[s]["s_per_step_mean"] / out["sync"]["s_per_step_mean"]
        out["rollout_s_ratio"][s] = out[s]["rollout_s_mean"] / out["sync"]["rollout_s_mean"]
    return out


def table(rows: list[dict], summ: dict, name: str) -> str:
    lines = ["| schedule | seed | steps | held-out accuracy (before -> after) | s/step | rollout s | update s | "
             "staleness | file |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['schedule']} | {r['seed']} | {r['steps']} | {r['heldout_accuracy_before']:.3f} -> "
                     f"{r['heldout_accuracy']:.3f} | {r['s_per_step']:.2f} | {r['rollout_s']:.2f} | "
                     f"{r['update_s']:.2f} | {r['staleness_token_mean']:.2f} | {name} |")
    for s in [x for x in SCHEDULES if x in summ]:
        m = summ[s]
        lines.append(f"| **{s}** | mean of {m['runs']} | | {m['heldout_accuracy_mean']:.3f} +- "
                     f"{m['heldout_accuracy_std']:.3f} | {m['s_per_step_mean']:.2f} | {m['rollout_s_mean']:.2f} | | | |")
    lines.append("\n" + "; ".join(f"s/step {s} / sync: {r:.3f} (rollout s: {summ['rollout_s_ratio'][s]:.3f})"
                                   for s, r in summ["s_per_step_ratio"].items()) + " (measured, one process)")
    return "\n".join(lines) + "\n"


def host_devices(n: int, error) -> None:
    """Give this process n host devices: XLA reads the flag when jax's backend starts (refused once it has)."""
    flag = f"--xla_force_host_platform_device_count={n}"
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                     if not f.startswith("--xla_force_host_platform_device_count"))
    os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    if jax.default_backend() == "cpu" and jax.device_count() != n:
        error(f"--devices {n}: jax already started with {jax.device_count()} device(s) in this process")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument("--out-dir", default="", help="folder for the JSON and the table (default: a new /tmp folder)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more TrainConfig overrides")
    ap.add_argument("--update-committed", action="store_true", help="replace committed result files in --out-dir")
    ap.add_argument("--devices", type=int, default=8, help="host devices of this process (XLA's host platform)")
    ap.add_argument("--rollout-split", type=int, default=0, help="split_async's rollout devices (default: half)")
    ap.add_argument("--schedules", nargs="+", choices=SCHEDULES, default=None,
                    help="default: every schedule the system runs")
    ap.add_argument("--system", choices=sorted(SYSTEMS), default="memagent")
    a = ap.parse_args(argv)
    a.schedules = a.schedules or list(SYSTEMS[a.system][2])
    if not set(a.schedules) <= set(SYSTEMS[a.system][2]):
        ap.error(f"--system {a.system} runs --schedules {' '.join(SYSTEMS[a.system][2])}")
    if a.steps < 2 or a.max_staleness < 0:
        ap.error("--steps must be >= 2 and --max-staleness >= 0")
    if "sync" not in a.schedules:
        ap.error("--schedules must include sync (the ratios are against it)")
    split = a.rollout_split or a.devices // 2
    if "split_async" in a.schedules and not 1 <= split < a.devices:
        ap.error(f"--rollout-split must be in 1..{a.devices - 1} (--devices {a.devices})")
    host_devices(a.devices, ap.error)
    out = Path(a.out_dir) if a.out_dir else Path(tempfile.mkdtemp(prefix="async_schedules_"))
    device = "cpu" if jax.default_backend() == "cpu" else jax.devices()[0].device_kind.lower().replace(" ", "_")
    name = f"async_schedules_{device}.json" if a.system == "memagent" else f"async_schedules_{a.system}_{device}.json"
    from . import guard_committed

    refused = guard_committed([out / name, out / name.replace(".json", ".md")], a.update_committed,
                              "benchmarks.async_schedules")
    if refused:
        raise SystemExit(refused)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="async_runs_") as runs:
        for seed in a.seeds:  # the schedules alternate, so a busy machine slows them alike
            for s in a.schedules:
                rows.append(one(Path(runs), s, seed, a.steps, a.max_staleness, a.set, split, a.system))
                print(f"{s} seed {seed}: accuracy {rows[-1]['heldout_accuracy']:.3f}, "
                      f"{rows[-1]['s_per_step']:.2f} s/step", flush=True)
    summ = summary(rows)
    res = {"benchmark": "async_schedules", "system": a.system, "device": device, "host": platform.node(), "devices": jax.device_count(),
           "cpu_cores": os.cpu_count(), "rollout_split": split if "split_async" in a.schedules else 0,
           "rows": rows, "summary": summ}
    (out / name).write_text(json.dumps(res, indent=1) + "\n")
    md = table(rows, summ, name)
    (out / name.replace(".json", ".md")).write_text(md)
    print(md + f"wrote {out / name}")


if __name__ == "__main__":
    main()
