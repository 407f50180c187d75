"""Seed study for the tiny searchable-memory task (agent.name = tiny_sumer): held-out reward before/after RL,
real vs shuffled rewards, over seeds.

    python scripts/tiny_sumer_seeds.py [--seeds 0 1 2] [--steps 20] [--ablations none shuffle_rewards]
                                       [--out benchmarks/results/tiny_sumer_seeds_cpu.json]

`rl_run` is GRPO on the System hooks (load_model, engine_config, train_data, workflow, evaluate) with memjax's
Trainer: per step `prompts` questions x group_size episodes -> rewards -> [ablation: rewards permuted across
the whole batch] -> groups with equal rewards dropped -> group mean/std advantages -> one Trainer.update ->
weights to the engine; held-out evaluation before, every `eval_every` steps and after. It is the loop
`python -m memjax.train configs/tiny_sumer.py` runs, written out here for the seed study.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from memjax.agents import run_workflow  # noqa: E402
from memjax.engine import Engine  # noqa: E402
from memjax.rl.advantages import AdvantageConfig, with_advantages  # noqa: E402
from memjax.rl.dapo import filter_groups  # noqa: E402
from memjax.rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig  # noqa: E402
from memjax.systems.tiny_sumer import TinySumerSection, TinySumerSystem  # noqa: E402

KEYS = ("reward", "reward_sampled", "accuracy", "submitted")


def rl_run(section: TinySumerSection = TinySumerSection(), *, seed: int = 0, steps: int = 20, prompts: int = 32,
           lr: float = 1e-3, eval_every: int = 10, ablation: str = "none", mini_batches: int = 1,
           log=print) -> dict:
    system = TinySumerSystem(section, seed=seed)
    model, tok = system.load_model(None)
    engine = Engine(model, system.engine_config(None))
    adv = AdvantageConfig(norm="mean_std")
    trainer = Trainer(model, OptimConfig(lr=lr, warmup_steps=3, weight_decay=0.0, grad_clip=1.0),
                      LossConfig(clip_low=0.2, clip_high=0.28, agg="token-mean"),
                      UpdateConfig(mini_batches=mini_batches, micro_rows=128, pad_tokens=64,
                                   temperature=system.temperature), adv)
    stream = system.train_data(prompts, seed)
    rng = np.random.default_rng([seed, 99])
    t0 = time.perf_counter()

    def held(step):
        ev = system.evaluate(engine, tok)
        row = {"step": step, **{k: ev[k] for k in KEYS if k in ev}}
        log(f"  [seed {seed} {ablation}] held-out at step {step}: " + " ".join(f"{k} {v:.3f}" for k, v in row.items()
                                                                             if k != "step"))
        return row

    evals, history = [held(0)], []
    for step in range(steps):
        res = run_workflow(engine, system.workflow(engine, tok, train=True), next(stream),
                           group_size=system.group_size, seed=seed * 1_000_003 + step, progress=False)
        batch = res.batch
        if ablation == "shuffle_rewards":
            batch = batch.replace(reward=rng.permutation(batch.reward).astype(np.float32))
        keep = filter_groups(batch.reward, batch.sample_group)
        m = {}
        if keep.any():
            m = trainer.update(with_advantages(batch.select_samples(keep), adv), seed=seed * 7919 + step)
            engine.update_weights(model)
        history.append({"step": step + 1, "reward": float(np.mean(res.rewards)), "kept_groups": int(keep.sum()) //
                        system.group_size, "mean_turns": res.stats["mean_turns"],
                        **{k: float(m[k]) for k in ("clipfrac", "grad_norm", "logp_mismatch_max") if k in m}})
        log(f"  [seed {seed} {ablation}] step {step + 1}: rollout reward {history[-1]['reward']:.3f}")
        if eval_every and (step + 1) % eval_every == 0 and step + 1 < steps:
            evals.append(held(step + 1))
    evals.append(held(steps))
    return {"seed": seed, "ablation": ablation, "steps": steps, "lr": lr, "prompts": prompts, "evals": evals,
            "history": history, "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--heldout", type=int, default=256)
    ap.add_argument("--ablations", nargs="+", default=["none", "shuffle_rewards"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tiny_sumer_seeds_cpu.json"))
    args = ap.parse_args(argv)
    section = dataclasses.replace(TinySumerSection(), heldout_size=args.heldout)
    rows = []
    for abl in args.ablations:
        for s in args.seeds:
            rows.append(rl_run(section, seed=s, steps=args.steps, lr=args.lr, eval_every=args.eval_every, ablation=abl))
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({"machine": platform.machine(), "runs": rows}, indent=1) + "\n")
    for abl in args.ablations:
        sel = [r for r in rows if r["ablation"] == abl]
        for k in ("reward", "reward_sampled"):
            rise = np.array([r["evals"][-1][k] - r["evals"][0][k] for r in sel])
            print(f"{abl:16s} {k:15s} rise {rise.mean():+.3f} +- {rise.std(ddof=1) if len(rise) > 1 else 0:.3f} "
                  f"(seeds {', '.join(f'{x:+.3f}' for x in rise)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
