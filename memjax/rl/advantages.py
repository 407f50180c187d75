"""Advantage rules over the (group, conversation, token) layout of a RolloutBatch.

Owns `grpo_advantages(reward [S], sample_group [S], *, norm, eps)` -> f32 [S] (group-relative outcome advantages:
"mean" is Dr.GRPO, MemAgent's choice; "mean_std" GRPO, std ddof from AdvantageConfig.std_ddof),
`broadcast_to_tokens` (MemAgent's Multi-Conv rule: every conversation of sample s gets A_s on its valid tokens),
`trajectory_row_weight` (w_i = 1 / conversations of row i's sample, passed as `row_weight` to memjax.rl.losses),
`AdvantageConfig` (frozen, validated), `compute_advantages(batch, cfg)` -> (adv [N, T], row_weight) and
`with_advantages(batch, cfg)`, which stores them in the fields the trainer consumes (it never chooses an estimator).
Invariants: a group of size 1 or with all-equal rewards gets A = 0; group ids are arbitrary ints (an [S, S] id
comparison, jit-friendly); row weights are computed on the full batch and sliced with its rows; outputs are float32
jax arrays, inputs numpy or jax; nothing here is differentiated (advantages are constants of the loss).
docs/trainer.md, "Losses", has the formulas and how the row weight enters each aggregation.
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
