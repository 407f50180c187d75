"""Warm start of the tiny Memory-R1 manager: supervised training on a NOISY teacher, so RL starts partly right.

    python -m memjax.systems.memory_r1.tiny.warmstart [--out memjax/assets/tiny/r1_warmstart] [--steps 300] [--seed 0]

Owns the SFT arrays (the exact prompts TinyR1Workflow builds + the teacher op + `<end>`), the loop (AdamW on the
response NLL through the trainer's `token_logprobs`) and the files (memjax.save_hf + r1_warmstart.json).
Why a noisy teacher: the teacher's op is correct with probability `teacher_correct` (0.4) and otherwise the case's
classic mistake (ADD for a move, NONE for a retraction or a new person), so the imitating policy puts roughly
that much mass on the right op: sampled exact match is moderate, greedy follows the majority (the mistake) on
most cases, and outcome reward has to find the right op: what RL must show. A fixed number of steps (no stop
rule on accuracy: the policy is meant to match the teacher's mixture, which its loss shows). Deterministic for a
given seed on one device kind.
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
from .task import (
    DEV_SEED,
    TRAIN_SEED,
    R1TaskConfig,
    evaluate_r1,
    make_r1_split,
    prompt_text,
    r1_tokenizer,
)

DEFAULT_DIR = "r1_warmstart"


def sft_arrays(tok, samples: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    rows = [(tok.apply_chat_template([{"role": "user", "content": prompt_text(s)}]),
             tok.encode(s["teacher_op"]) + [tok.eos_id]) for s in samples]
    return sft_rows(rows, tok.pad_id, WINDOW)


def train(task: R1TaskConfig = R1TaskConfig(), *, seed: int = 0, steps: int = 300, lr: float = 2e-3,
          batch: int = 64, eval_every: int = 200, dev_size: int = 256, log=print) -> tuple[Any, dict]:
    tok = r1_tokenizer()
    mcfg = model_config()
    model = init_model(mcfg, seed)
    opt = warmup_adamw(model, lr)
    engine = Engine(model, engine_config())
    dev = make_r1_split(task, DEV_SEED, dev_size)
    t0, history = time.perf_counter(), []
    for step in range(1, steps + 1):
        ids, mask = sft_arrays(tok, make_r1_split(task, TRAIN_SEED + 1000 * seed, batch, start=step * batch))
        loss = float(sft_step(model, opt, jnp.asarray(ids), jnp.asarray(mask)))
        if step % eval_every == 0 or step == steps:
            engine.update_weights(model)
            ev = evaluate_r1(engine, tok, dev)
            row = {"step": step, "loss": loss, **{k: v for k, v in ev.items() if k != "traces"}}
            history.append(row)
            log(f"sft step {step}: loss {loss:.3f}  dev greedy EM {ev['em']:.3f}  sampled EM {ev['em_sampled']:.3f}  "
                f"correct op {ev['correct_op']:.3f}  ({time.perf_counter() - t0:.0f}s)")
    info = {"steps": steps, "seed": seed, "lr": lr, "batch": batch, "task": dataclasses.asdict(task),
            "model": dataclasses.asdict(mcfg), "seconds": time.perf_counter() - t0, "history": history,
            "dev": history[-1] if history else {}}
    return model, info


def default_path() -> Path:
    return asset_dir(DEFAULT_DIR)


def save(model, info: dict, out: str | Path) -> Path:
    return save_model(model, info, out, "r1_warmstart.json")


def load_r1_warmstart(path: str | Path | None = None, *, log=print):
    """The shipped warm start (or `path`); if absent, train it (about a minute on CPU) and cache it there."""
    return load_or_train(Path(path) if path else default_path(), "r1_warmstart.json", train, save,
                         what="tiny Memory-R1 warm start (supervised, noisy teacher)", log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.systems.memory_r1.tiny.warmstart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(default_path()))
    ap.add_argument("--steps", type=positive_int, default=300)
    ap.add_argument("--eval-every", type=positive_int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=positive_float, default=2e-3)
    args = ap.parse_args(argv)
    model, info = train(seed=args.seed, steps=args.steps, lr=args.lr, eval_every=args.eval_every)
    out = save(model, info, args.out)
    print(f"saved tiny Memory-R1 warm start ({info['steps']} steps, dev {info['dev']}) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
