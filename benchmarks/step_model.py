"""Modelled step time of every shipped GPU recipe on 8 and 32 GPUs from its memory plan's compiled programs, beside
verl's 37.5 H100-s per sample anchor for MemAgent 7B. Every figure is labelled: compiled (XLA's collectives of the
plan's programs), measured (the H200 rates of 2026-11-27), modelled (the arithmetic here), analytic
(memjax.model.flops), stated (link bandwidths).

  python -m benchmarks.step_model PLAN.json [--plan-32 PLAN_4_HOSTS.json] [--gpu h100|h200] [--json FILE]
  python -m benchmarks.step_model --all [--json FILE]     # every shipped recipe, its plans in benchmarks/results/

PLAN.json: `python -m memjax.plan configs/memagent/train.py --devices 8 --hbm-gib 80 --json` (its "traffic": bytes
each device sends per run of the update and log-prob programs, their micro-batch loop counted `micro_batches` times;
"engine_max_slots" / "engine_groups": the decode batch per GPU). The workload of a step comes from the recipe's config
(benchmarks/recipe_workload.py: samples, trained rows, prefilled and generated tokens per sample, each recipe's
length assumptions and their optimism stated there); PLAN.json alone models MemAgent 7B (configs/memagent/train.py):
128 prompts x group 16 = 2,048 samples of 28,672-token documents, every token of every conversation trained in
micro-batches of the plan's rows x row length (packed without loss), old and reference log-probs one forward each;
padding and dynamic sampling's extra generation batches are left out (the model's optimism, stated).
Rates (stated numbers):
- peak bf16 dense 989 TFLOP/s (H100 SXM and H200); HBM 3.35 TB/s (H100), 4.8 TB/s (H200);
- update, log-prob and critic GEMMs at 45.5% MFU: measured, train_step_qwen2.5-1.5b_cudnn_nvidia-h200.json
  (2026-11-27);
- rollout prefill at 35% MFU: measured, /work/shared/gpu/2026-11-27/analysis.md section 4 (the sweep's prefill);
- rollout decode at 52% of the HBM byte roofline (weights + KV read per round): measured, 7B at batch 256,
  analysis.md (6.50 ms roofline / 12.58 ms measured), at the plan's decode slots per GPU; a frozen model (Memory-R1's
  and Memory-R2's answer agent) prefills and decodes on its own engine in each process, at its pool's slots per
  device, over the devices its config places it on (frozen_devices "engine": the plan's engine devices, "one": one);
- collectives: NVLink 450 GB/s per direction per GPU inside a node, InfiniBand 50 GB/s per GPU (400 Gb/s NDR)
  between nodes (stated, not measured). Inside a host: the compiled bytes per micro-batch (the plan's loop bytes /
  its micro_batches) times the step's micro-batches, for each update epoch and each log-prob forward (a critic's
  programs: the policy's bytes scaled by its parameter bytes, modelled); between hosts: the bytes per update (the
  gradient all-reduce over data, once per mini-batch and epoch). A 4-host plan, where none is compiled, is the
  8-GPU plan with 4x the rows per micro-batch and the between-host all-reduce 2 (H-1)/H x the device's fp32
  gradient shard (memjax.run.plan.analytic_traffic; within 0.01% of the compiled MemAgent 7B plan). The step sums
  the phases with no overlap; `step_s_overlapped` hides each micro-batch's collectives behind its compute where
  they are shorter (XLA:GPU issues them as async start / done pairs).
`floor_gpu_s_per_sample`: the update, log-prob, critic and prefill FLOPs alone at the measured MFUs (no decode, no
collectives): what no schedule of the synchronous step goes below at these rates.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
from pathlib import Path
from typing import Any

from benchmarks import recipe_workload as rw

ANCHOR_H100_S = 2400 * 32 / (128 * 16)  # 37.5, MemAgent issue 31 (verl, 32 H100)
PEAK = 989e12
HBM = {"h100": 3.35e12, "h200": 4.8e12}
MFU_UPDATE, MFU_PREFILL, DECODE_ROOFLINE = 0.455, 0.35, 0.52
NVLINK, IB = 450e9, 50e9
RESULTS = Path("benchmarks/results")
# every shipped GPU recipe: (name, config, workload, plan on one node, plan on 4 hosts, gpu); a 4-host plan
# that is absent is modelled from the one-node plan (on_hosts)
RECIPES = (
    ("MemAgent 7B", "configs/memagent/train.py", "memagent", "plan_memagent_7b_8x80_aot-h100.json",
     "plan_memagent_7b_4x8x80_aot-h100.json", "h100"),
    ("MemAgent 14B", "configs/memagent/train_14b.py", "memagent", "plan_memagent_14b_8x141_aot-h200.json",
     "plan_memagent_14b_4x8x141_aot-h200.json", "h200"),
    ("SUMER 7B", "configs/sumer/train.py", "sumer", "plan_sumer_7b_8x80_aot-h100.json",
     "plan_sumer_7b_4x8x80_aot-h100.json", "h100"),
    ("Memory-R1 manager 7B", "configs/memory_r1/train_manager.py", "memory_r1_manager",
     "plan_memory_r1_manager_7b_8x80_aot-h100.json", "plan_memory_r1_manager_7b_4x8x80_aot-h100.json", "h100"),
    ("Memory-R1 answer agent 7B", "configs/memory_r1/train_answer.py", "memory_r1_answer",
     "plan_memory_r1_answer_7b_8x80_aot-h100.json", "plan_memory_r1_answer_7b_4x8x80_aot-h100.json", "h100"),
    ("Memory-R2 7B", "configs/memory_r2/train.py", "memory_r2", "plan_memory_r2_7b_8x80_aot-h100.json",
     "plan_memory_r2_7b_4x8x80_aot-h100.json", "h100"),
)


def workload(config: str, name: str) -> rw.Workload:
    from memjax.core.config import load_config_file

    return rw.of(name, load_config_file(config))


def on_hosts(plan: dict, hosts: int = 4) -> dict:
    """The 8-GPU plan on `hosts` such nodes (modelled): one row per device per micro-batch over every host, the same
    bytes inside a host, and between hosts the ring all-reduce of each device's gradient shard over the hosts."""
    p = copy.deepcopy(plan)
    shard = plan["bytes"]["params"]
    p.update(hosts=hosts, micro_rows_effective=plan["micro_rows_effective"] * hosts,
             modelled_from=f"{plan.get('hosts', 1)}-host plan")
    p["traffic"]["update"]["max_inter"] = 2 * (hosts - 1) / hosts * shard
    return p


