"""Fixed-policy managers for the tiny Memory-R1 task: the baselines the RL manager is compared with (Memory-R1's
ADD-only and Mem0-style heuristic managers), as engines, so they run through the SAME workflow, op grammar,
`apply_mem0` bank code, reader and `evaluate_r1` as the trained model.

Owns `POLICIES` (name -> rule from the prompt text to an op string of the task's grammar) and
`FixedManagerEngine`, a stand-in for `memjax.Engine` (submit / step / abort / release / stats / config, as
`run_workflow` drives it) whose completion is the rule's op followed by `<end>`, whatever the sampling settings.
The policies: `add_only` (Memory-R1's ADD-only baseline), `none_only` (the bank never changes), `update_0` (always
UPDATE record 0: scores 1 on the task's reward while it destroys record 0's person) and `update_subject` (a
Mem0-style subject-match rule: `update i` for the record about the fact's person, else `add`; the ceiling of both
measures). What each gets right and the comparison: docs/memory_r1.md, 'Learned operations vs fixed policies'.
Invariants: a policy is a pure function of the prompt text; its output is always in the grammar.
"""

from __future__ import annotations

from collections.abc import Callable

from ....engine import Completion
from ....tiny.vocab import TinyTokenizer


def parse_prompt(text: str) -> tuple[list[str], str]:
    """(the bank's record owners in id order, the fact's person) from a manager prompt (raw or chat-templated)."""
    w = text.split()
    mem, fact = w[w.index("memory") + 1:w.index("fact")], w[w.index("fact") + 1:]
    return [mem[i + 1] for i in range(0, len(mem), 5)], fact[0]


def _update_subject(text: str) -> str:
    owners, key = parse_prompt(text)
    return f"update {owners.index(key)}" if key in owners else "add"


POLICIES: dict[str, Callable[[str], str]] = {
    "add_only": lambda text: "add",
    "none_only": lambda text: "none",
    "update_0": lambda text: "update 0",
    "update_subject": _update_subject,
}


class FixedManagerEngine:
    """Answers every manager request with `policy(prompt text)` + `<end>` (one step finishes all queued)."""

    def __init__(self, tok: TinyTokenizer, policy: str | Callable[[str], str]):
        if isinstance(policy, str) and policy not in POLICIES:
            raise ValueError(f"FixedManagerEngine: policy one of {sorted(POLICIES)}, got {policy!r}")
        self.tok, self.policy = tok, POLICIES[policy] if isinstance(policy, str) else policy
        self.config = type("FixedManagerConfig", (), {"progress": False})()
        self.stats: dict[str, int] = {}
        self._queue: list[tuple[int, list[int]]] = []
        self._next = 0

    def submit(self, prompt, params, *, parent=None, retain=False) -> int:
        if parent is not None or retain:
            raise ValueError("FixedManagerEngine: single-turn requests only")
        self._next += 1
        self._queue.append((self._next, list(prompt)))
        return self._next

    def step(self) -> list[Completion]:
        out = []
        for rid, prompt in self._queue:
            ids = self.tok.encode(self.policy(self.tok.decode(prompt))) + [self.tok.eos_id]
            out.append(Completion(ids, [0.0] * len(ids), "stop", len(prompt), rid))
        self._queue = []
        return out

    def abort(self, rids) -> None:
        self._queue = [q for q in self._queue if q[0] not in set(rids)]

    def release(self, completion) -> None:
        pass
