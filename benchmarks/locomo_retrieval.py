"""Retrieval quality on LoCoMo: recall@k of the evidence turns for a split's questions, per retriever.

`python -m benchmarks.locomo_retrieval PATH/locomo10.json [--split sumer --part validation --out DIR]` (default
out/benchmarks; the committed benchmarks/results files are replaced only with --out benchmarks/results
--update-committed)

The memory is SUMER's: one record per message (text + image caption, `memjax.memory.conversation_records`), per
conversation; `--with-speaker` indexes "<speaker>: <text>" instead. The query is the question text.
Retrievers: hashed bag of words (cosine), BM25 (bm25s), the wordllama static embedding (cosine) and
reciprocal-rank fusion (k=60, over each one's top 100) of BM25 + wordllama, and of all three.
recall@k = mean over questions of |evidence ∩ top-k dia_ids| / |evidence|; `all@k` = share of questions whose
every evidence turn is in the top k. Questions without (valid) evidence are skipped and counted.
Writes `locomo_retrieval_<split>_<part>.json` and `.md` (LoCoMo itself is never written out).
"""

from __future__ import annotations

import argparse
import sys
import json
import time
from collections import defaultdict
from pathlib import Path

from memjax.data.locomo import CATEGORY_NAMES, load_locomo
from memjax.data.locomo_splits import split_questions
from memjax.memory import HashedBowEmbedder, Retriever, WordLlamaEmbedder, conversation_records, rrf

KS = (5, 10, 20)
DEPTH = 100


def rankings(retr_bow: Retriever, retr_wl: Retriever, query: str) -> dict[str, list[int]]:
    bow = [h.index for h in retr_bow.semantic(query, k=DEPTH)]
    bm = [h.index for h in retr_bow.bm25(query, k=DEPTH)]
    wl = [h.index for h in retr_wl.semantic(query, k=DEPTH)]
    return {"hashed_bow": bow, "bm25": bm, "wordllama": wl, "rrf_bm25_wordllama": rrf([bm, wl]),
            "rrf_all_three": rrf([bm, wl, bow])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_path")
    ap.add_argument("--split", default="sumer")
    ap.add_argument("--part", default="validation")
    ap.add_argument("--out", default="out/benchmarks", help="output folder (default out/benchmarks)")
    ap.add_argument("--update-committed", action="store_true", help="replace committed result files in --out")
    ap.add_argument("--with-speaker", action="store_true", help='index "<speaker>: <text>" instead of the text')
    a = ap.parse_args(argv)
    stem = Path(a.out) / f"locomo_retrieval_{a.split}_{a.part}{'_speaker' if a.with_speaker else ''}"
    from . import guard_committed

    refused = guard_committed([stem.with_suffix(".json"), stem.with_suffix(".md")], a.update_committed,
                              "benchmarks.locomo_retrieval")
    if refused:
        print(refused, file=sys.stderr)
        return 2
    data = load_locomo(a.data_path)
    questions = split_questions(data, a.split)[a.part]
    bow, wl = HashedBowEmbedder(), WordLlamaEmbedder()
    t0 = time.perf_counter()
    hits: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    full: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    per_cat: dict[str, dict[int, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    skipped, used = 0, 0
    by_conv = defaultdict(list)
    for q in questions:
        by_conv[q.conversation].append(q)
    for conv_id, qs in by_conv.items():
        recs = conversation_records(data.conversation(conv_id), with_speaker=a.with_speaker)
        r_bow, r_wl = Retriever(recs, bow), Retriever(recs, wl)
        for q in qs:
            if not q.evidence:
                skipped += 1
                continue
            used += 1
            ev = set(q.evidence)
            for name, ranking in rankings(r_bow, r_wl, q.question).items():
                ids = [recs[i].id for i in ranking]
                for k in KS:
                    got = len(ev & set(ids[:k]))
                    hits[name][k].append(got / len(ev))
                    full[name][k].append(float(got == len(ev)))
                    per_cat[name][q.category][k].append(got / len(ev))
    mean = lambda xs: round(100.0 * sum(xs) / len(xs), 2)
    table = {name: {**{f"recall@{k}": mean(hits[name][k]) for k in KS},
                    **{f"all@{k}": mean(full[name][k]) for k in KS},
                    "per_category_recall@10": {CATEGORY_NAMES[c]: mean(per_cat[name][c][10])
                                               for c in sorted(per_cat[name])}}
             for name in hits}
    result = {"data": Path(a.data_path).name, "split": a.split, "part": a.part, "questions": used,
              "skipped_without_evidence": skipped, "with_speaker": a.with_speaker, "conversations": len(by_conv),
              "depth": DEPTH,
              "embedders": {"hashed_bow": bow.id, "wordllama": wl.id}, "seconds": round(time.perf_counter() - t0, 1),
              "table": table}
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    variant = " (speaker-prefixed records)" if a.with_speaker else ""
    lines = [f"# LoCoMo evidence recall, {a.split}/{a.part}{variant} ({used} questions, {skipped} without evidence "
             "skipped)",
             "", "| retriever | " + " | ".join(f"R@{k}" for k in KS) + " | " + " | ".join(f"all@{k}" for k in KS)
             + " |", "|---|" + "---|" * (2 * len(KS))]
    for name, row in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[f'recall@{k}']:.2f}" for k in KS) + " | "
                     + " | ".join(f"{row[f'all@{k}']:.2f}" for k in KS) + " |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
