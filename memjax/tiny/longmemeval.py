"""LongMemEval for the tiny trained policies: what every paper's tiny path (memjax/systems/<paper>/tiny/
longmemeval_tiny.py, LongMemEvalConfig.system "<paper>_tiny") shares; each paper maps a question onto its own tiny
episode format.

Owns `TinyFact` and `haystack_facts(q)` (every turn of the haystack as one fact `K rel P .`, with its session, turn,
role and LoCoMo dia_id), `question_key(q)` (K of `where is K ?`), `unreadable(q, words)` (why a question is outside a
tiny task: a word not in its vocabulary, a turn that is not one 4-word fact, a question not `where is K ?`),
`load_policy(policy, warmstart)` ("" the shipped warm start, "random" its shape with random weights, else an HF
directory, checked against the warm start's shape) and `guarded(predict, words)` (a batch predictor that answers
None with the reason, counted as `unreadable` by the harness, for the questions it cannot read, and calls `predict`
on the rest).
Invariants: nothing here runs a model; a question is either readable by a tiny task or named unreadable, never
silently altered; the fixture tests/fixtures/data/longmemeval_tiny.json (scripts/gen_longmemeval_tiny_fixture.py) is
readable by every tiny task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..checkpoint import load_hf
from ..data.longmemeval import LmeQuestion
from ..data.longmemeval_locomo import dia_id
from ..model import init_model


@dataclass(frozen=True)
class TinyFact:
    session: int            # 0-based position in the haystack
    turn: int               # 0-based position in its session
    role: str
    words: tuple[str, ...]  # `K rel P .`

    @property
    def dia_id(self) -> str:
        return dia_id(self.session, self.turn)

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def subject(self) -> str:
        return self.words[0]


def haystack_facts(q: LmeQuestion) -> list[list[TinyFact]]:
    """Per session (haystack order), its turns as facts."""
    return [[TinyFact(s, t, turn.role, tuple(turn.content.split())) for t, turn in enumerate(ses.turns)]
            for s, ses in enumerate(q.sessions)]


def question_key(q: LmeQuestion) -> str | None:
    w = q.question.split()
    return w[2] if len(w) == 4 and w[:2] == ["where", "is"] and w[3] == "?" else None


def unreadable(q: LmeQuestion, words: Sequence[str]) -> str | None:
    """None when the tiny task with vocabulary `words` can read the question, else the reason (one line)."""
    vocab = set(words)
    if question_key(q) is None:
        return f"question {q.question!r} is not `where is K ?`"
    for text, where in [(q.question, "the question")] + [
            (t.content, f"session {s + 1} turn {i + 1}") for s, ses in enumerate(q.sessions)
            for i, t in enumerate(ses.turns)]:
        bad = [w for w in text.split() if w not in vocab]
        if bad:
            return f"word {bad[0]!r} of {where} is not in the tiny vocabulary"
    for s, ses in enumerate(q.sessions):
        for i, t in enumerate(ses.turns):
            w = t.content.split()
            if len(w) != 4 or w[3] != ".":
                return f"session {s + 1} turn {i + 1} is not one fact `K rel P .`: {t.content!r}"
    return None


def load_policy(policy: str, warmstart: Callable[[], Any]):
    """The tiny policy: "" = `warmstart()` (the shipped one), "random" = its shape with random weights (seed 0),
    else the HF directory `policy` (refused when its shape is not the warm start's: another task's model)."""
    ws = warmstart()
    if not policy:
        return ws
    if policy == "random":
        return init_model(ws.cfg, seed=0)
    model = load_hf(policy)
    shape = lambda c: (c.vocab_size, c.hidden_size, c.num_layers)  # noqa: E731
    if shape(model.cfg) != shape(ws.cfg):
        raise ValueError(f"policy={policy}: a model of (vocabulary, width, layers) {shape(model.cfg)}, this tiny "
                         f"task's is {shape(ws.cfg)}: not a policy of this system")
    return model


def guarded(predict: Callable[[list[LmeQuestion]], list[dict[str, Any]]], words: Sequence[str]
            ) -> Callable[[list[LmeQuestion]], list[dict[str, Any]]]:
    """A batch predictor: questions the task cannot read answer None with `unreadable` (the reason); `predict`
    gets the others, in order."""
    def run(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        why = [unreadable(q, words) for q in qs]
        ok = [q for q, w in zip(qs, why) if w is None]
        got = iter(predict(ok) if ok else [])
        return [next(got) if w is None else {"answer": None, "unreadable": w} for w in why]

    return run
