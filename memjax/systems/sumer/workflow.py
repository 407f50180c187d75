"""SUMER as a workflow: one multi-turn tool-calling conversation per question, tool results appended with the
engine's continuation, only the policy's tokens trained, reward J x F1 on submission and -1 otherwise.

Owns: `SumerConfig` (episode limits and sampling), `SumerSample`, `SumerWorkflow` (the per-trajectory state
machine), `QwenSumerFormat` (Qwen2.5 function calling + the search-result text) and `DEFAULT_SYSTEM` (memjax's
prompt: the paper prints none).
Episode (the SUMER paper, section 3.2): system turn with the tool schemas, user turn with the question; per
assistant turn the first `max_calls_per_turn` calls are executed, the first `submit_answer` ends the episode, else
the results are appended as one tool turn through `Request(parent=completion)` (never prefilled again). It also
ends without a tool call, after `max_turns`, or when the next turn would not fit (docs/sumer.md, 'Paper-silent
choices'). Reward: J x F1 (token-set F1; the judge, cached, asked only when F1 > 0) if an answer was submitted, else
`no_answer_reward` (-1); the judge must not step the policy's own engine. Search metrics: docs/sumer.md, 'Measures'.
Training rows: one per trajectory, response = turns and tool turns with response_mask 0 (log-probs 0) on tool ids.
Invariants: a row is exactly the token sequence the engine attended to; nothing here raises on model output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...engine import Completion, SamplingParams
from ...rewards.locomo import token_set_f1
from ...rl.batch import Conversation
from .tools import SUMER_TOOLS, MemoryTools, ToolResult, ToolsConfig, render_windows
from ...agents.toolcall import QwenToolFormat
from ...agents.workflow import Request, Trajectory, Workflow

END_REASONS = ("submitted", "no_tool_call", "max_turns", "context_overflow")

DEFAULT_SYSTEM = (
    "You answer a question about a long conversation between two people. The conversation is not shown to "
    "you: it is stored as a memory of individual messages, each with its speaker, session number and session "
    "date, which you can search with search_memory (mode \"semantic\" for a description in natural language, "
    "mode \"keyword\" for exact words; filter by speaker or session to narrow the search). Each hit comes with "
    "the messages around it. Search as often as you need (up to 5 calls per turn), reason about what you "
    "found, then call submit_answer with a short answer of a few words.")


@dataclass(frozen=True)
class SumerConfig:
    max_turns: int = 20  # assistant turns per episode (paper)
    max_calls_per_turn: int = 5  # (paper)
    max_prompt_tokens: int = 8192  # (paper)
    max_response_tokens: int = 24576  # policy + tool tokens after the prompt (paper)
    max_turn_tokens: int = 1024  # generated tokens per assistant turn (paper: n/g)
    temperature: float = 1.0
    top_p: float = 1.0
    no_answer_reward: float = -1.0
    tools: ToolsConfig = field(default_factory=ToolsConfig)

    def __post_init__(self):
        for f in ("max_turns", "max_calls_per_turn", "max_prompt_tokens", "max_response_tokens", "max_turn_tokens"):
            if getattr(self, f) < 1:
                raise ValueError(f"SumerConfig.{f} must be >= 1, got {getattr(self, f)}")
        if not self.temperature >= 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"SumerConfig: temperature must be >= 0 and top_p in (0, 1] ({self})")


@dataclass(frozen=True)
class SumerSample:
    question: str
    gold: str
    tools: MemoryTools
    user: str = ""  # the user turn; "" = the question alone
    qid: str = ""
    category: int = 0
    evidence: tuple[str, ...] = ()  # ids of the records that answer the question ("" = unknown: no hit metrics)


class QwenSumerFormat(QwenToolFormat):
    """Qwen2.5 function calling with SUMER's tools, system prompt and search-result text."""

    def __init__(self, tokenizer, system: str = DEFAULT_SYSTEM, tools=SUMER_TOOLS):
        super().__init__(tokenizer, tools, system)

    @staticmethod
    def render(result: ToolResult) -> str:
        return render_windows(result)


