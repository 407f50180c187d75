"""SUMER on LongMemEval for `python -m memjax.evaluate configs/sumer/longmemeval.py` (LongMemEvalConfig.system =
"sumer"): the LoCoMo episode (SumerWorkflow, Qwen2.5 function calling, greedy) over each question's haystack.

Owns: `sumer_lme_predictor` and `ShownTools` (MemoryTools that keep the ids of every record a search showed).
Per question the haystack becomes a LoCoMo conversation (memjax/data/longmemeval_locomo.py: speakers "user" and
"assistant", dates in LoCoMo's form) whose messages are SUMER's memory (one record per message, `conversation_records`),
the user turn names the speakers and the sessions' date range as on LoCoMo, and the agent searches until it submits.
"retrieved" (the evidence-recall view) is the records the agent's executed searches showed -- hits and their context
windows -- in the order first shown: recall@k says whether the agent saw the `has_answer` turns.
Invariant: one episode per question, temperature 0; the workflow's reward judge is the rule judge (the reward is not
reported here; the harness asks the LongMemEval judge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...data.longmemeval import LmeQuestion
from ...data.longmemeval_locomo import as_locomo
from ...evaluation.longmemeval import register_longmemeval_system
from ...memory.retrieval import Retriever, conversation_records
from ...rewards.locomo import RuleBasedJudge
from .system import user_turn
from .tools import MemoryTools
from .workflow import QwenSumerFormat, SumerConfig, SumerSample, SumerWorkflow


class ShownTools(MemoryTools):
    """MemoryTools that record the ids of the records each executed search showed (hits and context), in order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shown: list[str] = []

    def search(self, *args, **kwargs):
        res = super().search(*args, **kwargs)
        if res.kind == "hits":
            self.shown.extend(m.id for w in res.windows for m in w)
        return res


def _embedder(name: str):
    from ...memory import HashedBowEmbedder, WordLlamaEmbedder

    return HashedBowEmbedder() if name == "hashbow" else WordLlamaEmbedder()


def sumer_lme_predictor(cfg, questions: Sequence[LmeQuestion]):
    """Load the policy (cfg.model) on cfg.engine and return the batch predictor (cfg: a LongMemEvalConfig)."""
    from ...engine import Engine

    model, tok = cfg.model.load()
    engine = Engine(model, cfg.engine)
    embedder = _embedder(cfg.embedder)
    ep = SumerConfig(max_turns=cfg.max_turns, max_prompt_tokens=cfg.max_prompt_tokens,
                     max_response_tokens=cfg.max_response_tokens, temperature=0.0)
    workflow = SumerWorkflow(QwenSumerFormat(tok), RuleBasedJudge(), ep, window=engine.config.window)

    def predict(qs: list[LmeQuestion]) -> list[dict[str, Any]]:
        from ...agents.heldout import run_heldout

        samples = []
        for q in qs:
            conv, lq = as_locomo(q, question_date=cfg.question_date)
            tools = ShownTools(Retriever(conversation_records(conv), embedder), ep.tools)
            samples.append(SumerSample(lq.question, q.answer, tools, user=user_turn(conv, lq.question),
                                       qid=q.question_id, category=lq.category, evidence=lq.evidence))
        res = run_heldout(engine, workflow, samples, progress=False)
        return [{"answer": t["answer"], "retrieved": list(dict.fromkeys(s.tools.shown))}
                for t, s in zip(res.traces, samples)]

    return predict


register_longmemeval_system("sumer", lambda cfg, qs: (sumer_lme_predictor(cfg, qs), ""))
