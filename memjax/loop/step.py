"""One training step after its rollouts: credit, update, weight hand-off, the step's metrics, and what the step's
number makes due (evaluation, a curriculum stage restart, a checkpoint).

Owns `Stepping`, a part of memjax.train's `Run`, whose `train_step()` runs step `self.step + 1` and returns its
metrics: the rollouts (`Rollouts.rollout`); with a batch, the engine put to sleep (`engine_sleep`), advantages (the
system's own, else rl/credit.py; a process that kept none of its groups takes part with zero advantages), the
Trainer's update on this process's rows, the weights handed to the engine; throughput (tokens/s, MFU) and the
phase clock (rl/phases.py); then, in this order: the history and the first four traces, the held-out evaluation
at a stage end or every `eval_every` steps (the curriculum's best), the stage restart, the checkpoint at a stage
end or every `checkpoint_every` steps, TensorBoard and metrics.jsonl.
Invariants: non-finite float metrics are written as None; metrics.jsonl gets the step's line after the
checkpoint (a resume writes a line it lacks from the history). Reads: cfg, system, model, engine, trainer,
credit, curriculum, data, _records; writes: step, history (and, through evaluate / save, the logs and
checkpoints).
"""

from __future__ import annotations

import time

import jax
import numpy as np

from .. import flops
from ..rl.phases import PhaseClock, phase_metrics
from ..rl.shares import gather_records, gather_rows, local_part


class Stepping:
    """`Run.train_step` (module docstring)."""

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