@dataclass
class _Episode:
    sample: SumerSample
    prompt: list[int]
    segments: list[tuple[list[int], list[float], bool]] = field(default_factory=list)  # (ids, logprobs, policy)
    turns: int = 0
    calls: int = 0
    call_errors: int = 0
    excess_calls: int = 0
    searches: int = 0
    search_hits: int = 0  # executed searches whose shown records include an evidence record
    filtered_searches: int = 0  # executed searches with a speaker or session filter
    shown_records: int = 0  # records shown by the executed searches (hits and their context)
    answer: str | None = None
    end: str = ""
    f1: float = 0.0
    judged: bool | None = None
    turn_texts: list[str] = field(default_factory=list)
    tool_texts: list[str] = field(default_factory=list)  # the tool turn after each model turn (trace_text)

    @property
    def length(self) -> int:
        return len(self.prompt) + sum(len(s[0]) for s in self.segments)


def _has_evidence(result: ToolResult, evidence: Sequence[str]) -> bool:
    """Whether any record the search showed (hits and their context windows) is an evidence record, by its
    id or one of its dia_ids."""
    ev = set(evidence)
    return bool(ev) and any(m.id in ev or ev.intersection(m.dia_ids) for w in result.windows for m in w)


class SumerWorkflow(Workflow):
    """`fmt`: the chat format (QwenSumerFormat, or the tiny task's); `judge`: `.judge(items) -> [Verdict]`;
    `window`: the engine's window (context overflow); samples are `SumerSample`s."""

    def __init__(self, fmt, judge, cfg: SumerConfig = SumerConfig(), *, window: int, trace_text: bool = True):
        self.fmt, self.judge, self.cfg, self.window = fmt, judge, cfg, int(window)
        self.pad_id = fmt.pad_id
        self.trace_text = trace_text
        self._cache: dict[tuple[str, str, str], bool] = {}

    def _params(self, max_tokens: int) -> SamplingParams:
        c = self.cfg
        return SamplingParams(temperature=c.temperature, top_p=c.top_p, max_tokens=max_tokens,
                              stop_token_ids=tuple(self.fmt.stop_ids))

    def prepare(self, sample: SumerSample):
        prompt = self.fmt.prompt(sample.user or sample.question)
        if len(prompt) > self.cfg.max_prompt_tokens or len(prompt) >= self.window - 1:
            raise ValueError(f"SUMER prompt of question {sample.qid or sample.question[:40]!r} has {len(prompt)} "
                             f"tokens > max_prompt_tokens={self.cfg.max_prompt_tokens} or the window {self.window}")
        return sample, prompt

    def _budget(self, ep: _Episode, extra: int) -> int:
        """Tokens the next turn may generate after `extra` appended ids (<= 0: it does not fit)."""
        used = ep.length + extra
        return min(self.cfg.max_turn_tokens, self.window - 1 - used,
                   self.cfg.max_response_tokens - (used - len(ep.prompt)))

    def start(self, traj: Trajectory, prepared) -> list[Request]:
        sample, prompt = prepared
        traj.state = ep = _Episode(sample, list(prompt))
        return [Request(list(prompt), self._params(max(1, self._budget(ep, 0))), retain=True)]

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        ep: _Episode = traj.state
        ids = list(completion.token_ids)
        ep.segments.append((ids, list(completion.logprobs), True))
        ep.turns += 1
        if self.trace_text:
            ep.turn_texts.append(self.fmt.text(ids))
        if completion.finish_reason == "window":
            ep.end = "context_overflow"
            return []
        calls, tagged = self.fmt.parse(ids)
        if not tagged:
            ep.end = "no_tool_call"
            return []
        results: list[str] = []
        for i, call in enumerate(calls):
            ep.calls += 1
            if i >= self.cfg.max_calls_per_turn:
                ep.excess_calls += 1
                results.append(self.fmt.render(ToolResult("error", error=(
                    f"Error: at most {self.cfg.max_calls_per_turn} tool calls per turn; this call was not executed."))))
                continue
            res = ep.sample.tools.execute(call)
            if res.kind == "submit":
                ep.answer, ep.end = res.answer, "submitted"
                return []
            ep.call_errors += res.kind == "error"
            ep.searches += res.kind == "hits"
            if res.kind == "hits":
                ep.search_hits += _has_evidence(res, ep.sample.evidence)
                ep.filtered_searches += any(call.arguments.get(k) is not None for k in ("speaker", "session"))
                ep.shown_records += sum(len(w) for w in res.windows)
            results.append(self.fmt.render(res))
        if ep.turns >= self.cfg.max_turns:
            ep.end = "max_turns"
            return []
        tool = self.fmt.tool_turn(results, self.fmt.closed(ids))
        room = self._budget(ep, len(tool))
        if room < 1:
            ep.end = "context_overflow"
            return []
        ep.segments.append((tool, [0.0] * len(tool), False))
        if self.trace_text:
            ep.tool_texts.append(self.fmt.text(tool))
        return [Request(tool, self._params(room), parent=completion, retain=True)]

    def reward(self, traj: Trajectory) -> float:
        ep: _Episode = traj.state
        if ep.answer is None:
            return float(self.cfg.no_answer_reward)
        s = ep.sample
        ep.f1 = token_set_f1(ep.answer, s.gold)
        if ep.f1 <= 0.0:
            ep.judged = None
            return 0.0
        key = (s.question, s.gold, ep.answer)
        if key not in self._cache:
            self._cache[key] = bool(self.judge.judge([key])[0].correct)
        ep.judged = self._cache[key]
        return float(ep.judged) * ep.f1

    def conversations(self, traj: Trajectory) -> list[Conversation]:
        ep: _Episode = traj.state
        ids = [t for seg in ep.segments for t in seg[0]]
        lps = [lp for seg in ep.segments for lp in seg[1]]
        mask = [int(seg[2]) for seg in ep.segments for _ in seg[0]]
        return [Conversation(ep.prompt, ids, lps, sample=traj.index, group=traj.sample, turn=0, is_final=True,
                             response_mask=mask)]

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        ep: _Episode = traj.state
        out = {"sample": traj.sample, "rollout": traj.rollout, "qid": ep.sample.qid, "category": ep.sample.category,
               "question": ep.sample.question, "gold": ep.sample.gold, "answer": ep.answer, "end": ep.end,
               "reward": traj.reward, "f1": ep.f1, "judge": ep.judged, "turns": ep.turns, "calls": ep.calls,
               "call_errors": ep.call_errors, "excess_calls": ep.excess_calls, "searches": ep.searches,
               "search_hits": ep.search_hits, "tokens": ep.length}
        if self.trace_text:
            out["turn_texts"], out["tool_texts"] = ep.turn_texts, ep.tool_texts
        return out

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        eps: list[_Episode] = [t.state for t in trajs]
        n = max(len(eps), 1)
        ends = Counter(e.end for e in eps)
        out = {f"end_{r}": ends[r] / n for r in END_REASONS}
        out.update(mean_turns=sum(e.turns for e in eps) / n, mean_calls=sum(e.calls for e in eps) / n,
                   mean_searches=sum(e.searches for e in eps) / n,
                   mean_call_errors=sum(e.call_errors for e in eps) / n,
                   mean_excess_calls=sum(e.excess_calls for e in eps) / n,
                   filtered_search_frac=sum(e.filtered_searches for e in eps) / max(sum(e.searches for e in eps), 1),
                   records_per_search=sum(e.shown_records for e in eps) / max(sum(e.searches for e in eps), 1),
                   mean_f1_submitted=sum(e.f1 for e in eps if e.answer is not None) / max(ends["submitted"], 1),
                   tool_tokens=float(sum(len(s[0]) for e in eps for s in e.segments if not s[2])),
                   policy_tokens=float(sum(len(s[0]) for e in eps for s in e.segments if s[2])))
        known = [e for e in eps if e.sample.evidence]  # hit metrics only over questions with known evidence
        if known:
            out.update(search_hit_rate=sum(e.search_hits for e in known) / max(sum(e.searches for e in known), 1),
                       evidence_found=sum(e.search_hits > 0 for e in known) / len(known),
                       mean_evidence_searches=sum(e.search_hits for e in known) / len(known))
        return out

