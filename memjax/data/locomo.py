"""LoCoMo (snap-research/LoCoMo `locomo10.json` layout): loader, quirk accounting and the `stats` CLI.

Owns typed frozen records (`Conversation`, `Session`, `Turn`, `Question`) and `load_locomo(path)`. The named splits
are memjax/data/locomo_splits.py's, the `stats` command memjax/data/locomo_stats.py's (this module imports neither).
LoCoMo is CC BY-NC 4.0 and is never shipped with memjax: the user passes the path of their copy.
Invariants: every quirk of the file (orphan date keys, adversarial questions without `answer`, non-string answers,
malformed or unknown evidence ids, questions without evidence, unknown speakers, image turns) is handled and counted
in `LoadReport`, whose docstring lists them: nothing is silently dropped, and the original evidence strings stay in
`Question.evidence_raw`. dia_ids are unique within a conversation; turn order is file order; sessions are sorted by
number; a bad file raises `LocomoError` in one line naming the file and field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_SESSION = re.compile(r"session_(\d+)")
_DATE = re.compile(r"session_(\d+)_date_time")
_ID = re.compile(r"D:?(\d+):(\d+)")


class LocomoError(ValueError):
    """Malformed LoCoMo input; the message names the file and the field."""


@dataclass(frozen=True)
class Turn:
    speaker: str
    dia_id: str
    text: str
    session: int
    image_caption: str | None = None
    image_query: str | None = None
    image_urls: tuple[str, ...] = ()

    def __post_init__(self):
        if not _ID.fullmatch(self.dia_id):
            raise LocomoError(f"Turn.dia_id: malformed {self.dia_id!r}")

    def display_text(self) -> str:
        """Text with the image caption appended as Memory-R2's code does (` [Sent an image showing ...]`)."""
        return self.text if not self.image_caption else f"{self.text} [Sent an image showing {self.image_caption}]"


@dataclass(frozen=True)
class Session:
    index: int
    date_time: str | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int                      # position in the conversation's `qa` list
    question: str
    category: int
    answer: str | None              # None for most category-5 items
    adversarial_answer: str | None
    evidence: tuple[str, ...]       # parsed, repaired, existing dia_ids
    evidence_raw: tuple[str, ...] = ()

    def __post_init__(self):
        if self.category not in CATEGORY_NAMES:
            raise LocomoError(f"Question.category: {self.category!r} not in 1..5 ({self.conversation}#{self.index})")

    @property
    def qid(self) -> str:
        return f"{self.conversation}#{self.index}"


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(t for s in self.sessions for t in s.turns)

    def dia_ids(self) -> frozenset[str]:
        return frozenset(t.dia_id for t in self.turns)


@dataclass
class LoadReport:
    """Counts of every quirk met while loading; each is handled, nothing is silently dropped.

    - sessions are the `session_N` lists; `session_N_date_time` keys without a `session_N` list (conv-26 has 35 date
      keys for 19 sessions) are ignored and counted (`orphan_date_keys`);
    - category-5 (adversarial) questions carry `adversarial_answer` and usually no `answer` (`answer` is then None);
    - non-string answers (e.g. the integer 2022) are converted with `str()` (`non_string_answers`);
    - evidence strings holding several ids ("D8:6; D9:17", "D9:1 D4:4") are split (`evidence_split`); ids with a
      stray colon ("D:11:26") or leading zeros ("D30:05") are repaired to `D<s>:<t>` (`evidence_repaired`); strings
      with no recoverable id ("D") are dropped (`evidence_unparseable`); well-formed ids that name no turn of the
      conversation are dropped (`evidence_unknown`). The original strings stay in `Question.evidence_raw`;
    - questions with no evidence are kept with `evidence == ()` (`questions_without_evidence`);
    - turns whose speaker is neither speaker_a nor speaker_b are kept and counted (`turns_unknown_speaker`);
    - turns with images keep `image_caption` (`blip_caption`), `image_query` and `image_urls` (`turns_with_image`).
    """

    orphan_date_keys: int = 0
    sessions_without_date: int = 0
    non_string_answers: int = 0
    category5_without_answer: int = 0
    category5_with_answer: int = 0
    evidence_split: int = 0
    evidence_repaired: int = 0
    evidence_unparseable: int = 0
    evidence_unknown: int = 0
    questions_without_evidence: int = 0
    turns_with_image: int = 0
    turns_unknown_speaker: int = 0
    details: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if k != "details"}


@dataclass(frozen=True)
class Locomo:
    path: str
    conversations: tuple[Conversation, ...]
    report: LoadReport

    def conversation(self, sample_id: str) -> Conversation:
        for c in self.conversations:
            if c.sample_id == sample_id:
                return c
        raise KeyError(f"{self.path}: no conversation {sample_id!r}")


