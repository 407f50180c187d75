"""Predicted seconds per step and GPU-seconds per sample of the 7B MemAgent and SUMER recipes under each schedule.

  python -m benchmarks.schedule_sim [--rates benchmarks/results/schedule_sim_rates_h200.json] [--gpus 8 32]
      [--steps 6] [--json FILE]

Feeds memjax.rl.schedule_sim with measured phase costs (the rates JSON: each value with its source, measured or
assumed) and the recipes' workloads, and prints one table; every figure it prints is PREDICTED.
Workloads (per step: MemAgent 128 prompts x group 16, SUMER 32 x group 8, as configs/*/train.py):
- MemAgent: chunk count from the shipped RULER-HotpotQA statistics (benchmarks/results/ruler_hotpotqa_lengths.json,
  N = 200 documents: lengths 26,305-31,801 tokens, so 6 or 7 chunks of 5,000; P(7) = mean_chunks - 6); each memory
  turn prefills 200 + 64 (question) + 5,000 (the last chunk: the remainder) + the previous memory and generates a
  memory drawn uniformly in [256, 1024] tokens (assumed); the final turn generates [16, 256] (assumed). Training
  rows: one per conversation. KV per trajectory: the 8,192-token window.
- SUMER: assistant turns 1 + geometric (mean 5, at most 20; assumed, near the paper's 10.22 tool calls at 2 per
  turn); the first turn prefills 1,200 tokens, later turns continue the sequence with [300, 1,500] tool-output tokens
  (assumed); each turn generates [64, 512] (assumed), tools take 0.05 s, the judge 2 s (assumed). Training rows: one
  per episode. KV per trajectory: 16,384 tokens (assumed).
The verl anchor (37.5 H100-s per MemAgent sample, 2,400 s per step on 32 H100) and SUMER's own run (about 21 h for
400 steps on 8 H100 = 189 s per step = 5.9 H100-s per episode, papers/sumer.txt) are MEASURED by their authors and
printed beside the predictions.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


from memjax.model import flops, presets
from memjax.rl.schedule_sim import Rates, Schedule, Trajectory, Turn, simulate

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RATES = ROOT / "benchmarks/results/schedule_sim_rates_h200.json"
RULER = ROOT / "benchmarks/results/ruler_hotpotqa_lengths.json"
ANCHORS = {"memagent": {"gpu_s_per_sample": 2400 * 32 / (128 * 16), "device": "H100",
                        "what": "verl, 2,400 s per step on 32 H100 (MemAgent issue 31)"},
           "sumer": {"gpu_s_per_sample": 21 * 3600 / 400 * 8 / 256, "device": "H100",
                     "what": "SUMER paper: ~21 h for 400 steps on 8 H100 (validation included)"}}
SYSTEMS = {"memagent": dict(batch_groups=128, group_size=16, window=8192),
           "sumer": dict(batch_groups=32, group_size=8, window=16384)}


def memagent_workload(cfg, ruler: dict):
    row = next(r for r in ruler["rows"] if r["num_docs"] == 200)
    lo, hi, chunk = row["min_tokens"], row["max_tokens"], ruler["chunk_tokens"]
    p7 = row["mean_chunks"] - 6.0  # lengths lie in [lo, hi]: 6 or 7 chunks

    def make(rng):
        if rng.random() < p7:
            doc = int(rng.integers(6 * chunk + 1, hi + 1))
        else:
            doc = int(rng.integers(lo, 6 * chunk + 1))
        k = -(-doc // chunk)
        mem, turns, rows = 0, [], []
        for j in range(k):
            piece = min(chunk, doc - j * chunk)
            gen = int(rng.integers(256, 1025))
            pre = 200 + 64 + piece + mem
            turns.append(Turn(pre, gen))
            rows.append(pre + gen)
            mem = gen
        fin = int(rng.integers(16, 257))
        turns.append(Turn(100 + 64 + mem, fin))
        rows.append(100 + 64 + mem + fin)
        return Trajectory(tuple(turns), flops.estimate(cfg, rows), flops.estimate(cfg, rows, training=False), tag=k)
    return make


def sumer_workload(cfg):
    def make(rng):
        k = int(min(rng.geometric(1 / 5), 20))
        turns, total = [], 0
        for j in range(k):
            pre = 1200 if j == 0 else int(rng.integers(300, 1501))
            gen = int(rng.integers(64, 513))
            turns.append(Turn(pre, gen, tool_s=0.05, continues=j > 0))
            total += pre + gen
        return Trajectory(tuple(turns), flops.estimate(cfg, [total]), flops.estimate(cfg, [total], training=False),
                          reward_s=2.0, tag=k)
    return make


def load_rates(path: Path, system: str, *, blockwise: bool = False) -> Rates:
    raw = json.loads(path.read_text())
    v = {k: x["value"] for k, x in raw.items() if isinstance(x, dict) and "value" in x}
    win = SYSTEMS[system]["window"]
    slots = v["max_slots"][system] if isinstance(v["max_slots"], dict) else v["max_slots"]  # per GPU, per recipe
    return Rates(decode_batch=tuple(v["decode_batch"]), decode_step_s=tuple(v["decode_step_s"]),
                 prefill_tok_s=v["prefill_tok_s"], decode_ctx=v["decode_ctx"],
                 kv_bytes_per_token=v["kv_bytes_per_token"], attn_bytes_s=v["attn_bytes_s"],
                 slots=min(slots, v["kv_tokens_colocated"] // win),
                 split_slots=min(slots, v["kv_tokens_rollout_only"] // win),
                 train_flops_s=v["train_flops_s_blockwise" if blockwise else "train_flops_s"],
                 weight_sync_s=v["weight_sync_s"], push_bytes=v["push_bytes"], push_bytes_s=v["push_bytes_s"],
                 checkpoint_s=v["checkpoint_s"], checkpoint_every=v["checkpoint_every"],
                 forward_passes=2 if system == "memagent" else 1)  # old log-probs (+ reference: MemAgent's KL)


def run(system: str, gpus: int, rates: Rates, make, steps: int) -> list[dict]:
    sz = SYSTEMS[system]
    kw = dict(batch_groups=sz["batch_groups"], group_size=sz["group_size"], steps=steps, warmup=2, seed=0)
    rows = [simulate(make, rates, Schedule("sync", gpus), **kw).row()]  # split: the best of 5 rollout shares
    for s in (1, 2):
        rows.append(simulate(make, rates, Schedule("colocated_async", gpus, max_staleness=s), **kw).row())
        best = None
        for n_roll in sorted({max(1, round(gpus * f)) for f in (1 / 16, 1 / 8, 1 / 4, 3 / 8, 1 / 2)}):
            r = simulate(make, rates, Schedule("split_async", gpus, max_staleness=s, rollout_devices=n_roll),
                         **kw).row()
            best = r if best is None or r["step_s"] < best["step_s"] else best
        rows.append(best)
    sync = rows[0]["step_s"]
    for r in rows:
        r["speedup_vs_sync"] = sync / r["step_s"]
        r["vs_anchor"] = ANCHORS[system]["gpu_s_per_sample"] / r["gpu_s_per_sample"]
    return rows


def table(out: dict) -> str:
    lines = ["all figures PREDICTED by memjax.rl.schedule_sim from the rates file; anchors MEASURED by their authors",
             "", "| system | GPUs | schedule | max_staleness | rollout / train GPUs | s/step | GPU-s/sample | x sync | "
             "anchor / ours | s/step, blockwise update |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, rows in out["predicted"].items():
        system, gpus = key.split("@")
        alt = {(r["schedule"], r["max_staleness"]): r for r in out["predicted_blockwise"][key]}
        for r in rows:
            b = alt.get((r["schedule"], r["max_staleness"]))
            lines.append(f"| {system} | {gpus} | {r['schedule']} | {r['max_staleness']} | {r['rollout_devices']} / "
                         f"{r['train_devices']} | {r['step_s']:,.0f} | {r['gpu_s_per_sample']:.2f} | "
                         f"{r['speedup_vs_sync']:.2f} | {r['vs_anchor']:.2f}x | "
                         f"{'—' if b is None else format(b['step_s'], ',.0f')} |")
    for k, a in ANCHORS.items():
        lines.append(f"\nanchor {k}: {a['gpu_s_per_sample']:.1f} {a['device']}-s per sample ({a['what']}; measured)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=Path, default=DEFAULT_RATES)
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    cfg = presets.get("qwen2.5-7b")
    ruler = json.loads(RULER.read_text())
    makes = {"memagent": memagent_workload(cfg, ruler), "sumer": sumer_workload(cfg)}
    out = {"kind": "predicted", "simulator": "memjax.rl.schedule_sim", "rates": str(a.rates.relative_to(ROOT)
           if a.rates.is_relative_to(ROOT) else a.rates), "steps": a.steps, "warmup": 2,
           "anchors_measured": ANCHORS, "predicted": {}, "predicted_blockwise": {}}
    t0 = time.perf_counter()
    for system, make in makes.items():
        for g in a.gpus:
            out["predicted"][f"{system}@{g}"] = run(system, g, load_rates(a.rates, system), make, a.steps)
            out["predicted_blockwise"][f"{system}@{g}"] = run(system, g, load_rates(a.rates, system, blockwise=True),
                                                              make, a.steps)
    out["seconds"] = time.perf_counter() - t0
    print(table(out))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
