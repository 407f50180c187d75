"""Run under 8 simulated CPU devices by test_critic.py: the critic FSDP-sharded on an fsdp=8 mesh with micro_rows=2
(rounded up to 8, one row per device) and packed rows vs the same critic on one device: values and one update
agree, the parameters are 1/8 per device along the hidden dimension, and the update donates its inputs."""

import json

import jax
import numpy as np

jax.config.update("jax_default_matmul_precision", "highest")
from flax import nnx  # noqa: E402

from memjax.model import presets  # noqa: E402
from memjax.model.qwen2 import init_model  # noqa: E402
from memjax.parallel import MeshConfig  # noqa: E402
from memjax.rl import Conversation, build_batch  # noqa: E402
from memjax.rl.critic import Critic, CriticTrainer  # noqa: E402
from memjax.rl.trainer import OptimConfig, UpdateConfig  # noqa: E402

CFG = presets.get("tiny").replace(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                                  tie_word_embeddings=False)


def batch(seed=0, n=20):
    r = np.random.default_rng(seed)
    convs = []
    for i in range(n):
        k = int(r.integers(2, 20))
        convs.append(Conversation(r.integers(1, CFG.vocab_size, int(r.integers(3, 20))).tolist(),
                                  r.integers(1, CFG.vocab_size, k).tolist(), [0.0] * k, sample=i, group=i, turn=0))
    b = build_batch(convs, r.random(n).tolist(), list(range(n)))
    return b.replace(returns=(r.standard_normal(b.input_ids.shape) * b.loss_mask).astype(np.float32))


def run(mesh):
    policy = init_model(CFG, seed=3)
    upd = UpdateConfig(micro_rows=2, pack=True, row_buckets=(48,), max_segments=4, attention="blockwise",
                       min_micro_batches=2)
    tr = CriticTrainer(Critic.from_policy(policy), OptimConfig(lr=1e-2, warmup_steps=0), clip_value=0.5, mesh=mesh,
                       update=upd)
    b = batch()
    v0 = tr.values(b)
    old = nnx.state(tr.critic, nnx.Param)["backbone"]["layers"]["gate_w"][...]
    m = tr.update(b.replace(values=v0 + 0.1 * b.loss_mask))
    donated = old.is_deleted()
    shard = nnx.state(tr.critic, nnx.Param)["backbone"]["layers"]["gate_w"][...].addressable_shards[0].data.shape
    return tr, v0, tr.values(b), m, donated, shard


if __name__ == "__main__":
    tr8, a0, a1, m8, donated8, shard8 = run(MeshConfig().make())
    tr1, b0, b1, m1, _, _ = run(None)
    print(json.dumps({"micro_rows": tr8.update_cfg.micro_rows, "values_diff": float(np.abs(a0 - b0).max()),
                      "after_diff": float(np.abs(a1 - b1).max()), "moved": float(np.abs(b1 - b0).max()),
                      "loss8": m8["value_loss"], "loss1": m1["value_loss"], "donated": donated8,
                      "shard": list(shard8), "has_lm_head": "lm_head" in nnx.state(tr8.critic, nnx.Param)["backbone"]}))
