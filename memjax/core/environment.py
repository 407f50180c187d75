"""The software and hardware a process computes with, as a run records it.

Owns `describe()` ({python, packages: {name: version}, backend, device_kind, devices, processes, cpu}),
`changes(before, now)` (one "what: before -> now" string per entry that differs), `newest(run_record)` (what a
run.json recorded last) and `line(env)` (the short form a page shows).
Why: XLA compiles for the processor and the accelerator it runs on and the libraries decide the numerics, so one
config and one code digest give other numbers on another machine or release (README: the demo's step-30 numbers on
two processors). A training run writes its environment into run.json and result.json, an evaluation into
results.json; a resume elsewhere is said in one line and recorded, never refused: moving a run is legitimate.
Invariants: reads jax's device list only, never starts a backend where asked not to (no device work; call it
after jax.distributed is initialised); `cpu` is this process's processor model (process 0's in a run's files).
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

# the packages whose release changes what a step computes, draws or scores
PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "ml_dtypes", "tokenizers", "nltk")


def cpu_model() -> str:
    """The processor's model name (/proc/cpuinfo on Linux), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for row in f:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _backend_started() -> bool:
    """Whether this process already started a jax backend (asking for devices starts one, which on a GPU takes
    its memory: a scoring of an answers file must not)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # jax moved it: leave the devices out rather than start a backend
        return False


def describe(devices: bool | None = True) -> dict[str, Any]:
    """This process's environment (module docstring); `devices=None` adds the devices only when a jax backend is
    already started, `False` never."""
    env: dict[str, Any] = {"python": platform.python_version(),
                           "packages": {n: v for n in PACKAGES if (v := _version(n)) is not None}}
    if devices or (devices is None and _backend_started()):
        import jax

        devs = jax.devices()
        env.update(backend=devs[0].platform, device_kind=str(devs[0].device_kind), devices=len(devs),
                   processes=jax.process_count())
    env["cpu"] = cpu_model()
    return env


def changes(before: dict | None, now: dict) -> list[str]:
    """'what: before -> now' for every entry of `now` that differs from `before` (nothing when `before` is None: a
    run recorded before environments were)."""
    if not before:
        return []
    out = []
    for key, value in now.items():
        if key == "packages":
            old = before.get("packages") or {}
            out += [f"{n} {old.get(n, '-')} -> {v}" for n, v in value.items() if old.get(n) != v]
        elif before.get(key) != value:
            out.append(f"{key}: {before.get(key, '-')} -> {value}")
    return out


def newest(run_record: dict) -> dict | None:
    """The environment a run.json holds last: its newest resume's that recorded one, else the start's."""
    resumed = [r["environment"] for r in run_record.get("resumed") or []
               if isinstance(r, dict) and isinstance(r.get("environment"), dict)]
    env = resumed[-1] if resumed else run_record.get("environment")
    return env if isinstance(env, dict) else None


def line(env: dict) -> str:
    """'jax 0.11.2, 8 x NVIDIA H100 80GB HBM3 (gpu), 1 process, AMD EPYC ...': the environment in one line (the
    devices only where they were recorded)."""
    parts = [f"jax {(env.get('packages') or {}).get('jax', '?')}"]
    if "devices" in env:
        procs = env.get("processes", 1)
        parts += [f"{env['devices']} x {env.get('device_kind', '?')} ({env.get('backend', '?')})",
                  f"{procs} process{'es' if procs != 1 else ''}"]
    return ", ".join(parts + [str(env.get("cpu", "?"))])
