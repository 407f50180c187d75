"""Advantage estimators beyond the MemAgent rule: group normalisation with every option, LoGo-GRPO, GAE.

Owns (host-side numpy, float32 outputs; advantages are constants of the loss, never differentiated):
- `group_normalise(x [K], groups [K], *, norm, ddof, eps, singleton)`: mean or mean/std within each group; a
  constant group gets 0; `singleton` names the rule for a group of one: "zero" (memjax's default) or "reward"
  (Memory-R2's official code).
- `logo_grpo_advantages(reward, global_group, local_group, ...)`: Memory-R2's LoGo-GRPO over steps (rows): a row
  of a local re-rollout (local_group >= 0) is normalised within its local group, a global-branch row (-1) within
  its global group; the branches never mix. Defaults: mean_std, ddof 1, eps 1e-6, singleton "zero".
- `gae(rewards [N, T], values [N, T], mask [N, T], *, gamma, lam)` -> (advantages, returns): along each row over
  its valid tokens only (masked positions are skipped and get 0; the value after the last valid token is 0, so
  every row ends its episode); an empty row is all zeros.
docs/trainer.md, "Losses", has the formulas and their sources.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NORMS", "SINGLETONS", "group_normalise", "logo_grpo_advantages", "gae"]

NORMS = ("mean", "mean_std")
SINGLETONS = ("zero", "reward")


def _check(fn: str, norm: str, ddof: int, eps: float, singleton: str = "zero"):
    if norm not in NORMS:
        raise ValueError(f"{fn}: norm must be one of {NORMS}, got {norm!r}")
    if singleton not in SINGLETONS:
        raise ValueError(f"{fn}: singleton must be one of {SINGLETONS}, got {singleton!r}")
    if ddof not in (0, 1):
        raise ValueError(f"{fn}: ddof must be 0 (population std) or 1 (unbiased), got {ddof!r}")
    if not eps > 0:
        raise ValueError(f"{fn}: eps must be > 0, got {eps!r}")


def group_normalise(x, groups, *, norm: str = "mean_std", ddof: int = 1, eps: float = 1e-6,
                    singleton: str = "zero") -> np.ndarray:
    """Group-relative advantages, f32 [K] (see the module docstring)."""
    _check("group_normalise", norm, ddof, eps, singleton)
    x = np.asarray(x, np.float64)
    g = np.asarray(groups)
    if x.ndim != 1 or g.shape != x.shape:
        raise ValueError(f"group_normalise: x {x.shape} and groups {g.shape} must both be [K]")
    if x.size == 0:
        return np.zeros(0, np.float32)
    _, inv = np.unique(g, return_inverse=True)
    count = np.bincount(inv).astype(np.float64)
    mean = np.bincount(inv, weights=x) / count
    adv = x - mean[inv]
    if norm == "mean_std":
        var = np.bincount(inv, weights=adv**2) / np.maximum(count - ddof, 1.0)
        adv = adv / (np.sqrt(var)[inv] + eps)
    if singleton == "reward":
        alone = x / (1.0 + eps) if norm == "mean_std" else x
    else:
        alone = np.zeros_like(x)
    return np.where(count[inv] > 1, adv, alone).astype(np.float32)


def logo_grpo_advantages(reward, global_group, local_group, *, norm: str = "mean_std", ddof: int = 1,
                         eps: float = 1e-6, singleton: str = "zero") -> np.ndarray:
    """LoGo-GRPO advantages per row, f32 [K]: local rows within their local group, the rest within their
    global group (see the module docstring)."""
    r = np.asarray(reward, np.float64)
    gg, lg = np.asarray(global_group), np.asarray(local_group)
    if not (r.ndim == 1 and gg.shape == r.shape and lg.shape == r.shape):
        raise ValueError(f"logo_grpo_advantages: reward {r.shape}, global_group {gg.shape} and local_group "
                         f"{lg.shape} must all be [K]")
    out = np.zeros(r.shape, np.float32)
    local = lg >= 0
    kw = dict(norm=norm, ddof=ddof, eps=eps, singleton=singleton)
    out[~local] = group_normalise(r[~local], gg[~local], **kw)
    out[local] = group_normalise(r[local], lg[local], **kw)
    return out


def gae(rewards, values, mask, *, gamma: float = 1.0, lam: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-token GAE advantages and returns, f32 [N, T] each (see the module docstring)."""
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gae: gamma and lam must lie in [0, 1], got gamma={gamma}, lam={lam}")
    r, v, m = (np.asarray(a, np.float64) for a in (rewards, values, mask))
    if r.ndim != 2 or v.shape != r.shape or m.shape != r.shape:
        raise ValueError(f"gae: rewards {r.shape}, values {v.shape} and mask {m.shape} must all be [N, T]")
    adv = np.zeros(r.shape, np.float64)
    next_v = np.zeros(r.shape[0])  # value of the next valid token (0 after the last one)
    next_a = np.zeros(r.shape[0])
    for t in range(r.shape[1] - 1, -1, -1):  # a loop over T, vectorised over rows
        valid = m[:, t] != 0
        delta = r[:, t] + gamma * next_v - v[:, t]
        a = delta + gamma * lam * next_a
        adv[:, t] = np.where(valid, a, 0.0)
        next_v = np.where(valid, v[:, t], next_v)
        next_a = np.where(valid, a, next_a)
    returns = np.where(m != 0, adv + v, 0.0)
    return adv.astype(np.float32), returns.astype(np.float32)
