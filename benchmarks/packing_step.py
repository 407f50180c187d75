"""Trainer update on a 10-step tiny MemAgent-like run with varied document lengths: compile count, pad
fraction and CPU seconds per step. Runs against whatever memjax is on PYTHONPATH, so the same script measures
the trainer before (one conversation per padded row, Python loop over micro-batches) and after (packed rows
in a few bucket lengths, one jitted update per mini-batch):

  PYTHONPATH=/path/to/old/checkout python benchmarks/packing_step.py --out before.json
  PYTHONPATH=$PWD python benchmarks/packing_step.py --out after.json
  python benchmarks/packing_step.py --compare before.json after.json --out benchmarks/results/packing_step.json

Each step's batch imitates MemAgent: S trajectories of a document split into chunks; every chunk is a memory
update conversation (prompt = chunk + memory + query, response = new memory) and the last turn is the final
answer (shorter prompt and response). Document lengths (so turn counts) and response lengths vary by step.
Compiles are counted with jax.monitoring's backend-compile event over the whole run (every program, eager
ops included), and by name (jax_log_compiles) for the trainer's own programs.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import re
import time

import jax
import numpy as np

from memjax.model import presets
from memjax.model.qwen2 import init_model
from memjax.rl import Conversation, build_batch
from memjax.rl.advantages import with_advantages
from memjax.rl.trainer import OptimConfig, Trainer, UpdateConfig

CHUNK, MEMORY, QUERY, FINAL = 120, 40, 16, 24


def memagent_like_batch(rng: np.random.Generator, samples: int, group: int, vocab: int):
    convs, rewards = [], []
    for s in range(samples):
        doc = int(rng.integers(CHUNK, 6 * CHUNK))  # varied document length -> varied turn counts
        chunks = -(-doc // CHUNK)
        mem = 0
        for turn in range(chunks + 1):
            final = turn == chunks
            chunk = 0 if final else min(CHUNK, doc - turn * CHUNK)
            prompt = QUERY + mem + chunk + 8
            resp = int(rng.integers(4, FINAL)) if final else int(rng.integers(8, MEMORY))
            convs.append(Conversation(rng.integers(1, vocab, prompt).tolist(), rng.integers(1, vocab, resp).tolist(),
                                      (-rng.random(resp)).tolist(), sample=s, group=s // group, turn=turn,
                                      is_final=final))
            mem = resp if not final else mem
        rewards.append(float(rng.integers(0, 2)))
    return build_batch(convs, rewards, [s // group for s in range(samples)])


TRAINER_PROGRAMS = ("_update", "_logprobs", "_grad_step", "_add", "_norm", "_apply")


class _Compiles(logging.Handler):
    """Names of the programs XLA compiles (jax_log_compiles messages)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names: list[str] = []

    def emit(self, record):
        m = re.match(r"Finished XLA compilation of (\S+)", record.getMessage())
        if m:
            self.names.append(m.group(1))


def run(steps: int, seed: int, attention: str) -> dict:
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda ev, d, **kw: compiles.append(d) if ev == "/jax/core/compile/backend_compile_duration" else None)
    named = _Compiles()
    logging.getLogger("jax").addHandler(named)
    jax.config.update("jax_log_compiles", True)
    cfg = presets.get("tiny")
    model = init_model(cfg, seed=seed)
    fields = {f.name for f in dataclasses.fields(UpdateConfig)}
    kw = dict(micro_rows=4, mini_batches=2, pad_tokens=64)
    if "pack" in fields:  # the packed trainer: 2 row buckets cover every conversation of this run
        kw.update(pack=True, row_buckets=(128, 256), max_segments=8, attention=attention)
    tr = Trainer(model, OptimConfig(lr=1e-4, warmup_steps=0), update=UpdateConfig(**kw))
    rng = np.random.default_rng(seed)
    times, pads, rows, tokens = [], [], [], []
    for step in range(steps):
        batch = memagent_like_batch(rng, samples=8, group=4, vocab=cfg.vocab_size)
        t0 = time.perf_counter()
        st = tr.update(with_advantages(batch), seed=step)
        times.append(time.perf_counter() - t0)
        if "pad_fraction" in st:
            pads.append(st["pad_fraction"])
        else:  # the old trainer: every micro-batch is micro_rows x (batch T rounded up to pad_tokens)
            t_pad = -(-batch.input_ids.shape[1] // kw["pad_tokens"]) * kw["pad_tokens"]
            slots = 0
            perm = np.random.default_rng(step).permutation(batch.num_samples)
            for part in np.array_split(perm, kw["mini_batches"]):
                n = int(np.isin(batch.sample, part).sum())
                slots += -(-n // kw["micro_rows"]) * kw["micro_rows"] * t_pad
            pads.append(1.0 - float(batch.lengths.sum()) / slots)
        rows.append(batch.num_rows)
        tokens.append(int(batch.lengths.sum()))
    progs = collections.Counter(n for n in named.names if n.strip("jit()") in TRAINER_PROGRAMS)
    return {"trainer": "packed" if "pack" in fields else "padded", "steps": steps, "seed": seed,
            "attention": kw.get("attention", "dense"), "backend": jax.default_backend(),
            "compiles": len(compiles), "trainer_program_compiles": sum(progs.values()),
            "trainer_programs": dict(progs), "compile_s": float(sum(compiles)),
            "s_per_step": float(np.mean(times)), "s_per_step_after_first": float(np.mean(times[1:])),
            "step_s": times, "pad_fraction": float(np.mean(pads)), "pad_fraction_per_step": pads,
            "rows_per_step": rows, "tokens_per_step": tokens}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--attention", default="auto", help="training attention of the packed trainer")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args()
    if a.compare:
        before, after = (json.load(open(p)) for p in a.compare)
        res = {"before": before, "after": after,
               "s_per_step_ratio_after_over_before": after["s_per_step"] / before["s_per_step"],
               "s_per_step_after_first_ratio": after["s_per_step_after_first"] / before["s_per_step_after_first"]}
    else:
        res = run(a.steps, a.seed, a.attention)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(json.dumps({k: v for k, v in res.items() if not isinstance(v, (list, dict))}))


if __name__ == "__main__":
    main()
