"""memjax.rl.losses vs independent loop-based numpy formulas (float64): the dual-clip surrogate (verl's
branches), KL estimators k1/k2/k3, every aggregation mode with row weights and empty rows, metrics (clip
fractions, ratio stats, approx-KL, entropy), gradients by central finite differences of the numpy
reference, exact micro-batch accumulation (loss and gradient, 4 micro-batches, <= 1e-6 fp32), the Dr.GRPO
constant denominator, the clipped value loss, and error messages."""

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memjax.rl.losses import (AGG_MODES, agg_denominator, combine_parts, kl_penalty, policy_loss, policy_loss_parts,
                              value_loss)

CLIP = dict(clip_low=0.2, clip_high=0.28)


def run(fn, *args, grad=False, **kw):
    """fn(*args, **kw), or with grad=True ((loss, metrics), d loss / d args[0]). Eager on purpose: op-by-op
    executables are cached per shape across configs, so the many configs here cost less than one jit each."""
    if grad:
        return jax.value_and_grad(lambda x: fn(x, *args[1:], **kw), has_aux=True)(args[0])
    return fn(*args, **kw)


# ---- numpy reference ----

def np_token(lp, old, a, lo, hi, c, clamp=20.0):
    """One token: (loss, ratio, clipped, dual); verl's compute_policy_loss written out as branches."""
    lr = min(max(lp - old, -clamp), clamp)
    rho = math.exp(lr)
    unclipped, clipped = -a * rho, -a * min(max(rho, 1 - lo), 1 + hi)
    loss = max(unclipped, clipped)
    dual = c is not None and a < 0 and loss > -a * c
    return (-a * c if dual else loss), rho, clipped > unclipped, dual


def np_kl(lp, ref, est):
    if est == "k1":
        return lp - ref
    if est == "k2":
        return 0.5 * (lp - ref) ** 2
    x = min(max(ref - lp, -20.0), 20.0)
    return min(max(math.exp(x) - x - 1.0, -10.0), 10.0)


def np_agg(per_tok, mask, agg, w=None, scale=None):
    """(num, den) by loops over rows."""
    n_rows, t = len(per_tok), len(per_tok[0])
    scale = t if scale is None else scale
    num = den = 0.0
    for i in range(n_rows):
        wi = 1.0 if w is None else float(w[i])
        vals = [float(per_tok[i][j]) for j in range(t) if mask[i][j] != 0]
        if agg == "token-mean":
            num, den = num + wi * sum(vals), den + wi * len(vals)
        elif vals:
            row = sum(vals) / len(vals) if agg == "seq-mean-token-mean" else sum(vals)
            num += wi * row
            den += wi * (scale if agg == "seq-mean-token-sum-norm" else 1.0)
    return num, den


def np_policy(lp, old, adv, mask, agg, *, lo=0.2, hi=0.28, c=None, w=None, ref=None, kl_coef=0.0, est="k3",
              ent=None, ent_coef=0.0, scale=None):
    n, t = lp.shape
    tot = np.zeros((n, t))
    stats = []
    for i in range(n):
        for j in range(t):
            loss, rho, clipped, dual = np_token(float(lp[i, j]), float(old[i, j]), float(adv[i, j]), lo, hi, c)
            if ref is not None:
                loss += kl_coef * np_kl(float(lp[i, j]), float(ref[i, j]), est)
            if ent is not None:
                loss -= ent_coef * float(ent[i, j])
            tot[i, j] = loss
            if mask[i, j]:
                a = float(adv[i, j])
                stats.append((clipped, clipped and a > 0, clipped and a < 0, dual, rho,
                              float(old[i, j]) - float(lp[i, j])))
    num, den = np_agg(tot, mask, agg, w, scale)
    return (num / den if den > 0 else 0.0), np.array(stats, float).reshape(-1, 6)


def _problem(seed, n=8, t=12):
    """Log-ratios spread over every branch: inside the range, clipped high/low, dual (rho > 3 with A < 0),
    one beyond the clamp; row 2 fully masked, ragged rows."""
    rng = np.random.default_rng(seed)
    lp = rng.uniform(-3, -0.1, (n, t)).astype(np.float32)
    old = (lp - rng.choice([-1.5, -0.4, -0.05, 0.1, 0.3, 1.3], (n, t))).astype(np.float32)
    old[0, 1] = lp[0, 1] - 25.0  # clamped log-ratio
    adv = np.repeat(rng.normal(size=(n, 1)), t, 1).astype(np.float32)
    adv[1] = -abs(adv[1]) - 0.5
    mask = (rng.uniform(size=(n, t)) < 0.75).astype(np.float32)
    mask[2] = 0
    mask[0, 1] = 1
    ref = (lp + rng.normal(0, 0.5, (n, t))).astype(np.float32)
    ent = rng.uniform(0, 2, (n, t)).astype(np.float32)
    w = rng.uniform(0.2, 1.0, n).astype(np.float32)
    return lp, old, adv, mask, ref, ent, w


