r"""The tiny task's full-context baseline: the same model size reads the whole document in one prompt.

Owns: the one-prompt layout (`question <query> chunk <whole document> answer`, the tiny chat template, the target
`\boxed{ P } <end>`), its supervised training (the warm start's `sft_step` on the warm start's training stream, a
fixed step count, from the MemAgent warm start's weights by default: the MemAgent policies' starting point, whose
final turn `question Q memory M answer` is already this prompt's shape) and its greedy evaluation at any document
length through the Engine. It is what MemAgent's length-extrapolation study compares against (the paper's
full-context models): trained at the task's length, asked at longer ones. How the shipped one was made and why its
learning rate: docs/memagent.md (the shipped tiny models) and memjax/assets/tiny/full_context/full_context.json.
Invariants: the model is `memjax.tiny.model.model_config()` except `max_position_embeddings` (RoPE: no parameter
depends on it, so the parameter count is the MemAgent model's, 600,192), set to the longest prompt asked plus the
answer (the MemAgent model's 48 positions do not fit even the 3-chunk task in one prompt). A prompt of a given
task config always has the same length, so training batches need no padding. Deterministic for a seed on one
device kind.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx

from ....core.cli import positive_int
from ....engine import (
    Engine,
    EngineConfig,
    KernelOptions,
    KVCacheOptions,
    SamplingParams,
)
from ....model import init_model
from ....rewards import memagent_reward
from ....tiny.model import model_config
from .task import TRAIN_SEED, WORDS, TaskConfig, TinyTokenizer, make_split
from ....tiny.sft import asset_dir, load_or_train, save_model, sft_rows, sft_step, warmup_adamw
from .warmstart import DEV_SEED, load_warmstart

TEMPLATE = "question {query} chunk {context} answer"
DEFAULT_DIR, INFO = "full_context", "full_context.json"  # under memjax/assets/tiny/
DEFAULT_POSITIONS = 4 * 96 * 3 + 10 + 4  # a 96-chunk document of 3 facts per chunk, prompt + answer


@dataclass(frozen=True)
class FullContextConfig:
    steps: int = 300  # supervised steps (fixed budget: no stop rule, the baseline is trained as far as it gets)
    lr: float = 5e-4
    batch_samples: int = 32
    eval_every: int = 100  # dev greedy accuracy (task length) every this many steps; 0 = only at the end
    dev_size: int = 128

    def __post_init__(self):
        for f in ("steps", "batch_samples", "dev_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"FullContextConfig.{f} must be > 0, got {getattr(self, f)}")
        if not self.lr > 0 or self.eval_every < 0:
            raise ValueError(f"FullContextConfig: lr must be > 0 and eval_every >= 0 (got {self})")


def prompt_ids(tok: TinyTokenizer, sample: dict[str, Any]) -> list[int]:
    text = TEMPLATE.format(query=sample["query"], context=sample["context"])
    return tok.apply_chat_template([{"role": "user", "content": text}])


def prompt_tokens(task: TaskConfig) -> int:
    """Length of every full-context prompt of `task`: `<user> question` + query (4) + `chunk` + document
    (4 per fact) + `answer <end> <assistant>`."""
    return 4 * task.num_facts + 10


def window(task: TaskConfig) -> int:
    """Positions a full-context model needs for `task`: the prompt plus the longest answer."""
    return prompt_tokens(task) + task.max_final_tokens


def sft_arrays(tok: TinyTokenizer, samples: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    rows = [(prompt_ids(tok, s), tok.encode(s["final"]) + [tok.eos_id]) for s in samples]
    return sft_rows(rows, tok.pad_id, max(len(p) + len(r) for p, r in rows))


def make_engine(model, task: TaskConfig, max_slots: int = 64) -> Engine:
    """An engine whose window fits `task`'s full-context prompts and whose KV pool holds max_slots of them; no small
    row buckets (as memjax/tiny/model.py's engine): the shipped baseline on 128 questions at 3 / 12 chunks, 2 CPU cores,
    15.1 / 16.2 -> 8.8 / 10.6 CPU-s (compile and run), the same accuracies."""
    c = model.cfg
    w = -(-window(task) // 16) * 16
    kv_per_token = c.num_layers * 2 * c.num_kv_heads * c.head_dim * 4  # fp32 K and V
    return Engine(model, EngineConfig(max_slots=max_slots, page_size=16, window=w, prefill_slots=min(16, max_slots),
                                      prefill_chunk=min(w, 256), rounds_per_sync=64, progress=False,
                                      kv=KVCacheOptions(kv_cache_bytes=max(16 << 20, 2 * max_slots * w * kv_per_token)),
                                      kernels=KernelOptions(small_rounds=0)))


def evaluate(model, task: TaskConfig, samples: list[dict], *, max_slots: int = 64, engine: Engine | None = None
             ) -> dict[str, Any]:
    """Greedy full-context accuracy (the MemAgent reward: last boxed, exact match) on `samples`, per hop
    (`engine`: one already built for `task` and holding the model's current weights)."""
    tok = TinyTokenizer(WORDS)
    engine = engine or make_engine(model, task, max_slots)
    outs = engine.generate([prompt_ids(tok, s) for s in samples],
                           SamplingParams(temperature=0.0, max_tokens=task.max_final_tokens,
                                          stop_token_ids=(tok.eos_id,)))
    r = np.asarray([memagent_reward(tok.decode(o.token_ids, skip_special_tokens=True, skip_unknown=True),
                                    s["answers"]) for o, s in zip(outs, samples)], np.float64)
    hops = np.asarray([s["hops"] for s in samples])
    out: dict[str, Any] = {"accuracy": float(r.mean())}
    for h in (1, 2):
        if (hops == h).any():
            out[f"accuracy_hop{h}"] = float(r[hops == h].mean())
    return out


def train(task: TaskConfig = TaskConfig(), cfg: FullContextConfig = FullContextConfig(), *, seed: int = 0,
          max_positions: int | None = None, init=None, log=print) -> tuple[Any, dict]:
    """SFT for cfg.steps steps on the warm start's data stream for `seed`, from `init` (a tiny-task model, e.g.
    the MemAgent warm start; its weights are copied) or from random init (model seed `seed`). `max_positions`
    (>= window(task)) is recorded in the model config: the longest prompt it will be asked."""
    tok = TinyTokenizer(WORDS)
    positions = max_positions or window(task)
    if positions < window(task):
        raise ValueError(f"full_context.train: max_positions {positions} < the task's window {window(task)}")
    mcfg = dataclasses.replace(model_config(), max_position_embeddings=positions)
    model = init_model(mcfg, seed)
    if init is not None:
        nnx.update(model, nnx.state(init, nnx.Param))
    opt = warmup_adamw(model, cfg.lr)
    dev = make_split(task, DEV_SEED, cfg.dev_size)
    engine = make_engine(model, task)
    t0, history = time.perf_counter(), []
    for step in range(1, cfg.steps + 1):
        samples = make_split(task, TRAIN_SEED + 1000 * seed, cfg.batch_samples, start=step * cfg.batch_samples)
        ids, mask = sft_arrays(tok, samples)
        loss = float(sft_step(model, opt, jnp.asarray(ids), jnp.asarray(mask)))
        if step == cfg.steps or (cfg.eval_every and step % cfg.eval_every == 0):
            engine.update_weights(model)
            acc = evaluate(model, task, dev, engine=engine)["accuracy"]
            history.append({"step": step, "loss": loss, "dev_accuracy": acc})
            log(f"full-context sft step {step}: loss {loss:.3f}  dev greedy accuracy {acc:.3f}  "
                f"({time.perf_counter() - t0:.0f}s)")
    info = {"steps": cfg.steps, "dev_accuracy": history[-1]["dev_accuracy"], "seed": seed,
            "init": "random" if init is None else "given model",
            "config": dataclasses.asdict(cfg), "task": dataclasses.asdict(task), "model": dataclasses.asdict(mcfg),
            "seconds": time.perf_counter() - t0, "history": history}
    return model, info


def default_path() -> Path:
    return asset_dir(DEFAULT_DIR)


def load_baseline(path: str | Path | None = None, *, log=print):
    """(model, info) of the shipped full-context baseline (or `path`); if absent, train it with the defaults
    (from the shipped MemAgent warm start; about ten minutes on 2 busy CPU cores) and cache it there."""
    def train_default(log=print):
        model, info = train(max_positions=DEFAULT_POSITIONS, init=load_warmstart(log=log)[0], log=log)
        return model, {**info, "init": "warmstart"}

    return load_or_train(Path(path) if path is not None else default_path(), INFO, train_default,
                         lambda m, i, out: save_model(m, i, out, INFO), what="full-context baseline", log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memjax.systems.memagent.tiny.full_context", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(default_path()))
    ap.add_argument("--steps", type=positive_int, default=FullContextConfig.steps)
    ap.add_argument("--eval-every", type=int, default=FullContextConfig.eval_every)
    ap.add_argument("--max-positions", type=positive_int, default=DEFAULT_POSITIONS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", choices=("warmstart", "random"), default="warmstart")
    args = ap.parse_args(argv)
    init = load_warmstart()[0] if args.init == "warmstart" else None
    model, info = train(cfg=FullContextConfig(steps=args.steps, eval_every=args.eval_every), seed=args.seed,
                        max_positions=args.max_positions, init=init)
    info["init"] = args.init
    out = save_model(model, info, args.out, INFO)
    print(f"saved full-context baseline ({info['steps']} steps, dev greedy accuracy {info['dev_accuracy']:.3f}) to {out}")
    return 0


if __name__ == "__main__":  # run as a module: call the importable copy, so its classes are not defined twice
    from memjax.systems.memagent.tiny.full_context import main as _main

    sys.exit(_main())
