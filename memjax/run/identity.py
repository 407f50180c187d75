"""What a training run is, and the check a resume makes against it: OUT_DIR/run.json.

Owns: `record` (writes run.json: the whole config, the system, the code digest of the memjax sources, the model
actually run and its environment: versions, devices, processor), `check_resume` (a resume whose config differs
from the recorded one outside `RESUMABLE` refuses with one line naming every differing field), `finished` (a run
whose result.json already reaches `steps`: re-running it is a no-op) and `keep_previous` (a run extended past its
old `steps` keeps what the earlier result.json held that this process cannot recompute: the step-0 traces, the
held-out samples, the seconds spent before).
Invariants: run.json is written once, when a run starts from nothing, and only appended to (`resumed`: each
resume's code digest, environment and changed allow-listed fields); a run dir without run.json (written before it
existed) is checked against its result.json's config when there is one; a different code digest or environment is
said once per resume, never refused (a fix must be able to resume a run, and a run may move to another machine); no
file of a finished run is rewritten by a re-run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from ..core.config import ConfigError
from ..core.environment import changes as env_changes, newest as newest_env

# settings a resume may change: they decide how long the run goes, how often it is evaluated or saved, how memory
# is planned and where compiled programs are cached, never what a step computes (every other field changes the
# results: the run refuses)
RESUMABLE = ("steps", "resume", "out_dir", "eval_every", "checkpoint_every", "keep_checkpoints", "plan_hbm_gib",
             "min_kv_gib", "engine_sleep", "engine.progress", "compile_cache", "engine.kernels.compilation_cache_dir")

RUN_FILE = "run.json"


def flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted key: JSON value} of a config dataclass (or of its asdict / JSON form)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    obj = json.loads(json.dumps(obj, default=str)) if not prefix else obj
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differing(saved: dict, now: dict, allowed=RESUMABLE) -> list[str]:
    """The dotted fields whose values differ between two flat configs, outside `allowed`."""
    keys = sorted(set(saved) | set(now))
    return [k for k in keys if k not in allowed and saved.get(k, "<absent>") != now.get(k, "<absent>")]


# option groups a config class gained: a record written before the group holds `a.b.field` where the config now
# has `a.b.<group>.field` (EngineConfig's KV-cache and kernel options)
GROUPS = ("kv", "kernels")


def regrouped(saved: dict, now: dict) -> dict:
    """saved with every key the current config holds one group deeper (GROUPS) moved there, so a run recorded
    before the grouping resumes under the same values; keys neither config has are kept (they differ)."""
    out = {}
    for k, v in saved.items():
        head, _, last = k.rpartition(".")
        moved = [f"{head}.{g}.{last}" if head else f"{g}.{last}" for g in GROUPS]
        hit = [m for m in moved if k not in now and m in now and m not in saved]
        out[hit[0] if hit else k] = v
    return out


def _defaults(cfg) -> dict:
    """The flat field defaults of cfg's config class (its system's agent section: that section's defaults)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        if f.name == "agent":
            v = type(cfg.agent)()
        elif f.default is not dataclasses.MISSING:
            v = f.default
        elif f.default_factory is not dataclasses.MISSING:
            v = f.default_factory()
        else:
            continue
        out[f.name] = dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
    return flat(out)


def _short(v: Any) -> str:
    s = json.dumps(v, default=str)
    return s if len(s) <= 40 else s[:37] + "..."


def has_progress(out: Path) -> bool:
    """A checkpoint or a result: the out dir holds a run that a start would resume (or re-run)."""
    ckpts = out / "checkpoints"
    steps = ckpts.is_dir() and any(p.name.isdigit() for p in ckpts.iterdir())
    return bool(steps) or (out / "result.json").is_file()


def recorded(out: Path) -> dict | None:
    """run.json, or for a run dir written before run.json existed, its result.json's config; None if neither."""
    for name, key in ((RUN_FILE, None), ("result.json", "config")):
        p = out / name
        if p.is_file():
            try:
                obj = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as e:
                raise ConfigError(f"{p}: unreadable ({e}); move it aside to resume without the check") from None
            return obj if key is None else {"config": obj.get(key) or {}, "system": obj.get("system")}
    return None


