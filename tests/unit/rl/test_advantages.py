"""Advantage rules vs loop-based references written with Python's `statistics` module: group mean (Dr.GRPO),
mean/std (unbiased std, as torch.std in verl, or population std via std_ddof=0 as SUMER; also vs numpy's
std), singleton and constant groups, arbitrary group ids, token broadcast, per-trajectory row weights, the
RolloutBatch entry point and config validation."""

import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.advantages import (AdvantageConfig, broadcast_to_tokens, compute_advantages, grpo_advantages,
                                  trajectory_row_weight)
from memjax.rl.batch import Conversation, build_batch


def _ref_adv(reward, group, norm, eps=1e-6, ddof=1):
    out = []
    for s in range(len(reward)):
        members = [float(reward[j]) for j in range(len(reward)) if group[j] == group[s]]
        if len(members) == 1:
            out.append(0.0)
            continue
        a = float(reward[s]) - statistics.fmean(members)
        if norm == "mean_std":
            a = a / ((statistics.stdev if ddof == 1 else statistics.pstdev)(members) + eps)
        out.append(a)
    return np.array(out)


def _problem(seed, s=23):
    rng = np.random.default_rng(seed)
    group = rng.choice(np.array([907, -3, 12, 5, 40], np.int32), s)
    group[0] = 77  # a singleton group
    reward = rng.uniform(-1, 2, s).astype(np.float32)
    reward[group == 12] = 0.5  # a constant group
    return reward, group


@pytest.mark.parametrize("norm", ["mean", "mean_std"])
def test_grpo_advantages_match_reference(norm):
    reward, group = _problem(0)
    got = np.asarray(grpo_advantages(reward, group, norm=norm))
    np.testing.assert_allclose(got, _ref_adv(reward, group, norm), rtol=1e-5, atol=1e-6)
    assert got[0] == 0.0  # singleton
    assert np.all(got[group == 12] == 0.0)  # all-equal group
    assert got.dtype == np.float32


def test_mean_std_uses_unbiased_std_and_differs_from_mean():
    reward = np.array([0.0, 1.0, 1.0, 1.0], np.float32)  # mean .75, stdev (ddof=1) .5
    group = np.zeros(4, np.int32)
    np.testing.assert_allclose(grpo_advantages(reward, group, norm="mean"), [-0.75, 0.25, 0.25, 0.25], atol=1e-7)
    np.testing.assert_allclose(grpo_advantages(reward, group, norm="mean_std", eps=0.0 + 1e-9),
                               [-1.5, 0.5, 0.5, 0.5], rtol=1e-6)


@pytest.mark.parametrize("ddof", [0, 1])
def test_std_ddof_matches_numpy_formula(ddof):
    # independent formula: numpy's std with the same ddof, group by group (SUMER writes ddof 0, verl ddof 1)
    reward, group = _problem(3)
    eps = 1e-6
    expect = np.zeros(len(reward))
    for g in np.unique(group):
        m = group == g
        if m.sum() > 1:
            x = reward[m].astype(np.float64)
            expect[m] = (x - x.mean()) / (x.std(ddof=ddof) + eps)
    got = np.asarray(grpo_advantages(reward, group, norm="mean_std", eps=eps, ddof=ddof))
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _ref_adv(reward, group, "mean_std", eps, ddof), rtol=1e-5, atol=1e-6)
    b = _batch()
    adv, _ = compute_advantages(b, AdvantageConfig(norm="mean_std", std_ddof=ddof))
    a_s = _ref_adv(b.reward, b.sample_group, "mean_std", 1e-6, ddof)
    np.testing.assert_allclose(np.asarray(adv), np.where(b.loss_mask != 0, a_s[b.sample][:, None], 0.0),
                               rtol=1e-5, atol=1e-6)


