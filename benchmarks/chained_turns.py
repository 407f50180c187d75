"""Chained agent turns: slot utilisation with and without the loop's early return on idle slots.

What it measures: C conversations of K chained turns each on an engine with C slots (tiny preset, fp32,
sampled at T = 1 with fixed seeds): turn k + 1 of a conversation is submitted by the host as soon as
`step()` returns turn k (what every agent workflow does), with max_tokens drawn per turn from
[--min-tokens, --max-tokens] so conversations drift out of lockstep. Without early return a device call
runs up to rounds_per_sync rounds, so a slot freed early idles until the call ends; with
`idle_return=n` the call returns as soon as a turn finished and n slots are idle with nothing queued.
A third run syncs after every round (step(max_rounds=1)): the utilisation no sync policy can beat on this
workload (what remains idle is the tail: conversations of different total length).
Slot utilisation = decode tokens / (decode rounds x slots) (EngineConfig docs: a decode round feeds every
running slot one token; with schedule="mixed" every round is a decode round, prefill rides along). Both settings run on the same compiled engine (idle_return is a runtime
argument), produce identical tokens (checked), and are timed alternately (--repeats), median wall time.
Result: benchmarks/results/chained_turns_<preset>_<device>.json.

Run: `python -m benchmarks.chained_turns` (under a minute on CPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.model import init_model, presets

from .forward_throughput import device_slug

RESULTS = Path(__file__).resolve().parent / "results"


def run_chained(eng: Engine, turns, idle_return: int, max_rounds: int | None = None) -> dict:
    """turns[c][k] = (prompt, SamplingParams). Returns tokens per (c, k), utilisation, syncs, seconds."""
    before = dict(eng.stats)
    t0 = time.perf_counter()
    nxt, owner, out, syncs = [0] * len(turns), {}, {}, 0
    for c in range(len(turns)):
        owner[eng.submit(*turns[c][0])] = c
    while eng.num_unfinished:
        syncs += 1
        for comp in eng.step(max_rounds, idle_return=idle_return):
            c = owner.pop(comp.request_id)
            out[(c, nxt[c])] = comp.token_ids
            nxt[c] += 1
            if nxt[c] < len(turns[c]):
                owner[eng.submit(*turns[c][nxt[c]])] = c
    secs = time.perf_counter() - t0
    d = {k: eng.stats[k] - before.get(k, 0) for k in ("rounds", "prefill_rounds", "decode_tokens")}
    # split: decode rounds are the rounds without prefill; mixed: every round feeds every decoding slot
    decode_rounds = d["rounds"] - (d["prefill_rounds"] if eng.config.schedule == "split" else 0)
    util = d["decode_tokens"] / (decode_rounds * eng.config.max_slots)
    return dict(tokens=out, utilisation=util, syncs=syncs, seconds=secs, **d)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--min-tokens", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds-per-sync", type=int, default=64)
    ap.add_argument("--idle-return", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    model = init_model(presets.get(args.preset), seed=0)
    n = args.conversations
    eng = Engine(model, EngineConfig(max_slots=n, page_size=16, window=256, prefill_slots=min(4, n),
                                     prefill_chunk=64, rounds_per_sync=args.rounds_per_sync, progress=False))
    rng = np.random.default_rng(0)
    turns = [[(rng.integers(0, model.cfg.vocab_size, int(rng.integers(16, 48))).tolist(),
               SamplingParams(temperature=1.0, seed=1000 * c + k,
                              max_tokens=int(rng.integers(args.min_tokens, args.max_tokens + 1))))
              for k in range(args.turns)] for c in range(n)]
    run_chained(eng, turns, 0)  # compile + warm up
    res = {"off": [], "on": [], "every_round": []}
    for _ in range(args.repeats):
        for name, idle, rounds in (("off", 0, None), ("on", args.idle_return, None), ("every_round", 0, 1)):
            res[name].append(run_chained(eng, turns, idle, rounds))
    if not res["off"][0]["tokens"] == res["on"][0]["tokens"] == res["every_round"][0]["tokens"]:
        raise SystemExit("chained_turns: the sync policy changed the generated tokens")
    summary = {name: dict(utilisation=r[0]["utilisation"], syncs=r[0]["syncs"], rounds=r[0]["rounds"],
                          decode_tokens=r[0]["decode_tokens"],
                          median_seconds=statistics.median(x["seconds"] for x in r),
                          seconds=[x["seconds"] for x in r]) for name, r in res.items()}
    dev = jax.devices()[0]
    out = dict(benchmark="chained_turns", preset=args.preset, device=dev.device_kind, platform=dev.platform,
               jax=jax.__version__, conversations=n, turns=args.turns, slots=n,
               rounds_per_sync=args.rounds_per_sync, idle_return=args.idle_return,
               max_tokens_range=[args.min_tokens, args.max_tokens], **summary)
    path = args.out or RESULTS / f"chained_turns_{args.preset}_{device_slug(dev.device_kind)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    for name in ("off", "on", "every_round"):
        s = summary[name]
        print(f"{name} (idle_return {args.idle_return if name == 'on' else 0}): utilisation {s['utilisation']:.3f}, "
              f"{s['syncs']} syncs, {s['rounds']} rounds, median {s['median_seconds']:.3f} s")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