def check_resume(out: Path, cfg) -> dict | None:
    """Before a run loads anything: refuse (ConfigError, one line) a resume of `out` under a config that differs
    from the recorded one outside RESUMABLE (a field newer than the record counts as its default there). Returns the
    record (None: nothing to resume, or not resuming)."""
    if not cfg.resume or not has_progress(out):
        return None
    rec = recorded(out)
    if rec is None or not rec.get("config"):
        return rec
    now = flat(cfg)
    saved = regrouped(flat(rec["config"]), now)
    defaults = _defaults(cfg)
    # a field the record lacks was added to memjax after the run started: the older code ran it at its default
    saved = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
    diff = differing(saved, now)
    if "agent.name" in diff:
        raise ConfigError(f"out_dir={cfg.out_dir} holds a run of system {saved.get('agent.name')!r}, not "
                          f"{now.get('agent.name')!r}; use a new out_dir")
    if diff:
        shown = ", ".join(f"{k}: {_short(saved.get(k))} -> {_short(now.get(k))}" for k in diff[:6])
        more = f" and {len(diff) - 6} more" if len(diff) > 6 else ""
        raise ConfigError(f"out_dir={cfg.out_dir} holds a run of another config ({shown}{more}); a resume may "
                          f"only change {', '.join(RESUMABLE)}: use a new out_dir")
    return rec


def record(out: Path, cfg, system: str, code: str, model_run: str, previous: dict | None, say=print,
           environment: dict | None = None) -> None:
    """Write run.json for a run starting from nothing, or append this resume to it (the code digest and the
    environment it ran with, the allow-listed fields it changed); a different code digest, and an environment that
    differs from the last one recorded (memjax/core/environment.py), are each said in one line."""
    path = out / RUN_FILE
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if previous is None or not path.is_file():
        obj = {"config": json.loads(json.dumps(dataclasses.asdict(cfg), default=str)), "system": system,
               "code": code, "model_run": model_run, "started": now, "environment": environment, "resumed": []}
        if previous is not None:  # an older run dir: its identity is the one its result recorded
            obj["config"] = previous.get("config") or obj["config"]
    else:
        obj = dict(previous)
        changed = {k: v for k, v in flat(cfg).items() if flat(obj["config"]).get(k) != v}
        last_env = newest_env(obj)
        obj["resumed"] = list(obj.get("resumed", [])) + [{"code": code, "changed": changed, "at": now,
                                                          "environment": environment}]
        if obj.get("code") and obj["code"] != code:
            say(f"note: resuming {out} with other code (digest {code[:12]}, the run started with "
                f"{obj['code'][:12]}); recorded in {path.name}")
        moved = env_changes(last_env, environment) if environment else []
        if moved:
            say(f"note: resuming {out} in another environment ({'; '.join(moved)}): numbers may differ from an "
                f"uninterrupted run's; recorded in {path.name}")
    from ..core.outdir import write_atomic

    write_atomic(path, json.dumps(obj, indent=1) + "\n")


def finished(out: Path, cfg) -> dict | None:
    """result.json of a run in `out` that already reached cfg.steps (a re-run of it is a no-op), else None."""
    p = out / "result.json"
    if not cfg.resume or not p.is_file():
        return None
    try:
        res = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    hist = res.get("history") or []
    last = int(hist[-1].get("step", 0)) if hist else 0
    return res if last >= cfg.steps else None


def keep_previous(result: dict, previous: dict | None) -> dict:
    """An extended run's result.json keeps what its earlier one held and this process could not recompute: the
    traces and held-out samples of evaluations made before the resume, and the seconds spent then."""
    if not previous:
        return result
    out = dict(result)
    for key in ("traces_before", "traces_after", "heldout"):
        if not out.get(key) and previous.get(key):
            same = key != "traces_after" or (previous.get("after") or {}).get("step") == (out.get("after") or
                                                                                         {}).get("step")
            if same:
                out[key] = previous[key]
    if isinstance(previous.get("seconds"), (int, float)):
        out["seconds"] = float(previous["seconds"]) + float(out.get("seconds") or 0.0)
    return out


def recorded_result(out: Path) -> dict | None:
    """The result.json a run dir holds now (before a resumed run rewrites it), or None."""
    p = out / "result.json"
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None
