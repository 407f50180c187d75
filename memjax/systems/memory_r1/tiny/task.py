"""The tiny Memory-R1 task: a memory manager decides ADD / UPDATE / DELETE / NONE for a new fact, over a small word
vocabulary, scored by a frozen reader's exact match (the single-step manager tuple of Memory-R1's Alg. 1).

Owns: the vocabulary (`R1_WORDS`, 52 words for the tiny model's 64 embedding rows), `R1TaskConfig`, the sample
generator, the op grammar and its translation to Mem0's events (applied by `memjax.memory.apply_mem0`, as on
LoCoMo), the frozen reader, `TinyR1Workflow` (one manager call per trajectory) and `evaluate_r1`.
The task: a bank of 1..`max_bank` facts `K in P .` about distinct people (prompt ids 0..); a new fact is a new
person (`add`), a move (`update i`), a retraction `K gone .` (`delete i`) or a repeat (`none`). Prompt `memory 0 ann
in rome . 1 bob in oslo . fact ann in lima . op`, response one op then `<end>`. The frozen reader is a rule (so the
reward depends only on the manager): the FIRST record about K in bank order, so each classic mistake loses. The
reward asks only about the fact's person; `bank_questions` asks about everyone in the bank (`bank_em`, reported
always; `TinyR1Workflow(reward="bank")` trains on it). The warm start's teacher is right with probability
`teacher_correct`, else makes the case's classic mistake. Studies: docs/memory_r1.md.
Invariants: a pure function of (config, seed, index); the reader and grammar never raise; bad output is a counted no-op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....agents.heldout import run_heldout
from ....agents.workflow import Request, Trajectory, Workflow
from ....engine import Completion, SamplingParams
from ....memory import MemoryBank, OpStats, apply_mem0, mem0_view
from ....tiny.vocab import PEOPLE, PLACES, SPECIALS, TinyTokenizer

OPS_WORDS = ("add", "update", "delete", "none")
R1_WORDS = SPECIALS + ("memory", "fact", "op", "in", ".", "where", "is", "?", "gone", "0", "1", "2") + OPS_WORDS \
    + PEOPLE + PLACES
CASES = ("new", "move", "gone", "same")
MISTAKE = {"new": "none", "move": "add", "gone": "none", "same": "add"}
TRAIN_SEED, HELDOUT_SEED, DEV_SEED = 11, 12, 13


def r1_tokenizer() -> TinyTokenizer:
    return TinyTokenizer(R1_WORDS)


@dataclass(frozen=True)
class R1TaskConfig:
    max_bank: int = 3
    case_probs: tuple[float, ...] = (0.3, 0.4, 0.2, 0.1)    # new, move, gone, same
    teacher_correct: float = 0.4                             # warm start teacher: correct op with this probability

    def __post_init__(self):
        if not 1 <= self.max_bank <= 3:
            raise ValueError(f"R1TaskConfig.max_bank must be in 1..3 (ids 0-2 are words), got {self.max_bank}")
        p = self.case_probs
        if len(p) != len(CASES) or any(x < 0 for x in p) or not math.isclose(sum(p), 1.0, abs_tol=1e-6):
            raise ValueError(f"R1TaskConfig.case_probs: {len(CASES)} non-negative probabilities summing to 1, got {p}")
        if not 0.0 <= self.teacher_correct <= 1.0:
            raise ValueError(f"R1TaskConfig.teacher_correct must be in [0, 1], got {self.teacher_correct}")


def make_r1_sample(cfg: R1TaskConfig, seed: int, index: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, index, 21])
    case = CASES[int(rng.choice(len(CASES), p=np.asarray(cfg.case_probs)))]
    n = int(rng.integers(1, cfg.max_bank + 1))
    people = [str(p) for p in rng.permutation(PEOPLE)[: n + 1]]
    memory = [(p, str(rng.choice(PLACES))) for p in people[:n]]
    if case == "new":
        key, place, op = people[n], str(rng.choice(PLACES)), "add"
    else:
        i = int(rng.integers(n))
        key, old = memory[i]
        place = old if case == "same" else str(rng.choice([x for x in PLACES if x != old]))
        op = {"move": f"update {i}", "gone": f"delete {i}", "same": "none"}[case]
    fact = f"{key} gone ." if case == "gone" else f"{key} in {place} ."
    teacher = op if rng.random() < cfg.teacher_correct else MISTAKE[case]
    return {"memory": memory, "fact": fact, "question": f"where is {key} ?", "key": key, "case": case,
            "answer": "none" if case == "gone" else place, "op": op, "teacher_op": teacher}


def make_r1_split(cfg: R1TaskConfig, seed: int, count: int, start: int = 0) -> list[dict[str, Any]]:
    return [make_r1_sample(cfg, seed, start + i) for i in range(count)]


def prompt_text(sample: dict[str, Any]) -> str:
    mem = " ".join(f"{i} {k} in {p} ." for i, (k, p) in enumerate(sample["memory"]))
    return f"memory {mem} fact {sample['fact']} op"


def parse_op(text: str, fact: str) -> dict | None:
    """The op grammar `add | none | update D | delete D` as Mem0's {"memory": [event]} (None: not in the grammar)."""
    w = text.split()
    if w == ["add"]:
        return {"memory": [{"id": "new", "text": fact, "event": "ADD"}]}
    if w == ["none"]:
        return {"memory": [{"event": "NONE"}]}
    if len(w) == 2 and w[0] in ("update", "delete") and w[1].isdigit():
        return {"memory": [{"id": w[1], "text": fact, "event": w[0].upper()}]}
    return None


