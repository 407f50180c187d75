"""benchmarks/schedule_sim.py: the recipes' workloads follow the shipped statistics (MemAgent's chunk counts from
the RULER-HotpotQA lengths, SUMER's capped turn counts), the rates file loads with its sources, and the table labels
every figure predicted."""

import json

import numpy as np

from benchmarks import schedule_sim as bs
from memjax.model import presets


def test_memagent_chunks_follow_the_ruler_statistics():
    ruler = json.loads(bs.RULER.read_text())
    row = next(r for r in ruler["rows"] if r["num_docs"] == 200)
    make = bs.memagent_workload(presets.get("qwen2.5-7b"), ruler)
    rng = np.random.default_rng(0)
    trajs = [make(rng) for _ in range(2000)]
    chunks = np.array([t.tag for t in trajs])
    assert set(chunks) == {6, 7} and abs(chunks.mean() - row["mean_chunks"]) < 0.03
    assert all(len(t.turns) == t.tag + 1 for t in trajs)  # k memory turns + the final answer
    assert all(t.turns[0].prefill == 200 + 64 + 5000 for t in trajs)
    assert all(t.train_flops == 3 * t.forward_flops for t in trajs)


def test_sumer_turns_are_capped_and_continue():
    make = bs.sumer_workload(presets.get("qwen2.5-7b"))
    rng = np.random.default_rng(1)
    trajs = [make(rng) for _ in range(2000)]
    turns = np.array([len(t.turns) for t in trajs])
    assert turns.min() >= 1 and turns.max() <= 20 and 4.5 < turns.mean() < 5.5
    assert all(t.turns[0].continues is False and all(x.continues for x in t.turns[1:]) for t in trajs)


def test_rates_load_with_sources_and_slots():
    raw = json.loads(bs.DEFAULT_RATES.read_text())
    assert all("source" in v for v in raw.values() if isinstance(v, dict))
    r = bs.load_rates(bs.DEFAULT_RATES, "memagent")
    # each recipe's decode slots per GPU: engine.max_slots over its 8 data-parallel groups, capped by the KV
    assert r.slots == min(768 // 8, raw["kv_tokens_colocated"]["value"] // 8192) == 96 and r.forward_passes == 2
    s = bs.load_rates(bs.DEFAULT_RATES, "sumer", blockwise=True)
    assert s.train_flops_s == 174.1e12 and s.slots == 256 // 8


def test_table_says_predicted():
    row = {"schedule": "sync", "max_staleness": 0, "rollout_devices": 8, "train_devices": 8, "step_s": 100.0,
           "gpu_s_per_sample": 0.4, "speedup_vs_sync": 1.0, "vs_anchor": 2.0}
    out = {"predicted": {"memagent@8": [row]}, "predicted_blockwise": {"memagent@8": [row]}}
    text = bs.table(out)
    assert "PREDICTED" in text and "| memagent | 8 | sync | 0 | 8 / 8 | 100 | 0.40 | 1.00 | 2.00x | 100 |" in text
