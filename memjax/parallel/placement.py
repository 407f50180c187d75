"""Where a training run's rollout engine runs: by default every device of its process.

Owns `Placement` (the engine's data_parallel D and tensor_parallel T on a process's N devices, why, and a one-line
warning when the rollout spans fewer devices than the run trains on), `place(...)`, and where a system's frozen
models run beside it (`held_devices`, `held_where`: every device the policy engine spans, or one). Mode "all"
(TrainConfig.rollout_devices, the default): D x T = N with T the least tensor-parallel degree (a divisor of N that
divides the heads, KV heads and MLP width) at which one device holds the run's resident state, 1/T of the engine's
weights and at least `min_kv_bytes` of KV; an engine.data_parallel other than 1 is kept as given, and single-device
engine options (unrolled layers, fuse_projections, fuse_rope_kv) keep D = T = 1 with a warning. Mode "config":
engine.data_parallel x engine.tensor_parallel exactly as set. Without a memory size (CPU, no plan_hbm_gib) the
least dividing T is taken and nothing is checked.
Invariants: the result splits the engine's totals (EngineConfig.per_device) or is an error line; pure arithmetic
on numbers the caller computed (memjax.plan), so `--check` runs it without compiling or loading anything.
"""

from __future__ import annotations

import dataclasses
import math

MODES = ("all", "config")
SINGLE_DEVICE_OPTIONS = (("layers", lambda k: k.layers != "scan"), ("fuse_projections", lambda k: k.fuse_projections),
                         ("fuse_rope_kv", lambda k: k.fuse_rope_kv))  # EngineConfig.kernels fields
GIB = 1 << 30


@dataclasses.dataclass(frozen=True)
class Placement:
    data_parallel: int
    tensor_parallel: int
    devices: int  # the process's devices (the run trains on all of them)
    why: str
    warning: str = ""
    error: str = ""  # non-empty: no placement fits (a run refuses with this line; the plan reports what does not
    # fit at the least T that splits, or refuses when none splits)

    @property
    def spans(self) -> int:
        return self.data_parallel * self.tensor_parallel

    def line(self) -> str:
        s = (f"rollout: {self.spans} of {self.devices} device(s): data_parallel {self.data_parallel} x "
             f"tensor_parallel {self.tensor_parallel} ({self.why})")
        return s + (f"\nwarning: {self.warning}" if self.warning else "")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"spans": self.spans}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _splits(ecfg, d: int) -> str:
    try:
        ecfg.per_device(d)
        return ""
    except ValueError as e:
        return str(e)


def place(ecfg, devices: int, heads: int, *, mode: str = "all", weight_bytes: int = 0, resident_bytes: int = 0,
          held_bytes: int = 0, hbm_bytes: int | None = None, min_kv_bytes: int = 0) -> Placement:
    """The engine's placement on `devices` devices (module docstring). heads: gcd of the model's heads, KV heads and
    MLP width (what T must divide); weight_bytes: the engine's whole weights; resident_bytes: the trainer's state
    per device; held_bytes: frozen models' weights + KV on the worst device (every device the policy engine spans
    with frozen_devices='engine'); hbm_bytes: one device's memory."""
    if mode not in MODES:
        raise ValueError(f"TrainConfig.rollout_devices must be one of {MODES}, got {mode!r}")
    t0, d0 = ecfg.tensor_parallel, ecfg.data_parallel
    if mode == "config" or d0 != 1:
        d = devices // t0 if d0 == -1 else d0
        how = "rollout_devices='config'" if mode == "config" else f"engine.data_parallel={d0} as set"
        warn = (f"the rollout spans {d * t0} of the {devices} devices the run trains on ({how}, engine.data_parallel="
                f"{d0}, engine.tensor_parallel={t0}); rollout_devices=all rolls out on every device"
                if d * t0 < devices else "")
        return Placement(d, t0, devices, how, warn)
    for field, on in SINGLE_DEVICE_OPTIONS:
        if on(ecfg.kernels) and devices > 1:
            value = getattr(ecfg.kernels, field)
            return Placement(1, 1, devices, f"engine.kernels.{field}={value!r} runs on one device",
                             f"the rollout spans 1 of the {devices} devices the run trains on (engine.kernels.{field}="
                             f"{value!r} is single-device); unset it to roll out on all")
    tried, first = [], None
    for t in _divisors(devices):
        if t < t0 or heads % t:
            continue
        d = devices // t
        bad = _splits(ecfg, d)
        if bad:
            tried.append(f"T={t}: {bad}")
            continue
        first = first or (d, t)
        if hbm_bytes is None:
            return Placement(d, t, devices, "every device; no memory size to check (plan_hbm_gib)")
        left = hbm_bytes - resident_bytes - held_bytes - weight_bytes / t
        if left >= min_kv_bytes:
            need = ("weights fit one device" if t == 1 else f"the engine's totals split into {d} groups" if all(
                "total over" in x for x in tried) else f"weights/KV need {t} devices per group")
            return Placement(d, t, devices, f"every device; {need}: {left / GIB:.1f} GiB left for KV per device")
        tried.append(f"T={t}: {left / GIB:.1f} GiB KV < {min_kv_bytes / GIB:g}")
    d, t = first or (1, t0)  # the least T that splits: the plan then says what does not fit
    return Placement(d, t, devices, "no placement leaves the KV" if first else "no placement", error=(
        f"no engine placement over the {devices} devices fits: " + "; ".join(tried or ["no tensor_parallel divides "
                                                                                     f"{heads} heads"])))


def heads_of(mcfg) -> int:
    """What tensor_parallel must divide: the heads, KV heads and MLP width of the model."""
    return math.gcd(mcfg.num_heads, mcfg.num_kv_heads, mcfg.intermediate_size)


def held_devices(h, spans: int) -> int:
    """Devices of this process a held model's engine spans (memjax.systems.base.HeldModel) when the policy engine
    spans `spans` of them: all of them (devices "engine": data-parallel, a full copy on each) or one ("one")."""
    return spans if getattr(h, "devices", "one") == "engine" else 1


def held_where(h, spans: int) -> str:
    """Where a held (frozen) model lives: the memory plan's holds line and --check."""
    n, kv = held_devices(h, spans), f"{h.kv_cache_bytes / GIB:g} GiB KV"
    if n > 1:
        return (f"frozen copy on each of the policy engine's {n} devices (data_parallel {n}), {kv} per device "
                "(frozen_devices='engine')")
    return f"frozen copy on one device, {kv} (frozen_devices='{getattr(h, 'devices', 'one')}')"
