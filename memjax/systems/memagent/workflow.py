"""The MemAgent workflow: read a document chunk by chunk, overwrite a token memory, answer from it.

Owns: the reference prompt templates (verbatim), prompt assembly at token-id level, and the trajectory state
machine, as a `Workflow` that `run_workflow` drives; its RolloutBatch rows have role 0 = memory update, 1 = answer.
Invariants:
- The document is tokenised once (`encode_document`: long texts in pieces, ids equal to encoding it whole) and cut
  into chunks of `chunk_tokens` ids; the question once (first `max_query_tokens` ids); the memory is the previous
  turn's generated ids minus the stop token (vocabulary-padding ids dropped and counted), spliced in as ids, never
  re-tokenised. Only template text is encoded. The document's ids are one int32 array, released at the end.
- A trajectory has ceil(doc_tokens / chunk_tokens) memory-update conversations then one final conversation; turn
  t+1 is submitted when turn t finishes. The G rollouts of a sample share first-turn prompts (prefix-shared); every
  prompt fits the engine window with its generation budget (checked up front).
- The reward is MemAgent's official training reward by default (`reward="official"`); `reward="lenient"` names
  memjax's reader; a `reward_fn` overrides both.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...agents.workflow import (
    Request,
    Trajectory,
    Workflow,
    WorkflowResult,
    run_workflow,
)
from ...core.tokenizer import TokenIds
from ...engine import Completion, Engine, SamplingParams
from ...rewards import last_boxed, memagent_reward
from ...rewards.memagent_official import memagent_reward_official

MEMORY_TEMPLATE = (
    "You are presented with a problem, a section of an article that may contain the answer to the problem, "
    "and a previous memory. Please read the provided section carefully and update the memory with the new "
    "information that helps to answer the problem. Be sure to retain all relevant details from the previous "
    "memory while adding any new, useful information.\n\n<problem> \n{prompt}\n</problem>\n\n<memory>\n{memory}"
    "\n</memory>\n\n<section>\n{chunk}\n</section>\n\nUpdated memory:\n")
FINAL_TEMPLATE = (
    "You are presented with a problem and a previous memory. Please answer the problem based on the previous "
    "memory and put the answer in \\boxed{{}}.\n\n<problem> \n{prompt}\n</problem>\n\n<memory>\n{memory}\n"
    "</memory>\n\nYour answer:\n")
NO_MEMORY = "No previous memory"
ROLE_MEMORY, ROLE_FINAL = 0, 1
REWARDS: dict[str, Callable[[str, Sequence[str]], float]] = {
    "official": memagent_reward_official,  # MemAgent @76b7a65 verl/utils/reward_score/hotpotqa.py compute_score
    "lenient": memagent_reward,            # memjax's reader: last box of any form, max EM over golds
}


@dataclass(frozen=True)
class MemAgentConfig:
    chunk_tokens: int = 5000
    max_query_tokens: int = 1024
    max_memory_tokens: int = 1024
    max_final_tokens: int = 1024
    group_size: int = 1  # rollouts per sample (GRPO group)
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    record_conversations: bool = True  # False: keep only traces (long evaluations)
    max_active: int = 0  # trajectories in flight at once; 0 = all
    # Prompt templates (default: the reference's verbatim English); placeholders {prompt} {memory} {chunk}.
    # Small-vocabulary tasks (memjax.tiny) substitute compact templates their tokenizer can encode.
    memory_template: str = MEMORY_TEMPLATE
    final_template: str = FINAL_TEMPLATE
    no_memory: str = NO_MEMORY  # memory text of the first turn
    reward: str = "official"  # the training reward: official (MemAgent's compute_score) | lenient (memjax's reader)

    def __post_init__(self):
        for f in ("chunk_tokens", "max_query_tokens", "max_memory_tokens", "max_final_tokens", "group_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemAgentConfig.{f} must be > 0, got {getattr(self, f)}")
        if self.max_active < 0:
            raise ValueError(f"MemAgentConfig.max_active must be >= 0, got {self.max_active}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"MemAgentConfig.temperature must be finite and >= 0, got {self.temperature}")
        if self.reward not in REWARDS:
            raise ValueError(f"MemAgentConfig.reward must be one of {sorted(REWARDS)}, got {self.reward!r}")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"MemAgentConfig.top_p must be in (0, 1], got {self.top_p}")
        for f, need in (("memory_template", ("{prompt}", "{memory}", "{chunk}")),
                        ("final_template", ("{prompt}", "{memory}"))):
            missing = [k for k in need if k not in getattr(self, f)]
            if missing:
                raise ValueError(f"MemAgentConfig.{f} lacks the placeholder(s) {missing}")


@functools.lru_cache(maxsize=16)
def _split(template: str) -> list[str | int]:
    """Template -> literal text pieces and slot markers 0 (prompt), 1 (memory), 2 (chunk)."""
    out: list[str | int] = []
    rest = template.replace("{{}}", "\x00")
    names = {"{prompt}": 0, "{memory}": 1, "{chunk}": 2}
    while rest:
        hits = [(rest.find(k), k) for k in names if k in rest]
        if not hits:
            out.append(rest.replace("\x00", "{}"))
            break
        pos, key = min(hits)
        if pos:
            out.append(rest[:pos].replace("\x00", "{}"))
        out.append(names[key])
        rest = rest[pos + len(key):]
    return out


def build_prompt(tokenizer, query_ids: Sequence[int], memory_ids: Sequence[int] | None,
                 chunk_ids: Sequence[int] | None, *, memory_template: str = MEMORY_TEMPLATE,
                 final_template: str = FINAL_TEMPLATE, no_memory: str = NO_MEMORY) -> list[int]:
    """Chat-template ids of a memory-update turn (chunk given) or the final turn (chunk None)."""
    memory = TokenIds(memory_ids) if memory_ids is not None else no_memory
    slots = {0: TokenIds(query_ids), 1: memory, 2: TokenIds(chunk_ids or [])}
    template = final_template if chunk_ids is None else memory_template
    parts = [slots[p] if isinstance(p, int) else p for p in _split(template)]
    return tokenizer.apply_chat_template([{"role": "user", "content": parts}], add_generation_prompt=True)


@dataclass
class MemAgentState:
    """A trajectory's MemAgent state (`Trajectory.state`)."""

    query_ids: list[int]
    doc_ids: np.ndarray  # int32 [doc_tokens]
    answers: tuple[str, ...]
    n_chunks: int
    turn: int = 0
    memory_ids: list[int] | None = None
    memories: list[str] = field(default_factory=list)
    final_text: str = ""
    unknown_tokens: int = 0  # generated ids outside the tokenizer's vocabulary (decoded as nothing)
    doc_tokens: int = 0


