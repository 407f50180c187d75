"""Generate golden fixtures for the `locomo` and `mem0` metric profiles (and nltk's Porter stemmer) from the OFFICIAL code.

No official code lives in this repository: the files are read from paths given on the command line, and only their
named top-level functions are executed (taken with `ast`, as scripts/gen_metric_goldens.py does), in a separate
virtual environment that has nltk and regex (memjax needs neither):
  locomo: snap-research/locomo, branch `code` @9228632, task_eval/evaluation.py — `normalize_answer`, `f1_score`,
          `f1`, with `ps = nltk.stem.PorterStemmer()` as the module defines it (its bert_score import is not run);
          the per-QA score is what `eval_question_answering` appends: category 3 golds cut at the first ';',
          category 1 `f1`, categories 2-4 `f1_score`.
  mem0:   mem0ai/mem0 @373709f, evaluation/metrics/utils.py — `simple_tokenize`, `calculate_metrics` (its "f1"), and
          `calculate_bleu_scores` (its "bleu1"), called as evaluation/evals.py calls them (str() of both sides).
          Needs nltk's punkt_tab English data for `nltk.word_tokenize`; `--nltk-data DIR` points at it. Without
          it (`--no-bleu`) only the F1 goldens are written.
Usage (nltk 3.9.1: the release current when Mem0's evaluation was written; punkt_tab is nltk data, not on PyPI as
such: a copy of nltk_data's tokenizers/punkt_tab/english is vendored by the PyPI package llama-index-core, under
llama_index/core/_static/nltk_cache — point --nltk-data at a directory holding tokenizers/punkt_tab/english/):
  python3 -m venv /tmp/golden && /tmp/golden/bin/pip install nltk==3.9.1 regex numpy
  git --git-dir=<locomo mirror> show 9228632:task_eval/evaluation.py > /tmp/golden/locomo_evaluation.py
  git --git-dir=<mem0 mirror> show 373709f:evaluation/metrics/utils.py > /tmp/golden/mem0_utils.py
  /tmp/golden/bin/python scripts/gen_locomo_mem0_goldens.py --locomo-eval /tmp/golden/locomo_evaluation.py \
      --mem0-utils /tmp/golden/mem0_utils.py --data ../shared/data/locomo/locomo10.json --out-dir tests/fixtures \
      --nltk-data /tmp/golden/nltk_data --qas 300 --write-punkt-asset memjax/assets/punkt/english_lower.json
Pairs: real LoCoMo QA (categories 1-4) with their category: the gold against itself, its perturbations (case,
punctuation, articles, repeats, hyphens, dates, numbers, unicode, empty, truncation, extra words, comma lists) and
other golds of the same conversation; deterministic (seeded).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import string
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_metric_goldens import perturb  # noqa: E402  (same perturbations as the memory_r2 goldens)


def load_functions(path: str, names: tuple[str, ...], ns: dict) -> dict:
    tree = ast.parse(open(path, encoding="utf-8").read())
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in nodes}
    if missing:
        raise SystemExit(f"{path}: functions not found: {sorted(missing)}")
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), ns)
    return ns


def locomo_official(path: str) -> dict:
    import numpy as np
    import regex
    from nltk.stem import PorterStemmer
    ns = {"regex": regex, "string": string, "Counter": Counter, "np": np, "ps": PorterStemmer()}
    return load_functions(path, ("normalize_answer", "f1_score", "f1"), ns)


def locomo_qa(off: dict, pred: str, gold: str, category: int) -> float:
    """eval_question_answering's per-line score for categories 1-4, as written there."""
    answer = str(gold)
    if category == 3:
        answer = answer.split(";")[0].strip()
    if category in (2, 3, 4):
        return float(off["f1_score"](pred, answer))
    return float(off["f1"](pred, answer))


def mem0_official(path: str) -> dict:
    import statistics
    from collections import defaultdict

    import nltk
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    ns = {"nltk": nltk, "SmoothingFunction": SmoothingFunction, "sentence_bleu": sentence_bleu,
          "statistics": statistics, "defaultdict": defaultdict}
    return load_functions(path, ("simple_tokenize", "calculate_bleu_scores", "calculate_metrics"), ns)


