"""Memory plan: per-device bytes of a training config on N devices of G GiB, and whether it fits.

Owns `plan(cfg, devices, hbm_gib)` -> dict, `check(cfg, devices, hbm_gib)` (raises PlanError with a one-line
reason; a training run calls it at start-up) and `table`; the command is memjax/cli/plan.py, and the config's mesh
and engine placement come from memjax/run/layout.py. Rows per device: the policy's master weights and AdamW state,
the reference, the critic, every held model's weights and KV (a full copy and its pool on every device the policy
engine spans with frozen_devices="engine", the default, else on one: either way the worst device's bytes;
memjax.parallel.placement `held_where` says which), the engine's weights and KV pool, and the train temporaries
from XLA's memory analysis of the real programs compiled ahead of time for abstract inputs (nothing allocated).
Invariants: rollout = resident + engine weights + KV; update = resident + temporaries; the peak is the larger
phase with engine_sleep, else their sum; a plan fits when the peak <= HBM and KV >= min_kv_gib per device.
docs/trainer.md, "The memory plan", has how the programs are compiled and the shipped recipes' plans.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .layout import (
    GIB,
    PlanError,
    bytes_per_device,
    engine_groups,
    held_models,
    mesh_config,
    model_config,
    resolve,
    shard_check,
)

ROWS = ("params", "optimizer", "reference", "train_temporaries", "critic_params", "critic_optimizer",
        "critic_temporaries", "answer_agent_weights", "answer_agent_kv", "judge_weights", "judge_kv", "rollout_weights",
        "kv_cache")
RESIDENT = ("params", "optimizer", "reference", "critic_params", "critic_optimizer", "answer_agent_weights",
            "judge_weights")
HELD_KV = ("answer_agent_kv", "judge_kv")


def _critic_rows(cfg, mcfg, mesh, u, micro_batches: int, row_len: int) -> tuple[dict, dict]:
    """critic_* rows (bytes per device) and the compiled programs' numbers, for advantage.estimator="gae"."""
    import jax
    from flax import nnx

    from ..rl.critic import Critic
    from ..rl.trainer import OptimConfig
    from ..rl.value_step import VALUE_FIELDS, ValueStep

    c = cfg.critic
    optim = OptimConfig(lr=c.lr, warmup_steps=c.warmup_steps, weight_decay=c.weight_decay, grad_clip=c.grad_clip)
    graphdef, ap = nnx.split(nnx.eval_shape(lambda: Critic(mcfg, rngs=nnx.Rngs(0))), nnx.Param)
    step = ValueStep(graphdef, ap, mesh, optim, u, clip_value=c.clip_value or None)
    upd, val = step.lower(ap, micro_batches, row_len)
    upd, val = upd.compile().memory_analysis(), val.compile().memory_analysis()
    data = step.abstract_data(micro_batches, row_len)
    sh = jax.tree.map(lambda _: step.data_sharding, data) if step.data_sharding is not None else None
    rows = {"critic_params": bytes_per_device(ap, step.param_shardings),
            "critic_optimizer": bytes_per_device(jax.eval_shape(step.tx.init, ap), step.opt_shardings),
            "critic_temporaries": max(int(upd.temp_size_in_bytes), int(val.temp_size_in_bytes))
            + bytes_per_device(data, sh)}
    return rows, {"update_temp": int(upd.temp_size_in_bytes), "values_temp": int(val.temp_size_in_bytes),
                  "value_fields": list(VALUE_FIELDS)}


