"""Memory-R1 workflows: memory construction, the Memory Manager (single step, frozen-answer-agent reward) and the
Answer Agent (memory distillation), on `run_workflow`.

Owns `MemoryR1Config`, `FrozenAnswerer` (greedy generation on its own Engine, called synchronously from
`ManagerWorkflow.react`) and three Workflows:
- `ConstructionWorkflow`: one trajectory per conversation (Alg. 3): all fact extractions submitted at the start,
  then the manager turn by turn (related memories -> Fig. 9 prompt with small integer ids -> `apply_mem0`); traces
  the bank after every turn. Nothing is trained.
- `ManagerWorkflow`: one manager call per ManagerSample; its operations go to a private copy of the bank and the
  frozen answer agent answers the turn's linked questions; reward = mean exact match (a one-step bandit).
- `AnswerWorkflow`: one answer call per AnswerSample (Fig. 11, 30 + 30 memories), reward = exact match.
Conventions: exact match = SQuAD normalisation then equality; malformed output applies nothing and is counted;
UPDATE replaces in place; prompts over `max_prompt_tokens` drop their lowest-ranked memories (counted); the prompt
is masked and the whole generation trained; construction and frozen-agent calls are never trained.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...engine import Completion, SamplingParams
from ...memory import MemoryBank, OpStats, apply_mem0, mem0_view
from ...rewards.squad import exact_match
from .data import AnswerSample, ManagerSample, MemoryIndex, TurnInput, answer_sample
from .prompts import answer_prompt, extract_messages, manager_prompt, parse_answer, parse_facts
from ...agents.workflow import Request, Trajectory, Workflow

ROLE_MANAGER, ROLE_ANSWER, ROLE_EXTRACT = 0, 1, 2


@dataclass(frozen=True)
class MemoryR1Config:
    related_k: int = 5                 # manager: top-k of the speaker's memories per extracted fact (Mem0's limit)
    answer_top_k: int = 30             # answer agent: memories per speaker (60 in all)
    distill: bool = True               # False: the no-distillation ablation prompt
    max_prompt_tokens: int = 4096      # the paper's prompt limit; longer prompts drop their lowest-ranked memories
    max_extract_tokens: int = 512
    max_manager_tokens: int = 2048     # the paper's response limit
    max_answer_tokens: int = 2048
    temperature: float = 1.0           # policy sampling (1.0 training, 0 evaluation)
    top_p: float = 1.0
    extract_temperature: float = 0.0   # the untrained extractor and the construction-time manager: greedy

    def __post_init__(self):
        for f in ("related_k", "answer_top_k", "max_prompt_tokens", "max_extract_tokens", "max_manager_tokens",
                  "max_answer_tokens"):
            if getattr(self, f) <= 0:
                raise ValueError(f"MemoryR1Config.{f} must be > 0, got {getattr(self, f)}")
        for f in ("temperature", "extract_temperature"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"MemoryR1Config.{f} must be finite and >= 0, got {v}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"MemoryR1Config.top_p must be in (0, 1], got {self.top_p}")


def _stop_ids(tok) -> tuple[int, ...]:
    return tuple(sorted({tok.eos_id, tok.endoftext_id}))


def _text(tok, comp: Completion, stop: Sequence[int]) -> str:
    ids = comp.token_ids[:-1] if comp.token_ids and comp.token_ids[-1] in stop else comp.token_ids
    return tok.decode(ids, skip_special_tokens=True, skip_unknown=True)


def _user(tok, text: str) -> list[int]:
    return tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)


def fit_manager_prompt(tok, facts: Sequence[str], related: list, max_tokens: int) -> tuple[list[int], list[str], int]:
    """(prompt ids, id_map, memories dropped): the manager prompt with as many related memories as fit."""
    keep = list(related)
    while True:
        view, id_map = mem0_view(keep)
        ids = _user(tok, manager_prompt(view, facts))
        if len(ids) <= max_tokens or not keep:
            return ids, id_map, len(related) - len(keep)
        keep.pop()


def fit_answer_prompt(tok, s: AnswerSample, cfg: MemoryR1Config, prompt: Callable[..., str] = answer_prompt
                      ) -> tuple[list[int], int]:
    """(prompt ids, memories dropped): Fig. 11's prompt (or `prompt`, with answer_prompt's signature), dropping the
    lowest-ranked memory of the longer list until it fits `max_prompt_tokens`."""
    a, b = list(s.memories[0]), list(s.memories[1])
    n = len(a) + len(b)
    while True:
        ids = _user(tok, prompt(s.qa.question, s.speakers[0], a, s.speakers[1], b, distill=cfg.distill))
        if len(ids) <= cfg.max_prompt_tokens or not (a or b):
            return ids, n - len(a) - len(b)
        (a if len(a) >= len(b) else b).pop()


# -- construction ------------------------------------------------------------------------------------------------
@dataclass
class ConstructionState:
    conversation: str
    turns: list[TurnInput]
    bank: MemoryBank
    facts: list[list[str] | None]
    snapshots: list = field(default_factory=list)
    busy: bool = False
    ops: OpStats = field(default_factory=OpStats)
    extract_unparsed: int = 0
    memories_dropped: int = 0


class ConstructionWorkflow(Workflow):
    """Samples: (conversation id, [TurnInput]). See the module docstring."""

    def __init__(self, tok, index: MemoryIndex, cfg: MemoryR1Config = MemoryR1Config(), *, bank_seed: int = 0):
        self.tok, self.index, self.cfg, self.bank_seed = tok, index, cfg, bank_seed
        self.pad_id, self.stop = getattr(tok, "pad_id", 0), _stop_ids(tok)

    def _params(self, max_tokens: int) -> SamplingParams:
        return SamplingParams(temperature=self.cfg.extract_temperature, max_tokens=max_tokens,
                              stop_token_ids=self.stop)

    def start(self, traj: Trajectory, prepared) -> list[Request]:
        conv, turns = prepared
        turns = list(turns)
        if not turns:
            raise ValueError(f"ConstructionWorkflow: conversation {conv!r} has no turns")
        traj.state = ConstructionState(conv, turns, MemoryBank(seed=self.bank_seed), [None] * len(turns))
        return [Request(self.tok.apply_chat_template(extract_messages(t.speaker, t.text, t.session_time)),
                        self._params(self.cfg.max_extract_tokens), role=ROLE_EXTRACT, tag=("x", i))
                for i, t in enumerate(turns)]

    def _advance(self, st: ConstructionState) -> list[Request]:
        while not st.busy and len(st.snapshots) < len(st.turns) and st.facts[len(st.snapshots)] is not None:
            t = len(st.snapshots)
            if not st.facts[t]:
                st.snapshots.append(st.bank.snapshot())
                continue
            turn = st.turns[t]
            related = self.index.related(st.bank, st.facts[t], turn.speaker, self.cfg.related_k)
            ids, id_map, dropped = fit_manager_prompt(self.tok, st.facts[t], related, self.cfg.max_prompt_tokens)
            st.memories_dropped += dropped
            st.busy = True
            return [Request(ids, self._params(self.cfg.max_manager_tokens), role=ROLE_MANAGER, tag=("m", t, id_map))]
        return []

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st: ConstructionState = traj.state
        text = _text(self.tok, completion, self.stop)
        if request.tag[0] == "x":
            facts, source = parse_facts(text)
            st.extract_unparsed += source == "none"
            st.facts[request.tag[1]] = facts
        else:
            _, t, id_map = request.tag
            turn = st.turns[t]
            apply_mem0(st.bank, text, id_map, speaker=turn.speaker, conversation=turn.conversation,
                       session=turn.session, session_time=turn.session_time, dia_ids=(turn.dia_id,), stats=st.ops)
            st.snapshots.append(st.bank.snapshot())
            st.busy = False
        return self._advance(st)

    def reward(self, traj: Trajectory) -> float:
        return 0.0

    def conversations(self, traj: Trajectory) -> list:
        return []                      # nothing here is trained

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        return {"conversation": st.conversation, "bank": st.bank, "snapshots": st.snapshots, "facts": st.facts}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        return _op_stats([t.state.ops for t in trajs]) | {
            "extract_unparsed": sum(t.state.extract_unparsed for t in trajs),
            "memories_dropped": sum(t.state.memories_dropped for t in trajs)}


def _op_stats(all_ops: Sequence[OpStats]) -> dict[str, float]:
    out = {f"ops_{k}": 0.0 for k in ("ADD", "UPDATE", "DELETE", "NONE")}
    for s in all_ops:
        for k, v in s.applied.items():
            out[f"ops_{k}"] = out.get(f"ops_{k}", 0.0) + v
    for b in ("bad_json", "bad_id", "malformed"):
        out[f"ops_{b}"] = float(sum(getattr(s, b) for s in all_ops))
    return out


# -- the frozen answer agent ---------------------------------------------------------------------------------------
class FrozenAnswerer:
    """Greedy answers from an engine whose weights never change (`__call__(samples) -> answers`)."""

    def __init__(self, engine, tok, cfg: MemoryR1Config = MemoryR1Config()):
        self.engine, self.tok, self.cfg, self.stop = engine, tok, cfg, _stop_ids(tok)
        self.calls = 0

    def __call__(self, samples: Sequence[AnswerSample]) -> list[str]:
        if not samples:
            return []
        prompts = [fit_answer_prompt(self.tok, s, self.cfg)[0] for s in samples]
        params = SamplingParams(temperature=0.0, max_tokens=self.cfg.max_answer_tokens, stop_token_ids=self.stop)
        self.calls += len(samples)
        return [parse_answer(_text(self.tok, c, self.stop))[0] for c in self.engine.generate(prompts, params)]


# -- the Memory Manager (training stage 1) -------------------------------------------------------------------------
@dataclass
class ManagerState:
    sample: ManagerSample
    bank: MemoryBank
    id_map: list[str]
    ops: OpStats = field(default_factory=OpStats)
    output: str = ""
    answers: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    memories_dropped: int = 0


class ManagerWorkflow(Workflow):
    """Samples: ManagerSample. `answer_fn(list[AnswerSample]) -> list[str]` is the frozen answer agent."""

    def __init__(self, tok, index: MemoryIndex, answer_fn: Callable[[Sequence[AnswerSample]], Sequence[str]],
                 cfg: MemoryR1Config = MemoryR1Config()):
        self.tok, self.index, self.answer_fn, self.cfg = tok, index, answer_fn, cfg
        self.pad_id, self.stop = getattr(tok, "pad_id", 0), _stop_ids(tok)

    def start(self, traj: Trajectory, prepared: ManagerSample) -> list[Request]:
        s, c = prepared, self.cfg
        bank = MemoryBank.restore(s.bank)
        related = self.index.related(bank, s.facts, s.turn.speaker, c.related_k)
        ids, id_map, dropped = fit_manager_prompt(self.tok, s.facts, related, c.max_prompt_tokens)
        traj.state = ManagerState(s, bank, id_map, memories_dropped=dropped)
        params = SamplingParams(temperature=c.temperature, top_p=c.top_p, max_tokens=c.max_manager_tokens,
                                stop_token_ids=self.stop)
        return [Request(ids, params, role=ROLE_MANAGER, is_final=True)]

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st: ManagerState = traj.state
        s, turn = st.sample, st.sample.turn
        st.output = _text(self.tok, completion, self.stop)
        apply_mem0(st.bank, st.output, st.id_map, speaker=turn.speaker, conversation=turn.conversation,
                   session=turn.session, session_time=turn.session_time, dia_ids=(turn.dia_id,), stats=st.ops)
        items = [answer_sample(st.bank, qa, s.speakers, self.index, self.cfg.answer_top_k) for qa in s.questions]
        st.answers = list(self.answer_fn(items))
        st.scores = [exact_match(a, qa.answer) for a, qa in zip(st.answers, s.questions)]
        return []

    def reward(self, traj: Trajectory) -> float:
        sc = traj.state.scores
        return float(sum(sc) / len(sc)) if sc else 0.0

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        return {"sample": traj.sample, "rollout": traj.rollout, "turn": st.sample.turn.dia_id,
                "facts": list(st.sample.facts), "output": st.output, "applied": dict(st.ops.applied),
                "rejected": st.ops.log[:4], "questions": [q.question for q in st.sample.questions],
                "golds": [q.answer for q in st.sample.questions], "answers": st.answers, "reward": traj.reward}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        return _op_stats([t.state.ops for t in trajs]) | {
            "memories_dropped": sum(t.state.memories_dropped for t in trajs)}


# -- the Answer Agent (training stage 2, evaluation) ---------------------------------------------------------------
@dataclass
class AnswerState:
    sample: AnswerSample
    output: str = ""
    answer: str = ""
    source: str = ""
    memories_dropped: int = 0


class AnswerWorkflow(Workflow):
    """Samples: AnswerSample. Reward: exact match of the parsed answer with the gold answer.
    `prompt` (answer_prompt's signature, `distill` from the config) and `parse` (text -> (answer, source), as
    parse_answer) default to Fig. 11 and its `**Answer:**` marker; a task with another vocabulary passes its own
    (memjax/systems/memory_r1/tiny/answer_task.py)."""

    def __init__(self, tok, cfg: MemoryR1Config = MemoryR1Config(), *, prompt: Callable[..., str] = answer_prompt,
                 parse: Callable[[str], tuple[str, str]] = parse_answer):
        self.tok, self.cfg, self.prompt, self.parse = tok, cfg, prompt, parse
        self.pad_id, self.stop = getattr(tok, "pad_id", 0), _stop_ids(tok)

    def start(self, traj: Trajectory, prepared: AnswerSample) -> list[Request]:
        c = self.cfg
        ids, dropped = fit_answer_prompt(self.tok, prepared, c, self.prompt)
        traj.state = AnswerState(prepared, memories_dropped=dropped)
        params = SamplingParams(temperature=c.temperature, top_p=c.top_p, max_tokens=c.max_answer_tokens,
                                stop_token_ids=self.stop)
        return [Request(ids, params, role=ROLE_ANSWER, is_final=True)]

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st: AnswerState = traj.state
        st.output = _text(self.tok, completion, self.stop)
        st.answer, st.source = self.parse(st.output)
        return []

    def reward(self, traj: Trajectory) -> float:
        return exact_match(traj.state.answer, traj.state.sample.qa.answer)

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        return {"sample": traj.sample, "rollout": traj.rollout, "qid": st.sample.qa.qid,
                "question": st.sample.qa.question, "gold": st.sample.qa.answer, "answer": st.answer,
                "source": st.source, "output": st.output, "reward": traj.reward,
                "memory_dia_ids": list(st.sample.memory_dia_ids)}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        src = [t.state.source for t in trajs]
        return {"answer_loose": float(src.count("loose")), "answer_unmarked": float(src.count("none")),
                "memories_dropped": float(sum(t.state.memories_dropped for t in trajs))}


def construct(engine, tok, index: MemoryIndex, conversations: Sequence, cfg: MemoryR1Config = MemoryR1Config(), *,
              seed: int = 0, max_active: int = 0) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Run memory construction over LoCoMo conversations (one trajectory each, in flight together) on `engine`:
    ({conversation id: {"bank", "snapshots", "facts"}}, construction statistics). Nothing is recorded for training."""
    from .data import turn_inputs
    from ...agents.workflow import run_workflow

    samples = [(c.sample_id, turn_inputs(c)) for c in conversations]
    res = run_workflow(engine, ConstructionWorkflow(tok, index, cfg, bank_seed=seed), samples, seed=seed,
                       max_active=max_active, record=False)
    return {t["conversation"]: t for t in res.traces}, res.stats
