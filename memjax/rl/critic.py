"""The PPO critic: a Qwen2 backbone WITHOUT an LM head plus a scalar value head, its own parameters and optimizer.

Owns `Critic` (nnx.Module), `Critic.from_policy(policy)` (backbone copied from the policy except the LM head,
value head zero so the first values are 0) and `CriticTrainer` (values of a batch and the clipped value-loss
update; the jitted programs are memjax/rl/value_step.py's ValueStep).
Invariants:
- values f32 [N, T] are aligned like old_logp: values[i, t] is the head on the hidden state at t - 1;
  values[:, 0] = 0. GAE (memjax/rl/estimators.py) consumes them on the loss mask.
- The critic never shares arrays with the policy (from_policy copies). No LM head: the backbone is built with `tie_word_embeddings=True`, so a 7B critic holds 545M fewer parameters
  and no gradient or AdamW state for them. Parameters stay in param_dtype, the backbone computes in its dtype,
  the head in f32.
- It is trained like the policy (same mesh, ZeRO-3, the policy's UpdateConfig row layout, one jitted call per
  update, params / optimizer state donated); one `update(batch)` is one optimizer step over the whole batch.
  Several processes: each passes its own rows (memjax/rl/assemble.py RowLayout); no token array leaves it.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ..model.qwen2 import Qwen2
from ..parallel import data_size, micro_rows_for
from .assemble import RowLayout, global_sum, take_local
from .batch import RolloutBatch
from .losses import AGG_MODES
from .trainer import OptimConfig, OptimizerState, UpdateConfig, _denominator, lr_at
from .value_step import ValueStep

CRITIC_AGG_MODES = tuple(m for m in AGG_MODES if m != "seq-mean-token-sum-norm")


def backbone_config(cfg):
    """The critic backbone's ModelConfig: the policy's without a separate LM head (module docstring)."""
    return dataclasses.replace(cfg, tie_word_embeddings=True)


class Critic(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.backbone = Qwen2(backbone_config(cfg), rngs=rngs)
        self.head_w = nnx.Param(jnp.zeros((cfg.hidden_size,), jnp.float32))
        self.head_b = nnx.Param(jnp.zeros((), jnp.float32))

    @classmethod
    def from_policy(cls, policy: Qwen2, seed: int = 0) -> "Critic":
        critic = cls(policy.cfg, rngs=nnx.Rngs(seed))
        src = nnx.to_pure_dict(nnx.state(policy, nnx.Param))
        src.pop("lm_head", None)
        state = nnx.state(critic.backbone, nnx.Param)
        nnx.replace_by_pure_dict(state, jax.tree.map(jnp.array, src))  # fresh buffers, not the policy's
        nnx.update(critic.backbone, state)
        return critic

    def values(self, input_ids: jax.Array, positions: jax.Array | None = None, *, attention=None,
               segment_ids=None, remat: bool = False, sharding=None) -> jax.Array:
        """int [B, T] -> values f32 [B, T] (aligned as in the module docstring)."""
        hidden, _ = self.backbone.forward(input_ids, positions, attention=attention, state=segment_ids,
                                          return_hidden=True, remat=remat, sharding=sharding)
        v = hidden.astype(jnp.float32) @ self.head_w[...] + self.head_b[...]
        return jnp.pad(v[:, :-1], ((0, 0), (1, 0)))

    def __call__(self, input_ids: jax.Array) -> jax.Array:
        return self.values(input_ids)


class CriticTrainer:
    """Own optimizer for a Critic. `values(batch)` -> f32 [N, T] (0 off the loss mask); `update(batch)`
    needs batch.values (the rollout-time values, for clipping) and batch.returns. `mesh` and `update` (the
    policy's UpdateConfig) give the sharding and row layout (module docstring)."""

    def __init__(self, critic: Critic, optim: OptimConfig = OptimConfig(), *, clip_value: float | None = 0.2,
                 agg: str = "token-mean", mesh=None, update: UpdateConfig | None = None):
        if agg not in CRITIC_AGG_MODES:
            raise ValueError(f"CriticTrainer.agg must be one of {CRITIC_AGG_MODES}, got {agg!r}")
        if clip_value is not None and not clip_value > 0:
            raise ValueError(f"CriticTrainer.clip_value must be > 0 or None, got {clip_value}")
        self.critic, self.clip_value, self.agg, self.optim_cfg = critic, clip_value, agg, optim
        update = update or UpdateConfig()
        self.update_cfg = dataclasses.replace(update, micro_rows=micro_rows_for(
            update.micro_rows, data_size(mesh) if mesh is not None else 1))
        graphdef, params = nnx.split(critic, nnx.Param)
        self.step = ValueStep(graphdef, jax.eval_shape(lambda: params), mesh, optim, self.update_cfg,
                              clip_value=clip_value)
        self.rows = RowLayout(self.update_cfg, self.step.data_sharding)  # this process's slots of every micro-batch
        params = self._placed(params)
        nnx.update(critic, params)
        self.optimizer = OptimizerState(self.step.init_opt(params))  # its train_step counts optimizer steps

    def _placed(self, params):
        sh = self.step.param_shardings
        return params if sh is None else jax.device_put(params, sh)

    def values(self, batch: RolloutBatch) -> np.ndarray:
        """Values of this process's rows, f32 [N, T] (0 off the loss mask)."""
        out = np.zeros(batch.input_ids.shape, np.float32)
        plan = self.rows.plans(batch.lengths, [np.arange(batch.num_rows)])[0]
        if plan is None:  # no process holds a row
            return out
        rows, p, sl = plan
        v = take_local(self.step.values(self._placed(nnx.state(self.critic, nnx.Param)),
                                        self.rows.build(plan, {"input_ids": batch.input_ids}), np.int32(sl.n_micro)))
        out[rows] = p.unpack(v.reshape(-1, sl.row_len), batch.input_ids.shape[1])
        return (out * (batch.loss_mask > 0)).astype(np.float32)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        for name in ("values", "returns"):
            if getattr(batch, name) is None:
                raise ValueError(f"CriticTrainer.update: batch.{name} is not set (fill it before the update)")
        valid = (batch.loss_mask != 0).astype(np.float32)
        tok_w = valid / np.maximum(valid.sum(1, keepdims=True), 1.0) if self.agg == "seq-mean-token-mean" else valid
        denom = float(global_sum([_denominator(batch.loss_mask, np.ones(batch.num_rows, np.float32), self.agg,
                                               None)])[0])
        plan = self.rows.plans(batch.lengths, [np.arange(batch.num_rows)])[0]
        if plan is None:
            raise ValueError("CriticTrainer.update: no process holds a row")
        data = self.rows.build(plan, {"input_ids": batch.input_ids, "loss_mask": batch.loss_mask,
                                      "tok_w": tok_w.astype(np.float32),
                                      "old_values": np.asarray(batch.values, np.float32),
                                      "returns": np.asarray(batch.returns, np.float32)})
        n_micro = plan[2].n_micro
        n = int(self.optimizer.train_step[...])
        params = self._placed(nnx.state(self.critic, nnx.Param))
        params, opt, m = self.step.update(params, self.optimizer.get(), data, np.int32(n_micro), np.float32(denom),
                                          np.float32(lr_at(self.optim_cfg, n)))
        nnx.update(self.critic, params)  # the donated arrays are gone
        self.optimizer.set(opt)
        m = {k: float(v) for k, v in jax.device_get(m).items()}
        if m["ok"]:
            self.optimizer.train_step = nnx.Variable(jnp.asarray(n + 1, jnp.int32))
        return {"value_loss": m["loss"], "value_grad_norm": m["grad_norm"], "value_clipfrac": m["clipfrac"],
                "value_vpred_mean": m["vpred_mean"], "value_skipped": 1.0 - m["ok"]}
