"""SUMER's two tools over one conversation's memory: `search_memory` and `submit_answer`.

Owns: the tool JSON schemas (`SEARCH_MEMORY`, `SUBMIT_ANSWER`, `SUMER_TOOLS`; memjax's choice, the paper gives
neither names nor schemas), `ToolsConfig`, `MemoryTools.execute` (a checked call -> `ToolResult`) and
`render_windows` (the text the Qwen agent reads).
search_memory(query, mode="semantic"|"keyword", speaker=None, session=None):
- semantic: the `semantic_k` records with the highest cosine to the query (Retriever.semantic);
- keyword: every record whose content or metadata contains ALL whitespace-separated keywords (case-insensitive,
  Retriever.keyword); at most `keyword_max_hits` shown, in conversation order, with how many more matched;
- speaker (case-insensitive) and session filters apply before ranking; an unknown one is an error result naming
  the valid ones; each hit comes with `context_turns` messages each side, windows merged and, by default, not
  crossing sessions (`cross_sessions`). Why these bounds: docs/sumer.md, 'Paper-silent choices'.
submit_answer(answer): ends the episode with `answer`. Invariants: `execute` never raises for any ToolCall /
CallError (errors become error results); results depend only on (records, embedder, call).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...memory.bank import MemoryRecord
from ...memory.retrieval import Retriever
from ...agents.toolcall import CallError, ToolCall

SEARCH_MEMORY = {"type": "function", "function": {
    "name": "search_memory",
    "description": ("Search the memory of the conversation (one memory per message). Each hit is returned with "
                    "the 2 messages before and after it, under its session number and date."),
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "semantic: a natural-language query; keyword: words that "
                                                    "must ALL appear in the message or its metadata"},
        "mode": {"type": "string", "enum": ["semantic", "keyword"], "description": "search mode (default semantic)"},
        "speaker": {"type": "string", "description": "only messages said by this speaker"},
        "session": {"type": "integer", "description": "only messages of this session number"},
    }, "required": ["query"]}}}
SUBMIT_ANSWER = {"type": "function", "function": {
    "name": "submit_answer",
    "description": "Submit the final answer to the question (a short phrase). Ends the episode.",
    "parameters": {"type": "object", "properties": {
        "answer": {"type": "string", "description": "the answer"}}, "required": ["answer"]}}}
SUMER_TOOLS = (SEARCH_MEMORY, SUBMIT_ANSWER)


@dataclass(frozen=True)
class ToolsConfig:
    semantic_k: int = 5  # paper: "the k most similar", k not given
    keyword_max_hits: int = 10  # shown per keyword search (the paper returns all)
    context_turns: int = 2  # messages before / after each hit (paper: 2)
    cross_sessions: bool = False  # windows stop at session boundaries (see the module docstring)
    default_mode: str = "semantic"

    def __post_init__(self):
        if self.semantic_k < 1 or self.keyword_max_hits < 1 or self.context_turns < 0:
            raise ValueError(f"ToolsConfig: semantic_k and keyword_max_hits must be >= 1, context_turns >= 0 ({self})")
        if self.default_mode not in ("semantic", "keyword"):
            raise ValueError(f"ToolsConfig.default_mode must be semantic or keyword, got {self.default_mode!r}")


@dataclass(frozen=True)
class ToolResult:
    kind: str  # "hits" | "error" | "submit"
    windows: tuple[tuple[MemoryRecord, ...], ...] = ()
    matched: int = 0  # hits found (keyword: before the cap)
    shown: int = 0  # hits shown
    error: str = ""
    answer: str | None = None


class MemoryTools:
    """The tools over one conversation's records (a Retriever built once per conversation)."""

    def __init__(self, retriever: Retriever, cfg: ToolsConfig = ToolsConfig()):
        self.retriever, self.cfg = retriever, cfg
        recs = retriever.records
        self.speakers = sorted({r.speaker for r in recs if r.speaker})
        self.sessions = sorted({r.session for r in recs if r.session is not None})

    def execute(self, call: ToolCall | CallError) -> ToolResult:
        if isinstance(call, CallError):
            return ToolResult("error", error=call.message)
        try:
            if call.name == "submit_answer":
                return ToolResult("submit", answer=str(call.arguments.get("answer", "")))
            if call.name == "search_memory":
                return self.search(**call.arguments)
            return ToolResult("error", error=f"Error: unknown tool {call.name!r}")
        except TypeError as e:  # arguments not checked against the schema by the caller
            return ToolResult("error", error=f"Error: bad arguments for {call.name}: {e}")

    def search(self, query: str, mode: str | None = None, speaker: str | None = None,
               session: int | None = None) -> ToolResult:
        cfg, r = self.cfg, self.retriever
        mode = mode or cfg.default_mode
        if not isinstance(query, str) or not query.strip():
            return ToolResult("error", error="Error: query is empty")
        if speaker is not None and speaker.strip().lower() not in {s.lower() for s in self.speakers}:
            return ToolResult("error", error=f"Error: unknown speaker {speaker!r} (speakers: {', '.join(self.speakers)})")
        if session is not None and session not in self.sessions:
            lo, hi = (self.sessions[0], self.sessions[-1]) if self.sessions else (0, 0)
            return ToolResult("error", error=f"Error: no session {session} (sessions {lo} to {hi})")
        spk = speaker.strip() if speaker is not None else None
        if mode == "semantic":
            if r.embedder is None:
                return ToolResult("error", error="Error: semantic search is not available; use mode keyword")
            hits = r.semantic(query, cfg.semantic_k, speaker=spk, session=session)
            matched = len(hits)
        elif mode == "keyword":
            hits = r.keyword(query.replace(",", " ").split(), speaker=spk, session=session)
            matched = len(hits)
            hits = hits[: cfg.keyword_max_hits]
        else:
            return ToolResult("error", error=f"Error: mode must be semantic or keyword, got {mode!r}")
        windows = r.with_context(hits, cfg.context_turns, same_session=not cfg.cross_sessions)
        return ToolResult("hits", tuple(tuple(w) for w in windows), matched, len(hits))


def render_windows(result: ToolResult) -> str:
    """The Qwen agent's view of a result: one block per window, `[dia_id] speaker: text` lines under a
    `session N (date)` header; errors verbatim."""
    if result.kind == "error":
        return result.error
    if result.kind == "submit":
        return "Answer submitted."
    if not result.windows:
        return "No matching memories."
    lines = [f"Found {result.matched} matching memories."]
    if result.matched > result.shown:
        lines[0] += f" The first {result.shown} are shown; narrow the search with more keywords or filters."
    for w in result.windows:
        s = {m.session for m in w}
        head = w[0]
        when = f" ({head.session_time})" if head.session_time and len(s) == 1 else ""
        lines.append(f"--- session {head.session}{when} ---" if len(s) == 1 else "---")
        lines += [f"[{m.id}] {m.speaker}: {m.content}" for m in w]
    return "\n".join(lines)

