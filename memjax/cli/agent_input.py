"""What `python -m memjax.run_agent` reads: documents (text files or a directory of them) for MemAgent, and a
conversation (LoCoMo's layout, or a plain JSON list of sessions of {speaker, text, date}) for SUMER, Memory-R1 and
Memory-R2, turned into the LongMemEval questions those systems' own adapters take.

Owns `read_documents(paths, max_chars)`, `read_conversation(path, sample_id)` and `as_questions(conv, questions)`.
Invariants: every refusal is one InputError line naming the file: an empty file, a binary file (a NUL byte or not
UTF-8), a document over the limit, a conversation with no turns, a turn without text. Nothing here loads a model.
A plain conversation's first speaker plays LongMemEval's `user` role and every other speaker `assistant` (the
systems read the turns' text; LoCoMo files keep their two speakers the same way).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..data.longmemeval import LmeQuestion, LmeSession, LmeTurn


class InputError(ValueError):
    """Unusable input for run_agent: the message is one line naming the file."""


@dataclass(frozen=True)
class Conversation:
    name: str
    sessions: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # (date, ((speaker, text), ...))
    questions: tuple[tuple[str, str], ...] = ()  # (question, gold answer) from a LoCoMo file

    @property
    def turns(self) -> int:
        return sum(len(t) for _, t in self.sessions)


def _text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    if b"\0" in raw:
        raise InputError(f"{path}: a binary file (it holds NUL bytes); give a text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: a binary file (not UTF-8 text); give a text file") from None
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text


def read_documents(paths: list[str], max_chars: int) -> list[tuple[str, str]]:
    """(name, text) of every file named or under every directory named (sorted, hidden files skipped)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and not any(x.startswith(".") for x in f.parts))
            if not found:
                raise InputError(f"{p}: the directory holds no file")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p}: no such file or directory")
    docs = [(str(f), _text(f)) for f in files]
    total = sum(len(t) for _, t in docs)
    if total > max_chars:
        raise InputError(f"{docs[0][0] if len(docs) == 1 else f'{len(docs)} files'}: {total:,} characters, over the "
                         f"limit of {max_chars:,} (--max-doc-chars)")
    return docs


def _plain(raw: list, path: Path) -> Conversation:
    sessions = []
    for i, s in enumerate(raw):
        turns = s.get("turns") if isinstance(s, dict) else s
        if not isinstance(turns, list):
            raise InputError(f"{path}[{i}]: a session is a list of turns {{speaker, text, date}} or {{date, turns}}")
        date = s.get("date", "") if isinstance(s, dict) else ""
        out = []
        for j, t in enumerate(turns):
            if not isinstance(t, dict) or not isinstance(t.get("text"), str) or not t["text"].strip():
                raise InputError(f"{path}[{i}][{j}]: a turn needs a non-empty 'text' (and 'speaker', 'date')")
            out.append((str(t.get("speaker", "")), t["text"]))
            date = date or str(t.get("date", ""))
        sessions.append((date, tuple(out)))
    return Conversation(path.stem, tuple(sessions))


def read_conversation(path: str | Path, sample_id: str = "") -> Conversation:
    """A conversation from LoCoMo's layout (the first, or `sample_id`) or a plain JSON list of sessions."""
    path = Path(path)
    text = _text(path) if path.is_file() else None
    if text is None:
        raise InputError(f"{path}: no such file")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{path}: expected a JSON list (LoCoMo conversations, or sessions of turns)")
    if isinstance(raw[0], dict) and "conversation" in raw[0]:
        from ..data.locomo import LocomoError, load_locomo

        try:
            convs = load_locomo(path).conversations
        except LocomoError as e:
            raise InputError(str(e)) from None
        chosen = [c for c in convs if not sample_id or c.sample_id == sample_id]
        if not chosen:
            raise InputError(f"{path}: no conversation {sample_id!r} (has {', '.join(c.sample_id for c in convs)})")
        c = chosen[0]
        conv = Conversation(c.sample_id, tuple((s.date_time or "", tuple((t.speaker, t.text) for t in s.turns))
                                               for s in c.sessions),
                            tuple((q.question, q.answer or "") for q in c.questions if q.category != 5))
    else:
        conv = _plain(raw, path)
    if conv.turns == 0:
        raise InputError(f"{path}: the conversation has no turns")
    return conv


def as_questions(conv: Conversation, questions: list[tuple[str, str]]) -> list[LmeQuestion]:
    """One LongMemEval question per asked question over the conversation's sessions (empty sessions dropped)."""
    first = next(sp for _, ts in conv.sessions for sp, _ in ts)
    sessions = tuple(LmeSession(f"s{k + 1}", date, tuple(LmeTurn("user" if sp == first else "assistant", text)
                                                         for sp, text in turns))
                     for k, (date, turns) in enumerate(conv.sessions) if turns)
    last = next((d for d, _ in reversed(conv.sessions) if d), "")
    return [LmeQuestion(f"{conv.name}#{i}", "single-session-user", q, gold, last, sessions, ())
            for i, (q, gold) in enumerate(questions)]
