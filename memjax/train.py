"""`python -m memjax.train [CONFIG.py] [--set key=value ...]`: the one RL training loop of every agent system.

Owns: the loop (its config, TrainConfig, lives in memjax/train_config.py)
  system data stream -> the system's workflow on the engine with the current weights (memjax/agents
  run_workflow) -> rewards (+ the system's shaping) -> [ablation] -> group filter / dynamic sampling
  (optional) -> credit assignment (memjax/rl/credit.py: GRPO, or GAE with the PPO critic; or the system's
  own) -> Trainer.update (old/ref log-probs, PPO epochs x mini-batches x micro-batches, AdamW; token- or
  step-level ratios; the engine sleeps through it, its KV pool and rollout weights freed, when
  `engine_sleep`) -> in-process weight hand-off to the engine -> metrics (JSONL + TensorBoard +
  terminal) -> held-out evaluation (System.evaluate: before, every `eval_every` steps, after) -> orbax
  checkpoint.
Rollouts: `engine.data_parallel=-1` spreads the engine over the mesh's devices (D groups of
engine.tensor_parallel = T devices, T = mesh.tensor keeps the trainer's tensor groups; one slot group and 1/D of
the KV pool each, weights resharded from the trainer's layout at every hand-off; engine.max_slots,
prefill_slots, num_pages and kv_cache_bytes are then totals; it also applies when the system brings its own
engine config); the default 1 runs it on one device.
Several processes (memjax.launch, jax.distributed): each process rolls out its block of whole groups on its own
devices and keeps its rollouts' token arrays: the trainer (and the critic with GAE) assemble the global arrays
from every process's own rows (memjax/rl/assemble.py). Only rewards, statistics, row lengths, kept-group counts
(dynamic sampling), scalar sums (GAE's whitening and metrics) and, with a reward ablation, the per-sample (and
per-credit-unit) rewards are exchanged: the ablation permutes or averages the global reward vector and each
process keeps its slice, so every path gives the one-process result.
The system is chosen by `agent.name` from the registry in memjax/systems (memagent, tiny, ...); `--set
agent.name=X` swaps the `agent` section for X's defaults. The sampling temperature has one source: the
system's (`agent...temperature`); the trainer's log-probs use it (`update.temperature` must be left at
its default 1.0 or equal it).
Invariants: rollout seeds derive from (seed, step, generation batch) -- that is the whole RNG state besides
the data stream and the ablation's permutations -- and the data stream's and the ablation generator's states
are saved with each checkpoint, so a run resumed from its latest checkpoint reproduces the uninterrupted run
bit for bit (on the same device kind), also after SIGKILL. A checkpoint (orbax, written asynchronously, committed atomically by rename) holds the parameters,
the optimizer state (and the critic's with GAE), the step, the seed, the data stream state and the
evaluations so far; the last `keep_checkpoints` are kept. A checkpoint that fails to restore is moved aside
into checkpoints_corrupt/ with a warning and the previous one is used; every save is verified
(memjax.checkpoint.run_checkpoints). The whole config is validated and out_dir locked (memjax.runio) before
the model loads; on resume, metrics.jsonl, traces.jsonl and evals.jsonl are cut back to the restored step,
so no line is repeated, and TensorBoard is told to purge events past it (tensorboardX purge_step). A
non-finite loss or gradient stops the run before the update is applied (OptimConfig.on_nonfinite), leaving
the last good checkpoint as the latest and no hf/ export. Outputs in out_dir: metrics.jsonl, evals.jsonl,
TensorBoard events (tb/), traces.jsonl, result.json (config, evaluations before/after, per-step history),
reward_curve.png, checkpoints/, hf/ (the final policy as a Hugging Face checkpoint), report.html (memjax.report) and
run.json (memjax/run_identity.py: what the run is; a resume of another config refuses, a finished run re-run is a
no-op, an extended one keeps what its result.json held).
Curriculum stages (System.stage; memjax/curriculum.py): each stage ends with an evaluation and a checkpoint;
with `select_metric` each stage's best evaluated weights go to checkpoints_best/, and `stage_restart="best"`
starts each stage from the previous stage's best (`stage_optimizer`, `stage_reference`: what else restarts).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from rich.console import Console

from . import flops, preflight, run_identity
from .agents.workflow import run_workflow
from .checkpoint import save_hf
from .cli_check import check_train
from .checkpoint.run_checkpoints import RunCheckpoints, one_line, placed_like
from .config import ConfigError, run_cli
from .curriculum import Curriculum
from .engine import Engine
from .parallel import code_digest, initialize, is_primary, on_mesh, rollout_devices
from .parallel.lifecycle import StopRequests, agree_run, peer_loss, run_console, stop_line
from .parallel.split import allgather_ragged
from .report import write_report
from .rl.batch import unit_index
from .rl.credit import Credit
from .rl.dapo import DynamicSampler, filter_groups
from .rl.phases import PhaseClock, console_line, phase_metrics
from .rl.assemble import global_sum
from .rl.shares import gather_records, gather_rollouts, gather_rows, gather_states, local_part, own_state, share
from .rl.trainer import Trainer
from .runio import JsonlLog, OutDirLock, prepare_out_dir, tb_writer, write_atomic
from .systems import build as build_system, shard_stream
from .train_config import ABLATIONS, TrainConfig  # noqa: F401  (re-exported: memjax.train.TrainConfig)


def rollout_seed(seed: int, step: int, gen_batch: int) -> int:
    """The workflow seed of generation batch g of training step `step` (0-based)."""
    return seed * 1_000_003 + step + 100_003 * gen_batch


def _ablate(batch, mode: str, rng: np.random.Generator):
    """The ablation on the trajectory rewards and, for systems with per-row credit (`unit_reward`, e.g.
    Memory-R2), the same on the credit units' rewards. `batch` is this process's block of a generation batch;
    the permutation / mean is over every process's values (`_ablated`), as one process holding the whole
    generation batch has it."""
    if mode == "none":
        return batch
    out = batch.replace(reward=_ablated(batch.reward, mode, rng))
    if batch.unit_reward is not None:
        first, inv = unit_index(batch)  # units in (sample, unit) order: process order concatenates them
        out = out.replace(unit_reward=_ablated(batch.unit_reward[first], mode, rng)[inv])
    return out


def _ablated(mine: np.ndarray, mode: str, rng: np.random.Generator) -> np.ndarray:
    """This process's part of the global vector (every process's `mine` in process order: one small
    all-gather of rewards, no tokens) permuted ("shuffle_rewards": same statistics, no link to what a
    trajectory did) or replaced by its mean ("zero_advantages"). Every process draws the same permutation."""
    parts = allgather_ragged(np.asarray(mine, np.float32))
    every = np.concatenate(parts)
    lo = sum(len(p) for p in parts[:jax.process_index()])
    new = rng.permutation(every) if mode == "shuffle_rewards" else np.full_like(every, every.mean())
    return new[lo:lo + len(mine)].astype(np.float32)


def _scalars(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if k not in ("traces", "samples")}


class Run:
    """One training run: builds everything from a TrainConfig and steps it; `run()` loops to cfg.steps."""

    def __init__(self, cfg: TrainConfig, console: Console | None = None):
        initialize(cfg.out_dir)  # several processes (memjax.launch, JAX_*/SLURM/Open MPI): before any backend call
        self.primary = is_primary()  # process 0 prints, logs, writes result files and holds the out_dir lock
        self.cfg, self.con = cfg, (console or run_console()) if self.primary else Console(quiet=True)
        self.code = code_digest()  # recorded in run.json and result.json
        agree_run(dataclasses.asdict(cfg))  # processes of one run refuse unless code and config match (names fields)
        if cfg.prompts_per_step < jax.process_count():  # each process runs whole groups: at least one
            raise ConfigError(f"prompts_per_step={cfg.prompts_per_step} is less than the {jax.process_count()} "
                              "processes; every process needs at least one sample per generation batch")
        try:
            self.system = build_system(cfg.agent, seed=cfg.seed)  # validates the system's inputs (data paths)
        except KeyError as e:
            raise ConfigError(str(e.args[0])) from None
        preflight.settings(cfg, self.system)  # groups for a group estimator, the warm start, no ignored override
        self.curriculum = Curriculum(cfg, self.system)
        t = self.system.temperature
        if cfg.update.temperature not in (1.0, t):
            raise ConfigError(f"update.temperature={cfg.update.temperature} but the rollouts sample at "
                              f"temperature {t} (agent): the trainer uses the rollout temperature; leave "
                              f"update.temperature at 1.0")
        if cfg.advantage.estimator == "gae" and cfg.loss.level == "step":
            raise ConfigError("advantage.estimator=gae gives per-token advantages; loss.level=step needs per-row "
                              "ones (use a GRPO estimator or the system's own)")
        self.out = prepare_out_dir(cfg.out_dir)  # before any model is loaded: a bad out_dir fails at once
        self._lock = OutDirLock(self.out).acquire() if self.primary else None
        try:  # a resume under another system or settings refuses; a finished run re-run is a no-op (run_identity)
            self._previous = run_identity.check_resume(self.out, cfg)
            self._finished = run_identity.finished(self.out, cfg)
            if self._finished is not None:
                self.history = list(self._finished.get("history", []))
                return
            self._build()
            if self.primary:
                run_identity.record(self.out, cfg, self.system.name, self.code, self.model_run, self._previous,
                                    say=lambda m: self.con.print(m, style="yellow", markup=False))
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        cfg, sysm = self.cfg, self.system
        try:  # the mesh must match the devices: checked before the model loads
            mesh = self.mesh = cfg.mesh.make()
        except ValueError as e:
            m = cfg.mesh
            raise ConfigError(f"mesh=(data {m.data}, fsdp {m.fsdp}, tensor {m.tensor}): {e} (jax sees "
                              f"{jax.device_count()} device(s))") from None
        from .plan import check

        self.model, self.tok = sysm.load_model(cfg.model)
        self.model_run = preflight.describe_model(self.model)  # what runs, whatever model.* says (tiny systems)
        try:  # engine.data_parallel=-1: a slot group per engine.tensor_parallel devices of the mesh (deployment
            ecfg = sysm.engine_config(cfg.engine)  # settings: they apply to systems with their own engine config too)
            ecfg = dataclasses.replace(ecfg, **{f: getattr(cfg.engine, f) for f in ("data_parallel", "tensor_parallel")
                                                if getattr(cfg.engine, f) != 1})
        except ValueError as e:
            raise ConfigError(f"engine: {e}") from None
        # every system, before its set-up (frozen engines, banks): can the config shard on these devices, and
        # (on devices with a memory limit, or against plan_hbm_gib) does it fit? One-line PlanError otherwise.
        planned = check(dataclasses.replace(cfg, engine=ecfg), hbm_gib=cfg.plan_hbm_gib or None,
                        min_kv_gib=cfg.min_kv_gib, model_cfg=self.model.cfg)
        sysm.setup(self.model, self.tok)
        ref = nnx.state(self.model, nnx.Param) if cfg.loss.kl_coef else None  # the Trainer copies it (ref_dtype)
        update = dataclasses.replace(cfg.update, temperature=sysm.temperature if sysm.temperature > 0 else 1.0)
        self.trainer = Trainer(self.model, cfg.optim, cfg.loss, update, cfg.advantage, ref_model=ref, mesh=mesh)
        self.credit = Credit(cfg.advantage, self.model, cfg.critic, seed=cfg.seed, mesh=mesh, update=update)
        try:
            if planned and ecfg.kv_budget_bytes is None and ecfg.num_pages is None:  # the pool the plan counted
                per_device = planned["bytes"]["kv_cache"]  # kv_cache_bytes is a total over the engine devices
                ecfg = dataclasses.replace(ecfg, kv_cache_bytes=per_device * planned.get("engine_devices", 1))
            self.engine = Engine(self.model, ecfg, devices=rollout_devices(mesh))
        except ValueError as e:
            raise ConfigError(f"engine: {e}") from None
        # each process reads its own block of every generation batch (whole groups: a sample's trajectories all
        # run where it was read); with one process the block is the whole batch
        self._block = share(cfg.prompts_per_step)
        self.data = sysm.train_data(cfg.prompts_per_step, cfg.seed)
        if jax.process_count() > 1:
            self.data = shard_stream(self.data, *self._block)
        if jax.process_count() > 1:  # no token array leaves its process (module docstring)
            self.con.print("rollouts: process-local (each process trains on its own rows)")
        self.rng = np.random.default_rng([cfg.seed, 99])  # the ablation's permutations
        self.ckpts = RunCheckpoints(self.out / "checkpoints", cfg.keep_checkpoints,
                                    warn=lambda m: self.con.print(m, style="yellow", markup=False),
                                    info=lambda m: self.con.print(m, markup=False))
        self.step, self.evals, self.history, self._best_meta = 0, [], [], None
        self._eval_extra: dict[int, Any] = {}  # evaluation traces/samples by step (saved with each checkpoint)
        self.curriculum.open(self.out / "checkpoints_best", warn=lambda m: self.con.print(m, style="yellow",
                                                                                           markup=False))
        if cfg.resume:
            self.ckpts.restore_latest(lambda _, step: self._restore(step))
        elif self.ckpts.all_steps():
            raise ConfigError(f"out_dir={cfg.out_dir}: holds checkpoints {self.ckpts.all_steps()} and resume=false; "
                              "use a new out_dir (or resume=true)")
        self.curriculum.resumed(self._best_meta, self.step, self.model, self.trainer)
        self.metrics_log = JsonlLog(self.out / "metrics.jsonl", self.primary)
        self.traces_log = JsonlLog(self.out / "traces.jsonl", self.primary)
        self.evals_log = JsonlLog(self.out / "evals.jsonl", self.primary)
        for log in (self.metrics_log, self.traces_log, self.evals_log):  # lines past the restored step were never
            log.truncate(self.step)                                       # checkpointed
        self.metrics_log.fill(self.history)  # a step checkpointed just before a kill may lack its line
        self._start_step = self.step
        self._tb = None  # TensorBoard writer, opened on the first step and closed at the end of run()
        self._saved_at = None  # the step of the last checkpoint save started

    # -- checkpoints ----------------------------------------------------------------------------------
    def _state(self):
        state = {"model": nnx.state(self.model, nnx.Param).to_pure_dict(),
                 "opt": nnx.state(self.trainer.optimizer).to_pure_dict()}
        critic = self.credit.state()
        if critic is not None:
            state["critic"] = critic
        return on_mesh(state, self.mesh)  # several processes: orbax saves only arrays of the global mesh

    def save(self) -> None:
        best = self.curriculum.sync(self.ckpts)  # the bests this checkpoint records are on disk
        self._saved_at = self.step
        meta = {"step": self.step, "seed": self.cfg.seed, "data": self.data.get_state(),
                "data_processes": gather_states(self.data.get_state()),
                "optimizer_steps": self.trainer.optimizer_steps, "evals": self.evals, "history": self.history,
                "ablation_rng": json.dumps(self.rng.bit_generator.state),
                "config": dataclasses.asdict(self.cfg), "best": best, "eval_extra": self._eval_extra}
        self.ckpts.save(self.step, args=ocp.args.Composite(  # waits for (and verifies) the previous save
            state=ocp.args.StandardSave(self._state()), meta=ocp.args.JsonSave(json.loads(json.dumps(meta, default=str)))))

    def close(self) -> None:
        """Finish (and verify) the save in flight, close the checkpoint manager, release out_dir's lock."""
        try:
            if getattr(self, "ckpts", None) is not None:
                try:
                    self.curriculum.sync(self.ckpts)
                finally:
                    self.ckpts.close()
                    self.ckpts = None
            if getattr(self, "_tb", None):  # False: no tensorboardX (the GPU image)
                self._tb.close()
                self._tb = None
        finally:
            if getattr(self, "curriculum", None) is not None:
                self.curriculum.close()
            if getattr(self, "_lock", None) is not None:
                self._lock.release()
                self._lock = None

    def _restore(self, step: int) -> None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, self._state())
        try:
            got = self.ckpts.mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                       meta=ocp.args.JsonRestore()))
        except Exception:
            self._check_same_model(step)  # another model's checkpoint is a config mistake, not corruption
            raise
        try:  # the checkpoint read back: failing to apply it is a config mismatch, not corruption
            params = nnx.state(self.model, nnx.Param)
            params.replace_by_pure_dict(placed_like(got["state"]["model"], params.to_pure_dict()))
            opt = nnx.state(self.trainer.optimizer)
            opt.replace_by_pure_dict(placed_like(got["state"]["opt"], opt.to_pure_dict()))
            self.data.set_state(own_state(got["meta"]))
            if "ablation_rng" in got["meta"]:  # the same on every process: each draws every permutation
                self.rng.bit_generator.state = json.loads(got["meta"]["ablation_rng"])
            if "critic" in got["state"]:
                self.credit.load_state(got["state"]["critic"])
        except Exception as e:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} does not fit this config "
                              f"({one_line(e)}); use a new out_dir") from None
        nnx.update(self.model, params)
        nnx.update(self.trainer.optimizer, opt)
        self.step = int(got["meta"]["step"])
        self.trainer.optimizer_steps = int(got["meta"].get("optimizer_steps", 0))
        self.evals, self.history = list(got["meta"].get("evals", [])), list(got["meta"].get("history", []))
        self._best_meta = got["meta"].get("best")
        self._eval_extra = {int(k): v for k, v in got["meta"].get("eval_extra", {}).items()}
        self.engine.update_weights(self.model)
        self.con.print(f"resumed from {self.out / 'checkpoints'} at step {self.step}")

    def _check_same_model(self, step: int) -> None:
        try:
            meta = self.ckpts.mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
            saved = meta["config"]["model"]
        except Exception:
            return  # unreadable metadata: corruption, handled by the caller
        now = dataclasses.asdict(self.cfg.model)
        diff = [k for k in ("hf_path", "preset", "dtype") if k in saved and saved[k] != now[k]
                and not (k == "preset" and now["hf_path"])]
        if diff:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} is of another model ("
                              + ", ".join(f"model.{k}={saved[k]!r}, this config {now[k]!r}" for k in diff)
                              + "); use a new out_dir")

    # -- one step ------------------------------------------------------------------------------------
    def rollout(self):
        """One step's training batch: generation batches of the system's workflow (refilled by dynamic
        sampling), shaped and ablated; returns (batch or None, traces, stats)."""
        cfg, sysm = self.cfg, self.system
        sampler = DynamicSampler(cfg.prompts_per_step, cfg.max_gen_batches if cfg.dynamic_sampling else 1,
                                 pad_id=getattr(self.tok, "pad_id", 0), across_processes=jax.process_count() > 1)
        traces, stats = [], {}
        g = 0
        self._records = []  # the data records read this step (streams that number them)
        lo, hi = self._block
        while True:
            samples = next(self.data)  # this process's block [lo, hi) of the generation batch, whole groups
            self._records.append(getattr(self.data, "last_records", []))
            res = run_workflow(self.engine, sysm.workflow(self.engine, self.tok, train=True), samples,
                               group_size=sysm.group_size, seed=rollout_seed(cfg.seed, self.step, g),
                               max_active=getattr(sysm, "max_active", 0), first_trajectory=lo * sysm.group_size)
            batch, rewards, rollout_stats = gather_rollouts(sysm.shape(res.batch, res.traces), res.rewards, res.stats)
            batch = _ablate(batch, cfg.ablation, self.rng)
            traces += res.traces  # this process's (process 0's: the first samples')
            stats["_reward_sum"] = stats.get("_reward_sum", 0.0) + float(np.sum(rewards))
            stats["_rewards"] = stats.get("_rewards", 0) + len(rewards)
            for k, v in rollout_stats.items():
                stats[k] = stats.get(k, 0.0) + v
            r = np.asarray(rewards, np.float64).reshape(cfg.prompts_per_step, sysm.group_size)
            stats["groups_with_signal"] = stats.get("groups_with_signal", 0.0) + float((r.std(1) > 0).mean())
            g += 1
            if cfg.filter_flat_groups:  # a group is whole on one process: a process-local batch filters alone
                keep = filter_groups(batch.reward, batch.sample_group)
                kept = int(global_sum([keep.sum()])[0])
                stats["trained_samples"] = kept
                return (batch.select_samples(keep) if kept else None), traces, stats
            if not cfg.dynamic_sampling:
                stats["trained_samples"] = int(global_sum([batch.num_samples])[0])
                return batch, traces, stats
            if sampler.add(batch):
                kept, info = sampler.take()
                stats.update({f"dyn_{k}": float(v) for k, v in info.items()})
                stats["groups_with_signal"] /= g
                stats["trained_samples"] = int(info["num_samples"])  # over every process
                return kept, traces, stats

    def train_step(self) -> dict:
        clock = PhaseClock()  # seconds per phase (memjax/rl/phases.py), written with the step's metrics
        with clock("rollout"):
            batch, traces, rstats = self.rollout()
        t0, t1 = clock.t0, time.perf_counter()
        reward = rstats.pop("_reward_sum") / rstats.pop("_rewards")  # over every process's trajectories
        metrics = {"step": self.step + 1, "rollout_s": t1 - t0, "reward": reward,
                   **({"data_records": gather_records(self._records)} if hasattr(self.data, "last_records") else {}),
                   **{k: v for k, v in rstats.items() if k in ("groups_with_signal", "trained_samples")},
                   **{f"rollout_{k}": v for k, v in rstats.items()
                      if not k.startswith("engine_") and k not in ("groups_with_signal", "trained_samples")}}
        mcfg = self.model.cfg
        conv_lens = [] if batch is None else gather_rows(batch.lengths).tolist()
        rollout_flops = flops.estimate(mcfg, [t for t in conv_lens if t > 0], training=False) if conv_lens else 0.0
        if batch is not None:
            if self.cfg.engine_sleep:  # before the critic's programs too: the plan's update phase holds them
                freed = self.engine.sleep() + sum(e.sleep(weights=False) for e in self.system.frozen_engines())
                metrics["engine_freed_gib"] = freed / 2**30
            critic = self.credit.critic_trainer is not None  # its programs are collectives: every process joins
            if batch.num_samples == 0 and not critic:  # this process kept none of its groups; the others train,
                batch = batch.replace(advantages=np.zeros(batch.input_ids.shape, np.float32),  # it takes part
                                      row_weight=np.zeros(0, np.float32))
            elif batch.num_samples and (own := self.system.advantages(batch, self.cfg.advantage)) is not None:
                batch = own
            else:
                batch, cmetrics = self.credit.assign(batch)
                metrics.update(cmetrics)
            local, shard = local_part(batch)  # this process's samples: the trainer assembles from its rows
            metrics.update(self.trainer.update(local, seed=self.cfg.seed * 7919 + self.step,
                                               step=self.curriculum.schedule_step(self.step), shard=shard))
            for phase, seconds in self.trainer.last_timings.items():
                clock.add(phase, seconds)
            with clock("weight_sync"):
                self.engine.update_weights(self.model)
                self.engine.wait_weights()
        metrics["update_s"] = time.perf_counter() - t1
        if conv_lens:
            u = self.cfg.update
            passes = u.ppo_epochs * 3 + (1 if u.recompute_old_logp else 0) + (1 if self.cfg.loss.kl_coef else 0)
            train_flops = flops.estimate(mcfg, conv_lens, training=False) * passes
            metrics.update({"conversations": len(conv_lens), "tokens_per_s": sum(conv_lens) / metrics["rollout_s"],
                            "rollout_mfu": flops.mfu(rollout_flops, metrics["rollout_s"]),
                            "update_mfu": flops.mfu(train_flops, metrics["update_s"]),
                            "mean_conversation_tokens": float(np.mean(conv_lens))})
        metrics = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in metrics.items()}
        self.step += 1
        self.history.append(metrics)  # the checkpoint below records it (without the evaluation/checkpoint times)
        self.traces_log.write(*({"step": self.step, **t} for t in traces[:4]))
        cur, end = self.curriculum, self.curriculum.is_end(self.step)  # end: the last step of a stage
        if end or (self.cfg.eval_every and self.step % self.cfg.eval_every == 0):
            with clock("evaluation"):
                best = cur.evaluated(self.step, self.evaluate(), self.model)
            if best:
                self.con.print(f"best of stage {cur.stages[self.step - 1]} so far: step {self.step}")
        if end and self.step < self.cfg.steps and cur.restarts:
            self.con.print(cur.start_stage(self.step, self.model, self.trainer, self.engine))
        if end or self.step % self.cfg.checkpoint_every == 0:
            with clock("checkpoint"):
                self.save()
        metrics.update(phase_metrics(clock, model_cfg=mcfg, conv_lens=conv_lens, rollout_tokens=int(
            metrics.get("rollout_prompt_tokens", 0) + metrics.get("rollout_generated_tokens", 0)),
            ppo_epochs=self.cfg.update.ppo_epochs, trained_samples=int(metrics.get("trained_samples") or 0),
            device_count=jax.device_count()))
        self._tensorboard(metrics, self.step)
        self.metrics_log.write(metrics)  # after the checkpoint: a resume writes a line it lacks from the history
        return metrics

    def evaluate(self) -> dict:
        """Held-out evaluation of the current weights (System.evaluate), logged at the current step."""
        ev = self.system.evaluate(self.engine, self.tok)
        if not ev:
            return {}
        row = {"step": self.step, **_scalars(ev)}
        self._eval_extra[self.step] = {k: ev[k] for k in ("traces", "samples") if k in ev}
        self.evals.append(row)
        self.evals_log.write(row)
        self._tensorboard({f"eval_{k}": v for k, v in row.items() if k != "step"}, self.step)
        self.con.print("held-out at step " + str(self.step) + ": " + "  ".join(
            f"{k} {v:.3f}" for k, v in row.items() if k != "step" and isinstance(v, (int, float))))
        return row

    def _tensorboard(self, metrics: dict, step: int) -> None:
        if not self.primary:
            return
        if self._tb is None:  # opened at the first logged step; purges what a killed run logged past the restored step
            try:
                self._tb = tb_writer(self.out / "tb", resumed_step=self._start_step)
            except ImportError as e:  # the GPU image has no tensorboardX: metrics.jsonl and the report still have all
                self._tb = False
                self.con.print(f"no TensorBoard events ({e}); metrics.jsonl has every metric", markup=False)
        if self._tb is False:
            return
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                self._tb.add_scalar(k, v, step)

    def result(self, seconds: float) -> dict:
        """The run's summary (result.json): config, evaluations before/after and on the way, per-step history."""
        first, last = (self.evals[0], self.evals[-1]) if self.evals else ({}, {})
        out = {"config": dataclasses.asdict(self.cfg), "system": self.system.name, "before": first, "after": last,
               "evals": self.evals, "history": self.history, "seconds": seconds,
               "stage_best": self.curriculum.summary(), "code": self.code, "model_run": self.model_run}
        for when, row in (("before", first), ("after", last)):
            extra = self._eval_extra.get(row.get("step", -1), {})
            out[f"traces_{when}"] = extra.get("traces", [])
            if when == "after" or "heldout" not in out:
                out["heldout"] = extra.get("samples", out.get("heldout", []))
        if hasattr(self.system, "warmstart_info"):
            out["warmstart"] = {k: v for k, v in self.system.warmstart_info.items() if k != "history"}
        return out

    def run(self) -> list[dict]:
        """Train to cfg.steps; returns the per-step metrics (the summary is `self.summary`, result.json)."""
        from rich.progress import Progress

        t_start = time.perf_counter()
        if self._finished is not None:  # nothing to train: no file of the finished run is touched
            self.summary = self._finished
            self.close()
            self.con.print(f"{self.out}: the run already finished at step {self._finished['history'][-1]['step']} "
                           f"(steps={self.cfg.steps}); nothing to do (raise steps to extend it)")
            return self.history
        self._stop = StopRequests(jax.process_count())
        try:
            if self.step == 0 and not self.evals:
                self.curriculum.check_metric(self.evaluate())  # a select_metric it lacks fails now
            with Progress(transient=True, console=self.con) as bar:
                task = bar.add_task("training", total=self.cfg.steps, completed=self.step)
                while self.step < self.cfg.steps:
                    m = self.train_step()
                    bar.update(task, completed=self.step)
                    self._print(m)
                    if self._stop.due(self.step):  # SIGTERM / preemption / Ctrl-C: every process at this step
                        if self._saved_at != self.step:
                            self.save()
                        self.ckpts.finish()  # committed and verified before the one line and exit 143 / 130
                        raise stop_line(self._stop, self.step, self.ckpts.dir)
            self.ckpts.finish()
            save_hf(self.model, self.out / "hf")  # gathered to process 0, which writes it
            result = self.summary = run_identity.keep_previous(self.result(time.perf_counter() - t_start),
                                                               run_identity.recorded_result(self.out))
            if self.primary:
                write_atomic(self.out / "result.json", json.dumps(result, indent=1, default=str) + "\n")
            if self.primary and (result["evals"] or result["history"]):
                from .report.run_summary import plot

                result["plot"] = str(plot(result, self.out / "reward_curve.png"))
        finally:
            self._stop.restore()
            self.close()
        self.con.print(f"metrics: {self.out / 'metrics.jsonl'}  tensorboard: {self.out / 'tb'}  "
                       f"checkpoints: {self.out / 'checkpoints'}  policy (HF): {self.out / 'hf'}")
        if self.primary:  # one writer: the other processes' consoles are quiet and their out_dir is the same
            self.con.print(f"report: {write_report(self.out)}")
        return self.history

    def _print(self, m: dict) -> None:
        extra = "".join(f"  {k} {m[k]:.3g}" for k in ("value_loss", "explained_variance") if m.get(k) is not None)
        self.con.print(f"step {m['step']}/{self.cfg.steps}  reward {m['reward']:.3f}  "
                       f"rollout {m['rollout_s']:.1f}s  update {m['update_s']:.1f}s  "
                       f"mismatch {m.get('logp_mismatch_mean') or float('nan'):.2e}  grad {m.get('grad_norm') or 0:.3g}"
                       + extra)
        if "step_s" in m:
            self.con.print(console_line(m), markup=False, highlight=False)


def train(cfg: TrainConfig, console: Console | None = None) -> dict:
    """Run `cfg` to its last step (resuming from out_dir's checkpoints) and return result.json's dict."""
    run = Run(cfg, console)
    with peer_loss(run.out / "checkpoints"):  # a lost peer: the one line of memjax.parallel.logtee, not a trace
        run.run()
    return run.summary


def main(argv: list[str] | None = None) -> int:
    return run_cli("python -m memjax.train", __doc__, argv, TrainConfig(), train, check=check_train)


if __name__ == "__main__":
    sys.exit(main())
