"""The policy update's settings: `OptimConfig` (AdamW, warm-up, clipping, what a non-finite step does), `LossConfig`
(PPO clips, aggregation, KL, entropy, token- or step-level ratios) and `UpdateConfig` (epochs, mini- and
micro-batches, row layout, attention, the reference's dtype), with `lr_at` (the learning-rate schedule) and
`NonFiniteError`.

The TrainConfig sections `optim`, `loss` and `update` (memjax/run/train_config.py); memjax/rl/trainer.py's `Trainer`
and the PPO critic (memjax/rl/critic.py) consume them. Config files import them from memjax.rl.trainer, where they
are also bound.
Invariants: every config is frozen and checked whole when made (one ValueError line naming the field and value:
non-finite floats, non-positive counts, unknown modes); the schedule counts TRAINING steps (`Trainer.update`
calls), not optimizer steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import jax.numpy as jnp

from ..core.cli import RunError
from ..kernels.reference import CLAMP_MODES
from ..model.flash_attention import ATTENTION_KINDS
from .losses import AGG_MODES, KL_ESTIMATORS
from .offpolicy import OffPolicyConfig

NONFINITE_POLICIES = ("stop", "skip")


class NonFiniteError(RunError):
    """The loss or gradient became NaN/inf; raised before the bad update reaches the parameters."""


def _finite_fields(obj) -> None:
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{type(obj).__name__}.{f.name} must be finite, got {v}")


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-6
    warmup_steps: int = 10  # linear warm-up over this many TRAINING steps (Trainer.update calls, the `step`
    # the loop passes; verl advances its schedule once per update call), then constant. Not optimizer steps:
    # with 16 mini-batches a 20-step warm-up would otherwise end after 1.25 training steps.
    weight_decay: float = 0.01
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    grad_clip: float = 1.0  # global-norm clip; 0 = off
    on_nonfinite: str = "stop"  # NaN/inf loss or gradient: "stop" the run, or "skip" the step (counted)

    def __post_init__(self):
        _finite_fields(self)
        if self.lr <= 0 or self.warmup_steps < 0 or self.grad_clip < 0 or self.weight_decay < 0 or self.eps <= 0:
            raise ValueError(f"OptimConfig: lr and eps must be > 0, warmup_steps, grad_clip and weight_decay >= 0 "
                             f"(got {self})")
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
            raise ValueError(f"OptimConfig: b1 and b2 must be in [0, 1), got {self.b1}, {self.b2}")
        if self.on_nonfinite not in NONFINITE_POLICIES:
            raise ValueError(f"OptimConfig.on_nonfinite must be one of {NONFINITE_POLICIES}, got {self.on_nonfinite!r}")


LOSS_LEVELS = ("token", "step")


@dataclass(frozen=True)
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.28  # DAPO clip-higher
    dual_clip: float | None = None
    agg: str = "token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    log_ratio_clamp: float = 20.0
    log_ratio_clamp_mode: str = "both"  # "both": clip to +-log_ratio_clamp; "upper": min(., clamp) only, as
    # Memory-R2's official compute_policy_loss (configs/memory_r2*.py; memjax/kernels/reference.clamp_log_ratio)
    level: str = "token"  # "token": per-token ratios (policy_loss); "step": one length-normalised ratio per
    # row (Memory-R2, memjax/rl/losses.step_policy_loss), mean over the mini-batch's steps (agg is ignored;
    # kl_coef / entropy_coef terms are token means over the mini-batch)
    loss_scale_tokens: int | None = None  # Dr.GRPO constant L of agg="seq-mean-token-sum-norm": the configured
    # maximum response tokens (fixed, not the padded row length of a batch); required in that mode
    offpolicy: OffPolicyConfig = field(default_factory=OffPolicyConfig)  # importance correction against the
    # sampling policy (memjax/rl/offpolicy.py; docs/async.md): "off" is the PPO loss on old_logp unchanged

    def __post_init__(self):
        if self.dual_clip is not None and not math.isfinite(self.dual_clip):
            raise ValueError(f"LossConfig.dual_clip must be finite, got {self.dual_clip}")
        _finite_fields(self)
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"LossConfig.kl_estimator must be one of {KL_ESTIMATORS}, got {self.kl_estimator!r}")
        if self.kl_coef < 0 or self.log_ratio_clamp <= 0:
            raise ValueError(f"LossConfig: kl_coef must be >= 0 and log_ratio_clamp > 0 (got {self})")
        if self.log_ratio_clamp_mode not in CLAMP_MODES:
            raise ValueError(f"LossConfig.log_ratio_clamp_mode must be one of {CLAMP_MODES}, "
                             f"got {self.log_ratio_clamp_mode!r}")
        if self.level not in LOSS_LEVELS:
            raise ValueError(f"LossConfig.level must be one of {LOSS_LEVELS}, got {self.level!r}")
        if self.agg not in AGG_MODES:
            raise ValueError(f"LossConfig.agg must be one of {AGG_MODES}, got {self.agg!r}")
        if self.agg == "seq-mean-token-sum-norm" and not (self.loss_scale_tokens or 0) > 0:
            raise ValueError("LossConfig.agg='seq-mean-token-sum-norm' (Dr.GRPO) needs loss_scale_tokens > 0: the "
                             "maximum response tokens of the recipe")
        if self.loss_scale_tokens is not None and self.loss_scale_tokens <= 0:
            raise ValueError(f"LossConfig.loss_scale_tokens must be > 0 or None, got {self.loss_scale_tokens}")
        if self.clip_low < 0 or self.clip_high < 0 or (self.dual_clip is not None and self.dual_clip <= 1):
            raise ValueError(f"LossConfig: clips must be >= 0 and dual_clip > 1 (got {self})")
        if self.offpolicy.on and self.level != "token":
            raise ValueError(f"LossConfig.offpolicy.mode={self.offpolicy.mode!r} weights per-token ratios: it needs "
                             f"level='token', got {self.level!r}")
        if self.offpolicy.proximal != "recompute":
            raise ValueError("LossConfig.offpolicy.proximal='loglinear' needs token versions from an asynchronous "
                             "schedule, which the training loop does not run: use proximal='recompute'")


@dataclass(frozen=True)
class UpdateConfig:
    ppo_epochs: int = 1
    mini_batches: int = 1  # optimizer steps per epoch (samples split evenly)
    micro_rows: int = 8  # conversations per forward/backward
    pad_tokens: int = 64
    remat: bool = False
    recompute_old_logp: bool = True
    reuse_first_old_logp: bool = False  # the first mini-batch of the first epoch runs at the weights its old
    # log-probs are of: it takes them from its own forward (stop_gradient, ratio exactly 1) and the recompute pass
    # skips its rows; with mini_batches = ppo_epochs = 1 no recompute pass runs at all. Exact for that mini-batch
    # only: the later ones run after an optimizer step and keep the recompute (or the engine's, recompute off)
    temperature: float = 1.0  # the rollout temperature (log-probs are of logits / T)
    attention: str = "auto"  # training attention (memjax/model/flash_attention.py): auto | dense | blockwise | cudnn
    pack: bool = False  # pack conversations into rows of a bucket length with segment ids (memjax/rl/packing.py)
    row_buckets: tuple[int, ...] = ()  # row lengths a run may compile; () = longest row rounded to pad_tokens
    max_segments: int = 16  # conversations per packed row at most (static: step-level loss segments)
    min_micro_batches: int = 16  # micro-batch slots an update program is compiled for at least (powers of two
    # above); a traced trip count skips unused slots, so a larger value costs only idle input rows and keeps
    # the compile count at one update (+ one log-prob) program per row bucket
    ref_dtype: str = "bfloat16"  # dtype the reference policy's weights are kept in (only when kl_coef > 0)

    def __post_init__(self):
        for f in ("ppo_epochs", "mini_batches", "micro_rows", "pad_tokens", "max_segments", "min_micro_batches"):
            if getattr(self, f) <= 0:
                raise ValueError(f"UpdateConfig.{f} must be > 0, got {getattr(self, f)}")
        object.__setattr__(self, "row_buckets", tuple(int(b) for b in self.row_buckets))
        if any(b <= 0 for b in self.row_buckets):
            raise ValueError(f"UpdateConfig.row_buckets must be positive lengths, got {self.row_buckets}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"UpdateConfig.attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")
        if self.ref_dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"UpdateConfig.ref_dtype must be float32, bfloat16 or float16, got {self.ref_dtype!r}")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"UpdateConfig.temperature must be finite and > 0, got {self.temperature}")


def lr_at(cfg: OptimConfig, step):
    """Learning rate at (0-based) training step `step`: linear warm-up from 0 over warmup_steps, then lr.
    A Python int gives a Python float (no device op); a traced count gives a traced value (optax schedules)."""
    if cfg.warmup_steps == 0:
        return cfg.lr
    if isinstance(step, int):
        return cfg.lr * min(step / cfg.warmup_steps, 1.0)
    return cfg.lr * jnp.minimum(jnp.asarray(step, jnp.float32) / cfg.warmup_steps, 1.0)
