"""Warm start of the tiny Memory-R1 answer agent: supervised training on a NOISY teacher, both prompt variants in
one model, so RL starts partly right with either prompt and both RL arms start from the same weights.

    python -m memjax.systems.memory_r1.tiny.answer_warmstart [--out memjax/assets/tiny/r1_answer_warmstart]
        [--steps 800] [--seed 0]

Owns the SFT arrays (the exact prompt ids `AnswerWorkflow` builds for the tiny prompt, even samples plain, odd
samples distillation, + the teacher response + `<end>`), the loop (AdamW on the response NLL, the shared
`sft_step`) and the files (memjax.save_hf + r1_answer_warmstart.json). The teacher (answer_task.py) picks the
relevant record with probability `teacher_correct` (0.4), else a uniform distractor: the imitating policy spreads
its answers over the bank's places with extra mass on the right one, and outcome reward has to sharpen it.
A fixed number of steps; deterministic for a given seed on one device kind. Dev accuracy along the way (at 800
steps about a random record's place): docs/memory_r1.md, 'The answer agent with and without memory distillation'.
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
from ..workflow import fit_answer_prompt
from .answer_task import (
    DEV_SEED,
    TRAIN_SEED,
    R1AnswerTaskConfig,
    answer_tokenizer,
    answer_workflow,
    evaluate_answer,
    make_answer_split,
    teacher_response,
    tiny_answer_prompt,
)

DEFAULT_DIR = "r1_answer_warmstart"
DEV_DISTRACTORS = (1, 4, 7)


def sft_arrays(tok, samples) -> tuple[np.ndarray, np.ndarray]:
    rows = []
    for i, s in enumerate(samples):
        distill = i % 2 == 1
        p, _ = fit_answer_prompt(tok, s, answer_workflow(tok, distill=distill, temperature=0.0).cfg,
                                 tiny_answer_prompt)
        rows.append((p, tok.encode(teacher_response(s, distill=distill)) + [tok.eos_id]))
    return sft_rows(rows, tok.pad_id, WINDOW)


def train(task: R1AnswerTaskConfig = R1AnswerTaskConfig(), *, seed: int = 0, steps: int = 800, lr: float = 2e-3,
          batch: int = 64, eval_every: int = 200, dev_size: int = 128, log=print) -> tuple[Any, dict]:
    tok = answer_tokenizer()
    mcfg = model_config()
    model = init_model(mcfg, seed)
    opt = warmup_adamw(model, lr)
    engine = Engine(model, engine_config())
    t0, history = time.perf_counter(), []
    for step in range(1, steps + 1):
        ids, mask = sft_arrays(tok, make_answer_split(task, TRAIN_SEED + 1000 * seed, batch, start=step * batch))
        loss = float(sft_step(model, opt, jnp.asarray(ids), jnp.asarray(mask)))
        if step % eval_every == 0 or step == steps:
            engine.update_weights(model)
            row: dict[str, Any] = {"step": step, "loss": loss}
            for distill in (False, True):
                ev = evaluate_dev(engine, tok, task, distill=distill, size=dev_size)
                row["distill" if distill else "plain"] = ev
            history.append(row)
            log(f"sft step {step}: loss {loss:.3f}  dev greedy EM plain {row['plain']['em']:.3f} distill "
                f"{row['distill']['em']:.3f}  sampled plain {row['plain']['em_sampled']:.3f} distill "
                f"{row['distill']['em_sampled']:.3f}  ({time.perf_counter() - t0:.0f}s)")
    info = {"steps": steps, "seed": seed, "lr": lr, "batch": batch, "task": dataclasses.asdict(task),
            "model": dataclasses.asdict(mcfg), "seconds": time.perf_counter() - t0, "history": history,
            "dev": history[-1] if history else {}}
    return model, info


def evaluate_dev(engine, tok, task: R1AnswerTaskConfig, *, distill: bool, size: int) -> dict[str, float]:
    """evaluate_answer on the DEV seed (not the held-out one) at DEV_DISTRACTORS, scalars only."""
    ev = evaluate_answer(engine, tok, task, distill=distill, size=size, distractors=DEV_DISTRACTORS, sampled=2,
                         split_seed=DEV_SEED)
    return {k: v for k, v in ev.items() if isinstance(v, float)}


def default_path() -> Path:
    return asset_dir(DEFAULT_DIR)


def save(model, info: dict, out: str | Path) -> Path:
    return save_model(model, info, out, "r1_answer_warmstart.json")


def load_r1_answer_warmstart(path: str | Path | None = None, *, log=print):
    """The shipped warm start (or `path`); if absent, train it and cache it there."""
    return load_or_train(Path(path) if path else default_path(), "r1_answer_warmstart.json", train, save,
                         what="tiny Memory-R1 answer-agent warm start (supervised, noisy teacher)", log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.systems.memory_r1.tiny.answer_warmstart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(default_path()))
    ap.add_argument("--steps", type=positive_int, default=800)
    ap.add_argument("--eval-every", type=positive_int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=positive_float, default=2e-3)
    args = ap.parse_args(argv)
    model, info = train(seed=args.seed, steps=args.steps, lr=args.lr, eval_every=args.eval_every)
    out = save(model, info, args.out)
    print(f"saved tiny Memory-R1 answer warm start ({info['steps']} steps) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
