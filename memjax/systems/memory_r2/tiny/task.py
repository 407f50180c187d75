"""The tiny Memory-R2 task: a memory bank built over several sessions, per-session credit (LoGo-GRPO) on a tiny
word vocabulary; the same credit code (`logo_unit_advantages`) and step-level loss as the LoCoMo system.

Owns: the vocabulary (`R2_WORDS`, 48 words for the tiny model's 64 embedding rows), `R2TaskConfig`, the episode
generator, the op grammar and bank update, the frozen reader, `TinyR2Workflow` (global rollouts and local
re-rollouts of single sessions on `run_workflow`) and `evaluate_r2` (held-out greedy F1).

The episode: `sessions` sessions of `facts_per_session` facts each. A fact is a location `K in P .` (a person
K, a place P) or chit-chat `K likes P .` (probability `noise_prob`); a location fact is about a person already
located in the episode (a move to another place) with probability `move_prob`, else about a new person. A move
is worded `K to P .` (`move_rel = "to"`, the default) or like a new person, `K in P .` (`move_rel = "in"`: only
the bank tells a move from a new person). Why "to" by default: with "in", supervised training of the tiny model
on the CORRECT teacher did not learn to look the subject up in the bank (dev correct-op 0.71-0.80, greedy
flipping between add-all and update-all for location facts; measured on CPU after 1,500 / 1,000 / 700 steps with
sessions x facts 3 x 2 / 4 x 1 / 6 x 1), so no warm start could condition its ops on the bank and RL could only move the unconditional
op mix (the earlier study's "add everything" plateau, docs/memory_r2.md). The bank still decides what is right:
the right op, the rewards and the reader are all bank-relative (a move of someone the bank lacks must be added).
Per
session ONE call of the policy: prompt `memory <records> session <facts> op`, response one op word per fact
in order (`add` | `update` | `skip`), then `<end>`. `add` appends the fact as a record; `update` replaces the
first record with the fact's subject and relation, any location relation counting as one (no such record: a
counted no-op); `skip` writes nothing.
A response that is not exactly one op word per fact is a counted no-op for the whole session. The bank
persists across sessions (memjax.memory.MemoryBank: snapshots for the local branch, `words()` for Tok(M)).
Questions: `where is K ?` for every person located in the episode; gold = K's last place; the question's
evidence (the session it is credited to) is the session of K's LAST location fact. The frozen answerer is a
rule, not a model: the FIRST location record of K (`K in P .` or `K to P .`) in bank order -> P, else `none`; F1 = token-set F1 (one word:
0 or 1). So the classic mistakes lose: `add` on a move leaves the stale place first (wrong answer), `skip` or
`update` on a new person loses it, `add` on chit-chat grows the bank (compression penalty).
Reward (memjax/systems/memory_r2/reward.py `session_reward`, the same function the LoCoMo system uses): a
session's reward is the mean F1 over its credited questions (0 with none) minus lam * max(0, Tok(M) -
alpha C_t) / C_t, Tok and C_t counted in `\\b\\w+\\b` words (a record or fact `K in P .` is 3 words). A global
rollout's session t is scored on its FINAL bank with C_T; a local re-rollout of session t on the bank right
after it with C_t (as memjax/systems/memory_r2/workflow.py).
Local branch (LoGo): for each session, with probability `local_prob`, an anchor rollout is drawn uniformly;
when the anchor reaches that session its bank snapshot is restored into `local_rollouts` chains that re-run
that session alone, sampled at the training temperature; their banks are discarded. Row metadata (group,
local_group, unit, unit_reward, snapshot, role) is the LoCoMo workflow's, so `logo_unit_advantages` applies
unchanged.
Simplified against the paper (and why): the extractor and the manager are ONE call per session (role =
manager): a tiny model with a 48-position window cannot hold two chats per session; facts come as structured
`K rel P .` text, so extraction is the choice to keep (`add`/`update`) or drop (`skip`) a fact; `update`
finds its target by subject instead of an id; no chunking (one chunk per session); the answerer is a rule.
Teacher for the warm start (memjax/systems/memory_r2/tiny/warmstart.py): per fact the right op of its EPISODE case (as
generated, `fact["case"]`) with probability `teacher_correct`, else that case's classic mistake (new -> skip,
move -> add, chit-chat -> add); deciding on the episode case keeps the teacher's mixture a function of the
fact's wording (a bank-relative teacher, whose earlier skips turn later moves into "new", put only ~0.1 of the
mass of moves on `update`).
Invariants: generation is a pure function of (config, seed, index); the grammar and the reader never raise;
every prompt plus response fits the tiny window (48 positions) for the default sizes (checked in __post_init__).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..workflow import MANAGER, SESSION_STRIDE
from ..reward import session_reward, word_count
from ....agents.heldout import run_heldout
from ....agents.workflow import Request, Trajectory, Workflow
from ....engine import Completion, SamplingParams
from ....memory import MemoryBank
from ....rewards.locomo import token_set_f1
from ....rl.batch import Conversation as Row
from ....tiny.model import WINDOW
from ....tiny.vocab import PEOPLE, PLACES, SPECIALS, TinyTokenizer

OPS = ("add", "update", "skip")
LOCATION_RELS = ("in", "to")  # `K in P .` (a person located) and `K to P .` (a move, with move_rel = "to")
R2_WORDS = SPECIALS + ("memory", "session", "op", "in", "likes", ".", "where", "is", "?", "none") + OPS + PEOPLE \
    + PLACES + ("to",)
CASES = ("new", "move", "noise")
RIGHT = {"new": "add", "move": "update", "noise": "skip"}
MISTAKE = {"new": "skip", "move": "add", "noise": "add"}
TRAIN_SEED, HELDOUT_SEED, DEV_SEED = 21, 22, 23


def r2_tokenizer() -> TinyTokenizer:
    return TinyTokenizer(R2_WORDS)


@dataclass(frozen=True)
class R2TaskConfig:
    sessions: int = 3
    facts_per_session: int = 2
    noise_prob: float = 0.35
    move_prob: float = 0.5  # of location facts, when someone is already located
    teacher_correct: float = 0.3
    local_prob: float = 1.0
    local_rollouts: int = 4
    lam: float = 0.3
    alpha: float = 0.7
    move_rel: str = "to"  # a move's wording: "to" (`K to P .`) or "in" (`K in P .`, only the bank tells a move)

    def __post_init__(self):
        if self.move_rel not in LOCATION_RELS:
            raise ValueError(f"R2TaskConfig.move_rel must be one of {LOCATION_RELS}, got {self.move_rel!r}")
        if self.sessions < 1 or self.facts_per_session < 1 or self.local_rollouts < 0:
            raise ValueError(f"R2TaskConfig: sessions, facts_per_session >= 1 and local_rollouts >= 0, got {self}")
        for f in ("noise_prob", "move_prob", "teacher_correct", "local_prob"):
            if not 0.0 <= getattr(self, f) <= 1.0:
                raise ValueError(f"R2TaskConfig.{f} must be in [0, 1], got {getattr(self, f)}")
        if self.lam < 0 or self.alpha < 0:
            raise ValueError(f"R2TaskConfig: lam and alpha must be >= 0, got {self.lam}, {self.alpha}")
        n = self.sessions * self.facts_per_session
        if n > len(PEOPLE):
            raise ValueError(f"R2TaskConfig: {n} facts need at most {len(PEOPLE)} people")
        # worst case: every fact added as a record; chat tokens <user> .. <end> <assistant> + response + <end>
        if 3 + 3 + 4 * n + (self.facts_per_session + 1) > WINDOW:
            raise ValueError(f"R2TaskConfig: {self.sessions} x {self.facts_per_session} facts overflow the tiny "
                             f"window of {WINDOW} positions")

    @property
    def max_response_tokens(self) -> int:
        return self.facts_per_session + 1


def make_r2_sample(cfg: R2TaskConfig, seed: int, index: int) -> dict[str, Any]:
    """One episode: sessions of facts (each {"text", "subject", "rel", "place"}), questions with their evidence
    session and gold, and the teacher's op per fact (noisy, for the warm start)."""
    rng = np.random.default_rng([seed, index, 0x72])
    people = [str(p) for p in rng.permutation(PEOPLE)]
    located: dict[str, tuple[str, int]] = {}  # person -> (last place, session)
    fresh = iter(people)
    sessions = []
    for t in range(cfg.sessions):
        facts = []
        for _ in range(cfg.facts_per_session):
            if rng.random() < cfg.noise_prob:
                k, rel = str(rng.choice(people)), "likes"
                p = str(rng.choice(PLACES))
            elif located and rng.random() < cfg.move_prob:
                k, rel = str(rng.choice(sorted(located))), cfg.move_rel
                p = str(rng.choice([x for x in PLACES if x != located[k][0]]))
            else:
                k, rel = next(fresh), "in"
                while k in located:
                    k = next(fresh)
                p = str(rng.choice(PLACES))
            case = "noise" if rel == "likes" else "move" if k in located else "new"
            if rel in LOCATION_RELS:
                located[k] = (p, t)
            facts.append({"text": f"{k} {rel} {p} .", "subject": k, "rel": rel, "place": p, "case": case})
        sessions.append(facts)
    questions = [{"question": f"where is {k} ?", "key": k, "answer": p, "session": t}
                 for k, (p, t) in sorted(located.items())]
    coins = rng.random((cfg.sessions, cfg.facts_per_session))
    return {"sessions": sessions, "questions": questions, "coins": coins.tolist(), "seed": seed, "index": index}


