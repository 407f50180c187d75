"""memjax.rl.critic: initialisation from the policy (a copy, not shared), value alignment, and the value
loss falling under the critic's own optimizer on a learnable target."""

import jax
import numpy as np
from flax import nnx

from memjax.model import init_model, presets
from memjax.rl import Conversation, build_batch
from memjax.rl.critic import Critic, CriticTrainer
from memjax.rl.trainer import OptimConfig
import pytest


# The policy the critics start from here and in test_credit.py: one model, one critic update program per session
POLICY = presets.get("tiny", vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                     num_kv_heads=1)


def _batch(seed=0):
    r = np.random.default_rng(seed)
    convs = [Conversation(r.integers(0, 64, 3).tolist(), r.integers(0, 64, 9).tolist(), [0.0] * 9, sample=i,
                          group=i, turn=0) for i in range(8)]
    b = build_batch(convs, [0.0] * 8, list(range(8)))
    prev_even = np.zeros(b.input_ids.shape, np.float32)
    prev_even[:, 1:] = np.where(b.input_ids[:, :-1] % 2 == 0, 1.0, -1.0)
    return b.replace(returns=prev_even * b.loss_mask)  # a target the context before token t determines


def test_critic_from_policy_and_value_loss_falls():
    policy = init_model(POLICY, seed=1)
    critic = Critic.from_policy(policy)
    pol = jax.tree.leaves(nnx.state(policy, nnx.Param))
    for a, b in zip(pol, jax.tree.leaves(nnx.state(critic.backbone, nnx.Param))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    before = [np.asarray(a).copy() for a in pol]
    tr = CriticTrainer(critic, OptimConfig(lr=1e-2, warmup_steps=0, weight_decay=0.0), clip_value=None)
    batch = _batch()
    v0 = tr.values(batch)
    assert v0.shape == batch.input_ids.shape and (v0 == 0).all()  # zero head
    losses = [tr.update(batch.replace(values=tr.values(batch)))["value_loss"] for _ in range(40)]
    assert losses[0] > 0.4 and losses[-1] < 0.3 * losses[0]
    assert (tr.values(batch)[:, 0] == 0).all()
    for a, b in zip(before, jax.tree.leaves(nnx.state(policy, nnx.Param))):
        np.testing.assert_array_equal(a, np.asarray(b))  # the policy is untouched


def test_critic_has_no_lm_head():
    policy = init_model(presets.get("tiny", tie_word_embeddings=False), seed=0)
    critic = Critic.from_policy(policy)
    assert "lm_head" in nnx.state(policy, nnx.Param) and "lm_head" not in nnx.state(critic.backbone, nnx.Param)


@pytest.mark.e2e
def test_critic_fsdp_micro_batched_matches_one_device():
    """tests/unit/rl/critic_mesh_check.py on 8 simulated devices: micro_rows 2 -> 8 (one row per device), packed rows,
    FSDP; values and one update equal the one-device critic's, gate_w is 1/8 per device, inputs donated."""
    import json
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(here, "critic_mesh_check.py")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["micro_rows"] == 8 and r["shard"] == [2, 8, 128] and r["donated"] and not r["has_lm_head"]
    assert r["moved"] > 0.05 and r["after_diff"] < 1e-5 and abs(r["loss8"] - r["loss1"]) < 1e-6


@pytest.mark.e2e
def test_critic_update_reduces_over_data_once_per_update():
    """tests/unit/rl/critic_reduce_check.py on 8 simulated devices, data 2 x fsdp 4 as 2 hosts x 4: the compiled critic
    update's collectives between the hosts run once per update (the same with the micro-batch loop counted 1 or 4
    times: one all-reduce of each device's gradient shard plus metric scalars), where the per-micro-batch reduction
    it replaced runs them in the loop; one update gives that program's loss, gradient norm and parameters."""
    import json
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(here, "critic_reduce_check.py")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.split("RESULT", 1)[1])
    new, old = r["new"], r["old"]
    assert new["n_micro"] == old["n_micro"] > 1  # several micro-batches really accumulated
    for k in ("one", "four"):
        assert new[k]["unknown"] == old[k]["unknown"] == [] and new[k]["ops"] == ["all-reduce"], (k, new, old)
    # once per update: nothing between the hosts inside the micro-batch loop
    assert new["one"]["executions"] == new["four"]["executions"] >= 1, new
    assert new["one"]["max_inter"] == new["four"]["max_inter"], new
    shard = new["param_bytes_per_device"]
    assert shard <= new["four"]["max_inter"] <= shard + 4096, (new, shard)
    # before: the gradients crossed the hosts on every micro-batch
    assert old["four"]["executions"] >= 4 * old["one"]["executions"] > 0, old
    assert old["four"]["max_inter"] > 4 * new["four"]["max_inter"], (old, new)
    assert abs(new["loss"] - old["loss"]) <= 1e-6 * abs(old["loss"]), (new["loss"], old["loss"])
    assert abs(new["grad_norm"] - old["grad_norm"]) <= 1e-5 * old["grad_norm"], (new, old)
    assert r["moved"] > 1e-3 and r["param_diff"] < 1e-6, r
