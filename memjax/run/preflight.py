"""What a training run would meet in its first minute, checked before anything loads; `memjax.train` and its
`--check` call the same functions, so `--check` passes exactly when the run would get past its start.

Owns: `settings(cfg, system)` (cross-section rules that no single dataclass can check: a group estimator needs
groups, a warm start the user names must exist, and an override the chosen system would ignore is refused, naming
it), `out_dir_writable(path)` (a temporary file made and removed in the nearest existing folder), `first_batch(cfg, system)` (the training data parse:
one generation batch read) and `describe_model(model)` (the model actually run, for the run's records).
Invariants: every refusal is one ConfigError line naming the field, its value and the fix; nothing here writes,
compiles or loads weights (out_dir_writable's temporary file aside).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..core.config import ConfigError
from ..core.outdir import out_dir_writable  # noqa: F401  (the run and --check share it)

# engine fields the loop applies on top of a system's own engine config (memjax/loop/start.py build)
DEPLOYMENT_ENGINE_FIELDS = ("data_parallel", "tensor_parallel")


def _own_model(system) -> bool:
    """The system loads its own model and tokenizer (the tiny tasks' warm starts), whatever `model.*` says."""
    from ..systems.base import System

    return type(system).load_model is not System.load_model


def _set_fields(section, default) -> dict:
    """{field: value} of a config section where it differs from the TrainConfig default."""
    return {f.name: getattr(section, f.name) for f in dataclasses.fields(section)
            if getattr(section, f.name) != getattr(default, f.name)}


def ignored_overrides(cfg, system) -> list[str]:
    """`model.X=v` / `engine.X=v` settings that `system` would not use (its own model or engine config)."""
    from .train_config import TrainConfig

    default = TrainConfig()
    out = []
    if _own_model(system):
        out += [f"model.{k}={v!r}" for k, v in _set_fields(cfg.model, default.model).items()]
    if not _own_model(system):  # a system on the config's model adapts the config's engine (e.g. a longer window)
        return out
    try:
        ecfg = system.engine_config(cfg.engine)
    except ValueError:
        return out  # the engine's own error is raised where the run builds it
    for k, v in _set_fields(cfg.engine, default.engine).items():
        if k not in DEPLOYMENT_ENGINE_FIELDS and getattr(ecfg, k) != v:
            out.append(f"engine.{k}={v!r} (it runs {getattr(ecfg, k)!r})")
    return out


def settings(cfg, system) -> None:
    """Refuse (ConfigError, one line) a config whose run would train nothing, read a warm start that is not there,
    or silently ignore an override."""
    gs = system.group_size
    if cfg.advantage.estimator == "grpo" and gs < 2:
        raise ConfigError(f"agent.group_size={gs}: GRPO compares the {gs} trajectory of a group with itself, so "
                          "every advantage is 0 and nothing trains; use agent.group_size >= 2 (or "
                          "advantage.estimator=gae)")
    ws = getattr(cfg.agent, "warmstart", "")
    if ws and not (Path(ws) / "config.json").is_file():
        raise ConfigError(f"agent.warmstart={ws}: no warm start there (no config.json); leave it empty for the "
                          f"shipped one, or make one there with the system's tiny warmstart module (--out {ws})")
    ignored = ignored_overrides(cfg, system)
    if ignored:
        what = "its own model and engine" if _own_model(system) else "its own engine config"
        raise ConfigError(f"system {system.name!r} runs {what} and would ignore {', '.join(ignored)}; remove the "
                          "override (the system's agent.* settings are what it uses)")


def training_data(cfg, system) -> None:
    """Open the training stream as the run does (its data files are read and parsed; no sample is made)."""
    try:
        system.train_data(cfg.prompts_per_step, cfg.seed)
    except (ConfigError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"training data of system {system.name!r}: {e}") from None


def describe_model(model) -> str:
    """The model actually run, in one line: parameters, layers, width, vocabulary."""
    import jax
    from flax import nnx

    c = model.cfg
    n = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    size = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
    return f"{size} parameters: {c.num_layers} layers, hidden {c.hidden_size}, vocab {c.vocab_size:,}"