def make_r2_split(cfg: R2TaskConfig, seed: int, count: int, start: int = 0) -> list[dict[str, Any]]:
    return [make_r2_sample(cfg, seed, start + i) for i in range(count)]


# -- the bank, the grammar, the reader -----------------------------------------------------------------------
def _first(bank: MemoryBank, subject: str, rels: Sequence[str]):
    for r in bank:
        w = r.content.split()
        if len(w) >= 3 and w[0] == subject and w[1] in rels:
            return r
    return None


def _rels(rel: str) -> tuple[str, ...]:
    """The relations a fact with `rel` matches in the bank: any location for a location fact."""
    return LOCATION_RELS if rel in LOCATION_RELS else (rel,)


def case_of(bank: MemoryBank, fact: dict) -> str:
    """new / move / noise relative to the CURRENT bank (a move of someone the bank lacks is `new`)."""
    if fact["rel"] not in LOCATION_RELS:
        return "noise"
    return "move" if _first(bank, fact["subject"], LOCATION_RELS) is not None else "new"


def correct_op(bank: MemoryBank, fact: dict) -> str:
    return RIGHT[case_of(bank, fact)]


def parse_ops(text: str, n: int) -> list[str] | None:
    w = text.split()
    return w if len(w) == n and all(x in OPS for x in w) else None


