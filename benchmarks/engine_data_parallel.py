"""Data-parallel engine: rounds to finish one workload on 8 device groups vs 1 device (8 simulated CPU devices).

What it measures: the same job (R requests, prompts of 8..40 tokens, 16..48 generated tokens each, greedy,
tiny preset) on (a) a 1-device engine with S slots and (b) an engine with data_parallel=8 and 8 x S slots
in total (each device group has the 1-device engine's shapes: S slots, prefill_slots, its own pool of the
same size). Reported per engine: device calls, wall rounds (per call the rounds of the slowest group,
summed: the rounds that run one after another), decode tokens per wall round, per-group decode tokens and
rounds, and whether every output equals the 1-device engine's. CPU wall time is printed but NOT a
meaningful speed-up: the 8 "devices" are simulated on the host's cores (a 2-core machine shares them), so
only the round counts say what 8 real accelerators would do.
The result goes to benchmarks/results/engine_data_parallel_<preset>_cpu8.json.

Run: `python -m benchmarks.engine_data_parallel` (re-runs itself with 8 simulated CPU devices; a few minutes
on a loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
FLAG = "--xla_force_host_platform_device_count=8"


def _run_engine(model, ecfg, prompts, params) -> tuple[dict, list]:
    from memjax.engine import Engine

    eng = Engine(model, ecfg)
    eng.generate(prompts[:2], params[:2])  # compile outside the timed run
    eng.stats.clear()
    for s in eng.device_stats:
        s.clear()
    calls, t0 = 0, time.perf_counter()
    rids = [eng.submit(p, sp) for p, sp in zip(prompts, params)]
    done = {}
    while len(done) < len(rids):
        done.update({c.request_id: c for c in eng.step()})
        calls += 1
    wall = time.perf_counter() - t0
    st = dict(eng.stats)
    out = [done[r] for r in rids]
    return dict(data_parallel=eng.data_parallel, max_slots=ecfg.max_slots, num_pages=eng.num_pages, calls=calls,
                wall_rounds=st["wall_rounds"], rounds_all_groups=st["rounds"], decode_tokens=st["decode_tokens"],
                prefill_tokens=st["prefill_tokens"], preemptions=st["preemptions"],
                decode_tokens_per_wall_round=st["decode_tokens"] / st["wall_rounds"],
                group_decode_tokens=[s["decode_tokens"] for s in eng.device_stats],
                group_rounds=[s["rounds"] for s in eng.device_stats], cpu_seconds=wall), out


def measure(a) -> dict:
    import jax
    import numpy as np

    from memjax.engine import EngineConfig, KVCacheOptions, SamplingParams
    from memjax.model import init_model, presets

    assert jax.device_count() == 8, jax.devices()
    model = init_model(presets.get(a.preset), seed=0)
    r = np.random.default_rng(a.seed)
    prompts = [r.integers(0, model.cfg.vocab_size, int(k)).tolist() for k in r.integers(8, 41, a.requests)]
    params = [SamplingParams(temperature=0.0, max_tokens=int(k)) for k in r.integers(16, 49, a.requests)]
    base = dict(page_size=8, window=128, prefill_chunk=32, rounds_per_sync=32, progress=False)
    s, pages = a.slots, a.slots * 16 + 1  # every slot's full window + the null page, per group
    one, out1 = _run_engine(model, EngineConfig(max_slots=s, prefill_slots=s // 4, **base,
                                                kv=KVCacheOptions(num_pages=pages)),
                            prompts, params)
    dp, out8 = _run_engine(model, EngineConfig(max_slots=8 * s, prefill_slots=2 * s, data_parallel=8, **base,
                                               kv=KVCacheOptions(num_pages=8 * pages)), prompts, params)
    same = all(x.token_ids == y.token_ids for x, y in zip(out1, out8))
    lp = max(float(np.abs(np.subtract(x.logprobs, y.logprobs)).max()) for x, y in zip(out1, out8))
    return dict(preset=a.preset, requests=a.requests, seed=a.seed, device=str(jax.devices()[0]), one_device=one,
                data_parallel_8=dp, outputs_equal=same, max_logprob_diff=lp,
                wall_round_ratio=one["wall_rounds"] / dp["wall_rounds"],
                note="8 simulated CPU devices share the host's cores: cpu_seconds is not a speed-up measure")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--slots", type=int, default=8, help="slots per device group (the 1-device engine's max_slots)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if not a.child:  # the device count is fixed at JAX start-up: run in a child with 8 CPU devices
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FLAG}")
        return subprocess.call([sys.executable, "-m", "benchmarks.engine_data_parallel", "--child",
                                *(argv if argv is not None else sys.argv[1:])], env=env)
    res = measure(a)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"engine_data_parallel_{a.preset}_cpu8.json"
    path.write_text(json.dumps(res, indent=1))
    for k in ("one_device", "data_parallel_8"):
        e = res[k]
        print(f"{k:16s} slots {e['max_slots']:3d} calls {e['calls']:3d} wall rounds {e['wall_rounds']:4d} "
              f"decode tok/wall round {e['decode_tokens_per_wall_round']:6.2f} cpu {e['cpu_seconds']:.1f} s "
              f"groups' decode tokens {e['group_decode_tokens']}")
    print(f"wall-round ratio {res['wall_round_ratio']:.2f}, outputs equal {res['outputs_equal']}, "
          f"max log-prob diff {res['max_logprob_diff']:.2e} -> {path}")
    return 0 if res["outputs_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
