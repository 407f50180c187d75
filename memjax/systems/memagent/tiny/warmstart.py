"""Warm start for tiny-task RL: supervised fine-tuning on correct MemAgent traces, stopped at PARTIAL success.

    python -m memjax.systems.memagent.tiny.warmstart [--out memjax/assets/tiny/warmstart] [--target 0.45] [--seed 0]

Owns: turning a sample's teacher trace into MemAgent conversations (the exact prompts MemAgent builds, with the
correct memory spliced in, and the target memory / boxed answer + `<end>` as the response), the SFT loop (AdamW on
the response-token NLL, through the trainer's own `token_logprobs`), and the stop rule: greedy accuracy on a DEV
split (data seed 3, disjoint from the RL held-out split) every `eval_every` (100) steps, stop at the first
evaluation with accuracy >= `target` (0.45).
Why partial: group-relative RL needs reward variance inside groups and a policy that already has the task's
mechanism; the stop rule catches the start of supervised accuracy's climb (measurements: docs/memagent.md, the
shipped tiny models). The saved config.json/safetensors (memjax.save_hf) plus warmstart.json (steps, dev accuracy,
settings, model config) are what `load_warmstart` returns. Deterministic for a given seed on one device kind (the
shipped files were made with the defaults on a CPU).
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
from ..workflow import build_prompt
from .agent import evaluate
from .task import (
    FINAL_TEMPLATE,
    MEMORY_TEMPLATE,
    NO_MEMORY,
    TRAIN_SEED,
    WORDS,
    TaskConfig,
    TinyTokenizer,
    make_split,
)

DEV_SEED = 3
DEFAULT_DIR = "warmstart"  # under memjax/assets/tiny/


def trace_conversations(tok: TinyTokenizer, task: TaskConfig, sample: dict[str, Any]) -> list[tuple[list, list]]:
    """(prompt ids, response ids) of every turn of the sample's correct trace, as MemAgent would build them."""
    q, doc, k = tok.encode(sample["query"]), tok.encode(sample["context"]), task.chunk_tokens
    kw = dict(memory_template=MEMORY_TEMPLATE, final_template=FINAL_TEMPLATE, no_memory=NO_MEMORY)
    out, memory = [], None
    for t, text in enumerate(sample["memories"]):
        target = tok.encode(text)
        out.append((build_prompt(tok, q, memory, doc[t * k:(t + 1) * k], **kw), target + [tok.eos_id]))
        memory = target
    out.append((build_prompt(tok, q, memory, None, **kw), tok.encode(sample["final"]) + [tok.eos_id]))
    return out


def sft_arrays(tok: TinyTokenizer, task: TaskConfig, samples: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    convs = [c for s in samples for c in trace_conversations(tok, task, s)]
    return sft_rows(convs, tok.pad_id, WINDOW)


def train(task: TaskConfig = TaskConfig(), *, seed: int = 0, target: float = 0.45, lr: float = 2e-3,
          batch_samples: int = 32, eval_every: int = 100, max_steps: int = 3000, dev_size: int = 256,
          log=print) -> tuple[Any, dict]:
    """SFT from random init until greedy dev accuracy >= target. Returns (model, info)."""
    tok = TinyTokenizer(WORDS)
    mcfg = model_config()
    model = init_model(mcfg, seed)
    opt = warmup_adamw(model, lr)
    engine = Engine(model, engine_config())
    dev = make_split(task, DEV_SEED, dev_size)
    t0, step, acc, history = time.perf_counter(), 0, 0.0, []
    while step < max_steps:
        step += 1
        samples = make_split(task, TRAIN_SEED + 1000 * seed, batch_samples, start=step * batch_samples)
        ids, mask = sft_arrays(tok, task, samples)
        loss = float(sft_step(model, opt, jnp.asarray(ids), jnp.asarray(mask)))
        if step % eval_every == 0:
            engine.update_weights(model)
            acc = evaluate(engine, tok, task, dev)["accuracy"]
            history.append({"step": step, "loss": loss, "dev_accuracy": acc})
            log(f"sft step {step}: loss {loss:.3f}  dev greedy accuracy {acc:.3f}  ({time.perf_counter() - t0:.0f}s)")
            if acc >= target:
                break
    info = {"steps": step, "dev_accuracy": acc, "target": target, "seed": seed, "lr": lr,
            "batch_samples": batch_samples, "task": dataclasses.asdict(task), "model": dataclasses.asdict(mcfg),
            "seconds": time.perf_counter() - t0, "history": history}
    return model, info


def default_path() -> Path:
    return asset_dir(DEFAULT_DIR)


def save(model, info: dict, out: str | Path) -> Path:
    return save_model(model, info, out, "warmstart.json")


def load_warmstart(path: str | Path | None = None, *, log=print):
    """The shipped warm start (or `path`); if absent, train it (a few minutes on CPU) and cache it there."""
    return load_or_train(Path(path) if path is not None else default_path(), "warmstart.json", train, save,
                         what="warm start (supervised, on correct traces)", log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.systems.memagent.tiny.warmstart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(default_path()))
    ap.add_argument("--target", type=positive_float, default=0.45)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=positive_float, default=2e-3)
    ap.add_argument("--eval-every", type=positive_int, default=100)
    ap.add_argument("--max-steps", type=positive_int, default=3000)
    args = ap.parse_args(argv)
    model, info = train(seed=args.seed, target=args.target, lr=args.lr, eval_every=args.eval_every,
                        max_steps=args.max_steps)
    out = save(model, info, args.out)
    print(f"saved warm start ({info['steps']} steps, dev greedy accuracy {info['dev_accuracy']:.3f}) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