def test_population_std_differs_from_unbiased():
    reward = np.array([0.0, 1.0, 1.0, 1.0], np.float32)  # mean .75, pstdev sqrt(3)/4, stdev .5
    group = np.zeros(4, np.int32)
    p = np.asarray(grpo_advantages(reward, group, norm="mean_std", eps=1e-9, ddof=0))
    np.testing.assert_allclose(p, np.array([-0.75, 0.25, 0.25, 0.25]) / (np.sqrt(3) / 4), rtol=1e-6)
    assert AdvantageConfig().std_ddof == 1  # existing recipes keep the unbiased std


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.5, 1.0, -1.0])), min_size=10, max_size=10))
def test_group_advantages_sum_to_zero_and_are_permutation_equivariant(pairs):
    # fixed S: eager executables are cached per shape
    group = np.array([p[0] for p in pairs], np.int32)
    reward = np.array([p[1] for p in pairs], np.float32)
    adv = np.asarray(grpo_advantages(reward, group, norm="mean"))
    for g in np.unique(group):
        assert abs(adv[group == g].sum()) < 1e-5
    perm = np.random.default_rng(len(pairs)).permutation(len(pairs))
    np.testing.assert_allclose(np.asarray(grpo_advantages(reward[perm], group[perm], norm="mean_std")),
                               np.asarray(grpo_advantages(reward, group, norm="mean_std"))[perm], atol=1e-6)


def test_broadcast_to_tokens():
    rng = np.random.default_rng(1)
    adv = rng.normal(size=4).astype(np.float32)
    sample = np.array([2, 0, 0, 3, 1, 2], np.int32)
    mask = (rng.uniform(size=(6, 7)) < 0.6).astype(np.float32)
    mask[4] = 0
    got = np.asarray(broadcast_to_tokens(adv, sample, mask))
    for i in range(6):
        for t in range(7):
            assert got[i, t] == (adv[sample[i]] if mask[i, t] else 0.0)


def test_trajectory_row_weight():
    sample = np.array([0, 0, 0, 1, 2, 2], np.int32)
    np.testing.assert_allclose(trajectory_row_weight(sample, 3), [1 / 3] * 3 + [1.0, 0.5, 0.5], rtol=1e-7)
    mask = np.ones((6, 4), np.float32)
    mask[1] = 0  # sample 0 has 2 live conversations; the empty one gets weight 0
    np.testing.assert_allclose(trajectory_row_weight(sample, 3, mask), [0.5, 0, 0.5, 1.0, 0.5, 0.5], rtol=1e-7)


def _batch():
    convs, rewards, groups = [], [0.0, 1.0, 1.0, 0.0], [0, 0, 1, 1]
    turns = [3, 1, 2, 1]
    for s, k in enumerate(turns):
        for turn in range(k):
            r = 1 + turn + s
            convs.append(Conversation(prompt_ids=[1, 2], response_ids=[3] * r, response_logprobs=[-0.5] * r,
                                      sample=s, group=groups[s], turn=turn, is_final=turn == k - 1))
    return build_batch(convs, rewards, groups)


def test_compute_advantages_on_rollout_batch():
    b = _batch()
    adv, w = compute_advantages(b, AdvantageConfig(norm="mean"))
    assert w is None
    a_s = _ref_adv(b.reward, b.sample_group, "mean")
    expect = np.where(b.loss_mask != 0, a_s[b.sample][:, None], 0.0)
    np.testing.assert_allclose(np.asarray(adv), expect, atol=1e-7)
    _, w = compute_advantages(b, AdvantageConfig(per_trajectory=True))
    counts = np.bincount(b.sample)
    np.testing.assert_allclose(np.asarray(w), 1.0 / counts[b.sample], rtol=1e-7)


@pytest.mark.parametrize("kwargs, match", [({"norm": "std"}, "norm must be one of"), ({"eps": 0.0}, "eps"),
                                           ({"per_trajectory": 1}, "per_trajectory"),
                                           ({"std_ddof": 2}, "std_ddof"), ({"std_ddof": True}, "std_ddof")])
def test_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdvantageConfig(**kwargs)


def test_input_validation():
    with pytest.raises(ValueError, match="sample_group has 2 entries, expected 3"):
        grpo_advantages(np.zeros(3, np.float32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="norm must be one of"):
        grpo_advantages(np.zeros(3, np.float32), np.zeros(3, np.int32), norm="std")
    with pytest.raises(ValueError, match="ddof must be 0"):
        grpo_advantages(np.zeros(3, np.float32), np.zeros(3, np.int32), ddof=2)
