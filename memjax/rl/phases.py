"""Cost per phase of one training step: seconds, tokens/s, MFU and device-seconds per trained sample.

Owns `PHASES`, `PhaseClock` (named wall-clock intervals of one step) and `phase_metrics` (the keys the training
loop adds to each metrics.jsonl line, the console and the report page): time_<phase>_s, time_other_s, step_s,
flops_<phase>, tokens_per_s_<phase>, mfu_<phase> / mfu_step and gpu_s_per_sample, beside devices and device_kind.
MFU uses memjax.model.flops.estimate (verl's Qwen2 estimator; update = 3x forward per epoch, remat not counted) against
the device's dense bf16 peak, and is None where the peak is unknown (CPU): no peak is invented.
Invariants: the phases and time_other_s add up to step_s exactly; each phase ends at a host read of its result, so
device work is counted in the phase that launched it; the rollout's FLOPs are the trained conversations' forward
FLOPs scaled by rollout tokens / trained tokens (dynamic sampling also generated dropped groups).
docs/trainer.md, "What a training step writes", describes each key.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

from ..model import flops

PHASES = ("rollout", "old_logp", "ref_logp", "update", "weight_sync", "evaluation", "checkpoint")
SHORT = {"rollout": "rollout", "old_logp": "old", "ref_logp": "ref", "update": "update", "weight_sync": "sync",
         "evaluation": "eval", "checkpoint": "ckpt", "other": "other"}


class PhaseClock:
    """Seconds per phase of one step, started at construction: `with clock("rollout"): ...` or `clock.add(name, s)`
    (phases timed elsewhere, e.g. inside Trainer.update); `elapsed()` is the wall time since the start."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def __call__(self, name: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t)

    def add(self, name: str, seconds: float) -> None:
        if name not in self.seconds:
            raise KeyError(f"PhaseClock: unknown phase {name!r}; phases are {PHASES}")
        self.seconds[name] += float(seconds)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


def _rate(x: float, s: float) -> float | None:
    return x / s if s > 0 and x > 0 else None


def phase_metrics(clock: PhaseClock, *, model_cfg, conv_lens: list[int], rollout_tokens: int, ppo_epochs: int,
                  trained_samples: int, device_count: int, device=None) -> dict:
    """The per-phase keys of one step (module docstring). `conv_lens`: token lengths of the trained conversations
    (every process's); `rollout_tokens`: prompt + generated tokens of every generation batch; `device`: the device
    whose peak is used (default jax.devices()[0])."""
    step_s = clock.elapsed()
    sec = dict(clock.seconds)
    out = {f"time_{p}_s": sec[p] for p in PHASES}
    out["time_other_s"] = step_s - sum(sec.values())
    out["step_s"] = step_s
    peak = flops.peak_tflops(device)
    lens = [int(t) for t in conv_lens if t > 0]
    fwd = flops.estimate(model_cfg, lens, training=False) if lens else 0.0
    tok = sum(lens)
    work = {"rollout": (rollout_tokens, fwd * rollout_tokens / tok if tok else 0.0),
            "old_logp": (tok, fwd), "ref_logp": (tok, fwd), "update": (tok * ppo_epochs, 3 * fwd * ppo_epochs)}
    total_flops = 0.0
    for p, (n, f) in work.items():
        s = sec[p]
        if s <= 0 or n <= 0:
            continue
        total_flops += f
        out[f"flops_{p}"] = f
        out[f"tokens_per_s_{p}"] = n / s
        out[f"mfu_{p}"] = None if peak is None else f / s / (peak * 1e12 * device_count)
    out["mfu_step"] = None if peak is None or not total_flops else total_flops / step_s / (peak * 1e12 * device_count)
    out["gpu_s_per_sample"] = _rate(step_s * device_count, trained_samples) if trained_samples else None
    out["devices"] = device_count
    out["device_kind"] = flops.device_kind(device)
    return out


def console_line(m: dict) -> str:
    """One console line of a step's phases: seconds per phase, the step, MFU and device-seconds per sample."""
    parts = [f"{SHORT[p]} {m[f'time_{p}_s']:.2f}s" for p in (*PHASES, "other")
             if isinstance(m.get(f"time_{p}_s"), (int, float)) and (m[f"time_{p}_s"] > 0 or p == "rollout")]
    mfu = m.get("mfu_step")
    per = m.get("gpu_s_per_sample")
    return ("  phases: " + "  ".join(parts) + f"  | step {m.get('step_s', math.nan):.2f}s"
            + f"  MFU {'-' if mfu is None else f'{100 * mfu:.1f}%'}"
            + f"  {'-' if per is None else f'{per:.3g}'} device-s/sample")