def _train_mesh(cfg, devices: int, hosts: int, devs=None):
    """The trainer's mesh over hosts x devices of `devs` (default this process's devices; in order: device i on
    host i // devices), sized as memjax.parallel.MeshConfig lays out `hosts` processes of `devices` devices each."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from ..parallel.mesh import DATA, FSDP, TENSOR
    devs = list(jax.devices() if devs is None else devs)
    if hosts == 1:
        return mesh_config(cfg).make(devs[:devices])
    d, f, t = mesh_config(cfg).global_sizes(devices * hosts, hosts)
    return Mesh(np.asarray(devs[:devices * hosts]).reshape(d, f, t), (DATA, FSDP, TENSOR))


def analytic_traffic(param_bytes: int, compute_bytes: int, hosts: int, mesh: dict, micro_batches: int) -> dict:
    """Bytes one device sends per mini-batch update on the hybrid mesh (ring algorithms), from the weights alone
    (no activation traffic):
    - inter: the least between hosts, one all-reduce of the device's gradient shard (param_bytes / (fsdp x
      tensor)) over the hosts per mini-batch: 2 (H-1)/H x shard;
    - intra_floor: the least inside a host, the weights gathered once per update in the compute dtype and the
      gradient reduce-scattered once inside the fsdp group: (f-1)/f x (compute_bytes + param_bytes);
    - intra_zero3: the ZeRO-3 reference, per micro-batch the weights gathered for the forward and again for the
      backward and the gradient reduce-scattered: micro_batches x (f-1)/f x (2 compute_bytes + param_bytes).
      Not a bound: XLA may hoist gathers out of the micro-batch loop (the compiled figure can fall below it);
    both intra figures add the intra-host part of the data-parallel reduction when a host holds several data
    replicas. Tensor parallelism's activation traffic is not modelled (None)."""
    d, f, t = mesh["data"], mesh["fsdp"], mesh["tensor"]
    if t > 1:
        return {"inter": None, "intra_floor": None, "intra_zero3": None,
                "note": "tensor parallelism's activation traffic is not modelled"}
    d_local = d // hosts
    shard = param_bytes / (f * t)
    inter = 2 * (hosts - 1) / hosts * shard if hosts > 1 else 0.0
    dp = 2 * (d_local - 1) / d_local * shard if d_local > 1 else 0.0
    floor = (f - 1) / f * (compute_bytes + param_bytes) + dp
    zero3 = micro_batches * (f - 1) / f * (2 * compute_bytes + param_bytes) + dp
    return {"inter": int(inter), "intra_floor": int(floor), "intra_zero3": int(zero3)}


def _traffic(compiled, devices: int, hosts: int, micro_batches: int) -> dict:
    """Collective bytes of a compiled update / log-prob program, its micro-batch loop (a fori_loop over a traced
    count: XLA does not know the trip count) counted `micro_batches` times: every slot filled."""
    from ..parallel.collectives import summary
    t = summary(compiled.as_text(), devices * hosts, devices, outer_trip_count=micro_batches)
    t.pop("per_device")
    return t