def apply_ops(bank: MemoryBank, facts: Sequence[dict], ops: Sequence[str]) -> int:
    """Apply one op per fact in order; returns the number of no-op updates (no record to update)."""
    missed = 0
    for f, op in zip(facts, ops):
        if op == "add":
            bank.add(f["text"], speaker=f["subject"])
        elif op == "update":
            r = _first(bank, f["subject"], _rels(f["rel"]))
            if r is None:
                missed += 1
            else:
                bank.replace(r.id, content=f["text"])
    return missed


def read(bank: MemoryBank, key: str) -> str:
    """The frozen answerer: the place of the first location record (`key in P .` or `key to P .`), else `none`."""
    r = _first(bank, key, LOCATION_RELS)
    return r.content.split()[2] if r is not None else "none"


def bank_text(bank: MemoryBank) -> str:
    return " ".join(r.content for r in bank)


def prompt_text(bank: MemoryBank, facts: Sequence[dict]) -> str:
    return " ".join(x for x in ("memory", bank_text(bank), "session", " ".join(f["text"] for f in facts), "op") if x)


def dialogue_words(sample: dict[str, Any]) -> list[int]:
    """C_t: the words of sessions 1..t (cumulative)."""
    return [int(x) for x in np.cumsum([sum(word_count(f["text"]) for f in s) for s in sample["sessions"]])]


