"""One synchronous training step's work: rollouts, credit, update, weight hand-off, and the step's metrics.

Owns `run_step(parts, cfg, step, schedule_step) -> (metrics, traces)`, step `step + 1` of the `sync` schedule:
the rollouts (loop/rollout.py `collect`, or an async schedule's stream); with a batch, the engine put to sleep (`engine_sleep`, frozen engines
too), advantages assigned by `Credit.assign` (the system's own rule first), the Trainer's update on this process's
rows, the weights handed to the engine; throughput (tokens/s, MFU) and the phase clock (rl/phases.py). What the
step's number makes due afterwards (evaluation, stage restart, checkpoint, logs) is the Run's (loop/run.py).
Invariants: the metrics hold every process's totals; non-finite floats are written as None; the trainer's seed of
step k is `memjax.core.seeds.update(seed, k)`.
"""

from __future__ import annotations

import time

import numpy as np

from ..core import seeds
from ..model import flops
from ..rl.phases import PhaseClock
from ..rl.shares import gather_records, gather_rows, local_part
from .rollout import collect


def run_step(parts, cfg, step: int, schedule_step: int) -> tuple[dict, list, PhaseClock, list[int]]:
    """Step `step + 1` (module docstring): (metrics, this process's traces, the phase clock, every conversation's
    length over all processes)."""
    clock = PhaseClock()  # seconds per phase (memjax/rl/phases.py), written with the step's metrics
    with clock("rollout"):
        ro = collect(parts, cfg, step) if parts.stream is None else parts.stream.collect(step)
    batch, rstats = ro.batch, ro.stats
    t0, t1 = clock.t0, time.perf_counter()
    reward = rstats.pop("_reward_sum") / rstats.pop("_rewards")  # over every process's trajectories
    metrics = {"step": step + 1, "rollout_s": t1 - t0, "reward": reward,
               **({"data_records": gather_records(ro.records)} if hasattr(parts.data, "last_records") else {}),
               **{k: v for k, v in rstats.items() if k in ("groups_with_signal", "trained_samples")},
               **{f"rollout_{k}": v for k, v in rstats.items()
                  if not k.startswith("engine_") and k not in ("groups_with_signal", "trained_samples")}}
    mcfg = parts.model.cfg
    conv_lens = [] if batch is None else gather_rows(batch.lengths).tolist()
    rollout_flops = flops.estimate(mcfg, [t for t in conv_lens if t > 0], training=False) if conv_lens else 0.0
    # split_async: the engine generates on its own devices meanwhile
    colocated = parts.stream is None or parts.stream.shares_engine
    if batch is not None:
        if cfg.engine_sleep and colocated:  # before the critic's programs too: the plan's update phase holds them
            t_sleep = time.perf_counter()
            freed = parts.engine.sleep() + sum(e.sleep(weights=False) for e in parts.system.frozen_engines())
            metrics["engine_freed_gib"] = freed / 2**30
            metrics["engine_sleep_s"] = time.perf_counter() - t_sleep  # part of time_other_s
        batch, cmetrics = parts.credit.assign(batch, own=parts.system.advantages)
        metrics.update(cmetrics)
        local, shard = local_part(batch)  # this process's samples: the trainer assembles from its rows
        metrics.update(parts.trainer.update(local, seed=seeds.update(cfg.seed, step), step=schedule_step,
                                            shard=shard))
        for phase, seconds in parts.trainer.last_timings.items():
            clock.add(phase, seconds)
        if colocated:  # split_async's stream copies the weights to the engine's devices when it queues a batch
            with clock("weight_sync"):
                parts.engine.update_weights(parts.model)
                parts.engine.wait_weights()
    if parts.stream is not None:  # the taken batch is trained (or had no group with signal): the version moves on
        parts.stream.updated()
    metrics["update_s"] = time.perf_counter() - t1
    if conv_lens:
        u = cfg.update
        passes = u.ppo_epochs * 3 + (1 if u.recompute_old_logp else 0) + (1 if cfg.loss.kl_coef else 0)
        train_flops = flops.estimate(mcfg, conv_lens, training=False) * passes
        gen_s = metrics.get("rollout_async_generate_s") or metrics["rollout_s"]  # split_async: not the wait
        metrics.update({"conversations": len(conv_lens), "tokens_per_s": sum(conv_lens) / gen_s,
                        "rollout_mfu": flops.mfu(rollout_flops, gen_s),
                        "update_mfu": flops.mfu(train_flops, metrics["update_s"]),
                        "mean_conversation_tokens": float(np.mean(conv_lens))})
    metrics = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in metrics.items()}
    return metrics, ro.traces, clock, conv_lens