def plan_here(cfg, devices: int, hbm_gib: float, min_kv_gib: float, micro_batches: int, model_cfg=None,
               hosts: int = 1, devs=None) -> dict:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from ..model.qwen2 import abstract_model
    from ..parallel import micro_rows_for
    from ..rl.update_programs import UpdatePrograms

    mcfg = model_cfg or model_config(cfg)
    cfg, placed = resolve(cfg, devices, hbm_gib, model_cfg=mcfg, hosts=hosts, min_kv_gib=min_kv_gib, strict=False)
    d, f, t = shard_check(cfg, devices, mcfg)  # per host: each process's engine spans its own devices
    mesh = _train_mesh(cfg, devices, hosts, devs)
    dg, fg, tg = (mesh.shape[a] for a in ("data", "fsdp", "tensor"))
    lc = cfg.loss
    u = dataclasses.replace(cfg.update, micro_rows=micro_rows_for(cfg.update.micro_rows, dg * fg))
    graphdef, aparams = nnx.split(abstract_model(mcfg), nnx.Param)
    step = UpdatePrograms(graphdef, aparams, mesh, cfg.optim, lc, u, temperature=u.temperature,
                     use_ref=bool(lc.kl_coef), use_entropy=bool(lc.entropy_coef))
    row_len = max(u.row_buckets) if u.row_buckets else cfg.engine.window
    out = {"params": bytes_per_device(aparams, step.param_shardings)}
    aopt = jax.eval_shape(step.tx.init, aparams)
    out["optimizer"] = bytes_per_device(aopt, step.opt_shardings)
    ref_dtype = jnp.dtype(u.ref_dtype)
    aref = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, ref_dtype), aparams)
    out["reference"] = bytes_per_device(aref, step.param_shardings) if lc.kl_coef else 0
    compiled = step.lower_update(aparams, micro_batches, row_len).compile()
    ma = compiled.memory_analysis()
    data_args = bytes_per_device(step.abstract_data(micro_batches, row_len),
                                  jax.tree.map(lambda _: step.data_sharding, step.abstract_data(1, 1))
                                  if step.data_sharding is not None else None)
    temp = int(ma.temp_size_in_bytes)
    square = re.compile(rf"\[[0-9,]*\b{row_len},{row_len}\b[0-9,]*\]")  # a [.., T, T] attention buffer
    with_sh = lambda t, s: jax.tree.map(lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), t, s) \
        if s is not None else t
    lp_compiled = step.logprobs.lower(with_sh(aparams, step.param_shardings),
                                      step.abstract_data(micro_batches, row_len),
                                      jax.ShapeDtypeStruct((), jnp.int32)).compile()
    lp = lp_compiled.memory_analysis()
    n_square = len(square.findall(compiled.as_text())) + len(square.findall(lp_compiled.as_text()))
    # an fp32 [.., T, V] buffer: a whole row's full-vocabulary logits (the log-prob path chunks them: none expected)
    full_logits = re.compile(rf"f32\[[0-9,]*\b{row_len},{mcfg.vocab_size}\]")
    n_logits = len(full_logits.findall(compiled.as_text())) + len(full_logits.findall(lp_compiled.as_text()))
    out["train_temporaries"] = max(temp, int(lp.temp_size_in_bytes)) + data_args
    critic_info = None
    for k in ("critic_params", "critic_optimizer", "critic_temporaries"):
        out[k] = 0
    if getattr(getattr(cfg, "advantage", None), "estimator", "") == "gae":
        crit, critic_info = _critic_rows(cfg, mcfg, mesh, u, micro_batches, row_len)
        out.update(crit)
    wd = jnp.dtype(mcfg.dtype if cfg.engine.kernels.weight_dtype == "compute" else cfg.engine.kernels.weight_dtype)
    out["rollout_weights"] = bytes_per_device(jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, wd), aparams))
    held = held_models(cfg)
    for k in ("answer_agent_weights", "answer_agent_kv", "judge_weights", "judge_kv"):
        out[k] = 0
    # the weights in the compute dtype: a held model's full copy, and what the trainer gathers for its forward
    compute = bytes_per_device(jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, jnp.dtype(mcfg.dtype)), aparams))
    for h in held:  # a full copy and its pool on every device its engine spans (or on one): per device the same
        out[f"{h.role}_weights"] += compute
        out[f"{h.role}_kv"] += int(h.kv_cache_bytes)
    agent = getattr(cfg, "agent", None)
    from ..parallel.placement import held_where
    holds = {"policy": mcfg.name, "reference": bool(lc.kl_coef), "critic": critic_info is not None,
             **{h.role: held_where(h, placed.spans) for h in held},
             "judge": agent.judge_served() if hasattr(agent, "judge_served") else "none"}
    hbm = int(hbm_gib * GIB)
    groups = engine_groups(cfg.engine, d, f, t)
    shards = groups * getattr(cfg.engine, "tensor_parallel", 1)  # the pool is split over every engine device
    kv_total = cfg.engine.kv.budget_bytes
    sleep = bool(getattr(cfg, "engine_sleep", False))
    out["kv_cache"], phases = budget(out, hbm, sleep=sleep, kv_bytes=kv_total // shards if kv_total else None,
                                     utilization=cfg.engine.kv.memory_utilization)
    used = phases["rollout"] - out["kv_cache"]
    total = max(phases.values())
    gmesh = {"data": dg, "fsdp": fg, "tensor": tg}
    traffic = {"update": _traffic(compiled, devices, hosts, micro_batches),
               "logprobs": _traffic(lp_compiled, devices, hosts, micro_batches),
               "analytic_update": analytic_traffic(bytes_per_device(aparams), compute, hosts, gmesh, micro_batches),
               "model": "ring, bytes one device sends per program run (memjax/parallel/collectives.py)"}
    def cost(c):  # XLA's cost analysis of one run of the program, per device (the micro-batch loop counted once)
        ca = c.cost_analysis() or {}
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        return {"flops": float(ca.get("flops", 0.0)), "bytes_accessed": float(ca.get("bytes accessed", 0.0))}
    res = {"model": mcfg.name, "devices": devices, "hosts": hosts, "hbm_gib": hbm_gib, "mesh": gmesh,
           "cost": {"update": cost(compiled), "logprobs": cost(lp_compiled)},
           "traffic": traffic,
           "engine_groups": groups, "engine_devices": shards, "engine_max_slots": cfg.engine.max_slots,
           "placement": placed.as_dict(),
           "row_len": row_len, "micro_rows": cfg.update.micro_rows, "micro_rows_effective": u.micro_rows,
           "rows_per_device": u.micro_rows // (dg * fg), "rounding_padding": 1.0 - cfg.update.micro_rows / u.micro_rows,
           "micro_batches": micro_batches, "holds": holds, "critic_programs": critic_info,
           "backend": jax.default_backend() if devs is None else f"{devs[0].platform} ({devs[0].device_kind}, "
                                                                 "deviceless)", "bytes": out, "total": total,
           "update_program": {"temp": temp, "argument": int(ma.argument_size_in_bytes),
                              "output": int(ma.output_size_in_bytes), "alias": int(ma.alias_size_in_bytes)},
           "logprob_program_temp": int(lp.temp_size_in_bytes), "min_kv_gib": min_kv_gib,
           "tt_buffers": n_square, "full_logits_buffers": n_logits, "engine_sleep": sleep, "phases": phases,
           "headroom": 1.0 - total / hbm}
    if total > hbm:
        worst = max(phases, key=phases.get)
        res["reason"] = (f"the {worst} phase needs {total / GIB:.1f} GiB per device > {hbm_gib:g} GiB "
                         f"(largest: {max(out, key=out.get)} {max(out.values()) / GIB:.1f} GiB)")
    elif out["kv_cache"] < min_kv_gib * GIB:
        res["reason"] = (f"leaves {out['kv_cache'] / GIB:.1f} GiB of KV cache per device < {min_kv_gib:g} GiB "
                         f"(trainer and weights take {used / GIB:.1f} of {hbm_gib:g} GiB)")
    res["fits"] = "reason" not in res
    return res