# ---- forward vs numpy ----

@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize("dual", [None, 3.0])
def test_policy_loss_matches_numpy(agg, dual):
    lp, old, adv, mask, ref, ent, w = _problem(0)
    loss, m = run(policy_loss, lp, old, adv, mask, **CLIP, dual_clip=dual, agg=agg)
    want, st_ = np_policy(lp, old, adv, mask, agg, c=dual)
    np.testing.assert_allclose(float(loss), want, rtol=2e-5, atol=1e-6)
    for k, col in (("clipfrac", 0), ("clipfrac_high", 1), ("clipfrac_low", 2), ("clipfrac_dual", 3),
                   ("ratio_mean", 4), ("approx_kl", 5)):
        np.testing.assert_allclose(float(m[k]), st_[:, col].mean(), rtol=2e-5, err_msg=k)
    np.testing.assert_allclose(float(m["ratio_max"]), st_[:, 4].max(), rtol=2e-5)
    np.testing.assert_allclose(float(m["ratio_min"]), st_[:, 4].min(), rtol=2e-5)
    assert float(m["num_tokens"]) == mask.sum() and float(m["num_rows"]) == (mask.sum(1) > 0).sum()
    assert float(m["clipfrac_high"]) > 0 and float(m["clipfrac_low"]) > 0
    assert (float(m["clipfrac_dual"]) > 0) == (dual is not None)


@pytest.mark.parametrize("agg", AGG_MODES)
@pytest.mark.parametrize("est", ["k1", "k2", "k3"])
def test_policy_loss_with_kl_entropy_and_row_weight(agg, est):
    lp, old, adv, mask, ref, ent, w = _problem(1)
    kw = dict(ref_logp=ref, kl_coef=0.3, kl_estimator=est, entropy=ent, entropy_coef=0.05)
    loss, m = run(policy_loss, lp, old, adv, mask, **CLIP, dual_clip=3.0, agg=agg, row_weight=w,
                  loss_scale_tokens=64, **kw)
    want, _ = np_policy(lp, old, adv, mask, agg, c=3.0, w=w, ref=ref, kl_coef=0.3, est=est, ent=ent, ent_coef=0.05,
                        scale=64)
    np.testing.assert_allclose(float(loss), want, rtol=2e-5, atol=1e-6)
    on = mask != 0
    kls = [np_kl(float(lp[i, j]), float(ref[i, j]), est) for i, j in zip(*np.nonzero(on))]
    np.testing.assert_allclose(float(m["kl_ref"]), np.mean(kls), rtol=2e-5)
    np.testing.assert_allclose(float(m["entropy"]), ent[on].mean(), rtol=2e-5)
    np.testing.assert_allclose(float(m["pg_loss"] + 0.3 * m["kl_loss"] - 0.05 * m["entropy_loss"]), want, rtol=2e-5)


def test_kl_estimators_including_clamps():
    lp = np.array([-1.0, -2.0, -0.5, -30.0, -1.0], np.float32)
    ref = np.array([-1.5, -1.0, -0.5, -5.0, -31.0], np.float32)  # ref - lp = 25 -> clamp; -30 -> clamp
    for est, alias in (("k1", "kl"), ("k2", "mse"), ("k3", "low_var_kl")):
        want = [np_kl(float(a), float(b), est) for a, b in zip(lp, ref)]
        np.testing.assert_allclose(np.asarray(kl_penalty(lp, ref, est)), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(kl_penalty(lp, ref, alias)), np.asarray(kl_penalty(lp, ref, est)))
    k3 = np.asarray(kl_penalty(lp, ref, "k3"))
    assert k3[3] == 10.0 and k3[4] == 10.0 and k3[2] == 0.0


