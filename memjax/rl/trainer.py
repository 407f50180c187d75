"""The policy update: PPO epochs x mini-batches x micro-batches over a RolloutBatch, optax AdamW.

Owns: optimizer construction, (re)computing old/reference log-probs, the jitted gradient step and the
update loop. Invariants:
- Rows (conversations) of a mini-batch are split into micro-batches of `micro_rows` rows (zero-mask rows
  pad the last); every micro-batch loss is divided by the mini-batch's GLOBAL denominator (from the
  masks, before any forward), so the accumulated gradient equals the full mini-batch gradient exactly.
- Token arrays are right-padded to a multiple of `pad_tokens` so the step compiles once per bucket.
- Parameters stay in the model's param_dtype (fp32 master weights when the model computes in bf16);
  optimizer state follows the parameters. With a mesh, micro-batch rows are sharded over (data, fsdp)
  and parameters by memjax.parallel.param_shardings (FSDP / tensor); XLA inserts the collectives.
- A non-finite loss or gradient norm is caught before the optimizer applies it: by default
  (`OptimConfig.on_nonfinite="stop"`) a NonFiniteError stops the run with the model untouched; "skip"
  drops that optimizer step and counts it in the `skipped_steps` metric.
- Old log-probs: by default recomputed by the trainer before the first update (the engine's rollout
  log-probs are kept for the mismatch metric: mean/max |engine - trainer| over response tokens).
- Advantages are consumed, not chosen: `batch.advantages` [N, T] and `batch.row_weight` [N] (filled by
  memjax.rl.advantages.with_advantages or any estimator of memjax/rl/estimators.py); a batch without
  them gets the MemAgent rule configured by `advantage` (so existing callers keep their behaviour).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from ..parallel import data_size, param_shardings, rows_sharding
from .advantages import AdvantageConfig, with_advantages
from .batch import RolloutBatch, pad_rows_tokens
from .logprobs import token_logprobs
from ..config import RunError
from .losses import AGG_MODES, KL_ESTIMATORS, agg_denominator, policy_loss, step_policy_loss

NONFINITE_POLICIES = ("stop", "skip")


class NonFiniteError(RunError):
    """The loss or gradient became NaN/inf; raised before the bad update reaches the parameters."""


def _finite_fields(obj) -> None:
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{type(obj).__name__}.{f.name} must be finite, got {v}")


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-6
    warmup_steps: int = 10  # linear warm-up, then constant
    weight_decay: float = 0.01
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    grad_clip: float = 1.0  # global-norm clip; 0 = off
    on_nonfinite: str = "stop"  # NaN/inf loss or gradient: "stop" the run, or "skip" the step (counted)

    def __post_init__(self):
        _finite_fields(self)
        if self.lr <= 0 or self.warmup_steps < 0 or self.grad_clip < 0 or self.weight_decay < 0 or self.eps <= 0:
            raise ValueError(f"OptimConfig: lr and eps must be > 0, warmup_steps, grad_clip and weight_decay >= 0 "
                             f"(got {self})")
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"OptimConfig: b1 and b2 must be in [0, 1), got {self.b1}, {self.b2}")
        if self.on_nonfinite not in NONFINITE_POLICIES:
            raise ValueError(f"OptimConfig.on_nonfinite must be one of {NONFINITE_POLICIES}, got {self.on_nonfinite!r}")


LOSS_LEVELS = ("token", "step")


@dataclass(frozen=True)
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.28  # DAPO clip-higher
    dual_clip: float | None = None
    agg: str = "token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    log_ratio_clamp: float = 20.0
    level: str = "token"  # "token": per-token ratios (policy_loss); "step": one length-normalised ratio per
    # row (Memory-R2, memjax/rl/losses.step_policy_loss), mean over the mini-batch's steps (agg is ignored;
    # kl_coef / entropy_coef terms are token means over the mini-batch)

    def __post_init__(self):
        if self.dual_clip is not None and not math.isfinite(self.dual_clip):
            raise ValueError(f"LossConfig.dual_clip must be finite, got {self.dual_clip}")
        _finite_fields(self)
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"LossConfig.kl_estimator must be one of {KL_ESTIMATORS}, got {self.kl_estimator!r}")
        if self.kl_coef < 0 or self.log_ratio_clamp <= 0:
            raise ValueError(f"LossConfig: kl_coef must be >= 0 and log_ratio_clamp > 0 (got {self})")
        if self.level not in LOSS_LEVELS:
            raise ValueError(f"LossConfig.level must be one of {LOSS_LEVELS}, got {self.level!r}")
        if self.agg not in AGG_MODES:
            raise ValueError(f"LossConfig.agg must be one of {AGG_MODES}, got {self.agg!r}")
        if self.clip_low < 0 or self.clip_high < 0 or (self.dual_clip is not None and self.dual_clip <= 1):
            raise ValueError(f"LossConfig: clips must be >= 0 and dual_clip > 1 (got {self})")


@dataclass(frozen=True)
class UpdateConfig:
    ppo_epochs: int = 1
    mini_batches: int = 1  # optimizer steps per epoch (samples split evenly)
    micro_rows: int = 8  # conversations per forward/backward
    pad_tokens: int = 64
    remat: bool = False
    recompute_old_logp: bool = True
    temperature: float = 1.0  # the rollout temperature (log-probs are of logits / T)

    def __post_init__(self):
        for f in ("ppo_epochs", "mini_batches", "micro_rows", "pad_tokens"):
            if getattr(self, f) <= 0:
                raise ValueError(f"UpdateConfig.{f} must be > 0, got {getattr(self, f)}")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"UpdateConfig.temperature must be finite and > 0, got {self.temperature}")


def make_optimizer(model, cfg: OptimConfig) -> nnx.Optimizer:
    sched = optax.join_schedules([optax.linear_schedule(0.0, cfg.lr, max(cfg.warmup_steps, 1)),
                                  optax.constant_schedule(cfg.lr)], [max(cfg.warmup_steps, 1)])
    if cfg.warmup_steps == 0:
        sched = optax.constant_schedule(cfg.lr)
    tx = optax.adamw(sched, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay)
    if cfg.grad_clip:
        tx = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), tx)
    return nnx.Optimizer(model, tx, wrt=nnx.Param)


@nnx.jit(static_argnames=("temperature", "remat"))
def _logprobs(model, ids, mask, *, temperature, remat):
    return token_logprobs(model, ids, mask, temperature=temperature, remat=remat)[0]


@nnx.jit(static_argnames=("loss", "temperature", "remat", "use_ref", "use_entropy"))
def _grad_step(model, ids, mask, old, adv, ref, row_w, denom, *, loss: LossConfig, temperature, remat,
               use_ref, use_entropy):
    def loss_fn(model):
        logp, ent = token_logprobs(model, ids, mask, temperature=temperature, remat=remat)
        if loss.level == "step":  # each row is one step; denom = (mini-batch steps, mini-batch tokens)
            return step_policy_loss(logp, old, adv, mask, clip_low=loss.clip_low, clip_high=loss.clip_high,
                                    dual_clip=loss.dual_clip, log_ratio_clamp=loss.log_ratio_clamp,
                                    steps_denominator=denom[0], tokens_denominator=denom[1],
                                    ref_logp=ref if use_ref else None, kl_coef=loss.kl_coef,
                                    kl_estimator=loss.kl_estimator, entropy=ent if use_entropy else None,
                                    entropy_coef=loss.entropy_coef)
        value, metrics = policy_loss(
            logp, old, adv, mask, clip_low=loss.clip_low, clip_high=loss.clip_high, dual_clip=loss.dual_clip,
            agg=loss.agg, row_weight=row_w, denominator=denom, ref_logp=ref if use_ref else None,
            kl_coef=loss.kl_coef, kl_estimator=loss.kl_estimator, entropy=ent if use_entropy else None,
            entropy_coef=loss.entropy_coef, log_ratio_clamp=loss.log_ratio_clamp)
        return value, metrics

    (value, metrics), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
    return value, metrics, grads


@jax.jit
def _add(a, b):
    return jax.tree.map(jnp.add, a, b)


@jax.jit
def _norm(grads):
    return optax.tree.norm(grads)


@nnx.jit
def _apply(optimizer, model, grads):
    optimizer.update(model, grads)


class Trainer:
    def __init__(self, model, optim: OptimConfig = OptimConfig(), loss: LossConfig = LossConfig(),
                 update: UpdateConfig = UpdateConfig(), advantage: AdvantageConfig = AdvantageConfig(),
                 ref_model=None, mesh=None):
        if loss.kl_coef and ref_model is None:
            raise ValueError("Trainer: LossConfig.kl_coef > 0 needs a reference model")
        self.model, self.ref_model, self.mesh = model, ref_model, mesh
        self.optim_cfg, self.loss_cfg, self.update_cfg, self.adv_cfg = optim, loss, update, advantage
        if mesh is not None and mesh.size > 1:  # FSDP / tensor shardings; optimizer state follows
            for m in (model, ref_model):
                if m is not None:
                    params = nnx.state(m, nnx.Param)
                    nnx.update(m, jax.device_put(params, param_shardings(params, mesh)))
        self.optimizer = make_optimizer(model, optim)
        self.optimizer_steps = 0  # applied updates (this process)
        self._dp = data_size(mesh) if mesh is not None else 1
        if update.micro_rows % self._dp:
            raise ValueError(f"UpdateConfig.micro_rows={update.micro_rows} must be a multiple of the mesh data "
                             f"axis size {self._dp}")

    # -- array plumbing -----------------------------------------------------------------------------
    def _pad(self, batch: RolloutBatch) -> dict[str, np.ndarray]:
        u = self.update_cfg
        arrays = pad_rows_tokens(batch, u.micro_rows, u.pad_tokens)
        return {k: arrays[k] for k in ("input_ids", "loss_mask", "old_logp", "ref_logp") if k in arrays}

    def _put(self, x):
        x = jnp.asarray(x)
        return jax.device_put(x, rows_sharding(self.mesh)) if self.mesh is not None and self._dp > 1 else x

    def _micro(self, arrays: dict, rows: np.ndarray):
        m = self.update_cfg.micro_rows
        for i in range(0, len(rows), m):
            idx = rows[i:i + m]
            if len(idx) < m:
                idx = np.concatenate([idx, np.full(m - len(idx), -1)])
            yield {k: self._put(np.where((idx >= 0)[(...,) + (None,) * (v.ndim - 1)], v[np.maximum(idx, 0)], 0))
                   for k, v in arrays.items()}

    def logprobs(self, model, batch: RolloutBatch) -> np.ndarray:
        """Per-token log-probs [N, T] of the batch under `model`, computed in micro-batches."""
        arrays = self._pad(batch)
        outs = []
        for mb in self._micro({k: arrays[k] for k in ("input_ids", "loss_mask")}, np.arange(batch.num_rows)):
            outs.append(np.asarray(_logprobs(model, mb["input_ids"], mb["loss_mask"],
                                             temperature=self.update_cfg.temperature, remat=False)))
        return np.concatenate(outs)[: batch.num_rows, : batch.input_ids.shape[1]]

    # -- the update -----------------------------------------------------------------------------------
    def update(self, batch: RolloutBatch, seed: int = 0) -> dict[str, float]:
        u, lc = self.update_cfg, self.loss_cfg
        stats: dict[str, float] = {}
        mask = batch.loss_mask > 0
        if u.recompute_old_logp:
            old = self.logprobs(self.model, batch)
            diff = np.abs(old - batch.old_logp)[mask]
            stats["logp_mismatch_mean"] = float(diff.mean()) if diff.size else 0.0
            stats["logp_mismatch_max"] = float(diff.max()) if diff.size else 0.0
            batch = batch.replace(old_logp=old * mask)
        if lc.kl_coef:
            batch = batch.replace(ref_logp=self.logprobs(self.ref_model, batch) * mask)
        if batch.advantages is None:  # callers that did not run an estimator get the configured MemAgent rule
            batch = with_advantages(batch, self.adv_cfg)
        adv, row_w = batch.advantages, batch.row_weight
        arrays = self._pad(batch)
        n, t = arrays["input_ids"].shape
        arrays["adv"] = np.zeros((n, t), np.float32)
        arrays["adv"][: batch.num_rows, : adv.shape[1]] = np.asarray(adv)
        arrays["row_w"] = np.zeros(n, np.float32)
        arrays["row_w"][: batch.num_rows] = 1.0 if row_w is None else np.asarray(row_w)
        arrays.setdefault("ref_logp", np.zeros((n, t), np.float32))
        rng = np.random.default_rng(seed)
        totals: dict[str, float] = {}
        steps = skipped = 0
        for _ in range(u.ppo_epochs):
            order = rng.permutation(batch.num_samples)
            for part in np.array_split(order, u.mini_batches):
                rows = np.nonzero(np.isin(batch.sample, part))[0]
                if rows.size == 0:
                    continue
                if lc.level == "step":
                    valid = arrays["loss_mask"][rows] != 0
                    denom = jnp.asarray([max(int(valid.any(1).sum()), 1), max(int(valid.sum()), 1)], jnp.float32)
                else:
                    denom = agg_denominator(jnp.asarray(arrays["loss_mask"][rows]), lc.agg,
                                            row_weight=None if row_w is None else jnp.asarray(arrays["row_w"][rows]),
                                            loss_scale_tokens=t)
                grads, mb_metrics, loss_value = None, [], 0.0
                for mb in self._micro(arrays, rows):
                    value, metrics, g = _grad_step(
                        self.model, mb["input_ids"], mb["loss_mask"], mb["old_logp"], mb["adv"], mb["ref_logp"],
                        mb["row_w"] if row_w is not None else None, denom, loss=lc, temperature=u.temperature,
                        remat=u.remat, use_ref=bool(lc.kl_coef), use_entropy=bool(lc.entropy_coef))
                    grads = g if grads is None else _add(grads, g)
                    loss_value += float(value)  # micro losses share the global denominator: they add up
                    mb_metrics.append(jax.device_get(metrics))
                gnorm = float(_norm(grads))
                if not (math.isfinite(gnorm) and math.isfinite(loss_value)):
                    if self.optim_cfg.on_nonfinite == "stop":
                        raise NonFiniteError(f"non-finite {'loss' if not math.isfinite(loss_value) else 'gradient'} "
                                             f"(loss {loss_value}, gradient norm {gnorm}) at optimizer step "
                                             f"{self.optimizer_steps + 1}; the update was not applied")
                    skipped += 1
                    continue
                _apply(self.optimizer, self.model, grads)
                self.optimizer_steps += 1
                steps += 1
                tok = sum(m["num_tokens"] for m in mb_metrics)
                for key in ("clipfrac", "clipfrac_high", "clipfrac_low", "approx_kl", "ratio_mean", "entropy",
                            "kl_ref"):
                    if key in mb_metrics[0]:
                        val = sum(m[key] * m["num_tokens"] for m in mb_metrics) / max(tok, 1)
                        totals[key] = totals.get(key, 0.0) + float(val)
                totals["grad_norm"] = totals.get("grad_norm", 0.0) + float(gnorm)
                totals["loss"] = totals.get("loss", 0.0) + loss_value
        stats.update({k: v / max(steps, 1) for k, v in totals.items()})
        stats["optimizer_steps"] = steps
        stats["skipped_steps"] = skipped
        stats["reward_mean"] = float(batch.reward.mean())
        stats["response_tokens"] = float(mask.sum())
        return stats
