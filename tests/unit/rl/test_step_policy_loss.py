"""memjax.rl.losses.step_policy_loss: the step surrogate plus token-mean KL (k3) and entropy terms against a
numpy formula, and exactness across row micro-batches given the mini-batch's denominators."""

import jax
import jax.numpy as jnp
import numpy as np

from memjax.rl.losses import step_policy_loss


def np_loss(logp, old, adv, mask, ref, ent, kl_coef, ent_coef, clip=0.2, dual=3.0):
    steps = []
    for i in range(logp.shape[0]):
        v = mask[i] != 0
        if not v.any():
            continue
        rho = np.exp(min(np.mean(logp[i, v] - old[i, v]), 20.0))
        a = np.mean(adv[i, v])
        l = max(-a * rho, -a * np.clip(rho, 1 - clip, 1 + clip))
        if a < 0:
            l = min(l, -a * dual)
        steps.append(l)
    v = mask != 0
    x = np.clip(ref - logp, -20, 20)
    k3 = np.clip(np.exp(x) - x - 1, -10, 10)
    return np.mean(steps) + kl_coef * k3[v].sum() / v.sum() - ent_coef * ent[v].sum() / v.sum()


def test_against_numpy_and_across_micro_batches():
    rng = np.random.default_rng(0)
    r, t = 5, 7
    logp, old, ref = (rng.normal(-1.0, 0.3, (r, t)).astype(np.float32) for _ in range(3))
    ent = rng.uniform(0, 2, (r, t)).astype(np.float32)
    mask = (rng.random((r, t)) < 0.7).astype(np.float32)
    mask[2] = 0  # an empty step
    adv = np.repeat(rng.normal(0, 1, (r, 1)), t, 1).astype(np.float32) * mask
    kw = dict(clip_low=0.2, clip_high=0.2, dual_clip=3.0, kl_coef=0.001, entropy_coef=0.001)
    full, _ = step_policy_loss(*(jnp.asarray(a) for a in (logp, old, adv, mask)), ref_logp=jnp.asarray(ref),
                               entropy=jnp.asarray(ent), **kw)
    want = np_loss(logp, old, adv, mask, ref, ent, 0.001, 0.001)
    np.testing.assert_allclose(float(full), want, rtol=1e-5)
    # micro-batches of rows with the full mini-batch's denominators sum to the same loss and gradient
    sden, tden = jnp.float32(4), jnp.float32(mask.sum())

    def part(lp, rows):
        return step_policy_loss(lp, old[rows], adv[rows], mask[rows], ref_logp=ref[rows], entropy=ent[rows],
                                steps_denominator=sden, tokens_denominator=tden, **kw)[0]

    a, b = np.arange(0, 3), np.arange(3, 5)
    total = part(jnp.asarray(logp[a]), a) + part(jnp.asarray(logp[b]), b)
    np.testing.assert_allclose(float(total), float(full), rtol=1e-5)
    g_full = jax.grad(lambda lp: step_policy_loss(lp, old, adv, mask, ref_logp=ref, entropy=ent, **kw)[0])(
        jnp.asarray(logp))
    g_parts = np.concatenate([np.asarray(jax.grad(part)(jnp.asarray(logp[i]), i)) for i in (a, b)])
    np.testing.assert_allclose(g_parts, np.asarray(g_full), rtol=1e-5, atol=1e-7)


def test_log_ratio_clamp_mode_passes_through_and_is_validated():
    # rows with mean log-ratios -1, 0.3, 1: clamp 0.5 from above only (Memory-R2's official code) or both sides
    import pytest

    from memjax.rl.trainer import LossConfig

    old = np.zeros((3, 4), np.float32)
    logp = np.array([[-1.0] * 4, [0.3] * 4, [1.0] * 4], np.float32)
    adv = np.array([[1.0] * 4, [-0.5] * 4, [2.0] * 4], np.float32)
    mask = np.ones((3, 4), np.float32)
    for mode, lo in (("upper", -np.inf), ("both", -0.5)):
        rho = np.exp(np.clip([-1.0, 0.3, 1.0], lo, 0.5))
        a = np.array([1.0, -0.5, 2.0])
        want = np.mean(np.maximum(-a * rho, -a * np.clip(rho, 0.8, 1.2)))
        got, _ = step_policy_loss(*(jnp.asarray(x) for x in (logp, old, adv, mask)), clip_low=0.2, clip_high=0.2,
                                  log_ratio_clamp=0.5, log_ratio_clamp_mode=mode)
        np.testing.assert_allclose(float(got), want, rtol=1e-6)
    assert LossConfig().log_ratio_clamp_mode == "both"
    with pytest.raises(ValueError, match="log_ratio_clamp_mode"):
        LossConfig(log_ratio_clamp_mode="lower")