def _req(obj: dict, key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise LocomoError(f"{where}: missing field {key!r}")
    if not isinstance(obj[key], typ):
        raise LocomoError(f"{where}.{key}: expected {typ}, got {type(obj[key]).__name__}")
    return obj[key]


def parse_evidence(raw: str, report: LoadReport, where: str) -> list[str]:
    """Split, repair and normalise one evidence string into well-formed ids (unknown ids are checked later)."""
    parts = [p for p in re.split(r"[;,\s]+", raw.strip()) if p]
    if len(parts) > 1:
        report.evidence_split += 1
        report.details.append(f"{where}: split evidence {raw!r}")
    out = []
    for p in parts:
        m = _ID.fullmatch(p)
        if m is None:
            report.evidence_unparseable += 1
            report.details.append(f"{where}: unparseable evidence {p!r}")
            continue
        fixed = f"D{int(m.group(1))}:{int(m.group(2))}"
        if fixed != p:
            report.evidence_repaired += 1
            report.details.append(f"{where}: evidence {p!r} -> {fixed!r}")
        out.append(fixed)
    return out


def _turn(raw: Any, session: int, where: str, report: LoadReport) -> Turn:
    speaker = _req(raw, "speaker", str, where)
    dia_id = _req(raw, "dia_id", str, where)
    if not _ID.fullmatch(dia_id):
        raise LocomoError(f"{where}.dia_id: malformed {dia_id!r}")
    text = _req(raw, "text", str, where)
    cap = raw.get("blip_caption")
    urls = raw.get("img_url") or ()
    if cap is not None or urls:
        report.turns_with_image += 1
    return Turn(speaker=speaker, dia_id=dia_id, text=text, session=session,
                image_caption=str(cap) if cap is not None else None,
                image_query=str(raw["query"]) if raw.get("query") is not None else None,
                image_urls=tuple(str(u) for u in (urls if isinstance(urls, list) else [urls])))


def _conversation(raw: Any, where: str, report: LoadReport) -> Conversation:
    sid = _req(raw, "sample_id", str, where)
    where = f"{where}[{sid}]"
    conv = _req(raw, "conversation", dict, where)
    qa = _req(raw, "qa", list, where)
    a = _req(conv, "speaker_a", str, f"{where}.conversation")
    b = _req(conv, "speaker_b", str, f"{where}.conversation")
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    dates = {int(m.group(1)) for k in conv if (m := _DATE.fullmatch(k))}
    report.orphan_date_keys += len(dates - set(numbers))
    sessions, seen = [], set()
    for n in numbers:
        turns_raw = _req(conv, f"session_{n}", list, f"{where}.conversation")
        turns = tuple(_turn(t, n, f"{where}.conversation.session_{n}[{i}]", report) for i, t in enumerate(turns_raw))
        for t in turns:
            if t.speaker not in (a, b):
                report.turns_unknown_speaker += 1
                report.details.append(f"{where}.session_{n}: {t.dia_id} speaker {t.speaker!r} is neither "
                                      f"{a!r} nor {b!r}")
            if t.dia_id in seen:
                raise LocomoError(f"{where}.conversation.session_{n}: duplicate dia_id {t.dia_id!r}")
            seen.add(t.dia_id)
        date = conv.get(f"session_{n}_date_time")
        if date is None:
            report.sessions_without_date += 1
        sessions.append(Session(index=n, date_time=None if date is None else str(date), turns=turns))
    questions = []
    for i, q in enumerate(qa):
        qw = f"{where}.qa[{i}]"
        cat = _req(q, "category", int, qw)
        if cat not in CATEGORY_NAMES:
            raise LocomoError(f"{qw}.category: {cat!r} not in 1..5")
        text = _req(q, "question", str, qw)
        answer = q.get("answer")
        if answer is not None and not isinstance(answer, str):
            report.non_string_answers += 1
            report.details.append(f"{qw}: non-string answer {answer!r}")
            answer = str(answer)
        adv = q.get("adversarial_answer")
        if adv is not None and not isinstance(adv, str):
            report.non_string_answers += 1
            adv = str(adv)
        if cat == 5:
            if answer is None:
                report.category5_without_answer += 1
            else:
                report.category5_with_answer += 1
        elif answer is None:
            raise LocomoError(f"{qw}.answer: missing for category {cat}")
        raw_ev = q.get("evidence") or []
        if not isinstance(raw_ev, list) or not all(isinstance(e, str) for e in raw_ev):
            raise LocomoError(f"{qw}.evidence: expected a list of strings")
        ev: list[str] = []
        for e in raw_ev:
            for d in parse_evidence(e, report, qw):
                if d not in seen:
                    report.evidence_unknown += 1
                    report.details.append(f"{qw}: evidence {d!r} names no turn")
                elif d not in ev:
                    ev.append(d)
        if not ev:
            report.questions_without_evidence += 1
        questions.append(Question(conversation=sid, index=i, question=text, category=cat, answer=answer,
                                  adversarial_answer=adv, evidence=tuple(ev), evidence_raw=tuple(raw_ev)))
    return Conversation(sample_id=sid, speaker_a=a, speaker_b=b, sessions=tuple(sessions),
                        questions=tuple(questions))


def read_json_list(path: Path, error: type[Exception], what: str) -> list:
    """The file's non-empty top-level JSON list; `error` with one line naming the file otherwise (shared by the
    LoCoMo and LongMemEval loaders)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{path}: not readable JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, list) or not raw:
        raise error(f"{path}: expected a non-empty JSON list of {what}")
    return raw


def load_locomo(path: str | Path) -> Locomo:
    """Load and validate a LoCoMo JSON file; raises `LocomoError` (one line naming the file and field)."""
    path = Path(path)
    raw = read_json_list(path, LocomoError, "conversations")
    report = LoadReport()
    convs = tuple(_conversation(c, f"{path}[{i}]", report) for i, c in enumerate(raw))
    ids = [c.sample_id for c in convs]
    if len(set(ids)) != len(ids):
        raise LocomoError(f"{path}: duplicate sample_id")
    return Locomo(path=str(path), conversations=convs, report=report)