def extra_preds(gold: str, rng: random.Random) -> list[str]:
    parts = [p.strip() for p in gold.split(",") if p.strip()]
    out = [", ".join(reversed(parts)), ", ".join(parts[:1]), gold.replace(",", ";"), gold.replace(" and ", ", "),
           "and " + gold, "the cats and dogs were running happily", "connection relational generalization",
           "\u00c9t\u00e9 the\u0301 a\u00b2 and\u2460 the\u24b6 an_ the", "7 May 2023; 8 May 2023", "yes, no, maybe",
           "Caroline, Melanie, and John", "dying lying skies news innings", "U.S. J. Smith went home. It rained!",
           "well-known mother-in-law's car", "He didn't say; it's 3.5 million, 1,000 people (approx.)"]
    return out


EDGE_TEXTS = [
    "Mr. Smith went to Washington. He said hi!", "The U.S. economy grew 3.5%. The end.", "J. K. Rowling wrote it.",
    "It's 5 p.m. now. OK?", "(She left.) Then he came.", '"Hello." she said. "Bye."', "In the year 2023. Administrators said",
    "No. 5 is a number. 7. z-holiday was fun. 12. b-week", "Wait... what?! Really!!! Yes.", "--hyphen-- test -- ok",
    "gonna wanna cannot 'tis 'twas gimme lemme", "\u2102. j. \u2102omplex \u2115. a.", "e.g. i.e. etc. vs. dr. jr.",
    "He bought 1,000.5 shares... then sold.", "Line one.\nLine two.\n\nNew para. end", "'quoted' and \u2018curly\u2019 \u201cquotes\u201d",
    "She's got 'em; they'd've left: 10:30 a.m. Mon.", "A. B. C. D.", "x.y.z. is a site. so is a.b.c.", "3. 4. 5.",
    "Tom's car (red) [old] {big} <x> * & # @ $ %", "End with period .", "ends with question?", "", "   ", ".", "...",
    "caf\u00e9 na\u00efve \u2014 dash\u2013en \u00bbguillemets\u00ab", "the 7 May, 2023.", "I think it was 7 May 2023.",
]


