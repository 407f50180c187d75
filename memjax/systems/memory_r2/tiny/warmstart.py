"""Warm start of the tiny Memory-R2 policy: supervised training on a NOISY teacher, so RL starts partly right.

    python -m memjax.systems.memory_r2.tiny.warmstart [--out memjax/assets/tiny/r2_warmstart] [--steps 400] [--seed 0]
        [--sessions 3] [--facts-per-session 2]

Owns the SFT arrays (per session of a teacher trace: the exact prompt TinyR2Workflow builds for the teacher's
bank + the teacher's ops + `<end>`), the loop (AdamW on the response NLL through `warmstart.sft_step`) and the
files (memjax.save_hf + r2_warmstart.json); `load_r2_warmstart(path, task)` refuses a warm start trained on other
session / fact counts. Per fact the teacher's op is right with probability `teacher_correct` (0.3), else the case's
classic mistake, so the policy puts about that much mass on the right op while greedy decoding follows the mistake
and outcome reward has to find the right ops. A fixed number of steps; deterministic for a given seed on one
device kind. The shipped warm starts (`r2_warmstart`, and `r2_warmstart_s8` of the 8-session variant), their
measurements and why 0.3: docs/memory_r2.md, 'The tiny Memory-R2 task (CPU)' and 'Where credit matters'.
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
from ....tiny.model import WINDOW, engine_config, model_config
from ....tiny.sft import asset_dir, load_or_train, save_model, sft_rows, sft_step, warmup_adamw
from .agent import evaluate_r2
from .task import (
    DEV_SEED,
    TRAIN_SEED,
    R2TaskConfig,
    make_r2_split,
    r2_tokenizer,
    teacher_trace,
)

DEFAULT_DIR = "r2_warmstart"


def sft_arrays(tok, task: R2TaskConfig, samples: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    rows = [(tok.apply_chat_template([{"role": "user", "content": p}]), tok.encode(r) + [tok.eos_id])
            for s in samples for p, r in teacher_trace(task, s)]
    return sft_rows(rows, tok.pad_id, WINDOW)


def train(task: R2TaskConfig = R2TaskConfig(), *, seed: int = 0, steps: int = 400, lr: float = 2e-3,
          batch: int = 32, eval_every: int = 100, dev_size: int = 128, log=print) -> tuple[Any, dict]:
    tok = r2_tokenizer()
    mcfg = model_config()
    model = init_model(mcfg, seed)
    opt = warmup_adamw(model, lr)
    engine = Engine(model, engine_config())
    dev = make_r2_split(task, DEV_SEED, dev_size)
    t0, history = time.perf_counter(), []
    for step in range(1, steps + 1):
        ids, mask = sft_arrays(tok, task, make_r2_split(task, TRAIN_SEED + 1000 * seed, batch, start=step * batch))
        loss = float(sft_step(model, opt, jnp.asarray(ids), jnp.asarray(mask)))
        if step % eval_every == 0 or step == steps:
            engine.update_weights(model)
            ev = evaluate_r2(engine, tok, task, dev)
            row = {"step": step, "loss": loss, **{k: v for k, v in ev.items() if k != "traces"}}
            history.append(row)
            log(f"sft step {step}: loss {loss:.3f}  dev greedy F1 {ev['f1']:.3f}  correct op {ev['correct_op']:.3f}  "
                f"bad {ev['bad_output']:.0f}  ({time.perf_counter() - t0:.0f}s)")
    info = {"steps": steps, "seed": seed, "lr": lr, "batch": batch, "task": dataclasses.asdict(task),
            "model": dataclasses.asdict(mcfg), "seconds": time.perf_counter() - t0, "history": history,
            "dev": history[-1] if history else {}}
    return model, info


def default_path() -> Path:
    return asset_dir(DEFAULT_DIR)


def save(model, info: dict, out: str | Path) -> Path:
    return save_model(model, info, out, "r2_warmstart.json")


def load_r2_warmstart(path: str | Path | None = None, task: R2TaskConfig | None = None, *, log=print):
    """The shipped warm start (or `path`); if absent, train it (on `task`, default R2TaskConfig()) and cache it
    there. With `task`, a warm start whose recorded sessions / facts_per_session differ is refused (its policy
    was never shown prompts or responses of this shape)."""
    task = task or R2TaskConfig()
    model, info = load_or_train(Path(path) if path else default_path(), "r2_warmstart.json",
                                lambda log: train(task, log=log), save,
                                what="tiny Memory-R2 warm start (supervised, noisy teacher)", log=log)
    got = info.get("task", {})
    for f in ("sessions", "facts_per_session"):
        if f in got and got[f] != getattr(task, f):
            raise ValueError(f"load_r2_warmstart: the warm start at {path or default_path()} was trained with "
                             f"{f}={got[f]}, the task has {getattr(task, f)} (train one with "
                             f"python -m memjax.systems.memory_r2.tiny.warmstart --sessions ... --facts-per-session ...)")
    return model, info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.systems.memory_r2.tiny.warmstart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(default_path()))
    ap.add_argument("--steps", type=positive_int, default=400)
    ap.add_argument("--eval-every", type=positive_int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=positive_float, default=2e-3)
    ap.add_argument("--sessions", type=positive_int, default=R2TaskConfig.sessions)
    ap.add_argument("--facts-per-session", type=positive_int, default=R2TaskConfig.facts_per_session)
    args = ap.parse_args(argv)
    task = R2TaskConfig(sessions=args.sessions, facts_per_session=args.facts_per_session)
    model, info = train(task, seed=args.seed, steps=args.steps, lr=args.lr, eval_every=args.eval_every)
    out = save(model, info, args.out)
    print(f"saved tiny Memory-R2 warm start ({info['steps']} steps, dev {info['dev']}) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
