"""benchmarks/step_model.py on hand-made plans: the collectives are the compiled bytes per micro-batch times the
step's micro-batches (98,066,432 trained tokens: 2,048 samples x 47,884, counted here from the recipe's conversation
lengths) plus the between-host bytes once per mini-batch; the decode batch is the plan's slots per GPU; the step is
the sum of its phases and the floor the compute phases alone. Every other shipped recipe's workload (SUMER, Memory-R1
manager and answer agent, Memory-R2) is counted here by hand from its config; the 4-host plan modelled from one node
matches the compiled one; the frozen answer agent runs on the devices its config places it on; `--all` runs on the
shipped plans."""

import dataclasses
import json
import math

import pytest

from benchmarks import step_model

GIB = 1 << 30


def _plan(slots: int = 768, groups: int = 8, inter: int = 0) -> dict:
    return {"micro_rows_effective": 8, "row_len": 8192, "micro_batches": 16, "engine_max_slots": slots,
            "engine_groups": groups, "engine_devices": groups, "hosts": 1, "backend": "test",
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


# ---- every shipped recipe: the workload from its config, counted here by hand from the config's numbers ----------
def _cfg(path: str):
    from memjax.core.config import load_config_file

    return load_config_file(path)


def _plan_at(row_len: int, critic: bool = False, inter: int = 0) -> dict:
    p = _plan(slots=256, inter=inter) | {"row_len": row_len}
    return p | {"bytes": {"params": 4 * GIB, "critic_params": 3 * GIB}} if critic else p


def test_sumer_one_row_per_episode_one_log_prob_forward():
    w = step_model.rw.sumer(_cfg("configs/sumer/train.py"))
    # 32 questions x 8 episodes; 10.22 turns x (1,024 generated + 5 hits x 5 turns x 41 + 2 x 10 chat) + 461 prompt
    # + a 12-token question
    assert w.samples == 256 and w.rows == ((461 + 12 + round(10.22 * (1024 + 1025 + 20)), 1.0),) == ((21618, 1.0),)
    assert w.tokens == 256 * 21618 and w.logprob_forwards == 1 and not w.critic and w.mini_batches == 1
    r = step_model.model(_plan_at(32768), 8, work=w)
    ph = r["phases"]
    micro = math.ceil(256 * 21618 / (8 * 32768))
    assert ph["collectives"]["micro_batches"] == micro == 22
    assert ph["collectives"]["seconds"] == pytest.approx(micro * (16 + 4) * GIB / 16 / 450e9)  # no reference
    assert ph["update"]["seconds"] == pytest.approx(3 * ph["old_ref_logp"]["seconds"])
    assert r["gpu_s_per_sample"] == pytest.approx(sum(p["seconds"] for p in ph.values()) * 8 / 256)


def test_memory_r1_manager_critic_and_frozen_answer_agent():
    w = step_model.rw.memory_r1_manager(_cfg("configs/memory_r1/train_manager.py"))
    # template 1,113 + (2 facts + 10 related memories) x 41; the response restates 12 memories x (41 + 10)
    assert w.rows == ((1113 + 12 * 41 + 12 * 51, 1.0),) == ((2217, 1.0),) and w.samples == 128 and w.critic
    fz = w.frozen  # 60 memories + a question; 5 distilled memories + 20; a 4 GiB pool of 7B tokens (56 KiB each)
    assert (fz.prompt, fz.response) == (355 + 60 * 41 + 12, 5 * 41 + 20) == (2827, 225)
    assert fz.slots == (4 << 30) // (57344 * 3052) == 24 and fz.calls == pytest.approx(202 / 133)
    one, four = step_model.model(_plan_at(6144, True, inter=GIB), 8, work=w), \
        step_model.model(_plan_at(6144, True, inter=GIB), 32, work=w)
    ph = one["phases"]
    assert ph["collectives"]["micro_batches"] == math.ceil(128 * 2217 / (8 * 6144)) == 6
    # the critic's programs move the policy's bytes x 3/4 (its parameter bytes): update x 1.75, log-prob x 1.75
    assert ph["collectives"]["seconds"] == pytest.approx(6 * (1.75 * 16 + 1.75 * 4) * GIB / 16 / 450e9)
    assert ph["critic"]["seconds"] == pytest.approx(4 * ph["old_ref_logp"]["seconds"])  # values + update
    assert ph["frozen_answers"]["calls"] == pytest.approx(128 * 202 / 133)
    # the frozen engine spans the plan's 8 engine devices per node (frozen_devices="engine", read from the config);
    # "one" puts the same answers on one device per node: 8 x the seconds
    assert w.frozen.devices == "engine" and ph["frozen_answers"]["gpus"] == 8
    assert four["phases"]["frozen_answers"]["gpus"] == 32
    lone = dataclasses.replace(w, frozen=dataclasses.replace(fz, devices="one"))
    solo = step_model.model(_plan_at(6144, True, inter=GIB), 8, work=lone)["phases"]["frozen_answers"]
    assert solo["gpus"] == 1 and solo["seconds"] == pytest.approx(8 * ph["frozen_answers"]["seconds"])
    cfg_one = _cfg("configs/memory_r1/train_manager.py")
    cfg_one = dataclasses.replace(cfg_one, agent=dataclasses.replace(cfg_one.agent, frozen_devices="one"))
    assert step_model.rw.memory_r1_manager(cfg_one).frozen.devices == "one"
    # 4 mini-batches x (policy + critic) gradient all-reduces between hosts
    assert four["phases"]["collectives"]["seconds"] == pytest.approx(
        one["phases"]["collectives"]["seconds"] + 4 * 1.75 * GIB / 50e9)


def test_memory_r1_answer_agent_rows_and_the_floor_of_one_micro_batch_per_mini_batch():
    w = step_model.rw.memory_r1_answer(_cfg("configs/memory_r1/train_answer.py"))
    assert w.rows == ((2827 + 225, 1.0),) and w.frozen is None and w.decode_tokens == 225
    big = _plan_at(6144, True) | {"micro_rows_effective": 64}  # 393,216 tokens a micro-batch: all in one
    assert step_model.model(big, 8, work=w)["phases"]["collectives"]["micro_batches"] == w.mini_batches == 4


def test_memory_r2_sessions_chats_epochs_and_answers():
    w = step_model.rw.memory_r2(_cfg("configs/memory_r2/train.py"))
    # curriculum 8 / 16 / min(32, 30 sessions of conv-43 and conv-47) for 10 steps each = 18 sessions; re-rollouts
    # add 0.5 x 4 / 16 per session; per session 6 extractor rows 1,164 + i x 242 and 6 manager rows 1,447 + i x 1,016
    per_session = 6 * 1164 + 21 * 242 + 6 * 1447 + 21 * 1016
    assert per_session == 42084 and w.samples == 32 and w.epochs == 2 and w.logprob_forwards == 2
    assert w.tokens == pytest.approx(32 * 18 * 1.125 * per_session)
    assert w.frozen.calls == pytest.approx(64 + 18 * 0.125 * 16) and w.frozen.response == 512
    assert w.frozen.devices == "engine"  # configs/memory_r2/train.py: over the policy engine's devices
    r = step_model.model(_plan_at(32768), 8, work=w)
    ph = r["phases"]
    assert ph["update"]["seconds"] == pytest.approx(3 * ph["old_ref_logp"]["seconds"])  # 2 epochs x 3 / 2 forwards
    micro = math.ceil(w.tokens / (8 * 32768))
    assert ph["collectives"]["seconds"] == pytest.approx(micro * (2 * 16 + 2 * 4) * GIB / 16 / 450e9)


@pytest.mark.parametrize("recipe", step_model.RECIPES, ids=lambda r: r[0])
def test_four_hosts_modelled_from_one_node_match_the_compiled_plan(recipe):
    res, (_, _, _, p8, p32, _) = step_model.RESULTS, recipe  # every recipe's 4-host plan is compiled and shipped
    one, four = json.loads((res / p8).read_text()), json.loads((res / p32).read_text())
    m = step_model.on_hosts(one)
    assert m["micro_rows_effective"] == four["micro_rows_effective"] == 4 * one["micro_rows_effective"]
    assert m["traffic"]["update"]["max_inter"] == pytest.approx(four["traffic"]["update"]["max_inter"], rel=1e-3)
    # inside a host the one-node bytes bound the 4-host compile's (its fsdp gathers are the same, fewer reductions)
    assert four["traffic"]["update"]["max_intra"] <= 1.01 * one["traffic"]["update"]["max_intra"]


def test_an_absent_four_host_plan_is_modelled_from_the_node(tmp_path):
    for _, _, _, p8, _, _ in step_model.RECIPES:
        (tmp_path / p8).write_text((step_model.RESULTS / p8).read_text())
    rows = step_model.run_all(tmp_path)
    assert all(r["labels"]["collective_bytes"] == ("modelled from the 1-host plan" if r["gpus"] == 32 else "compiled")
               and r["plan"].endswith("(modelled)") == (r["gpus"] == 32) for r in rows)
    # the MemAgent 7B step on 32 modelled from one node: within 1% of the one from its compiled 4-host plan
    compiled = step_model.run_all()[1]
    assert rows[1]["step_s"] == pytest.approx(compiled["step_s"], rel=0.01)


def test_all_recipes_cli_on_the_shipped_plans(tmp_path):
    out = tmp_path / "all.json"
    rows = step_model.main(["--all", "--json", str(out)])
    assert json.loads(out.read_text()) == rows
    assert [(r["name"], r["gpus"]) for r in rows] == [(n, g) for n, *_ in step_model.RECIPES for g in (8, 32)]
    one = step_model.main(["benchmarks/results/plan_memagent_7b_8x80_aot-h100.json", "--plan-32",
                           "benchmarks/results/plan_memagent_7b_4x8x80_aot-h100.json"])
    assert [r["gpu_s_per_sample"] for r in rows[:2]] == [r["gpu_s_per_sample"] for r in one]
    for r in rows:
        assert r["step_s"] == pytest.approx(sum(p["seconds"] for p in r["phases"].values()))
        assert r["gpu_s_per_sample"] == pytest.approx(r["step_s"] * r["gpus"] / r["samples"])
        assert all(p["label"] == "modelled" and p["how"] for p in r["phases"].values())
        assert (r["anchor_h100_s_per_sample"] is not None) == (r["name"] == "MemAgent 7B")
        want = "compiled" if (step_model.RESULTS / r["plan"]).is_file() else "modelled from the 1-host plan"
        assert r["labels"]["collective_bytes"] == want
