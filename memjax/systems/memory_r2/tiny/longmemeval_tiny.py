"""Memory-R2's tiny trained policy on a LongMemEval file in its vocabulary: `python -m memjax.evaluate
configs/memory_r2/longmemeval_tiny.py` (LongMemEvalConfig.system = "memory_r2_tiny").

Owns `tiny_episode(q, index)` and `memory_r2_tiny_predictor`. The tiny task's episode (memjax/systems/memory_r2/tiny/
task.py): each haystack session is one session of facts (its turns `K rel P .` in order), the policy answers one op
per fact per session (`add` | `update` | `skip`) with the bank in its prompt, the bank persists across sessions, and
the question `where is K ?` is answered by the task's frozen reader on the final bank (the first location record of
K, else `none`), through the same TinyR2Workflow the tiny training runs (greedy, one rollout, no local branch: its
held-out evaluation). The fact wording is the file's: a later `K in P .` about a person already located is a move
worded like a new person (the task's `move_rel = "in"`; the shipped warm start was trained on `K to P .` moves).
The policy: `policy` ("" the shipped warm start, "random" the control, or a tiny training run's out_dir/hf, e.g. of
`python -m memjax.train configs/memory_r2/tiny.py`). The bank's records carry no turn ids, so no recall columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....agents.heldout import run_heldout
from ....data.longmemeval import LmeQuestion
from ....evaluation.longmemeval import register_longmemeval_system
from ....tiny.longmemeval import guarded, haystack_facts, load_policy, question_key
from ....tiny.model import engine_config
from .agent import TinyR2Workflow
from .task import LOCATION_RELS, R2_WORDS, R2TaskConfig, r2_tokenizer


def tiny_episode(q: LmeQuestion, index: int) -> tuple[R2TaskConfig, dict[str, Any]]:
    """The task's config for this haystack's shape and the episode (TinyR2Workflow's sample) of question q."""
    located: dict[str, int] = {}
    sessions = []
    for ses in haystack_facts(q):
        facts = []
        for f in ses:
            k, rel, p = f.words[:3]
            case = "noise" if rel not in LOCATION_RELS else "move" if k in located else "new"
            if rel in LOCATION_RELS:
                located[k] = f.session
            facts.append({"text": f.text, "subject": k, "rel": rel, "place": p, "case": case})
        sessions.append(facts)
    key = question_key(q)
    question = {"question": q.question, "key": key, "answer": q.answer,
                "session": located.get(key, len(sessions) - 1)}
    cfg = R2TaskConfig(sessions=len(sessions), facts_per_session=max(len(s) for s in sessions), local_rollouts=0,
                       move_rel="in")
    return cfg, {"sessions": sessions, "questions": [question], "coins": [[1.0] * len(s) for s in sessions],
                 "seed": 0, "index": index}


def memory_r2_tiny_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the tiny policy (cfg.policy) on the tiny engine, return the batch predictor (cfg: a LongMemEvalConfig)."""
    from ....engine import Engine
    from .warmstart import load_r2_warmstart

    model = load_policy(cfg.policy, lambda: load_r2_warmstart(None, R2TaskConfig(), log=lambda m: None)[0])
    engine, tok = Engine(model, engine_config()), r2_tokenizer()

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        groups: dict[R2TaskConfig, list[tuple[int, dict]]] = {}
        for i, q in enumerate(qs):   # questions of one haystack shape (sessions x facts) run together
            task, episode = tiny_episode(q, i)
            groups.setdefault(task, []).append((i, episode))
        out: list[dict[str, Any]] = [{} for _ in qs]
        for task, items in groups.items():
            res = run_heldout(engine, TinyR2Workflow(tok, task, group_size=1, temperature=0.0, local=False),
                              [e for _, e in items], progress=False)
            for (i, _), t in zip(items, sorted(res.traces, key=lambda t: t["sample"])):
                out[i] = {"answer": t["questions"][0]["answer"]}
        return out

    return guarded(predict, R2_WORDS)


register_longmemeval_system("memory_r2_tiny", lambda cfg, qs: (memory_r2_tiny_predictor(cfg, qs), ""))