MemAgentResult = WorkflowResult
PIECE_CHARS = 1 << 20  # documents longer than this (~230K Qwen tokens of English) are tokenised in pieces
_CUT = re.compile(r"\n(?=[A-Za-z])")


def encode_document(tok, text: str, piece_chars: int = PIECE_CHARS) -> np.ndarray:
    """int32 ids of `text`, equal to `tok.encode(text)`. A text over `piece_chars` characters is encoded in pieces of
    at least that many, each cut after a newline followed by an ASCII letter (between two documents: "\n\nDocument"):
    no pre-token of the Qwen2 / GPT-4 byte-level split pattern holds both a newline and a following letter, and a
    letter after a newline starts a pre-token whatever precedes it, so the pieces' ids concatenate to the whole
    text's. A text with no such point after `piece_chars` is encoded whole from the last cut."""
    if len(text) <= piece_chars:
        return np.asarray(tok.encode(text), np.int32)
    parts, start = [], 0
    while start < len(text):
        m = _CUT.search(text, start + piece_chars)
        end = m.end() if m else len(text)
        parts.append(np.asarray(tok.encode(text[start:end]), np.int32))
        start = end
    return np.concatenate(parts)


_NO_DOC = np.zeros(0, np.int32)


def _field(sample: Any, *names: str):
    for n in names:
        if isinstance(sample, dict) and n in sample:
            return sample[n]
        if hasattr(sample, n):
            return getattr(sample, n)
    raise ValueError(f"MemAgent sample has none of the fields {names}: {type(sample).__name__}")