def budget(rows: dict, hbm: int, *, sleep: bool, kv_bytes: int | None, utilization: float = 0.9) -> tuple[int, dict]:
    """(kv_cache bytes, {"rollout": bytes, "update": bytes}) per device from the other rows (module docstring).
    With sleep the update's temporaries are not live while the pool is (the engine frees the pool and its
    weights through the update); without it everything coexists. Without kv_bytes the pool is the engine's default:
    it fills the device up to `utilization` of hbm (EngineConfig.kv.memory_utilization)."""
    g = lambda k: rows.get(k, 0)
    resident = sum(g(k) for k in RESIDENT)
    temps = max(g("train_temporaries"), g("critic_temporaries"))  # run one after the other
    awake = g("rollout_weights") + sum(g(k) for k in HELD_KV)  # what the engines free when they sleep
    used = resident + awake + (0 if sleep else temps)
    kv = int(kv_bytes) if kv_bytes else max(int(utilization * hbm) - used, 0)
    update = resident + temps + (0 if sleep else awake + kv)
    return kv, {"rollout": used + kv, "update": update}


ROOT = Path(__file__).resolve().parents[2]
AOT_DIR = ROOT / ".venv" / "cuda-aot"
COMPARED = ("params", "optimizer", "reference", "train_temporaries", "critic_temporaries", "kv_cache")


