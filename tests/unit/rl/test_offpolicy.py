"""memjax.rl.offpolicy and policy_loss(offpolicy=...) vs independent loop-based numpy formulas (float64): decoupled
PPO (clip on pi/pi_prox, weight pi_prox/pi_behave), token- and sequence-level TIS / MIS, AReaL's log-linear
proximal, the staleness metrics; the default (off) equals the synchronous loss bit for bit; hypothesis
properties of the weights."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.losses import AGG_MODES, policy_loss
from memjax.rl.offpolicy import OffPolicyConfig, importance_weights, loglinear_proximal, staleness_metrics

CLIP = dict(clip_low=0.2, clip_high=0.28)


def np_pg(lp, prox, a, lo=0.2, hi=0.28, c=None):
    rho = math.exp(min(max(lp - prox, -20.0), 20.0))
    loss = max(-a * rho, -a * min(max(rho, 1 - lo), 1 + hi))
    return -a * c if (c is not None and a < 0 and loss > -a * c) else loss


def np_weights(prox, beh, mask, *, level="token", seq=None, truncate=None, low=None, high=None):
    n, t = mask.shape
    seq = np.arange(n) if seq is None else np.asarray(seq)
    w = np.zeros((n, t))
    for i in range(n):
        for j in range(t):
            if not mask[i, j]:
                continue
            if level == "token":
                lw = float(prox[i, j]) - float(beh[i, j])
            else:
                lw = sum(float(prox[k, m]) - float(beh[k, m]) for k in range(n) if seq[k] == seq[i]
                         for m in range(t) if mask[k, m])
            raw = math.exp(min(max(lw, -20.0), 20.0))
            x = raw if truncate is None else min(raw, truncate)
            if (low is not None and raw < low) or (high is not None and raw > high):
                x = 0.0
            w[i, j] = x
    return w


def np_loss(lp, prox, adv, mask, w, agg, c=None):
    n, t = mask.shape
    num = den = 0.0
    for i in range(n):
        vals = [w[i, j] * np_pg(float(lp[i, j]), float(prox[i, j]), float(adv[i, j]), c=c) for j in range(t)
                if mask[i, j]]
        if agg == "token-mean":
            num, den = num + sum(vals), den + len(vals)
        elif vals:
            num += sum(vals) / len(vals) if agg == "seq-mean-token-mean" else sum(vals)
            den += t if agg == "seq-mean-token-sum-norm" else 1.0
    return num / den if den else 0.0


def _problem(seed, n=6, t=10):
    rng = np.random.default_rng(seed)
    lp = rng.uniform(-3, -0.1, (n, t)).astype(np.float32)
    prox = (lp - rng.choice([-0.4, -0.05, 0.1, 0.3], (n, t))).astype(np.float32)
    beh = (prox - rng.normal(0, 0.3, (n, t))).astype(np.float32)
    adv = np.repeat(rng.normal(size=(n, 1)), t, 1).astype(np.float32)
    mask = (rng.uniform(size=(n, t)) < 0.8).astype(np.float32)
    mask[2] = 0
    return lp, prox, beh, adv, mask


def test_default_is_todays_loss_bit_for_bit():
    lp, prox, beh, adv, mask = _problem(0)
    for agg in AGG_MODES:
        base, bm = policy_loss(lp, prox, adv, mask, agg=agg, dual_clip=3.0, **CLIP)
        off, om = policy_loss(lp, prox, adv, mask, agg=agg, dual_clip=3.0, offpolicy=OffPolicyConfig(),
                              behaviour_logp=beh, versions=np.zeros(mask.shape, np.int32), version=0, **CLIP)
        assert np.asarray(base).tobytes() == np.asarray(off).tobytes() and set(bm) == set(om)
        g0 = jax.grad(lambda x: policy_loss(x, prox, adv, mask, agg=agg, **CLIP)[0])(lp)
        g1 = jax.grad(lambda x: policy_loss(x, prox, adv, mask, agg=agg, offpolicy=OffPolicyConfig(),
                                            behaviour_logp=beh, **CLIP)[0])(lp)
        assert np.asarray(g0).tobytes() == np.asarray(g1).tobytes()


def test_decoupled_on_policy_equals_sync_exactly():
    """behaviour == proximal (a synchronous batch): every weight is exp(0) = 1, so the loss is today's."""
    lp, prox, _, adv, mask = _problem(1)
    base, _ = policy_loss(lp, prox, adv, mask, **CLIP)
    dec, m = policy_loss(lp, prox, adv, mask, offpolicy=OffPolicyConfig(mode="decoupled", truncate=2.0),
                         behaviour_logp=prox, **CLIP)
    assert np.asarray(base).tobytes() == np.asarray(dec).tobytes()
    assert float(m["is_weight_mean"]) == 1.0 and float(m["logp_gap_max"]) == 0.0


