"""The Memory-R2 episode workflow: one policy in two roles builds a memory bank over a conversation's sessions;
LoGo-GRPO's local branches re-roll single sessions from memory snapshots.

Owns `MemoryR2Config`, `R2Sample`, `chunk_turns` and the `MemoryR2` Workflow (one trajectory per (conversation,
global rollout)). A global chain runs sessions 1..T with the bank persisting; each session is cut into K chunks,
and per chunk an extractor call then a manager call (each its own chat, reset every session; row `role` 0 / 1)
whose operations `apply_r2` applies. A local branch restores an anchor's bank snapshot and re-runs one session in
`local_rollouts` fresh chains, sampled (`local_decoding="sample"`: greedy re-rollouts would give the group no
variance), banks discarded. Rewards and row metadata: `MemoryR2`'s docstring; docs/memory_r2.md, 'How a step runs'.
Invariants:
- every call is one row and one step of the step-level loss: prompt = the whole chat so far, response = the
  generated ids; chats continue on the engine (`continue_chats`, retained KV pages) with identical results;
- a call whose prompt exceeds `max_prompt_tokens` is not made: its chain ends with all rewards 0;
- question subsets and the local plan depend only on `R2Sample.seed`: every rollout is scored on the same questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...agents.workflow import Request, Trajectory, Workflow
from ...core.tokenizer import TokenIds
from ...data.locomo import Conversation, Question
from ...engine import Completion, SamplingParams
from ...memory import BankSnapshot, MemoryBank, OpStats, apply_r2
from ...rl.batch import Conversation as Row
from .messages import (
    FactStats,
    VectorCache,
    extractor_message,
    format_turns,
    manager_message,
    manager_payload,
    parse_facts,
    select_candidates,
)
from .prompts import system_prompts
from .reward import (
    AnswerAgent,
    credit_sessions,
    evidence_sessions,
    session_reward,
    word_count,
)

EXTRACTOR, MANAGER = 0, 1
SESSION_STRIDE = 1024  # > sessions per conversation (LoCoMo: at most 35)
LOCAL_DECODING = ("sample", "greedy")
LOCAL_QUESTIONS = ("last_evidence", "any_evidence")


@dataclass(frozen=True)
class MemoryR2Config:
    chunks_per_session: int = 6  # K
    max_prompt_tokens: int = 28_672
    max_response_tokens: int = 4_096
    top_k_per_fact: int = 5
    similarity_threshold: float = 0.1
    max_candidates: int = 25
    candidates_same_speaker: bool = True  # the code searches memories about the fact's speaker
    skip_empty_chunks: bool = False  # True: no calls for empty trailing chunks (paper-silent; code: calls)
    continue_chats: bool = True  # continue each chat's retained KV (Engine parent=/retain=) instead of re-prefilling
    group_size: int = 16  # n global rollouts per conversation
    local_prob: float = 0.5
    local_rollouts: int = 4  # m
    local_decoding: str = "sample"
    temperature: float = 1.0
    top_p: float = 1.0
    questions_global: int = 64  # 0 = all
    questions_local: int = 16
    lam: float = 0.3
    alpha: float = 0.7
    prompt_revision: str = "85aeeb1"  # extractor/manager system prompts (memory_r2_prompts.PROMPT_REVISIONS)
    # Q_t of a local branch at session t: "last_evidence" = questions whose last evidence session is <= t (the public
    # code's rows: data_preprocess.py keeps a QA in the row of its last evidence, the branch scores the rows so far);
    # "any_evidence" = questions with any evidence in session t (memjax's earlier reading)
    local_questions: str = "last_evidence"
    # C_t counts turn text only (False: the public code's data_preprocess.py) or also the image captions the
    # extractor sees (True: memjax's earlier count)
    dialogue_captions: bool = False
    # the answer F1 of the reward: a metric profile (memjax.evaluation.profiles): "memory_r2" = rema.py compute_f1
    # (token-set overlap over token-list lengths, the public code's reward), "memjax" = set overlap over set sizes
    reward_f1: str = "memory_r2"

    def __post_init__(self):
        system_prompts(self.prompt_revision)
        if self.local_questions not in LOCAL_QUESTIONS:
            raise ValueError(f"MemoryR2Config.local_questions must be one of {LOCAL_QUESTIONS}, got "
                             f"{self.local_questions!r}")
        for f in ("chunks_per_session", "max_prompt_tokens", "max_response_tokens", "top_k_per_fact",
                  "max_candidates", "group_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemoryR2Config.{f} must be > 0, got {getattr(self, f)}")
        for f in ("local_rollouts", "questions_global", "questions_local"):
            if getattr(self, f) < 0:
                raise ValueError(f"MemoryR2Config.{f} must be >= 0, got {getattr(self, f)}")
        if not 0.0 <= self.local_prob <= 1.0:
            raise ValueError(f"MemoryR2Config.local_prob must lie in [0, 1], got {self.local_prob}")
        if self.local_decoding not in LOCAL_DECODING:
            raise ValueError(f"MemoryR2Config.local_decoding must be one of {LOCAL_DECODING}, got "
                             f"{self.local_decoding!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0 and 0 < self.top_p <= 1):
            raise ValueError(f"MemoryR2Config: temperature must be finite >= 0 and top_p in (0, 1], got "
                             f"{self.temperature}, {self.top_p}")
        if self.lam < 0 or not 0 <= self.alpha:
            raise ValueError(f"MemoryR2Config: lam and alpha must be >= 0, got {self.lam}, {self.alpha}")


@dataclass(frozen=True)
class R2Sample:
    conversation: Conversation
    questions: tuple[Question, ...] = ()  # default: the conversation's non-adversarial questions with evidence
    max_sessions: int = 0  # 0 = all (curriculum stages truncate)
    seed: int = 0  # local plan and question subsets
    local: bool = True  # run the LoGo local branch (False: plain GRPO / evaluation)
    all_questions: bool = False  # evaluation: every question on the final bank, credited or not


def chunk_turns(turns: Sequence[Any], k: int) -> list[list[Any]]:
    """K chunks of ceil(len/K) turns (the public code's split); trailing chunks may be empty."""
    size = max(1, math.ceil(len(turns) / k))
    return [list(turns[i * size:(i + 1) * size]) for i in range(k)]


@dataclass
class Prepared:
    conv: Conversation
    sessions: list  # Session records, in order
    chunks: list[list[list[Any]]]
    dialogue_words: list[int]  # C_t, cumulative over session positions
    questions: list[Question]
    credited: dict[int, list[int]]  # session position -> question positions
    global_q: list[int]
    local_plan: dict[int, tuple[int, list[int]]]  # session position -> (anchor rollout, question positions)


@dataclass
class Chain:
    local: bool
    sessions: list[int]
    bank: MemoryBank
    pos: int = 0
    chunk: int = 0
    chats: list[list[dict]] = field(default_factory=lambda: [[], []])
    last: list = field(default_factory=lambda: [None, None])  # per role: the retained previous completion
    facts: list = field(default_factory=list)
    dead: bool = False
    snapshots: dict[int, BankSnapshot] = field(default_factory=dict)
    rewards: dict[int, float] = field(default_factory=dict)
    diffs: list[dict] = field(default_factory=list)  # per manager call: records added / removed / updated (traces)


@dataclass
class R2State:
    prep: Prepared
    chains: list[Chain]
    answers: dict[int, str] = field(default_factory=dict)  # question position -> answer on the final bank
    f1: dict[int, float] = field(default_factory=dict)
    ops: OpStats = field(default_factory=OpStats)
    facts: FactStats = field(default_factory=FactStats)


class MemoryR2(Workflow):
    """Workflow over `R2Sample`s (see the module docstring).

    Rewards: a global chain's session t gets R(M_T, Q_t, T) from its final bank; a local chain gets R(M_t, Q_t, t)
    right after its session, Q_t per `local_questions` (default: every question whose last evidence is at or before
    t, as the public code); C_t counts the turn texts of sessions 1..t (`dialogue_captions`: with captions).
    Row metadata (Conversation.extra): group = sample * SESSION_STRIDE + session position (the global GRPO group of
    (conversation, session); the advantage rule splits it by role); local_group = the same id on local rows, -1 on
    global ones; snapshot = trajectory * SESSION_STRIDE + session position (the bank state the session started
    from; a local branch shares its anchor session's id); unit = credit unit (chain, session, role) within the
    trajectory; unit_reward = that unit's reward."""

    def __init__(self, tokenizer, config: MemoryR2Config, embedder, answer_agent: AnswerAgent, *,
                 stop_token_ids: Sequence[int] | None = None):
        self.tok, self.cfg, self.agent = tokenizer, config, answer_agent
        self.cache = VectorCache(embedder)
        self.pad_id = getattr(tokenizer, "pad_id", 0)
        self.stop_ids = tuple(stop_token_ids) if stop_token_ids is not None else tuple(
            sorted({tokenizer.eos_id, tokenizer.endoftext_id}))
        self.system = [TokenIds(tokenizer.encode(p)) for p in system_prompts(config.prompt_revision)]
        from ...evaluation.profiles import (
            get_profile,  # evaluation sits above agents: imported when built
        )
        self._f1_fn = get_profile(config.reward_f1, "answer").f1

    # -- sample preparation --------------------------------------------------------------------------
    def prepare(self, sample: R2Sample) -> Prepared:
        c, conv = self.cfg, sample.conversation
        sessions = list(conv.sessions[: sample.max_sessions or None])
        if not sessions:
            raise ValueError(f"MemoryR2: conversation {conv.sample_id} has no session")
        qs = list(sample.questions) or [q for q in conv.questions if q.category != 5 and q.evidence]
        index = {s.index: p for p, s in enumerate(sessions)}
        by_number = credit_sessions(qs, [s.index for s in sessions])
        credited = {index[n]: v for n, v in by_number.items()}
        if c.dialogue_captions:
            words = np.cumsum([sum(word_count(t["text"]) for t in format_turns(s.turns)) for s in sessions])
        else:
            words = np.cumsum([sum(word_count(t.text) for t in s.turns) for s in sessions])
        if c.local_questions == "last_evidence":
            last = [max(evidence_sessions(q), default=None) for q in qs]
            local_pool = {p: [i for i, ls in enumerate(last) if ls is not None and ls <= s.index]
                          for p, s in enumerate(sessions)}
        else:
            local_pool = credited
        rng = np.random.default_rng([sample.seed, 0x52])
        pool = list(range(len(qs))) if sample.all_questions else sorted({i for v in credited.values() for i in v})
        global_q = _subset(rng, pool, c.questions_global)
        plan = {}
        if sample.local and c.local_rollouts:
            for p in range(len(sessions)):
                chosen, anchor = rng.random() < c.local_prob, int(rng.integers(c.group_size))
                if chosen:
                    plan[p] = (anchor, _subset(rng, local_pool[p], c.questions_local))
        return Prepared(conv, sessions, [chunk_turns(s.turns, c.chunks_per_session) for s in sessions],
                        [int(w) for w in words], qs, credited, global_q, plan)

    # -- requests ------------------------------------------------------------------------------------
    def _params(self, chain: Chain) -> SamplingParams:
        c = self.cfg
        greedy = chain.local and c.local_decoding == "greedy"
        return SamplingParams(temperature=0.0 if greedy else c.temperature, top_p=c.top_p,
                              max_tokens=c.max_response_tokens, stop_token_ids=self.stop_ids)

    def _call(self, traj: Trajectory, ci: int, role: int, message: str) -> list[Request]:
        chain = traj.state.chains[ci]
        chat = chain.chats[role]
        if not chat:
            chat.append({"role": "system", "content": self.system[role]})
        chat.append({"role": "user", "content": TokenIds(self.tok.encode(message))})
        prompt = self.tok.apply_chat_template(chat, add_generation_prompt=True)
        if len(prompt) > self.cfg.max_prompt_tokens:
            chain.dead = True
            return []
        tag = (ci, chain.sessions[chain.pos], role, prompt)
        retain = self.cfg.continue_chats and chain.chunk < self.cfg.chunks_per_session - 1
        parent, chain.last[role] = chain.last[role], None
        kv = getattr(parent, "kv", None)
        if kv is not None and prompt[: len(kv.tokens)] == list(kv.tokens) and len(prompt) > len(kv.tokens):
            return [Request(prompt[len(kv.tokens):], self._params(chain), role=role, tag=tag, retain=retain,
                            parent=parent)]
        return [Request(prompt, self._params(chain), role=role, tag=tag, retain=retain)]

    def _advance(self, traj: Trajectory, ci: int) -> list[Request]:
        """The next request of chain ci (and the local chains its progress spawns)."""
        st, c = traj.state, self.cfg
        chain, out = st.chains[ci], []
        while chain.pos < len(chain.sessions):
            p = chain.sessions[chain.pos]
            if chain.chunk == 0 and not chain.chats[EXTRACTOR] and not chain.local:
                chain.snapshots[p] = chain.bank.snapshot()
                out += self._spawn(traj, p, chain.snapshots[p])
            if chain.chunk >= c.chunks_per_session:
                self._end_session(traj, chain, p)
                chain.pos, chain.chunk, chain.chats, chain.last = chain.pos + 1, 0, [[], []], [None, None]
                continue
            turns = st.prep.chunks[p][chain.chunk]
            if not turns and c.skip_empty_chunks:
                chain.chunk += 1
                continue
            return out + self._call(traj, ci, EXTRACTOR, extractor_message(turns, first=not chain.chats[EXTRACTOR]))
        return out

    def _spawn(self, traj: Trajectory, p: int, snap: BankSnapshot) -> list[Request]:
        plan = traj.state.prep.local_plan.get(p)
        if plan is None or plan[0] != traj.rollout:
            return []
        out = []
        for _ in range(self.cfg.local_rollouts):
            traj.state.chains.append(Chain(local=True, sessions=[p], bank=MemoryBank.restore(snap)))
            out += self._advance(traj, len(traj.state.chains) - 1)
        return out

    def _end_session(self, traj: Trajectory, chain: Chain, p: int) -> None:
        if not chain.local:
            return
        prep = traj.state.prep
        qpos = prep.local_plan[p][1]
        f1s = self._f1(prep, self._answers(prep, chain.bank, qpos))
        chain.rewards[p] = session_reward([f1s[i] for i in qpos], chain.bank.words(), prep.dialogue_words[p],
                                          lam=self.cfg.lam, alpha=self.cfg.alpha)

    def _answers(self, prep: Prepared, bank: MemoryBank, qpos: Sequence[int]) -> dict[int, str]:
        answers = self.agent.answer(bank, (prep.conv.speaker_a, prep.conv.speaker_b),
                                    [prep.questions[i].question for i in qpos])
        return dict(zip(qpos, answers))

    def _f1(self, prep: Prepared, answers: dict[int, str]) -> dict[int, float]:
        return {i: self._f1_fn(a, prep.questions[i].answer or "", prep.questions[i].category)
                for i, a in answers.items()}

    # -- Workflow ------------------------------------------------------------------------------------
    def start(self, traj: Trajectory, prep: Prepared) -> list[Request]:
        seed = traj.index  # deterministic new ids per rollout; local chains inherit the anchor's counter
        traj.state = R2State(prep, [Chain(local=False, sessions=list(range(len(prep.sessions))),
                                          bank=MemoryBank(seed=seed))])
        reqs = self._advance(traj, 0)
        if not reqs:
            raise ValueError(f"MemoryR2: conversation {prep.conv.sample_id}: the first prompt exceeds "
                             f"max_prompt_tokens={self.cfg.max_prompt_tokens}")
        return reqs

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st, c = traj.state, self.cfg
        ci, p, role, _ = request.tag
        chain = st.chains[ci]
        chain.last[role] = completion if request.retain else None
        ids = completion.token_ids
        ids = ids[:-1] if ids and ids[-1] in self.stop_ids else ids
        chain.chats[role].append({"role": "assistant", "content": TokenIds(ids)})
        text = self.tok.decode(ids, skip_unknown=True)
        if role == EXTRACTOR:
            chain.facts, _ = parse_facts(text, st.facts)
            cands, related = select_candidates(list(chain.bank), chain.facts, self.cache, top_k=c.top_k_per_fact,
                                               threshold=c.similarity_threshold, max_total=c.max_candidates,
                                               same_speaker=c.candidates_same_speaker)
            return self._call(traj, ci, MANAGER, manager_message(manager_payload(chain.facts, related, cands),
                                                                 first=not chain.chats[MANAGER]))
        session = st.prep.sessions[p]
        before = {r.id: r.content for r in chain.bank}
        apply_r2(chain.bank, text, conversation=st.prep.conv.sample_id, session=session.index,
                 session_time=session.date_time, stats=st.ops)
        after = {r.id: r.content for r in chain.bank}
        chain.diffs.append({"session": session.index, "added": [v for k, v in after.items() if k not in before],
                            "removed": [v for k, v in before.items() if k not in after],
                            "updated": [[before[k], v] for k, v in after.items() if k in before and before[k] != v]})
        chain.chunk += 1
        return self._advance(traj, ci)

    def reward(self, traj: Trajectory) -> float:
        st, c = traj.state, self.cfg
        prep, glob = st.prep, st.chains[0]
        for ch in st.chains:
            if ch.dead:
                ch.rewards = {p: 0.0 for p in ch.sessions}
        if glob.dead:
            return 0.0
        st.answers = self._answers(prep, glob.bank, prep.global_q)
        st.f1 = f1s = self._f1(prep, st.answers)
        chosen = set(prep.global_q)
        last = len(prep.sessions) - 1
        for p in glob.sessions:
            qs = [f1s[i] for i in prep.credited.get(p, []) if i in chosen]
            glob.rewards[p] = session_reward(qs, glob.bank.words(), prep.dialogue_words[last], lam=c.lam,
                                             alpha=c.alpha)
        return float(np.mean([glob.rewards[p] for p in glob.sessions]))

    def conversations(self, traj: Trajectory) -> list[Row]:
        st, rows, units = traj.state, [], {}
        for k, (req, comp) in enumerate(traj.turns):
            ci, p, role, prompt = req.tag
            chain = st.chains[ci]
            unit = units.setdefault((ci, p, role), len(units))
            group = traj.sample * SESSION_STRIDE + p
            rows.append(Row(prompt, comp.token_ids, comp.logprobs, sample=traj.index, group=group, turn=k,
                            role=role, step=k, response_versions=comp.extra.get("versions"), extra={
                                "local_group": group if chain.local else -1, "unit": unit,
                                "snapshot": traj.index * SESSION_STRIDE + p,
                                "unit_reward": chain.rewards.get(p, 0.0)}))
        return rows

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        prep, glob = st.prep, st.chains[0]
        return {"sample": traj.sample, "rollout": traj.rollout, "conversation": prep.conv.sample_id,
                "sessions": len(prep.sessions), "reward": traj.reward, "truncated": glob.dead,
                "global_rewards": [glob.rewards.get(p, 0.0) for p in glob.sessions],
                "local": [{"session": ch.sessions[0], "reward": ch.rewards.get(ch.sessions[0], 0.0),
                           "truncated": ch.dead} for ch in st.chains[1:]],
                "memory_words": glob.bank.words(), "memory_records": len(glob.bank), "bank_diffs": glob.diffs,
                "dia_ids": sorted(glob.bank.dia_ids()),
                "memory_tokens": glob.bank.tokens(self.tok.encode),
                "questions": [{"qid": prep.questions[i].qid, "category": prep.questions[i].category,
                               "question": prep.questions[i].question,
                               "gold": prep.questions[i].answer, "answer": st.answers.get(i),
                               "evidence": list(prep.questions[i].evidence), "f1": st.f1.get(i)}
                              for i in prep.global_q],
                "ops": dict(st.ops.applied, merged=st.ops.merged, bad_json=st.ops.bad_json, bad_id=st.ops.bad_id,
                            malformed=st.ops.malformed),
                "facts": {"bad_json": st.facts.bad_json, "malformed": st.facts.malformed,
                          "bad_dia_id": st.facts.bad_dia_id}}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        sts = [t.state for t in trajs]
        local = [ch for s in sts for ch in s.chains[1:]]
        return {"truncated_rollouts": sum(s.chains[0].dead for s in sts),
                "local_branches": len(local), "truncated_local": sum(ch.dead for ch in local),
                "ops_bad_json": sum(s.ops.bad_json for s in sts), "ops_bad_id": sum(s.ops.bad_id for s in sts),
                "ops_malformed": sum(s.ops.malformed for s in sts), "ops_merged": sum(s.ops.merged for s in sts),
                "facts_bad_json": sum(s.facts.bad_json for s in sts),
                "facts_malformed": sum(s.facts.malformed for s in sts),
                "memory_words": float(np.mean([s.chains[0].bank.words() for s in sts])) if sts else 0.0}


def _subset(rng: np.random.Generator, pool: Sequence[int], k: int) -> list[int]:
    """k positions of pool drawn without replacement (all when k == 0 or k >= len), in pool order."""
    pool = list(pool)
    if k == 0 or k >= len(pool):
        return pool
    return sorted(int(i) for i in rng.choice(pool, size=k, replace=False))