def read(bank: MemoryBank, key: str) -> str:
    """The frozen reader: the first record about `key` (see the module docstring)."""
    for r in bank:
        w = r.content.split()
        if w and w[0] == key:
            return "none" if len(w) > 1 and w[1] == "gone" else (w[2] if len(w) > 2 else "none")
    return "none"


def bank_questions(sample: dict[str, Any]) -> list[tuple[str, str]]:
    """(person, gold answer) for every person of the bank and the fact's person, as after the correct op."""
    gold = {k: p for k, p in sample["memory"]}
    gold[sample["key"]] = sample["answer"]
    return list(gold.items())


def bank_accuracy(bank: MemoryBank, sample: dict[str, Any]) -> float:
    """Fraction of `bank_questions(sample)` the frozen reader answers right from `bank`."""
    qs = bank_questions(sample)
    return sum(read(bank, k) == g for k, g in qs) / len(qs)


def bank_of(sample: dict[str, Any]) -> MemoryBank:
    bank = MemoryBank(seed=0)
    for k, p in sample["memory"]:
        bank.add(f"{k} in {p} .", speaker=k)
    return bank


@dataclass
class R1State:
    sample: dict[str, Any]
    bank: MemoryBank
    id_map: list[str]
    output: str = ""
    answer: str = ""
    ops: OpStats = field(default_factory=OpStats)


REWARDS = ("fact", "bank")


class TinyR1Workflow(Workflow):
    """One manager call per trajectory. reward="fact": the reader's exact match on the fact's person (the task's
    reward); "bank": `bank_accuracy` (every person of the bank asked, the variant that punishes overwriting)."""

    def __init__(self, tok: TinyTokenizer, *, temperature: float = 1.0, reward: str = "fact"):
        if reward not in REWARDS:
            raise ValueError(f"TinyR1Workflow: reward one of {REWARDS}, got {reward!r}")
        self.tok, self.temperature, self.reward_kind = tok, temperature, reward
        self.pad_id = tok.pad_id

    def start(self, traj: Trajectory, prepared: dict[str, Any]) -> list[Request]:
        bank = bank_of(prepared)
        traj.state = R1State(prepared, bank, mem0_view(list(bank))[1])
        ids = self.tok.apply_chat_template([{"role": "user", "content": prompt_text(prepared)}])
        params = SamplingParams(temperature=self.temperature, max_tokens=3, stop_token_ids=(self.tok.eos_id,))
        return [Request(ids, params, is_final=True)]

    def react(self, traj: Trajectory, request: Request, completion: Completion) -> list[Request]:
        st: R1State = traj.state
        ids = [i for i in completion.token_ids if i != self.tok.eos_id]
        st.output = self.tok.decode(ids, skip_unknown=True)
        op = parse_op(st.output, st.sample["fact"])
        if op is None:
            st.ops.reject("bad_json", f"not an op: {st.output!r}")
        else:
            apply_mem0(st.bank, op, st.id_map, speaker=st.sample["key"], stats=st.ops)
        st.answer = read(st.bank, st.sample["key"])
        return []

    def reward(self, traj: Trajectory) -> float:
        if self.reward_kind == "bank":
            return bank_accuracy(traj.state.bank, traj.state.sample)
        return float(traj.state.answer == traj.state.sample["answer"])

    def trace(self, traj: Trajectory) -> dict[str, Any]:
        st = traj.state
        return {"sample": traj.sample, "rollout": traj.rollout, "prompt": prompt_text(st.sample), "case": st.sample["case"],
                "output": st.output, "op": st.sample["op"], "answer": st.answer, "gold": st.sample["answer"],
                "reward": traj.reward}

    def stats(self, trajs: Sequence[Trajectory]) -> dict[str, float]:
        return {"invalid_ops": float(sum(t.state.ops.bad_json + t.state.ops.bad_id + t.state.ops.malformed
                                         for t in trajs)),
                "correct_op": float(np.mean([t.state.output == t.state.sample["op"] for t in trajs])),
                "bank_em": float(np.mean([bank_accuracy(t.state.bank, t.state.sample) for t in trajs]))}


def evaluate_r1(engine, tok: TinyTokenizer, samples: list[dict[str, Any]], *, sampled: int = 4,
                seed: int = 12345) -> dict[str, Any]:
    """Held-out exact match: greedy (`em`, per case) and the mean over `sampled` temperature-1 answers (`em_sampled`);
    `em_bank` / `em_bank_sampled`: the same for every question about the bank (`bank_accuracy`)."""
    res = run_heldout(engine, TinyR1Workflow(tok, temperature=0.0), samples, seed=seed)
    r = np.asarray(res.rewards)
    out: dict[str, Any] = {"em": float(r.mean()), "invalid_ops": res.stats["invalid_ops"],
                           "correct_op": res.stats["correct_op"], "em_bank": res.stats["bank_em"],
                           "traces": res.traces[:4]}
    cases = np.asarray([s["case"] for s in samples])
    for c in CASES:
        if (cases == c).any():
            out[f"em_{c}"] = float(r[cases == c].mean())
    if sampled:
        res = run_heldout(engine, TinyR1Workflow(tok, temperature=1.0), samples, group_size=sampled, seed=seed)
        out["em_sampled"] = float(np.mean(res.rewards))
        out["em_bank_sampled"] = res.stats["bank_em"]
    return out
