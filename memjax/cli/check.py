"""`--check` of `python -m memjax.train` and `python -m memjax.evaluate`: everything a run does before its model
loads, then a summary of what would run, and exit 0.

Owns: check_train(cfg) and check_evaluate(cfg). They validate the config (its dataclasses already did on
construction), build the system (which resolves its data paths: a missing file is the same one-line error the
run would give), read the model's config.json when `model.hf_path` (or a policy) names a Hugging Face directory
(no weights are read), resolve the mesh against the devices this process sees, and print one line per fact.
Invariant: nothing is written (no out_dir is created or locked), no weights are loaded, nothing is compiled;
any failure is a ConfigError / ValueError / FileNotFoundError, which the CLI turns into exit code 2.
"""

from __future__ import annotations

from pathlib import Path

from ..core.config import ConfigError


def _model_line(src, where: str = "model") -> str:
    """The model the run would load: its config.json (read, no weights) or the random-weights preset."""
    from ..model import presets

    if src.hf_path:
        from ..checkpoint.hf import load_config

        if not (Path(src.hf_path) / "config.json").is_file():
            raise ConfigError(f"{where}.hf_path={src.hf_path}: not a Hugging Face model directory (no config.json)")
        m = load_config(src.hf_path, dtype=src.dtype)
        return f"{where}: {src.hf_path} ({m.num_layers} layers, hidden {m.hidden_size}, vocab {m.vocab_size:,})"
    m = presets.get(src.preset, param_dtype=src.dtype)
    return f"{where}: random weights of preset {src.preset!r} ({m.num_layers} layers, hidden {m.hidden_size})"


def _system(agent, seed: int):
    from ..systems import build

    try:
        return build(agent, seed=seed)
    except KeyError as e:
        raise ConfigError(str(e.args[0])) from None


def _finish(lines: list[str]) -> None:
    print("\n".join(lines))
    print("check: ok (nothing loaded or written)")


def check_train(cfg) -> None:
    import jax

    from ..run import preflight
    from ..run.identity import check_resume, finished

    system = _system(cfg.agent, cfg.seed)
    preflight.settings(cfg, system)  # what the run checks at its start (groups, warm start, ignored overrides)
    from ..loop.start import check_schedule
    from ..parallel.startup import launch_rank, launched_as_many

    # --check starts no jax.distributed: each launched process sees its own devices, the launch says how many
    procs = (launch_rank() or (0, 1))[1] if launched_as_many() else 1
    check_schedule(cfg, system, [int(system.stage(s)) for s in range(cfg.steps)], processes=procs)
    preflight.out_dir_writable(cfg.out_dir)
    out = Path(cfg.out_dir)
    from ..run.identity import has_progress

    if not cfg.resume and out.is_dir() and has_progress(out):  # what the run would refuse at its start
        raise ConfigError(f"out_dir={cfg.out_dir}: holds a run (checkpoints or result.json) and resume=false; use a "
                          "new out_dir (or resume=true)")
    from ..core.compile_cache import check_writable

    check_writable(getattr(cfg, "compile_cache", "none"))
    resumable = out.is_dir() and check_resume(out, cfg) is not None  # another config's run dir: refused
    done = out.is_dir() and finished(out, cfg) is not None
    preflight.training_data(cfg, system)  # the training data files parse
    m = cfg.mesh
    split = cfg.rollout_split if cfg.schedule == "split_async" else 0  # check_schedule: fewer than the devices
    devices = jax.local_device_count() * procs
    trainer = devices - split * procs  # split_async: every process rolls out on its first `split`
    try:
        data, fsdp, tensor = m.global_sizes(trainer, procs)
    except ValueError as e:
        where = f"the {trainer} trainer devices of {devices}" if split else f"{devices} device(s)"
        raise ConfigError(f"mesh=(data {m.data}, fsdp {m.fsdp}, tensor {m.tensor}): {e} (jax sees {where})") from None
    own = preflight._own_model(system)
    _finish([f"python -m memjax.train: system {system.name!r}, {cfg.steps} steps x {cfg.prompts_per_step} prompts, "
             f"estimator {cfg.advantage.estimator}, group size {system.group_size}, schedule {cfg.schedule}"
             + (f" (max_staleness {cfg.max_staleness})" if cfg.schedule != "sync" else "")
             + (f", rollout on devices 0..{split - 1}" + (" of each process" if procs > 1 else "")
                + f", training on the other {trainer}" if split else ""),
             "model: the system's own (warm start, vocabulary; model.* does not apply)" if own
             else _model_line(cfg.model),
             "data: the training stream opens (its files parse)",
             f"mesh: data {data} x fsdp {fsdp} x tensor {tensor} on {trainer} {jax.default_backend()} device(s)",
             _engine_line(system, cfg, split or jax.local_device_count()),
             f"out_dir: {cfg.out_dir} (" + ("finished: a run would do nothing" if done else "resumes its run, same "
                                            "config" if resumable else "fresh") + ")"])


