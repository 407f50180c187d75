"""Policy / value losses with aggregation over (group, conversation, token), as (numerator, denominator).

Owns the public, aggregation-aware layer over `memjax.kernels.step_ratio_loss.token_clip_surrogate` (the
per-token dual-clip surrogate, reused here, not re-implemented): `policy_loss`, `step_policy_loss`, `value_loss`,
their `*_parts`, `agg_denominator` / `agg_parts` / `agg_loss` and `kl_penalty`.
Layout: per-token arrays are [..., T], the leading dims rows (conversations); `mask` is a validity mask (nonzero =
trained on) and `row_weight` f32 [...] weights whole rows (e.g. `memjax.rl.advantages.trajectory_row_weight`).
Invariants: denominators never depend on logp, so micro-batch losses divided by the full batch's `agg_denominator`
sum to the full-batch loss and gradient exactly; inputs are cast to float32 and only logp (and entropy, values)
carry gradients; metrics are float32 scalars without gradient; `offpolicy=None` or mode "off" runs the synchronous
loss bit for bit. Under jit, agg, clip_low, clip_high, dual_clip, kl_estimator and log_ratio_clamp are static;
coefficients, row_weight, loss_scale_tokens and denominator may be traced.
docs/trainer.md, "Losses", has the aggregation modes, the policy / step / value formulas with their verl and paper
sources, and the metrics; docs/async.md the off-policy correction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from memjax.kernels.step_ratio_loss import step_ratio_loss, token_clip_surrogate

from .offpolicy import OffPolicyConfig, importance_weights, loglinear_proximal

__all__ = ["AGG_MODES", "KL_ESTIMATORS", "kl_penalty", "agg_parts", "agg_denominator", "agg_loss",
           "policy_loss_parts", "policy_loss", "value_loss_parts", "value_loss", "combine_parts"]

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3", "kl", "mse", "low_var_kl")
_KL_ALIAS = {"kl": "k1", "mse": "k2", "low_var_kl": "k3"}
_F32 = jnp.float32


# ---- aggregation ----

def _check_agg(fn: str, mask, agg: str, row_weight, loss_scale_tokens):
    if agg not in AGG_MODES:
        raise ValueError(f"{fn}: agg must be one of {AGG_MODES}, got {agg!r}")
    if mask.ndim < 1:
        raise ValueError(f"{fn}: mask must be [..., T], got a scalar")
    if row_weight is not None and jnp.shape(row_weight) != mask.shape[:-1]:
        raise ValueError(f"{fn}: row_weight has shape {jnp.shape(row_weight)}, expected the row shape "
                         f"{mask.shape[:-1]} of mask {mask.shape}")
    if loss_scale_tokens is not None and isinstance(loss_scale_tokens, (int, float)) and not loss_scale_tokens > 0:
        raise ValueError(f"{fn}: loss_scale_tokens must be > 0, got {loss_scale_tokens}")


def _row_stats(mask, row_weight):
    valid = mask != 0
    n = jnp.sum(valid, axis=-1).astype(_F32)
    w = jnp.ones(n.shape, _F32) if row_weight is None else jnp.asarray(row_weight, _F32)
    return valid, n, w


def agg_denominator(mask, agg: str = "token-mean", *, row_weight=None, loss_scale_tokens=None) -> jax.Array:
    """The denominator of `agg` for these rows (float32 scalar); sum it over micro-batches for the global one."""
    mask = jnp.asarray(mask)
    _check_agg("agg_denominator", mask, agg, row_weight, loss_scale_tokens)
    _, n, w = _row_stats(mask, row_weight)
    if agg == "token-mean":
        return jnp.sum(w * n)
    den = jnp.sum(jnp.where(n > 0, w, 0.0))
    if agg == "seq-mean-token-sum-norm":
        scale = mask.shape[-1] if loss_scale_tokens is None else loss_scale_tokens
        den = den * jnp.asarray(scale, _F32)
    return den


def agg_parts(loss_mat, mask, agg: str = "token-mean", *, row_weight=None, loss_scale_tokens=None):
    """(numerator, denominator) float32 scalars of a per-token loss [..., T] under `agg`."""
    mask = jnp.asarray(mask)
    loss_mat = jnp.asarray(loss_mat)
    if loss_mat.shape != mask.shape:
        raise ValueError(f"agg_parts: loss_mat has shape {loss_mat.shape}, expected mask's {mask.shape}")
    _check_agg("agg_parts", mask, agg, row_weight, loss_scale_tokens)
    valid, n, w = _row_stats(mask, row_weight)
    row_sum = jnp.sum(jnp.where(valid, loss_mat.astype(_F32), 0.0), axis=-1)
    if agg == "seq-mean-token-mean":
        row_sum = row_sum / jnp.maximum(n, 1.0)
    num = jnp.sum(w * row_sum)
    return num, agg_denominator(mask, agg, row_weight=row_weight, loss_scale_tokens=loss_scale_tokens)


def _safe_div(num, den):
    return num / jnp.where(den > 0, den, 1.0)


def combine_parts(parts) -> jax.Array:
    """sum(num) / sum(den) over an iterable of (num, den[, ...]) from micro-batches (0 if sum(den) == 0)."""
    parts = list(parts)
    if not parts:
        raise ValueError("combine_parts: no parts")
    return _safe_div(sum(p[0] for p in parts), sum(p[1] for p in parts))


def agg_loss(loss_mat, mask, agg: str = "token-mean", *, row_weight=None, loss_scale_tokens=None,
             denominator=None) -> jax.Array:
    """num / den of `agg_parts` (den replaced by `denominator` when given: the global one)."""
    num, den = agg_parts(loss_mat, mask, agg, row_weight=row_weight, loss_scale_tokens=loss_scale_tokens)
    return _safe_div(num, den if denominator is None else jnp.asarray(denominator, _F32))


# ---- KL to the reference ----

def kl_penalty(logp, ref_logp, estimator: str = "k3") -> jax.Array:
    """Per-token KL estimate (float32, same shape); see the module docstring for the formulas."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"kl_penalty: estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
    est = _KL_ALIAS.get(estimator, estimator)
    logp, ref = jnp.asarray(logp, _F32), jnp.asarray(ref_logp, _F32)
    if logp.shape != ref.shape:
        raise ValueError(f"kl_penalty: ref_logp has shape {ref.shape}, expected logp's {logp.shape}")
    if est == "k1":
        return logp - ref
    if est == "k2":
        return 0.5 * jnp.square(logp - ref)
    x = jnp.clip(ref - logp, -20.0, 20.0)
    return jnp.clip(jnp.exp(x) - x - 1.0, -10.0, 10.0)


