"""memjax.rl.estimators against hand-computed cases: GRPO options (mean / mean-std, population / unbiased
std), LoGo-GRPO (local and global branches never mix), GAE (masked positions skipped, empty rows)."""

import numpy as np
import pytest

from memjax.rl.advantages import grpo_advantages
from memjax.rl.estimators import gae, group_normalise, logo_grpo_advantages


def test_group_normalise_options():
    x, g = [1.0, 0.0, 1.0, 0.0, 2.0, 2.0, 2.0, 5.0], [3, 3, 3, 3, 8, 8, 8, 1]
    s3 = np.sqrt(1.0 / 3.0)  # unbiased std of (1, 0, 1, 0)
    sign = np.array([1, -1, 1, -1])
    np.testing.assert_allclose(group_normalise(x, g, ddof=1, eps=1e-6)[:4], sign * 0.5 / (s3 + 1e-6), rtol=1e-6)
    np.testing.assert_allclose(group_normalise(x, g, ddof=0, eps=1e-6)[:4], sign * 0.5 / (0.5 + 1e-6), rtol=1e-6)
    np.testing.assert_allclose(group_normalise(x, g, norm="mean")[:4], [0.5, -0.5, 0.5, -0.5])
    for norm in ("mean", "mean_std"):
        out = group_normalise(x, g, norm=norm)
        assert (out[4:7] == 0).all() and out[7] == 0  # constant group, group of one
        assert out.dtype == np.float32
    np.testing.assert_allclose(group_normalise(x, g), np.asarray(grpo_advantages(np.float32(x), np.int32(g),
                                                                                 norm="mean_std")), rtol=1e-5)
    assert group_normalise([], []).shape == (0,)
    with pytest.raises(ValueError, match="ddof"):
        group_normalise(x, g, ddof=2)


def _verl_grpo(x, g, eps):
    # an independent restatement of Memory-R2 @357b4ec core_algos.compute_grpo_outcome_advantage in numpy:
    # a group of one gets mean 0 / std 1, larger groups mean and unbiased std (torch.std)
    x, g = np.asarray(x, np.float64), np.asarray(g)
    out = np.empty_like(x)
    for k in np.unique(g):
        m = g == k
        mu, sd = (0.0, 1.0) if m.sum() == 1 else (x[m].mean(), x[m].std(ddof=1))
        out[m] = (x[m] - mu) / (sd + eps)
    return out


def test_singleton_reward_rule_matches_memory_r2_official():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 2, 40)
    g = rng.integers(0, 25, 40)  # many groups of one
    g[0], g[1:3] = 99, 7  # one singleton for sure, one group of two at least
    assert (np.bincount(g) == 1).any()
    got = group_normalise(x, g, singleton="reward", eps=1e-6)
    np.testing.assert_allclose(got, _verl_grpo(x, g, 1e-6), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], x[0] / (1 + 1e-6), rtol=1e-6)
    alone = np.bincount(g)[g] == 1
    assert (group_normalise(x, g)[alone] == 0).all()  # the default rule: no signal
    np.testing.assert_allclose(group_normalise(x, g, norm="mean", singleton="reward")[alone], x[alone], rtol=1e-6)
    a = logo_grpo_advantages([0.7, 1.0, 0.0, 0.4], [0, 1, 1, 2], [-1, -1, -1, 3], singleton="reward")
    np.testing.assert_allclose(a, [0.7 / (1 + 1e-6), 0.5 / (np.sqrt(0.5) + 1e-6), -0.5 / (np.sqrt(0.5) + 1e-6),
                                   0.4 / (1 + 1e-6)], rtol=1e-6)
    with pytest.raises(ValueError, match="singleton"):
        group_normalise(x, g, singleton="verl")


def test_logo_grpo_branches_are_separate():
    reward = [1.0, 0.0, 1.0, 0.0, 0.5, 1.0, 0.0, 0.3]
    glob = [0, 0, 0, 0, 1, 0, 0, 0]  # local rows carry the global id too: it must not matter
    local = [-1, -1, -1, -1, -1, 7, 7, 9]
    a = logo_grpo_advantages(reward, glob, local)
    g = 0.5 / (np.sqrt(1.0 / 3.0) + 1e-6)
    loc = 0.5 / (np.sqrt(0.5) + 1e-6)
    np.testing.assert_allclose(a, [g, -g, g, -g, 0.0, loc, -loc, 0.0], rtol=1e-6)
    flat = logo_grpo_advantages([2.0] * 4, [0, 0, 0, 0], [-1, -1, 5, 5])
    assert (flat == 0).all()
    with pytest.raises(ValueError, match="must all be"):
        logo_grpo_advantages([1.0], [0, 0], [-1])


def test_gae_hand_computed():
    mask = np.array([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], np.float32)
    values = np.array([[3.0, 0.5, 0.2, 7.0, 1.0], [1.0, 2, 3, 4, 5], [0, 0, 0, 0, 0]], np.float32)
    rewards = np.array([[9.0, 0, 0, 9.0, 1.0], [1.0, 1, 1, 1, 1], [0, 0, 2.0, 0, 0]], np.float32)
    adv, ret = gae(rewards, values, mask, gamma=0.9, lam=0.5)
    # row 0, valid tokens 1, 2, 4: delta4 = 1 - 1 = 0; delta2 = 0.9 * 1 - 0.2 = 0.7; A2 = 0.7;
    # delta1 = 0.9 * 0.2 - 0.5 = -0.32; A1 = -0.32 + 0.45 * 0.7 = -0.005
    np.testing.assert_allclose(adv[0], [0, -0.005, 0.7, 0, 0], atol=1e-6)
    np.testing.assert_allclose(ret[0], [0, 0.495, 0.9, 0, 1.0], atol=1e-6)
    assert (adv[1] == 0).all() and (ret[1] == 0).all()  # empty mask
    np.testing.assert_allclose(adv[2], [2 * 0.9**2 * 0.5**2, 2 * 0.9 * 0.5, 2, 0, 0], atol=1e-6)
    a1, _ = gae(rewards, values * 0, mask, gamma=1.0, lam=1.0)  # no critic, no discount: reward to go
    np.testing.assert_allclose(a1[2], [2, 2, 2, 0, 0])
    with pytest.raises(ValueError, match="gamma"):
        gae(rewards, values, mask, gamma=1.5)
