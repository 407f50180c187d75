"""Modelled step time of MemAgent's 7B recipe on 8 and 32 GPUs from a memory plan's compiled programs, beside verl's
37.5 H100-s per sample anchor. Every figure is labelled: compiled (XLA's cost analysis / collectives of the plan's
programs), measured (the H200 rates of 2026-11-27), modelled (the arithmetic here), analytic (memjax.model.flops).

  python -m benchmarks.step_model PLAN.json [--plan-32 PLAN_4_HOSTS.json] [--gpu h100|h200] [--json FILE]

PLAN.json: `python -m memjax.plan configs/memagent/train.py --devices 8 --hbm-gib 80 --json` (its "cost": XLA's
FLOPs per device of one run of the update and log-prob programs, their micro-batch loop counted once; "traffic":
bytes each device sends per update). The workload is the recipe's step: 128 prompts x group 16 = 2,048 samples of
28,672-token documents (memjax.model.flops.memagent_seqlens: chunk 5000, query and memory budgets 1024), every token of
every conversation trained, old and reference log-probs one forward each; padding and dynamic sampling's extra
generation batches are left out (the model's optimism, stated).
Rates (stated numbers):
- peak bf16 dense 989 TFLOP/s (H100 SXM and H200); HBM 3.35 TB/s (H100), 4.8 TB/s (H200);
- update and log-prob GEMMs at 45.5% MFU: measured, train_step_qwen2.5-1.5b_cudnn_nvidia-h200.json (2026-11-27);
- rollout prefill at 35% MFU: measured, /work/shared/gpu/2026-11-27/analysis.md section 4 (the sweep's prefill);
- rollout decode at 52% of the HBM byte roofline (weights + KV read per round): measured, 7B at batch 256,
  analysis.md (6.50 ms roofline / 12.58 ms measured), taken per GPU at the recipe's 32 slots per device group;
- collectives: NVLink 450 GB/s per direction per GPU inside a node, InfiniBand 50 GB/s per GPU (400 Gb/s NDR)
  between nodes (stated, not measured); no overlap with compute assumed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ANCHOR_H100_S = 2400 * 32 / (128 * 16)  # 37.5, MemAgent issue 31 (verl, 32 H100)
SAMPLES, DOC_TOKENS, SLOTS_PER_GPU = 128 * 16, 28_672, 32
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
    rows = {}
    per_dev_tokens = plan["rows_per_device"] * plan["row_len"]  # tokens of one micro-batch on one device
    cost = plan.get("cost")
    for phase, prog, k in (("update", "update", 1), ("old_ref_logp", "logprobs", 2)):
        if cost and cost[prog]["flops"] > 0:  # XLA:GPU's deviceless compile reports no FLOPs (0): analytic then
            f_tok = cost[prog]["flops"] / per_dev_tokens
            how = "compiled FLOPs/token (XLA cost analysis) at 45.5% MFU (measured)"
        else:
            f_tok = (3 if phase == "update" else 1) * fwd / tokens
            how = "analytic FLOPs/token (memjax.model.flops) at 45.5% MFU (measured)"
        secs = k * tokens * f_tok / (gpus * MFU_UPDATE * PEAK)
        rows[phase] = {"seconds": secs, "how": how, "flops_per_token": f_tok}
    tr = (plan.get("traffic") or {}).get("update") or {"max_intra": 0, "max_inter": 0}
    inter = tr["max_inter"] if gpus > 8 else 0
    rows["update_collectives"] = {"seconds": MINI_BATCHES * (tr["max_intra"] / NVLINK + inter / IB),
                                  "how": f"compiled bytes per device ({plan.get('hosts', 1)} host plan) at NVLink 450 / "
                                         "IB 50 GB/s (stated), 16 mini-batches, no overlap"}
    rows["rollout_prefill"] = {"seconds": fwd / (gpus * MFU_PREFILL * PEAK), "how": "analytic forward FLOPs at 35% "
                               "MFU (measured), every GPU rolling out"}
    decode_tokens = SAMPLES * (1024 * (len(seq) - 1) + 1024)  # memory budgets + final answer: upper bound
    kv_tok = 2 * cfg.num_layers * cfg.num_kv_heads * (cfg.head_dim or cfg.hidden_size // cfg.num_heads) * 2  # bf16 K and V per token
    w = 2 * count_params(cfg)
    round_bytes = w + SLOTS_PER_GPU * kv_tok * (seq[1] // 2)  # weights + KV at half a chunk conversation's length
    round_s = round_bytes / (DECODE_ROOFLINE * HBM[gpu])
    rows["rollout_decode"] = {"seconds": decode_tokens / (gpus * SLOTS_PER_GPU) * round_s,
                              "how": f"modelled rounds x ({round_bytes / 1e9:.1f} GB per round at 52% of "
                                     f"{HBM[gpu] / 1e12:.2f} TB/s, measured share)"}
    step = sum(r["seconds"] for r in rows.values())
    per = step * gpus / SAMPLES
    return {"gpus": gpus, "gpu": gpu, "phases": rows, "step_s": step, "gpu_s_per_sample": per,
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
              f"{r['gpu_s_per_sample']:.2f} GPU-s per sample vs verl {ANCHOR_H100_S} H100-s (plan compiled on "
              f"{r['plan_backend']})")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
