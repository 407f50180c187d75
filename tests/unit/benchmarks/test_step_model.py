"""benchmarks/step_model.py on a hand-made plan: the collectives are the compiled bytes per micro-batch times the
step's micro-batches (98,066,432 trained tokens: 2,048 samples x 47,884, counted here from the recipe's conversation
lengths) plus the between-host bytes once per mini-batch; the decode batch is the plan's slots per GPU; the step is
the sum of its phases and the floor the compute phases alone."""

import math

import pytest

from benchmarks import step_model

GIB = 1 << 30


def _plan(slots: int = 768, groups: int = 8, inter: int = 0) -> dict:
    return {"micro_rows_effective": 8, "row_len": 8192, "micro_batches": 16, "engine_max_slots": slots,
            "engine_groups": groups, "hosts": 1, "backend": "test",
            "traffic": {"update": {"max_intra": 16 * GIB, "max_inter": inter}, "logprobs": {"max_intra": 4 * GIB}}}


def test_collectives_decode_and_the_floor():
    r = step_model.model(_plan(), 8)
    ph = r["phases"]
    tokens = 2048 * (2248 + 6 * 7248 + 2148)  # first chunk, six more, the final answer (memagent_seqlens(28672))
    assert tokens == 98_066_432
    micro = math.ceil(tokens / (8 * 8192))
    assert ph["collectives"]["micro_batches"] == micro == 1497
    assert ph["collectives"]["seconds"] == pytest.approx(micro * (16 + 2 * 4) * GIB / 16 / 450e9)
    assert ph["rollout_decode"]["slots_per_gpu"] == 96
    assert r["step_s"] == pytest.approx(sum(p["seconds"] for p in ph.values()))
    assert r["gpu_s_per_sample"] == pytest.approx(r["step_s"] * 8 / 2048)
    floor = ph["update"]["seconds"] + ph["old_ref_logp"]["seconds"] + ph["rollout_prefill"]["seconds"]
    assert r["floor_gpu_s_per_sample"] == pytest.approx(floor * 8 / 2048)
    # a micro-batch's compute (~1.6 s) outlasts its 1.5 GiB of NVLink traffic: hidden, the collectives vanish
    assert r["step_s_overlapped"] == pytest.approx(r["step_s"] - ph["collectives"]["seconds"])
    assert ph["update"]["seconds"] == pytest.approx(1.5 * ph["old_ref_logp"]["seconds"])  # 3 forwards vs 2


def test_more_slots_per_gpu_shorten_the_decode_and_hosts_add_the_gradient_all_reduce():
    few, many = step_model.model(_plan(slots=256), 8), step_model.model(_plan(slots=768), 8)
    assert many["phases"]["rollout_decode"]["seconds"] < 0.6 * few["phases"]["rollout_decode"]["seconds"]
    one, four = step_model.model(_plan(inter=5 * GIB), 8), step_model.model(_plan(inter=5 * GIB), 32)
    # the same plan on 32 GPUs: the same micro-batches (the plan's rows span the mesh), + 16 all-reduces between hosts
    assert four["phases"]["collectives"]["seconds"] == pytest.approx(
        one["phases"]["collectives"]["seconds"] + 16 * 5 * GIB / 50e9)