def write_punkt_asset(path: str) -> None:
    """The English Punkt model's abbreviation types and collocations, and the orthographic-context entries that can
    change a decision on lower-cased text (seen lower-case at a sentence start, never upper-case); see
    memjax/evaluation/nltk_text.py for why these suffice."""
    import nltk
    from nltk.tokenize.punkt import _ORTHO_BEG_LC, _ORTHO_UC, load_punkt_params
    lang_dir = nltk.data.find("tokenizers/punkt_tab/english/")
    p = load_punkt_params(lang_dir)
    ortho = {t: f for t, f in sorted(p.ortho_context.items()) if f & _ORTHO_BEG_LC and not f & _ORTHO_UC}
    # the subset's premise: every type in the full table starts with a character that lower-casing leaves lower-case
    assert all(t[:1].lower() == t[:1] and not t[:1].isupper() for t in p.ortho_context)
    out = {"source": "nltk_data tokenizers/punkt_tab/english (nltk.tokenize.punkt.load_punkt_params), nltk "
                     + nltk.__version__,
           "abbrev_types": sorted(p.abbrev_types), "collocations": sorted(map(list, p.collocations)),
           "ortho_context": ortho, "full_ortho_context_entries": len(p.ortho_context)}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"punkt asset -> {path}: {len(out['abbrev_types'])} abbreviations, {len(out['collocations'])} "
          f"collocations, {len(ortho)} of {len(p.ortho_context)} orthographic entries")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--locomo-eval", required=True)
    ap.add_argument("--mem0-utils", required=True)
    ap.add_argument("--data", required=True, help="locomo10.json")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--qas", type=int, default=400, help="LoCoMo QA pairs (categories 1-4) drawn")
    ap.add_argument("--words", type=int, default=6000, help="conversation words for the stemmer goldens")
    ap.add_argument("--turns", type=int, default=1500, help="conversation turns for the word_tokenize goldens")
    ap.add_argument("--nltk-data", default="", help="nltk data dir with tokenizers/punkt_tab (mem0 BLEU-1)")
    ap.add_argument("--no-bleu", action="store_true")
    ap.add_argument("--write-punkt-asset", default="",
                    help="also write the Punkt English parameters memjax needs (memjax/assets/punkt/english_lower.json)")
    args = ap.parse_args()
    import nltk
    import regex
    if args.nltk_data:
        nltk.data.path.insert(0, args.nltk_data)
    if args.write_punkt_asset:
        write_punkt_asset(args.write_punkt_asset)
    loc, m0 = locomo_official(args.locomo_eval), mem0_official(args.mem0_utils)
    if args.no_bleu:    # calculate_metrics calls calculate_bleu_scores (needs punkt_tab); its f1 does not use it
        m0["calculate_bleu_scores"] = lambda prediction, reference: {}
    rng = random.Random(32)
    data = json.load(open(args.data, encoding="utf-8"))
    qas = [(s["sample_id"], q) for s in data for q in s["qa"] if q.get("category") in (1, 2, 3, 4) and "answer" in q]
    picked = rng.sample(qas, min(args.qas, len(qas)))
    by_conv: dict[str, list[str]] = {}
    for cid, q in qas:
        by_conv.setdefault(cid, []).append(str(q["answer"]))
    lcases, mcases = [], []
    for cid, q in picked:
        gold, cat = str(q["answer"]), int(q["category"])
        preds = perturb(gold, rng) + extra_preds(gold, rng) + rng.sample(by_conv[cid], 3)
        for p in preds:
            lcases.append({"pred": p, "gold": gold, "category": cat, "f1": locomo_qa(loc, p, gold, cat)})
            m = m0["calculate_metrics"](str(p), str(gold))
            rec = {"pred": p, "gold": gold, "f1": float(m["f1"])}
            if not args.no_bleu:
                rec["bleu1"] = float(m0["calculate_bleu_scores"](str(p), str(gold))["bleu1"])
            mcases.append(rec)
    out = Path(args.out_dir)
    versions = {"nltk": nltk.__version__, "regex": regex.__version__, "python": sys.version.split()[0]}
    lmeta = {"repo": "snap-research/locomo", "commit": "9228632", "branch": "code", "path": "task_eval/evaluation.py",
             "functions": ["normalize_answer", "f1_score", "f1", "eval_question_answering (per-line score)"],
             "generator": "scripts/gen_locomo_mem0_goldens.py", **versions}
    mmeta = {"repo": "mem0ai/mem0", "commit": "373709f", "path": "evaluation/metrics/utils.py",
             "functions": ["calculate_metrics (f1)"] + ([] if args.no_bleu else ["calculate_bleu_scores (bleu1)"]),
             "generator": "scripts/gen_locomo_mem0_goldens.py", **versions}
    for name, meta, cases in (("locomo", lmeta, lcases), ("mem0", mmeta, mcases)):
        with open(out / f"metric_goldens_{name}.json", "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "cases": cases}, f, ensure_ascii=False, indent=0)
        print(f"{name}: {len(cases)} cases")
    # the stemmer on real conversation words (and the irregular pool, short words, y-runs)
    words = sorted({w for s in data for k, v in s["conversation"].items() if k.startswith("session_")
                    and isinstance(v, list) for t in v for w in re.findall(r"[a-z]+", t.get("text", "").lower())})
    words = rng.sample(words, min(args.words, len(words))) + [
        "skies", "dying", "news", "innings", "proceed", "ies", "pies", "died", "spied", "yyyy", "sayyy", "ay", "y",
        "by", "generalization", "rationalli", "hopefulli", "archaeologi", "geologi", "controll", "roll", "feed",
        "agreed", "conflated", "troubled", "sized", "hopping", "falling", "filing", "happy", "enjoy", "spy"]
    ps = loc["ps"]
    stems = {w: ps.stem(w) for w in words}
    meta = {"library": "nltk", "class": "nltk.stem.PorterStemmer()", "generator": "scripts/gen_locomo_mem0_goldens.py",
            **versions}
    with open(out / "porter_goldens_nltk.json", "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "stems": stems}, f, ensure_ascii=False, indent=0)
    print(f"porter: {len(stems)} words")
    if args.no_bleu:
        return
    # nltk.word_tokenize(text.lower()) on real conversation turns (several sentences, abbreviations, numbers,
    # quotes) and edge strings: what mem0's BLEU-1 tokenises
    turns = [t["text"] for s in data for k, v in s["conversation"].items() if k.startswith("session_")
             and isinstance(v, list) for t in v if t.get("text")]
    texts = rng.sample(turns, min(args.turns, len(turns))) + EDGE_TEXTS
    toks = [{"text": t, "tokens": nltk.word_tokenize(t.lower())} for t in texts]
    meta = {"library": "nltk", "function": "nltk.word_tokenize(text.lower()) (punkt_tab english)",
            "generator": "scripts/gen_locomo_mem0_goldens.py", **versions}
    with open(out / "word_tokenize_goldens_nltk.json", "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": toks}, f, ensure_ascii=False, indent=0)
    print(f"word_tokenize: {len(toks)} texts")


if __name__ == "__main__":
    main()
