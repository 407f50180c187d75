"""Credit assignment (memjax/rl/credit.py): outcome rewards placed on each row's last trained token,
explained variance, GRPO passthrough, and GAE with a real critic against the numpy GAE formula."""

import numpy as np
import pytest

from memjax.model import init_model
from memjax.rl.advantages import AdvantageConfig, with_advantages
from memjax.rl.batch import Conversation, build_batch
from memjax.rl.credit import Credit, CriticConfig, explained_variance, outcome_token_rewards
from memjax.rl.estimators import gae

from test_critic import POLICY


def _batch():
    convs = [Conversation([1, 2, 3], [4, 5], [-1.0, -1.0], sample=0, group=0, turn=0),
             Conversation([1, 2], [6, 7, 8], [-1.0] * 3, sample=0, group=0, turn=1, response_mask=[1, 1, 0]),
             Conversation([2, 2], [9], [-1.0], sample=1, group=0, turn=0),
             Conversation([3], [5, 5], [-1.0, -1.0], sample=2, group=1, turn=0, response_mask=[0, 0])]
    return build_batch(convs, [1.0, 0.0, 0.5], [0, 0, 1])


def test_outcome_rewards_sit_on_the_last_trained_token():
    b = _batch()
    r = outcome_token_rewards(b)
    assert r.shape == b.loss_mask.shape and r.dtype == np.float32
    assert r[0, 4] == 1.0 and r[1, 3] == 1.0 and r[2, 2] == 0.0  # row 1: token 4 is masked, so 3 is last
    assert r[3].sum() == 0 and np.count_nonzero(r) == 2  # an empty-mask row gets nothing


def test_explained_variance():
    m = np.ones((1, 4))
    ret = np.array([[1.0, 2.0, 3.0, 4.0]])
    assert explained_variance(ret, ret, m) == 1.0
    assert explained_variance(np.zeros_like(ret), ret, m) == pytest.approx(1 - np.var(ret) / np.var(ret) + 0.0)
    assert np.isnan(explained_variance(ret, np.ones_like(ret), m))  # constant returns: undefined


def test_grpo_is_the_group_rule():
    b = _batch()
    got, metrics = Credit(AdvantageConfig(norm="mean")).assign(b)
    assert metrics == {} and np.array_equal(got.advantages, with_advantages(b, AdvantageConfig(norm="mean")).advantages)


def test_gae_uses_the_critic_and_updates_it():
    policy = init_model(POLICY, 0)  # test_critic.py's: its critic update program
    cfg = AdvantageConfig(estimator="gae", gamma=0.9, lam=0.8, whiten=False)
    credit = Credit(cfg, policy, CriticConfig(lr=1e-3, clip_value=0.0, epochs=3))
    b = _batch()
    v0 = credit.critic_trainer.values(b)
    assert np.all(v0 == 0)  # zero value head: the first values are 0
    got, m = credit.assign(b)
    want_adv, want_ret = gae(outcome_token_rewards(b), v0, b.loss_mask, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(got.advantages, want_adv, rtol=1e-6)
    np.testing.assert_allclose(got.returns, want_ret, rtol=1e-6)
    assert m["value_loss"] > 0 and m["explained_variance"] <= 0  # zero values explain nothing
    _, m2 = credit.assign(b)  # the critic moved towards the returns
    assert m2["value_loss"] < m["value_loss"]
    state = credit.state()
    other = Credit(cfg, policy, CriticConfig(lr=1e-2))
    other.load_state(state)
    np.testing.assert_array_equal(other.critic_trainer.values(b), credit.critic_trainer.values(b))
    with pytest.raises(ValueError, match="estimator"):
        AdvantageConfig(estimator="ppo")
