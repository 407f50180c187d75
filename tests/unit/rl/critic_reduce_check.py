"""Run under 8 simulated CPU devices by test_critic.py: the critic's update on a data 2 x fsdp 4 mesh (as 2
hosts x 4 devices) with the gradients reduced over data once per update (memjax/rl/update_programs.py
`accumulate_once_per_update`) vs the per-micro-batch reduction it replaced (the same program with
`reduces_once_per_update` patched to False): the compiled programs' collectives that span both data replicas
(executions and bytes each device sends between the hosts, the micro-batch loop counted 1 and 4 times), and the
value loss and parameters after one update of the same batch."""

import json

import jax
import numpy as np

jax.config.update("jax_default_matmul_precision", "highest")
from flax import nnx  # noqa: E402

from memjax.model import presets  # noqa: E402
from memjax.model.qwen2 import init_model  # noqa: E402
from memjax.parallel import MeshConfig  # noqa: E402
from memjax.parallel.collectives import collectives, summary  # noqa: E402
from memjax.rl import Conversation, build_batch, update_programs  # noqa: E402
from memjax.rl.critic import Critic, CriticTrainer  # noqa: E402
from memjax.rl.trainer import OptimConfig, UpdateConfig  # noqa: E402

CFG = presets.get("tiny").replace(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                                  tie_word_embeddings=False)
UPD = UpdateConfig(micro_rows=8, pack=True, row_buckets=(48,), max_segments=4, attention="blockwise",
                   min_micro_batches=4)
ROW_LEN, SLOTS, HOST = 48, 4, 4  # device d on host d // HOST


def batch(seed=0, n=48):
    r = np.random.default_rng(seed)
    convs = []
    for i in range(n):
        k = int(r.integers(2, 20))
        convs.append(Conversation(r.integers(1, CFG.vocab_size, int(r.integers(3, 20))).tolist(),
                                  r.integers(1, CFG.vocab_size, k).tolist(), [0.0] * k, sample=i, group=i, turn=0))
    b = build_batch(convs, r.random(n).tolist(), list(range(n)))
    return b.replace(returns=(r.standard_normal(b.input_ids.shape) * b.loss_mask).astype(np.float32))


def cross_data(txt, trips):
    """Executions of collectives whose groups hold devices of both hosts, and the bytes a device sends between
    hosts, with the micro-batch loop run `trips` times."""
    colls, _ = collectives(txt, 8, outer_trip_count=trips)
    spans = [c for c in colls if any(len({d // HOST for d in g}) > 1 for g in c.groups)]
    t = summary(txt, 8, HOST, outer_trip_count=trips)
    return {"executions": sum(c.count for c in spans), "ops": sorted({c.op for c in spans}),
            "max_inter": t["max_inter"], "unknown": t["unknown_trip_counts"]}


def run(once: bool):
    update_programs.reduces_once_per_update = (lambda mesh, ls: False) if not once else ORIGINAL
    tr = CriticTrainer(Critic.from_policy(init_model(CFG, seed=3)), OptimConfig(lr=1e-2, warmup_steps=0),
                       clip_value=0.5, mesh=MeshConfig(data=2, fsdp=4).make(), update=UPD)
    abstract = jax.eval_shape(lambda: nnx.state(tr.critic, nnx.Param))
    txt = tr.step.lower(abstract, SLOTS, ROW_LEN)[0].compile().as_text()
    b = batch()
    v0 = tr.values(b)
    n_micro = tr.rows.plans(b.lengths, [np.arange(b.num_rows)])[0][2].n_micro
    m = tr.update(b.replace(values=v0 + 0.1 * b.loss_mask))
    leaves = jax.tree.leaves(nnx.state(tr.critic, nnx.Param))
    d0 = jax.devices()[0]
    shard = sum(s.data.nbytes for a in leaves for s in a.addressable_shards if s.device == d0)
    params = [np.asarray(x) for x in leaves]
    return {"one": cross_data(txt, 1), "four": cross_data(txt, 4), "loss": m["value_loss"],
            "grad_norm": m["value_grad_norm"], "n_micro": n_micro,
            "param_bytes_per_device": int(shard)}, params


if __name__ == "__main__":
    ORIGINAL = update_programs.reduces_once_per_update
    new, pn = run(True)
    old, po = run(False)
    update_programs.reduces_once_per_update = ORIGINAL
    diff = max(float(np.abs(a - b).max()) for a, b in zip(pn, po))
    moved = max(float(np.abs(a - b).max()) for a, b in zip(pn, [np.asarray(x) for x in jax.tree.leaves(nnx.state(
        Critic.from_policy(init_model(CFG, seed=3)), nnx.Param))]))
    print("RESULT" + json.dumps({"new": new, "old": old, "param_diff": diff, "moved": moved}))