def credited(sample: dict[str, Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {t: [] for t in range(len(sample["sessions"]))}
    for i, q in enumerate(sample["questions"]):
        out[q["session"]].append(i)
    return out


def bank_f1(bank: MemoryBank, sample: dict[str, Any], qpos: Sequence[int]) -> list[float]:
    qs = sample["questions"]
    return [token_set_f1(read(bank, qs[i]["key"]), qs[i]["answer"]) for i in qpos]


def replay_reward(cfg: R2TaskConfig, sample: dict[str, Any], outputs: Sequence[str]) -> float:
    """The global reward of one rollout whose policy answered `outputs[t]` at session t (TinyR2Workflow.reward
    for that rollout, recomputed from the texts: an unparseable text is a counted no-op). Pure: the tiny
    task's counterfactuals (replace one session's ops, keep the rest) are calls of this."""
    bank, c_words = MemoryBank(seed=0), dialogue_words(sample)
    for facts, text in zip(sample["sessions"], outputs):
        ops = parse_ops(text, len(facts))
        if ops is not None:
            apply_ops(bank, facts, ops)
    return float(np.mean([session_reward(bank_f1(bank, sample, qpos), bank.words(), c_words[-1], lam=cfg.lam,
                                         alpha=cfg.alpha) for qpos in credited(sample).values()]))


def teacher_trace(cfg: R2TaskConfig, sample: dict[str, Any]) -> list[tuple[str, str]]:
    """(prompt text, teacher ops text) per session, the bank following the teacher's own (noisy) ops. The teacher
    decides on the fact's EPISODE case (`fact["case"]`: new person, move, chit-chat, as generated), not on its
    bank-relative case: per fact the case's right op with probability `teacher_correct`, else its mistake."""
    bank, out = MemoryBank(seed=0), []
    for t, facts in enumerate(sample["sessions"]):
        ops = [RIGHT[f["case"]] if sample["coins"][t][j] < cfg.teacher_correct else MISTAKE[f["case"]]
               for j, f in enumerate(facts)]
        out.append((prompt_text(bank, facts), " ".join(ops)))
        apply_ops(bank, facts, ops)
    return out


# -- the workflow --------------------------------------------------------------------------------------------
@dataclass
class Chain:
    local: bool
    sessions: list[int]
    bank: MemoryBank
    pos: int = 0
    rewards: dict[int, float] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    banks: list[str] = field(default_factory=list)  # bank text after each session (for traces)


@dataclass
class R2State:
    sample: dict[str, Any]
    plan: dict[int, int]  # session -> anchor rollout
    c_words: list[int]
    chains: list[Chain]
    answers: list[str] = field(default_factory=list)
    bad_output: int = 0
    missed_updates: int = 0
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    correct: int = 0
    decisions: int = 0
    case_right: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CASES, 0))
    case_count: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CASES, 0))


