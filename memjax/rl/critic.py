"""The PPO critic: a Qwen2 backbone with a scalar value head, its own parameters and optimizer.

Owns `Critic` (nnx.Module), `Critic.from_policy(policy)` (backbone initialised as a copy of the policy's
parameters, value head zero so the first values are 0) and `CriticTrainer` (values of a batch, and the
clipped value-loss update with `memjax.rl.losses.value_loss` and its own AdamW from `make_optimizer`).
Invariants:
- values f32 [N, T] are aligned like old_logp: values[i, t] is the head applied to the hidden state at
  t - 1, i.e. the value of the context that token t is generated from; values[:, 0] = 0. GAE
  (memjax/rl/estimators.py) consumes them on the loss mask.
- The critic never shares arrays with the policy (from_policy copies), so updating one leaves the other.
- The backbone keeps its (unused) LM head parameters so any Qwen2 checkpoint loads; they get no gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ..model.qwen2 import Qwen2
from .batch import RolloutBatch
from .losses import AGG_MODES, value_loss
from .trainer import OptimConfig, make_optimizer


class Critic(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.backbone = Qwen2(cfg, rngs=rngs)
        self.head_w = nnx.Param(jnp.zeros((cfg.hidden_size,), jnp.float32))
        self.head_b = nnx.Param(jnp.zeros((), jnp.float32))

    @classmethod
    def from_policy(cls, policy: Qwen2, seed: int = 0) -> "Critic":
        critic = cls(policy.cfg, rngs=nnx.Rngs(seed))
        copy = jax.tree.map(jnp.array, nnx.state(policy, nnx.Param))  # fresh buffers, not the policy's
        nnx.update(critic.backbone, copy)
        return critic

    def __call__(self, input_ids: jax.Array) -> jax.Array:
        """int [B, T] -> values f32 [B, T] (aligned as in the module docstring)."""
        hidden, _ = self.backbone.forward(input_ids, return_hidden=True)
        v = hidden.astype(jnp.float32) @ self.head_w[...] + self.head_b[...]
        return jnp.pad(v[:, :-1], ((0, 0), (1, 0)))


@nnx.jit
def _values(critic, ids):
    return critic(ids)


@nnx.jit(static_argnames=("clip_value", "agg"))
def _value_step(critic, optimizer, ids, old, ret, mask, *, clip_value, agg):
    def loss_fn(critic):
        return value_loss(critic(ids), old, ret, mask, clip_value=clip_value, agg=agg)

    (loss, metrics), grads = nnx.value_and_grad(loss_fn, has_aux=True)(critic)
    optimizer.update(critic, grads)
    return loss, metrics


class CriticTrainer:
    """Own optimizer for a Critic. `values(batch)` -> f32 [N, T] (0 off the loss mask); `update(batch)`
    needs batch.values (the rollout-time values, for clipping) and batch.returns."""

    def __init__(self, critic: Critic, optim: OptimConfig = OptimConfig(), *, clip_value: float | None = 0.2,
                 agg: str = "token-mean"):
        if agg not in AGG_MODES:
            raise ValueError(f"CriticTrainer.agg must be one of {AGG_MODES}, got {agg!r}")
        if clip_value is not None and not clip_value > 0:
            raise ValueError(f"CriticTrainer.clip_value must be > 0 or None, got {clip_value}")
        self.critic, self.clip_value, self.agg = critic, clip_value, agg
        self.optimizer = make_optimizer(critic, optim)

    def values(self, batch: RolloutBatch) -> np.ndarray:
        v = np.asarray(_values(self.critic, jnp.asarray(batch.input_ids)))
        return (v * (batch.loss_mask > 0)).astype(np.float32)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        for name in ("values", "returns"):
            if getattr(batch, name) is None:
                raise ValueError(f"CriticTrainer.update: batch.{name} is not set (fill it before the update)")
        loss, metrics = _value_step(self.critic, self.optimizer, jnp.asarray(batch.input_ids),
                                    jnp.asarray(batch.values), jnp.asarray(batch.returns),
                                    jnp.asarray(batch.loss_mask), clip_value=self.clip_value, agg=self.agg)
        return {"value_loss": float(loss), **{f"value_{k}": float(v) for k, v in jax.device_get(metrics).items()}}