# ---- policy loss ----

def _is_zero(x) -> bool:
    return isinstance(x, (int, float)) and x == 0


def _masked_mean(x, valid, count):
    return jnp.sum(jnp.where(valid, x, 0.0)) / jnp.maximum(count, 1.0)


def policy_loss_parts(logp, old_logp, advantages, mask, *, clip_low: float, clip_high: float,
                      dual_clip: float | None = None, agg: str = "token-mean", row_weight=None,
                      loss_scale_tokens=None, ref_logp=None, kl_coef: float = 0.0, kl_estimator: str = "k3",
                      entropy=None, entropy_coef: float = 0.0, log_ratio_clamp: float = 20.0,
                      log_ratio_clamp_mode: str = "both", offpolicy: OffPolicyConfig | None = None,
                      behaviour_logp=None, versions=None, version=None, sequence_ids=None):
    """(numerator, denominator, metrics) of the policy loss; loss = numerator / denominator."""
    fn = "policy_loss"
    logp = jnp.asarray(logp)
    mask = jnp.asarray(mask)
    if logp.shape != mask.shape:
        raise ValueError(f"{fn}: mask has shape {mask.shape}, expected logp's shape {logp.shape}")
    _check_agg(fn, mask, agg, row_weight, loss_scale_tokens)
    if ref_logp is None and not _is_zero(kl_coef):
        raise ValueError(f"{fn}: kl_coef={kl_coef} needs ref_logp (the frozen reference's log-probs)")
    if entropy is None and not _is_zero(entropy_coef):
        raise ValueError(f"{fn}: entropy_coef={entropy_coef} needs the per-token entropy")
    if entropy is not None and jnp.shape(entropy) != logp.shape:
        raise ValueError(f"{fn}: entropy has shape {jnp.shape(entropy)}, expected logp's shape {logp.shape}")
    if kl_estimator not in KL_ESTIMATORS:
        raise ValueError(f"{fn}: kl_estimator must be one of {KL_ESTIMATORS}, got {kl_estimator!r}")

    off = offpolicy is not None and offpolicy.on
    if off:
        if behaviour_logp is None:
            raise ValueError(f"{fn}: offpolicy mode {offpolicy.mode!r} needs behaviour_logp (the engine's log-probs)")
        if offpolicy.proximal == "loglinear":
            if versions is None or version is None:
                raise ValueError(f"{fn}: offpolicy proximal='loglinear' needs versions and the trainer version")
            old_logp = loglinear_proximal(behaviour_logp, logp, versions, version)
    pg, ind, sm = token_clip_surrogate(logp, jnp.asarray(old_logp), jnp.asarray(advantages), mask,
                                       clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip,
                                       log_ratio_clamp=log_ratio_clamp, log_ratio_clamp_mode=log_ratio_clamp_mode)
    if off:
        w, is_metrics = importance_weights(old_logp, behaviour_logp, mask, offpolicy, sequence_ids=sequence_ids)
        pg = pg * w
    valid = mask != 0
    count = sm["num_tokens"]
    kw = dict(row_weight=row_weight, loss_scale_tokens=loss_scale_tokens)
    pg_num, den = agg_parts(pg, mask, agg, **kw)
    num = pg_num
    metrics = {"pg_loss": _safe_div(pg_num, den)}
    if ref_logp is not None:
        kl = jnp.where(valid, kl_penalty(logp, ref_logp, kl_estimator), 0.0)
        kl_num = agg_parts(kl, mask, agg, **kw)[0]
        num = num + kl_coef * kl_num
        metrics["kl_loss"] = _safe_div(kl_num, den)
        metrics["kl_ref"] = _masked_mean(kl, valid, count)
    if entropy is not None:
        ent = jnp.where(valid, jnp.asarray(entropy, _F32), 0.0)
        ent_num = agg_parts(ent, mask, agg, **kw)[0]
        num = num - entropy_coef * ent_num
        metrics["entropy_loss"] = _safe_div(ent_num, den)
        metrics["entropy"] = _masked_mean(ent, valid, count)

    ratio = ind["ratio"]
    some = count > 0
    metrics.update({k: sm[k] for k in ("clipfrac", "clipfrac_high", "clipfrac_low", "clipfrac_dual",
                                       "approx_kl", "ratio_mean", "num_tokens")})
    metrics["ratio_max"] = jnp.where(some, jnp.max(jnp.where(valid, ratio, -jnp.inf)), 0.0)
    metrics["ratio_min"] = jnp.where(some, jnp.min(jnp.where(valid, ratio, jnp.inf)), 0.0)
    metrics["num_rows"] = jnp.sum(jnp.any(valid, axis=-1)).astype(_F32)
    if off:
        metrics.update(is_metrics)
    return num, den, {k: lax.stop_gradient(jnp.asarray(v, _F32)) for k, v in metrics.items()}


