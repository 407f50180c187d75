"""SUMER's tiny trained policy on a LongMemEval file in its vocabulary: `python -m memjax.evaluate
configs/sumer/longmemeval_tiny.py` (LongMemEvalConfig.system = "sumer_tiny").

Owns `tiny_records(q)` and `sumer_tiny_predictor`. The tiny task's episode (memjax/systems/sumer/tiny/task.py): each
haystack turn `K in P .` is one memory record (content `K in P`, the session's 1-based number as its metadata, id
and dia_id the turn's LoCoMo dia_id `D<s>:<t>`), searched with the tiny tools (keyword search, optional session
filter, no neighbour window) through TinySumerFormat and the same SumerWorkflow the tiny training runs (greedy,
`max_turns` tool rounds, at most 4 in the 64-token window); the prompt is the question alone, as in the tiny task.
The hypothesis is the submitted answer (None when the episode ends without one). "retrieved" (evidence recall) is
what the executed searches showed, in order (ShownTools, as SUMER's LongMemEval glue). A haystack of more than 4
sessions is unreadable here (the tiny vocabulary writes session numbers 1-4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....data.longmemeval import LmeQuestion
from ....evaluation.longmemeval import register_longmemeval_system
from ....memory.bank import MemoryRecord
from ....memory.retrieval import Retriever
from ....tiny.longmemeval import guarded, haystack_facts, load_policy
from ..longmemeval_eval import ShownTools
from ..workflow import SumerSample
from .agent import engine_config, workflow
from .task import TOOLS_CFG, WORDS

MAX_SESSIONS = 4


def tiny_records(q: LmeQuestion) -> list[MemoryRecord]:
    return [MemoryRecord(id=f.dia_id, content=" ".join(f.words[:3]), conversation=q.question_id, session=f.session + 1,
                         dia_ids=(f.dia_id,)) for ses in haystack_facts(q) for f in ses]


def sumer_tiny_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the tiny policy (cfg.policy) on the tiny engine, return the batch predictor (cfg: a LongMemEvalConfig)."""
    from ....engine import Engine
    from .warmstart import load_warmstart

    model = load_policy(cfg.policy, lambda: load_warmstart(log=lambda m: None)[0])
    engine = Engine(model, engine_config())
    max_turns = min(cfg.max_turns, 4)
    evidence = {q.question_id: tuple(f"D{s + 1}:{t + 1}" for s, t in q.answer_turns()) for q in questions}

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        from ....agents.heldout import run_heldout

        if not qs:
            return []
        samples = [SumerSample(q.question, q.answer, ShownTools(Retriever(tiny_records(q)), TOOLS_CFG),
                               qid=q.question_id, category=1, evidence=evidence.get(q.question_id, ()))
                   for q in qs]
        res = run_heldout(engine, workflow(0.0, max_turns), samples, progress=False)
        traces = sorted(res.traces, key=lambda t: t["sample"])
        return [{"answer": t["answer"], "retrieved": list(dict.fromkeys(s.tools.shown))}
                for t, s in zip(traces, samples)]

    def readable_predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        many = [q for q in qs if len(q.sessions) > MAX_SESSIONS]
        if not many:
            return predict(qs)
        got = iter(predict([q for q in qs if len(q.sessions) <= MAX_SESSIONS]))
        return [{"answer": None, "unreadable": f"{len(q.sessions)} sessions: the tiny vocabulary numbers 1-4"}
                if len(q.sessions) > MAX_SESSIONS else next(got) for q in qs]

    return guarded(readable_predict, WORDS)


register_longmemeval_system("sumer_tiny", lambda cfg, qs: (sumer_tiny_predictor(cfg, qs), ""))
