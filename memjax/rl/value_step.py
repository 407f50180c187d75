"""The PPO critic's two jitted programs over packed rows: values of a batch, and one accumulated value-loss update.

Owns `ValueStep` (built from the critic's graphdef, the mesh, its OptimConfig and the policy's UpdateConfig, so the
critic sees the policy's row layout), functional over (params, opt_state) like memjax/rl/update_programs.py's
UpdatePrograms: `values(params, data, n_micro)` -> f32 [M, m, L] (aligned as memjax/rl/critic.py says) and
`update(params, opt_state, data, n_micro, denom, lr)` -> (params, opt_state, metrics): verl's clipped value loss,
accumulated over the micro-batches in ONE jitted call, global-norm clip + AdamW, the non-finite guard.
Invariants: params and opt_state are DONATED; each micro-batch's weighted loss sum is divided by the host's global
denominator, so the accumulated gradient is the whole batch's; with a mesh it shards and reduces exactly as the
policy's update (`accumulate_once_per_update`); compute is the model's dtype, parameters stay in param_dtype
(fp32 master) and the value head is f32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from ..model.flash_attention import training_attention
from ..parallel import DATA, FSDP, layer_sharding, param_shardings
from .update_programs import accumulate_once_per_update, core_transform

_F32 = jnp.float32
VALUE_FIELDS = ("input_ids", "positions", "segment_ids")
UPDATE_FIELDS = VALUE_FIELDS + ("loss_mask", "old_values", "returns", "tok_w")


class ValueStep:
    def __init__(self, graphdef, abstract_params, mesh, optim, update, *, clip_value: float | None):
        self.graphdef, self.mesh, self.update_cfg, self.clip_value = graphdef, mesh, update, clip_value
        self.tx = core_transform(optim)
        self.attention = training_attention(update.attention, packed=update.pack, max_segments=update.max_segments)
        sharded = mesh is not None and mesh.size > 1
        self.param_shardings = param_shardings(abstract_params, mesh) if sharded else None
        self.layer_sharding = layer_sharding(mesh) if sharded else None
        self.data_sharding = NamedSharding(mesh, P(None, (DATA, FSDP))) if sharded else None
        self.opt_shardings = None
        if sharded:
            rep = NamedSharding(mesh, P())
            self.opt_shardings = optax.tree_map_params(self.tx, lambda _, s: s, jax.eval_shape(self.tx.init,
                                                       abstract_params), self.param_shardings,
                                                       transform_non_params=lambda _: rep)
        self.values = jax.jit(self._values)
        self.update = jax.jit(self._update, donate_argnums=(0, 1))
        self.init_opt = jax.jit(self.tx.init, out_shardings=self.opt_shardings)

    def _constrain(self, tree, shardings):
        return tree if shardings is None else jax.lax.with_sharding_constraint(tree, shardings)

    def _data(self, data):
        return data if self.data_sharding is None else jax.lax.with_sharding_constraint(
            data, jax.tree.map(lambda _: self.data_sharding, data))

    def _forward(self, params, mb, *, remat: bool, sharding=None):
        critic = nnx.merge(self.graphdef, params)
        return critic.values(mb["input_ids"], mb["positions"], attention=self.attention, remat=remat,
                             segment_ids=mb["segment_ids"] if self.update_cfg.pack else None,
                             sharding=sharding or self.layer_sharding)

    def _values(self, params, data, n_micro):
        data = self._data(data)
        out = jnp.zeros(data["input_ids"].shape, _F32)

        def body(i, out):
            mb = jax.tree.map(lambda x: x[i], data)
            return jax.lax.dynamic_update_index_in_dim(out, self._forward(params, mb, remat=False), i, 0)

        out = jax.lax.fori_loop(0, n_micro, body, out)
        return out if self.data_sharding is None else jax.lax.with_sharding_constraint(out, self.data_sharding)

    def _loss(self, params, mb, denom, sharding=None):
        v = self._forward(params, mb, remat=self.update_cfg.remat, sharding=sharding)
        old, ret = mb["old_values"], mb["returns"]
        l1 = jnp.square(v - ret)
        l2 = l1 if self.clip_value is None else jnp.square(
            jnp.clip(v, old - self.clip_value, old + self.clip_value) - ret)
        valid = mb["loss_mask"] != 0
        num = jnp.sum(jnp.where(valid, 0.5 * jnp.maximum(l1, l2) * mb["tok_w"], 0.0))
        sums = {"num_tokens": jnp.sum(valid).astype(_F32),
                "clipfrac": jnp.sum(jnp.where(valid, (l2 > l1).astype(_F32), 0.0)),
                "vpred": jnp.sum(jnp.where(valid, v, 0.0))}
        return num / denom, jax.tree.map(jax.lax.stop_gradient, sums)

    def _accumulate(self, params, data, n_micro, denom, sharding=None):
        """(gradient sums, metric sums) over micro-batches 0..n_micro-1 of `data`."""
        zeros = self._constrain(jax.tree.map(lambda p: jnp.zeros(p.shape, _F32), params), self.param_shardings)
        sums0 = {k: jnp.zeros((), _F32) for k in ("loss", "num_tokens", "clipfrac", "vpred")}

        def body(i, carry):
            acc, sums = carry
            mb = jax.tree.map(lambda x: x[i], data)
            (value, m), g = jax.value_and_grad(self._loss, has_aux=True)(params, mb, denom, sharding)
            acc = self._constrain(jax.tree.map(lambda a, b: a + b.astype(_F32), acc, g), self.param_shardings)
            return acc, {"loss": sums["loss"] + value, **{k: sums[k] + m[k] for k in m}}

        return jax.lax.fori_loop(0, n_micro, body, (zeros, sums0))

    def _update(self, params, opt_state, data, n_micro, denom, lr):
        data = self._data(data)
        denom = jnp.maximum(jnp.asarray(denom, _F32), 1e-30)
        grads, sums = accumulate_once_per_update(self._accumulate, self.mesh, self.layer_sharding,
                                                 self.param_shardings, params, data, n_micro, denom)
        gnorm = optax.tree.norm(grads)
        upd, new_opt = self.tx.update(grads, opt_state, params)
        new_params = jax.tree.map(lambda p, u: (p - lr * u).astype(p.dtype), params, upd)
        ok = jnp.isfinite(sums["loss"]) & jnp.isfinite(gnorm)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)
        params = self._constrain(keep(new_params, params), self.param_shardings)
        opt_state = self._constrain(keep(new_opt, opt_state), self.opt_shardings)
        tok = jnp.maximum(sums["num_tokens"], 1.0)
        metrics = {"loss": sums["loss"], "grad_norm": gnorm, "ok": ok.astype(_F32), "num_tokens": sums["num_tokens"],
                   "clipfrac": sums["clipfrac"] / tok, "vpred_mean": sums["vpred"] / tok}
        return params, opt_state, metrics

    # -- abstract inputs (memory plans) -------------------------------------------------------------
    def abstract_data(self, n_micro_cap: int, row_len: int, fields=UPDATE_FIELDS) -> dict:
        m = self.update_cfg.micro_rows
        ints = ("input_ids", "positions", "segment_ids")
        return {k: jax.ShapeDtypeStruct((n_micro_cap, m, row_len), jnp.int32 if k in ints else _F32,
                                        sharding=self.data_sharding) for k in fields}

    def lower(self, abstract_params, n_micro_cap: int, row_len: int):
        """(update, values) programs lowered for abstract inputs (nothing is allocated)."""
        with_sh = lambda tree, sh: jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                                                tree, sh) if sh is not None else tree
        params = with_sh(abstract_params, self.param_shardings)
        opt = with_sh(jax.eval_shape(self.tx.init, abstract_params), self.opt_shardings)
        scalar = lambda dt: jax.ShapeDtypeStruct((), dt)
        upd = self.update.lower(params, opt, self.abstract_data(n_micro_cap, row_len), scalar(jnp.int32),
                                scalar(_F32), scalar(_F32))
        val = self.values.lower(params, self.abstract_data(n_micro_cap, row_len, VALUE_FIELDS), scalar(jnp.int32))
        return upd, val