def policy_loss(logp, old_logp, advantages, mask, *, clip_low: float, clip_high: float,
                dual_clip: float | None = None, agg: str = "token-mean", row_weight=None, loss_scale_tokens=None,
                denominator=None, ref_logp=None, kl_coef: float = 0.0, kl_estimator: str = "k3", entropy=None,
                entropy_coef: float = 0.0, log_ratio_clamp: float = 20.0, log_ratio_clamp_mode: str = "both",
                offpolicy: OffPolicyConfig | None = None, behaviour_logp=None, versions=None, version=None,
                sequence_ids=None):
    """Public contract: `(loss, metrics)`; loss = numerator / (denominator, or this call's own one).

    clip_low / clip_high: PPO clip range (DAPO clip-higher: 0.2 / 0.28, the caller's choice); dual_clip:
    c > 1 bounds the loss of negative-advantage tokens by -A c (None = off); the log-ratio is clamped to
    +-log_ratio_clamp before exp (log_ratio_clamp_mode="upper": from above only). Optional terms: KL to
    ref_logp (kl_coef, kl_estimator) and an entropy
    bonus (entropy per token, entropy_coef), aggregated like the surrogate. offpolicy / behaviour_logp / versions /
    version / sequence_ids: the off-policy correction (module docstring; default off)."""
    num, den, metrics = policy_loss_parts(
        logp, old_logp, advantages, mask, clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip, agg=agg,
        row_weight=row_weight, loss_scale_tokens=loss_scale_tokens, ref_logp=ref_logp, kl_coef=kl_coef,
        kl_estimator=kl_estimator, entropy=entropy, entropy_coef=entropy_coef, log_ratio_clamp=log_ratio_clamp,
        log_ratio_clamp_mode=log_ratio_clamp_mode, offpolicy=offpolicy, behaviour_logp=behaviour_logp,
        versions=versions, version=version, sequence_ids=sequence_ids)
    return _safe_div(num, den if denominator is None else jnp.asarray(denominator, _F32)), metrics


# ---- value loss (PPO critic) ----

