"""FLOP accounting for Qwen2.5 decoders, MemAgent stage accounting, and MFU / roofline helpers.

Owns the one FLOP formula every throughput number in memjax is reported with (`estimate`: verl's Qwen2 estimator,
`_estimate_qwen2_flops` in verl/utils/flops_counter.py, which the MemAgent paper's appendix A uses), the executed
matmul count (`matmul_flops`), MemAgent's stage accounting, the per-device peak tables (`DEVICE_SPECS`) and the
arithmetic that turns (FLOPs, seconds) into MFU.
Invariants: every FLOP count is exact integer arithmetic converted to float once at the end; forward == training /
3 exactly; counts are additive over sequences; the estimate keeps verl's conventions (2·V·h per token for embedding
+ LM head even when tied, full s² attention, no elementwise ops) so MFU figures compare with verl's and the paper's.
Peak tables hold dense bf16 tensor-core TFLOP/s and HBM TB/s; `MEMJAX_PEAK_TFLOPS` / `MEMJAX_PEAK_HBM_TBPS` (or an
explicit argument) override them; an unknown device (e.g. CPU) has no peak and its MFU is NaN.
docs/performance.md, "How to read the FLOP-linearity results", has the formula and the stage accounting.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memjax.model.config import ModelConfig

__all__ = ["estimate", "matmul_flops", "memagent_seqlens", "baseline_seqlens", "memagent_flops",
           "baseline_flops", "DeviceSpec", "DEVICE_SPECS", "device_kind", "device_spec", "peak_tflops",
           "peak_tflops_with_source", "hbm_tbps", "mfu", "roofline_seconds", "PEAK_ENV", "HBM_ENV"]

PEAK_ENV = "MEMJAX_PEAK_TFLOPS"
HBM_ENV = "MEMJAX_PEAK_HBM_TBPS"


# ---------------------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------------------
def _seqlens(seqlens: Iterable[int]) -> list[int]:
    out = []
    for s in seqlens:
        if isinstance(s, bool) or int(s) != s or s < 0:
            raise ValueError(f"flops: seqlens must be non-negative integers, got {s!r}")
        out.append(int(s))
    return out


def _dense_n(cfg: ModelConfig) -> int:
    h, hd = cfg.hidden_size, cfg.head_dim
    attn_linear = h * (cfg.num_heads * hd + 2 * cfg.num_kv_heads * hd + cfg.num_heads * hd)
    return (3 * h * cfg.intermediate_size + attn_linear) * cfg.num_layers + 2 * cfg.vocab_size * h


def estimate(cfg: ModelConfig, seqlens: Iterable[int], training: bool = True) -> float:
    """verl's Qwen2 estimate of the FLOPs to process sequences of the given lengths (see module doc).

    training=True: forward + backward (6·dense_N·Σs + 12·Σs²·hd·n_heads·L); False: forward only (1/3).
    """
    s = _seqlens(seqlens)
    total = 6 * _dense_n(cfg) * sum(s) + 12 * sum(x * x for x in s) * cfg.head_dim * cfg.num_heads * cfg.num_layers
    return float(total if training else total // 3)  # both terms are multiples of 3: exact


def matmul_flops(cfg: ModelConfig, seqlens: Iterable[int], training: bool = False) -> float:
    """FLOPs of the matmuls the memjax decoder executes with dense (full s², masked) attention.

    Differs from `estimate` only by the embedding: a gather, 0 FLOPs (estimate counts 2·V·h per token
    forward). Training counts backward as 2× forward (×3 total), like `estimate`.
    """
    s = _seqlens(seqlens)
    fwd = 2 * (_dense_n(cfg) - cfg.vocab_size * cfg.hidden_size) * sum(s) \
        + 4 * sum(x * x for x in s) * cfg.head_dim * cfg.num_heads * cfg.num_layers
    return float(3 * fwd if training else fwd)


# ---------------------------------------------------------------------------------------------------
# MemAgent vs full-context stage accounting
# ---------------------------------------------------------------------------------------------------
def memagent_seqlens(context_len: int, q: int = 1024, o: int = 1024, chunk: int = 5000) -> list[int]:
    """Per-conversation lengths for one MemAgent document read: [q+200+o, (q+200+chunk+o)·k, q+100+o]."""
    for name, v in (("context_len", context_len), ("q", q), ("o", o), ("chunk", chunk)):
        if isinstance(v, bool) or int(v) != v or v < (1 if name == "chunk" else 0):
            raise ValueError(f"memagent_seqlens: {name} must be a {'positive' if name == 'chunk' else 'non-negative'}"
                             f" integer, got {v!r}")
    k = -(-int(context_len) // int(chunk))  # ceil(c / N)
    return [q + 200 + o] + [q + 200 + chunk + o] * k + [q + 100 + o]


def baseline_seqlens(context_len: int, q: int = 1024, o: int = 1024) -> list[int]:
    """The full-context baseline: the whole document in one sequence of q + c + o tokens."""
    return _seqlens([q + context_len + o])


def memagent_flops(cfg: ModelConfig, context_len: int, training: bool = True, **stage_kw: int) -> float:
    return estimate(cfg, memagent_seqlens(context_len, **stage_kw), training=training)


def baseline_flops(cfg: ModelConfig, context_len: int, training: bool = True, q: int = 1024,
                   o: int = 1024) -> float:
    return estimate(cfg, baseline_seqlens(context_len, q=q, o=o), training=training)


# ---------------------------------------------------------------------------------------------------
# Device peaks, MFU, roofline
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceSpec:
    name: str
    bf16_tflops: float  # dense tensor-core peak, no structured sparsity
    hbm_tbps: float  # HBM bandwidth, TB/s (1e12 bytes/s)


# Matched on the lower-case alphanumeric tokens of `device.device_kind`; all tokens of an entry must be
# present; first match wins (so the PCIe / NVL variants come before plain H100 = the SXM part, whose
# device_kind is "NVIDIA H100 80GB HBM3"). Sources: NVIDIA H100 / H200 / A100 datasheets.
DEVICE_SPECS: tuple[tuple[frozenset[str], DeviceSpec], ...] = (
    (frozenset({"h100", "pcie"}), DeviceSpec("H100 PCIe", 756.0, 2.0)),
    (frozenset({"h100", "nvl"}), DeviceSpec("H100 NVL", 835.0, 3.9)),
    (frozenset({"h100"}), DeviceSpec("H100 SXM", 989.0, 3.35)),
    (frozenset({"h200"}), DeviceSpec("H200", 989.0, 4.8)),
    (frozenset({"a100", "40gb"}), DeviceSpec("A100 40GB", 312.0, 1.555)),
    (frozenset({"a100"}), DeviceSpec("A100 80GB", 312.0, 2.039)),
)


def device_kind(device: Any = None) -> str:
    """`device_kind` of a jax Device, a string as given, or of jax.devices()[0] when None."""
    if device is None:
        import jax
        device = jax.devices()[0]
    return device if isinstance(device, str) else str(device.device_kind)


def device_spec(device: Any = None) -> DeviceSpec | None:
    """Table entry for a device (jax Device, device_kind string, or None = first jax device)."""
    tokens = set(re.split(r"[^a-z0-9]+", device_kind(device).lower()))
    for need, spec in DEVICE_SPECS:
        if need <= tokens:
            return spec
    return None


def _env_float(var: str) -> float | None:
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"{var}={raw!r} is not a number") from None
    if not v > 0:
        raise ValueError(f"{var}={raw!r} must be > 0")
    return v


def peak_tflops_with_source(device: Any = None, override: float | None = None) -> tuple[float | None, str]:
    """(peak dense bf16 TFLOP/s or None, where it came from): override > $MEMJAX_PEAK_TFLOPS > table."""
    if override is not None:
        if not override > 0:
            raise ValueError(f"peak TFLOP/s override must be > 0, got {override!r}")
        return float(override), "argument"
    env = _env_float(PEAK_ENV)
    if env is not None:
        return env, f"${PEAK_ENV}"
    spec = device_spec(device)
    if spec is None:
        return None, f"unknown device {device_kind(device)!r} (set ${PEAK_ENV})"
    return spec.bf16_tflops, f"table: {spec.name} bf16 dense"


def peak_tflops(device: Any = None, override: float | None = None) -> float | None:
    return peak_tflops_with_source(device, override)[0]


def hbm_tbps(device: Any = None, override: float | None = None) -> float | None:
    """HBM bandwidth in TB/s: override > $MEMJAX_PEAK_HBM_TBPS > table; None when unknown."""
    if override is not None:
        if not override > 0:
            raise ValueError(f"HBM TB/s override must be > 0, got {override!r}")
        return float(override)
    env = _env_float(HBM_ENV)
    if env is not None:
        return env
    spec = device_spec(device)
    return None if spec is None else spec.hbm_tbps


def mfu(flops: float, seconds: float, device: Any = None, peak: float | None = None) -> float:
    """Model FLOPs utilisation: (flops / seconds) / peak. NaN when the device's peak is unknown.

    `peak` overrides the peak in TFLOP/s; `device` is a jax Device, a device_kind string, or None.
    """
    if not seconds > 0:
        raise ValueError(f"mfu: seconds must be > 0, got {seconds!r}")
    p = peak_tflops(device, peak)
    return math.nan if p is None else flops / seconds / (p * 1e12)


def roofline_seconds(flops: float, bytes_moved: float, device: Any = None, *, peak: float | None = None,
                     bandwidth: float | None = None) -> float:
    """Lower bound on run time: max(flops / peak FLOP/s, bytes / HBM bytes/s). NaN if either is unknown.

    `peak` in TFLOP/s and `bandwidth` in TB/s override the table for this call.
    """
    p, bw = peak_tflops(device, peak), hbm_tbps(device, bandwidth)
    if p is None or bw is None:
        return math.nan
    return max(flops / (p * 1e12), bytes_moved / (bw * 1e12))
