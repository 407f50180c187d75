"""MemAgent's tiny trained policy on a LongMemEval file in its vocabulary: `python -m memjax.evaluate
configs/memagent/longmemeval_tiny.py` (LongMemEvalConfig.system = "memagent_tiny").

Owns `tiny_document(q)` and `memagent_tiny_predictor`. The tiny task's episode (memjax/systems/memagent/tiny/task.py):
the haystack's facts in haystack order are the document (`K in P .` per turn, sessions and roles dropped: the tiny
documents have neither), read in chunks of `chunk_tokens` (3 facts) with the tiny templates into a memory of two facts,
then `where is K ?` answered as `\\boxed{ P }`, greedy, through the same MemAgent workflow the tiny training runs
(`make_agent`, `memagent_config`). The hypothesis is the boxed content, else the final text (`boxed` says which).
The policy: `policy` ("" the shipped warm start, "random" the control, or a tiny training run's out_dir/hf, e.g. of
`python -m memjax.train configs/tiny.py`). No memory bank, so no evidence-recall columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ....data.longmemeval import LmeQuestion
from ....evaluation.longmemeval import register_longmemeval_system
from ....rewards import last_boxed
from ....tiny.longmemeval import guarded, haystack_facts, load_policy
from ....tiny.model import engine_config
from .agent import make_agent, memagent_config
from .task import WORDS, TaskConfig, TinyTokenizer


def tiny_document(q: LmeQuestion) -> str:
    return " ".join(f.text for ses in haystack_facts(q) for f in ses)


def memagent_tiny_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the tiny policy (cfg.policy) on the tiny engine, return the batch predictor (cfg: a LongMemEvalConfig)."""
    from ....engine import Engine
    from .warmstart import load_warmstart

    model = load_policy(cfg.policy, lambda: load_warmstart(log=lambda m: None)[0])
    tok = TinyTokenizer(WORDS)
    mc = dataclasses.replace(memagent_config(TaskConfig(), temperature=0.0), record_conversations=False)
    agent = make_agent(Engine(model, engine_config()), tok, mc)

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        res = agent.run([{"query": q.question, "context": tiny_document(q), "answers": [q.answer]} for q in qs])
        out = []
        for t in sorted(res.traces, key=lambda t: t["sample"]):
            boxed = last_boxed(t["final"])
            out.append({"answer": t["final"] if boxed is None else boxed.strip(), "boxed": boxed is not None})
        return out

    return guarded(predict, WORDS)


register_longmemeval_system("memagent_tiny", lambda cfg, qs: (memagent_tiny_predictor(cfg, qs), ""))