def gpu_target(hbm_gib: float) -> str | None:
    """The GPU whose XLA:GPU compile the plan uses: "h100" (80 GB) up to 80 GiB a device, else "h200"; None when
    no CUDA PJRT plugin is installed (.venv/cuda-aot, or jax_plugins in this environment)."""
    import importlib.util
    have = (AOT_DIR / "jax_plugins").is_dir() or (importlib.util.find_spec("jax_plugins") is not None and any(
        importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") is not None for v in (12, 13)))
    return None if not have else ("h100" if hbm_gib <= 80 else "h200")


def differ(gpu: dict, cpu: dict, tol: float = 0.10) -> dict:
    """Rows (GiB per device) where the XLA:GPU and XLA:CPU plans differ by more than `tol` of the larger."""
    out = {}
    for k in COMPARED + ("total",):
        g, c = (gpu["bytes"].get(k, 0), cpu["bytes"].get(k, 0)) if k != "total" else (gpu["total"], cpu["total"])
        if max(g, c) and abs(g - c) > tol * max(g, c):
            out[k] = {"gpu_gib": round(g / GIB, 3), "cpu_gib": round(c / GIB, 3)}
    return out


def plan(cfg, devices: int, hbm_gib: float, *, min_kv_gib: float = 16.0, micro_batches: int | None = None,
         model_cfg=None, hosts: int = 1, backend: str = "cpu", source: tuple | None = None) -> dict:
    """The memory plan of `cfg` on `hosts` hosts of `devices` devices of `hbm_gib` GiB (module docstring);
    micro_batches: micro-batch slots of the compiled update (default the config's min_micro_batches);
    model_cfg: the ModelConfig to plan (default from cfg.model; memjax.train passes the model it loaded)."""
    import jax
    if micro_batches is None:
        micro_batches = 1 << max(getattr(cfg.update, "min_micro_batches", 8) - 1, 0).bit_length()
    target = gpu_target(hbm_gib) if backend in ("auto", "gpu") else None
    if backend == "gpu" and target is None:
        raise PlanError("plan: backend=gpu needs the CUDA PJRT plugin (make venv puts it in .venv/cuda-aot)")
    if target is not None and model_cfg is None:
        gpu = _plan_child(cfg, devices, hbm_gib, min_kv_gib, micro_batches, hosts, gpu=target, source=source)
        cpu = _plan_child(cfg, devices, hbm_gib, min_kv_gib, micro_batches, hosts, source=source)
        gpu["cpu_compile"] = {"bytes": cpu["bytes"], "update_program": cpu["update_program"],
                              "logprob_program_temp": cpu["logprob_program_temp"], "fits": cpu["fits"],
                              "total": cpu["total"]}
        gpu["gpu_vs_cpu_over_10pct"] = differ(gpu, cpu)
        return gpu
    if len(jax.devices()) == devices * hosts:
        return plan_here(cfg, devices, hbm_gib, min_kv_gib, micro_batches, model_cfg, hosts)
    if model_cfg is not None:
        raise PlanError("plan: model_cfg is only supported on this process's own devices")
    return _plan_child(cfg, devices, hbm_gib, min_kv_gib, micro_batches, hosts)


def _plan_child(cfg, devices: int, hbm_gib: float, min_kv_gib: float, micro_batches: int, hosts: int,
                gpu: str | None = None, source: tuple | None = None) -> dict:
    """The plan compiled in a child process: on `devices x hosts` simulated CPU devices, or (gpu = a target
    name of memjax.parallel.gpu_topology.TARGETS) for that GPU node's topology, deviceless, with the CUDA plugin.
    source: (config file, overrides) the child reads instead of the pickled config (a class a config file
    defines does not pickle)."""
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as fh:
        if source is None:
            pickle.dump(cfg, fh)
    what = ["--pickled", fh.name] if source is None else [source[0], *[x for o in source[1] for x in ("--set", o)]]
    try:
        # The child compiles programs only for their memory analysis and HLO, never runs them: LLVM's optimisation
        # of the machine code (xla_backend_optimization_level) changes neither (the plan's JSON is byte-identical)
        # and is about a third of the child's CPU time.
        flags = (f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices * hosts}"
                 " --xla_backend_optimization_level=0")
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
        extra = []
        if gpu:
            env["PYTHONPATH"] = os.pathsep.join(x for x in (str(AOT_DIR), str(ROOT), os.environ.get("PYTHONPATH", ""))
                                                if x)
            extra = ["--gpu-target", gpu]
        p = subprocess.run([sys.executable, "-m", "memjax.plan", *what, "--devices", str(devices), *extra, "--backend", "cpu",
                            "--hosts", str(hosts),
                            "--hbm-gib", str(hbm_gib), "--min-kv-gib", str(min_kv_gib), "--micro-batches",
                            str(micro_batches), "--json", "--no-exit-code"], env=env, capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    if p.returncode != 0:
        raise PlanError(f"memory plan failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(p.stdout)


def check(cfg, devices: int | None = None, hbm_gib: float | None = None, *, min_kv_gib: float = 16.0,
          model_cfg=None) -> dict:
    """Raise PlanError (one line) when `cfg` cannot shard on (shard_check) or does not fit the devices;
    defaults: this process's devices and their memory (bytes_limit). Returns the plan. Without a memory limit
    (CPU, hbm_gib None) only the sharding is checked and {} is returned."""
    import jax
    devices = devices or len(jax.devices())
    shard_check(cfg, devices, model_cfg)
    if hbm_gib is None:
        stats = jax.local_devices()[0].memory_stats() or {}
        if "bytes_limit" not in stats:
            return {}
        hbm_gib = stats["bytes_limit"] / GIB
    res = plan(cfg, devices, hbm_gib, min_kv_gib=min_kv_gib, model_cfg=model_cfg)
    if not res["fits"]:
        m = res["mesh"]
        raise PlanError(f"config does not fit {devices} x {hbm_gib:g} GiB (mesh data={m['data']} fsdp={m['fsdp']} "
                        f"tensor={m['tensor']}): {res['reason']}; see python -m memjax.plan")
    return res


def table(res: dict) -> str:
    from ..parallel.placement import Placement
    m = res["mesh"]
    hosts = res.get("hosts", 1)
    where = f"{hosts} hosts x {res['devices']}" if hosts > 1 else f"{res['devices']}"
    lines = [f"{res['model']} on {where} x {res['hbm_gib']:g} GiB, mesh data={m['data']} fsdp={m['fsdp']} "
             f"tensor={m['tensor']}, rows {res['micro_rows_effective']} x {res['row_len']} tokens per micro-batch "
             f"({res['rows_per_device']} per device; update.micro_rows={res['micro_rows']} rounded up, "
             f"{res['rounding_padding']:.0%} of it padding when only those fill it) (compiled on {res['backend']})",
             Placement(**{k: v for k, v in res["placement"].items() if k != "spans"}).line()
             if res.get("placement") else f"rollout: {res.get('engine_devices')} device(s)",
             f"{'component':<22}{'GiB/device':>12}"]
    for k in ROWS:
        if res["bytes"].get(k) or k in ("params", "optimizer", "train_temporaries", "rollout_weights", "kv_cache"):
            lines.append(f"{k:<22}{res['bytes'][k] / GIB:>12.2f}")
    lines.append("holds: " + ", ".join(f"{k} {v}" for k, v in res.get("holds", {}).items()))
    for ph, b in res.get("phases", {}).items():
        lines.append(f"{ph + ' phase':<22}{b / GIB:>12.2f}")
    lines.append(f"{'peak' if res.get('engine_sleep') else 'total (no engine_sleep)':<22}{res['total'] / GIB:>12.2f}")
    tr = res.get("traffic")
    if tr:
        an = tr["analytic_update"]
        fmt = lambda b: "n/a" if b is None else f"{b / GIB:.3f}"
        lower = " (lower bound: loops of unknown trip count)" if tr["update"]["unknown_trip_counts"] else ""
        lines.append(f"sent per device per update (GiB, ring model, {res['micro_batches']} micro-batches){lower}: "
                     f"between hosts {tr['update']['max_inter'] / GIB:.3f} (weights' least "
                     f"{fmt(an['inter'])}), inside a host {tr['update']['max_intra'] / GIB:.3f} (weights' least "
                     f"{fmt(an['intra_floor'])}, ZeRO-3 reference {fmt(an['intra_zero3'])})")
    if "cpu_compile" in res:
        d = res["gpu_vs_cpu_over_10pct"]
        lines.append("XLA:CPU compile of the same programs: " + ("within 10% on every row" if not d else "differs by "
                     "> 10%: " + ", ".join(f"{k} GPU {v['gpu_gib']} vs CPU {v['cpu_gib']} GiB" for k, v in d.items())))
    elif "deviceless" not in res.get("backend", ""):
        lines.append("compiled by XLA:CPU (no CUDA plugin: make venv installs it for the XLA:GPU compile)")
    room = f", {res['headroom']:.1%} of the device left at the peak" if "headroom" in res else ""
    lines.append(f"fits{room}" if res["fits"] else f"DOES NOT FIT: {res['reason']}")
    return "\n".join(lines)
