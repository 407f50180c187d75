"""PPO (critic + GAE) or GRPO on the tiny Memory-R1 manager task, driven through the `memory_r1_tiny` System.

    python -m memjax.tiny.r1_rl --estimator gae|grpo [--ablation none|shuffle_rewards] [--seed 0] [--steps 25]

Owns a short loop over the System's hooks (train_data -> workflow on the Engine -> [ablation] -> advantages ->
Trainer.update [+ CriticTrainer.update] -> weight hand-off -> System.evaluate), written while the one training
loop (memjax/train.py) was not yet on main; it uses only shared pieces: run_workflow, memjax.rl.estimators
(group_normalise, gae), Critic / CriticTrainer and the Trainer.
- GRPO: A = (r - mean_g) / (std_g + eps) within the sample's group (unbiased std), on every response token.
- PPO: values from the critic (a copy of the policy with a zero value head) on the response tokens; the outcome
  reward sits on the last response token; GAE with gamma = lam = 1; advantages whitened over the batch's valid
  tokens (verl's GAE default); clipped value loss. `explained_variance` = 1 - Var(returns - values) / Var(returns)
  over valid tokens, measured on each batch BEFORE the critic's update (so it is a held-out-style estimate).
- shuffle_rewards permutes the batch's rewards across all trajectories before the advantages.
Writes out_dir/result.json (evals before / every `eval_every` / after, per-step history).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..agents import run_workflow
from ..engine import Engine
from ..rl.critic import Critic, CriticTrainer
from ..rl.estimators import gae, group_normalise
from ..rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig
from ..systems.memory_r1_tiny import MemoryR1TinySection, MemoryR1TinySystem


def explained_variance(values: np.ndarray, returns: np.ndarray, mask: np.ndarray) -> float:
    m = mask > 0
    var = float(np.var(returns[m]))
    return float("nan") if var == 0 else 1.0 - float(np.var(returns[m] - values[m])) / var


def _last_token_rewards(batch) -> np.ndarray:
    r = np.zeros(batch.loss_mask.shape, np.float32)
    row_r = batch.reward[batch.sample]
    for i in range(batch.num_rows):
        idx = np.flatnonzero(batch.loss_mask[i] > 0)
        if idx.size:
            r[i, idx[-1]] = row_r[i]
    return r


def run(estimator: str = "grpo", *, ablation: str = "none", seed: int = 0, steps: int = 25, prompts: int = 32,
        group_size: int | None = None, lr: float = 2e-4, critic_lr: float = 1e-3, eval_every: int = 5,
        heldout: int = 256, warmstart: str = "", out_dir: str = "out/r1_tiny", log=print) -> dict[str, Any]:
    if estimator not in ("grpo", "gae") or ablation not in ("none", "shuffle_rewards"):
        raise ValueError(f"estimator grpo|gae and ablation none|shuffle_rewards, got {estimator!r}, {ablation!r}")
    g = group_size or (8 if estimator == "grpo" else 1)
    system = MemoryR1TinySystem(MemoryR1TinySection(group_size=g, heldout_size=heldout, warmstart=warmstart), seed=seed)
    model, tok = system.load_model(None)
    engine = Engine(model, system.engine_config(None))
    trainer = Trainer(model, OptimConfig(lr=lr, warmup_steps=3, weight_decay=0.0, grad_clip=1.0),
                      LossConfig(clip_low=0.2, clip_high=0.2), UpdateConfig(mini_batches=2, micro_rows=128,
                                                                             pad_tokens=48, temperature=1.0))
    critic = CriticTrainer(Critic.from_policy(model, seed), OptimConfig(lr=critic_lr, warmup_steps=0,
                           weight_decay=0.0, grad_clip=1.0), clip_value=0.5) if estimator == "gae" else None
    stream = system.train_data(prompts, seed)
    rng = np.random.default_rng([seed, 5])

    def held(step):
        ev = {k: v for k, v in system.evaluate(engine, tok).items() if k != "traces"}
        log(f"  step {step}: held-out greedy EM {ev['em']:.3f}  sampled EM {ev['em_sampled']:.3f}")
        return {"step": step, **ev}

    evals, history, t0 = [held(0)], [], time.perf_counter()
    for step in range(1, steps + 1):
        res = run_workflow(engine, system.workflow(engine, tok), next(stream), group_size=g, seed=seed * 7919 + step)
        batch = res.batch
        if ablation == "shuffle_rewards":
            batch = batch.replace(reward=rng.permutation(batch.reward).astype(np.float32))
        mask = batch.loss_mask
        row = {"step": step, "reward": float(np.mean(res.rewards)), "correct_op": res.stats["correct_op"]}
        if critic is None:
            a = group_normalise(batch.reward, batch.sample_group, norm="mean_std", ddof=1)
            adv = (a[batch.sample][:, None] * (mask > 0)).astype(np.float32)
            batch = batch.replace(advantages=adv, row_weight=np.ones(batch.num_rows, np.float32))
        else:
            values = critic.values(batch)
            adv, ret = gae(_last_token_rewards(batch), values, mask, gamma=1.0, lam=1.0)
            m = mask > 0
            adv = np.where(m, (adv - adv[m].mean()) / (adv[m].std() + 1e-8), 0.0).astype(np.float32)
            row["explained_variance"] = explained_variance(values, ret, mask)
            batch = batch.replace(advantages=adv, values=values, returns=ret,
                                  row_weight=np.ones(batch.num_rows, np.float32))
            row.update(critic.update(batch))
        m = trainer.update(batch, seed=seed * 31 + step)
        engine.update_weights(model)
        row.update({k: float(m[k]) for k in ("clipfrac", "approx_kl", "grad_norm") if k in m})
        history.append(row)
        log(f"step {step}: reward {row['reward']:.3f}  correct op {row['correct_op']:.3f}"
            + (f"  EV {row['explained_variance']:.3f}" if "explained_variance" in row else ""))
        if eval_every and step % eval_every == 0 and step < steps:
            evals.append(held(step))
    evals.append(held(steps))
    result = {"estimator": estimator, "ablation": ablation, "seed": seed, "steps": steps, "prompts": prompts,
              "group_size": g, "lr": lr, "critic_lr": critic_lr, "before": evals[0], "after": evals[-1],
              "evals": evals, "history": history, "seconds": time.perf_counter() - t0}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.tiny.r1_rl", description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", default="grpo", choices=("grpo", "gae"))
    ap.add_argument("--ablation", default="none", choices=("none", "shuffle_rewards"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=None)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--critic-lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--heldout", type=int, default=256)
    ap.add_argument("--warmstart", default="")
    ap.add_argument("--out", default="out/r1_tiny")
    a = ap.parse_args(argv)
    r = run(a.estimator, ablation=a.ablation, seed=a.seed, steps=a.steps, prompts=a.prompts, group_size=a.group_size,
            lr=a.lr, critic_lr=a.critic_lr, eval_every=a.eval_every, heldout=a.heldout, warmstart=a.warmstart,
            out_dir=a.out)
    print(json.dumps({k: r[k] for k in ("estimator", "ablation", "seed")} | {
        "em_before": r["before"]["em"], "em_after": r["after"]["em"], "em_sampled_before": r["before"]["em_sampled"],
        "em_sampled_after": r["after"]["em_sampled"], "seconds": round(r["seconds"], 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
