"""Warm start for the tiny searchable-memory task: supervised training on correct episodes, stopped at PARTIAL
success (group-relative RL needs reward variance inside groups and a policy that already searches).

    python -m memjax.systems.sumer.tiny.warmstart [--out memjax/assets/tiny/sumer_warmstart] [--target 0.45] [--seed 0]

Owns: `episode_row` (a correct episode as the token row SumerWorkflow would record, the tool turn produced by the
real tools and format; loss mask on the two generated turns only), the SFT loop (AdamW on the masked NLL through
`token_logprobs`) and the stop rule: greedy accuracy on a DEV split (DEV_SEED, disjoint from RL's held-out split)
every `eval_every` steps, stop at the first evaluation >= `target`. The teacher filters by session on a filtered
question with probability `filter_prob` (0.5), else searches by keyword and picks the named session's hit: two
strategies of different difficulty, so RL has a choice to sharpen. The saved config.json/safetensors plus
sumer_warmstart.json are what `load_warmstart` returns. Deterministic for a seed on one device kind; the shipped
one's dev curve: docs/sumer.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from ....core.cli import positive_float, positive_int
from ....engine import Engine
from ....model import init_model
from ....tiny.sft import asset_dir, load_or_train, save_model, sft_step, warmup_adamw
from .agent import engine_config, evaluate, model_config
from .task import (
    DEV_SEED,
    TRAIN_SEED,
    WINDOW,
    TinySumerFormat,
    TinySumerTask,
    make_split,
    teacher_turns,
)

INFO = "sumer_warmstart.json"


def episode_row(fmt: TinySumerFormat, sample, *, use_filter: bool = True) -> tuple[list[int], list[int]]:
    """(ids, loss mask) of the correct episode of `sample`."""
    ids = fmt.prompt(sample.question)
    mask = [0] * len(ids)
    turns = teacher_turns(sample, use_filter=use_filter)
    for k, text in enumerate(turns):
        gen = fmt.encode(text)
        ids, mask = ids + gen, mask + [1] * len(gen)
        if k + 1 < len(turns):
            calls, _ = fmt.parse(gen)
            tool = fmt.tool_turn([fmt.render(sample.tools.execute(c)) for c in calls], fmt.closed(gen))
            ids, mask = ids + tool, mask + [0] * len(tool)
    return ids, mask


def sft_arrays(fmt, samples, rng: np.random.Generator, filter_prob: float) -> tuple[np.ndarray, np.ndarray]:
    ids = np.full((len(samples), WINDOW), fmt.pad_id, np.int32)
    mask = np.zeros((len(samples), WINDOW), np.float32)
    for i, s in enumerate(samples):
        row, m = episode_row(fmt, s, use_filter=bool(rng.random() < filter_prob))
        ids[i, :len(row)], mask[i, :len(row)] = row, m
    return ids, mask


def train(task: TinySumerTask = TinySumerTask(), *, seed: int = 0, target: float = 0.45, lr: float = 3e-3,
          batch_samples: int = 32, eval_every: int = 25, max_steps: int = 2000, dev_size: int = 128,
          filter_prob: float = 0.5, hidden: int = 64, layers: int = 3, log=print) -> tuple[Any, dict]:
    fmt = TinySumerFormat()
    mcfg = model_config(hidden, layers)
    model = init_model(mcfg, seed)
    opt = warmup_adamw(model, lr)
    engine = Engine(model, engine_config())
    dev = make_split(task, DEV_SEED, dev_size)
    rng = np.random.default_rng([seed, 5])
    t0, step, acc, history = time.perf_counter(), 0, 0.0, []
    while step < max_steps:
        step += 1
        samples = make_split(task, TRAIN_SEED + 1000 * seed, batch_samples, start=step * batch_samples)
        ids, mask = sft_arrays(fmt, samples, rng, filter_prob)
        loss = float(sft_step(model, opt, jnp.asarray(ids), jnp.asarray(mask)))
        if step % eval_every == 0:
            engine.update_weights(model)
            ev = evaluate(engine, dev)
            acc = ev["accuracy"]
            history.append({"step": step, "loss": loss, "dev_accuracy": acc, "dev_reward": ev["reward"]})
            log(f"sft step {step}: loss {loss:.3f}  dev greedy accuracy {acc:.3f} reward {ev['reward']:.3f}  "
                f"({time.perf_counter() - t0:.0f}s)")
            if acc >= target:
                break
    info = {"steps": step, "dev_accuracy": acc, "target": target, "seed": seed, "lr": lr, "filter_prob": filter_prob,
            "batch_samples": batch_samples, "task": dataclasses.asdict(task),
            "model": dataclasses.asdict(mcfg), "seconds": time.perf_counter() - t0, "history": history}
    return model, info


def default_path() -> Path:
    return asset_dir("sumer_warmstart")


def save(model, info: dict, out: str | Path) -> Path:
    return save_model(model, info, out, INFO)


def load_warmstart(path: str | Path | None = None, *, log=print):
    """The shipped warm start (or `path`); if absent, train it (about a minute on CPU) and cache it there."""
    return load_or_train(Path(path) if path else default_path(), INFO, train, save,
                         what="warm start (supervised, on correct episodes)", log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.systems.sumer.tiny.warmstart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(default_path()))
    ap.add_argument("--target", type=positive_float, default=0.45)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=positive_float, default=3e-3)
    ap.add_argument("--eval-every", type=positive_int, default=25)
    ap.add_argument("--max-steps", type=positive_int, default=2000)
    ap.add_argument("--filter-prob", type=float, default=0.5)
    ap.add_argument("--hidden", type=positive_int, default=64)
    ap.add_argument("--layers", type=positive_int, default=3)
    args = ap.parse_args(argv)
    model, info = train(seed=args.seed, target=args.target, lr=args.lr, eval_every=args.eval_every,
                        max_steps=args.max_steps, filter_prob=args.filter_prob, hidden=args.hidden,
                        layers=args.layers)
    out = save(model, info, args.out)
    print(f"saved warm start ({info['steps']} steps, dev greedy accuracy {info['dev_accuracy']:.3f}) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
