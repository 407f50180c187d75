"""benchmarks/schedule_sim_validate.py: the fit recovers the decode round's seconds and the update's rate from a
sync run whose phases are known in closed form, charges the engine's sleep to the colocated hand-over, predicts that
sync step back as the sum of its phases, measures s/step without the unmodelled last-step phases, and refuses a
result without phases in one line."""

import pytest

from benchmarks import schedule_sim_validate as sv

SETS = {"agent.train_chunks": "3", "agent.group_size": "8", "prompts_per_step": "1", "steps": "6"}


def _phases(rollout_s=0.5, update=(0.25, 0.0, 1.0), other=0.3, sync_s=0.05):
    # one group of 8 trajectories of 3 chunks: 8 x 4 conversations of 24 prompt + 5 generated tokens, 29 trained
    return {"rollout_conversations": 32.0, "rollout_trajectories": 8.0, "rollout_prompt_tokens": 32 * 24.0,
            "rollout_generated_tokens": 32 * 5.0, "conversations": 32.0, "mean_conversation_tokens": 29.0,
            "time_rollout_s": rollout_s, "time_old_logp_s": update[0], "time_ref_logp_s": update[1],
            "time_update_s": update[2], "time_other_s": other, "time_weight_sync_s": sync_s,
            "time_evaluation_s": 0.1, "time_checkpoint_s": 0.2, "engine_sleep_s": 0.2}


def _meas():
    return {"sync": {"phases": _phases(), "sets": SETS, "max_staleness": 0}}


def test_fit_recovers_tau_and_the_update_rate():
    kw = {"batch_groups": 1, "group_size": 8, "steps": 6, "warmup": 1}
    f = sv.fit(_meas(), devices=8, round_tokens=1280, max_slots=256, sim_kw=kw, sim_seeds=2)
    # every turn: 8 prompts of 24 tokens prefilled one after another in rounds of 1,280 tokens, then 5 decode rounds;
    # 4 turns per trajectory, all 8 in step
    tau = 0.5 / (4 * (8 * 24 / 1280 + 5))
    assert f["tau_s"] == pytest.approx(tau, rel=1e-9)
    assert f["rates"].prefill_tok_s == pytest.approx(1280 / tau, rel=1e-9)
    assert f["rates"].train_flops_s == pytest.approx(32 * 29 / 1.25, rel=1e-12)
    # the engine's sleep (inside time_other_s) moves to the colocated engine's hand-over
    assert f["rates"].update_fixed_s == pytest.approx(0.1) and f["rates"].weight_sync_s == pytest.approx(0.25)
    # the fitted sync step: rollout + (old_logp + update) + other (sleep included) + weight sync
    assert sv.predict(f, "sync", 8, 4, 0, kw, 2) == pytest.approx(0.5 + 1.25 + 0.3 + 0.05, rel=1e-9)


def test_measured_leaves_out_the_last_steps_evaluation_and_checkpoint():
    rows = [{"schedule": "sync", "seed": s, "s_per_step": x, "max_staleness": 0, "phases": _phases(),
             "sets": [f"{k}={v}" for k, v in SETS.items()]} for s, x in ((0, 2.0), (1, 3.0))]
    m = sv.measured({"benchmark": "async_schedules", "rows": rows})
    assert m["sync"]["s_per_step_raw"] == 2.5 and m["sync"]["s_per_step"] == pytest.approx(2.5 - 0.3)
    del rows[1]["phases"]
    with pytest.raises(ValueError, match="no 'phases'"):
        sv.measured({"benchmark": "async_schedules", "rows": rows})