class TinyR2Workflow(Workflow):
    """Workflow over tiny R2 episodes (module docstring); `group_size` global rollouts per episode."""

    def __init__(self, tok: TinyTokenizer, cfg: R2TaskConfig, *, group_size: int, temperature: float = 1.0,
                 local: bool = True):
        self.tok, self.cfg, self.n, self.temperature = tok, cfg, group_size, temperature
        self.local = local and cfg.local_rollouts > 0
        self.pad_id = tok.pad_id

    def prepare(self, sample: dict[str, Any]) -> dict[str, Any]:
        return sample

    def _plan(self, sample: dict[str, Any]) -> dict[int, int]:
        if not self.local:
            return {}
        rng = np.random.default_rng([sample["seed"], sample["index"], 0x52])
        plan = {}
        for t in range(len(sample["sessions"])):
            chosen, anchor = rng.random() < self.cfg.local_prob, int(rng.integers(self.n))
            if chosen:
                plan[t] = anchor
        return plan

    def _request(self, st: R2State, ci: int) -> Request:
        chain = st.chains[ci]
        t = chain.sessions[chain.pos]
        text = prompt_text(chain.bank, st.sample["sessions"][t])
        ids = self.tok.apply_chat_template([{"role": "user", "content": text}])
        params = SamplingParams(temperature=self.temperature, max_tokens=self.cfg.max_response_tokens,
                                stop_token_ids=(self.tok.eos_id,))
        return Request(ids, params, role=MANAGER, tag=(ci, t))

    def _enter(self, traj: Trajectory, ci: int) -> list[Request]:
        """Requests when chain ci starts its current session (plus the local chains it spawns)."""
        st = traj.state
        chain = st.chains[ci]
        t = chain.sessions[chain.pos]
        out = [self._request(st, ci)]
        if not chain.local and st.plan.get(t) == traj.rollout:
            snap = chain.bank.snapshot()
            for _ in range(self.cfg.local_rollouts):
                st.chains.append(Chain(local=True, sessions=[t], bank=MemoryBank.restore(snap)))
                out.append(self._request(st, len(st.chains) - 1))
        return out

    def start(self, traj: Trajectory, prepared: dict[str, Any]) -> list[Request]:
        s = prepared
        traj.state = R2State(s, self._plan(s), dialogue_words(s),
                             [Chain(local=False, sessions=list(range(len(s["sessions"]))), bank=MemoryBank(seed=0))])
        return self._enter(traj, 0)

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st = traj.state
        ci, t = request.tag
        chain = st.chains[ci]
        facts = st.sample["sessions"][t]
        text = self.tok.decode([i for i in completion.token_ids if i != self.tok.eos_id], skip_unknown=True)
        chain.outputs.append(text)
        ops = parse_ops(text, len(facts))
        if ops is None:
            st.bad_output += 1
        else:
            probe = chain.bank.copy()
            for f, op in zip(facts, ops):
                case = case_of(probe, f)
                right = op == RIGHT[case]
                st.correct += right
                st.case_right[case] += right
                st.case_count[case] += 1
                st.decisions += 1
                st.ops[op] += 1
                apply_ops(probe, [f], [op])
            st.missed_updates += apply_ops(chain.bank, facts, ops)
        chain.banks.append(bank_text(chain.bank))
        if chain.local:
            qpos = credited(st.sample)[t]
            chain.rewards[t] = session_reward(bank_f1(chain.bank, st.sample, qpos), chain.bank.words(),
                                              st.c_words[t], lam=self.cfg.lam, alpha=self.cfg.alpha)
            return []
        chain.pos += 1
        return self._enter(traj, ci) if chain.pos < len(chain.sessions) else []

    def reward(self, traj: Trajectory) -> float:
        st, c = traj.state, self.cfg
        glob, s = st.chains[0], st.sample
        st.answers = [read(glob.bank, q["key"]) for q in s["questions"]]
        for t, qpos in credited(s).items():
            glob.rewards[t] = session_reward(bank_f1(glob.bank, s, qpos), glob.bank.words(), st.c_words[-1],
                                             lam=c.lam, alpha=c.alpha)
        return float(np.mean([glob.rewards[t] for t in glob.sessions]))

    def conversations(self, traj: Trajectory) -> list[Row]:
        st, rows, units = traj.state, [], {}
        for k, (req, comp) in enumerate(traj.turns):
            ci, t = req.tag
            chain = st.chains[ci]
            unit = units.setdefault((ci, t), len(units))
            group = traj.sample * SESSION_STRIDE + t
            rows.append(Row(req.prompt, comp.token_ids, comp.logprobs, sample=traj.index, group=group, turn=k,
                            role=MANAGER, step=k, extra={
                                "local_group": group if chain.local else -1, "unit": unit,
                                "snapshot": traj.index * SESSION_STRIDE + t, "unit_reward": chain.rewards[t]}))
        return rows

    def f1(self, traj: Trajectory) -> float:
        s = traj.state.sample
        return float(np.mean([token_set_f1(a, q["answer"]) for a, q in zip(traj.state.answers, s["questions"])]))

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        glob = st.chains[0]
        return {"sample": traj.sample, "rollout": traj.rollout, "reward": traj.reward, "f1": self.f1(traj),
                "sessions": [[f["text"] for f in s] for s in st.sample["sessions"]], "outputs": glob.outputs,
                "banks": glob.banks, "memory": bank_text(glob.bank), "memory_words": glob.bank.words(),
                "global_rewards": [glob.rewards[t] for t in glob.sessions],
                "local": [{"session": ch.sessions[0], "output": ch.outputs, "reward": ch.rewards[ch.sessions[0]]}
                          for ch in st.chains[1:]],
                "questions": [{"question": q["question"], "gold": q["answer"], "answer": a}
                              for q, a in zip(st.sample["questions"], st.answers)]}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        sts = [t.state for t in trajs]
        dec = max(sum(s.decisions for s in sts), 1)
        return {"f1": float(np.mean([self.f1(t) for t in trajs])) if trajs else 0.0,
                "local_branches": float(sum(len(s.chains) - 1 for s in sts)),
                "bad_output": float(sum(s.bad_output for s in sts)),
                "missed_updates": float(sum(s.missed_updates for s in sts)),
                "correct_op": sum(s.correct for s in sts) / dec,
                **{f"correct_{c}": sum(s.case_right[c] for s in sts) / max(sum(s.case_count[c] for s in sts), 1)
                   for c in CASES},
                **{f"op_{k}": sum(s.ops[k] for s in sts) / dec for k in OPS},
                "memory_words": float(np.mean([s.chains[0].bank.words() for s in sts])) if sts else 0.0}


