"""The trainer's two jitted programs over packed rows: log-probs of a whole batch, and one mini-batch update.

Owns `UpdatePrograms` (from the model's graphdef, the mesh and the trainer configs), functional over
(params, opt_state): `logprobs(params, data, n_micro)` -> f32 [M, m, L] (old and reference policy; micro-batches
past n_micro are never computed, a traced `fori_loop` trip count, so the row count does not recompile) and
`update(params, opt_state, data, n_micro, denom, lr, self_old)` -> (params, opt_state, metrics) (gradient
accumulation in ONE jitted call, global-norm clip, AdamW with `lr` an argument, the non-finite guard), and
`accumulate_once_per_update`, shared with the critic (memjax/rl/value_step.py).
Invariants: params and opt_state are DONATED (callers drop their references and use the returned ones); metrics
are one small dict of f32 scalars, one host sync per mini-batch; per-token terms are weighted by a host-computed
`tok_w` and divided by the mini-batch's global denominator, which gives exactly memjax.rl.losses.policy_loss of the
unpacked rows for any aggregation; with a mesh, data arrays are sharded P(None, (data, fsdp)) and params, optimizer
state and accumulators follow the ZeRO-3 parameter shardings. `UpdatePrograms`' docstring has the data-parallel
gradient reduction and its tensor-axis exception; docs/trainer.md, "The update".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ..kernels import step_ratio_loss, token_clip_surrogate
from ..model.flash_attention import training_attention
from ..parallel import DATA, FSDP, TENSOR, layer_sharding, param_shardings
from .logprobs import token_logprobs
from .losses import kl_penalty
from .offpolicy import importance_weights

_F32 = jnp.float32
IS_METRICS = ("is_weight_mean", "is_truncated_frac", "is_masked_frac", "logp_gap_mean")  # offpolicy on
TOKEN_METRICS = ("clipfrac", "clipfrac_high", "clipfrac_low", "approx_kl", "ratio_mean", "entropy", "kl_ref",
                 *IS_METRICS)


def core_transform(optim) -> optax.GradientTransformation:
    """AdamW without the learning rate (applied by the step: p <- p - lr * update)."""
    parts = [optax.clip_by_global_norm(optim.grad_clip)] if optim.grad_clip else []
    parts += [optax.scale_by_adam(b1=optim.b1, b2=optim.b2, eps=optim.eps),
              optax.add_decayed_weights(optim.weight_decay)]
    return optax.chain(*parts)


def reduces_once_per_update(mesh, layer_sharding) -> bool:
    """Whether the update's micro-batch loop runs per data replica, its gradients reduced over data once per update
    (a sharded mesh with data > 1 and tensor = 1; module docstring)."""
    return layer_sharding is not None and mesh.shape[DATA] > 1 and mesh.shape[TENSOR] == 1


def accumulate_once_per_update(accumulate, mesh, layer_sharding, param_shardings, params, data, n_micro, denom,
                               *extra):
    """(gradient sums, metric sums) of `accumulate(params, data, n_micro, denom, sharding)` over the whole batch,
    shared by the policy's and the critic's (memjax/rl/value_step.py) updates. With `reduces_once_per_update`:
    each data replica accumulates its own rows' gradients (`jax.shard_map` manual over "data" only, fsdp left to
    the partitioner with `layer_sharding.local()`; reduced over fsdp per micro-batch, inside a host) and the
    replicas' sums, gradients and metric sums alike (every metric must be a sum), are all-reduced over data ONCE
    per update (between hosts). Otherwise (one device, data = 1, or tensor > 1: XLA's partitioner aborts on that
    partial-manual program) one accumulation over the global rows, gradients reduced over data x fsdp per
    micro-batch. `accumulate` must constrain its accumulators to `param_shardings`; `extra` (replicated scalars)
    are passed to it after the sharding."""
    if not reduces_once_per_update(mesh, layer_sharding):
        return accumulate(params, data, n_micro, denom, None, *extra)

    def replica(params, data, n_micro, denom, *extra):
        return jax.lax.psum(accumulate(params, data, n_micro, denom, layer_sharding.local(), *extra), DATA)

    grads, sums = jax.shard_map(replica, mesh=mesh, in_specs=(P(), P(None, DATA), P(), P(), *[P()] * len(extra)),
                                out_specs=P(), axis_names={DATA}, check_vma=False)(params, data, n_micro, denom, *extra)
    return jax.lax.with_sharding_constraint(grads, param_shardings), sums


class UpdatePrograms:
    """The trainer's jitted log-prob and update programs.

    Loss over packed rows: every per-token term (surrogate + kl_coef KL - entropy_coef H) is multiplied by `tok_w`
    (w_i for token-mean and the seq-mean-token-sum modes, w_i / n_i for seq-mean-token-mean; w_i the conversation's
    row weight, n_i its valid tokens) and summed; dividing by the mini-batch's global denominator (agg_denominator of
    the unpacked conversations) gives exactly memjax.rl.losses.policy_loss of the unpacked rows. level="step": one
    segment per conversation (`data["local"]`, its index within the micro-batch, -1 on padding), `num_segments` =
    micro_rows x max_segments (static). `self_old` > 0: the old log-probs are the update's own forward's
    (stop_gradient), exact for the first mini-batch of the first epoch.
    With a mesh the forward uses memjax.parallel.layer_sharding (weights gathered layer by layer inside the scanned
    loop, gradients reduce-scattered). With data > 1 and tensor = 1 the micro-batch loop runs per data replica
    (`jax.shard_map` manual over "data" only; `layer_sharding(...).local()`): each replica accumulates its own rows'
    gradients, reduced inside its fsdp group per micro-batch, and the replicas' gradient and metric sums are
    all-reduced over data once per update (`accumulate_once_per_update`): on the hybrid multi-host mesh the only
    gradient traffic between hosts. With a tensor axis the gradients stay reduced over data x fsdp per micro-batch
    (XLA's SPMD partitioner aborts on that partial-manual program in jax 0.11). Metric sums are exact for token means;
    a step-level metric is a mean per replica weighted by its tokens.
    """
    def __init__(self, graphdef, abstract_params, mesh, optim, loss, update, *, temperature: float,
                 use_ref: bool, use_entropy: bool):
        self.graphdef, self.mesh = graphdef, mesh
        self.loss_cfg, self.update_cfg, self.temperature = loss, update, temperature
        self.use_ref, self.use_entropy = use_ref, use_entropy
        self.tx = core_transform(optim)
        self.num_segments = update.micro_rows * (update.max_segments if update.pack else 1)
        self.attention = training_attention(update.attention, packed=update.pack, max_segments=update.max_segments)
        sharded = mesh is not None and mesh.size > 1
        self.param_shardings = param_shardings(abstract_params, mesh) if sharded else None
        self.layer_sharding = layer_sharding(mesh) if sharded else None
        self.data_sharding = NamedSharding(mesh, P(None, (DATA, FSDP))) if sharded else None
        if sharded:
            abstract_opt = jax.eval_shape(self.tx.init, abstract_params)
            rep = NamedSharding(mesh, P())
            self.opt_shardings = optax.tree_map_params(self.tx, lambda _, s: s, abstract_opt,
                                                       self.param_shardings, transform_non_params=lambda _: rep)
        else:
            self.opt_shardings = None
        self.logprobs = jax.jit(self._logprobs)
        self.update = jax.jit(self._update, donate_argnums=(0, 1))
        self.init_opt = jax.jit(self.tx.init, out_shardings=self.opt_shardings)

    # -- pieces ---------------------------------------------------------------------------------------
    def _constrain(self, tree, shardings):
        return tree if shardings is None else jax.lax.with_sharding_constraint(tree, shardings)

    def _forward(self, params, mb, *, remat: bool, sharding=None):
        model = nnx.merge(self.graphdef, params)
        return token_logprobs(model, mb["input_ids"], mb["loss_mask"], temperature=self.temperature, remat=remat,
                              positions=mb["positions"], segment_ids=mb["segment_ids"] if self.update_cfg.pack
                              else None, attention=self.attention, sharding=sharding or self.layer_sharding)

    def _loss(self, params, mb, denom, sharding=None, self_old=None):
        lc = self.loss_cfg
        logp, ent = self._forward(params, mb, remat=self.update_cfg.remat, sharding=sharding)
        mask = mb["loss_mask"]
        if self_old is not None:  # the first mini-batch: the weights the old log-probs are of (ratio exactly 1)
            mb = {**mb, "old_logp": jnp.where(self_old > 0, jax.lax.stop_gradient(logp), mb["old_logp"])}
        if lc.level == "step":
            value, m = step_ratio_loss(logp, mb["old_logp"], mb["adv"], mask, mb["local"],
                                       num_segments=self.num_segments, clip_low=lc.clip_low,
                                       clip_high=lc.clip_high, dual_clip=lc.dual_clip,
                                       log_ratio_clamp=lc.log_ratio_clamp,
                                       log_ratio_clamp_mode=lc.log_ratio_clamp_mode)
            value = value * jax.lax.stop_gradient(m["num_steps"]) / denom
            valid = mask != 0  # kl / entropy: token means over the mini-batch (tok_w = 1 / its token count)
            out = {"num_tokens": jnp.sum(valid).astype(_F32), **{k: m[k] for k in TOKEN_METRICS if k in m}}
            if self.use_ref:
                kl = jnp.where(valid, kl_penalty(logp, mb["ref_logp"], lc.kl_estimator), 0.0)
                value = value + lc.kl_coef * jnp.sum(kl * mb["tok_w"])
                out["kl_ref"] = jax.lax.stop_gradient(jnp.sum(kl) / jnp.maximum(out["num_tokens"], 1.0))
            if self.use_entropy:
                e = jnp.where(valid, ent, 0.0)
                value = value - lc.entropy_coef * jnp.sum(e * mb["tok_w"])
                out["entropy"] = jax.lax.stop_gradient(jnp.sum(e) / jnp.maximum(out["num_tokens"], 1.0))
            return value, out
        pg, _, sm = token_clip_surrogate(logp, mb["old_logp"], mb["adv"], mask, clip_low=lc.clip_low,
                                         clip_high=lc.clip_high, dual_clip=lc.dual_clip,
                                         log_ratio_clamp=lc.log_ratio_clamp,
                                         log_ratio_clamp_mode=lc.log_ratio_clamp_mode)
        valid = mask != 0
        count = jnp.maximum(sm["num_tokens"], 1.0)
        metrics = {k: sm[k] for k in ("clipfrac", "clipfrac_high", "clipfrac_low", "approx_kl", "ratio_mean",
                                      "num_tokens")}
        if lc.offpolicy.on:  # decoupled PPO: pg(pi_theta / pi_prox) weighted by pi_prox / pi_behave (no gradient)
            w, ism = importance_weights(mb["old_logp"], mb["behaviour_logp"], mask, lc.offpolicy)
            pg = pg * w
            metrics.update({k: ism[k] for k in IS_METRICS})  # means over the mini-batch's tokens (sums only)
        per_tok = pg
        if self.use_ref:
            kl = jnp.where(valid, kl_penalty(logp, mb["ref_logp"], lc.kl_estimator), 0.0)
            per_tok = per_tok + lc.kl_coef * kl
            metrics["kl_ref"] = jnp.sum(kl) / count
        if self.use_entropy:
            e = jnp.where(valid, ent, 0.0)
            per_tok = per_tok - lc.entropy_coef * e
            metrics["entropy"] = jnp.sum(e) / count
        num = jnp.sum(jnp.where(valid, per_tok * mb["tok_w"], 0.0))
        return num / denom, jax.tree.map(jax.lax.stop_gradient, metrics)

    # -- the programs -------------------------------------------------------------------------------
    def _data(self, data):
        return data if self.data_sharding is None else jax.lax.with_sharding_constraint(
            data, jax.tree.map(lambda _: self.data_sharding, data))

    def _logprobs(self, params, data, n_micro):
        data = self._data(data)
        out = jnp.zeros(data["input_ids"].shape, _F32)

        def body(i, out):
            mb = jax.tree.map(lambda x: x[i], data)
            logp, _ = self._forward(params, mb, remat=False)
            return jax.lax.dynamic_update_index_in_dim(out, logp, i, 0)

        out = jax.lax.fori_loop(0, n_micro, body, out)
        return out if self.data_sharding is None else jax.lax.with_sharding_constraint(out, self.data_sharding)

    def _accumulate(self, params, data, n_micro, denom, sharding=None, self_old=None):
        """(gradient sums, metric sums) over micro-batches 0..n_micro-1 of `data`."""
        zeros = self._constrain(jax.tree.map(lambda p: jnp.zeros(p.shape, _F32), params), self.param_shardings)
        keys = ("loss", "num_tokens") + TOKEN_METRICS
        sums0 = {k: jnp.zeros((), _F32) for k in keys}

        def body(i, carry):
            acc, sums = carry
            mb = jax.tree.map(lambda x: x[i], data)
            (value, m), g = jax.value_and_grad(self._loss, has_aux=True)(params, mb, denom, sharding, self_old)
            acc = self._constrain(jax.tree.map(lambda a, b: a + b.astype(_F32), acc, g), self.param_shardings)
            n = m["num_tokens"]
            sums = {**sums, "loss": sums["loss"] + value, "num_tokens": sums["num_tokens"] + n,
                    **{k: sums[k] + m[k] * n for k in TOKEN_METRICS if k in m}}
            return acc, sums

        return jax.lax.fori_loop(0, n_micro, body, (zeros, sums0))

    def _update(self, params, opt_state, data, n_micro, denom, lr, self_old=0.0):
        data = self._data(data)
        denom = jnp.maximum(jnp.asarray(denom, _F32), 1e-30)
        grads, sums = accumulate_once_per_update(self._accumulate, self.mesh, self.layer_sharding,
                                                 self.param_shardings, params, data, n_micro, denom,
                                                 jnp.asarray(self_old, _F32))
        gnorm = optax.tree.norm(grads)
        upd, new_opt = self.tx.update(grads, opt_state, params)
        new_params = jax.tree.map(lambda p, u: (p - lr * u).astype(p.dtype), params, upd)
        ok = jnp.isfinite(sums["loss"]) & jnp.isfinite(gnorm)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)
        params = self._constrain(keep(new_params, params), self.param_shardings)
        opt_state = self._constrain(keep(new_opt, opt_state), self.opt_shardings)
        tok = jnp.maximum(sums["num_tokens"], 1.0)
        metrics = {"loss": sums["loss"], "grad_norm": gnorm, "ok": ok.astype(_F32), "num_tokens": sums["num_tokens"],
                   **{k: sums[k] / tok for k in TOKEN_METRICS}}
        return params, opt_state, metrics

    # -- abstract inputs (memory plans, HLO inspection) ---------------------------------------------
    def abstract_data(self, n_micro_cap: int, row_len: int) -> dict:
        m = self.update_cfg.micro_rows
        sd = lambda dt: jax.ShapeDtypeStruct((n_micro_cap, m, row_len), dt, sharding=self.data_sharding)
        data = {"input_ids": sd(jnp.int32), "positions": sd(jnp.int32), "segment_ids": sd(jnp.int32),
                "loss_mask": sd(_F32), "old_logp": sd(_F32), "adv": sd(_F32), "tok_w": sd(_F32)}
        if self.use_ref:
            data["ref_logp"] = sd(_F32)
        if self.loss_cfg.offpolicy.on:
            data["behaviour_logp"] = sd(_F32)
        if self.loss_cfg.level == "step":
            data["local"] = sd(jnp.int32)
        return data

    def lower_update(self, abstract_params, n_micro_cap: int, row_len: int):
        """The update program lowered for abstract inputs (ShapeDtypeStructs: nothing is allocated);
        `.compile().memory_analysis()` / `.as_text()` of the result are what a device would run."""
        with_sh = lambda tree, sh: jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                                                tree, sh) if sh is not None else tree
        params = with_sh(abstract_params, self.param_shardings)
        opt = with_sh(jax.eval_shape(self.tx.init, abstract_params), self.opt_shardings)
        scalar = lambda dt: jax.ShapeDtypeStruct((), dt)
        return self.update.lower(params, opt, self.abstract_data(n_micro_cap, row_len), scalar(jnp.int32),
                                 scalar(_F32), scalar(_F32), scalar(_F32))
