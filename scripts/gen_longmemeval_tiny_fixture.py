"""Write tests/fixtures/data/longmemeval_tiny.json: a LongMemEval-layout file in the tiny tasks' vocabulary.

    python scripts/gen_longmemeval_tiny_fixture.py [--out tests/fixtures/data/longmemeval_tiny.json]

Owns `build() -> list[dict]` (the fixture, a pure function of SEED) and the command. Not LongMemEval's text: every
turn is one fact `K in P .` and every question `where is K ?`, written from memjax's own word lists (people `ann` ..
`ned` and places `rome` .. `tokyo`: the words every paper's tiny vocabulary shares, memjax/tiny/vocab.py and
memjax/systems/sumer/tiny/task.py), so each system's tiny trained policy can read it. The released layout
(memjax.data.longmemeval reads it with its validation): question_id, question_type, question, answer, question_date,
haystack_session_ids, haystack_dates, haystack_sessions [[{role, content, has_answer}]], answer_session_ids.
Per question: 3 sessions of a user turn and an assistant turn (6 facts, distinct people but the asked one, distinct
places, so a place names one fact), dated a few days apart, the question asked after the last. The tiny vocabulary
has one relation, so the six official types differ by where the evidence lies, not by the ability their English
questions test:
- single-session-user / single-session-preference: K's fact in one user turn; single-session-assistant: in one
  assistant turn;
- multi-session: K's fact stated in two sessions (a user turn, then an assistant turn repeating it);
- knowledge-update: K in P1 in an earlier session, K in P2 in a later one; the answer is P2 (both turns evidence);
- temporal-reasoning: K's fact in the latest session (the tiny vocabulary has no time words);
- abstention (`_abs` ids, one single-session-user, one temporal-reasoning): K appears nowhere; the gold is `none`
  (the tiny readers' word for no record).
Invariants: the same file on every run (tests/e2e/systems/test_tiny_longmemeval.py compares the committed file with
`build()`); every word is in every tiny task's vocabulary.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

PEOPLE = ("ann", "bob", "cal", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lee", "max", "ned")
PLACES = ("rome", "oslo", "lima", "kiev", "baku", "doha", "riga", "bern", "cairo", "delhi", "paris", "tokyo")
SEED = 51
OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "data" / "longmemeval_tiny.json"
WEEKDAY = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# (question id, type, evidence slots) -- a slot is (session, turn) of 3 x 2; "ku": two slots, the later one wins
PLAN = (("tl_ssu_1", "single-session-user", ((0, 0),)), ("tl_ssu_2", "single-session-user", ((2, 0),)),
        ("tl_ssu_3_abs", "single-session-user", ()),
        ("tl_ssa_1", "single-session-assistant", ((1, 1),)), ("tl_ssa_2", "single-session-assistant", ((0, 1),)),
        ("tl_ssp_1", "single-session-preference", ((1, 0),)), ("tl_ssp_2", "single-session-preference", ((2, 0),)),
        ("tl_ms_1", "multi-session", ((0, 0), (2, 1))), ("tl_ms_2", "multi-session", ((1, 0), (2, 1))),
        ("tl_tr_1", "temporal-reasoning", ((2, 1),)), ("tl_tr_2", "temporal-reasoning", ((2, 0),)),
        ("tl_tr_3_abs", "temporal-reasoning", ()),
        ("tl_ku_1", "knowledge-update", ((0, 0), (2, 0))), ("tl_ku_2", "knowledge-update", ((0, 1), (1, 0))))


def _date(day: int, hour: int) -> str:
    """'2024/03/<day> (<weekday>) <hour>:00' (LongMemEval's form; 2024-03-01 was a Friday)."""
    return f"2024/03/{day:02d} ({WEEKDAY[(day + 3) % 7]}) {hour:02d}:00"


def build() -> list[dict]:
    rng = np.random.default_rng(SEED)
    out = []
    for n, (qid, qtype, slots) in enumerate(PLAN):
        people = [str(p) for p in rng.permutation(PEOPLE)]
        key, others = people[0], iter(people[1:])
        places = [str(p) for p in rng.permutation(PLACES)]
        gold = places[0] if slots else "none"
        spare = iter(places[2:])         # every fact of a haystack names its own place
        facts = [[f"{next(others)} in {next(spare)} ." for _ in range(2)] for _ in range(3)]
        evidence = set(slots)
        for k, (s, t) in enumerate(slots):
            # knowledge-update: the earlier slot holds the old place (places[1]), the later one the answer
            place = places[1] if qtype == "knowledge-update" and k == 0 else gold
            facts[s][t] = f"{key} in {place} ."
        day = 1 + n
        sessions = [[{"role": role, "content": facts[s][t], "has_answer": (s, t) in evidence}
                     for t, role in enumerate(("user", "assistant"))] for s in range(3)]
        ids = [f"answer_{qid}_{s + 1}" if any(x[0] == s for x in slots) else f"s_{qid}_{s + 1}" for s in range(3)]
        out.append({"question_id": qid, "question_type": qtype, "question": f"where is {key} ?", "answer": gold,
                    "question_date": _date(day + 9, 18),
                    "haystack_session_ids": ids,
                    "haystack_dates": [_date(day + 3 * s, 9 + s) for s in range(3)],
                    "haystack_sessions": sessions,
                    "answer_session_ids": [i for i in ids if i.startswith("answer_")]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/gen_longmemeval_tiny_fixture.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    Path(args.out).write_text(json.dumps(build(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(PLAN)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
