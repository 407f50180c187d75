"""The MemAgent workflow: read a document chunk by chunk, overwrite a token memory, answer from it.

Owns: the reference prompt templates (verbatim), prompt assembly at token-id level, and the
trajectory state machine that drives the engine with every (sample x rollout) trajectory in flight.
Invariants:
- The document is tokenised once and cut into chunks of `chunk_tokens` ids; the question is tokenised
  once (first `max_query_tokens` ids kept); the memory is the previous turn's generated ids with the
  trailing stop token removed (and ids in the model's vocabulary padding, which carry no text, dropped and
  counted), spliced in as ids (never re-tokenised). Only template text is encoded.
- A trajectory has ceil(doc_tokens / chunk_tokens) memory-update conversations then one final
  conversation; turn t+1 is submitted the moment turn t finishes, so trajectories advance independently.
- Sampling seeds depend only on (config seed, trajectory, turn): results do not depend on scheduling.
- The G rollouts of a sample share identical first-turn prompts, which the engine prefix-shares.
- Every prompt fits the engine window with room for its generation budget (checked up front).
Output: a RolloutBatch (one row per conversation; role 0 = memory update, 1 = final answer), per-sample
rewards, and a readable trace (memory text after every chunk, final answer) per trajectory.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine, SamplingParams
from ..rewards import memagent_reward
from ..rl.batch import Conversation, RolloutBatch, build_batch
from ..tokenizer import TokenIds

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

    def __post_init__(self):
        for f in ("chunk_tokens", "max_query_tokens", "max_memory_tokens", "max_final_tokens", "group_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemAgentConfig.{f} must be > 0, got {getattr(self, f)}")
        if self.max_active < 0:
            raise ValueError(f"MemAgentConfig.max_active must be >= 0, got {self.max_active}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"MemAgentConfig.temperature must be finite and >= 0, got {self.temperature}")
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
class Trajectory:
    index: int
    sample: int
    rollout: int
    query_ids: list[int]
    doc_ids: list[int]
    answers: tuple[str, ...]
    n_chunks: int
    turn: int = 0
    memory_ids: list[int] | None = None
    memories: list[str] = field(default_factory=list)
    conversations: list[Conversation] = field(default_factory=list)
    final_text: str = ""
    reward: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    unknown_tokens: int = 0  # generated ids outside the tokenizer's vocabulary (decoded as nothing)


@dataclass
class MemAgentResult:
    batch: RolloutBatch | None
    rewards: list[float]  # per trajectory (sample-major: trajectory = sample * G + rollout)
    traces: list[dict[str, Any]]
    stats: dict[str, float]


def _field(sample: Any, *names: str):
    for n in names:
        if isinstance(sample, dict) and n in sample:
            return sample[n]
        if hasattr(sample, n):
            return getattr(sample, n)
    raise ValueError(f"MemAgent sample has none of the fields {names}: {type(sample).__name__}")


class MemAgent:
    """Runs MemAgent rollouts on an Engine. `reward_fn(final_text, answers) -> float`."""

    def __init__(self, engine: Engine, tokenizer, config: MemAgentConfig | None = None,
                 reward_fn: Callable[[str, Sequence[str]], float] = memagent_reward,
                 stop_token_ids: Sequence[int] | None = None):
        self.engine, self.tok, self.cfg, self.reward_fn = engine, tokenizer, config or MemAgentConfig(), reward_fn
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

    def _params(self, traj: Trajectory, final: bool) -> SamplingParams:
        c = self.cfg
        seed = (c.seed * 1_000_003 + traj.index * 10_007 + traj.turn) % (2**31 - 1)
        return SamplingParams(temperature=c.temperature, top_p=c.top_p, seed=seed, stop_token_ids=self.stop_ids,
                              max_tokens=c.max_final_tokens if final else c.max_memory_tokens)

    def _next_prompt(self, traj: Trajectory) -> tuple[list[int], bool]:
        k = self.cfg.chunk_tokens
        if traj.turn < traj.n_chunks:
            chunk = traj.doc_ids[traj.turn * k: (traj.turn + 1) * k]
            return self._build(traj.query_ids, traj.memory_ids, chunk), False
        return self._build(traj.query_ids, traj.memory_ids, None), True

    @staticmethod
    def _missing(text: str) -> int:
        from ..rewards import last_boxed
        return int(last_boxed(text) is None)

    def _strip(self, ids: list[int]) -> list[int]:
        return ids[:-1] if ids and ids[-1] in self.stop_ids else ids

    def run(self, samples: Iterable[Any]) -> MemAgentResult:
        c, tok, eng = self.cfg, self.tok, self.engine
        t0, before = time.perf_counter(), dict(eng.stats)
        trajs: list[Trajectory] = []
        sample_groups: list[int] = []
        for s, sample in enumerate(samples):
            pre = sample.get("context_ids") if isinstance(sample, dict) else None
            doc = list(pre) if pre is not None else tok.encode(str(_field(sample, "context", "document")))
            query = tok.encode(str(_field(sample, "query", "question", "prompt")))[: c.max_query_tokens]
            answers = _field(sample, "answers", "answer")
            answers = (answers,) if isinstance(answers, str) else tuple(str(a) for a in answers)
            for g in range(c.group_size):
                trajs.append(Trajectory(len(trajs), s, g, query, doc, answers, math.ceil(len(doc) / c.chunk_tokens)))
                sample_groups.append(s)
        inflight: dict[int, tuple[Trajectory, list[int], bool]] = {}
        todo = iter(trajs)
        limit = c.max_active or len(trajs)
        n_active = 0

        def submit(traj: Trajectory):
            prompt, final = self._next_prompt(traj)
            inflight[eng.submit(prompt, self._params(traj, final))] = (traj, prompt, final)

        done = 0
        while done < len(trajs):
            while n_active < limit and (traj := next(todo, None)) is not None:
                submit(traj)
                n_active += 1
            for comp in eng.step():
                traj, prompt, final = inflight.pop(comp.request_id)
                traj.prompt_tokens += len(prompt)
                traj.generated_tokens += len(comp.token_ids)
                if c.record_conversations:
                    traj.conversations.append(Conversation(prompt, comp.token_ids, comp.logprobs, sample=traj.index,
                                                           group=traj.sample, turn=traj.turn, is_final=final,
                                                           role=ROLE_FINAL if final else ROLE_MEMORY))
                traj.unknown_tokens += tok.count_unknown(comp.token_ids)
                if final:
                    traj.final_text = tok.decode(self._strip(comp.token_ids), skip_unknown=True)
                    traj.reward = float(self.reward_fn(traj.final_text, traj.answers))
                    traj.doc_ids = []  # release the document of a finished trajectory
                    done, n_active = done + 1, n_active - 1
                    continue
                # ids in the model's padding rows carry no text; drop them (counted above), as re-tokenising
                # the memory text in the reference implementation would
                traj.memory_ids = [i for i in self._strip(comp.token_ids) if 0 <= i < tok.vocab_size]
                traj.memories.append(tok.decode(traj.memory_ids, skip_unknown=True))
                traj.turn += 1
                submit(traj)
        rewards = [t.reward for t in trajs]
        batch = None
        if c.record_conversations:
            convs = [cv for t in trajs for cv in t.conversations]
            batch = build_batch(convs, rewards, sample_groups, pad_id=getattr(tok, "pad_id", 0))
        elapsed = time.perf_counter() - t0
        stats = {"seconds": elapsed, "trajectories": len(trajs),
                 "conversations": sum(t.n_chunks + 1 for t in trajs),
                 "prompt_tokens": sum(t.prompt_tokens for t in trajs),
                 "generated_tokens": sum(t.generated_tokens for t in trajs),
                 "unknown_tokens": sum(t.unknown_tokens for t in trajs),
                 "missing_answer": sum(self._missing(t.final_text) for t in trajs),
                 "mean_reward": sum(rewards) / max(len(rewards), 1)}
        stats.update({f"engine_{k}": eng.stats[k] - before.get(k, 0) for k in eng.stats})
        traces = [{"sample": t.sample, "rollout": t.rollout, "answers": list(t.answers), "memories": t.memories,
                   "final": t.final_text, "reward": t.reward, "chunks": t.n_chunks} for t in trajs]
        return MemAgentResult(batch, rewards, traces, stats)
