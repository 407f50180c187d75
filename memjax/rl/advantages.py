"""Advantage rules over the (group, conversation, token) layout of a RolloutBatch.

Owns
* `grpo_advantages(reward [S], sample_group [S], *, norm, eps) -> adv f32 [S]`: group-relative outcome
  advantages, one per sample (trajectory). With g(s) the group of sample s and R_g its rewards:
    norm="mean"     (Dr.GRPO, MemAgent's choice):  A_s = r_s - mean(R_g)
    norm="mean_std" (GRPO, verl's default):        A_s = (r_s - mean(R_g)) / (std(R_g) + eps)
  std has `ddof` 1 (unbiased sample std, torch.std in verl's compute_grpo_outcome_advantage; the default)
  or 0 (population std, sqrt(mean((r - mean)^2)); SUMER's official code), chosen by
  AdvantageConfig.std_ddof.
  Groups of size 1 get A_s = 0 (no baseline exists; verl instead uses mean 0 / std 1, i.e. A_s = r_s).
  A group whose rewards are all equal gets A = 0 in both modes. Group ids are arbitrary ints (need not be
  contiguous); grouping uses an [S, S] id comparison (jit-friendly, fine for S up to ~10^4).
* `broadcast_to_tokens(adv_sample [S], sample [N], loss_mask [N, T]) -> f32 [N, T]`: MemAgent's Multi-Conv
  rule: every conversation (row) of sample s gets A_s on each of its valid tokens, 0 elsewhere.
* `trajectory_row_weight(sample [N], num_samples, loss_mask=None) -> f32 [N]`: per-trajectory
  normalisation, w_i = 1 / K_s with K_s the number of conversations of row i's sample (counting only rows
  with >= 1 valid token when loss_mask is given; rows without valid tokens get w = 0). Pass it as
  `row_weight` to `memjax.rl.losses`, where it multiplies each row's numerator and its denominator
  contribution (n_i = valid tokens of row i, l_i,t = per-token loss, v_i = [n_i > 0], L = loss_scale_tokens):
    token-mean               sum_i w_i sum_t l_i,t / sum_i w_i n_i   (each sample counts as the average
                             of its conversations: 10 chunks weigh as much as 1 of the same length)
    seq-mean-token-mean      sum_i w_i (sum_t l_i,t / n_i) / sum_i w_i v_i   (mean over samples of the
                             mean over their conversations of the token-mean)
    seq-mean-token-sum       sum_i w_i sum_t l_i,t / sum_i w_i v_i
    seq-mean-token-sum-norm  sum_i w_i sum_t l_i,t / (L sum_i w_i v_i)
  Weights are computed on the full batch, then sliced with the rows when splitting into micro-batches.
* `AdvantageConfig` (frozen, validated) and `compute_advantages(batch, cfg) -> (adv [N, T], row_weight)`;
  `with_advantages(batch, cfg) -> batch` stores them in the batch's `advantages` / `row_weight` fields,
  which is what the trainer consumes (it never chooses an estimator itself).

Invariants: outputs are float32 jax arrays; ids are integer arrays; inputs may be numpy or jax. Nothing here
is differentiated (advantages are constants of the loss).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp

__all__ = ["ADV_NORMS", "ESTIMATORS", "AdvantageConfig", "grpo_advantages", "broadcast_to_tokens", "trajectory_row_weight",
           "compute_advantages", "with_advantages"]

ADV_NORMS = ("mean", "mean_std")
ESTIMATORS = ("grpo", "gae")
_F32 = jnp.float32


@dataclass(frozen=True)
class AdvantageConfig:
    """norm: "mean" (Dr.GRPO: subtract the group mean; the MemAgent paper) or "mean_std" (also divide by the
    group std + eps). per_trajectory: also return row weights 1/#conversations of the sample (see module
    docstring for how they enter each aggregation); False = every conversation counts fully (MemAgent)."""

    norm: str = "mean"
    eps: float = 1e-6
    per_trajectory: bool = False
    estimator: str = "grpo"  # "grpo": the group rule above; "gae": PPO with a critic (memjax/rl/credit.py)
    gamma: float = 1.0  # GAE discount (estimator="gae")
    lam: float = 1.0  # GAE lambda (estimator="gae")
    whiten: bool = True  # GAE: standardise advantages over the batch's trained tokens (PPO's usual choice)
    std_ddof: int = 1  # norm="mean_std": 1 = unbiased group std (verl, torch.std); 0 = population std (SUMER)

    def __post_init__(self):
        if self.norm not in ADV_NORMS:
            raise ValueError(f"AdvantageConfig.norm must be one of {ADV_NORMS}, got {self.norm!r}")
        if not (isinstance(self.eps, (int, float)) and self.eps > 0):
            raise ValueError(f"AdvantageConfig.eps must be a number > 0, got {self.eps!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"AdvantageConfig.estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.lam <= 1.0):
            raise ValueError(f"AdvantageConfig: gamma and lam must lie in [0, 1], got {self.gamma}, {self.lam}")
        if self.std_ddof not in (0, 1) or isinstance(self.std_ddof, bool):
            raise ValueError(f"AdvantageConfig.std_ddof must be 0 (population) or 1 (unbiased), got {self.std_ddof!r}")
        if not isinstance(self.per_trajectory, bool):
            raise ValueError(f"AdvantageConfig.per_trajectory must be a bool, got {self.per_trajectory!r}")


def _int_ids(fn: str, name: str, x, n: int | None = None):
    x = jnp.asarray(x)
    if x.ndim != 1 or not jnp.issubdtype(x.dtype, jnp.integer):
        raise ValueError(f"{fn}: {name} must be a 1-D integer array, got shape {x.shape} dtype {x.dtype}")
    if n is not None and x.shape[0] != n:
        raise ValueError(f"{fn}: {name} has {x.shape[0]} entries, expected {n}")
    return x


def grpo_advantages(reward, sample_group, *, norm: str = "mean", eps: float = 1e-6, ddof: int = 1) -> jax.Array:
    """Group-relative advantage per sample, float32 [S]; see the module docstring for the formulas."""
    fn = "grpo_advantages"
    if norm not in ADV_NORMS:
        raise ValueError(f"{fn}: norm must be one of {ADV_NORMS}, got {norm!r}")
    if not eps > 0:
        raise ValueError(f"{fn}: eps must be > 0, got {eps}")
    if ddof not in (0, 1) or isinstance(ddof, bool):
        raise ValueError(f"{fn}: ddof must be 0 (population std) or 1 (unbiased), got {ddof!r}")
    r = jnp.asarray(reward)
    if r.ndim != 1 or not jnp.issubdtype(r.dtype, jnp.floating):
        raise ValueError(f"{fn}: reward must be a 1-D float array, got shape {r.shape} dtype {r.dtype}")
    g = _int_ids(fn, "sample_group", sample_group, r.shape[0])
    return _grpo_core(r, g, norm, float(eps), int(ddof))


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _grpo_core(r, g, norm: str, eps: float, ddof: int):
    r = r.astype(_F32)
    same = g[:, None] == g[None, :]  # [S, S]; no matmul, so no TF32 on GPU
    count = jnp.sum(same, axis=1).astype(_F32)
    mean = jnp.sum(jnp.where(same, r[None, :], 0.0), axis=1) / count
    adv = r - mean
    if norm == "mean_std":
        dev2 = jnp.where(same, jnp.square(adv)[None, :], 0.0)  # members share the mean: adv_j = r_j - mean_i
        std = jnp.sqrt(jnp.sum(dev2, axis=1) / jnp.maximum(count - float(ddof), 1.0))
        adv = adv / (std + eps)
    return jnp.where(count > 1, adv, 0.0)


def broadcast_to_tokens(adv_sample, sample, loss_mask) -> jax.Array:
    """Row i gets adv_sample[sample[i]] on its valid tokens (loss_mask != 0), 0 elsewhere; float32 [N, T]."""
    fn = "broadcast_to_tokens"
    a = jnp.asarray(adv_sample)
    if a.ndim != 1:
        raise ValueError(f"{fn}: adv_sample must be 1-D [S], got shape {a.shape}")
    m = jnp.asarray(loss_mask)
    if m.ndim != 2:
        raise ValueError(f"{fn}: loss_mask must be [N, T], got shape {m.shape}")
    s = _int_ids(fn, "sample", sample, m.shape[0])
    return jnp.where(m != 0, a.astype(_F32)[s][:, None], 0.0)


def trajectory_row_weight(sample, num_samples: int, loss_mask=None) -> jax.Array:
    """w_i = 1 / (#conversations of sample[i]), float32 [N]; with loss_mask only rows with a valid token
    count, and rows without one get 0. num_samples is static (S)."""
    fn = "trajectory_row_weight"
    if not (isinstance(num_samples, int) and num_samples >= 1):
        raise ValueError(f"{fn}: num_samples must be an int >= 1, got {num_samples!r}")
    s = _int_ids(fn, "sample", sample)
    if loss_mask is None:
        live = jnp.ones(s.shape, _F32)
    else:
        m = jnp.asarray(loss_mask)
        if m.ndim != 2 or m.shape[0] != s.shape[0]:
            raise ValueError(f"{fn}: loss_mask must be [N={s.shape[0]}, T], got shape {m.shape}")
        live = jnp.any(m != 0, axis=1).astype(_F32)
    count = jax.ops.segment_sum(live, s, num_samples)
    return jnp.where(live > 0, 1.0 / jnp.maximum(count[s], 1.0), 0.0)


def compute_advantages(batch, cfg: AdvantageConfig = AdvantageConfig()):
    """MemAgent advantages for a RolloutBatch: (token advantages f32 [N, T], row weights f32 [N] or None)."""
    adv = grpo_advantages(batch.reward, batch.sample_group, norm=cfg.norm, eps=cfg.eps, ddof=cfg.std_ddof)
    tokens = broadcast_to_tokens(adv, batch.sample, batch.loss_mask)
    weight = (trajectory_row_weight(batch.sample, batch.num_samples, batch.loss_mask)
              if cfg.per_trajectory else None)
    return tokens, weight


def with_advantages(batch, cfg: AdvantageConfig = AdvantageConfig()):
    """The batch with `advantages` (f32 [N, T], numpy) and `row_weight` (f32 [N] or None) filled."""
    import numpy as np

    adv, weight = compute_advantages(batch, cfg)
    return batch.replace(advantages=np.asarray(adv, np.float32),
                         row_weight=None if weight is None else np.asarray(weight, np.float32))
