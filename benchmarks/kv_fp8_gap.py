"""The rollout/trainer log-prob gap of a float8 KV cache (issue 47, item 4), on real tokens.

  python -m benchmarks.kv_fp8_gap [--preset P | --hf-path DIR] [--dtype D] [--compute-dtype D] [--prompts N]
                                  [--prompt-len T] [--max-tokens M] [--temperature X] [--out FILE.json]

RL reads the engine's log-probs against the trainer's: the ratio's old log-probs when they are not recomputed, and
the `logp_mismatch_*` metric always. This script measures what a float8_e4m3fn pool (EngineConfig.kv.kv_dtype) does to
that gap. Prompts are real text: HotpotQA distractor paragraphs (the RULER-HotpotQA documents MemAgent trains on)
tokenised with the Qwen2.5 tokenizer and cut to --prompt-len tokens (the first file found of HOTPOT_CANDIDATES,
or --data). For each KV setting the engine samples
--max-tokens per prompt (seeded, temperature --temperature, as a rollout does), then the trainer's own
`token_logprobs` scores the same tokens; per response token d = engine - trainer log-prob. Settings: the
compute-dtype pool (today's gap), float8 with scales 1.0 (vLLM's default without calibration) and float8 with
per-tensor scales calibrated from the compute pool (max |K| / 448, max |V| / 448: `Engine.kv_absmax`).
Reported per setting: mean, p99 and max |d|, the fraction of tokens whose ratio exp(-d) leaves DAPO's clip range
[1 - 0.2, 1 + 0.28], and the pool's max |K|, |V|. Random weights (no --hf-path) exercise the path and give the
order of the rounding error only: real weights (Qwen2.5's K carries large biases) decide whether float8 may be
used in RL. Writes the table and JSON (device in the name when --out is a directory).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOTPOT_CANDIDATES = (ROOT / "shared/data/hotpotqa/hotpot_dev_distractor_first100.json",  # carried to a GPU machine
                     ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_first100.json",
                     ROOT / "tests/fixtures/data/hotpotqa_dev_excerpt.json")  # 8 real dev records, in the repository
CLIP = (0.2, 0.28)  # DAPO's clip-low / clip-high (the MemAgent recipe's)


def hotpot_prompts(tok, n: int, length: int, path: Path | None = None) -> list[list[int]]:
    """n prompts of exactly `length` tokens of real text: record i's paragraphs (then the next records') in order."""
    path = path or next((p for p in HOTPOT_CANDIDATES if p.exists()), None)
    if path is None or not path.exists():
        raise SystemExit(f"kv_fp8_gap: no HotpotQA file (looked for {', '.join(map(str, HOTPOT_CANDIDATES))}); "
                         "pass --data FILE")
    recs = json.loads(path.read_text())
    paras = [f"{title}: {''.join(sents)}" for r in recs for title, sents in r["context"]]
    out, j = [], 0
    for _ in range(n):
        ids: list[int] = []
        while len(ids) < length:
            ids += tok.encode(paras[j % len(paras)] + "\n")
            j += 1
        out.append(ids[:length])
    return out


def gap_stats(d) -> dict:
    """d: engine - trainer log-prob per response token (numpy). Summary of |d| and of the ratio exp(-d)."""
    import numpy as np

    a = np.abs(d)
    ratio = np.exp(-d)  # new / old with new = the trainer, old = the engine (recompute off)
    outside = (ratio < 1 - CLIP[0]) | (ratio > 1 + CLIP[1])
    return dict(tokens=int(d.size), mean_abs=float(a.mean()), p99_abs=float(np.quantile(a, 0.99)),
                max_abs=float(a.max()), mean=float(d.mean()), clip_outside_frac=float(outside.mean()))


def measure(model, prompts, *, kv_dtype: str = "compute", k_scale: float = 1.0, v_scale: float = 1.0,
            max_tokens: int = 32, temperature: float = 1.0, engine_kw: dict | None = None) -> dict:
    """Sample with an engine whose pool is kv_dtype, score the tokens with the trainer; gap_stats plus the pool's
    max |K|, |V| (as cached, scales applied) and seconds."""
    import jax.numpy as jnp
    import numpy as np

    from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
    from memjax.rl.logprobs import token_logprobs

    longest = max(map(len, prompts)) + max_tokens
    page = 16
    window = -(-longest // page) * page
    kw = dict(max_slots=len(prompts), window=window, page_size=page, prefill_slots=min(4, len(prompts)),
              prefill_chunk=min(256, window), progress=False)
    kw.update(engine_kw or {})
    eng = Engine(model, EngineConfig(**kw, kv=KVCacheOptions(kv_dtype=kv_dtype, k_scale=k_scale, v_scale=v_scale)))
    t0 = time.perf_counter()
    outs = eng.generate(prompts, [SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=i)
                                  for i in range(len(prompts))])
    secs = time.perf_counter() - t0
    kmax, vmax = eng.kv_absmax()
    eng.sleep()
    t = max(len(p) + len(c.token_ids) for p, c in zip(prompts, outs))
    ids = np.zeros((len(prompts), t), np.int32)
    mask = np.zeros((len(prompts), t), np.int32)
    for i, (p, c) in enumerate(zip(prompts, outs)):
        seq = list(p) + list(c.token_ids)
        ids[i, :len(seq)] = seq
        mask[i, len(p):len(seq)] = 1
    logp, _ = token_logprobs(model, jnp.asarray(ids), jnp.asarray(mask), temperature=temperature if temperature > 0
                             else 1.0)
    logp = np.asarray(logp)
    d = np.concatenate([np.asarray(c.logprobs) - logp[i, len(p):len(p) + len(c.token_ids)]
                        for i, (p, c) in enumerate(zip(prompts, outs))])
    return dict(kv_dtype=kv_dtype, k_scale=k_scale, v_scale=v_scale, k_absmax=kmax, v_absmax=vmax,
                generate_s=round(secs, 2), **gap_stats(d))


def run(model, prompts, **kw) -> list[dict]:
    """The three settings of the module docstring, compute first (it calibrates the float8 scales)."""
    from memjax.engine.config import FP8_E4M3_MAX

    base = measure(model, prompts, **kw)
    rows = [dict(setting="compute dtype", **base),
            dict(setting="float8, scales 1", **measure(model, prompts, kv_dtype="float8_e4m3fn", **kw))]
    ks, vs = base["k_absmax"] / FP8_E4M3_MAX, base["v_absmax"] / FP8_E4M3_MAX
    rows.append(dict(setting="float8, calibrated scales",
                     **measure(model, prompts, kv_dtype="float8_e4m3fn", k_scale=ks, v_scale=vs, **kw)))
    return rows


def table(rows: list[dict]) -> str:
    head = ("| KV pool | k_scale / v_scale | mean abs gap | p99 | max | ratio outside [0.8, 1.28] | "
            "max abs K / V | tokens |\n|---|---|---|---|---|---|---|---|")
    body = [f"| {r['setting']} | {r['k_scale']:.3g} / {r['v_scale']:.3g} | {r['mean_abs']:.2e} | {r['p99_abs']:.2e} | "
            f"{r['max_abs']:.2e} | {100 * r['clip_outside_frac']:.2f}% | {r['k_absmax']:.3g} / {r['v_absmax']:.3g} | "
            f"{r['tokens']} |" for r in rows]
    return "\n".join([head, *body])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny-qwen-vocab", help="random weights of this preset (no --hf-path)")
    ap.add_argument("--hf-path", default="", help="a Hugging Face Qwen2 directory: real weights (the decisive run)")
    ap.add_argument("--dtype", default="float32", help="master weights (the trainer's)")
    ap.add_argument("--compute-dtype", default="bfloat16", help="activations (engine and trainer), as the recipe")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--data", type=Path, help="HotpotQA JSON (default: shared/data/hotpotqa in the tree or beside it)")
    ap.add_argument("--out", type=Path, help="write the JSON here (a directory: kv_fp8_gap_<model>_<device>.json)")
    a = ap.parse_args(argv)
    for f in ("prompts", "prompt_len", "max_tokens"):
        if getattr(a, f) < 1:
            raise SystemExit(f"kv_fp8_gap: --{f.replace('_', '-')} must be >= 1, got {getattr(a, f)}")
    import jax

    from memjax.checkpoint.source import ModelSource

    model, tok = ModelSource(hf_path=a.hf_path, preset=a.preset, dtype=a.dtype, compute_dtype=a.compute_dtype).load()
    prompts = hotpot_prompts(tok, a.prompts, a.prompt_len, a.data)
    rows = run(model, prompts, max_tokens=a.max_tokens, temperature=a.temperature)
    dev = jax.devices()[0]
    name = Path(a.hf_path).name if a.hf_path else a.preset
    res = dict(model=name, weights="real" if a.hf_path else "random", dtype=a.dtype, compute_dtype=a.compute_dtype,
               device=dev.device_kind, prompts=a.prompts, prompt_len=a.prompt_len, max_tokens=a.max_tokens,
               temperature=a.temperature, command="python -m benchmarks.kv_fp8_gap " + " ".join(argv or sys.argv[1:]),
               rows=rows)
    print(f"{name} ({res['weights']} weights), {a.prompts} HotpotQA prompts x {a.prompt_len} tokens, "
          f"{a.max_tokens} sampled tokens each, {dev.device_kind}:")
    print(table(rows))
    if a.out:
        out = a.out
        if out.is_dir() or not out.suffix:
            out.mkdir(parents=True, exist_ok=True)
            out = out / f"kv_fp8_gap_{name}_{dev.device_kind.lower().replace(' ', '-')}.json"
        out.write_text(json.dumps(res, indent=2))
        print(f"wrote {out}")
    return res


if __name__ == "__main__":
    main()
