"""Credit assignment: a RolloutBatch with rewards -> the same batch with what the trainer consumes
(`advantages` f32 [N, T], `row_weight` f32 [N] or None), by the estimator `AdvantageConfig.estimator` names.

Owns `CriticConfig` and `Credit` (the estimator, plus the PPO critic and its optimizer when GAE is chosen):
- "grpo": memjax/rl/advantages.py `with_advantages`.
- "gae": PPO. Each row gets its trajectory's reward on its last trained token (every conversation an episode
  ending with the trajectory's outcome); memjax/rl/estimators.py `gae` gives advantages and returns from the
  critic's values (memjax/rl/critic.py), optionally whitened over the trained tokens; the critic then takes
  `critic.epochs` clipped value-loss steps. Metrics: value_loss, explained_variance, value_mean, return_mean.
`assign(batch, own=system.advantages)` is the one place advantages are chosen: the system's own rule, else the
estimator. Several processes: `assign` gets THIS process's rows and every process calls it at the same point
(the critic's programs are collectives); whitening statistics and metrics are over every process's tokens.
Invariants: advantages are host numpy float32 and constants of the loss; the critic never shares arrays with the
policy; the batch's rewards are not changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from flax import nnx

from .advantages import AdvantageConfig, with_advantages
from .assemble import global_sum
from .batch import RolloutBatch
from .estimators import gae


@dataclass(frozen=True)
class CriticConfig:
    lr: float = 1e-5  # Memory-R1's critic lr (the actor's is 1e-6)
    warmup_steps: int = 0
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    clip_value: float = 0.2  # value clipping range around the rollout-time values; 0 = off
    epochs: int = 1  # value-loss steps per training step

    def __post_init__(self):
        if not (math.isfinite(self.lr) and self.lr > 0) or self.warmup_steps < 0 or self.epochs <= 0:
            raise ValueError(f"CriticConfig: lr must be > 0, warmup_steps >= 0 and epochs >= 1 (got {self})")
        if self.clip_value < 0 or self.grad_clip < 0 or self.weight_decay < 0:
            raise ValueError(f"CriticConfig: clip_value, grad_clip and weight_decay must be >= 0 (got {self})")


def outcome_token_rewards(batch: RolloutBatch) -> np.ndarray:
    """f32 [N, T]: each row's trajectory reward on its last trained token (0 elsewhere / for empty rows)."""
    mask = batch.loss_mask > 0
    out = np.zeros(mask.shape, np.float32)
    has = mask.any(1)
    last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
    rows = np.nonzero(has)[0]
    out[rows, last[rows]] = batch.row_reward()[rows]
    return out


def _moments(*xs: np.ndarray) -> list[tuple[float, float, int]]:
    """(mean, variance, count) of each 1-D array over every process's elements (two small all-reduces)."""
    sums = global_sum([v for x in xs for v in (np.sum(x, dtype=np.float64), x.size)]).reshape(-1, 2)
    means = [s / n if n else 0.0 for s, n in sums]
    sq = global_sum([np.sum(np.square(x.astype(np.float64) - mu)) for x, mu in zip(xs, means)])
    return [(float(mu), float(q / n) if n else 0.0, int(n)) for mu, q, (_, n) in zip(means, sq, sums)]


def explained_variance(values: np.ndarray, returns: np.ndarray, mask: np.ndarray) -> float:
    """1 - Var(R - V) / Var(R) over the trained tokens of every process."""
    m = mask > 0
    (_, var, n), (_, var_d, _) = _moments(returns[m], returns[m] - values[m])
    if n < 2:
        return float("nan")
    return float("nan") if var == 0 else 1.0 - var_d / var


class Credit:
    """The configured estimator. `assign(batch) -> (batch with advantages, metrics)`; with GAE it also
    updates the critic. `state()` / `load_state()` carry the critic (and its optimizer) in checkpoints."""

    def __init__(self, cfg: AdvantageConfig, policy=None, critic: CriticConfig = CriticConfig(), *, seed: int = 0,
                 mesh=None, update=None):
        self.cfg, self.critic_cfg = cfg, critic
        self.critic_trainer = None
        if cfg.estimator == "gae":
            if policy is None:
                raise ValueError("Credit: estimator 'gae' needs the policy to initialise the critic")
            from .critic import Critic, CriticTrainer
            from .trainer import OptimConfig

            optim = OptimConfig(lr=critic.lr, warmup_steps=critic.warmup_steps, weight_decay=critic.weight_decay,
                                grad_clip=critic.grad_clip)
            self.critic_trainer = CriticTrainer(Critic.from_policy(policy, seed=seed), optim,
                                                clip_value=critic.clip_value or None, mesh=mesh, update=update)

    def assign(self, batch: RolloutBatch, own=None) -> tuple[RolloutBatch, dict[str, float]]:
        """The batch with advantages, and the estimator's metrics: a process holding no sample takes part with
        zero advantages (unless the critic's collectives need it); `own(batch, cfg)` (a system's own credit rule,
        e.g. Memory-R2's LoGo-GRPO) decides first where it returns a batch; else the configured estimator."""
        if batch.num_samples == 0 and self.critic_trainer is None:  # kept none of its groups; the others train
            return batch.replace(advantages=np.zeros(batch.input_ids.shape, np.float32),
                                 row_weight=np.zeros(0, np.float32)), {}
        if batch.num_samples and own is not None and (mine := own(batch, self.cfg)) is not None:
            return mine, {}
        if self.cfg.estimator == "grpo":
            return with_advantages(batch, self.cfg), {}
        ct = self.critic_trainer
        mask = (batch.loss_mask > 0).astype(np.float32)
        values = ct.values(batch)
        adv, ret = gae(outcome_token_rewards(batch), values, mask, gamma=self.cfg.gamma, lam=self.cfg.lam)
        m = mask > 0
        (mu, var, n), = _moments(adv[m])
        if self.cfg.whiten and n > 1:
            adv = np.where(m, (adv - mu) / (np.sqrt(var) + self.cfg.eps), 0.0).astype(np.float32)
        batch = batch.replace(advantages=adv, values=values, returns=ret)
        (v_mean, _, _), (r_mean, _, _) = _moments(values[m], ret[m])
        metrics = {"explained_variance": explained_variance(values, ret, mask), "value_mean": v_mean,
                   "return_mean": r_mean}
        losses = [ct.update(batch)["value_loss"] for _ in range(self.critic_cfg.epochs)]
        metrics["value_loss"] = float(np.mean(losses))
        return batch, metrics

    def state(self) -> dict | None:
        if self.critic_trainer is None:
            return None
        return {"critic": nnx.to_pure_dict(nnx.state(self.critic_trainer.critic, nnx.Param)),
                "critic_opt": nnx.to_pure_dict(nnx.state(self.critic_trainer.optimizer))}

    def load_state(self, state: dict) -> None:
        ct = self.critic_trainer
        params = nnx.state(ct.critic, nnx.Param)
        nnx.replace_by_pure_dict(params, state["critic"])
        opt = nnx.state(ct.optimizer)
        nnx.replace_by_pure_dict(opt, state["critic_opt"])
        nnx.update(ct.critic, params)
        nnx.update(ct.optimizer, opt)