def test_dual_clip_on_negative_advantage():
    # A = -1, rho = 5: PPO term max(-A rho, -A clip(rho)) = max(5, 1.28) = 5; dual clip c = 3 caps it at 3
    lp, old, adv, mask = (np.zeros((8, 12), np.float32) for _ in range(4))  # the shared shape: cached executables
    lp[0, :3] = np.log([5.0, 5.0, 0.5])
    adv[0, :3] = [-1.0, 1.0, -1.0]
    mask[0, :3] = 1
    kw = dict(**CLIP, agg="seq-mean-token-sum", grad=True)
    (l_dual, m), g_dual = run(policy_loss, lp, old, adv, mask, dual_clip=3.0, **kw)
    (l_plain, _), g_plain = run(policy_loss, lp, old, adv, mask, dual_clip=None, **kw)
    # per token, no dual: 5, -1.28 (clip high), 0.8 (clip low: -A*max(0.5, 0.8)); with dual: 3, -1.28, 0.8
    np.testing.assert_allclose(float(l_plain), 5 - 1.28 + 0.8, rtol=1e-6)
    np.testing.assert_allclose(float(l_dual), 3 - 1.28 + 0.8, rtol=1e-6)
    want = np.zeros_like(lp)
    want[0, 0] = 5.0  # d(-A rho)/dlogp = rho
    np.testing.assert_allclose(np.asarray(g_plain), want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(g_dual), 0.0)
    assert float(m["clipfrac_dual"]) == pytest.approx(1 / 3)


# ---- gradients vs finite differences of the numpy reference ----

@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_gradient_matches_finite_differences(agg):
    lp, old, adv, mask, ref, ent, w = _problem(2)
    kw = dict(c=3.0, w=w, ref=ref, kl_coef=0.2, est="k3", ent=ent, ent_coef=0.1)
    _, g = run(policy_loss, lp, old, adv, mask, **CLIP, dual_clip=3.0, agg=agg, row_weight=w, ref_logp=ref,
               kl_coef=0.2, entropy=ent, entropy_coef=0.1, grad=True)
    lp64, h = lp.astype(np.float64), 1e-5
    fd = np.zeros_like(lp64)
    for i in range(lp.shape[0]):
        for j in range(lp.shape[1]):
            up, dn = lp64.copy(), lp64.copy()
            up[i, j] += h
            dn[i, j] -= h
            f_up, f_dn = np_policy(up, old, adv, mask, agg, **kw)[0], np_policy(dn, old, adv, mask, agg, **kw)[0]
            fd[i, j] = (f_up - f_dn) / (2 * h)
    np.testing.assert_allclose(np.asarray(g), fd, atol=2e-5)
    assert np.all(np.asarray(g)[mask == 0] == 0.0) and np.any(np.asarray(g) != 0)


# ---- micro-batch accumulation ----

