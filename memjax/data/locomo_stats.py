"""`python -m memjax.data.locomo_stats stats PATH`: one JSON object describing a locomo10.json: counts, questions per
category, the loader's quirk counts and the question count of every named split (memjax/data/locomo_splits.py).

Owns `stats(data)` and the command. Exit status 2 with a one-line error when the file cannot be read.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from .locomo import CATEGORY_NAMES, Locomo, LocomoError, load_locomo
from .locomo_splits import SPLITS, split_questions


def stats(data: Locomo) -> dict[str, Any]:
    """The `stats` JSON object: counts, questions per category, quirks and every named split's size."""
    qs = [q for c in data.conversations for q in c.questions]
    per_cat = Counter(q.category for q in qs)
    splits = {}
    for name in SPLITS:
        try:
            parts = split_questions(data, name)
        except KeyError as e:           # a file without the split's conversations: say so, do not fail
            splits[name] = {"error": str(e.args[0])}
            continue
        splits[name] = {part: {"conversations": len({q.conversation for q in v}), "questions": len(v)}
                        for part, v in parts.items()}
    return {"path": data.path,
            "conversations": len(data.conversations),
            "sessions": sum(len(c.sessions) for c in data.conversations),
            "turns": sum(len(c.turns) for c in data.conversations),
            "questions": len(qs),
            "questions_per_category": {f"{k} {CATEGORY_NAMES[k]}": per_cat.get(k, 0) for k in sorted(CATEGORY_NAMES)},
            "quirks": data.report.counts(),
            "splits": splits}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m memjax.data.locomo_stats",
                                 description="LoCoMo statistics: counts, questions per category, quirks, named splits")
    sub = ap.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stats", help="print one JSON object of statistics of a locomo10.json")
    st.add_argument("path", help="the user's copy of locomo10.json")
    a = ap.parse_args(argv)
    try:
        data = load_locomo(a.path)
    except (LocomoError, OSError) as e:
        print(f"memjax.data.locomo_stats: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(stats(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
