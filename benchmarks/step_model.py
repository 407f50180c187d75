"""Modelled step time of MemAgent's 7B recipe on 8 and 32 GPUs from a memory plan's compiled programs, beside verl's
37.5 H100-s per sample anchor. Every figure is labelled: compiled (XLA's collectives of the plan's programs),
measured (the H200 rates of 2026-11-27), modelled (the arithmetic here), analytic (memjax.model.flops).

  python -m benchmarks.step_model PLAN.json [--plan-32 PLAN_4_HOSTS.json] [--gpu h100|h200] [--json FILE]

PLAN.json: `python -m memjax.plan configs/memagent/train.py --devices 8 --hbm-gib 80 --json` (its "traffic": bytes
each device sends per run of the update and log-prob programs, their micro-batch loop counted `micro_batches` times;
"engine_max_slots" / "engine_groups": the decode batch per GPU). The workload is the recipe's step: 128 prompts x
group 16 = 2,048 samples of 28,672-token documents (memjax.model.flops.memagent_seqlens: chunk 5000, query and memory
budgets 1024), every token of every conversation trained in micro-batches of the plan's rows x row length (packed
without loss), old and reference log-probs one forward each; padding and dynamic sampling's extra generation batches
are left out (the model's optimism, stated).
Rates (stated numbers):
- peak bf16 dense 989 TFLOP/s (H100 SXM and H200); HBM 3.35 TB/s (H100), 4.8 TB/s (H200);
- update and log-prob GEMMs at 45.5% MFU: measured, train_step_qwen2.5-1.5b_cudnn_nvidia-h200.json (2026-11-27);
- rollout prefill at 35% MFU: measured, /work/shared/gpu/2026-11-27/analysis.md section 4 (the sweep's prefill);
- rollout decode at 52% of the HBM byte roofline (weights + KV read per round): measured, 7B at batch 256,
  analysis.md (6.50 ms roofline / 12.58 ms measured), at the plan's decode slots per GPU;
- collectives: NVLink 450 GB/s per direction per GPU inside a node, InfiniBand 50 GB/s per GPU (400 Gb/s NDR)
  between nodes (stated, not measured). Inside a host: the compiled bytes per micro-batch (the plan's loop bytes /
  its micro_batches) times the step's micro-batches, for the update and for both log-prob forwards; between hosts:
  the compiled bytes per update (the gradient all-reduce over data, once per mini-batch) times the mini-batches.
  The step sums them with no overlap; `step_s_overlapped` is the same step with each micro-batch's collectives
  hidden behind its compute where they are shorter (XLA:GPU issues them as async start / done pairs).
`floor_gpu_s_per_sample`: the update, log-prob and prefill FLOPs alone at the measured MFUs (no decode, no
collectives): what no schedule of the synchronous step goes below at these rates.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

ANCHOR_H100_S = 2400 * 32 / (128 * 16)  # 37.5, MemAgent issue 31 (verl, 32 H100)
SAMPLES, DOC_TOKENS = 128 * 16, 28_672
PEAK = 989e12
HBM = {"h100": 3.35e12, "h200": 4.8e12}
MFU_UPDATE, MFU_PREFILL, DECODE_ROOFLINE = 0.455, 0.35, 0.52
NVLINK, IB = 450e9, 50e9
MINI_BATCHES = 16  # configs/memagent/train.py update.mini_batches


def model(plan: dict, gpus: int, gpu: str = "h100") -> dict:
    from memjax.model import count_params, flops, presets

    cfg = presets.get("qwen2.5-7b")
    seq = flops.memagent_seqlens(DOC_TOKENS)
    tokens = sum(seq) * SAMPLES
    fwd = flops.estimate(cfg, seq * SAMPLES, training=False)  # analytic (verl's estimator)
    at = lambda flop: flop / (gpus * MFU_UPDATE * PEAK)
    how = "analytic FLOPs/token (memjax.model.flops) at 45.5% MFU (measured)"
    rows = {"update": {"seconds": at(3 * fwd), "flops_per_token": 3 * fwd / tokens, "how": how},  # forward + backward
            "old_ref_logp": {"seconds": at(2 * fwd), "flops_per_token": fwd / tokens, "how": how + ", two forwards"}}
    micro_tokens = plan["micro_rows_effective"] * plan["row_len"]  # one micro-batch over the whole mesh
    micro = math.ceil(tokens / micro_tokens)
    tr = plan.get("traffic") or {}
    up, lp = tr.get("update") or {}, tr.get("logprobs") or {}
    per_micro = (up.get("max_intra", 0) + 2 * lp.get("max_intra", 0)) / plan["micro_batches"]
    intra_s = micro * per_micro / NVLINK
    inter_s = MINI_BATCHES * (up.get("max_inter", 0) if gpus > 8 else 0) / IB
    rows["collectives"] = {"seconds": intra_s + inter_s, "micro_batches": micro,
                           "bytes_per_micro_batch": per_micro, "how": (
                               f"compiled bytes per device ({plan.get('hosts', 1)} host plan): {per_micro / 2**30:.1f} "
                               f"GiB per micro-batch (update + 2 log-prob forwards) x {micro} micro-batches at NVLink "
                               f"450 GB/s, + the per-update bytes between hosts x 16 mini-batches at IB 50 GB/s "
                               "(stated), no overlap")}
    rows["rollout_prefill"] = {"seconds": fwd / (gpus * MFU_PREFILL * PEAK), "how": "analytic forward FLOPs at 35% "
                               "MFU (measured), every GPU rolling out"}
    slots = plan["engine_max_slots"] // plan["engine_groups"]  # one group per GPU (the plan's placement)
    decode_tokens = SAMPLES * (1024 * (len(seq) - 1) + 1024)  # memory budgets + final answer: upper bound
    kv_tok = 2 * cfg.num_layers * cfg.num_kv_heads * (cfg.head_dim or cfg.hidden_size // cfg.num_heads) * 2  # bf16 K and V per token
    w = 2 * count_params(cfg)
    round_bytes = w + slots * kv_tok * (seq[1] // 2)  # weights + KV at half a chunk conversation's length
    round_s = round_bytes / (DECODE_ROOFLINE * HBM[gpu])
    rows["rollout_decode"] = {"seconds": decode_tokens / (gpus * slots) * round_s, "slots_per_gpu": slots,
                              "how": f"modelled rounds of {slots} sequences per GPU x ({round_bytes / 1e9:.1f} GB "
                                     f"per round at 52% of {HBM[gpu] / 1e12:.2f} TB/s, measured share)"}
    step = sum(r["seconds"] for r in rows.values())
    compute_per_micro = (rows["update"]["seconds"] + rows["old_ref_logp"]["seconds"]) / micro
    hidden = micro * max(per_micro / NVLINK - compute_per_micro, 0.0) + inter_s
    floor = rows["update"]["seconds"] + rows["old_ref_logp"]["seconds"] + rows["rollout_prefill"]["seconds"]
    return {"gpus": gpus, "gpu": gpu, "phases": rows, "step_s": step, "gpu_s_per_sample": step * gpus / SAMPLES,
            "step_s_overlapped": step - rows["collectives"]["seconds"] + hidden,
            "gpu_s_per_sample_overlapped": (step - rows["collectives"]["seconds"] + hidden) * gpus / SAMPLES,
            "floor_gpu_s_per_sample": floor * gpus / SAMPLES,
            "anchor_h100_s_per_sample": ANCHOR_H100_S, "label": "modelled", "plan_backend": plan.get("backend")}


def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan", type=Path)
    ap.add_argument("--plan-32", type=Path, help="the plan on 4 hosts x 8 (memjax.plan --hosts 4): its collectives "
                    "(between hosts too) for the 32-GPU row; default PLAN's")
    ap.add_argument("--gpu", choices=sorted(HBM), default="h100")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    plan = json.loads(a.plan.read_text())
    plan32 = json.loads(a.plan_32.read_text()) if a.plan_32 else plan
    out = [model(plan, 8, a.gpu), model(plan32, 32, a.gpu)]
    for r in out:
        ph = ", ".join(f"{k} {v['seconds']:.0f}" for k, v in r["phases"].items())
        print(f"modelled 7B MemAgent on {r['gpus']} x {a.gpu.upper()}: step {r['step_s']:.0f} s ({ph}); "
              f"{r['gpu_s_per_sample']:.2f} GPU-s per sample ({r['gpu_s_per_sample_overlapped']:.2f} with the "
              f"collectives hidden, floor {r['floor_gpu_s_per_sample']:.2f}) vs verl {ANCHOR_H100_S} H100-s (plan "
              f"compiled on {r['plan_backend']})")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
