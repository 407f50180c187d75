"""memjax.rl.shares in one process: the deal of a generation batch over processes, and that a block of samples
run with `first_trajectory` (what each process runs) samples exactly as the same samples inside the whole run,
so the processes' blocks concatenated are the one-process batch (tests/e2e/parallel/test_multiprocess.py runs the
real multi-process exchange)."""

import numpy as np

from memjax import load_hf
from memjax.agents import run_workflow
from memjax.engine import Engine, EngineConfig
from memjax.rl.batch import concat_batches
from memjax.rl.shares import gather_rollouts, share

from conftest import golden_dir
from tests.unit.agents.test_workflow import CFG, SAMPLES, Echo


def test_share_is_contiguous_balanced_and_covers_everything():
    for n in range(0, 11):
        for k in (1, 2, 3, 4):
            blocks = [share(n, p, k) for p in range(k)]
            assert blocks[0][0] == 0 and blocks[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
            sizes = [hi - lo for lo, hi in blocks]
            assert max(sizes) - min(sizes) <= 1
    assert share(5) == (0, 5)  # one process: everything


def test_blocks_with_trajectory_offsets_equal_the_whole_run():
    engine = Engine(load_hf(golden_dir("untied_kv2")), EngineConfig(**CFG))
    whole = run_workflow(engine, Echo(), SAMPLES, group_size=2, seed=5)
    parts = []
    for p in range(2):
        lo, hi = share(len(SAMPLES), p, 2)
        parts.append(run_workflow(engine, Echo(), SAMPLES[lo:hi], group_size=2, seed=5, first_trajectory=lo * 2))
    joined = concat_batches([r.batch for r in parts])
    for k in ("input_ids", "old_logp", "loss_mask", "sample", "group", "sample_group", "reward"):
        np.testing.assert_array_equal(getattr(joined, k), getattr(whole.batch, k), err_msg=k)
    assert [r for part in parts for r in part.rewards] == whole.rewards
    batch, rewards, stats = gather_rollouts(whole.batch, whole.rewards, whole.stats)  # one process: unchanged
    assert batch is whole.batch and rewards == whole.rewards and stats == whole.stats
