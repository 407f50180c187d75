"""Run by tests/unit/rl/test_assemble.py as 2 processes x 2 CPU devices (memjax.launch) or 1 process x 4 devices:
the Trainer on a data 2 x fsdp 2 mesh, each process holding only its own samples of one global batch.

Every process builds the same global batch (a seeded random one) and keeps the samples `share` deals it (whole
GRPO groups). It then
1. assembles one mini-batch's input_ids from its own rows (Trainer._build: jax.make_array_from_process_local_data)
   and all-gathers the result, which must equal memjax.rl.assemble.reference_global of every process's block
   computed here on the host (what one process holding every row builds);
2. runs two Trainer updates (token level, packed rows, 2 mini-batches; then step level) and, token level, a third
   where the last process holds no sample at all (it still takes part), and writes the metrics and the final
   parameters (process 0) to OUT/, which the test compares across runs.
"""

import json
import os
import sys

from memjax.parallel import initialize

initialize()

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from memjax.model import presets  # noqa: E402
from memjax.model.qwen2 import init_model  # noqa: E402
from memjax.parallel import MeshConfig, to_host  # noqa: E402
from memjax.rl import Conversation, build_batch  # noqa: E402
from memjax.rl.advantages import with_advantages  # noqa: E402
from memjax.rl.assemble import RowShard, local_block, reference_global  # noqa: E402
from memjax.rl.packing import pack  # noqa: E402
from memjax.rl.shares import share  # noqa: E402
from memjax.rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig  # noqa: E402

CFG = presets.get("tiny").replace(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=4, num_kv_heads=2,
                                  tie_word_embeddings=False)
# min_micro_batches=4: the mini-batches need 2 or 3 micro-batches (slots 2 or 4 at a minimum of 2); 4 slots for all
# gives each process one update and one log-prob program per loss level (the unused slot is skipped, a traced count)
UPD = UpdateConfig(micro_rows=4, pack=True, row_buckets=(48,), attention="dense", max_segments=3, mini_batches=2,
                   min_micro_batches=4)


def make_batch(seed=0, samples=10, convs_per_sample=3):
    r = np.random.default_rng(seed)
    convs = []
    for s in range(samples):
        for t in range(convs_per_sample):
            p, k = int(r.integers(3, 20)), int(r.integers(2, 20))
            convs.append(Conversation(r.integers(1, CFG.vocab_size, p).tolist(),
                                      r.integers(1, CFG.vocab_size, k).tolist(), (-r.random(k)).tolist(),
                                      sample=s, group=s // 2, turn=t))
    return build_batch(convs, r.random(samples).round(1).tolist(), [s // 2 for s in range(samples)])


def local_part(batch, process, processes):
    """The samples a process holds: its `share` of the groups (2 samples per group), and their RowShard."""
    groups = int(batch.sample_group.max()) + 1
    lo, hi = share(groups, process, processes)
    keep = (batch.sample_group >= lo) & (batch.sample_group < hi)
    return batch.select_samples(keep), RowShard(np.nonzero(keep)[0], batch.num_samples)


def main(out):
    me, n = jax.process_index(), jax.process_count()
    batch = make_batch()
    mesh = (MeshConfig(data=1, fsdp=2) if n == 2 else MeshConfig(data=2, fsdp=2)).make()
    res = {}
    for level in ("token", "step"):
        model = init_model(CFG, seed=0)
        tr = Trainer(model, OptimConfig(lr=1e-2, warmup_steps=0, eps=1e-3), LossConfig(level=level), UPD, mesh=mesh)
        local, shard = local_part(batch, me, n)
        if level == "token":
            # 1. the assembled global array against the one-process build from every process's rows
            parts = [np.arange(local.num_rows)]
            plan = tr._plans(local, parts)[0]
            got = to_host(tr._build(plan, {"input_ids": local.input_ids})["input_ids"])
            rows_of = [local_part(batch, q, n)[0] for q in range(n)]
            sl, m_local = plan[2], tr.rows.m_local
            blocks = [local_block(pack(b.lengths, sl.row_len, UPD.max_segments, UPD.pack), b.input_ids, sl, m_local)
                      for b in rows_of]
            want = reference_global(blocks)
            res["assembled_equal"] = bool(np.array_equal(got, want))
            res["assembled_shape"] = list(got.shape)
            res["rows_per_process"] = [b.num_rows for b in rows_of]
        metrics = [tr.update(with_advantages(local), seed=3, shard=shard) for _ in range(2)]
        if level == "token":  # 3. the last process holds no sample (its groups were all filtered out)
            keep = np.full(batch.num_samples, n == 1 or me < n - 1)
            metrics.append(tr.update(with_advantages(batch.select_samples(keep)), seed=4,
                                     shard=RowShard(np.nonzero(keep)[0], batch.num_samples)))
        res[level] = metrics
        params = [to_host(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
        if me == 0:
            np.savez(os.path.join(out, f"params_{level}_{n}.npz"), *params)
    if me == 0:
        with open(os.path.join(out, f"result_{n}.json"), "w") as f:
            json.dump(res, f)
    print("OK", me)


if __name__ == "__main__":
    main(sys.argv[1])
