"""The policy update: PPO epochs x mini-batches x micro-batches over a RolloutBatch, AdamW.

Owns `Trainer`: (re)computing old / reference log-probs and the update loop. Its settings (OptimConfig,
LossConfig, UpdateConfig, lr_at, NonFiniteError) are memjax/rl/update_config.py's, bound here too (config files
import them from here); the jitted programs are memjax/rl/update_programs.py's, the row layout
memjax/rl/packing.py's and memjax/rl/assemble.py's.
Invariants: each mini-batch is ONE jitted call (accumulation, clip, AdamW, the non-finite guard; params and
optimizer state donated; metrics fetched once); every micro-batch loss is divided by the mini-batch's GLOBAL
denominator, so the accumulated gradient equals the full mini-batch gradient exactly, packed or not; parameters
stay in param_dtype and are ZeRO-3 sharded with a mesh; the learning rate counts TRAINING steps; advantages are
consumed (`batch.advantages`, `batch.row_weight`), never chosen, and a batch without them is refused; with several
processes `update(batch, shard=RowShard)` gets THIS process's samples and gives the one-process result.
`Trainer`'s docstring details rows, old log-probs, the reference and the optimizer state; docs/trainer.md, "The
update", the program.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ..parallel import data_size, micro_rows_for
from .assemble import RowLayout, RowShard, global_max, global_sum, take_local
from .batch import RolloutBatch
from .update_programs import IS_METRICS, UpdatePrograms
from .update_config import LossConfig, NonFiniteError, OptimConfig, UpdateConfig, lr_at


def _denominator(mask: np.ndarray, row_w: np.ndarray, agg: str, loss_scale_tokens) -> float:
    """memjax.rl.losses.agg_denominator in numpy (host side: no device op per mini-batch shape)."""
    n = (mask != 0).sum(-1).astype(np.float64)
    if agg == "token-mean":
        return float((row_w * n).sum())
    den = float(np.where(n > 0, row_w, 0.0).sum())
    return den * loss_scale_tokens if agg == "seq-mean-token-sum-norm" else den


class OptimizerState(nnx.Module):
    """The optax state's leaves as nnx Variables `s0, s1, ...` (flatten order), so checkpoint code can use
    nnx.state(trainer.optimizer) / nnx.update(trainer.optimizer, ...) as with an nnx.Optimizer."""

    def __init__(self, opt_state):
        leaves, self._treedef = jax.tree.flatten(opt_state)
        self._n = len(leaves)
        self.train_step = nnx.Variable(jnp.zeros((), jnp.int32))  # update() calls so far (checkpointed with it)
        for i, leaf in enumerate(leaves):
            setattr(self, f"s{i}", nnx.Variable(leaf))

    def get(self):
        return jax.tree.unflatten(self._treedef, [getattr(self, f"s{i}")[...] for i in range(self._n)])

    def set(self, opt_state) -> None:
        for i, leaf in enumerate(jax.tree.leaves(opt_state)):  # new Variables: the old arrays were donated
            setattr(self, f"s{i}", nnx.Variable(leaf))


class Trainer:
    """The policy update over RolloutBatches.

    - Rows: conversations are laid into rows of one bucket length per mini-batch (`UpdateConfig.pack`: several per
      row with segment ids and positions restarting per conversation; otherwise one per row), grouped into
      micro-batches of `micro_rows` (rounded up to a multiple of the mesh's data x fsdp devices,
      memjax.parallel.micro_rows_for), and the micro-batch count padded to a power of two >= min_micro_batches (a
      traced trip count skips the padding): one update and one log-prob program per row bucket while mini-batches need
      at most min_micro_batches micro-batches, one more per power of two beyond.
    - Several processes: mini-batches are drawn over the global sample numbering (the same on every process), each
      process packs its own conversations into its block of every micro-batch's rows (memjax/rl/assemble.py), row
      length and micro-batch count are agreed by a small all-gather, recomputed log-probs are read back from the
      process's own shards, and denominators and statistics are summed over processes.
    - The reference policy (only when LossConfig.kl_coef > 0) is kept in UpdateConfig.ref_dtype (bf16 by default),
      sharded like the policy; with kl_coef == 0 nothing of it is allocated.
    - The learning rate schedule counts training steps: `update(batch, step=...)` (default: this trainer's count of
      update calls), not optimizer steps.
    - A non-finite loss or gradient norm is caught on device before the optimizer applies it: with
      `OptimConfig.on_nonfinite="stop"` (default) a NonFiniteError stops the run with the model untouched; "skip"
      drops that optimizer step and counts it in `skipped_steps`.
    - Old log-probs are recomputed by the trainer before the first update; the engine's are kept for the mismatch
      metric (mean / max |engine - trainer| over response tokens), never taken as equal. With `reuse_first_old_logp`
      the first mini-batch of the first epoch takes them from its own forward (the same weights: exact).
    - Optimizer state: `trainer.opt_state` (optax pytree); `trainer.optimizer` holds it as an nnx Module, so
      checkpoints use nnx.state(trainer.optimizer) / nnx.update(trainer.optimizer, ...). `reset_optimizer()` gives
      fresh state and `set_reference(params)` a new KL reference (curriculum stage restarts, memjax/run/curriculum.py).
    """
    def __init__(self, model, optim: OptimConfig = OptimConfig(), loss: LossConfig = LossConfig(),
                 update: UpdateConfig = UpdateConfig(), ref_model=None, mesh=None):
        if loss.kl_coef and ref_model is None:
            raise ValueError("Trainer: LossConfig.kl_coef > 0 needs a reference model")
        self.model, self.mesh = model, mesh
        self.optim_cfg, self.loss_cfg, self.update_cfg = optim, loss, update
        self._dp = data_size(mesh) if mesh is not None else 1
        # rows per device is the unit: micro_rows rounds up to a multiple of data x fsdp (memjax.parallel)
        update = self.update_cfg = replace(update, micro_rows=micro_rows_for(update.micro_rows, self._dp))
        graphdef, params = nnx.split(model, nnx.Param)
        self.step_fn = UpdatePrograms(graphdef, jax.eval_shape(lambda: params), mesh, optim, loss, update,
                                 temperature=update.temperature, use_ref=bool(loss.kl_coef),
                                 use_entropy=bool(loss.entropy_coef))
        # this process's block of every micro-batch's rows (all of them with one process)
        self.rows = RowLayout(update, self.step_fn.data_sharding)
        params = self._placed(params)
        nnx.update(model, params)
        self.ref_params = None  # the reference policy: bf16 params, only when the KL term needs it
        if loss.kl_coef:
            self.ref_params = self._ref_copy(ref_model)
        self.optimizer = OptimizerState(self.step_fn.init_opt(params))
        self.optimizer_steps = 0  # applied updates (this process)
        self.last_timings: dict[str, float] = {}  # seconds of the last update()'s old_logp / ref_logp / update parts

    def _ref_copy(self, ref):
        rd = jnp.dtype(self.update_cfg.ref_dtype)
        ref = nnx.state(ref, nnx.Param) if isinstance(ref, nnx.Module) else ref
        return self._placed(jax.tree.map(  # always a copy: the policy's arrays get donated
            lambda a: jnp.array(a, dtype=rd if jnp.issubdtype(a.dtype, jnp.floating) else a.dtype, copy=True), ref))

    def set_reference(self, ref) -> None:
        """Make `ref` (a module or an nnx.State of its Params) the KL reference policy, copied in ref_dtype; a
        no-op without a KL term. The loop calls it when a curriculum stage restarts from a checkpoint."""
        if self.ref_params is not None:
            self.ref_params = None  # drop the old copy first
            self.ref_params = self._ref_copy(ref)

    def reset_optimizer(self) -> None:
        """Fresh optimizer state for the current parameters (AdamW moments and its count at zero), as a new run
        starting from these weights has; `train_steps` is kept."""
        self.optimizer.set(self.step_fn.init_opt(nnx.state(self.model, nnx.Param)))

    # -- state ----------------------------------------------------------------------------------------
    def _placed(self, params):
        sh = self.step_fn.param_shardings
        return params if sh is None else jax.device_put(params, sh)

    @property
    def train_steps(self) -> int:
        """update() calls so far, the schedule's default step; part of nnx.state(trainer.optimizer), so a
        resumed run continues its warm-up where it stopped."""
        return int(self.optimizer.train_step[...])

    @train_steps.setter
    def train_steps(self, value: int) -> None:
        self.optimizer.train_step = nnx.Variable(jnp.asarray(value, jnp.int32))

    @property
    def opt_state(self):
        """The optax state (sharded like the parameters); checkpoints use nnx.state(trainer.optimizer)."""
        st = self.optimizer.get()
        sh = self.step_fn.opt_shardings
        return st if sh is None else jax.device_put(st, sh)

    @opt_state.setter
    def opt_state(self, value) -> None:
        self.optimizer.set(value)

    # -- array plumbing -----------------------------------------------------------------------------
    def _plans(self, batch: RolloutBatch, parts: list[np.ndarray]) -> list:
        """(rows, packing, Slots) of each mini-batch `parts` (this process's row indices), None for one that no
        process has rows of (memjax/rl/assemble.py RowLayout.plans: two small all-gathers)."""
        return self.rows.plans(batch.lengths, parts)

    def _build(self, plan, fields: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        """This process's rows of one mini-batch as the global [cap, micro_rows, L] arrays: each process lays
        its own conversations into its slots (jax.make_array_from_process_local_data)."""
        return self.rows.build(plan, fields, step_level=self.loss_cfg.level == "step")

    def _logprobs(self, params, batch: RolloutBatch, plans: list) -> np.ndarray:
        """Log-probs [N, T] of this process's rows, mini-batch by mini-batch (`plans` of _plans), so the
        update's programs see the same (micro-batch count, row length) shapes; read back from this process's
        own shards (no gather)."""
        out = np.zeros(batch.input_ids.shape, np.float32)
        for plan in plans:
            if plan is None:
                continue
            rows, p, sl = plan
            data = self._build(plan, {"input_ids": batch.input_ids, "loss_mask": batch.loss_mask})
            lp = take_local(self.step_fn.logprobs(params, data, np.int32(sl.n_micro)))
            out[rows] = p.unpack(lp.reshape(-1, sl.row_len), batch.input_ids.shape[1]) * (batch.loss_mask[rows] > 0)
        return out

    def logprobs(self, model, batch: RolloutBatch) -> np.ndarray:
        """Per-token log-probs [N, T] of the batch (this process's rows) under `model` (zero where loss_mask is 0)."""
        return self._logprobs(self._placed(nnx.state(model, nnx.Param)), batch,
                              self._plans(batch, [np.arange(batch.num_rows)]))

    def _token_weights(self, batch: RolloutBatch, row_w: np.ndarray) -> np.ndarray:
        valid = (batch.loss_mask != 0).astype(np.float32)
        w = row_w[:, None] * valid
        if self.loss_cfg.agg == "seq-mean-token-mean":
            w = w / np.maximum(valid.sum(1, keepdims=True), 1.0)
        return w.astype(np.float32)

    # -- the update -----------------------------------------------------------------------------------
    def _mini_batches(self, batch: RolloutBatch, shard: RowShard, seed: int) -> list[list]:
        """Per epoch, the plan of each mini-batch (None for one no process has rows of): mini-batches are drawn over
        the step's GLOBAL sample numbering (the same on every process) and each process plans its own rows."""
        u = self.update_cfg
        rng = np.random.default_rng(seed)
        mine = shard.samples[batch.sample]  # global sample index of each of this process's rows
        epochs = [[np.nonzero(np.isin(mine, part))[0]
                   for part in np.array_split(rng.permutation(shard.total), u.mini_batches)]
                  for _ in range(u.ppo_epochs)]
        return [self._plans(batch, parts) for parts in epochs]

    def _recompute_old(self, params, batch: RolloutBatch, todo: list, stats: dict) -> RolloutBatch:
        """Old log-probs of the rows of `todo`'s mini-batches recomputed by the trainer; the engine's log-probs kept
        for the mismatch metric (mean / max |engine - trainer| over every process's response tokens)."""
        old = self._logprobs(params, batch, todo)
        done = np.zeros(batch.num_rows, bool)
        for pl in todo:
            done[pl[0]] = True
        diff = np.abs(old - batch.old_logp)[(batch.loss_mask > 0) & done[:, None]]
        tot, top = global_sum([diff.sum(), diff.size]), global_max([diff.max() if diff.size else 0.0])
        if tot[1]:
            stats["logp_mismatch_mean"] = float(tot[0] / tot[1])
            stats["logp_mismatch_max"] = float(top[0])
        return batch.replace(old_logp=np.where(done[:, None], old, batch.old_logp).astype(np.float32))

    def _denominators(self, batch: RolloutBatch, flat: list, row_w: np.ndarray) -> np.ndarray:
        """Each mini-batch's GLOBAL loss denominator from its masks, before any forward: [n, 1], or [n, 2] (steps,
        valid tokens) for step-level losses; summed over processes."""
        lc, mask = self.loss_cfg, batch.loss_mask > 0
        if lc.level == "step":
            return global_sum([[mask[pl[0]].any(1).sum(), mask[pl[0]].sum()] for pl in flat]).reshape(-1, 2)
        return global_sum([_denominator(batch.loss_mask[pl[0]], row_w[pl[0]], lc.agg, lc.loss_scale_tokens)
                           for pl in flat]).reshape(-1, 1)

    def update(self, batch: RolloutBatch, seed: int = 0, step: int | None = None,
               shard: RowShard | None = None) -> dict[str, float]:
        """One training step's policy update. `step`: the 0-based training step the learning-rate schedule
        reads (default: the number of earlier update() calls of this trainer). `batch` holds this process's
        samples with their advantages, `shard` says which of the step's global batch they are (default: the batch
        is the whole step, one process); every process lays its own rows into its slots (memjax/rl/assemble.py)
        and denominators and statistics are global."""
        u, lc = self.update_cfg, self.loss_cfg
        if batch.advantages is None:
            raise ValueError("Trainer.update: the batch has no advantages; assign them first (memjax.rl.credit."
                             "Credit.assign, or memjax.rl.advantages.with_advantages)")
        t_start = time.perf_counter()
        shard = RowShard.whole(batch) if shard is None else shard
        step = self.train_steps if step is None else int(step)
        lr = float(lr_at(self.optim_cfg, step))
        stats: dict[str, float] = {"lr": lr}
        mask = batch.loss_mask > 0
        params = self._placed(nnx.state(self.model, nnx.Param))
        plans = self._mini_batches(batch, shard, seed)
        t_old = time.perf_counter()
        reuse = u.reuse_first_old_logp and plans[0][0] is not None  # the same on every process (global plans)
        todo = [pl for pl in (plans[0][1:] if reuse else plans[0]) if pl is not None] if u.recompute_old_logp else []
        if lc.offpolicy.on:  # the engine's log-probs are the behaviour policy's; old_logp becomes pi_prox below
            batch = batch.with_behaviour()
        if todo:
            batch = self._recompute_old(params, batch, todo, stats)
        t_ref = time.perf_counter()
        if lc.kl_coef:
            batch = batch.replace(ref_logp=self._logprobs(self.ref_params, batch, plans[0]))
        t_rest = time.perf_counter()
        row_w = np.ones(batch.num_rows, np.float32) if batch.row_weight is None else np.asarray(batch.row_weight,
                                                                                                 np.float32)
        fields_ = {"input_ids": batch.input_ids, "loss_mask": batch.loss_mask, "old_logp": batch.old_logp,
                   "adv": np.asarray(batch.advantages, np.float32), "tok_w": self._token_weights(batch, row_w)}
        if lc.kl_coef:
            fields_["ref_logp"] = batch.ref_logp
        if lc.offpolicy.on:
            fields_["behaviour_logp"] = batch.behaviour_logp
        flat = [pl for pls in plans for pl in pls if pl is not None]
        dens = self._denominators(batch, flat, row_w)
        totals: dict[str, float] = {}
        steps = skipped = 0
        slots = real = 0
        for i, (plan, den) in enumerate(zip(flat, dens)):
            rows, p, sl = plan
            if lc.level == "step":
                denom = float(max(den[0], 1))
                # KL / entropy terms: token means over the mini-batch
                fields_["tok_w"] = (mask / max(den[1], 1)).astype(np.float32)
            else:
                denom = float(den[0])
            slots += sl.n_micro * u.micro_rows * sl.row_len
            real += int(p.lengths.sum())
            params, self.opt_state, m = self.step_fn.update(params, self.opt_state, self._build(plan, fields_),
                                                             np.int32(sl.n_micro), np.float32(denom), np.float32(lr),
                                                             np.float32(reuse and i == 0))
            nnx.update(self.model, params)  # the donated arrays are gone; the model holds the new ones
            m = {k: float(v) for k, v in jax.device_get(m).items()}  # the one host sync of a mini-batch
            if not m["ok"]:
                if self.optim_cfg.on_nonfinite == "stop":
                    bad = "loss" if not math.isfinite(m["loss"]) else "gradient"
                    raise NonFiniteError(f"non-finite {bad} (loss {m['loss']}, gradient norm {m['grad_norm']}) "
                                         f"at optimizer step {self.optimizer_steps + 1}; the update was not "
                                         f"applied")
                skipped += 1
                continue
            self.optimizer_steps += 1
            steps += 1
            keys = ["clipfrac", "clipfrac_high", "clipfrac_low", "approx_kl", "ratio_mean", "grad_norm", "loss"]
            keys += ["kl_ref"] if lc.kl_coef else []
            keys += ["entropy"] if lc.entropy_coef else []
            keys += list(IS_METRICS) if lc.offpolicy.on else []
            for key in keys:
                totals[key] = totals.get(key, 0.0) + m[key]
        self.train_steps += 1
        counts = global_sum([real, float(batch.reward.sum()), batch.num_samples, float(mask.sum())])
        stats.update({k: v / max(steps, 1) for k, v in totals.items()})
        stats["optimizer_steps"] = steps
        stats["skipped_steps"] = skipped
        stats["pad_fraction"] = 1.0 - float(counts[0]) / max(slots, 1)
        stats["reward_mean"] = float(counts[1] / counts[2]) if counts[2] else 0.0
        stats["response_tokens"] = float(counts[3])
        t_end = time.perf_counter()  # seconds of this call's parts (memjax/rl/phases.py): they add up to its wall time
        self.last_timings = {"update": (t_old - t_start) + (t_end - t_rest)}
        self.last_timings.update({"old_logp": t_ref - t_old} if todo else {})
        self.last_timings.update({"ref_logp": t_rest - t_ref} if lc.kl_coef else {})
        return stats
