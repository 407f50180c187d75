"""Bytes each device sends per training update on a multi-host mesh: compiled collectives vs the weights' least.

What it measures: `memjax.run.plan.plan(cfg, devices, hbm, hosts=H)` compiles the trainer's mini-batch update and
log-prob programs ahead of time for the global hybrid mesh of H hosts x `devices` devices (data across hosts,
fsdp/tensor inside a host), on H x devices simulated CPU devices; memjax/parallel/collectives.py reads every
collective of the optimised HLO (while-loop trip counts, the micro-batch loop counted `micro_batches` times)
and sums, under the ring model, the bytes one device sends inside its host and to another host. Beside it the
analytic figures of `memjax.run.plan.analytic_traffic`: the weights' least (between hosts: one all-reduce of the
device's gradient shard per update; inside a host: one gather + one reduce-scatter) and the ZeRO-3 reference.
Caveats, also written into the result: XLA:CPU lowers a reduce-scatter as an all-reduce + slice (a GPU build
emits reduce-scatter, about half the bytes under the ring model); the ring model charges a flat ring over the
group in device order (NCCL's hierarchical/tree algorithms differ); nothing here ran on several real hosts.
With `--baseline-rev REV` the same plan also runs from a `git archive` of REV (e.g. before a change) and both
are recorded.
The result goes to benchmarks/results/multihost_<config>_cpu.json (or --out-dir).

Run: `python -m benchmarks.multihost` (configs/tiny.py on 2 hosts x 4 devices, about a minute on 2 cores);
`python -m benchmarks.multihost --config configs/memagent/train.py --hosts 4 --devices 8 --hbm-gib 80` (the 7B
recipe on 4 nodes x 8 GPUs, 32 simulated devices).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]


def _row(res: dict, seconds: float) -> dict:
    tr = res["traffic"]
    pick = lambda t: {k: t[k] for k in ("max_inter", "max_intra", "mean_inter", "mean_intra", "by_op", "ops",
                                        "unknown_trip_counts")}
    an = tr["analytic_update"]
    up = tr["update"]
    ratio = lambda a, b: None if not b else round(a / b, 2)
    return {"mesh": res["mesh"], "micro_batches": res["micro_batches"], "micro_rows": res["micro_rows_effective"],
            "row_len": res["row_len"], "update": pick(up), "logprobs": pick(tr["logprobs"]), "analytic_update": an,
            "compiled_over_least": {"inter": ratio(up["max_inter"], an["inter"]),
                                    "intra": ratio(up["max_intra"], an["intra_floor"])},
            "train_temporaries": res["bytes"]["train_temporaries"], "plan_seconds": round(seconds, 1)}


def _plan_at(cwd: Path, args) -> tuple[dict, float]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(cwd))
    env.pop("XLA_FLAGS", None)
    cmd = [sys.executable, "-m", "memjax.plan", str(args.config), "--devices", str(args.devices), "--hosts",
           str(args.hosts), "--hbm-gib", str(args.hbm_gib), "--min-kv-gib", "0", "--backend", "cpu", "--json",
           "--no-exit-code"]  # XLA:CPU's compile only (with the CUDA plugin installed, "auto" adds XLA:GPU's)
    cmd += ["--micro-batches", str(args.micro_batches)] if args.micro_batches else []
    for s in args.overrides:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"benchmarks.multihost: the plan at {cwd} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout), time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.multihost", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/tiny.py")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--devices", type=int, default=4, help="devices per host")
    ap.add_argument("--hbm-gib", type=float, default=80.0)
    ap.add_argument("--micro-batches", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--baseline-rev", default=None, help="also plan from `git archive REV` (a before/after pair)")
    ap.add_argument("--out-dir", default=str(RESULTS))
    a = ap.parse_args(argv)
    a.config = Path(a.config).resolve()
    res, secs = _plan_at(REPO, a)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    out = {"config": str(a.config.relative_to(REPO)) if a.config.is_relative_to(REPO) else str(a.config),
           "model": res["model"], "hosts": a.hosts, "devices_per_host": a.devices, "overrides": a.overrides,
           "backend": "cpu (simulated devices, XLA:CPU)", "units": "bytes one device sends per mini-batch update "
           "(max over devices; mean_* the mean), ring model (memjax/parallel/collectives.py)",
           "caveats": ["XLA:CPU lowers reduce-scatter as all-reduce + slice (GPU: reduce-scatter, about half the "
                       "bytes)", "a flat ring per group in device order, not NCCL's hierarchical algorithms",
                       "every micro-batch slot filled (the micro-batch loop counted micro_batches times)",
                       "not run on several real hosts"],
           "rev": rev.strip(), "compiled": _row(res, secs)}
    if a.baseline_rev:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(f"git archive {a.baseline_rev} | tar -x -C {tmp}", shell=True, cwd=REPO, check=True)
            base, bsecs = _plan_at(Path(tmp), a)
        out["baseline"] = {"rev": a.baseline_rev, **_row(base, bsecs)}
    name = a.config.stem
    path = Path(a.out_dir) / f"multihost_{name}_cpu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    c = out["compiled"]
    gb = lambda b: "n/a" if b is None else f"{b / 2**30:.3f}"
    for label, r in (("compiled", c), *((("baseline " + a.baseline_rev, out["baseline"]),) if a.baseline_rev else ())):
        print(f"{label}: {res['model']} {a.hosts} hosts x {a.devices}, mesh {r['mesh']}, {r['micro_batches']} "
              f"micro-batches: per device per update between hosts {gb(r['update']['max_inter'])} GiB (least "
              f"{gb(r['analytic_update']['inter'])}), inside a host {gb(r['update']['max_intra'])} GiB (least "
              f"{gb(r['analytic_update']['intra_floor'])}, ZeRO-3 {gb(r['analytic_update']['intra_zero3'])}); "
              f"log-prob program between hosts {gb(r['logprobs']['max_inter'])} GiB")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
