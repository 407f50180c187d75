"""LongMemEval (xiaowu0162/LongMemEval, ICLR 2025; `longmemeval_s.json` / `_m` / `_oracle` layout): loader and the
`python -m memjax.data.longmemeval stats PATH` command.

Owns: typed frozen records (`LmeQuestion`, `LmeSession`, `LmeTurn`), `load_longmemeval(path)`, `stats(data)`.
The data is the user's copy: never fetched, never shipped (tests/fixtures/data/longmemeval_fixture.json is memjax's
own text in the same layout). The LoCoMo-shaped view the systems read is memjax/data/longmemeval_locomo.py's.

Fields read per question (the repository README's list): `question_id`, `question_type` (one of QUESTION_TYPES),
`question`, `answer` (a number is kept as its `str()`, as the official judge formats it), `question_date`,
`haystack_session_ids`, `haystack_dates`, `haystack_sessions` ([[{role, content, has_answer?}]]),
`answer_session_ids`. A question is an abstention question iff its id contains `_abs` (the official scripts' test).
Invariants: the three haystack lists have one entry per session, in file order; every role is "user" or "assistant";
question ids are unique; every malformed field raises `LongMemEvalError` with one line naming the file, the question
(id, or index when the id itself is bad) and the field. Nothing is dropped silently; unknown extra keys are ignored.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .locomo import read_json_list

QUESTION_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
                  "multi-session", "temporal-reasoning", "knowledge-update")   # print_qa_metrics.py's order
ROLES = ("user", "assistant")


class LongMemEvalError(ValueError):
    """Malformed LongMemEval input; the message names the file, the question and the field."""


@dataclass(frozen=True)
class LmeTurn:
    role: str
    content: str
    has_answer: bool = False


@dataclass(frozen=True)
class LmeSession:
    session_id: str
    date: str
    turns: tuple[LmeTurn, ...]


@dataclass(frozen=True)
class LmeQuestion:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: tuple[LmeSession, ...]          # the haystack, in file order
    answer_session_ids: tuple[str, ...]

    @property
    def abstention(self) -> bool:
        return "_abs" in self.question_id

    def answer_turns(self) -> list[tuple[int, int]]:
        """(session index, turn index) of every `has_answer` turn (turn-level evidence)."""
        return [(s, t) for s, ses in enumerate(self.sessions) for t, turn in enumerate(ses.turns) if turn.has_answer]


@dataclass(frozen=True)
class LongMemEval:
    path: str
    questions: tuple[LmeQuestion, ...]

    def question(self, question_id: str) -> LmeQuestion:
        for q in self.questions:
            if q.question_id == question_id:
                return q
        raise KeyError(f"{self.path}: no question {question_id!r}")


def _field(raw: dict, key: str, typ, where: str) -> Any:
    if key not in raw:
        raise LongMemEvalError(f"{where}: missing field {key!r}")
    v = raw[key]
    if not isinstance(v, typ) or isinstance(v, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        names = " or ".join(t.__name__ for t in (typ if isinstance(typ, tuple) else (typ,)))
        raise LongMemEvalError(f"{where}.{key}: expected {names}, got {type(v).__name__}")
    return v


def _strings(raw: dict, key: str, where: str) -> list[str]:
    v = _field(raw, key, list, where)
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise LongMemEvalError(f"{where}.{key}[{i}]: expected str, got {type(x).__name__}")
    return v


def _question(raw: Any, where: str) -> LmeQuestion:
    if not isinstance(raw, dict):
        raise LongMemEvalError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    qid = _field(raw, "question_id", str, where)
    if not qid.strip():
        raise LongMemEvalError(f"{where}.question_id: empty")
    where = f"{where.rsplit('[', 1)[0]}[{qid}]"
    qtype = _field(raw, "question_type", str, where)
    if qtype not in QUESTION_TYPES:
        raise LongMemEvalError(f"{where}.question_type: {qtype!r} is not one of {', '.join(QUESTION_TYPES)}")
    question = _field(raw, "question", str, where)
    answer = _field(raw, "answer", (str, int, float), where)
    qdate = _field(raw, "question_date", str, where)
    ids = _strings(raw, "haystack_session_ids", where)
    dates = _strings(raw, "haystack_dates", where)
    sessions = _field(raw, "haystack_sessions", list, where)
    if not len(ids) == len(dates) == len(sessions):
        raise LongMemEvalError(f"{where}.haystack_sessions: {len(sessions)} sessions but {len(ids)} "
                               f"haystack_session_ids and {len(dates)} haystack_dates (one of each per session)")
    if len(set(ids)) != len(ids):
        dup = next(i for i, n in Counter(ids).items() if n > 1)
        raise LongMemEvalError(f"{where}.haystack_session_ids: {dup!r} listed twice")
    answer_ids = _strings(raw, "answer_session_ids", where)
    out = []
    for s, (sid, date, turns) in enumerate(zip(ids, dates, sessions)):
        sw = f"{where}.haystack_sessions[{s}]"
        if not isinstance(turns, list):
            raise LongMemEvalError(f"{sw}: expected a list of turns, got {type(turns).__name__}")
        parsed = []
        for t, turn in enumerate(turns):
            tw = f"{sw}[{t}]"
            if not isinstance(turn, dict):
                raise LongMemEvalError(f"{tw}: expected a JSON object, got {type(turn).__name__}")
            role = _field(turn, "role", str, tw)
            if role not in ROLES:
                raise LongMemEvalError(f"{tw}.role: {role!r} is not 'user' or 'assistant'")
            content = _field(turn, "content", str, tw)
            has = turn.get("has_answer", False)
            if not isinstance(has, bool):
                raise LongMemEvalError(f"{tw}.has_answer: expected true or false, got {type(has).__name__}")
            parsed.append(LmeTurn(role, content, has))
        out.append(LmeSession(sid, date, tuple(parsed)))
    return LmeQuestion(qid, qtype, question, str(answer), qdate, tuple(out), tuple(answer_ids))


def load_longmemeval(path: str | Path) -> LongMemEval:
    """Load and validate a LongMemEval JSON file (a list of questions); raises `LongMemEvalError` (one line)."""
    path = Path(path)
    raw = read_json_list(path, LongMemEvalError, "questions")
    qs = tuple(_question(q, f"{path}[{i}]") for i, q in enumerate(raw))
    seen: set[str] = set()
    for q in qs:
        if q.question_id in seen:
            raise LongMemEvalError(f"{path}[{q.question_id}].question_id: listed twice")
        seen.add(q.question_id)
    return LongMemEval(str(path), qs)


def stats(data: LongMemEval) -> dict[str, Any]:
    """The `stats` JSON object: questions per type, abstention count, haystack sizes, evidence counts."""
    qs = data.questions
    per_type = Counter(q.question_type for q in qs)
    sessions = [len(q.sessions) for q in qs]
    turns = [sum(len(s.turns) for s in q.sessions) for q in qs]
    chars = [sum(len(t.content) for s in q.sessions for t in s.turns) for q in qs]
    return {"path": data.path, "questions": len(qs),
            "questions_per_type": {t: per_type.get(t, 0) for t in QUESTION_TYPES},
            "abstention": sum(q.abstention for q in qs),
            "sessions": {"total": sum(sessions), "min": min(sessions), "max": max(sessions)},
            "turns": {"total": sum(turns), "min": min(turns), "max": max(turns)},
            "haystack_chars": {"min": min(chars), "max": max(chars), "mean": round(sum(chars) / len(qs), 1)},
            "answer_sessions": sum(len(q.answer_session_ids) for q in qs),
            "has_answer_turns": sum(len(q.answer_turns()) for q in qs)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m memjax.data.longmemeval",
                                 description="LongMemEval statistics: questions per type, abstention, haystack sizes")
    sub = ap.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stats", help="print one JSON object of statistics of a LongMemEval JSON file")
    st.add_argument("path", help="the user's copy of longmemeval_s.json / longmemeval_m.json / longmemeval_oracle.json")
    a = ap.parse_args(argv)
    try:
        data = load_longmemeval(a.path)
    except LongMemEvalError as e:
        print(f"memjax.data.longmemeval: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(stats(data)))
    return 0


if __name__ == "__main__":  # the importable module's main: the records are the classes the systems import
    from memjax.data.longmemeval import main as _main

    sys.exit(_main())