@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize("corr", [dict(), dict(truncate=1.1), dict(mask_low=0.8, mask_high=1.25),
                                  dict(level="sequence", truncate=2.0), dict(level="sequence", mask_low=0.3,
                                                                             mask_high=3.0)])
def test_decoupled_matches_numpy(agg, corr):
    lp, prox, beh, adv, mask = _problem(2)
    cfg = OffPolicyConfig(mode="decoupled", **corr)
    loss, m = policy_loss(lp, prox, adv, mask, agg=agg, dual_clip=3.0, offpolicy=cfg, behaviour_logp=beh, **CLIP)
    w = np_weights(prox, beh, mask, level=cfg.level, truncate=cfg.truncate, low=cfg.mask_low, high=cfg.mask_high)
    want = np_loss(lp, prox, adv, mask, w, agg, c=3.0)
    np.testing.assert_allclose(float(loss), want, rtol=2e-5, atol=1e-6)
    raw = np_weights(prox, beh, mask, level=cfg.level)
    v = mask > 0
    np.testing.assert_allclose(float(m["is_weight_mean"]), raw[v].mean(), rtol=2e-5)
    np.testing.assert_allclose(float(m["is_weight_max"]), raw[v].max(), rtol=2e-5)
    trunc = (raw[v] > cfg.truncate).mean() if cfg.truncate else 0.0
    masked = ((raw[v] < (cfg.mask_low or 0)) | (raw[v] > (cfg.mask_high or np.inf))).mean()
    np.testing.assert_allclose(float(m["is_truncated_frac"]), trunc, atol=1e-7)
    np.testing.assert_allclose(float(m["is_masked_frac"]), masked, atol=1e-7)
    gap = np.abs(prox.astype(np.float64) - beh)[v]
    np.testing.assert_allclose([float(m["logp_gap_mean"]), float(m["logp_gap_max"])], [gap.mean(), gap.max()],
                               rtol=2e-5)


def test_sequence_ids_group_rows_into_trajectories():
    lp, prox, beh, adv, mask = _problem(3)
    seq = np.array([0, 0, 1, 2, 2, 2])
    cfg = OffPolicyConfig(mode="decoupled", level="sequence", truncate=1.5)
    loss, _ = policy_loss(lp, prox, adv, mask, offpolicy=cfg, behaviour_logp=beh, sequence_ids=seq, **CLIP)
    w = np_weights(prox, beh, mask, level="sequence", seq=seq, truncate=1.5)
    assert np.allclose(w[0][mask[0] > 0], w[1][mask[1] > 0].max())  # rows of one trajectory share its weight
    np.testing.assert_allclose(float(loss), np_loss(lp, prox, adv, mask, w, "token-mean"), rtol=2e-5, atol=1e-6)


def test_weights_carry_no_gradient():
    lp, prox, beh, adv, mask = _problem(4)
    cfg = OffPolicyConfig(mode="decoupled", truncate=1.2)
    w = np_weights(prox, beh, mask, truncate=1.2)
    g = jax.grad(lambda x: policy_loss(x, prox, adv, mask, offpolicy=cfg, behaviour_logp=beh, **CLIP)[0])(lp)
    # the same loss with the weights folded into the advantages of a plain PPO loss (w > 0 keeps the branch of
    # max(-A rho, -A clip(rho)) because both are scaled alike; w = 0 tokens give 0 either way)
    g_ref = jax.grad(lambda x: policy_loss(x, prox, adv * w.astype(np.float32), mask, **CLIP)[0])(lp)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-5, atol=1e-8)


def np_loglinear(beh, lp, versions, t):
    out = np.array(beh, np.float64)
    for idx, v in np.ndenumerate(versions):
        if v >= 0 and t + 1 - v > 0:
            a = min(max((t - v) / (t + 1 - v), 0.0), 1.0)
            out[idx] = beh[idx] + a * (lp[idx] - beh[idx])
    return out


