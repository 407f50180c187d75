"""Generate golden (prediction, gold) -> official score fixtures for memjax metric profiles.

Runs the OFFICIAL code, loaded from a path given on the command line (no official code lives in this repository):
  memory_r2: ahmedehabb/Memory-R2 @357b4ec, src/verl/verl/workers/reward_manager/rema.py — the top-level functions
             `normalize_text`, `compute_f1`, `compute_bleu` are taken from that file with `ast` and executed (the module
             itself imports verl/torch, which the metric functions do not use).
Usage:
  git --git-dir=<mirror> show 357b4ec:src/verl/verl/workers/reward_manager/rema.py > /work/golden/rema.py
  python scripts/gen_metric_goldens.py --rema /work/golden/rema.py --locomo data/locomo10.json \
      --hotpot data/hotpot_dev_distractor_first100.json --out tests/fixtures/metric_goldens_memory_r2.json
Pairs: golds from LoCoMo QA and HotpotQA, each with perturbations (case, punctuation, articles, repeats, hyphens,
dates, numbers, unicode, empty, truncation, extra words), deterministic (seeded).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import random
import re
import string
from collections import Counter

_OFFICIAL_FUNCS = ("normalize_text", "compute_f1", "compute_bleu")


def load_official(path: str) -> dict:
    tree = ast.parse(open(path, encoding="utf-8").read())
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in _OFFICIAL_FUNCS]
    missing = set(_OFFICIAL_FUNCS) - {n.name for n in nodes}
    if missing:
        raise SystemExit(f"{path}: functions not found: {sorted(missing)}")
    ns = {"math": math, "re": re, "string": string, "Counter": Counter}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), ns)
    return ns


def perturb(gold: str, rng: random.Random) -> list[str]:
    words = gold.split()
    out = [gold, gold.upper(), gold.lower(), gold.title(), "", "   ", gold + ".", "The " + gold, "a " + gold + "!",
           f"{gold}, {gold}", " ".join(w + " " + w for w in words), gold.replace(" ", "-"), gold.replace("-", " "),
           gold.replace(",", ""), f"I think it was {gold}.", "\u00e9t\u00e9 " + gold + " \u2014 caf\u00e9",
           gold.replace("'", "\u2019"), "3 3 3 years", "7 May, 2023", "The 7 May, 2023.", "1,000.5 dollars",
           "an the a", " ".join(words[: max(1, len(words) // 2)]), " ".join(reversed(words)),
           re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), gold), gold + " and " + rng.choice(["yes", "no", "it"]),
           "\t".join(words), gold + "\n\n" + gold]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rema", required=True)
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--hotpot", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--golds", type=int, default=60, help="golds drawn from each dataset")
    args = ap.parse_args()
    off = load_official(args.rema)
    rng = random.Random(32)
    loc = json.load(open(args.locomo))
    lg = sorted({str(q["answer"]) for s in loc for q in s["qa"] if "answer" in q})
    hp = sorted({str(r["answer"]) for r in json.load(open(args.hotpot))})
    golds = rng.sample(lg, min(args.golds, len(lg))) + rng.sample(hp, min(args.golds, len(hp))) + ["", "3 years"]
    cases = []
    for g in golds:
        for p in perturb(g, rng):
            cases.append({"pred": p, "gold": g, "f1": float(off["compute_f1"](p, g)),
                          "bleu1": float(off["compute_bleu"](p, g))})
    meta = {"repo": "ahmedehabb/Memory-R2", "commit": "357b4ec", "path": "src/verl/verl/workers/reward_manager/rema.py",
            "functions": ["compute_f1", "compute_bleu"], "generator": "scripts/gen_metric_goldens.py"}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": cases}, f, ensure_ascii=False, indent=0)
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
