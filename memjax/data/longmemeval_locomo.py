"""A LongMemEval question as the LoCoMo records the memory systems read (memjax.data.locomo): one `Conversation` per
question (its haystack), one `Question`, so SUMER's search tools, Memory-R1's construction and answer agent and
Memory-R2's extractor / manager run on LongMemEval through the code they run on LoCoMo.

Owns `as_locomo(q, *, question_date=True) -> (Conversation, Question)`, `locomo_date`, `dia_id` and `CATEGORY_OF`.
The mapping is memjax's choice (the LongMemEval paper runs none of these systems; `as_locomo`'s docstring has it):
sessions in haystack (time) order with LoCoMo-form dates, turn t of session k is "D<k>:<t>", the `has_answer` turns
are the evidence, and with `question_date` the question ends with its asking date, since a LoCoMo system has no
other channel for it.
Invariants: the judge still sees the original question; categories (unused by the systems' answer prompts) come
from CATEGORY_OF, and scoring is per LongMemEval question type.
"""

from __future__ import annotations

import datetime as dt

from .locomo import Conversation, Question, Session, Turn
from .longmemeval import LmeQuestion

CATEGORY_OF = {"multi-session": 1, "temporal-reasoning": 2}


def locomo_date(date: str) -> str:
    """'YYYY/MM/DD (Ddd) HH:MM' -> 'H:MM am on D Month, YYYY' (LoCoMo's form); any other form unchanged."""
    try:
        d = dt.datetime.strptime(date.split(" (")[0] + " " + date.rsplit(") ", 1)[-1], "%Y/%m/%d %H:%M")
    except ValueError:
        return date
    return f"{d.hour % 12 or 12}:{d.minute:02d} {'am' if d.hour < 12 else 'pm'} on {d.day} {d:%B}, {d.year}"


def dia_id(session: int, turn: int) -> str:
    """0-based (session, turn) -> the LoCoMo dia_id 'D<session+1>:<turn+1>'."""
    return f"D{session + 1}:{turn + 1}"


def as_locomo(q: LmeQuestion, *, question_date: bool = True) -> tuple[Conversation, Question]:
    """LongMemEval question `q` as one LoCoMo (Conversation, Question) pair.

    Mapping (memjax's choices; the LongMemEval paper runs none of these systems):
    - conversation id = question_id; speakers "user" and "assistant" (the turn roles); session k (1-based, haystack
      order, which is time order in the S and M files) has date_time = the haystack date in LoCoMo's form
      ("YYYY/MM/DD (Ddd) HH:MM" -> "H:MM am on D Month, YYYY", what the systems' prompts were written for); a date
      in another form is kept as it is;
    - turn t of session k is dia_id "D<k>:<t>" (1-based); the `has_answer` turns are the question's evidence;
    - with `question_date`, the question text ends with " (asked on <question date in LoCoMo's form>)": LongMemEval's
      questions are asked on question_date, after the haystack ("how many days ago ..."), and a LoCoMo system has no
      other channel for it; the judge still sees the original question;
    - category (unused by the systems' answer prompts) from CATEGORY_OF: multi-session -> 1 (multi-hop),
      temporal-reasoning -> 2 (temporal), the others -> 4 (single-hop). Scoring is per LongMemEval question type.
    """
    sessions = tuple(Session(k + 1, locomo_date(s.date), tuple(Turn(t.role, dia_id(k, i), t.content, k + 1)
                                                               for i, t in enumerate(s.turns)))
                     for k, s in enumerate(q.sessions))
    evidence = tuple(dia_id(s, t) for s, t in q.answer_turns())
    text = f"{q.question} (asked on {locomo_date(q.question_date)})" if question_date else q.question
    conv = Conversation(q.question_id, "user", "assistant", sessions, ())
    question = Question(q.question_id, 0, text, CATEGORY_OF.get(q.question_type, 4), q.answer, None, evidence,
                        evidence)
    return conv, question