def test_loglinear_proximal_matches_areal_formula():
    lp, _, beh, adv, mask = _problem(5)
    versions = np.random.default_rng(5).integers(-1, 8, mask.shape).astype(np.int32)
    got = np.asarray(loglinear_proximal(beh, lp, versions, 7))
    np.testing.assert_allclose(got, np_loglinear(beh, lp, versions, 7), rtol=1e-6, atol=1e-6)
    on = versions == 7
    np.testing.assert_array_equal(got[on], beh[on])  # tokens of the trainer's version: alpha 0, prox = behave
    half = versions == 6
    np.testing.assert_allclose(got[half], 0.5 * (beh[half] + lp[half]), rtol=1e-6)
    # in the loss: equal to the recompute mode given the approximated proximal, gradient included
    cfg = OffPolicyConfig(mode="decoupled", proximal="loglinear", truncate=2.0)
    f = lambda x: policy_loss(x, jnp.zeros_like(x), adv, mask, offpolicy=cfg, behaviour_logp=beh, versions=versions,
                              version=7, **CLIP)[0]
    prox = got.astype(np.float32)
    h = lambda x: policy_loss(x, prox, adv, mask, offpolicy=OffPolicyConfig(mode="decoupled", truncate=2.0),
                              behaviour_logp=beh, **CLIP)[0]
    np.testing.assert_allclose(float(f(lp)), float(h(lp)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.grad(f)(lp)), np.asarray(jax.grad(h)(lp)), rtol=1e-5, atol=1e-8)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["token", "sequence"]), st.floats(1.01, 5.0),
       st.floats(0.05, 0.99), st.floats(1.01, 20.0))
def test_weight_properties(seed, level, cap, low, high):
    lp, prox, beh, adv, mask = _problem(seed)
    v = mask > 0
    w_t, _ = importance_weights(prox, beh, mask, OffPolicyConfig(mode="decoupled", level=level, truncate=cap))
    w_t = np.asarray(w_t)
    assert (w_t >= 0).all() and (w_t <= np.float32(cap)).all() and (w_t[~v] == 0).all()
    w_m, m = importance_weights(prox, beh, mask, OffPolicyConfig(mode="decoupled", level=level, mask_low=low,
                                                                  mask_high=high))
    w_m = np.asarray(w_m)[v]
    assert ((w_m == 0) | ((w_m >= np.float32(low)) & (w_m <= np.float32(high)))).all()
    np.testing.assert_allclose(float(m["is_masked_frac"]), (w_m == 0).mean(), atol=1e-6)
    w_r, _ = importance_weights(prox, beh, mask, OffPolicyConfig(mode="decoupled", level=level))
    np.testing.assert_allclose(np.asarray(w_r), np_weights(prox, beh, mask, level=level), rtol=3e-5)
    if level == "sequence":  # one weight per row
        for i in range(mask.shape[0]):
            assert len(set(np.asarray(w_r)[i][v[i]].tolist())) <= 1


def test_staleness_metrics_by_hand():
    versions = np.array([[-1, 5, 5, 4], [-1, 3, 5, -1], [-1, 5, 5, 5]], np.int32)
    mask = (versions >= 0).astype(np.float32)
    m = staleness_metrics(versions, mask, np.array([0, 0, 1]), 5, max_bin=2)
    # tokens: staleness 0,0,1 | 2,0 | 0,0,0 -> 8 tokens: six 0, one 1, one 2
    assert m["staleness_tokens_0"] == 6 / 8 and m["staleness_tokens_1"] == 1 / 8 and m["staleness_tokens_2"] == 1 / 8
    assert m["staleness_token_mean"] == 3 / 8 and m["staleness_token_max"] == 2
    # trajectory 0 (rows 0, 1): worst 2, versions {3, 4, 5}; trajectory 1: worst 0, versions {5}
    assert m["staleness_worst_2"] == 0.5 and m["staleness_worst_0"] == 0.5
    assert m["versions_spanned_mean"] == 2.0 and m["versions_spanned_max"] == 3.0
    with pytest.raises(ValueError, match="version 5 > the trainer's 4"):
        staleness_metrics(versions, mask, np.array([0, 0, 1]), 4)


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="OffPolicyConfig.mode must be one of"):
        OffPolicyConfig(mode="is")
    with pytest.raises(ValueError, match="need mode='decoupled'"):
        OffPolicyConfig(truncate=2.0)
    with pytest.raises(ValueError, match="mask_low .* must be < mask_high"):
        OffPolicyConfig(mode="decoupled", mask_low=2.0, mask_high=1.0)
    with pytest.raises(ValueError, match="OffPolicyConfig.truncate must be a finite number > 0"):
        OffPolicyConfig(mode="decoupled", truncate=float("inf"))
    lp, prox, beh, adv, mask = _problem(6)
    with pytest.raises(ValueError, match="needs behaviour_logp"):
        policy_loss(lp, prox, adv, mask, offpolicy=OffPolicyConfig(mode="decoupled"), **CLIP)
    with pytest.raises(ValueError, match="needs versions and the trainer version"):
        policy_loss(lp, prox, adv, mask, offpolicy=OffPolicyConfig(mode="decoupled", proximal="loglinear"),
                    behaviour_logp=beh, **CLIP)
