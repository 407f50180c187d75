"""Run by tests/unit/rl/test_dapo.py as 2 processes (memjax.launch, 1 CPU device each) or 1 process: DynamicSampler
over generation batches whose samples are dealt to processes in blocks of whole groups (memjax.rl.shares.share).
With 2 processes every process adds only its block (across_processes=True); process 0 writes, per training step,
every process's kept sample ids (all-gathered for the check only) and the sampler's info to OUT/dapo_<n>.json.
A sample's id is its first token (unique over the run)."""

import json
import os
import sys

from memjax.parallel import initialize

initialize()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from memjax.parallel.split import allgather_ragged  # noqa: E402
from memjax.rl.batch import Conversation, build_batch  # noqa: E402
from memjax.rl.dapo import DynamicSampler  # noqa: E402
from memjax.rl.shares import share  # noqa: E402

GROUPS, SIZE = 6, 2  # groups per generation batch, samples per group


def gen_batch(rng, first_id):
    rewards = rng.integers(0, 2, GROUPS * SIZE).astype(float)  # about half the groups are flat
    convs = [Conversation([first_id + s, 5], [6], [-0.5], sample=s, group=s // SIZE, turn=0)
             for s in range(GROUPS * SIZE)]
    return build_batch(convs, rewards.tolist(), [s // SIZE for s in range(GROUPS * SIZE)])


def main(out):
    me, n = jax.process_index(), jax.process_count()
    rng = np.random.default_rng(0)
    sampler = DynamicSampler(5, 4, across_processes=n > 1)
    steps, next_id = [], 1000
    for _ in range(4):  # training steps
        while True:
            b = gen_batch(rng, next_id)
            next_id += GROUPS * SIZE
            lo, hi = share(GROUPS, me, n)
            mine = b.select_samples((b.sample_group >= lo) & (b.sample_group < hi))
            if sampler.add(mine):
                break
        kept, info = sampler.take()
        ids = np.asarray([] if kept is None else kept.input_ids[kept.turn == 0, 0], np.int64)
        every = [p.tolist() for p in allgather_ragged(ids)] if n > 1 else [ids.tolist()]
        order = kept.info.get("global_samples", np.arange(kept.num_samples)) if kept is not None else []
        numbered = [p.tolist() for p in allgather_ragged(np.asarray(order, np.int64))] if n > 1 else [[int(x) for x in order]]
        steps.append({"ids": every, "numbers": numbered, "none": kept is None,
                      "info": {k: float(v) for k, v in info.items()}})
    if me == 0:
        with open(os.path.join(out, f"dapo_{n}.json"), "w") as f:
            json.dump(steps, f)


if __name__ == "__main__":
    main(sys.argv[1])
