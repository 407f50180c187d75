"""The tiny searchable-memory task: SUMER's loop (search the memory, then submit) in a 48-word vocabulary.

Owns: the word vocabulary, `TinySumerFormat` (the tool-call syntax at id level, what SumerWorkflow needs from a
chat format), `TinySumerTask` (config), `make_sample` (facts spread over sessions, a question, the memory tools
over them) and `teacher_turns` (the correct episode, for the warm start).
Memory: `num_sessions` sessions of `facts_per_session` facts `K in P` (one record each, session number as
metadata); K is in a different place in each of `mentions` sessions, the other facts are about distractors. A
filtered question (`filtered_frac`) `where is K in session S ?` needs a session filter or a pick among the hits; a
plain one `where is K ?` (K mentioned once) needs one keyword search. No fact is in the prompt: without a search
the answer is a guess (1 in 12). `evidence` is the id of the one record that answers.
Syntax (one word per token): prompt `<user> question <end> <assistant>`; calls `<call> search WORDS [session N]` /
`<call> submit WORDS`, then `<end>`; tool turn `<tool> RESULT <end>` per call, then `<assistant>`. Parsed calls map
onto SUMER's schemas, so the same SumerWorkflow, tools and checks run (neighbour windows 0: a 64-token window).
Invariants: samples are a pure function of (task, seed, index); a name keyword matches exactly that person's facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..workflow import SumerSample
from ..tools import SUMER_TOOLS, MemoryTools, ToolResult, ToolsConfig
from ....agents.toolcall import CallError, ToolCall, check_arguments
from ....memory.bank import MemoryRecord
from ....memory.retrieval import Retriever

SPECIALS = ("<pad>", "<user>", "<assistant>", "<tool>", "<end>", "<call>")
WORDS_FIXED = ("where", "is", "in", "session", "?", ".", "search", "submit", "none", "error", "1", "2", "3", "4")
PEOPLE = ("ann", "bob", "cal", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lee", "max", "ned")
PLACES = ("rome", "oslo", "lima", "kiev", "baku", "doha", "riga", "bern", "cairo", "delhi", "paris", "tokyo")
WORDS = SPECIALS + WORDS_FIXED + PEOPLE + PLACES
MODEL_VOCAB = 64
WINDOW = 64
TOOLS_CFG = ToolsConfig(context_turns=0, keyword_max_hits=4, default_mode="keyword")
TRAIN_SEED, DEV_SEED, HELDOUT_SEED = 11, 13, 12


class TinySumerFormat:
    """The tiny chat format (see the module docstring); same interface as QwenSumerFormat."""

    def __init__(self):
        self.words = WORDS
        self.ids = {w: i for i, w in enumerate(WORDS)}
        self.vocab_size = len(WORDS)
        self.pad_id, self.end_id, self.call_id = self.ids["<pad>"], self.ids["<end>"], self.ids["<call>"]
        self.stop_ids = (self.end_id,)
        self.functions = {t["function"]["name"]: t["function"] for t in SUMER_TOOLS}

    def encode(self, text: str) -> list[int]:
        try:
            return [self.ids[w] for w in text.split()]
        except KeyError as e:
            raise ValueError(f"TinySumerFormat.encode: word {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.words[i] if 0 <= i < self.vocab_size else "<unk>" for i in ids)

    def text(self, ids: Sequence[int]) -> str:
        return self.decode(ids)

    def prompt(self, user: str) -> list[int]:
        return [self.ids["<user>"], *self.encode(user), self.end_id, self.ids["<assistant>"]]

    def closed(self, ids: Sequence[int]) -> bool:
        return bool(ids) and ids[-1] == self.end_id

    def _call(self, words: list[str]) -> ToolCall | CallError:
        if not words:
            return CallError("error")
        head, rest = words[0], words[1:]
        if head == "submit":
            call = ToolCall("submit_answer", {"answer": " ".join(rest)}) if rest else CallError("error")
        elif head == "search":
            args: dict = {"mode": "keyword"}
            if "session" in rest:
                k = rest.index("session")
                if k + 1 >= len(rest) or not rest[k + 1].isdigit():
                    return CallError("error")
                args["session"] = int(rest[k + 1])
                rest = rest[:k] + rest[k + 2:]
            if not rest:
                return CallError("error")
            call = ToolCall("search_memory", {"query": " ".join(rest), **args})
        else:
            return CallError("error")
        if isinstance(call, CallError):
            return call
        _, err = check_arguments(self.functions[call.name], call.arguments)
        return CallError("error") if err else call

    def parse(self, ids: Sequence[int]) -> tuple[list[ToolCall | CallError], bool]:
        ids = list(ids[:-1]) if self.closed(ids) else list(ids)
        if self.call_id not in ids:
            return [], False
        first = ids.index(self.call_id)
        calls, cur = [], None
        for i in ids[first:]:
            if i == self.call_id:
                if cur is not None:
                    calls.append(cur)
                cur = []
            else:
                cur.append(self.words[i] if 0 <= i < self.vocab_size else "<unk>")
        calls.append(cur)
        return [self._call(c) for c in calls], True

    @staticmethod
    def render(result: ToolResult) -> str:
        if result.kind != "hits":
            return "error"
        if not result.windows:
            return "none"
        return " ".join(f"session {m.session} {m.content} ." for w in result.windows for m in w)

    def tool_turn(self, results: Sequence[str], closed: bool = True) -> list[int]:
        if not results:
            raise ValueError("TinySumerFormat.tool_turn: no results")
        out = [] if closed else [self.end_id]
        for r in results:
            out += [self.ids["<tool>"], *self.encode(r), self.end_id]
        return out + [self.ids["<assistant>"]]


@dataclass(frozen=True)
class TinySumerTask:
    num_sessions: int = 4
    facts_per_session: int = 3
    filtered_frac: float = 0.7  # questions naming a session (the key person is in 2-3 sessions)

    def __post_init__(self):
        if not 2 <= self.num_sessions <= 4:
            raise ValueError(f"TinySumerTask.num_sessions must be in 2..4 (the vocabulary has 4 session numbers), "
                             f"got {self.num_sessions}")
        if self.facts_per_session < 1 or self.num_sessions * self.facts_per_session > len(PEOPLE):
            raise ValueError(f"TinySumerTask: facts_per_session must be >= 1 and the facts must fit {len(PEOPLE)} "
                             f"people ({self})")
        if not 0.0 <= self.filtered_frac <= 1.0:
            raise ValueError(f"TinySumerTask.filtered_frac must be in [0, 1], got {self.filtered_frac}")


def make_sample(task: TinySumerTask, seed: int, index: int) -> SumerSample:
    """One question over its own memory (records, retriever and tools built here)."""
    rng = np.random.default_rng([seed, index])
    n_s, f = task.num_sessions, task.facts_per_session
    filtered = bool(rng.random() < task.filtered_frac)
    key = str(rng.choice(PEOPLE))
    mentions = int(rng.integers(2, min(3, n_s) + 1)) if filtered else 1
    key_sessions = sorted(int(s) for s in rng.choice(np.arange(1, n_s + 1), mentions, replace=False))
    places = [str(p) for p in rng.choice(PLACES, mentions, replace=False)]
    others = iter(str(p) for p in rng.permutation([p for p in PEOPLE if p != key]))
    records = []
    for s in range(1, n_s + 1):
        slots = [None] * f
        if s in key_sessions:
            slots[int(rng.integers(f))] = f"{key} in {places[key_sessions.index(s)]}"
        for t in range(f):
            content = slots[t] or f"{next(others)} in {rng.choice(PLACES)}"
            records.append(MemoryRecord(id=f"D{s}:{t + 1}", content=content, conversation=f"tiny-{index}",
                                        session=s, dia_ids=(f"D{s}:{t + 1}",)))
    tools = MemoryTools(Retriever(records), TOOLS_CFG)
    if filtered:
        k = int(rng.integers(mentions))
        session, gold = key_sessions[k], places[k]
        question = f"where is {key} in session {session} ?"
    else:
        session, gold = key_sessions[0], places[0]
        question = f"where is {key} ?"
    evidence = tuple(r.id for r in records if r.session == session and r.content == f"{key} in {gold}")
    return SumerSample(question=question, gold=gold, tools=tools, qid=f"{seed}-{index}",
                       category=2 if filtered else 1, evidence=evidence)


def make_split(task: TinySumerTask, seed: int, count: int, start: int = 0) -> list[SumerSample]:
    return [make_sample(task, seed, start + i) for i in range(count)]


def teacher_turns(sample: SumerSample, *, use_filter: bool = True) -> list[str]:
    """The assistant turns of a correct episode: a keyword search (with the session filter when the question
    names a session and `use_filter`), then the submission."""
    words = sample.question.split()
    key = words[2]
    search = f"<call> search {key}" + (f" session {words[5]}" if "session" in words and use_filter else "")
    return [search + " <end>", f"<call> submit {sample.gold} <end>"]
