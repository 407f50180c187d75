"""The Trainer's off-policy correction (LossConfig.offpolicy, decoupled PPO): the engine's log-probs are the
behaviour policy, the trainer's recompute is the proximal policy, and each token's surrogate is weighted by
pi_prox / pi_behave. Checked against memjax.rl.losses.policy_loss (itself checked against numpy in
test_offpolicy.py) on the same batch, on-policy it equals the uncorrected update bit for bit, and the configs that
cannot run it are refused in one line."""

import numpy as np
import pytest
from conftest import golden_dir
from test_trainer import OPT, _batch, _params

from memjax import load_hf
from memjax.core.config import ConfigError, apply_overrides
from memjax.rl.advantages import with_advantages
from memjax.rl.losses import policy_loss
from memjax.rl.offpolicy import OffPolicyConfig
from memjax.rl.trainer import LossConfig, Trainer, UpdateConfig
from memjax.run.train_config import TrainConfig

pytestmark = pytest.mark.slow(seconds=40)

DECOUPLED = OffPolicyConfig(mode="decoupled", truncate=1.5)


@pytest.fixture(scope="module")
def batch():
    return with_advantages(_batch(load_hf(golden_dir("untied_kv2"))))


def _trainer(off: OffPolicyConfig):
    m = load_hf(golden_dir("untied_kv2"))
    return m, Trainer(m, OPT, LossConfig(offpolicy=off), UpdateConfig(micro_rows=8, pad_tokens=16))


def test_the_weighted_loss_is_policy_loss_with_the_engine_as_behaviour(batch):
    m, tr = _trainer(DECOUPLED)
    prox = tr.logprobs(m, batch)  # what the update's recompute gives (the weights before the update)
    rng = np.random.default_rng(0)  # engine log-probs of an older policy: off by up to +-0.8 nats a token
    stale = batch.replace(old_logp=np.where(batch.loss_mask > 0, prox + rng.uniform(-0.8, 0.8, prox.shape),
                                            0.0).astype(np.float32))
    stats = tr.update(stale, seed=0)
    lc = LossConfig()
    want, wm = policy_loss(prox, prox, np.asarray(stale.advantages, np.float32), stale.loss_mask,
                           clip_low=lc.clip_low, clip_high=lc.clip_high, agg=lc.agg, offpolicy=DECOUPLED,
                           behaviour_logp=stale.old_logp)
    assert abs(stats["loss"] - float(want)) < 1e-5, (stats["loss"], float(want))
    for k in ("is_weight_mean", "is_truncated_frac", "logp_gap_mean"):
        assert abs(stats[k] - float(wm[k])) < 1e-5, (k, stats[k], float(wm[k]))
    assert stats["is_truncated_frac"] > 0.05 and stats["logp_gap_mean"] > 0.2  # the weights did act
    plain, _ = policy_loss(prox, prox, np.asarray(stale.advantages, np.float32), stale.loss_mask,
                           clip_low=lc.clip_low, clip_high=lc.clip_high, agg=lc.agg)
    assert abs(float(plain) - stats["loss"]) > 1e-4  # the uncorrected loss is another number


def test_on_policy_the_correction_changes_nothing(batch):
    m, tr = _trainer(DECOUPLED)
    exact = batch.replace(old_logp=tr.logprobs(m, batch))  # behaviour == proximal: every weight is exactly 1
    s_dec = tr.update(exact, seed=0)
    m2, tr2 = _trainer(OffPolicyConfig())
    s_off = tr2.update(exact, seed=0)
    for a, b in zip(_params(m), _params(m2)):
        np.testing.assert_array_equal(a, b)
    assert s_dec["loss"] == s_off["loss"] and s_dec["is_weight_mean"] == 1.0 and s_dec["is_truncated_frac"] == 0.0


@pytest.mark.parametrize("sets, line", [
    (["loss.offpolicy.mode=decoupled", "update.recompute_old_logp=false"], "keep update.recompute_old_logp=true"),
    (["loss.offpolicy.mode=decoupled", "loss.level=step"], "needs level='token'"),
    (["loss.offpolicy.mode=decoupled", "loss.offpolicy.proximal=loglinear"], "use proximal='recompute'"),
    (["loss.offpolicy.mode=decoupled", "loss.offpolicy.level=sequence", "update.pack=true"], "update.pack=false"),
    (["loss.offpolicy.truncate=2"], "need mode='decoupled'"),
])
def test_configs_that_cannot_run_it_are_one_line(sets, line):
    with pytest.raises(ConfigError, match=line) as e:
        apply_overrides(TrainConfig(), sets)
    assert "\n" not in str(e.value)
