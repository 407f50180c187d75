"""UpdateConfig.reuse_first_old_logp: the first mini-batch takes its old log-probs from its own forward (the weights
they are of), so the recompute pass skips its rows -- the update equals the recomputing one, and with one
mini-batch no recompute pass runs (no old_logp time, no mismatch metric) even when the engine's log-probs are
garbage; with two mini-batches the second keeps the recompute (garbage there changes the result)."""

import numpy as np
import pytest

from memjax import load_hf
from memjax.rl.advantages import with_advantages
from memjax.rl.trainer import LossConfig, Trainer, UpdateConfig

from conftest import golden_dir
from test_trainer import OPT, _batch, _params

pytestmark = pytest.mark.slow(seconds=60)  # 392 s measured at load ~40 on 2 cores (5 Trainer builds and updates)


@pytest.fixture(scope="module")
def batch():
    return _batch(load_hf(golden_dir("untied_kv2")))


def _update(batch, **upd):
    m = load_hf(golden_dir("untied_kv2"))
    # micro_rows=3: 8 rows are 3 uneven micro-batches (2 per mini-batch with 2), test_trainer's update program
    tr = Trainer(m, OPT, LossConfig(), UpdateConfig(micro_rows=3, pad_tokens=16, **upd))
    stats = tr.update(with_advantages(batch), seed=3)
    return _params(m), stats, tr.last_timings


@pytest.mark.parametrize("mini_batches", [1, 2])
def test_reused_first_old_logp_gives_the_recomputed_update(batch, mini_batches):
    ref, s_ref, t_ref = _update(batch, mini_batches=mini_batches)
    garbage = batch.replace(old_logp=np.full_like(batch.old_logp, -3.0))  # the engine's, if they were used
    got, s_got, t_got = _update(garbage, mini_batches=mini_batches, reuse_first_old_logp=True)
    assert "old_logp" in t_ref and s_ref["optimizer_steps"] == s_got["optimizer_steps"] == mini_batches
    for a, b in zip(ref, got):  # fp32 rounding of the two programs' log-probs, through 1-2 Adam steps
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert abs(s_ref["loss"] - s_got["loss"]) < 1e-6 and abs(s_ref["ratio_mean"] - s_got["ratio_mean"]) < 1e-6
    if mini_batches == 1:  # nothing left to recompute
        assert "old_logp" not in t_got and "logp_mismatch_mean" not in s_got
    else:  # the second mini-batch's rows were recomputed and compared with the (garbage) engine values
        assert "old_logp" in t_got and s_got["logp_mismatch_mean"] > 1.0


def test_later_mini_batches_still_need_the_old_log_probs(batch):
    """Without the recompute the second mini-batch reads the engine's log-probs: garbage there moves the result."""
    garbage = batch.replace(old_logp=np.full_like(batch.old_logp, -3.0))
    ref, _, _ = _update(batch, mini_batches=2, reuse_first_old_logp=True, recompute_old_logp=False)
    got, _, _ = _update(garbage, mini_batches=2, reuse_first_old_logp=True, recompute_old_logp=False)
    assert max(float(np.abs(a - b).max()) for a, b in zip(ref, got)) > 1e-4
