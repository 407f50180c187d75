"""Generate golden evidence-list -> (session, turn) fixtures for Memory-R2's official evidence reader (issue 49).

Runs the OFFICIAL function, loaded from a path given on the command line (no official code lives in this
repository): ahmedehabb/Memory-R2 @357b4ec, data/locomo/data_preprocess.py — the module-level `_re_dia` pattern and
the top-level function `parse_dia_id` are taken from that file with `ast` and executed. The official preprocessing
reads a question's `evidence` list as `[parse_dia_id(ev) for ev in evidence]`, keeping the pairs without None
(categorize_qas_by_recency, extract_evidence_per_session): `re.match` anchors at the start only, so a malformed
string holding several ids ("D8:6; D9:17") yields its first id and "D:11:26" yields nothing.
Usage:
  git --git-dir=<mirror> show 357b4ec:data/locomo/data_preprocess.py > /tmp/dp.py
  python scripts/gen_evidence_goldens_memory_r2.py --official /tmp/dp.py \
      --out tests/fixtures/evidence_goldens_memory_r2.json
Inputs: LoCoMo's six malformed evidence strings as printed in locomo10.json (copied by hand: no LoCoMo file is
read), well-formed ids, leading zeros, separators, stray colons, prefixes and suffixes, empty and non-string
items, and seeded random lists of these pieces.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re

LOCOMO_MALFORMED = ["D8:6; D9:17", "D", "D:11:26", "D9:1 D4:4 D4:6", "D22:1 D22:2 D9:10 D9:11",
                    "D21:18 D21:22 D11:15 D11:19"]
PIECES = ["D1:3", "D8:17", "D30:05", "D07:1", " D2:4", "D2:4 ", "D2:4,D3:5", "D2:4;D3:5", "D2:4/D3:5", "d2:4",
          "D2 :4", "D2:", ":4", "D:2:4", "D2:4:6", "DD2:4", "xD2:4", "D2:4x", "D10:10a", "S2:4", "D2-4", "", "  ",
          "D0:0", "D123:456", "D2:4\n", "D\t3:1"]


def load_official(path: str):
    tree = ast.parse(open(path, encoding="utf-8").read())
    keep = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name == "parse_dia_id")
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "_re_dia" for t in n.targets))]
    if len(keep) != 2:
        raise SystemExit(f"{path}: _re_dia and parse_dia_id not both found")
    ns = {"re": re}
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), ns)
    return ns["parse_dia_id"]


def lists(rng: random.Random) -> list[list]:
    out = [[s] for s in LOCOMO_MALFORMED + PIECES] + [[], [None], [3], ["D1:3", None, "D2:2"]]
    while len(out) < 600:
        out.append([rng.choice(PIECES + LOCOMO_MALFORMED) for _ in range(rng.randint(1, 5))])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--official", required=True, help="data/locomo/data_preprocess.py of Memory-R2 @357b4ec")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fn = load_official(args.official)
    cases = []
    for ev in lists(random.Random(args.seed)):
        pairs = [list(t) for t in (fn(e) for e in ev) if t[0] is not None and t[1] is not None]
        cases.append([ev, pairs])
    doc = {"source": {"repo": "ahmedehabb/Memory-R2", "commit": "357b4ec", "path": "data/locomo/data_preprocess.py",
                      "function": "parse_dia_id (as categorize_qas_by_recency applies it to a question's evidence)",
                      "script": "scripts/gen_evidence_goldens_memory_r2.py", "seed": args.seed},
           "cases": cases}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
    print(f"{len(cases)} cases -> {args.out}; lists read as nothing: {sum(1 for _, p in cases if not p)}")


if __name__ == "__main__":
    main()