def _engine_line(system, cfg, devices: int) -> str:
    """The engine config that runs and where it rolls out: on `devices` devices of this process."""
    try:
        e = system.engine_config(cfg.engine)
    except ValueError as err:
        raise ConfigError(f"engine: {err}") from None
    import jax

    from ..run.layout import (  # where it rolls out (memjax/parallel/placement.py)
        model_config,
        rollout_line,
    )
    try:
        head_dim = model_config(cfg).head_dim
    except (OSError, ValueError, KeyError):
        head_dim = 128
    r = e.resolve(jax.default_backend(), head_dim)  # what the engine runs here (Engine keeps it as .config)
    k, kv = r.kernels, r.kv
    pool = (f"{kv.num_pages} pages" if kv.num_pages else f"{kv.kv_cache_gib} GiB" if kv.kv_cache_gib
            else f"{kv.kv_cache_bytes:,} bytes" if kv.kv_cache_bytes else "90% of free memory")
    return (f"engine: {r.max_slots} slots, window {r.window}, schedule {r.schedule}, attention {k.attention}, "
            f"layers {k.layers}, weights {k.weight_dtype}; KV pool {pool}, {kv.kv_dtype}\n"
            + rollout_line(cfg, e, devices))


def check_evaluate(cfg) -> None:
    from ..core.outdir import out_dir_writable
    from ..evaluation.locomo import LocomoEvalConfig
    from ..evaluation.longmemeval import LongMemEvalConfig
    from .eval_config import EvalConfig, SystemEvalConfig

    out_dir_writable(cfg.out_dir)
    if isinstance(cfg, LongMemEvalConfig):
        from ..evaluation.longmemeval import TINY_LME_SYSTEMS, check_lines

        own = cfg.system == "answers" or cfg.system in TINY_LME_SYSTEMS   # the tiny systems name their `policy`
        _finish(check_lines(cfg) + ([] if own else [_model_line(cfg.model)]))
    elif isinstance(cfg, LocomoEvalConfig):
        from ..evaluation.locomo import locomo_inputs

        n = len(locomo_inputs(cfg))  # the file parses, the split has questions
        lines = [f"python -m memjax.evaluate: LoCoMo {cfg.split}/{cfg.part} ({n} questions), system {cfg.system!r}, "
                 f"judge {cfg.judge}", f"data_path: {cfg.data_path}"]
        if cfg.system == "answers":
            lines.append(f"answers: {cfg.answers}")
        else:
            lines.append(_model_line(cfg.model))
        _finish(lines + [f"out_dir: {cfg.out_dir}"])
    elif isinstance(cfg, SystemEvalConfig):
        system = _system(cfg.agent, cfg.seed)
        lines = [f"python -m memjax.evaluate: held-out evaluation of system {system.name!r}", _model_line(cfg.model)]
        if cfg.policy:
            from ..checkpoint.source import ModelSource

            lines.append(_model_line(ModelSource(hf_path=cfg.policy), "policy").replace(".hf_path", ""))
        _finish(lines + [f"out_dir: {cfg.out_dir}"])
    elif isinstance(cfg, EvalConfig):
        from ..systems.memagent.length_eval import check_length_data, length_sets

        source = check_length_data(cfg)
        sets = length_sets(cfg)  # reads and validates every record (one-line error naming file, row, field)
        _finish([f"python -m memjax.evaluate: MemAgent accuracy at num_docs {[n for n, _, _ in sets]}, "
                 f"{[k for _, k, _ in sets]} questions{', with the full-context baseline' if cfg.baseline else ''}",
                 _model_line(cfg.model), f"data_path: {cfg.data_path} ({source})", f"out_dir: {cfg.out_dir}"])
    else:
        raise ConfigError(f"config is a {type(cfg).__name__}; memjax.evaluate expects an EvalConfig, a "
                          "SystemEvalConfig, a LocomoEvalConfig or a LongMemEvalConfig (a training config goes to python -m memjax.train)")