def value_loss_parts(values, old_values, returns, mask, *, clip_value: float | None = None,
                     agg: str = "token-mean", row_weight=None, loss_scale_tokens=None):
    """(numerator, denominator, metrics) of verl's clipped value loss (clip_value None = unclipped)."""
    fn = "value_loss"
    v = jnp.asarray(values)
    mask = jnp.asarray(mask)
    for name, x in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        if jnp.shape(x) != v.shape:
            raise ValueError(f"{fn}: {name} has shape {jnp.shape(x)}, expected values' shape {v.shape}")
    if clip_value is not None and not clip_value > 0:
        raise ValueError(f"{fn}: clip_value must be > 0 (or None), got {clip_value}")
    _check_agg(fn, mask, agg, row_weight, loss_scale_tokens)
    v = v.astype(_F32)
    old, ret = jnp.asarray(old_values, _F32), jnp.asarray(returns, _F32)
    l1 = jnp.square(v - ret)
    if clip_value is None:
        l2 = l1
    else:
        l2 = jnp.square(jnp.clip(v, old - clip_value, old + clip_value) - ret)
    per_tok = 0.5 * jnp.maximum(l1, l2)
    valid = mask != 0
    num, den = agg_parts(per_tok, mask, agg, row_weight=row_weight, loss_scale_tokens=loss_scale_tokens)
    count = jnp.sum(valid).astype(_F32)
    metrics = {"vf_loss": _safe_div(num, den), "vf_clipfrac": _masked_mean((l2 > l1).astype(_F32), valid, count),
               "vpred_mean": _masked_mean(v, valid, count), "num_tokens": count}
    return num, den, {k: lax.stop_gradient(x) for k, x in metrics.items()}


def value_loss(values, old_values, returns, mask, *, clip_value: float | None = None, agg: str = "token-mean",
               row_weight=None, loss_scale_tokens=None, denominator=None):
    """(loss, metrics) of the clipped value loss; see `value_loss_parts`."""
    num, den, metrics = value_loss_parts(values, old_values, returns, mask, clip_value=clip_value, agg=agg,
                                         row_weight=row_weight, loss_scale_tokens=loss_scale_tokens)
    return _safe_div(num, den if denominator is None else jnp.asarray(denominator, _F32)), metrics


def step_policy_loss(logp, old_logp, advantages, mask, *, clip_low: float, clip_high: float,
                     dual_clip: float | None = None, log_ratio_clamp: float = 20.0, steps_denominator=None,
                     tokens_denominator=None, ref_logp=None, kl_coef: float = 0.0, kl_estimator: str = "k3",
                     entropy=None, entropy_coef: float = 0.0, log_ratio_clamp_mode: str = "both"):
    """Memory-R2's step-level loss over rows [R, T] (see the module docstring) -> (loss, metrics).
    Denominators default to this call's own step / token counts."""
    fn = "step_policy_loss"
    if logp.ndim != 2:
        raise ValueError(f"{fn}: expected [rows, T] arrays, got {logp.shape}")
    if ref_logp is None and not _is_zero(kl_coef):
        raise ValueError(f"{fn}: kl_coef={kl_coef} needs ref_logp (the frozen reference's log-probs)")
    if entropy is None and not _is_zero(entropy_coef):
        raise ValueError(f"{fn}: entropy_coef={entropy_coef} needs the per-token entropy")
    valid = mask != 0
    rows = logp.shape[0]
    seg = jnp.where(valid, jnp.arange(rows, dtype=jnp.int32)[:, None], -1)
    value, metrics = step_ratio_loss(logp, old_logp, advantages, mask, seg, num_segments=rows, clip_low=clip_low,
                                     clip_high=clip_high, dual_clip=dual_clip, log_ratio_clamp=log_ratio_clamp,
                                     log_ratio_clamp_mode=log_ratio_clamp_mode)
    steps = lax.stop_gradient(metrics["num_steps"])
    count = jnp.sum(valid).astype(_F32)
    sden = steps if steps_denominator is None else steps_denominator
    tden = count if tokens_denominator is None else tokens_denominator
    value = _safe_div(value * steps, sden)
    metrics = {**metrics, "pg_loss": value, "num_tokens": count}
    if ref_logp is not None:
        kl = jnp.where(valid, kl_penalty(logp, ref_logp, kl_estimator), 0.0)
        value = value + kl_coef * _safe_div(jnp.sum(kl), tden)
        metrics["kl_ref"] = _masked_mean(kl, valid, count)
    if entropy is not None:
        ent = jnp.where(valid, jnp.asarray(entropy, _F32), 0.0)
        value = value - entropy_coef * _safe_div(jnp.sum(ent), tden)
        metrics["entropy"] = _masked_mean(ent, valid, count)
    return value, metrics
