"""A training config's layout on its devices: the trainer's mesh (`shard_check`) and where its engine rolls out.

Owns `PlanError` (one line: the config cannot shard or does not fit), `shard_check(cfg, devices)` -> (data, fsdp,
tensor) or a PlanError naming values that would work, the engine placement of a run (`placement`, `resolve`,
`place_run`: every device of the process by default, T from the bytes the trainer keeps resident), `engine_groups`,
and `--check`'s rollout lines (`rollout_line`, `held_lines`). Nothing here compiles a program: the memory plan
(memjax/run/plan.py) checks the placed config's phases with XLA's compiled temporaries.
Invariants: `resolve` is idempotent (a config placed once keeps its engine.data_parallel / tensor_parallel);
per-device bytes are those of the worst device (shard shapes of the given shardings).
"""

from __future__ import annotations

import dataclasses
import math

from ..core.cli import RunError

GIB = 1 << 30


class PlanError(RunError):
    """The config does not fit the devices (or could not be planned); the message is one line."""


def model_config(cfg):
    """The ModelConfig of cfg.model: a Hugging Face directory's config.json (no weights read), else the preset."""
    from ..model import presets
    src = cfg.model
    if getattr(src, "hf_path", ""):
        from ..checkpoint.hf import load_config
        return load_config(src.hf_path, dtype=src.dtype, compute_dtype=src.compute_dtype or None)
    return presets.get(src.preset, param_dtype=src.dtype, dtype=src.compute_dtype or src.dtype)


def mesh_config(cfg):
    """cfg.mesh, or the default MeshConfig where the config has none."""
    from ..parallel import MeshConfig
    return getattr(cfg, "mesh", None) or MeshConfig()


def bytes_per_device(tree, shardings=None) -> int:
    import jax
    leaves = jax.tree.leaves(tree)
    shs = jax.tree.leaves(shardings) if shardings is not None else [None] * len(leaves)
    total = 0
    for a, s in zip(leaves, shs):
        shape = s.shard_shape(a.shape) if s is not None else a.shape
        total += math.prod(shape) * a.dtype.itemsize
    return total


def engine_groups(ecfg, data: int, fsdp: int, tensor: int = 1) -> int:
    """Device groups of the rollout engine on a data x fsdp x tensor mesh: EngineConfig.data_parallel, with
    -1 = all devices / tensor_parallel (memjax.parallel.rollout_devices); its KV budget is split over the
    groups and, by KV heads, over each group's tensor_parallel devices."""
    groups = getattr(ecfg, "data_parallel", 1)
    return data * fsdp * tensor // getattr(ecfg, "tensor_parallel", 1) if groups == -1 else groups


def placement(cfg, devices: int, hbm_gib: float | None = None, *, model_cfg=None, hosts: int = 1,
              min_kv_gib: float = 16.0):
    """The engine's Placement on one process's `devices` devices (memjax/parallel/placement.py): every device by
    default (TrainConfig.rollout_devices="all"), T chosen from the bytes the trainer keeps resident per device
    (weights, AdamW moments, reference, critic: sharded over one host's devices, replicated over the hosts unless
    mesh.across_hosts="flat"), the engine's weights and the held
    models; nothing compiled (the plan then checks the phases with the compiled temporaries)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from ..model.qwen2 import abstract_model
    from ..parallel.placement import heads_of, place

    mcfg = model_cfg or model_config(cfg)
    ecfg = cfg.engine
    aparams = nnx.state(abstract_model(mcfg), nnx.Param)
    full = bytes_per_device(aparams)
    as_dtype = lambda dt: bytes_per_device(jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, jnp.dtype(dt)),
                                                         aparams))
    resident = 3 * full + (as_dtype(cfg.update.ref_dtype) if cfg.loss.kl_coef else 0)
    if getattr(getattr(cfg, "advantage", None), "estimator", "") == "gae":
        resident += 3 * full  # the critic: the backbone, fp32 master + AdamW (its missing LM head is slack)
    wd = mcfg.dtype if ecfg.kernels.weight_dtype == "compute" else ecfg.kernels.weight_dtype
    held = sum(as_dtype(mcfg.dtype) + int(h.kv_cache_bytes) for h in held_models(cfg))
    flat = getattr(getattr(cfg, "mesh", None), "across_hosts", "data") == "flat"  # "data": replicas across hosts
    return place(ecfg, devices, heads_of(mcfg), mode=getattr(cfg, "rollout_devices", "all"),
                 weight_bytes=as_dtype(wd), resident_bytes=resident // (devices * (hosts if flat else 1)),
                 held_bytes=held,
                 hbm_bytes=None if not hbm_gib else int(ecfg.kv.memory_utilization * hbm_gib * GIB),
                 min_kv_bytes=int(min_kv_gib * GIB))


def resolve(cfg, devices: int, hbm_gib: float | None = None, *, strict: bool = True, **kw):
    """(cfg with engine.data_parallel / tensor_parallel set to its Placement and rollout_devices="config",
    the Placement); PlanError (one line) when no placement fits (strict) or none splits the engine. Idempotent."""
    p = placement(cfg, devices, hbm_gib, **kw)
    if p.error and (strict or p.why == "no placement"):
        raise PlanError(p.error)
    as_set = getattr(cfg, "rollout_devices", "all") == "config" or cfg.engine.data_parallel != 1
    engine = cfg.engine if as_set else dataclasses.replace(cfg.engine, data_parallel=p.data_parallel,
                                                           tensor_parallel=p.tensor_parallel)
    extra = {"rollout_devices": "config"} if hasattr(cfg, "rollout_devices") else {}
    return dataclasses.replace(cfg, engine=engine, **extra), p


def place_run(cfg, devices: int, model_cfg=None, *, strict: bool = False):
    """resolve() for a run on this process's `devices` rollout devices: memory from TrainConfig.plan_hbm_gib, else
    the devices' own limit (none on a CPU: the least tensor_parallel that divides, nothing checked); the trainer's
    state is sharded over every process's devices. Not strict (the run): where no T leaves the KV, the least T
    that splits, and the plan's check (compiled temporaries) refuses with what does not fit."""
    import jax
    hbm = getattr(cfg, "plan_hbm_gib", 0) or (jax.local_devices()[0].memory_stats() or {}).get("bytes_limit", 0) / GIB
    return resolve(cfg, devices, hbm or None, model_cfg=model_cfg, hosts=jax.process_count(),
                   min_kv_gib=getattr(cfg, "min_kv_gib", 16.0), strict=strict)