@pytest.mark.parametrize("agg", AGG_MODES)
def test_micro_batches_equal_full_batch(agg):
    """4 micro-batches of 2 rows (one padded to a shorter T): sum(num)/sum(den) == full loss, and the
    gradients (w.r.t. logp and entropy) of num_k / D_global, concatenated, == the full-batch gradient."""
    lp, old, adv, mask, ref, ent, w = _problem(3)
    mask[4:6, 8:] = 0  # rows 4-5 end by token 8 ...
    kw = dict(**CLIP, dual_clip=3.0, agg=agg, kl_coef=1e-3, kl_estimator="k3", entropy_coef=0.01,
              loss_scale_tokens=12)

    def parts(x, e, old, adv, mask, w, ref):
        return policy_loss_parts(x, old, adv, mask, row_weight=w, ref_logp=ref, entropy=e, **kw)[:2]

    full = (jax.value_and_grad(lambda x, e, *a: policy_loss(x, a[0], a[1], a[2], row_weight=a[3],
                                                                      ref_logp=a[4], entropy=e, **kw)[0],
                                      argnums=(0, 1)))
    micro = (jax.value_and_grad(lambda x, e, d, *a: (parts(x, e, *a)[0] / d, parts(x, e, *a)),
                                       argnums=(0, 1), has_aux=True))
    loss, (g_lp, g_ent) = full(lp, ent, old, adv, mask, w, ref)
    d_global = agg_denominator(mask, agg, row_weight=w, loss_scale_tokens=12)
    got, g_lp_mb, g_ent_mb = [], [], []
    for k in range(4):
        t = 8 if k == 2 else 12  # ... so that micro-batch is padded to a shorter T
        sl = lambda a: a[2 * k:2 * k + 2, :t]  # noqa: E731
        (_, num_den), (ga, gb) = micro(sl(lp), sl(ent), d_global, sl(old), sl(adv), sl(mask), w[2 * k:2 * k + 2],
                                       sl(ref))
        got.append(num_den)
        g_lp_mb.append(np.pad(np.asarray(ga), ((0, 0), (0, 12 - t))))
        g_ent_mb.append(np.pad(np.asarray(gb), ((0, 0), (0, 12 - t))))
    np.testing.assert_allclose(float(combine_parts(got)), float(loss), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(float(sum(p[1] for p in got)), float(d_global), rtol=1e-7)
    np.testing.assert_allclose(np.concatenate(g_lp_mb), np.asarray(g_lp), atol=1e-6)
    np.testing.assert_allclose(np.concatenate(g_ent_mb), np.asarray(g_ent), atol=1e-6)
    assert np.abs(np.asarray(g_lp)).max() > 1e-3 and np.abs(np.asarray(g_ent)).max() > 1e-5


def test_dr_grpo_constant_denominator_and_all_masked():
    lp, old, adv, mask, *_ = _problem(4)
    num, den, _ = run(policy_loss_parts, lp, old, adv, mask, **CLIP, agg="seq-mean-token-sum")
    loss, _ = run(policy_loss, lp, old, adv, mask, **CLIP, agg="seq-mean-token-sum", denominator=4096.0 * 8)
    np.testing.assert_allclose(float(loss), float(num) / (4096.0 * 8), rtol=1e-6)
    zero = np.zeros_like(mask)
    for agg in AGG_MODES:
        (l0, m0), g0 = run(policy_loss, lp, old, adv, zero, **CLIP, agg=agg, grad=True)
        assert float(l0) == 0.0 and np.all(np.asarray(g0) == 0.0)
        assert all(np.isfinite(float(v)) for v in m0.values()) and float(m0["ratio_max"]) == 0.0


@settings(max_examples=6, deadline=None)
@given(st.floats(0.1, 10.0), st.sampled_from(AGG_MODES), st.integers(0, 1000))
def test_row_weight_scale_invariance(c, agg, seed):
    lp, old, adv, mask, _, _, w = _problem(seed)
    a = run(policy_loss, lp, old, adv, mask, **CLIP, agg=agg, row_weight=w)[0]
    b = run(policy_loss, lp, old, adv, mask, **CLIP, agg=agg, row_weight=w * np.float32(c))[0]
    np.testing.assert_allclose(float(a), float(b), rtol=1e-5, atol=1e-7)


def test_jit_matches_eager():
    lp, old, adv, mask, ref, *_ = _problem(5)
    kw = dict(**CLIP, dual_clip=3.0, agg="seq-mean-token-mean", kl_coef=0.1)
    jitted = jax.jit(lambda *a: policy_loss(*a[:4], ref_logp=a[4], **kw)[0])(lp, old, adv, mask, ref)
    np.testing.assert_allclose(float(jitted), float(policy_loss(lp, old, adv, mask, ref_logp=ref, **kw)[0]),
                               rtol=1e-6)


# ---- value loss ----

@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_value_loss_matches_numpy(agg):
    rng = np.random.default_rng(6)
    v, old, ret = (rng.normal(size=(8, 12)).astype(np.float32) for _ in range(3))
    mask = (rng.uniform(size=(8, 12)) < 0.7).astype(np.float32)
    mask[3] = 0
    per, flags = np.zeros((8, 12)), []
    for i in range(8):
        for j in range(12):
            l1 = (float(v[i, j]) - float(ret[i, j])) ** 2
            vc = min(max(float(v[i, j]), float(old[i, j]) - 0.2), float(old[i, j]) + 0.2)
            l2 = (vc - float(ret[i, j])) ** 2
            per[i, j] = 0.5 * max(l1, l2)
            if mask[i, j]:
                flags.append(l2 > l1)
    num, den = np_agg(per, mask, agg)
    (loss, m), g = run(value_loss, v, old, ret, mask, clip_value=0.2, agg=agg, grad=True)
    np.testing.assert_allclose(float(loss), num / den, rtol=1e-5)
    np.testing.assert_allclose(float(m["vf_clipfrac"]), np.mean(flags), rtol=1e-6)
    assert 0 < np.mean(flags) < 1
    assert np.all(np.asarray(g)[mask == 0] == 0)


# ---- errors ----

def test_errors_name_the_field():
    lp, old, adv, mask, *_ = _problem(7)
    with pytest.raises(ValueError, match="agg must be one of"):
        policy_loss(lp, old, adv, mask, **CLIP, agg="token-sum")
    with pytest.raises(ValueError, match="row_weight has shape"):
        policy_loss(lp, old, adv, mask, **CLIP, row_weight=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="needs ref_logp"):
        policy_loss(lp, old, adv, mask, **CLIP, kl_coef=0.1)
    with pytest.raises(ValueError, match="kl_estimator must be one of"):
        policy_loss(lp, old, adv, mask, **CLIP, ref_logp=lp, kl_estimator="k4")
    with pytest.raises(ValueError, match="mask has shape"):
        policy_loss(lp, old, adv, mask[:, :3], **CLIP)