def _decode_s(tokens: float, gpus: int, slots: int, weights: int, kv_tok: int, ctx: int, gpu: str) -> tuple:
    round_bytes = weights + slots * kv_tok * ctx
    return tokens / (gpus * slots) * round_bytes / (DECODE_ROOFLINE * HBM[gpu]), round_bytes


def model(plan: dict, gpus: int, gpu: str = "h100", work: rw.Workload | None = None) -> dict:
    from memjax.model import count_params, flops, presets

    work = work or workload("configs/memagent/train.py", "memagent")
    cfg = presets.get(work.preset)
    samples, tokens = work.samples, work.tokens
    fwd = sum(c * samples * flops.estimate(cfg, [n], training=False) for n, c in work.rows)  # analytic
    at = lambda flop: flop / (gpus * MFU_UPDATE * PEAK)
    how = "analytic FLOPs/token (memjax.model.flops) at 45.5% MFU (measured)"
    e, lpf = work.epochs, work.logprob_forwards
    rows = {"update": {"seconds": at(3 * fwd * e), "flops_per_token": 3 * fwd / tokens,  # forward + backward
                       "how": how + (f", {e} epochs" if e > 1 else "")},
            "old_ref_logp": {"seconds": at(lpf * fwd), "flops_per_token": fwd / tokens,
                             "how": how + (", two forwards" if lpf == 2 else ", one forward (no reference)")}}
    crit = plan["bytes"].get("critic_params", 0) / plan["bytes"]["params"] if work.critic else 0.0
    if work.critic:
        rows["critic"] = {"seconds": at((1 + 3 * e) * fwd), "how": how + ": values (one forward) and the update; "
                          "the policy's FLOPs (the value head's saving ignored)"}
    micro_tokens = plan["micro_rows_effective"] * plan["row_len"]  # one micro-batch over the whole mesh
    micro = max(math.ceil(tokens / micro_tokens), work.mini_batches)  # at least one per mini-batch
    tr = plan.get("traffic") or {}
    up, lp = tr.get("update") or {}, tr.get("logprobs") or {}
    per_micro = ((e * (1 + crit)) * up.get("max_intra", 0) + (lpf + crit) * lp.get("max_intra", 0)) \
        / plan["micro_batches"]
    intra_s = micro * per_micro / NVLINK
    inter_s = work.mini_batches * e * (1 + crit) * (up.get("max_inter", 0) if gpus > 8 else 0) / IB
    src = plan.get("modelled_from")
    src = f"modelled from the {src}: between-host all-reduce 2(H-1)/H x gradient shard" if src else "compiled"
    rows["collectives"] = {"seconds": intra_s + inter_s, "micro_batches": micro, "bytes_per_micro_batch": per_micro,
                           "how": (f"{src} bytes per device ({plan.get('hosts', 1)} host plan): "
                                   f"{per_micro / 2**30:.1f} GiB per micro-batch (update x {e} + {lpf} log-prob "
                                   f"forward{'s' if lpf > 1 else ''}{' + critic' if crit else ''}) x {micro} "
                                   f"micro-batches at NVLink 450 GB/s, + the per-update bytes between hosts x "
                                   f"{work.mini_batches * e} updates at IB 50 GB/s (stated), no overlap")}
    pre = sum(c * samples * flops.estimate(cfg, [n], training=False) for n, c in work.prefill)
    rows["rollout_prefill"] = {"seconds": pre / (gpus * MFU_PREFILL * PEAK), "how": "analytic forward FLOPs at 35% "
                               "MFU (measured), every GPU rolling out"}
    slots = plan["engine_max_slots"] // plan["engine_groups"]  # one group per GPU (the plan's placement)
    kv_tok = rw.kv_token(work.preset)
    w = 2 * count_params(cfg)
    dec, round_bytes = _decode_s(samples * work.decode_tokens, gpus, slots, w, kv_tok, work.decode_ctx, gpu)
    rows["rollout_decode"] = {"seconds": dec, "slots_per_gpu": slots,
                              "how": f"modelled rounds of {slots} sequences per GPU x ({round_bytes / 1e9:.1f} GB "
                                     f"per round at 52% of {HBM[gpu] / 1e12:.2f} TB/s, measured share)"}
    frozen_pre = 0.0
    if (fz := work.frozen) is not None:
        per = plan["engine_devices"] if fz.devices == "engine" else 1  # its devices in each process (a node)
        fgpus = gpus // 8 * per
        calls = samples * fz.calls
        frozen_pre = calls * flops.estimate(cfg, [fz.prompt + fz.response], training=False) / (
            fgpus * MFU_PREFILL * PEAK)
        fdec, fround = _decode_s(calls * fz.response, fgpus, fz.slots, w, kv_tok, fz.prompt + fz.response // 2, gpu)
        rows["frozen_answers"] = {"seconds": frozen_pre + fdec, "calls": calls, "slots": fz.slots, "gpus": fgpus,
                                  "how": f"modelled: {calls:.0f} answers on {fgpus} GPU(s) ({gpus // 8} engine(s) of "
                                         f"{per} device(s), frozen_devices={fz.devices!r}) of {fz.slots} slots "
                                         f"each: prefill at 35% MFU + decode rounds of {fround / 1e9:.1f} GB at 52% "
                                         "of the HBM roofline (measured rates)"}
    step = sum(r["seconds"] for r in rows.values())
    compute = rows["update"]["seconds"] + rows["old_ref_logp"]["seconds"] + rows.get("critic", {}).get("seconds", 0)
    hidden = micro * max(per_micro / NVLINK - compute / micro, 0.0) + inter_s
    floor = compute + rows["rollout_prefill"]["seconds"] + frozen_pre
    over = step - rows["collectives"]["seconds"] + hidden
    for r in rows.values():
        r["label"] = "modelled"
    return {"recipe": work.recipe, "gpus": gpus, "gpu": gpu, "samples": samples, "tokens": tokens,
            "workload": work.how, "phases": rows, "step_s": step, "gpu_s_per_sample": step * gpus / samples,
            "step_s_overlapped": over, "gpu_s_per_sample_overlapped": over * gpus / samples,
            "floor_gpu_s_per_sample": floor * gpus / samples, "anchor_h100_s_per_sample": ANCHOR_H100_S,
            "label": "modelled", "plan_backend": plan.get("backend"),
            "labels": {"flops": "analytic", "collective_bytes": src.split(":")[0], "rates": "measured",
                       "links": "stated"}}


def run_all(results: Path = RESULTS) -> list[dict]:
    """Every shipped recipe on one node (8 GPUs) and on 4 nodes (32 GPUs)."""
    out = []
    for name, config, kind, p8, p32, gpu in RECIPES:
        work = workload(config, kind)
        plan = json.loads((results / p8).read_text())
        have = (results / p32).is_file()
        plan32 = json.loads((results / p32).read_text()) if have else on_hosts(plan)
        for gpus, p, f in ((8, plan, p8), (32, plan32, p32 if have else f"{p8} on 4 hosts (modelled)")):
            r = model(p, gpus, gpu, work)
            r.update(name=name, config=config, plan=f, node=f"{gpus // 8 or 1} x 8 {gpu.upper()}",
                     anchor_h100_s_per_sample=ANCHOR_H100_S if name == "MemAgent 7B" else None)
            out.append(r)
    return out


def _line(r: dict, what: str) -> str:
    ph = ", ".join(f"{k} {v['seconds']:.0f}" for k, v in r["phases"].items())
    anchor = f" vs verl {ANCHOR_H100_S} H100-s" if r.get("anchor_h100_s_per_sample") else ""
    return (f"modelled {what} on {r['gpus']} x {r['gpu'].upper()}: step {r['step_s']:.0f} s ({ph}); "
            f"{r['gpu_s_per_sample']:.2f} GPU-s per sample ({r['gpu_s_per_sample_overlapped']:.2f} with the "
            f"collectives hidden, floor {r['floor_gpu_s_per_sample']:.2f}){anchor} (plan compiled on "
            f"{r['plan_backend']}; collective bytes {r['labels']['collective_bytes']})")


def _s(seconds: float) -> str:
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"


def markdown(rows: list[dict]) -> str:
    """The per-recipe table of docs/performance.md: modelled seconds per phase, per step and GPU-s per sample."""
    cols = ("update", "old_ref_logp", "critic", "collectives", "rollout_prefill", "rollout_decode", "frozen_answers")
    head = ("| recipe | node | GPUs | update | old + ref log-prob | critic | collectives | prefill | decode | frozen "
            "answers | s / step | GPU-s / sample | collectives hidden | floor | verl anchor | collective bytes |")
    out = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        ph = " | ".join(_s(r["phases"][c]["seconds"]) if c in r["phases"] else "-" for c in cols)
        anchor = f"{r['anchor_h100_s_per_sample']}" if r.get("anchor_h100_s_per_sample") else "-"
        out.append(f"| {r['name']} | {r['node']} | {r['gpus']} | {ph} | {_s(r['step_s'])} | "
                   f"{r['gpu_s_per_sample']:.2f} | {r['gpu_s_per_sample_overlapped']:.2f} | "
                   f"{r['floor_gpu_s_per_sample']:.2f} | {anchor} | {r['labels']['collective_bytes']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan", type=Path, nargs="?")
    ap.add_argument("--plan-32", type=Path, help="the plan on 4 hosts x 8 (memjax.plan --hosts 4): its collectives "
                    "(between hosts too) for the 32-GPU row; default PLAN's")
    ap.add_argument("--gpu", choices=sorted(HBM), default="h100")
    ap.add_argument("--all", action="store_true", help="every shipped recipe from its plans in benchmarks/results/")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", action="store_true", help="with --all: print the per-recipe table of the docs")
    a = ap.parse_args(argv)
    if a.all == (a.plan is not None):
        ap.error("give PLAN.json or --all")
    if a.all:
        out = run_all()
        lines = [_line(r, r["name"]) for r in out]
    else:
        plan = json.loads(a.plan.read_text())
        plan32 = json.loads(a.plan_32.read_text()) if a.plan_32 else plan
        out = [model(plan, 8, a.gpu), model(plan32, 32, a.gpu)]
        for r in out:
            r["anchor_h100_s_per_sample"] = ANCHOR_H100_S
        lines = [_line(r, "7B MemAgent") for r in out]
    print("\n".join(lines))
    if a.markdown and a.all:
        print(markdown(out))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
