"""Off-policy correction for rollouts that ran ahead of the update: importance weights, the proximal policy and
the staleness metrics.

Owns `OffPolicyConfig` (the named options; the default is off, and `memjax.rl.losses.policy_loss` then runs the
synchronous loss unchanged), `loglinear_proximal` (AReaL's log-linear approximation of the proximal policy),
`importance_weights` (decoupled PPO's w = stop_gradient(pi_prox / pi_behave), token- or sequence-level, truncated
(TIS) or masked (MIS)) and the host-side `staleness_metrics`.
Three policies: pi_behave sampled the tokens (RolloutBatch.behaviour_logp, possibly of several versions),
pi_prox is the trust-region anchor (the weights at the start of this update: the trainer's old_logp), pi_theta is
being optimised; the PPO clip acts on pi_theta / pi_prox and w multiplies the policy-gradient term.
Invariants: every array is float32 [..., T] with the mask's shape; versions int [..., T] (-1 = not generated);
weights never carry gradient; masked tokens keep their place in the loss denominator, so micro-batch sums stay
exact; metrics are float32 scalars over valid tokens (0 when none).
docs/async.md, "Off-policy correction", has the formulas and the version arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["OffPolicyConfig", "MODES", "LEVELS", "PROXIMALS", "loglinear_proximal", "importance_weights",
           "staleness_metrics"]

MODES = ("off", "decoupled")
LEVELS = ("token", "sequence")
PROXIMALS = ("recompute", "loglinear")
_F32 = jnp.float32


@dataclass(frozen=True)
class OffPolicyConfig:
    mode: str = "off"  # "off": the synchronous PPO loss on old_logp; "decoupled": w * pg(pi_theta / pi_prox)
    level: str = "token"  # importance weight per token or per sequence (row, or rows sharing sequence_ids)
    truncate: float | None = None  # TIS: w <- min(w, truncate)
    mask_low: float | None = None  # MIS: weights below are dropped (w = 0)
    mask_high: float | None = None  # MIS: weights above are dropped
    proximal: str = "recompute"  # "recompute": old_logp is pi_prox; "loglinear": AReaL's approximation
    log_clamp: float = 20.0  # log-weights are clipped to +-log_clamp before exp

    def __post_init__(self):
        for name, allowed in (("mode", MODES), ("level", LEVELS), ("proximal", PROXIMALS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"OffPolicyConfig.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("truncate", "mask_low", "mask_high", "log_clamp"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"OffPolicyConfig.{name} must be a finite number > 0 (or None), got {v!r}")
        if self.mask_low is not None and self.mask_high is not None and self.mask_low >= self.mask_high:
            raise ValueError(f"OffPolicyConfig: mask_low ({self.mask_low}) must be < mask_high ({self.mask_high})")
        if self.mode == "off" and (self.truncate is not None or self.mask_low is not None
                                   or self.mask_high is not None or self.proximal != "recompute"
                                   or self.level != "token"):
            raise ValueError("OffPolicyConfig: truncate / mask_low / mask_high / proximal / level need "
                             "mode='decoupled'")

    @property
    def on(self) -> bool:
        return self.mode != "off"


def loglinear_proximal(behaviour_logp, logp, versions, version):
    """AReaL's log-linear log pi_prox (see the module docstring); logp enters without gradient."""
    b = jnp.asarray(behaviour_logp, _F32)
    cur = jax.lax.stop_gradient(jnp.asarray(logp, _F32))
    v = jnp.asarray(versions).astype(_F32)
    t = jnp.asarray(version, _F32)
    gen = jnp.asarray(versions) >= 0
    span = t + 1.0 - v
    alpha = jnp.where(gen & (span > 0), (t - v) / jnp.where(span > 0, span, 1.0), 0.0)
    alpha = jnp.clip(alpha, 0.0, 1.0)
    return b + alpha * (cur - b)


def _segment_ids(mask, sequence_ids):
    rows = mask.shape[:-1]
    if sequence_ids is None:
        return jnp.arange(math.prod(rows), dtype=jnp.int32).reshape(rows), math.prod(rows)
    ids = jnp.asarray(sequence_ids, jnp.int32)
    if ids.shape != rows:
        raise ValueError(f"importance_weights: sequence_ids has shape {ids.shape}, expected the row shape {rows}")
    return ids, math.prod(rows)  # ids must lie in [0, rows): e.g. a batch's sample index of each row