def rollout_line(cfg, ecfg, devices: int) -> str:
    """`--check`'s rollout line(s) of a training config whose system runs `ecfg` on `devices` devices of this
    process (the deployment fields engine.data_parallel / tensor_parallel applied on top, as the run does):
    the Placement, a one-line warning when it spans fewer devices than the run trains on, where each frozen
    model's engine runs (`held_lines`); a placement that
    cannot fit is a ConfigError (one line). Nothing is compiled."""
    from ..core.config import ConfigError
    ecfg = dataclasses.replace(ecfg, **{f: getattr(cfg.engine, f) for f in ("data_parallel", "tensor_parallel")
                                        if getattr(cfg.engine, f) != 1})
    try:
        p = place_run(dataclasses.replace(cfg, engine=ecfg), devices, strict=True)[1]
        return "\n".join([p.line(), *held_lines(cfg, p.spans)])
    except PlanError as e:
        raise ConfigError(f"engine: {e}") from None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def shard_check(cfg, devices: int, model_cfg=None) -> tuple[int, int, int]:
    """(data, fsdp, tensor) of the config's mesh on `devices` devices, or PlanError (one line, naming the
    fields and values that would work) when the config cannot be laid out on them."""
    m = mesh_config(cfg)
    try:
        d, f, t = m.sizes(devices)
    except ValueError:
        raise PlanError(f"mesh=(data {m.data}, fsdp {m.fsdp}, tensor {m.tensor}) does not fit {devices} devices; "
                        f"e.g. --set mesh.data=1 --set mesh.fsdp=-1 --set mesh.tensor=1 (fsdp={devices})") from None
    mcfg = model_cfg or model_config(cfg)
    ecfg = cfg.engine
    tp = getattr(ecfg, "tensor_parallel", 1)
    heads = math.gcd(mcfg.num_heads, mcfg.num_kv_heads, mcfg.intermediate_size)
    if tp > 1 and heads % tp:
        ok = [x for x in _divisors(heads) if (d * f * t) % x == 0]
        raise PlanError(f"engine.tensor_parallel={tp} must divide {mcfg.name}'s heads ({mcfg.num_heads}), KV heads "
                        f"({mcfg.num_kv_heads}) and MLP width; values that work here: {ok}")
    if (d * f * t) % tp:
        raise PlanError(f"engine.tensor_parallel={tp} must divide the {d * f * t} devices; values that work: "
                        f"{[x for x in _divisors(d * f * t) if heads % x == 0]}")
    groups = engine_groups(ecfg, d, f, t)
    if groups * tp > d * f * t:
        raise PlanError(f"engine.data_parallel={ecfg.data_parallel} x engine.tensor_parallel={tp} needs more than "
                        f"the {d * f * t} devices; use engine.data_parallel=-1 or <= {d * f * t // tp}")
    try:
        ecfg.per_device(groups)
    except ValueError as e:
        totals = {"max_slots": ecfg.max_slots, "prefill_slots": ecfg.prefill_slots, "kv.num_pages": ecfg.kv.num_pages,
                  "queue_size": ecfg.queue_size, "token_budget": ecfg.token_budget}
        fix = " ".join(f"engine.{k}={-(-v // groups) * groups}" for k, v in totals.items() if v and v % groups)
        raise PlanError(f"engine on {groups} device groups: {e}" + (f"; e.g. --set {fix}" if fix else "")) from None
    return d, f, t


def held_models(cfg) -> tuple:
    """The frozen models the config's system holds beside its policy (an answer agent, a judge), or ()."""
    agent = getattr(cfg, "agent", None)
    return agent.held_models() if agent is not None and hasattr(agent, "held_models") else ()


def held_lines(cfg, spans: int) -> list[str]:
    """`--check`'s line per held model of the config: its engine's devices of this process."""
    from ..parallel.placement import held_where
    return [f"frozen: {h.role}: {held_where(h, spans)}" for h in held_models(cfg)]
