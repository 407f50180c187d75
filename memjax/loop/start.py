"""A training run's start-up, before its first step: the checks that need the system but no model, then the
parts the loop steps (mesh, model, trainer, credit, engine, this process's data stream).

Owns `open_system(cfg)` (the registered system of `agent.name` and its Curriculum, after every refusal that needs
no model) and `build(cfg, system, say)` (the `Parts`, in order: mesh, model, engine config, the plan's sharding and
memory check (memjax.run.plan.check), the devices the system's frozen engines may span (the policy engine's:
`System.place_frozen`), the system's set-up, Trainer, Credit, the Engine on the rollout devices with
the planned KV pool, then this process's block of every generation batch and its data stream).
Invariants: every failure is one ConfigError / PlanError line; nothing here writes out_dir; with several
processes each reads only its block [lo, hi) of a generation batch (whole groups), with one process the whole
batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

from ..core import seeds
from ..core.config import ConfigError
from ..engine import Engine
from ..parallel import rollout_devices
from ..rl.credit import Credit
from ..rl.shares import share
from ..rl.trainer import Trainer
from ..run import preflight
from ..run.curriculum import Curriculum
from ..systems import build as build_system
from ..systems import shard_stream
from .rollout import Stream


def open_system(cfg) -> tuple[Any, Curriculum]:
    """The system and its curriculum, once the config passed every check that needs no model (one line each)."""
    if cfg.prompts_per_step < jax.process_count():  # each process runs whole groups: at least one
        raise ConfigError(f"prompts_per_step={cfg.prompts_per_step} is less than the {jax.process_count()} "
                          "processes; every process needs at least one sample per generation batch")
    try:
        system = build_system(cfg.agent, seed=cfg.seed)  # validates the system's inputs (data paths)
    except KeyError as e:
        raise ConfigError(str(e.args[0])) from None
    preflight.settings(cfg, system)  # groups for a group estimator, the warm start, no ignored override
    curriculum = Curriculum(cfg, system)
    check_schedule(cfg, system, curriculum.stages)
    t = system.temperature
    if cfg.update.temperature not in (1.0, t):
        raise ConfigError(f"update.temperature={cfg.update.temperature} but the rollouts sample at "
                          f"temperature {t} (agent): the trainer uses the rollout temperature; leave "
                          f"update.temperature at 1.0")
    if cfg.advantage.estimator == "gae" and cfg.loss.level == "step":
        raise ConfigError("advantage.estimator=gae gives per-token advantages; loss.level=step needs per-row "
                          "ones (use a GRPO estimator or the system's own)")
    return system, curriculum


def check_schedule(cfg, system, stages: list[int], processes: int | None = None) -> None:
    """The refusals of an async schedule that need the system or the processes (one ConfigError line); `processes`:
    the run's process count where jax.distributed is not started (`--check`), else jax's."""
    if cfg.schedule == "sync":
        return
    processes = jax.process_count() if processes is None else processes
    if processes > 1 and cfg.schedule == "colocated_async":
        raise ConfigError(f"schedule=colocated_async runs in one process; {processes} processes run "
                          "schedule=sync or schedule=split_async")
    if cfg.schedule == "split_async" and cfg.rollout_split >= jax.local_device_count():
        raise ConfigError(f"rollout_split={cfg.rollout_split} leaves no device for the trainer: this process has "
                          f"{jax.local_device_count()} device(s)")
    kept = system.retained_kv() if cfg.schedule == "colocated_async" else ""
    if kept:
        raise ConfigError(f"schedule=colocated_async pauses trajectories between turns and frees the KV cache for "
                          f"the update; {system.name} keeps KV across turns ({kept}): use schedule=split_async "
                          "or schedule=sync")
    if len(set(stages)) > 1:
        raise ConfigError(f"schedule={cfg.schedule} admits generation batches ahead of a stage's end; the "
                          f"{system.name} curriculum has stages {sorted(set(stages))}: use schedule=sync")


@dataclasses.dataclass
class Parts:
    """What `build` makes: the objects a run steps (the Run holds them as `parts`)."""
    mesh: Any
    model: Any
    tok: Any
    model_run: dict  # preflight.describe_model: what runs, whatever model.* says (tiny systems)
    trainer: Trainer
    credit: Credit
    engine: Engine
    block: tuple[int, int]  # this process's samples [lo, hi) of every generation batch
    data: Any  # the system's training stream, sharded to `block` with several processes
    system: Any  # the registered system (its workflow, shaping, own credit rule, evaluation)
    ablation_rng: Any  # numpy Generator of the reward ablation's permutations (checkpointed)
    stream: Stream | None = None  # colocated_async: RolloutStream (loop/stream.py), split_async: SplitStream (split.py)


def build(cfg, system, say: Callable[[str], None]) -> Parts:
    """Mesh, model, trainer, credit, engine and data stream of `cfg` on this process (module docstring)."""
    train_devs, split_devs = split_devices(cfg)
    try:  # the mesh must match the devices: checked before the model loads
        mesh = cfg.mesh.make(train_devs)
    except ValueError as e:
        m = cfg.mesh
        where = f"the {len(train_devs)} trainer devices of {jax.device_count()}" if split_devs else \
            f"{jax.device_count()} device(s)"
        raise ConfigError(f"mesh=(data {m.data}, fsdp {m.fsdp}, tensor {m.tensor}): {e} (jax sees {where})") from None
    engine_devs = split_devs or rollout_devices(mesh)
    from ..run.layout import place_run
    from ..run.plan import check

    model, tok = system.load_model(cfg.model)
    model_run = preflight.describe_model(model)  # what runs, whatever model.* says (tiny systems)
    try:  # engine.data_parallel=-1: a slot group per engine.tensor_parallel devices of the mesh (deployment
        ecfg = system.engine_config(cfg.engine)  # settings: they apply to systems with their own engine config too)
        ecfg = dataclasses.replace(ecfg, **{f: getattr(cfg.engine, f) for f in ("data_parallel", "tensor_parallel")
                                            if getattr(cfg.engine, f) != 1})
    except ValueError as e:
        raise ConfigError(f"engine: {e}") from None
    # the rollout spans every device of this process unless rollout_devices="config" (memjax.run.layout.place_run)
    placed_cfg, placed = place_run(dataclasses.replace(cfg, engine=ecfg), len(engine_devs), model.cfg)
    ecfg, model_run = placed_cfg.engine, f"{model_run}; {placed.line().splitlines()[0]}"  # in run.json
    say(placed.line())
    # every system, before its set-up (frozen engines, banks): can the config shard on these devices, and
    # (on devices with a memory limit, or against plan_hbm_gib) does it fit? One-line PlanError otherwise.
    planned = check(placed_cfg, devices=len(train_devs) if split_devs else None, hbm_gib=cfg.plan_hbm_gib or None,
                    min_kv_gib=cfg.min_kv_gib, model_cfg=model.cfg)
    system.place_frozen(engine_devs[:placed.spans])  # frozen engines: over the policy engine's devices, this process's
    system.setup(model, tok)
    ref = nnx.state(model, nnx.Param) if cfg.loss.kl_coef else None  # the Trainer copies it (ref_dtype)
    update = dataclasses.replace(cfg.update, temperature=system.temperature if system.temperature > 0 else 1.0)
    trainer = Trainer(model, cfg.optim, cfg.loss, update, ref_model=ref, mesh=mesh)
    credit = Credit(cfg.advantage, model, cfg.critic, seed=cfg.seed, mesh=mesh, update=update)
    try:
        if planned and ecfg.kv.budget_bytes is None and ecfg.kv.num_pages is None:  # the pool the plan counted
            per_device = planned["bytes"]["kv_cache"]  # kv_cache_bytes is a total over the engine devices
            kv = dataclasses.replace(ecfg.kv, kv_cache_bytes=per_device * planned.get("engine_devices", 1))
            ecfg = dataclasses.replace(ecfg, kv=kv)
        engine = Engine(model, ecfg, devices=engine_devs)
    except ValueError as e:
        raise ConfigError(f"engine: {e}") from None
    # each process reads its own block of every generation batch (whole groups: a sample's trajectories all
    # run where it was read); with one process the block is the whole batch
    block = share(cfg.prompts_per_step)
    data = system.train_data(cfg.prompts_per_step, cfg.seed)
    if jax.process_count() > 1:
        data = shard_stream(data, *block)
    if jax.process_count() > 1:  # no token array leaves its process (memjax/cli/train.py's docstring)
        say("rollouts: process-local (each process trains on its own rows)")
    parts = Parts(mesh, model, tok, model_run, trainer, credit, engine, block, data, system, seeds.ablation(cfg.seed))
    if cfg.schedule == "colocated_async":
        from .stream import RolloutStream
        parts.stream = RolloutStream(parts, cfg)
    elif cfg.schedule == "split_async":
        from .split import SplitStream
        parts.stream = SplitStream(parts, cfg)
        say(f"split_async: the trainer on {len(train_devs)} device(s), the engine on {len(split_devs)}, weights at "
            f"most {cfg.max_staleness} update(s) old")
    return parts


def split_devices(cfg) -> tuple[list | None, list]:
    """(the trainer's devices, the engine's) of split_async: each process's first rollout_split devices (by id)
    roll out, this process's on its engine; the trainer's mesh takes every process's others, in (process, id)
    order. (None, []) otherwise (the mesh takes every device and the engine spans its devices)."""
    if cfg.schedule != "split_async":
        return None, []
    per: dict[int, list] = {}
    for d in sorted(jax.devices(), key=lambda d: (d.process_index, d.id)):
        per.setdefault(d.process_index, []).append(d)
    train = [d for p in sorted(per) for d in per[p][cfg.rollout_split:]]
    return train, per[jax.process_index()][:cfg.rollout_split]
