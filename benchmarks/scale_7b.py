"""Measured per-phase rates of a run -> MemAgent's 7B recipe on 8 and 32 GPUs, beside verl's 37.5 H100-s anchor.

  python -m benchmarks.scale_7b RUN_DIR [--plan benchmarks/results/plan_memagent_7b_8x80.json] [--json FILE]

Reads RUN_DIR/metrics.jsonl (the `flops_<phase>` and `time_<phase>_s` keys of memjax/rl/phases.py; steps after the
first, which compile), and takes each phase's FLOP rate per device as MEASURED. The 7B recipe's step
(configs/memagent/train.py: 128 prompts x group 16 = 2,048 samples, 28,672-token documents, chunk 5000, query and
memory budgets 1024: memjax.model.flops.memagent_seqlens per document) is then SCALED: each phase's FLOPs (rollout, old and
reference log-probs = one forward each, update = 3 forwards) divided by that rate x the GPU count (the same per-device
rate at 7B, and linear in devices: assumptions, not measurements). Dividing the rollout by every GPU is what the recipe
runs: a training run's engine spans every device of its process (TrainConfig.rollout_devices="all", placed by
memjax.plan: 8 data-parallel groups of one GPU for the 7B recipe on 8 x 80 GB); weight sync and checkpoint seconds scaled by the
parameter ratio over the devices; evaluation left out (the recipe evaluates every 10 steps at most). Memory per device
is memjax.plan's (the plan JSON: params, optimizer, reference, train temporaries, KV cache, rollout/update phases,
fits); on 32 GPUs (4 hosts x 8) the plan's per-device memory is that of one 8-GPU node (BUILD.md, multi-host). The
anchor: MemAgent's 7B recipe on verl, 2,400 s per step on 32 H100s = 37.5 H100-s per sample (MemAgent issue 31).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ANCHOR_H100_S = 2400 * 32 / (128 * 16)  # 37.5
DOC_TOKENS, SAMPLES = 28_672, 128 * 16
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PLAN = ROOT / "benchmarks/results/plan_memagent_7b_8x80.json"
FORWARDS = {"rollout": 1, "old_logp": 1, "ref_logp": 1, "update": 3}


def measured_rates(run_dir: Path) -> dict:
    """Per phase: FLOP/s per device over the run's steps after the first (all steps when there is one)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "step_s" in r]
    if not rows:
        raise SystemExit(f"{run_dir}/metrics.jsonl: no per-phase keys (step_s): run memjax.train with this version")
    use = rows[1:] or rows
    out = {"device_kind": use[-1].get("device_kind"), "devices": use[-1].get("devices", 1),
           "steps": [r["step"] for r in use], "rates": {}, "seconds": {}}
    for p in (*FORWARDS, "weight_sync", "checkpoint"):
        t = sum(r.get(f"time_{p}_s") or 0.0 for r in use)
        f = sum(r.get(f"flops_{p}") or 0.0 for r in use)
        out["seconds"][p] = t / len(use)
        if p in FORWARDS and t > 0 and f > 0:
            out["rates"][p] = f / t / out["devices"]
    out["model_params"] = use[-1].get("model_params")
    return out


def scale(m: dict, plan: dict, gpus: int) -> dict:
    from memjax.model import count_params, flops, presets

    cfg = presets.get("qwen2.5-7b")
    fwd = flops.estimate(cfg, flops.memagent_seqlens(DOC_TOKENS) * SAMPLES, training=False)
    rows = {}
    for p, k in FORWARDS.items():
        if p in m["rates"]:
            rows[p] = {"seconds": k * fwd / (m["rates"][p] * gpus), "how": "scaled from the measured FLOP rate"}
        else:
            rows[p] = {"seconds": None, "how": "not measured in the run"}
    ratio = count_params(cfg) / m["model_params"] if m.get("model_params") else None
    for p in ("weight_sync", "checkpoint"):
        rows[p] = {"seconds": None if ratio is None else m["seconds"][p] * ratio * m["devices"] / gpus,
                   "how": "scaled by parameters / devices"}
    known = [r["seconds"] for r in rows.values() if r["seconds"] is not None]
    step = sum(known) if len(known) == len(rows) else None
    per = None if step is None else step * gpus / SAMPLES
    return {"gpus": gpus, "phases": rows, "step_s": step, "gpu_s_per_sample": per,
            "vs_anchor": None if per is None else ANCHOR_H100_S / per,
            "memory_gib_per_device": {k: round(v / 2**30, 2) for k, v in plan.get("bytes", {}).items() if v},
            "phases_gib": {k: round(v / 2**30, 2) for k, v in plan.get("phases", {}).items()}, "fits": plan.get("fits")}


def table(m: dict, results: list[dict]) -> str:
    f = lambda v: "—" if v is None else f"{v:,.1f}"
    lines = [f"measured on {m['devices']} x {m['device_kind']} (steps {m['steps']}); 7B rows scaled (see how)", "",
             "| phase | " + " | ".join(f"7B on {r['gpus']} GPUs, s" for r in results) + " | how |",
             "|---|" + "---|" * len(results) + "---|"]
    for p in results[0]["phases"]:
        lines.append(f"| {p} | " + " | ".join(f(r["phases"][p]["seconds"]) for r in results)
                     + f" | {results[0]['phases'][p]['how']} |")
    lines.append("| step | " + " | ".join(f(r["step_s"]) for r in results) + " | sum |")
    lines.append("| GPU-s per sample | " + " | ".join(f(r["gpu_s_per_sample"]) for r in results)
                 + f" | verl anchor {ANCHOR_H100_S} H100-s (measured by a MemAgent user) |")
    lines.append("| anchor / ours | " + " | ".join("—" if r["vs_anchor"] is None else f"{r['vs_anchor']:.2f}x"
                                                 for r in results) + " | |")
    lines.append("| plan: rollout / update phase GiB per device, fits | " + " | ".join(
        f"{r['phases_gib'].get('rollout')} / {r['phases_gib'].get('update')}, {r['fits']}" for r in results)
        + " | memjax.plan |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--plan", type=Path, default=DEFAULT_PLAN, help="memjax.plan --json output for the 7B recipe")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if not (a.run_dir / "metrics.jsonl").is_file():
        ap.error(f"{a.run_dir}: no metrics.jsonl (a memjax.train out_dir)")
    m = measured_rates(a.run_dir)
    if m.get("model_params") is None:
        res = json.loads((a.run_dir / "result.json").read_text()) if (a.run_dir / "result.json").is_file() else {}
        preset = res.get("config", {}).get("model", {}).get("preset")
        if preset:
            from memjax.model import count_params, presets
            m["model_params"] = count_params(presets.get(preset))
    plan = json.loads(a.plan.read_text())
    results = [scale(m, plan, g) for g in (8, 32)]
    out = {"measured": m, "scaled": results, "anchor_h100_s_per_sample": ANCHOR_H100_S}
    print(table(m, results))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
