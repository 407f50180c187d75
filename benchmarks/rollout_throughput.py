"""Rollout engine throughput.

Modes:
  skew   (default; CPU-friendly) continuous batching vs a static-batch baseline on skewed output
         lengths: most requests stop early, a few run long. The baseline feeds the SAME compiled engine
         one batch of max_slots requests at a time, each batch waiting for its longest member (what a
         static-batch rollout does); continuous batching refills a slot as soon as it frees. Reports
         generated tokens/s of both and their ratio, from one run.
  token_budget (CPU-friendly) split vs mixed rounds (EngineConfig.schedule) on a skewed workload: --decoders
         requests with short prompts decode --decode-tokens tokens each while --long-requests requests with
         --long-prompt-len-token prompts arrive, one each time the slowest decoder has produced another
         --arrive-every tokens (arrivals keyed to decode progress, so both schedules see the same workload).
         The host syncs every round (step(max_rounds=1), same for both) and timestamps every token from the
         device's slot counters. Reports generated tokens/s, time-to-first-token (median, p90) of the
         long-prompt requests, and the decoders' inter-token gaps (median, p90, max; seconds and rounds).
  sweep  (GPU) decode tokens/s at several batch sizes and prefill tokens/s for a preset with random
         weights, each against its roofline: decode = (weight bytes + KV bytes read per step) / HBM
         bandwidth; prefill = MFU from memjax.model.flops.estimate(training=False). --greedy-tokens saves each batch's
         greedy tokens (untimed), so that two engine variants' outputs can be compared (benchmarks/greedy_match.py).
Results: benchmarks/results/rollout_<mode>_<preset>_<device>.json. Run `python -m benchmarks.rollout_throughput -h`.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import jax
import numpy as np
from flax import nnx
from rich.console import Console
from rich.table import Table

from memjax.engine import (
    Engine,
    EngineConfig,
    KernelOptions,
    KVCacheOptions,
    SamplingParams,
)
from memjax.engine.state import kv_bytes_per_page
from memjax.model import flops

from .engine_options import add_engine_option, engine_overrides, with_overrides
from .forward_throughput import build, device_slug

RESULTS = Path(__file__).resolve().parent / "results"


def make_model(preset: str, dtype: str, seed: int = 0):
    cfg, graphdef, state = build(preset, dtype, seed)
    return nnx.merge(graphdef, state)


def _timed(eng: Engine, prompts, params) -> tuple[float, int]:
    t0 = time.perf_counter()
    outs = eng.generate(prompts, params)
    return time.perf_counter() - t0, sum(len(o.token_ids) for o in outs)


def skew(args) -> dict:
    model = make_model(args.preset, args.dtype)
    ecfg = EngineConfig(max_slots=args.slots, page_size=16, window=args.window, prefill_slots=min(4, args.slots),
                        prefill_chunk=64, rounds_per_sync=64, progress=False)
    eng = Engine(model, ecfg)
    rng = np.random.default_rng(0)
    n = args.requests
    prompts = [rng.integers(0, model.cfg.vocab_size, args.prompt_len).tolist() for _ in range(n)]
    long = rng.random(n) < args.long_frac
    lens = np.where(long, args.long_tokens, args.short_tokens)
    params = [SamplingParams(temperature=1.0, max_tokens=int(k), seed=i) for i, k in enumerate(lens)]
    _timed(eng, prompts[: args.slots], params[: args.slots])  # compile + warm up
    cont_s, cont_tok = _timed(eng, prompts, params)
    stat_s, stat_tok = 0.0, 0
    for i in range(0, n, args.slots):
        s, t = _timed(eng, prompts[i:i + args.slots], params[i:i + args.slots])
        stat_s, stat_tok = stat_s + s, stat_tok + t
    assert cont_tok == stat_tok == int(lens.sum())
    return dict(mode="skew", continuous_s=cont_s, static_s=stat_s, tokens=cont_tok,
                continuous_tok_s=cont_tok / cont_s, static_tok_s=stat_tok / stat_s, speedup=stat_s / cont_s,
                requests=n, slots=args.slots, long_frac=args.long_frac, short_tokens=args.short_tokens,
                long_tokens=args.long_tokens, prompt_len=args.prompt_len)


def _pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs, np.float64), q)) if len(xs) else float("nan")


def _budget_run(eng: Engine, vocab: int, args, seed: int = 0) -> dict:
    """One instrumented run of the token-budget workload; token timestamps from the slot counters."""
    rng = np.random.default_rng(seed)
    dec = [eng.submit(rng.integers(0, vocab, args.prompt_len).tolist(),
                      SamplingParams(temperature=1.0, max_tokens=args.decode_tokens, seed=i))
           for i in range(args.decoders)]
    longs = [(rng.integers(0, vocab, args.long_prompt_len).tolist(),
              SamplingParams(temperature=1.0, max_tokens=args.long_gen, seed=1000 + i)) for i in range(args.long_requests)]
    t0 = time.perf_counter()
    submit_t, first_t, stamps, rounds_at = {r: t0 for r in dec}, {}, {r: [] for r in dec}, {r: [] for r in dec}
    seen, n_tok, outs, rnd, nxt = {}, 0, {}, 0, 0
    while eng.num_unfinished:
        progress = min((len(stamps[r]) for r in dec), default=0)
        while nxt < len(longs) and progress >= (nxt + 1) * args.arrive_every:
            rid = eng.submit(*longs[nxt])
            submit_t[rid], nxt = time.perf_counter(), nxt + 1
        comps = eng.step(max_rounds=1)
        rnd += 1
        now = time.perf_counter()
        req, ngen, act = jax.device_get((eng._slots.req, eng._slots.n_gen, eng._slots.active))
        counts = {int(r): int(g) for r, g, a in zip(req, ngen, act) if a}
        counts.update({c.request_id: len(c.token_ids) for c in comps})
        for rid, g in counts.items():
            new = g - seen.get(rid, 0)
            if new > 0:
                seen[rid] = g
                first_t.setdefault(rid, now)
                if rid in stamps:
                    stamps[rid] += [now] * new
                    rounds_at[rid] += [rnd] * new
        n_tok += sum(len(c.token_ids) for c in comps)
        outs.update({c.request_id: c.token_ids for c in comps})
    secs = time.perf_counter() - t0
    long_ids = [r for r in submit_t if r not in stamps]
    ttft = [first_t[r] - submit_t[r] for r in long_ids]
    gaps = [b - a for r in dec for a, b in zip(stamps[r], stamps[r][1:]) if b > a]  # one gap per round step
    rgaps = [b - a for r in dec for a, b in zip(rounds_at[r], rounds_at[r][1:]) if b > a]
    return dict(seconds=secs, tokens=n_tok, tok_s=n_tok / secs, rounds=rnd, ttft_median_s=_pct(ttft, 50),
                ttft_p90_s=_pct(ttft, 90), gap_median_s=_pct(gaps, 50), gap_p90_s=_pct(gaps, 90),
                gap_max_s=max(gaps), gap_max_rounds=max(rgaps), gap_mean_rounds=float(np.mean(rgaps)),
                prefill_tokens=int(eng.stats["prefill_tokens"]), decode_tokens=int(eng.stats["decode_tokens"]),
                outputs=[outs[r] for r in sorted(outs)])


def token_budget(args) -> dict:
    model = make_model(args.preset, args.dtype)
    runs, toks = {}, {}
    for name, sched, budget in (("split", "split", 0), *((f"mixed_{b}", "mixed", b) for b in args.budgets)):
        ecfg = EngineConfig(max_slots=args.slots, page_size=16, window=args.window, prefill_slots=min(4, args.slots),
                            prefill_chunk=64, rounds_per_sync=64, progress=False, schedule=sched, token_budget=budget)
        eng = Engine(model, ecfg)
        warm = argparse.Namespace(**{**vars(args), "decode_tokens": 2 * args.arrive_every, "long_requests": 1})
        _budget_run(eng, model.cfg.vocab_size, warm, seed=1)  # compile every round shape
        eng.stats.clear()
        runs[name] = {"schedule": sched, "token_budget": ecfg.round_tokens if sched == "mixed" else None,
                      **_budget_run(eng, model.cfg.vocab_size, args)}
        toks[name] = runs[name].pop("outputs")
        Console().print(name, runs[name])
    same = all(t == toks["split"] for t in toks.values())  # batch-independent sampling: same tokens
    if not same:
        raise AssertionError("token_budget: the schedules generated different tokens")
    return dict(mode="token_budget", runs=runs, slots=args.slots, prefill_slots=min(4, args.slots), prefill_chunk=64,
                decoders=args.decoders, prompt_len=args.prompt_len, decode_tokens=args.decode_tokens,
                long_requests=args.long_requests, long_prompt_len=args.long_prompt_len, long_gen=args.long_gen,
                arrive_every=args.arrive_every, window=args.window, same_tokens=same)


def decode_profile(eng, prompts, one, full, out_dir: Path, steps: int, step_ms: float, top: int = 25) -> dict:
    """Trace the prefill-only run and the full run (benchmarks/profile_summary.py) and subtract them per kernel
    name: what one decode step spends on the device, kernel by kernel, and how much of the measured step time no
    kernel covers (launches, the host reads of loop and branch predicates, idle gaps)."""
    from .profile_summary import summarize, trace

    runs = {}
    for name, sp in (("prefill", one), ("full", full)):
        try:  # a profiler failure costs the profile, never the sweep's measured rows
            trace(lambda: eng.generate(prompts, sp), out_dir / name)
        except Exception as e:  # noqa: BLE001
            print(f"    profile failed: {type(e).__name__}: {e}", flush=True)
            return {"error": f"{type(e).__name__}: {e}"}
        runs[name] = summarize(out_dir / name, top=100_000)
    if "error" in runs["full"] or "error" in runs["prefill"]:
        return {"error": runs["full"].get("error") or runs["prefill"].get("error")}
    per = lambda r: {t["name"]: (t["us"], t["count"]) for t in r["top"]}
    pre, ful = per(runs["prefill"]), per(runs["full"])
    diff = {n: (us - pre.get(n, (0.0, 0))[0], c - pre.get(n, (0.0, 0))[1]) for n, (us, c) in ful.items()}
    busy_us = (runs["full"]["device_us"] - runs["prefill"]["device_us"]) / steps
    rows = sorted(diff.items(), key=lambda kv: -kv[1][0])[:top]
    out = dict(trace_dir=str(out_dir), device_us_per_step=busy_us, measured_us_per_step=1e3 * step_ms,
               device_busy_frac=busy_us / (1e3 * step_ms), kernels_per_step=sum(c for _, c in diff.values()) / steps,
               top=[dict(name=n[:160], us_per_step=us / steps, launches_per_step=c / steps) for n, (us, c) in rows])
    print(f"    decode step on the device: {busy_us / 1e3:.2f} of {step_ms:.2f} ms measured "
          f"({100 * out['device_busy_frac']:.0f}% busy), {out['kernels_per_step']:.0f} kernels per step; top:")
    out["device_lines_us_full_run"] = runs["full"].get("device_lines_us")
    for r in out["top"][:12]:
        print(f"      {r['us_per_step']:8.1f} us  x{r['launches_per_step']:<6.1f} {r['name'][:100]}")
    return out


def sweep(args) -> dict:
    model = make_model(args.preset, args.dtype)
    cfg = model.cfg
    bw = flops.hbm_tbps()
    weight_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    rows = []
    for b in args.batches:
        ecfg = EngineConfig(max_slots=b, page_size=args.page_size, window=args.window, prefill_slots=min(8, b),
                            prefill_chunk=min(2048, args.window), rounds_per_sync=256, progress=False,
                            kv=KVCacheOptions(num_pages=b * (args.window // args.page_size) + 2),  # one window each
                            kernels=KernelOptions(attention=args.attention, decode_splits=args.decode_splits))
        ecfg = with_overrides(ecfg, engine_overrides(args.engine))
        eng = None  # the previous batch's engine (and its KV pool) is freed before the next one is built
        gc.collect()
        eng = Engine(model, ecfg)
        rng = np.random.default_rng(b)
        prompts = [rng.integers(0, cfg.vocab_size, args.prompt_len).tolist() for _ in range(b)]
        one = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_tokens=1, seed=0)
        full = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_tokens=args.decode_tokens + 1, seed=0)
        c1, _ = _timed(eng, prompts, one)  # compile both paths (first calls)
        c2, _ = _timed(eng, prompts, full)
        print(f"  batch {b}: first prefill-only run {c1:.1f} s, first full run {c2:.1f} s (compiles included)",
              flush=True)
        pre_s, _ = _timed(eng, prompts, one)
        tot_s, _ = _timed(eng, prompts, full)
        dec_s = tot_s - pre_s
        if dec_s <= 0:  # the decode tokens took less than the two runs' noise: no decode figure, not a huge one
            print(f"  batch {b}: the full run ({tot_s:.4f} s) was not slower than the prefill-only one ({pre_s:.4f} s); "
                  f"decode figures are NaN (raise --decode-tokens)", flush=True)
            dec_s = float("nan")
        steps = args.decode_tokens
        ctx = args.prompt_len + steps / 2
        kv_read = b * ctx * kv_bytes_per_page(cfg, ecfg) / ecfg.page_size
        roof_s = steps * (weight_bytes + kv_read) / (bw * 1e12) if bw else float("nan")
        pf = flops.estimate(cfg, [args.prompt_len] * b, training=False)
        rows.append(dict(batch=b, prefill_tok_s=b * args.prompt_len / pre_s, prefill_mfu=flops.mfu(pf, pre_s),
                         decode_tok_s=b * steps / dec_s, decode_roofline_frac=roof_s / dec_s,
                         decode_step_ms=1e3 * dec_s / steps, first_runs_s=[c1, c2]))
        print(f"  batch {b}: prefill {rows[-1]['prefill_tok_s']:.0f} tok/s, decode {rows[-1]['decode_tok_s']:.0f} tok/s "
              f"({100 * rows[-1]['decode_roofline_frac']:.1f}% of roofline, {rows[-1]['decode_step_ms']:.2f} ms/step)",
              flush=True)
        if args.greedy_tokens:  # issue 47: a change must leave greedy tokens as they were (benchmarks/greedy_match.py)
            greedy = eng.generate(prompts, SamplingParams(temperature=0.0, max_tokens=args.decode_tokens + 1))
            f = args.out_dir / f"greedy_{args.preset}{args.tag}_b{b}.npy"
            np.save(f, np.asarray([c.token_ids + [-1] * (args.decode_tokens + 1 - len(c.token_ids)) for c in greedy],
                                  np.int32))
            rows[-1]["greedy_tokens"] = f.name
        if args.profile is not None and b in (args.profile_batches or args.batches[:1]):
            rows[-1]["profile"] = decode_profile(eng, prompts, one, full, args.profile / f"b{b}", steps,
                                                 rows[-1]["decode_step_ms"])
        if args.partial is not None:  # a batch's row survives a later batch's crash or timeout
            args.partial.write_text(json.dumps(dict(mode="sweep", partial=True, preset=args.preset, rows=rows), indent=2))
    return dict(mode="sweep", hbm_tbps=bw, weight_bytes=weight_bytes, prompt_len=args.prompt_len,
                decode_tokens=args.decode_tokens, window=args.window, page_size=args.page_size,
                attention=args.attention, decode_splits=args.decode_splits, engine=engine_overrides(args.engine),
                temperature=args.temperature, top_p=args.top_p, rows=rows)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["skew", "sweep", "token_budget"], default="skew")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--short-tokens", type=int, default=16)
    ap.add_argument("--long-tokens", type=int, default=256)
    ap.add_argument("--long-frac", type=float, default=0.1)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--decoders", type=int, default=8, help="token_budget: requests decoding throughout")
    ap.add_argument("--long-requests", type=int, default=6, help="token_budget: long prompts arriving")
    ap.add_argument("--long-prompt-len", type=int, default=448)
    ap.add_argument("--long-gen", type=int, default=16)
    ap.add_argument("--arrive-every", type=int, default=16, help="token_budget: decoder tokens between arrivals")
    ap.add_argument("--budgets", type=int, nargs="+", default=[0], help="token_budget: mixed budgets (0 = auto)")
    ap.add_argument("--attention", default="reference", choices=["reference", "pallas", "auto"],
                    help="sweep: EngineConfig.kernels.attention")
    ap.add_argument("--decode-splits", type=int, default=0, help="sweep: EngineConfig.kernels.decode_splits (0 = auto)")
    ap.add_argument("--page-size", type=int, default=64, help="sweep: EngineConfig.page_size")
    ap.add_argument("--temperature", type=float, default=1.0, help="sweep: the timed runs' sampling temperature")
    ap.add_argument("--top-p", type=float, default=1.0, help="sweep: the timed runs' top-p (< 1 compiles the "
                    "sampler's truncation pass in, as an evaluation's sampling does: MemAgent's eval 0.95)")
    ap.add_argument("--profile", type=Path, default=None, help="sweep: trace the prefill-only and the full run "
                    "of --profile-batches into this folder (a relative one under --out-dir); the row gets the decode "
                    "step's kernels (full - prefill)")
    ap.add_argument("--profile-batches", type=int, nargs="*", default=None,
                    help="sweep: batch sizes to profile (default: the first of --batches)")
    ap.add_argument("--greedy-tokens", action="store_true", help="sweep: also generate greedily (same prompts, "
                    "--decode-tokens + 1 tokens) and save the tokens as greedy_<preset><tag>_b<batch>.npy in --out-dir, "
                    "for benchmarks/greedy_match.py (untimed)")
    ap.add_argument("--tag", default="", help="suffix of the result file name")
    add_engine_option(ap)  # sweep: EngineConfig fields (issue 47's before/after)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if not (args.temperature >= 0 and 0 < args.top_p <= 1):
        ap.error(f"--temperature must be >= 0 and --top-p in (0, 1], got {args.temperature} and {args.top_p}")
    args.partial = None
    if args.profile is not None and not args.profile.is_absolute():
        args.profile = args.out_dir / args.profile
    if args.mode == "sweep":
        args.out_dir.mkdir(parents=True, exist_ok=True)
        args.partial = args.out_dir / f"rollout_sweep_{args.preset}{args.tag}_partial.json"
    res = {"skew": skew, "sweep": sweep, "token_budget": token_budget}[args.mode](args)
    kind = flops.device_kind()
    res.update(device=kind, preset=args.preset, dtype=args.dtype, jax=jax.__version__)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"rollout_{args.mode}_{args.preset}{args.tag}_{device_slug(kind)}.json"
    out.write_text(json.dumps(res, indent=2))
    if args.partial is not None:
        args.partial.unlink(missing_ok=True)
    con = Console()
    t = Table(title=f"rollout throughput ({args.mode}, {args.preset}, {kind})")
    if args.mode == "token_budget":
        for c in ("run", "tok/s", "TTFT median s", "TTFT p90 s", "gap median s", "gap p90 s", "gap max s",
                  "max gap rounds"):
            t.add_column(c, justify="right")
        for name, r in res["runs"].items():
            t.add_row(name, f"{r['tok_s']:.0f}", f"{r['ttft_median_s']:.3f}", f"{r['ttft_p90_s']:.3f}",
                      f"{r['gap_median_s']:.4f}", f"{r['gap_p90_s']:.4f}", f"{r['gap_max_s']:.4f}",
                      str(r["gap_max_rounds"]))
    elif args.mode == "skew":
        for c in ("continuous tok/s", "static tok/s", "speedup"):
            t.add_column(c, justify="right")
        t.add_row(f"{res['continuous_tok_s']:.0f}", f"{res['static_tok_s']:.0f}", f"{res['speedup']:.2f}x")
    else:
        for c in ("batch", "prefill tok/s", "prefill MFU", "decode tok/s", "decode % roofline", "step ms"):
            t.add_column(c, justify="right")
        for r in res["rows"]:
            t.add_row(str(r["batch"]), f"{r['prefill_tok_s']:.0f}", f"{100 * r['prefill_mfu']:.1f}%",
                      f"{r['decode_tok_s']:.0f}", f"{100 * r['decode_roofline_frac']:.1f}%", f"{r['decode_step_ms']:.2f}")
    con.print(t)
    con.print(f"wrote {out}")
    return res


if __name__ == "__main__":
    main()
