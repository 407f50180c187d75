"""The tiny Memory-R2 task on the engine: `TinyR2Workflow` (global rollouts and LoGo's local re-rollouts of single
sessions, driven by `run_workflow`) and `evaluate_r2` (held-out, greedy F1); the task itself -- episodes, op
grammar, bank update, reader, rewards -- is memjax/systems/memory_r2/tiny/task.py's.

Per session ONE call of the policy (role = manager): prompt `memory <records> session <facts> op`, response one op
word per fact, then `<end>`; the ops update the chain's bank (task.apply_ops). A global chain runs every session of
its episode; its session t is scored on its FINAL bank with C_T. Local branch (LoGo): per session, with probability
`local_prob`, an anchor rollout's bank snapshot is restored into `local_rollouts` chains that re-run that session
alone, sampled, each scored on the bank right after it with C_t, banks discarded. Row metadata is the LoCoMo
workflow's (memjax/systems/memory_r2/workflow.py), so `logo_unit_advantages` applies unchanged.
Invariants: the anchor plan is a pure function of (seed, index) of the sample; a response that is not one op word
per fact is a counted no-op for its session (`bad_output`); a session's reward is memory_r2/reward.py's
`session_reward`, the LoCoMo system's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..workflow import MANAGER, SESSION_STRIDE
from ..reward import session_reward
from ....agents.heldout import run_heldout
from ....agents.workflow import Request, Trajectory, Workflow
from ....engine import Completion, SamplingParams
from ....memory import MemoryBank
from ....rewards.locomo import token_set_f1
from ....rl.batch import Conversation as Row
from ....tiny.vocab import TinyTokenizer
from .task import (CASES, OPS, RIGHT, R2TaskConfig, apply_ops, bank_f1, bank_text, case_of, credited,
                   dialogue_words, parse_ops, prompt_text, read)


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
                            role=MANAGER, step=k, response_versions=comp.extra.get("versions"), extra={
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