def importance_weights(prox_logp, behaviour_logp, mask, cfg: OffPolicyConfig, *, sequence_ids=None):
    """(w f32 [..., T] without gradient, metrics): pi_prox / pi_behave corrected by cfg (see the module
    docstring). Metrics: is_weight_mean / is_weight_max (the raw weight, before truncation or masking),
    is_truncated_frac, is_masked_frac (fractions of valid tokens), logp_gap_mean / logp_gap_max (|prox - behave|:
    the engine-vs-trainer log-prob gap when prox is the trainer's recompute)."""
    mask = jnp.asarray(mask)
    valid = mask != 0
    prox = jax.lax.stop_gradient(jnp.asarray(prox_logp, _F32))
    beh = jnp.asarray(behaviour_logp, _F32)
    if prox.shape != mask.shape or beh.shape != mask.shape:
        raise ValueError(f"importance_weights: prox_logp {prox.shape} and behaviour_logp {beh.shape} must have the "
                         f"mask's shape {mask.shape}")
    diff = jnp.where(valid, prox - beh, 0.0)
    if cfg.level == "token":
        logw = diff
    else:
        ids, n = _segment_ids(mask, sequence_ids)
        seq = jax.ops.segment_sum(jnp.sum(diff, -1).reshape(-1), ids.reshape(-1), num_segments=n)
        logw = jnp.broadcast_to(seq[ids][..., None], mask.shape)
    raw = jnp.exp(jnp.clip(logw, -cfg.log_clamp, cfg.log_clamp))
    w = raw
    truncated = jnp.zeros(mask.shape, bool)
    if cfg.truncate is not None:
        truncated = raw > cfg.truncate
        w = jnp.minimum(w, cfg.truncate)
    dropped = jnp.zeros(mask.shape, bool)
    if cfg.mask_low is not None:
        dropped = dropped | (raw < cfg.mask_low)
    if cfg.mask_high is not None:
        dropped = dropped | (raw > cfg.mask_high)
    w = jnp.where(valid & ~dropped, w, 0.0)
    count = jnp.sum(valid).astype(_F32)
    some = count > 0
    mean = lambda x: jnp.sum(jnp.where(valid, x, 0.0)) / jnp.maximum(count, 1.0)
    gap = jnp.abs(diff)
    metrics = {"is_weight_mean": mean(raw),
               "is_weight_max": jnp.where(some, jnp.max(jnp.where(valid, raw, -jnp.inf)), 0.0),
               "is_truncated_frac": mean((truncated & valid).astype(_F32)),
               "is_masked_frac": mean((dropped & valid).astype(_F32)),
               "logp_gap_mean": mean(gap), "logp_gap_max": jnp.where(some, jnp.max(jnp.where(valid, gap, 0.0)), 0.0)}
    return jax.lax.stop_gradient(w), {k: jax.lax.stop_gradient(jnp.asarray(v, _F32)) for k, v in metrics.items()}


def staleness_metrics(versions, mask, sample, version: int, *, max_bin: int = 8) -> dict[str, float]:
    """Host-side staleness of a batch trained at trainer version `version` (numpy; versions int [N, T] with -1
    off generated tokens, mask [N, T], sample int [N]: each row's trajectory). Staleness of a token = version - v.
    Returns staleness_token_mean / _max, staleness_tokens_<k> (fraction of trained tokens with staleness k,
    k = 0..max_bin; the last bin holds >= max_bin), staleness_worst_<k> (fraction of trajectories whose WORST
    token has staleness k, same bins), versions_spanned_mean / _max (distinct versions per trajectory)."""
    v = np.asarray(versions)
    valid = (np.asarray(mask) != 0) & (v >= 0)
    sample = np.asarray(sample)
    out: dict[str, float] = {}
    st = (int(version) - v)[valid]
    if st.size and st.min() < 0:
        raise ValueError(f"staleness_metrics: a token has version {int(v[valid].max())} > the trainer's {version}")
    bins = np.minimum(st, max_bin)
    hist = np.bincount(bins, minlength=max_bin + 1) / max(st.size, 1)
    out["staleness_token_mean"] = float(st.mean()) if st.size else 0.0
    out["staleness_token_max"] = float(st.max()) if st.size else 0.0
    for k in range(max_bin + 1):
        out[f"staleness_tokens_{k}"] = float(hist[k])
    rows_s = np.broadcast_to(sample[:, None], v.shape)[valid]
    worst, spans = [], []
    for s in np.unique(rows_s):
        vs = v[valid][rows_s == s]
        worst.append(int(version) - int(vs.min()))
        spans.append(len(np.unique(vs)))
    whist = np.bincount(np.minimum(worst, max_bin), minlength=max_bin + 1) / max(len(worst), 1) if worst else \
        np.zeros(max_bin + 1)
    for k in range(max_bin + 1):
        out[f"staleness_worst_{k}"] = float(whist[k])
    out["versions_spanned_mean"] = float(np.mean(spans)) if spans else 0.0
    out["versions_spanned_max"] = float(np.max(spans)) if spans else 0.0
    return out
