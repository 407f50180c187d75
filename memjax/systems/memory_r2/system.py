"""Memory-R2 on the one training loop: `MemoryR2Section` (agent.name = "memory_r2"), `MemoryR2System`, the LoGo-GRPO
credit rule `logo_unit_advantages`, the session curriculum and the held-out evaluation.

Credit: a unit is one role's calls in one session of one chain (`unit`, `unit_reward`, set by workflow.py). Units,
not rows, are standardised (the public code's eps 1e-6 and unbiased std), so a rollout counts once per group however
many chunks its session had: global units within (conversation, session, role) over the n rollouts, local units
within their local group and role. A constant group gets 0; a group of one A = r / (1 + eps) (`adv_singleton=
"reward"`, the public code's rule; "zero": 0). Every row takes its unit's advantage: `row_advantage` [N] and
`advantages` [N, T] on the row's loss-mask tokens (the step-level loss averages it back to the same value).
Curriculum: training conversations are truncated to `curriculum_sessions[k]` sessions from step `curriculum_steps[k]`
on; the stream derives the step from its position, so a resumed run continues in the right stage, and `stage(step)`
gives the loop the same stages (memjax/run/curriculum.py). The answer agent is frozen ("policy_copy": a second Engine
on `frozen_devices`, its own pool per device; or the rule-based "overlap"). Evaluation: `eval_part`, one greedy
rollout, every question on the final bank: F1, BLEU-1, J, M-Fail, memory size. Long form: docs/memory_r2.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...agents.heldout import judge_heldout, run_heldout
from .evidence import EVIDENCE_READINGS, questions_as_read
from .workflow import LOCAL_DECODING, MemoryR2, MemoryR2Config, R2Sample
from .messages import ANSWER_PARSERS
from .reward import EngineAnswerAgent, OverlapAnswerAgent
from ...data.locomo import CATEGORY_NAMES, load_locomo
from ...data.locomo_splits import split_conversations, split_questions
from ...rewards.locomo import OpenAIJudge, RuleBasedJudge, m_fail
from ...rl.batch import unit_index
from ...rl.estimators import SINGLETONS, logo_grpo_advantages
from ..base import (
    AgentSection,
    CountingStream,
    HeldModel,
    System,
    check_frozen_devices,
    frozen_copy,
    frozen_engine,
    register,
)

_EPISODE = [f.name for f in dataclasses.fields(MemoryR2Config)]


@dataclass(frozen=True)
class MemoryR2Section(AgentSection):
    name: str = "memory_r2"
    locomo_path: str = ""  # locomo10.json (CC BY-NC: the user's copy, never shipped)
    train_conversations: tuple[str, ...] = ("conv-43", "conv-47")  # of the memory_r2 split's train part
    eval_part: str = "validation"  # memory_r2 split part used by evaluate(): validation (conv-44) | test
    eval_max_sessions: int = 0  # 0 = all
    curriculum_steps: tuple[int, ...] = (0, 10, 20)  # first step of each stage
    curriculum_sessions: tuple[int, ...] = (8, 16, 32)  # max sessions of each stage
    logo: bool = True  # False: plain GRPO (no local branch)
    embedder: str = "wordllama"  # "wordllama" | "hashed" (tests)
    answer_agent: str = "policy_copy"  # "policy_copy" | "overlap" (rule-based, tests)
    answer_top_k: int = 30
    answer_threshold: float = 0.1  # paper-silent; the same floor as the manager's candidates
    answer_max_tokens: int = 512
    answer_parser: str = "official"  # the answer agent's reply reader: "official" (Memory-R2's
    # extract_answer_from_text: first tag, case-insensitive, then Answer: lines) | "last_tag" (memjax's earlier)
    answer_kv_cache_bytes: int = 4 << 30  # the policy_copy answer agent's own KV pool per device (memjax.plan)
    frozen_devices: str = "engine"  # the answer agent's engine: "engine" (data-parallel over the policy engine's
    # devices, a full copy on each) | "one" (one device)
    judge: str = "rule"  # "rule" (RuleBasedJudge, not an LLM) | "openai"
    judge_url: str = ""
    judge_model: str = ""
    judge_profile: str = "memory_r2"  # memjax.rewards.judge_profiles: Memory-R2's scorer prompt + extract_label
    adv_eps: float = 1e-6
    # a LoGo group of one rollout: "reward" (A = r / (1 + adv_eps), the official code's mean 0 / std 1 rule; the
    # default) or "zero" (A = 0, memjax's earlier rule); memjax/rl/estimators.py group_normalise
    adv_singleton: str = "reward"
    # how a question's LoCoMo evidence list is read: "official" (data_preprocess.py parse_dia_id: the first id of a
    # malformed string) | "repaired" (memjax's loader repair); memjax/systems/memory_r2/evidence.py
    evidence: str = "official"
    # the episode (memjax/systems/memory_r2/workflow.py MemoryR2Config), paper recipe
    chunks_per_session: int = 6
    max_prompt_tokens: int = 28_672
    max_response_tokens: int = 4_096
    top_k_per_fact: int = 5
    similarity_threshold: float = 0.1
    max_candidates: int = 25
    candidates_same_speaker: bool = True
    skip_empty_chunks: bool = False
    continue_chats: bool = True
    group_size: int = 16
    local_prob: float = 0.5
    local_rollouts: int = 4
    local_decoding: str = "sample"
    temperature: float = 1.0
    top_p: float = 1.0
    questions_global: int = 64
    questions_local: int = 16
    lam: float = 0.3
    alpha: float = 0.7
    prompt_revision: str = "85aeeb1"  # Memory-R2 extractor/manager system prompts: 85aeeb1 (official HEAD) | f6d3e04
    local_questions: str = "last_evidence"  # local-branch Q_t: "last_evidence" (official) | "any_evidence" (earlier)
    dialogue_captions: bool = False  # C_t with image captions (memjax's earlier); False: turn text only (official)
    reward_f1: str = "memory_r2"  # reward / evaluation answer metrics: a memjax.evaluation.profiles name

    def __post_init__(self):
        self.episode()  # validates the episode fields
        from ...rewards.judge_profiles import get_judge_profile
        get_judge_profile(self.judge_profile)
        from ...evaluation.profiles import get_profile
        get_profile(self.reward_f1, "answer")
        if len(self.curriculum_steps) != len(self.curriculum_sessions) or not self.curriculum_steps \
                or self.curriculum_steps[0] != 0 or list(self.curriculum_steps) != sorted(set(self.curriculum_steps)):
            raise ValueError("MemoryR2Section.curriculum_steps must start at 0, increase strictly and match "
                             f"curriculum_sessions in length; got {self.curriculum_steps} / {self.curriculum_sessions}")
        if any(s <= 0 for s in self.curriculum_sessions):
            raise ValueError(f"MemoryR2Section.curriculum_sessions must be > 0, got {self.curriculum_sessions}")
        for f, ok in (("embedder", ("wordllama", "hashed")), ("answer_agent", ("policy_copy", "overlap")),
                      ("judge", ("rule", "openai")), ("eval_part", ("validation", "test", "train"))):
            if getattr(self, f) not in ok:
                raise ValueError(f"MemoryR2Section.{f} must be one of {ok}, got {getattr(self, f)!r}")
        check_frozen_devices("MemoryR2Section", self.frozen_devices)
        if not self.answer_kv_cache_bytes > 0:
            raise ValueError(f"MemoryR2Section.answer_kv_cache_bytes must be > 0, got {self.answer_kv_cache_bytes}")
        if self.judge == "openai" and not (self.judge_url and self.judge_model):
            raise ValueError("MemoryR2Section: judge='openai' needs judge_url and judge_model")
        if self.answer_parser not in ANSWER_PARSERS:
            raise ValueError(f"MemoryR2Section.answer_parser must be one of {ANSWER_PARSERS}, "
                             f"got {self.answer_parser!r}")
        if self.evidence not in EVIDENCE_READINGS:
            raise ValueError(f"MemoryR2Section.evidence must be one of {EVIDENCE_READINGS}, got {self.evidence!r}")
        if self.adv_singleton not in SINGLETONS:
            raise ValueError(f"MemoryR2Section.adv_singleton must be one of {SINGLETONS}, got {self.adv_singleton!r}")
        if self.local_decoding not in LOCAL_DECODING or self.eval_max_sessions < 0 or not self.train_conversations:
            raise ValueError("MemoryR2Section: bad local_decoding, eval_max_sessions or empty train_conversations")

    def held_models(self) -> tuple[HeldModel, ...]:
        return (HeldModel("answer_agent", self.answer_kv_cache_bytes, self.frozen_devices),) \
            if self.answer_agent == "policy_copy" else ()

    def episode(self, **changes) -> MemoryR2Config:
        return MemoryR2Config(**{**{f: getattr(self, f) for f in _EPISODE}, **changes})

    def stage_index(self, step: int) -> int:
        """The curriculum stage (0, 1, ...) that 0-based training step `step` is in."""
        return int(np.searchsorted(np.asarray(self.curriculum_steps), step, side="right")) - 1

    def stage_sessions(self, step: int) -> int:
        """Max sessions of the curriculum stage that `step` is in."""
        return int(self.curriculum_sessions[self.stage_index(step)])


def logo_unit_advantages(batch, *, ddof: int = 1, eps: float = 1e-6, singleton: str = "zero"):
    """The batch with `row_advantage` and `advantages` filled by LoGo-GRPO over credit units (module doc)."""
    if batch.unit is None or batch.unit_reward is None:
        raise ValueError("logo_unit_advantages: the batch has no unit / unit_reward (not a Memory-R2 batch)")
    local = batch.local_group if batch.local_group is not None else np.full(batch.num_rows, -1, np.int32)
    first, inv = unit_index(batch)
    for name, a in (("unit_reward", batch.unit_reward), ("group", batch.group), ("role", batch.role),
                    ("local_group", local)):
        if not np.array_equal(a, a[first][inv]):
            raise ValueError(f"logo_unit_advantages: rows of one (sample, unit) disagree on {name}")
    role, lg = batch.role[first], local[first]
    gg = np.unique(np.stack([batch.group[first], role], 1), axis=0, return_inverse=True)[1].reshape(-1)
    lgr = np.unique(np.stack([lg, role], 1), axis=0, return_inverse=True)[1].reshape(-1)
    adv = logo_grpo_advantages(batch.unit_reward[first], gg, np.where(lg >= 0, lgr, -1), norm="mean_std",
                               ddof=ddof, eps=eps, singleton=singleton)
    row = adv[inv].astype(np.float32)
    return batch.replace(row_advantage=row, advantages=(row[:, None] * (batch.loss_mask != 0)).astype(np.float32))


def _seed(*parts) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


@register
class MemoryR2System(System):
    name = "memory_r2"
    section = MemoryR2Section

    def __init__(self, cfg: MemoryR2Section, *, seed: int = 0):
        super().__init__(cfg, seed=seed)
        self._data = None
        self._engine_cfg = None
        self.embedder = None
        self.agent = None

    # -- data ---------------------------------------------------------------------------------------
    def data(self):
        if self._data is None:
            if not self.cfg.locomo_path:
                raise FileNotFoundError("agent.locomo_path is empty (--set agent.locomo_path=.../locomo10.json)")
            self._data = load_locomo(self.cfg.locomo_path)
        return self._data

    def _questions(self, part: str) -> dict[str, tuple]:
        """The part's questions by conversation, their evidence read as `evidence` says (the split keeps questions
        with repaired evidence; the official reading starts from every non-adversarial question of its
        conversations and keeps those whose evidence it can read)."""
        if self.cfg.evidence == "official":
            convs = split_conversations(self.data(), "memory_r2")[part]
            qs = questions_as_read([q for c in convs for q in c.questions if q.category != 5], "official")
        else:
            qs = split_questions(self.data(), "memory_r2")[part]
        out: dict[str, list] = {}
        for q in qs:
            out.setdefault(q.conversation, []).append(q)
        return {k: tuple(v) for k, v in out.items()}

    def train_data(self, batch_size: int, seed: int):
        parts = split_conversations(self.data(), "memory_r2")
        known = {c.sample_id: c for c in parts["train"]}
        missing = [c for c in self.cfg.train_conversations if c not in known]
        if missing:
            raise ValueError(f"MemoryR2Section.train_conversations: {missing} not in the memory_r2 train part "
                             f"({sorted(known)})")
        convs = [known[c] for c in self.cfg.train_conversations]
        qs = self._questions("train")

        def make(start: int, n: int) -> list[R2Sample]:
            step = start // max(batch_size, 1)
            return [R2Sample(convs[i % len(convs)], qs.get(convs[i % len(convs)].sample_id, ()),
                             max_sessions=self.cfg.stage_sessions(step), seed=_seed(seed, i), local=self.cfg.logo)
                    for i in range(start, start + n)]

        return CountingStream(make, batch_size)

    # -- model side ---------------------------------------------------------------------------------
    def engine_config(self, default):
        self._engine_cfg = default
        return default

    def frozen_engines(self) -> list:
        return [self.agent.engine] if isinstance(self.agent, EngineAnswerAgent) else []

    def setup(self, model, tokenizer) -> None:
        from ...memory import HashedBowEmbedder, WordLlamaEmbedder

        c = self.cfg
        self.embedder = WordLlamaEmbedder() if c.embedder == "wordllama" else HashedBowEmbedder()
        if c.answer_agent == "overlap":
            self.agent = OverlapAnswerAgent(self.embedder, top_k=c.answer_top_k, threshold=c.answer_threshold)
            return
        self._frozen = frozen_copy(model)  # own buffers in the compute dtype, never the trained ones
        self._tok = tokenizer

    def _answer_agent(self):
        """The frozen answer agent; the policy copy gets its Engine on first use (the loop calls engine_config()
        before setup(); the answer engine runs that config per device, its own pool, on the frozen_devices)."""
        if self.agent is None and getattr(self, "_frozen", None) is not None:
            if self._engine_cfg is None:
                raise ValueError("MemoryR2System: answer_agent='policy_copy' needs engine_config() first")
            c = self.cfg
            kv = dataclasses.replace(self._engine_cfg.kv, kv_cache_bytes=c.answer_kv_cache_bytes, kv_cache_gib=None,
                                     num_pages=None)
            # one device's config, its own pool: frozen_engine lays it over the devices
            ecfg = dataclasses.replace(self._engine_cfg, kv=kv, data_parallel=1, tensor_parallel=1)
            engine = frozen_engine(self._frozen, ecfg, c.frozen_devices, self.frozen_on)
            self.agent = EngineAnswerAgent(engine, self._tok, self.embedder,
                                           top_k=c.answer_top_k, threshold=c.answer_threshold,
                                           max_tokens=c.answer_max_tokens, parser=c.answer_parser)
            self._frozen = None  # the engine holds its own copy
        return self.agent

    def retained_kv(self) -> str:
        c = self.cfg
        return ("agent.continue_chats=true continues each session's chats on their retained KV from chunk to chunk; "
                "false re-prefills them") if c.continue_chats and c.chunks_per_session > 1 else ""

    def workflow(self, engine, tokenizer, *, train: bool = True):
        if self.embedder is None:
            if self.cfg.answer_agent != "overlap":
                raise ValueError("MemoryR2System.workflow: call setup(model, tokenizer) first (it copies the "
                                 "initial policy for the frozen answer agent)")
            self.setup(None, tokenizer)
        c = self.cfg
        ep = c.episode() if train else c.episode(group_size=1, temperature=0.0, local_rollouts=0,
                                                  questions_global=0)
        return MemoryR2(tokenizer, ep, self.embedder, self._answer_agent())

    def stage(self, step: int) -> int:
        return self.cfg.stage_index(step)

    def advantages(self, batch, cfg):
        return logo_unit_advantages(batch, eps=self.cfg.adv_eps, singleton=self.cfg.adv_singleton)

    # -- evaluation ---------------------------------------------------------------------------------
    def evaluate(self, engine, tokenizer) -> dict[str, Any]:
        c = self.cfg
        qs = self._questions(c.eval_part)
        convs = split_conversations(self.data(), "memory_r2")[c.eval_part]
        samples = [R2Sample(conv, qs.get(conv.sample_id, ()), max_sessions=c.eval_max_sessions, local=False,
                            all_questions=True) for conv in convs]
        res = run_heldout(engine, self.workflow(engine, tokenizer, train=False), samples, group_size=1,
                           seed=self.seed)
        return evaluation_metrics(res.traces, self._judge(), res.stats, metrics=self.cfg.reward_f1)

    def _judge(self):
        c = self.cfg
        return RuleBasedJudge() if c.judge == "rule" else OpenAIJudge(c.judge_url, c.judge_model,
                                                                        profile=c.judge_profile)


def evaluation_metrics(traces: list[dict], judge, stats: dict | None = None, *,
                       metrics: str = "memjax") -> dict[str, Any]:
    """F1 / BLEU-1 / J overall and per category, M-Fail and memory size from MemoryR2 evaluation traces. F1 is the
    traces' (the workflow's reward F1, `reward_f1`); BLEU-1 is the metric profile `metrics`' (memjax: its own)."""
    from ...evaluation.profiles import get_profile

    prof = get_profile(metrics, "answer")
    b1 = prof.bleu1 if prof.bleu1 is not None else (lambda p, g: float("nan"))
    rows = [q for tr in traces for q in tr["questions"]]
    verdicts = judge_heldout(judge, [(q.get("question", ""), q["gold"] or "", q["answer"] or "") for q in rows])
    out: dict[str, Any] = {}
    groups = [("all", list(range(len(rows))))] + [
        (CATEGORY_NAMES[k], [i for i, q in enumerate(rows) if q["category"] == k])
        for k in sorted({q["category"] for q in rows})]
    for name, idx in groups:
        if not idx:
            continue
        out[f"f1/{name}"] = float(np.mean([rows[i]["f1"] for i in idx]))
        out[f"bleu1/{name}"] = float(np.mean([b1(rows[i]["answer"] or "", rows[i]["gold"] or "") for i in idx]))
        kept = [verdicts[i].correct for i in idx if not verdicts[i].dropped]   # Memory-R2's scorer drops no-label
        out[f"j/{name}"] = float(np.mean(kept)) if kept else float("nan")
    missing = total = 0
    for tr in traces:
        ev = [q["evidence"] for q in tr["questions"]]
        mf = m_fail(ev, tr["dia_ids"])
        if mf is not None:
            n = sum(len(e) for e in ev)
            missing, total = missing + mf * n, total + n
    out["m_fail"] = missing / total if total else float("nan")
    out["memory_words"] = float(np.mean([tr["memory_words"] for tr in traces])) if traces else 0.0
    out["memory_tokens"] = float(np.mean([tr.get("memory_tokens", 0) for tr in traces])) if traces else 0.0
    out["questions"] = float(len(rows))
    for k in ("truncated_rollouts", "ops_bad_json", "facts_bad_json"):
        if stats and k in stats:
            out[k] = float(stats[k])
    return out