def evaluate_r2(engine, tok: TinyTokenizer, cfg: R2TaskConfig, samples: list[dict[str, Any]], *,
                sampled: int = 0, seed: int = 12345) -> dict[str, Any]:
    """Held-out, greedy, one rollout per episode, every question on the final bank: mean F1 (per episode, then
    averaged), mean global reward, memory words, op mix, per-case correct-op rates and counted bad outputs.
    With `sampled` > 0 also `f1_sampled` / `correct_op_sampled`: the same over `sampled` temperature-1 rollouts
    per episode (a smooth function of the policy, where greedy F1 jumps when a case's top op flips)."""
    wf = TinyR2Workflow(tok, cfg, group_size=1, temperature=0.0, local=False)
    res = run_heldout(engine, wf, samples, seed=seed)
    keys = ("f1", "correct_op", "bad_output", "missed_updates", "memory_words", "op_add", "op_update", "op_skip",
            *(f"correct_{c}" for c in CASES))
    out = {**{k: float(res.stats[k]) for k in keys}, "reward": float(np.mean(res.rewards)), "traces": res.traces[:3]}
    if sampled:
        wf = TinyR2Workflow(tok, cfg, group_size=sampled, temperature=1.0, local=False)
        st = run_heldout(engine, wf, samples, group_size=sampled, seed=seed).stats
        out.update(f1_sampled=float(st["f1"]), correct_op_sampled=float(st["correct_op"]))
    return out
