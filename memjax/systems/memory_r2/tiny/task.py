r"""The tiny Memory-R2 task: a memory bank built over several sessions, per-session credit (LoGo-GRPO) on a tiny word
vocabulary; the same credit code (`logo_unit_advantages`), reward and step-level loss as the LoCoMo system.

Owns: the vocabulary (`R2_WORDS`, 48 words for the tiny model's 64 embedding rows), `R2TaskConfig`, the episode
generator, the op grammar and bank update, the frozen reader, the rewards of an episode's outputs (`replay_reward`)
and the warm start's teacher; the workflow on the engine is tiny/agent.py's.
The episode: `sessions` sessions of `facts_per_session` facts: `K in P .` (a new person), a move (`K to P .` with
`move_rel = "to"`, the default: with "in" the tiny model never learnt to look a subject up in the bank) or chit-chat
`K likes P .`. Per session ONE call, `memory <records> session <facts> op` -> one of `add | update | skip` per fact,
then `<end>`; questions `where is K ?` are credited to the session of K's last location fact and read by a rule
(K's first location record). Reward: `session_reward` (mean F1 minus the compression penalty, in `\b\w+\b` words).
Simplifications against the paper (one call per session, no chunking, `update` by subject), the teacher and why:
docs/memory_r2.md, 'The tiny Memory-R2 task (CPU)'. Invariants: generation is a pure function of (config, seed,
index); the grammar and reader never raise (a bad response: a counted no-op); prompts fit the 48-position window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..reward import session_reward, word_count
from ....memory import MemoryBank
from ....rewards.locomo import token_set_f1
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