class MemAgent(Workflow):
    """The MemAgent workflow on an Engine. `reward_fn(final_text, answers) -> float` (default: the config's
    `reward`, the official one unless named otherwise); `run(samples)` drives it with `run_workflow` (group size,
    seed, max_active and recording from the config)."""

    def __init__(self, engine: Engine, tokenizer, config: MemAgentConfig | None = None,
                 reward_fn: Callable[[str, Sequence[str]], float] | None = None,
                 stop_token_ids: Sequence[int] | None = None):
        self.engine, self.tok, self.cfg = engine, tokenizer, config or MemAgentConfig()
        self.reward_fn = reward_fn if reward_fn is not None else REWARDS[self.cfg.reward]
        self.pad_id = getattr(tokenizer, "pad_id", 0)
        self.stop_ids = tuple(stop_token_ids) if stop_token_ids is not None else tuple(
            sorted({tokenizer.eos_id, tokenizer.endoftext_id}))
        c, window = self.cfg, engine.config.window
        longest = len(self._build([0] * c.max_query_tokens, [0] * c.max_memory_tokens, [0] * c.chunk_tokens))
        if longest + c.max_memory_tokens > window:
            raise ValueError(f"MemAgentConfig: a memory-update prompt can reach {longest} tokens; with "
                             f"max_memory_tokens={c.max_memory_tokens} it needs {longest + c.max_memory_tokens} > "
                             f"engine window {window} (lower chunk_tokens or raise EngineConfig.window)")
        final = len(self._build([0] * c.max_query_tokens, [0] * c.max_memory_tokens, None))
        if final + c.max_final_tokens > window:
            raise ValueError(f"MemAgentConfig: the final prompt can reach {final} tokens; with max_final_tokens="
                             f"{c.max_final_tokens} it needs {final + c.max_final_tokens} > engine window {window}")

    def _build(self, query_ids, memory_ids, chunk_ids) -> list[int]:
        c = self.cfg
        return build_prompt(self.tok, query_ids, memory_ids, chunk_ids, memory_template=c.memory_template,
                            final_template=c.final_template, no_memory=c.no_memory)

    def _request(self, st: MemAgentState) -> Request:
        c, k = self.cfg, self.cfg.chunk_tokens
        final = st.turn >= st.n_chunks
        chunk = None if final else st.doc_ids[st.turn * k: (st.turn + 1) * k].tolist()
        params = SamplingParams(temperature=c.temperature, top_p=c.top_p, stop_token_ids=self.stop_ids,
                                max_tokens=c.max_final_tokens if final else c.max_memory_tokens)
        return Request(self._build(st.query_ids, st.memory_ids, chunk), params,
                       role=ROLE_FINAL if final else ROLE_MEMORY, is_final=final)

    def _strip(self, ids: list[int]) -> list[int]:
        return ids[:-1] if ids and ids[-1] in self.stop_ids else ids

    # -- Workflow -------------------------------------------------------------------------------------
    def prepare(self, sample: Any) -> tuple[list[int], np.ndarray, tuple[str, ...]]:
        c, tok = self.cfg, self.tok
        pre = sample.get("context_ids") if isinstance(sample, dict) else None
        doc = (np.asarray(pre, np.int32) if pre is not None
               else encode_document(tok, str(_field(sample, "context", "document"))))
        query = tok.encode(str(_field(sample, "query", "question", "prompt")))[: c.max_query_tokens]
        answers = _field(sample, "answers", "answer")
        answers = (answers,) if isinstance(answers, str) else tuple(str(a) for a in answers)
        return query, doc, answers

    def start(self, traj: Trajectory, prepared) -> list[Request]:
        query, doc, answers = prepared
        traj.state = MemAgentState(query, doc, answers, math.ceil(len(doc) / self.cfg.chunk_tokens), doc_tokens=len(doc))
        return [self._request(traj.state)]

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st, tok = traj.state, self.tok
        st.unknown_tokens += tok.count_unknown(completion.token_ids)
        if request.is_final:
            st.final_text = tok.decode(self._strip(completion.token_ids), skip_unknown=True)
            st.doc_ids = _NO_DOC  # release the document of a finished trajectory
            return []
        # ids in the model's padding rows carry no text; drop them (counted above), as re-tokenising
        # the memory text in the reference implementation would
        st.memory_ids = [i for i in self._strip(completion.token_ids) if 0 <= i < tok.vocab_size]
        st.memories.append(tok.decode(st.memory_ids, skip_unknown=True))
        st.turn += 1
        return [self._request(st)]

    def reward(self, traj: Trajectory) -> float:
        return float(self.reward_fn(traj.state.final_text, traj.state.answers))

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        return {"sample": traj.sample, "rollout": traj.rollout, "answers": list(st.answers), "memories": st.memories,
                "final": st.final_text, "reward": traj.reward, "chunks": st.n_chunks,
                "doc_tokens": st.doc_tokens}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        return {"unknown_tokens": sum(t.state.unknown_tokens for t in trajs),
                "missing_answer": sum(int(last_boxed(t.state.final_text) is None) for t in trajs)}

    def run(self, samples: Iterable[Any]) -> WorkflowResult:
        c = self.cfg
        return run_workflow(self.engine, self, samples, group_size=c.group_size, seed=c.seed,
                            max_active=c.max_active, record=c.record_conversations)
