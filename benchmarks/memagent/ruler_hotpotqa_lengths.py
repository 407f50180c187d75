"""Token lengths of RULER-HotpotQA contexts for N documents, with the shipped Qwen2.5 tokenizer.

For each N (default 50, 100, 200) every question of the given HotpotQA file is synthesised
(`memjax.data.synthesize`, seed 0) and its context tokenised; the script prints a markdown table of
mean / min / max context tokens and the MemAgent chunk count at 5000 tokens per chunk, next to the
MemAgent paper's nominal lengths (N = 50 / 100 / 200 ≈ 7K / 14K / 28K tokens), and writes
`ruler_hotpotqa_lengths.json` and `.md` to --out-dir (default benchmarks/results/).

The document pool is the file's unique paragraphs: the 100-record dev sample has ~1,000, so N up to
~1,000 works with it; the paper's N = 400 ... 6400 sets need the full HotpotQA dev file (a larger N
raises an error saying so).

Run: `python -m benchmarks.memagent.ruler_hotpotqa_lengths --data PATH/hotpot_dev_distractor_first100.json`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from memjax.core.tokenizer import Tokenizer
from memjax.data import RulerHotpotQAConfig, load_hotpotqa, synthesize

RESULTS = Path(__file__).resolve().parents[1] / "results"
PAPER = {50: "≈7K", 100: "≈14K", 200: "≈28K", 400: "≈56K", 800: "≈112K", 1600: "≈224K", 3200: "≈448K",
         6400: "≈896K"}


def measure(data: Path, num_docs: list[int], seed: int, chunk: int, limit: int | None) -> dict:
    corpus = load_hotpotqa(data)
    tok = Tokenizer.default()
    n_q = len(corpus.questions) if limit is None else min(limit, len(corpus.questions))
    rows = []
    for n in num_docs:
        cfg = RulerHotpotQAConfig(num_docs=n, seed=seed)
        t0 = time.perf_counter()
        lengths = [len(tok.encode(synthesize(corpus, i, cfg).context)) for i in range(n_q)]
        rows.append({"num_docs": n, "questions": n_q, "mean_tokens": statistics.fmean(lengths),
                     "min_tokens": min(lengths), "max_tokens": max(lengths),
                     "mean_chunks": statistics.fmean(math.ceil(x / chunk) for x in lengths),
                     "paper": PAPER.get(n, ""), "seconds": time.perf_counter() - t0})
    return {"data": data.name, "records": len(corpus.questions), "pool_docs": len(corpus.docs), "seed": seed,
            "tokenizer": "Qwen2.5 (memjax/assets/qwen2.5-tokenizer)", "chunk_tokens": chunk, "rows": rows}


def table(result: dict) -> str:
    lines = [f"RULER-HotpotQA context lengths — {result['data']} ({result['records']} questions, pool of "
             f"{result['pool_docs']} documents, seed {result['seed']}, {result['tokenizer']})", "",
             f"| N docs | mean tokens | min | max | mean chunks @ {result['chunk_tokens']} | paper |",
             "|---:|---:|---:|---:|---:|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['num_docs']} | {r['mean_tokens']:,.0f} | {r['min_tokens']:,} | {r['max_tokens']:,} | "
                     f"{r['mean_chunks']:.2f} | {r['paper']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description="RULER-HotpotQA context token lengths")
    ap.add_argument("--data", type=Path, required=True, help="HotpotQA JSON (e.g. hotpot_dev_distractor_v1.json)")
    ap.add_argument("--num-docs", type=int, nargs="+", default=[50, 100, 200])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=5000, help="MemAgent chunk size in tokens (for the chunk count)")
    ap.add_argument("--limit", type=int, default=None, help="measure only the first LIMIT questions")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args()
    try:
        result = measure(args.data, args.num_docs, args.seed, args.chunk, args.limit)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}") from None
    md = table(result)
    print(md)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "ruler_hotpotqa_lengths.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out_dir / "ruler_hotpotqa_lengths.md").write_text(md + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
