"""Multi-Conv GRPO on the tiny memory task, from the supervised warm start: the embedded RL default.

    python -m memjax.tiny.rl [configs/tiny.py] [--set key=value ...]

Owns: `TinyRLConfig` and the loop  samples -> MemAgent rollouts (G per question, on the Engine with the
current weights) -> outcome rewards -> [ablation] -> Trainer.update (recomputed old log-probs, Dr.GRPO
group-mean advantages broadcast to every conversation of a trajectory, clipped token-mean loss, AdamW)
-> weight hand-off to the engine; held-out greedy accuracy before, every `eval_every` steps, and after.
Ablations (`ablation`): "shuffle_rewards" permutes the batch's rewards across all trajectories (and so
across groups) before the update: same reward statistics, no link to what a trajectory did;
"zero_advantages" sets every reward of the batch to one value, so every advantage is 0 (with
`drop_flat_groups` no update happens at all). `drop_flat_groups` is DAPO's dynamic-sampling filter without
refill: groups whose rewards are all equal carry zero advantage, so they are dropped before the update
(applied after the ablation, to the rewards the update sees); it saves their forward/backward passes.
Invariants: reuses memjax's MemAgent, Engine and Trainer unchanged; the rollout data stream, sampling seeds
and update order derive from `seed`, so a run is reproducible on one device kind; the held-out split
(data seed HELDOUT_SEED) is never trained on.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import Engine
from ..rl.advantages import AdvantageConfig, with_advantages
from ..rl.dapo import filter_groups
from ..rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig
from .agent import engine_config, evaluate, make_agent, memagent_config
from .task import HELDOUT_SEED, TaskConfig, TinyTokenizer, make_split
from .warmstart import load_warmstart

ABLATIONS = ("none", "shuffle_rewards", "zero_advantages")
RL_DATA_SEED = 7


@dataclass(frozen=True)
class TinyRLConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    warmstart: str = ""  # directory from memjax.tiny.warmstart; "" = the shipped one
    steps: int = 30
    prompts_per_step: int = 32  # questions per step (x group_size trajectories)
    group_size: int = 8
    temperature: float = 1.0
    advantage: AdvantageConfig = field(default_factory=lambda: AdvantageConfig(norm="mean"))
    loss: LossConfig = field(default_factory=lambda: LossConfig(clip_low=0.2, clip_high=0.28, agg="token-mean"))
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=5e-4, warmup_steps=5, weight_decay=0.0,
                                                                   grad_clip=1.0))
    update: UpdateConfig = field(default_factory=lambda: UpdateConfig(ppo_epochs=1, mini_batches=2,
                                                                      micro_rows=128, pad_tokens=48))
    heldout_size: int = 256
    eval_every: int = 10  # 0 = only before and after
    eval_samples: int = 4  # temperature-1 answers per held-out question for `accuracy_sampled` (0 = off)
    drop_flat_groups: bool = True  # DAPO's group filter: groups whose G rewards are all equal are not trained on
    ablation: str = "none"
    seed: int = 0
    out_dir: str = "out/tiny"

    def __post_init__(self):
        if self.ablation not in ABLATIONS:
            raise ValueError(f"TinyRLConfig.ablation must be one of {ABLATIONS}, got {self.ablation!r}")
        for f in ("steps", "prompts_per_step", "group_size", "heldout_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"TinyRLConfig.{f} must be > 0, got {getattr(self, f)}")
        if self.eval_every < 0:
            raise ValueError(f"TinyRLConfig.eval_every must be >= 0, got {self.eval_every}")


def _ablate(batch, mode: str, rng: np.random.Generator):
    if mode == "shuffle_rewards":
        return batch.replace(reward=rng.permutation(batch.reward).astype(np.float32))
    if mode == "zero_advantages":
        return batch.replace(reward=np.full_like(batch.reward, batch.reward.mean()))
    return batch


def run(cfg: TinyRLConfig, log=print) -> dict[str, Any]:
    """Train; returns {"before", "after", "history", "evals", "traces", "seconds"} (also written to out_dir)."""
    t_start = time.perf_counter()
    tok = TinyTokenizer()
    model, ws_info = load_warmstart(cfg.warmstart or None, log=log)
    engine = Engine(model, engine_config(max_slots=64))
    trainer = Trainer(model, cfg.optim, cfg.loss, dataclasses.replace(cfg.update, temperature=cfg.temperature),
                      cfg.advantage)
    heldout = make_split(cfg.task, HELDOUT_SEED, cfg.heldout_size)
    rng = np.random.default_rng([cfg.seed, 99])
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def held(step: int) -> dict:
        ev = evaluate(engine, tok, cfg.task, heldout, sampled=cfg.eval_samples)
        row = {"step": step, **{k: v for k, v in ev.items() if k.startswith("accuracy")}}
        log(f"  held-out accuracy at step {step}: greedy {row['accuracy']:.3f}  sampled (T=1) "
            f"{row.get('accuracy_sampled', float('nan')):.3f}")
        return {**row, "_traces": ev["traces"]}

    evals = [held(0)]
    history = []
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        samples = make_split(cfg.task, RL_DATA_SEED + 1000 * cfg.seed, cfg.prompts_per_step,
                             start=step * cfg.prompts_per_step)
        mcfg = memagent_config(cfg.task, group_size=cfg.group_size, temperature=cfg.temperature,
                               seed=cfg.seed * 1_000_003 + step)
        res = make_agent(engine, tok, mcfg).run(samples)
        r = np.asarray(res.rewards).reshape(cfg.prompts_per_step, cfg.group_size)
        t1 = time.perf_counter()
        batch = _ablate(res.batch, cfg.ablation, rng)
        keep = filter_groups(batch.reward, batch.sample_group) if cfg.drop_flat_groups else None
        m: dict[str, float] = {}
        if keep is None or keep.any():  # every group flat: nothing to learn from this step
            kept = batch if keep is None else batch.select_samples(keep)
            m = trainer.update(with_advantages(kept, cfg.advantage), seed=cfg.seed * 7919 + step)
            engine.update_weights(model)
        row = {"step": step + 1, "reward": float(r.mean()), "groups_with_signal": float((r.std(1) > 0).mean()),
               "trained_samples": int(batch.num_samples if keep is None else keep.sum()),
               "rollout_s": t1 - t0, "update_s": time.perf_counter() - t1,
               **{k: float(m[k]) for k in ("clipfrac", "approx_kl", "grad_norm", "logp_mismatch_mean") if k in m}}
        history.append(row)
        log(f"step {step + 1}/{cfg.steps}  reward {row['reward']:.3f}  groups with signal "
            f"{row['groups_with_signal']:.2f}  rollout {row['rollout_s']:.1f}s  update {row['update_s']:.1f}s")
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
            evals.append(held(step + 1))
    evals.append(held(cfg.steps))
    result = {"config": dataclasses.asdict(cfg), "warmstart": {k: v for k, v in ws_info.items() if k != "history"},
              "before": {k: v for k, v in evals[0].items() if k != "_traces"},
              "after": {k: v for k, v in evals[-1].items() if k != "_traces"},
              "evals": [{k: v for k, v in e.items() if k != "_traces"} for e in evals], "history": history,
              "traces_before": evals[0]["_traces"][:8], "traces_after": evals[-1]["_traces"][:8],
              "heldout": heldout[:8], "seconds": time.perf_counter() - t_start}
    (out / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    with (out / "metrics.jsonl").open("w") as f:
        for row in history:
            f.write(json.dumps(row) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    from ..config import ConfigError, RunError, parse_cli
    from .report import print_report, plot

    try:
        cfg, _ = parse_cli("python -m memjax.tiny.rl", __doc__, argv, default_config=TinyRLConfig())
        result = run(cfg)
    except (ConfigError, ValueError, FileNotFoundError) as e:
        print(f"memjax.tiny.rl: error: {e}", file=sys.stderr)
        return 2
    except RunError as e:  # e.g. a non-finite loss (memjax.rl.trainer.NonFiniteError)
        print(f"memjax.tiny.rl: stopped: {e}", file=sys.stderr)
        return 1
    png = plot(result, Path(cfg.out_dir) / "reward_curve.png")
    print_report(result, png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
